package e2e

// Self-tests of the harness with plain busybox `/bin/sh` as PID 1 (no
// warmpod). They pin down the runc behaviour the warmpod tests rely on.

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func startBusybox(t *testing.T) *Container {
	t.Helper()
	return Start(t, []string{"/bin/sh"}, Opts{NoWarmpod: true, Env: []string{"HARNESS=1"}})
}

func TestHarnessStdinAndExitCode(t *testing.T) {
	c := startBusybox(t)
	c.WriteLine(t, "echo hello-$((6*7))")
	c.WaitOutput(t, "hello-42", 20*time.Second)
	c.WriteLine(t, "echo env=$HARNESS path=$PATH")
	c.WaitOutput(t, "env=1 path=/usr/local/bin:/bin", 20*time.Second)
	c.WriteLine(t, "exit 3")
	code, err := c.Wait(20 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3, code, "runc run must return PID 1's exit status")
}

func TestHarnessStdinEOFEndsShell(t *testing.T) {
	c := startBusybox(t)
	require.NoError(t, c.Stdin.Close())
	code, err := c.Wait(20 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
}

func TestHarnessExec(t *testing.T) {
	c := startBusybox(t)
	c.WriteLine(t, "echo up")
	c.WaitOutput(t, "up", 20*time.Second)

	out, errOut, code := c.Exec(t, "", "sh", "-c", "echo out; echo err >&2; exit 5")
	assert.Equal(t, "out\n", out)
	assert.Equal(t, "err\n", errOut)
	assert.Equal(t, 5, code)

	out, _, code = c.Exec(t, "some input\n", "cat")
	assert.Equal(t, "some input\n", out)
	assert.Equal(t, 0, code)

	_, _, code = c.Exec(t, "", "sh", "-c", "kill -KILL $$")
	assert.Equal(t, 137, code, "runc exec returns 128+N for a signaled process")

	r := c.ExecWith(t, ExecOpts{Env: []string{"FOO=bar baz"}, User: "1000:1000"}, "sh", "-c", `echo "$FOO|$(id -u)|$PATH"`)
	require.NoError(t, r.Err)
	assert.Equal(t, "bar baz|1000|/usr/local/bin:/bin\n", r.Stdout, r.String())

	// runc exec (no tty, foreground) copies stdio through its own pipes and
	// returns only at EOF: a background child that inherits stdout keeps it
	// blocked. So background children must redirect their stdio.
	r = c.ExecWith(t, ExecOpts{Timeout: 20 * time.Second}, "sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo $!")
	require.NoError(t, r.Err, r.String())
	assert.Equal(t, 0, r.ExitCode)
	r = c.ExecWith(t, ExecOpts{Timeout: 20 * time.Second}, "sh", "-c", "sleep 1 & echo $!")
	require.NoError(t, r.Err, "runc exec returns once the background child closed stdout: %s", r)
	assert.Equal(t, 0, r.ExitCode)

	r = c.ExecWith(t, ExecOpts{Timeout: time.Second}, "sleep", "10")
	assert.Error(t, r.Err, "timeout must be reported")

	out, _, _ = c.Exec(t, "", "sh", "-c", "stat -c %a /tmp; grep ' /run ' /proc/mounts")
	assert.Contains(t, out, "1777")
	assert.Contains(t, out, "tmpfs /run tmpfs")

	ps := c.PS(t)
	require.NotEmpty(t, ps)
	assert.Equal(t, 1, ps[0].PID)
	assert.Equal(t, "/bin/sh", ps[0].Args)
	found := false
	for _, p := range ps {
		if strings.Contains(p.Args, "sleep 1000") {
			found = true
		}
	}
	assert.True(t, found, "ps should show the background sleep:\n%s", formatPS(ps))
}

func TestHarnessHostNetwork(t *testing.T) {
	port := FreePort(t)
	c := startBusybox(t)
	// busybox httpd on the host network namespace, bound to 127.0.0.1
	c.WriteLine(t, "mkdir -p /www && echo hi > /www/index.html && httpd -f -p 127.0.0.1:"+itoa(port)+" -h /www &")
	Eventually(t, 20*time.Second, 100*time.Millisecond, "httpd reachable from host", func() (bool, string) {
		code, err := HTTPGet("http://127.0.0.1:" + itoa(port) + "/index.html")
		return code == 200, "code=" + itoa(code) + " err=" + errString(err)
	})
}

func TestHarnessSignalExitCodes(t *testing.T) {
	t.Run("KILL", func(t *testing.T) {
		c := startBusybox(t)
		c.WriteLine(t, "echo up")
		c.WaitOutput(t, "up", 20*time.Second)
		c.Kill(t, "KILL")
		code, err := c.Wait(20 * time.Second)
		require.NoError(t, err)
		assert.Equal(t, 137, code, "runc run returns 128+N when PID 1 is killed by signal N")
	})
	t.Run("TERM-trapped-idle-shell-needs-input", func(t *testing.T) {
		// busybox ash blocked in read(2) on a pipe restarts the read after
		// EINTR: a trap runs only once the next input line arrives (and on
		// EOF the shell exits 0 without running it).
		c := startBusybox(t)
		c.WriteLine(t, "trap 'echo trapped-term; exit 0' TERM")
		c.WriteLine(t, "echo armed")
		c.WaitOutput(t, "armed", 20*time.Second)
		c.Kill(t, "TERM")
		c.WriteLine(t, "echo nudge")
		c.WaitOutput(t, "trapped-term", 20*time.Second)
		code, err := c.Wait(20 * time.Second)
		require.NoError(t, err)
		assert.Equal(t, 0, code)
		assert.NotContains(t, c.Stdout(), "nudge")
	})
	t.Run("TERM-trapped-foreground-child", func(t *testing.T) {
		// while ash waits for a foreground child the trap runs as soon as
		// the child dies (warmpod signals the whole process group).
		c := startBusybox(t)
		c.WriteLine(t, "trap 'echo trapped-term; exit 0' TERM")
		c.WriteLine(t, "echo armed; sleep 1000; echo not-reached")
		c.WaitOutput(t, "armed", 20*time.Second)
		waitProc(t, c, "sleep 1000")
		_, _, code := c.Exec(t, "", "sh", "-c", "kill -TERM 1 $(pidof sleep)")
		require.Equal(t, 0, code)
		c.WaitOutput(t, "trapped-term", 20*time.Second)
		code, err := c.Wait(20 * time.Second)
		require.NoError(t, err)
		assert.Equal(t, 0, code)
	})
	t.Run("TERM-no-handler-is-dropped-for-pid1", func(t *testing.T) {
		c := startBusybox(t)
		c.WriteLine(t, "echo up")
		c.WaitOutput(t, "up", 20*time.Second)
		c.Kill(t, "TERM")
		_, err := c.Wait(2 * time.Second)
		assert.Error(t, err, "PID 1 without a TERM handler ignores TERM (kernel rule)")
		assert.Equal(t, "running", c.State(t))
	})
}

// TestHarnessDetectsZombies shows that orphans of `runc exec` are reparented
// to the container's PID 1 and that a PID 1 that does not reap (busybox sh
// idling on stdin) leaves them as Z, which PS reports.
func TestHarnessDetectsZombies(t *testing.T) {
	c := startBusybox(t)
	_, _, code := c.Exec(t, "", "sh", "-c", "for i in 1 2 3; do sleep 0.1 >/dev/null 2>&1 & done; exit 0")
	require.Equal(t, 0, code)
	Eventually(t, 20*time.Second, 200*time.Millisecond, "three zombies under busybox sh", func() (bool, string) {
		ps := c.PS(t)
		n := 0
		for _, p := range ps {
			if p.Zombie() {
				n++
			}
		}
		return n == 3, formatPS(ps)
	})
}
