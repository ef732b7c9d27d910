package shellproxy

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// TestMain makes the test binary a child subreaper, so orphans of the
// shells it starts come back to it and Reap sees them, as PID 1 would.
func TestMain(m *testing.M) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m)
}

// reapLoop calls Reap on every SIGCHLD (and every 50 ms) until stop.
func reapLoop(t *testing.T, r *Reaper) (stop func()) {
	t.Helper()
	sigs := make(chan os.Signal, 16)
	notify(sigs)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sigs:
			case <-tick.C:
			case <-done:
				r.Reap()
				return
			}
			r.Reap()
		}
	}()
	return func() { close(done); wg.Wait(); stopNotify(sigs) }
}

func shAttr() *syscall.ProcAttr {
	devnull, _ := os.Open(os.DevNull)
	return &syscall.ProcAttr{Files: []uintptr{devnull.Fd(), os.Stderr.Fd(), os.Stderr.Fd()}, Sys: &syscall.SysProcAttr{Setpgid: true}}
}

// The classic Go PID-1 race: a wait4(-1) loop running while children exit
// must still hand every child's own status to the code that started it.
func TestReaperNeverStealsAWaitersStatus(t *testing.T) {
	r := NewReaper()
	stop := reapLoop(t, r)
	defer stop()

	const n = 300
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each child leaves an orphan behind and exits 3 at once.
			// fork(2) may fail with EAGAIN for a moment when the machine
			// is short of processes or memory (CI runs other test
			// packages beside this one): that is not what this test is
			// about, so it retries; any other error fails it, named.
			var ch <-chan Exit
			var err error
			for try := 0; try < 50; try++ {
				if _, ch, err = r.Start("/bin/sh", []string{"sh", "-c", "sleep 0.01 & exit 3"}, shAttr()); !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.ENOMEM) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Errorf("start: %v", err)
				codes <- -1
				return
			}
			codes <- (<-ch).Code()
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		require.Equal(t, 3, c)
	}
	require.Eventually(t, func() bool { return r.Orphans() >= n }, 10*time.Second, 20*time.Millisecond,
		"orphans reaped: %d", r.Orphans())
}

func TestExitCode(t *testing.T) {
	r := NewReaper()
	stop := reapLoop(t, r)
	defer stop()
	tests := []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"exit 255", 255},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
	}
	for _, tt := range tests {
		_, ch, err := r.Start("/bin/sh", []string{"sh", "-c", tt.script}, shAttr())
		require.NoError(t, err)
		require.Equal(t, tt.want, (<-ch).Code(), tt.script)
	}
}

func TestExecErrorCode(t *testing.T) {
	r := NewReaper()
	_, _, err := r.Start("/no/such/binary", []string{"x"}, shAttr())
	require.Error(t, err)
	require.Equal(t, 127, ExecErrorCode(err))
	_, _, err = r.Start("/etc/hostname", []string{"x"}, shAttr())
	require.Error(t, err)
	require.Equal(t, 126, ExecErrorCode(err))
}

// A signal the caller left ignored — even one the Go runtime reserves and
// never takes over, like 32 — is default again in the child.
func TestChildDoesNotInheritIgnoredSignals(t *testing.T) {
	for _, sig := range []int{32, int(syscall.SIGXFSZ)} {
		act := kernelSigaction{handler: sigIgn}
		_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
		require.Zero(t, e)
	}
	h, err := sigHandler(32)
	require.NoError(t, err)
	require.Equal(t, uintptr(sigIgn), h, "precondition: 32 ignored")
	CatchIgnoredSignals()
	r := NewReaper()
	stop := reapLoop(t, r)
	defer stop()
	out, err := os.CreateTemp(t.TempDir(), "status")
	require.NoError(t, err)
	attr := shAttr()
	attr.Files[1] = out.Fd()
	_, ch, err := r.Start("/bin/sh", []string{"sh", "-c", "grep SigIgn /proc/self/status"}, attr)
	require.NoError(t, err)
	require.Equal(t, 0, (<-ch).Code())
	b, err := os.ReadFile(out.Name())
	require.NoError(t, err)
	require.Equal(t, "SigIgn:\t0000000000000000\n", string(b))
}
