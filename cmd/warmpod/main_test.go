package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// childEnv holds, newline-separated, the PID 1 arguments of a child
// started by TestSIGTERMAfterServeReturns.
const childEnv = "WARMPOD_TEST_PID1_ARGS"

// TestMain doubles as the child's entry point of
// TestSIGTERMAfterServeReturns (PID 1's code on the main goroutine,
// locked to the main thread by init as in the real binary) and, through
// testscript.Main, as the warmpod command of TestScript's scripts.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		os.Exit(pid1ThenSIGTERM(strings.Split(args, "\n")))
	}
	testscript.Main(m, map[string]func(){"warmpod": main})
}

// pid1ThenSIGTERM runs PID 1 until it returns, then sends itself SIGTERM,
// as the kubelet does when PID 1 has just deleted its own pod, and gives
// the signal time to land before it exits with PID 1's code.
func pid1ThenSIGTERM(args []string) int {
	code := run(args)
	// Our own PID (getpid cannot fail); the guard keeps a PID 1 child,
	// which this never is, from signalling itself.
	if pid := os.Getpid(); pid > 1 {
		_ = unix.Kill(pid, unix.SIGTERM)
	}
	time.Sleep(300 * time.Millisecond)
	return code
}

// A SIGTERM that arrives after PID 1's loop has returned, before the
// process exits, must not change its exit status. The kubelet sends one as
// soon as PID 1 has deleted its own pod; with os/signal's subscription
// stopped, the Go runtime "dies from" SIGTERM, which the kernel does not
// deliver to a PID 1 that has no handler, and the runtime then exits 2.
// Here the child is not PID 1, so the same mistake kills it by SIGTERM.
func TestSIGTERMAfterServeReturns(t *testing.T) {
	dir := t.TempDir()
	args := []string{
		"--exit-with-command", "--stdio", "pipe", "--probe-addr", "", "--self-delete", "never",
		"--control-socket", filepath.Join(dir, "control.sock"),
		"--jobs-dir", filepath.Join(dir, "jobs"),
		"--termination-log", filepath.Join(dir, "termination-log"),
		"--log-level", "debug",
		"--", "/bin/true",
	}
	out, err := pid1Child(args).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		require.Failf(t, "PID 1 did not exit 0", "%v; output:\n%s", ee.ProcessState, out)
	}
	require.NoError(t, err, "%s", out)
}

// pid1Child is this test binary run as PID 1 with args (TestMain's child
// mode), not yet started. Without the caller's WARMPOD_* (flags'
// environment twins) it runs with exactly these flags.
func pid1Child(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{childEnv + "=" + strings.Join(args, "\n")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WARMPOD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}
