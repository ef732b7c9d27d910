package shellproxy

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func notify(c chan os.Signal)     { signal.Notify(c, unix.SIGCHLD) }
func stopNotify(c chan os.Signal) { signal.Stop(c) }

// harness runs a Proxy whose stdin is a pipe the test writes and whose
// stdout is a file the test reads.
type harness struct {
	t      *testing.T
	p      *Proxy
	in     *os.File // the test writes the container's stdin here
	out    *os.File
	stop   func()
	closed sync.Once
}

func newHarness(t *testing.T, mode Mode, respawn bool, command ...string) *harness {
	t.Helper()
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	require.NoError(t, err)
	r := NewReaper()
	p, err := New(Config{
		Command: command, Mode: mode, Stdin: stdinR, Stdout: out, Stderr: out,
		Respawn: respawn, Reaper: r, SwapTimeout: time.Second,
	})
	require.NoError(t, err)
	h := &harness{t: t, p: p, in: stdinW, out: out, stop: reapLoop(t, r)}
	t.Cleanup(func() {
		h.closeStdin()
		p.Stop(time.Second)
		p.Close()
		h.stop()
		_ = stdinR.Close()
	})
	return h
}

func (h *harness) closeStdin() { h.closed.Do(func() { _ = h.in.Close() }) }

func (h *harness) output() string {
	b, err := os.ReadFile(h.out.Name())
	require.NoError(h.t, err)
	return string(b)
}

func (h *harness) waitOutput(substr string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return strings.Contains(h.output(), substr) }, 10*time.Second, 10*time.Millisecond,
		"waiting for %q in output %q", substr, h.output())
}

func TestPipeModeRunsStdinLines(t *testing.T) {
	h := newHarness(t, ModePipe, true, "/bin/sh")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin", "WHO=idle"}))
	_, err := h.in.Write([]byte("echo \"hello $WHO $((6*7))\"\n"))
	require.NoError(t, err)
	h.waitOutput("hello idle 42")
	require.False(t, h.p.LastInput().IsZero())
	require.NotZero(t, h.p.pump.spliced.Load(), "stdin and the shell's stdin are pipes: spliced")
}

// Every line written to stdin runs exactly once, in one shell or the next,
// however often the shell is replaced while input flows.
func TestReplaceLosesNoInput(t *testing.T) {
	h := newHarness(t, ModePipe, true, "/bin/sh")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin", "GEN=0"}))
	const lines = 400
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < lines; i++ {
			fmt.Fprintf(h.in, "echo line-%d-gen-$GEN\n", i)
			if i%40 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		fmt.Fprintf(h.in, "echo done-writing\n")
	}()
	for gen := 1; gen <= 8; gen++ {
		time.Sleep(15 * time.Millisecond)
		require.NoError(t, h.p.Replace([]string{"PATH=/usr/bin:/bin", fmt.Sprintf("GEN=%d", gen)}, time.Second))
	}
	wg.Wait()
	h.waitOutput("done-writing")
	out := h.output()
	for i := 0; i < lines; i++ {
		require.Equal(t, 1, strings.Count(out, fmt.Sprintf("line-%d-gen-", i)), "line %d in %q", i, out)
	}
}

// A shell that exits by itself is replaced by a fresh one.
func TestRespawnAfterExit(t *testing.T) {
	h := newHarness(t, ModePipe, true, "/bin/sh")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin"}))
	first := h.p.ShellPID()
	_, err := h.in.Write([]byte("echo before; exit 3\n"))
	require.NoError(t, err)
	h.waitOutput("before")
	require.Eventually(t, func() bool { pid := h.p.ShellPID(); return pid != 0 && pid != first }, 10*time.Second, 10*time.Millisecond)
	_, err = h.in.Write([]byte("echo after-$((1+1))\n"))
	require.NoError(t, err)
	h.waitOutput("after-2")
}

// A retired shell that exits is not replaced (the signal thread retires
// it before it forwards SIGTERM).
func TestRetiredShellIsNotRespawned(t *testing.T) {
	h := newHarness(t, ModePipe, true, "/bin/sh")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin"}))
	first := h.p.ShellPID()
	require.Greater(t, first, 1)
	h.p.Retire()
	_, err := h.in.Write([]byte("echo retiring; exit 3\n"))
	require.NoError(t, err)
	h.waitOutput("retiring")
	// A respawn would come within 100 ms of the exit (none at all for a
	// shell that lived a second or more, 100 ms for a younger one).
	time.Sleep(time.Second)
	pid := h.p.ShellPID()
	require.True(t, pid == 0 || pid == first, "a new shell %d was started after the retired one (%d) exited", pid, first)
}

// Input a shell never read (it was busy in a command that does not read
// stdin) moves to the next shell when it is replaced.
func TestReplaceMovesUnreadInputToTheNextShell(t *testing.T) {
	h := newHarness(t, ModePipe, true, "/bin/sh")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin", "GEN=old"}))
	_, err := h.in.Write([]byte("echo busy; sleep 1000 </dev/null\n"))
	require.NoError(t, err)
	h.waitOutput("busy")
	_, err = h.in.Write([]byte("echo queued-for-$GEN\n"))
	require.NoError(t, err)
	require.NoError(t, h.p.Replace([]string{"PATH=/usr/bin:/bin", "GEN=new"}, time.Second))
	h.waitOutput("queued-for-new")
	require.NotContains(t, h.output(), "queued-for-old")
}

func TestInheritModeGivesTheShellFdsDirectly(t *testing.T) {
	h := newHarness(t, ModeInherit, true, "/bin/sh")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin"}))
	_, err := h.in.Write([]byte("readlink /proc/$$/fd/0 > /dev/null && echo inherit-ok\n"))
	require.NoError(t, err)
	h.waitOutput("inherit-ok")
	require.True(t, h.p.LastInput().IsZero(), "inherit mode cannot see input")
}

func TestPlainInitPassesEOFAndExitCode(t *testing.T) {
	h := newHarness(t, ModePipe, false, "/bin/sh", "-c", "cat; exit 9")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin"}))
	_, err := h.in.Write([]byte("abc\n"))
	require.NoError(t, err)
	h.closeStdin()
	select {
	case ex := <-h.p.Exited():
		require.Equal(t, 9, ex.Code())
	case <-time.After(10 * time.Second):
		t.Fatal("command did not see EOF")
	}
	require.Equal(t, "abc\n", h.output())
}

func TestSignalReachesTheShellsProcessGroup(t *testing.T) {
	h := newHarness(t, ModePipe, true, "/bin/sh")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin"}))
	_, err := h.in.Write([]byte("trap 'echo got-usr1' USR1; echo armed\n"))
	require.NoError(t, err)
	h.waitOutput("armed")
	require.NoError(t, h.p.Signal(unix.SIGUSR1))
	// The trap runs when the shell next reads a command.
	_, err = h.in.Write([]byte("echo next\n"))
	require.NoError(t, err)
	h.waitOutput("got-usr1")
}

func TestStopEscalatesToKill(t *testing.T) {
	h := newHarness(t, ModePipe, true, "/bin/sh")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin"}))
	_, err := h.in.Write([]byte("trap '' TERM HUP; echo ignoring; exec sleep 1000\n"))
	require.NoError(t, err)
	h.waitOutput("ignoring")
	pid := h.p.ShellPID()
	h.p.Stop(200 * time.Millisecond)
	require.ErrorIs(t, unix.Kill(pid, 0), unix.ESRCH)
}

func TestPTYModeGivesAControllingTerminal(t *testing.T) {
	h := newHarness(t, ModePTY, true, "/bin/sh")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin"}))
	// $((...)) keeps the terminal's echo of the input from matching.
	_, err := h.in.Write([]byte("[ -t 0 ] && echo has-tty-$((40+2)) $(tty)\n"))
	require.NoError(t, err)
	h.waitOutput("has-tty-42 /dev/pts/")
	require.Zero(t, h.p.pump.spliced.Load(), "a pty master is not a pipe: copied")
}

func TestParseMode(t *testing.T) {
	for _, m := range []string{"auto", "pipe", "inherit", "pty"} {
		got, err := ParseMode(m)
		require.NoError(t, err)
		require.Equal(t, Mode(m), got)
	}
	_, err := ParseMode("tty")
	require.ErrorContains(t, err, "want auto, pipe, inherit or pty")
}

func TestLookPath(t *testing.T) {
	got, err := LookPath("sh", []string{"PATH=/nonexistent:/bin"})
	require.NoError(t, err)
	require.Equal(t, "/bin/sh", got)
	_, err = LookPath("no-such-command-xyz", []string{"PATH=/bin"})
	require.Equal(t, 127, ExecErrorCode(err))
	require.True(t, bytes.HasPrefix([]byte("/x"), []byte("/")))
}

func countFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// Replacing the shell many times leaks neither goroutines nor descriptors
// (a PID 1 lives for days and replaces its shell at every job start and
// end).
func TestNoLeakAcrossShellReplacements(t *testing.T) {
	n := 10000 // the figure; ~7 ms each
	if testing.Short() {
		n = 500
	}
	for _, mode := range []Mode{ModePipe, ModePTY} {
		t.Run(string(mode), func(t *testing.T) {
			h := newHarness(t, mode, true, "/bin/sh")
			require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin"}))
			warm := func() {
				for i := 0; i < 20; i++ {
					require.NoError(t, h.p.Replace([]string{"PATH=/usr/bin:/bin"}, time.Second))
				}
			}
			warm()
			time.Sleep(100 * time.Millisecond)
			fds0, gr0 := countFds(t), runtime.NumGoroutine()
			count := n
			if mode == ModePTY {
				count = n / 10 // a pty shell takes ~10x longer to start
			}
			for i := 0; i < count; i++ {
				require.NoError(t, h.p.Replace([]string{"PATH=/usr/bin:/bin"}, time.Second))
			}
			// Polled here, not in require.Eventually: its own goroutine
			// would be counted.
			fds, gr := countFds(t), runtime.NumGoroutine()
			for deadline := time.Now().Add(10 * time.Second); (fds > fds0 || gr > gr0) && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				fds, gr = countFds(t), runtime.NumGoroutine()
			}
			require.LessOrEqual(t, fds, fds0, "descriptors after %d replacements", count)
			require.LessOrEqual(t, gr, gr0, "goroutines after %d replacements", count)
			_, err := h.in.Write([]byte("echo still-$((2*21))\n"))
			require.NoError(t, err)
			h.waitOutput("still-42")
		})
	}
}

// A pty cannot be half-closed: end of stdin is typed as ^D, so a command
// that has not read its input yet is not hung up.
func TestPTYPlainInitStdinEOFIsNotAHangup(t *testing.T) {
	h := newHarness(t, ModePTY, false, "/bin/sh", "-c", "sleep 0.3; echo hi-$((1+1)); cat; echo cat-done")
	require.NoError(t, h.p.Start([]string{"PATH=/usr/bin:/bin"}))
	_, err := h.in.Write([]byte("partial"))
	require.NoError(t, err)
	h.closeStdin()
	select {
	case ex := <-h.p.Exited():
		require.Equal(t, 0, ex.Code(), h.output())
	case <-time.After(10 * time.Second):
		t.Fatal("command did not finish")
	}
	require.Contains(t, h.output(), "hi-2")
	require.Contains(t, h.output(), "cat-done")
}

// StartError keeps why a shell could not start, for the status document,
// until one does (no respawn here: nothing else starts a shell while the
// test changes the command).
func TestStartError(t *testing.T) {
	h := newHarness(t, ModePipe, false, "no-such-command-xyz")
	require.Error(t, h.p.Start([]string{"PATH=/bin"}))
	require.ErrorContains(t, h.p.StartError(), "no-such-command-xyz")
	require.Zero(t, h.p.ShellPID())
	h.p.cfg.Command = []string{"/bin/sh"}
	require.NoError(t, h.p.Replace([]string{"PATH=/bin"}, time.Second))
	require.NoError(t, h.p.StartError())
}
