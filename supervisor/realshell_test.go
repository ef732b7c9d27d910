package supervisor

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/shellproxy"
)

// A SIGTERM while a worker swaps the shell must not stop the loop: the
// swap waits for the old shell to be reaped, and only the loop reaps. Here
// the idle command ignores end of input (any non-shell command, or a shell
// busy in a foreground command), so the job start's swap takes its whole
// SwapTimeout, and the SIGTERM comes in the middle of it. Real Proxy and
// Reaper (real child processes of the test), fake process table: a loop
// that froze the shell itself during the swap would block in Freeze for
// good.
func TestSIGTERMDuringAShellSwap(t *testing.T) {
	w := newWorld()
	reaper := shellproxy.NewReaper()
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	defer stdinW.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devnull.Close()
	proxy, err := shellproxy.New(shellproxy.Config{
		Command: []string{"/bin/sh", "-c", "exec sleep 60"},
		Mode:    shellproxy.ModePipe,
		Stdin:   stdinR, Stdout: devnull, Stderr: devnull,
		Respawn:     true,
		SwapTimeout: 2 * time.Second,
		Reaper:      reaper,
		Log:         initlog.Discard(),
	})
	require.NoError(t, err)
	dir := t.TempDir()
	cfg := Config{Grace: 500 * time.Millisecond, JobsDir: dir + "/jobs", LogsDir: dir + "/logs",
		BaseEnv: []string{"PATH=/usr/bin:/bin"}, TokenEnv: "CI_JOB_TOKEN", CgroupRoot: dir}
	fx := w.effects()
	fx.Shell, fx.Children = proxy, reaper
	s := New(cfg, fx, nil)
	sigs := make(chan os.Signal, 8)
	code := make(chan int, 1)
	go func() { code <- s.Run(context.Background(), sigs) }()
	require.Eventually(t, func() bool { return proxy.ShellPID() > 1 }, 10*time.Second, 10*time.Millisecond)
	started := make(chan error, 1)
	go func() { _, err := s.StartJob(spec("a")); started <- err }()
	time.Sleep(700 * time.Millisecond) // inside the swap's SwapTimeout
	sigs <- unix.SIGTERM
	select {
	case c := <-code:
		assert.Equal(t, 143, c)
	case <-time.After(15 * time.Second):
		t.Fatalf("PID 1 did not exit after SIGTERM during a shell swap; liveness: %v", s.Live())
	}
	<-started
}
