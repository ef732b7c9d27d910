package e2e

// End-to-end tests of warmpod as PID 1 of a runc container, written against
// the CLI contract (see harness_test.go for the container plumbing).

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	controlSocket = "/run/warmpod/control.sock"
	waitLong      = 20 * time.Second

	// Exit codes of the job subcommands (sysexits).
	exitDataErr     = 65 // EX_DATAERR: bad job spec
	exitUnavailable = 69 // EX_UNAVAILABLE: no active job
	exitTempFail    = 75 // EX_TEMPFAIL: busy with another job
)

// Warmpod is a container whose PID 1 is warmpod.
type Warmpod struct {
	*Container
	ProbeAddr string // 127.0.0.1:PORT
}

type wpOpts struct {
	IdleTimeout string   // --idle-timeout, default "0"
	Flags       []string // extra PID-1 flags (before "--")
	Env         []string // extra container env
	Cmd         []string // command after "--", default /bin/sh
	NoWait      bool     // don't wait for the control socket
	Socket      string   // control socket to wait for, default /run/warmpod/control.sock
	Container   Opts     // container options (Env is taken from Env above)
}

func startWarmpod(t *testing.T, o wpOpts) *Warmpod {
	t.Helper()
	requireWarmpod(t)
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	if o.IdleTimeout == "" {
		o.IdleTimeout = "0"
	}
	if o.Cmd == nil {
		o.Cmd = []string{"/bin/sh"}
	}
	args := []string{warmpodInRootfs,
		"--probe-addr", addr,
		"--idle-timeout", o.IdleTimeout,
		"--stdio", "pipe",
		"--log-level", "debug",
		"--max-jobs", "0", // tests reuse one container for several jobs; a test's Flags may override
	}
	args = append(args, o.Flags...)
	args = append(args, "--")
	args = append(args, o.Cmd...)
	copts := o.Container
	copts.Env = o.Env
	w := &Warmpod{Container: Start(t, args, copts), ProbeAddr: addr}
	if o.Socket == "" {
		o.Socket = controlSocket
	}
	if !o.NoWait {
		Eventually(t, waitLong, 100*time.Millisecond, "warmpod control socket "+o.Socket+" exists", func() (bool, string) {
			if w.Exited() {
				code, _ := w.Wait(0)
				t.Fatalf("warmpod exited during startup with code %d\nstderr:\n%s", code, indent(w.Stderr()))
			}
			r := w.ExecWith(t, ExecOpts{}, "test", "-S", o.Socket)
			return r.ExitCode == 0, r.String()
		})
	}
	return w
}

// WP runs `warmpod args...` inside the container via runc exec.
func (w *Warmpod) WP(t testing.TB, stdin string, args ...string) ExecResult {
	t.Helper()
	r := w.ExecWith(t, ExecOpts{Stdin: stdin, Env: []string{"WARMPOD_PROBE_ADDR=" + w.ProbeAddr}},
		append([]string{warmpodInRootfs}, args...)...)
	require.NoError(t, r.Err, "warmpod %q: %s", args, r)
	return r
}

// JobStart feeds spec (one JSON line) to `warmpod job start`.
func (w *Warmpod) JobStart(t testing.TB, spec string) ExecResult {
	t.Helper()
	return w.WP(t, spec, "job", "start")
}

// JobRun runs `warmpod job run -- args...`.
func (w *Warmpod) JobRun(t testing.TB, args ...string) ExecResult {
	t.Helper()
	return w.WP(t, "", append([]string{"job", "run", "--"}, args...)...)
}

// Status runs `warmpod status` and decodes its JSON.
func (w *Warmpod) Status(t testing.TB) map[string]any {
	t.Helper()
	r := w.WP(t, "", "status")
	require.Equal(t, 0, r.ExitCode, "warmpod status: %s", r)
	return decodeJSONLine(t, r.Stdout)
}

func (w *Warmpod) URL(path string) string { return "http://" + w.ProbeAddr + path }

// requireHTTP asserts GET path returns want, retrying up to a few seconds
// (the probe server may take a moment to start or to observe a change).
func (w *Warmpod) requireHTTP(t testing.TB, path string, want int) {
	t.Helper()
	Eventually(t, 5*time.Second, 100*time.Millisecond, fmt.Sprintf("GET %s == %d", path, want), func() (bool, string) {
		code, err := HTTPGet(w.URL(path))
		return code == want, fmt.Sprintf("code=%d err=%s", code, errString(err))
	})
}

// decodeJSONLine decodes the last non-empty line of out as a JSON object.
func decodeJSONLine(t testing.TB, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(last), &m), "not a JSON object: %q", out)
	return m
}

// statusJobID extracts the job id from status["job"], which may be a string
// or an object with an "id".
func statusJobID(st map[string]any) string {
	switch j := st["job"].(type) {
	case string:
		return j
	case map[string]any:
		if id, ok := j["id"].(string); ok {
			return id
		}
	}
	return ""
}

type jobVar struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Masked bool   `json:"masked"`
	File   bool   `json:"file"`
}

func jobSpec(t testing.TB, id, token string, vars ...jobVar) string {
	t.Helper()
	if vars == nil {
		vars = []jobVar{}
	}
	b, err := json.Marshal(map[string]any{"id": id, "token": token, "timeout": "1h", "variables": vars})
	require.NoError(t, err)
	return string(b) + "\n"
}

var fooVar = jobVar{Key: "FOO", Value: "bar baz"}

// startJob starts job id and requires success.
func (w *Warmpod) startJob(t testing.TB, id string) {
	t.Helper()
	r := w.JobStart(t, jobSpec(t, id, "s3cr3t", fooVar))
	require.Equal(t, 0, r.ExitCode, "job start %s: %s", id, r)
}

func (w *Warmpod) findProcs(t testing.TB, substr string) []Proc {
	t.Helper()
	var out []Proc
	for _, p := range w.PS(t) {
		if strings.Contains(p.Args, substr) {
			out = append(out, p)
		}
	}
	return out
}

// ---------------------------------------------------------------------------

func TestStdinReachesShell(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	w.WriteLine(t, "echo hello-$((6*7))")
	w.WaitOutput(t, "hello-42", waitLong)
	assert.NotContains(t, w.Stdout(), "hello-$((6*7))", "stdout must be the shell's output, not an echo of stdin")
}

func TestJobLifecycle(t *testing.T) {
	w := startWarmpod(t, wpOpts{})

	// start
	r := w.JobStart(t, jobSpec(t, "j1", "s3cr3t", fooVar))
	require.Equal(t, 0, r.ExitCode, "job start: %s", r)
	res := decodeJSONLine(t, r.Stdout)
	assert.Equal(t, true, res["ok"], r.Stdout)
	assert.Equal(t, "j1", res["job"], r.Stdout)
	assert.Equal(t, "busy", res["state"], r.Stdout)

	// job env reaches job run
	r = w.JobRun(t, "sh", "-c", `echo "$CI_JOB_TOKEN|$FOO"`)
	assert.Equal(t, 0, r.ExitCode, r.String())
	assert.Equal(t, "s3cr3t|bar baz", strings.TrimRight(r.Stdout, "\n"), r.String())

	// job env as export lines
	r = w.WP(t, "", "job", "env")
	assert.Equal(t, 0, r.ExitCode, r.String())
	assert.Contains(t, r.Stdout, "export FOO='bar baz'", r.String())

	// the job shell (fed by container stdin) holds the job env
	w.WriteLine(t, `echo "tok=$CI_JOB_TOKEN"`)
	w.WaitOutput(t, "tok=s3cr3t", waitLong)

	// leave processes behind: one via job run, one via the job shell.
	// (stdio redirected: runc exec would otherwise wait for the sleep's EOF)
	r = w.JobRun(t, "sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo $!")
	require.Equal(t, 0, r.ExitCode, r.String())
	w.WriteLine(t, "sleep 2000 >/dev/null 2>&1 &")
	waitProc(t, w.Container, "sleep 1000")
	waitProc(t, w.Container, "sleep 2000")
	for _, p := range w.PS(t) {
		assert.NotContains(t, p.Args, "s3cr3t", "token visible in a command line")
	}

	// end
	r = w.WP(t, "", "job", "end")
	require.Equal(t, 0, r.ExitCode, "job end: %s", r)
	Eventually(t, 5*time.Second, 100*time.Millisecond, "job end leaves no job processes (not even zombies)", func() (bool, string) {
		ps := w.PS(t)
		for _, p := range ps {
			if strings.Contains(p.Args, "sleep 1000") || strings.Contains(p.Args, "sleep 2000") || p.Zombie() {
				return false, formatPS(ps)
			}
		}
		return true, ""
	})

	st := w.Status(t)
	assert.Equal(t, "idle", st["state"], "%v", st)
	assert.EqualValues(t, 1, st["jobs_run"], "%v", st)
	assert.NotContains(t, fmt.Sprint(st), "s3cr3t", "status must not show the token")

	// secrets wiped: not left in files, never logged (logs are at debug level)
	out, _, _ := w.Exec(t, "", "sh", "-c", "grep -rl s3cr3t /run /tmp /root 2>/dev/null; true")
	assert.Empty(t, strings.TrimSpace(out), "files still holding the token after job end")
	assert.NotContains(t, w.Stderr(), "s3cr3t", "token leaked into warmpod's logs")
	assert.NotContains(t, w.Stderr(), "bar baz", "variable value leaked into warmpod's logs")

	r = w.WP(t, "", "job", "env")
	assert.Equal(t, exitUnavailable, r.ExitCode, "job env without job: %s", r)
	assert.NotContains(t, r.Stdout, "s3cr3t")
	r = w.JobRun(t, "true")
	assert.Equal(t, exitUnavailable, r.ExitCode, "job run without job: %s", r)

	// fresh idle shell: secrets wiped
	w.WriteLine(t, `echo "after=[$CI_JOB_TOKEN]"`)
	w.WaitOutput(t, "after=[", waitLong)
	assert.Contains(t, w.Stdout(), "after=[]")
	assert.NotContains(t, w.Stdout(), "after=[s3cr3t]")

	// a second job can start
	r = w.JobStart(t, jobSpec(t, "j2", "t0k2", fooVar))
	require.Equal(t, 0, r.ExitCode, "second job start: %s", r)
	assert.Equal(t, "j2", statusJobID(w.Status(t)))
	r = w.JobRun(t, "sh", "-c", `echo "$CI_JOB_TOKEN"`)
	assert.Equal(t, "t0k2", strings.TrimSpace(r.Stdout), r.String())
}

func TestSecondJobStartBusy(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	w.startJob(t, "j1")

	r := w.JobStart(t, jobSpec(t, "j2", "other", fooVar))
	assert.Equal(t, exitTempFail, r.ExitCode, "second job start while busy: %s", r)

	st := w.Status(t)
	assert.Equal(t, "busy", st["state"], "%v", st)
	assert.Equal(t, "j1", statusJobID(st), "%v", st)
	assert.NotContains(t, fmt.Sprint(st), "s3cr3t", "status must not show the token")
	r = w.JobRun(t, "sh", "-c", `echo "$CI_JOB_TOKEN"`)
	assert.Equal(t, "s3cr3t", strings.TrimSpace(r.Stdout), "first job's token must survive: %s", r)
}

func TestBadSpec(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	w.requireHTTP(t, "/readyz", 200)

	cases := map[string]string{
		"malformed-json":  `{"id":"j1","token":` + "\n",
		"key-with-equals": jobSpec(t, "j1", "s3cr3t", jobVar{Key: "A=B", Value: "x"}),
		"empty-key":       jobSpec(t, "j1", "s3cr3t", jobVar{Key: "", Value: "x"}),
		"key-with-space":  jobSpec(t, "j1", "s3cr3t", jobVar{Key: "BAD KEY", Value: "x"}),
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			r := w.JobStart(t, spec)
			assert.Equal(t, exitDataErr, r.ExitCode, "spec %q: %s", spec, r)
			st := w.Status(t)
			assert.Equal(t, "idle", st["state"], "%v", st)
			code, err := HTTPGet(w.URL("/readyz"))
			assert.NoError(t, err)
			assert.Equal(t, 200, code, "/readyz after rejected spec")
		})
	}
	// still usable
	w.startJob(t, "j-ok")
}

func TestExecOrphansReaped(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	for i := 0; i < 5; i++ {
		_, _, code := w.Exec(t, "", "sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1 & done; exit 0")
		require.Equal(t, 0, code)
	}
	time.Sleep(time.Second)
	// Orphans of runc exec are reparented to PID 1 (see
	// TestHarnessDetectsZombies); they must not stay zombies.
	Eventually(t, 10*time.Second, 200*time.Millisecond, "no zombies / leftover sleeps", func() (bool, string) {
		ps := w.PS(t)
		for _, p := range ps {
			if p.Zombie() || strings.Contains(p.Args, "sleep") {
				return false, formatPS(ps)
			}
		}
		return true, ""
	})
	assert.False(t, w.Exited(), "warmpod must survive reaping")
}

func TestReadyzFlips(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	probe := func(kind string) int { return w.WP(t, "", "probe", kind).ExitCode }

	w.requireHTTP(t, "/livez", 200)
	w.requireHTTP(t, "/healthz", 200)
	w.requireHTTP(t, "/readyz", 200)
	assert.Equal(t, 0, probe("live"), "probe live while idle")
	assert.Equal(t, 0, probe("ready"), "probe ready while idle")

	w.startJob(t, "j1")
	w.requireHTTP(t, "/readyz", 503)
	w.requireHTTP(t, "/livez", 200)
	assert.Equal(t, 0, probe("live"), "probe live while busy")
	assert.Equal(t, 1, probe("ready"), "probe ready while busy")

	r := w.WP(t, "", "job", "end")
	require.Equal(t, 0, r.ExitCode, "job end: %s", r)
	w.requireHTTP(t, "/readyz", 200)
	w.requireHTTP(t, "/livez", 200)
	assert.Equal(t, 0, probe("ready"), "probe ready after job end")
}

func TestIdleDeadlineExit(t *testing.T) {
	w := startWarmpod(t, wpOpts{IdleTimeout: "2s", NoWait: true})
	code, err := w.Wait(waitLong)
	require.NoError(t, err, "warmpod with --idle-timeout 2s must exit on its own")
	assert.Equal(t, 0, code, "idle deadline exit code")
}

func TestSigtermGrace(t *testing.T) {
	t.Run("trap-foreground-child", func(t *testing.T) {
		// TERM goes to the shell's process group: the foreground sleep dies,
		// the shell runs its trap.
		w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "5s"}})
		w.WriteLine(t, "trap 'echo trapped-term; exit 0' TERM")
		w.WriteLine(t, "echo armed; sleep 1000; echo not-reached")
		w.WaitOutput(t, "armed", waitLong)
		waitProc(t, w.Container, "sleep 1000")
		w.Kill(t, "TERM")
		w.WaitOutput(t, "trapped-term", waitLong)
		code, err := w.Wait(waitLong)
		require.NoError(t, err)
		assert.Equal(t, 143, code)
		assert.NotContains(t, w.Stdout(), "not-reached")
	})
	t.Run("trap-idle-shell", func(t *testing.T) {
		// busybox ash blocked in read(2) on its stdin pipe retries the read
		// after EINTR, so a pending trap runs only when the next line arrives
		// (TestHarnessSignalExitCodes). warmpod stops feeding stdin once it
		// drains, so "trapped-term" cannot be required here; only that the
		// shell is TERMed, then KILLed after --grace, and PID 1 exits 143.
		w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "2s"}})
		w.WriteLine(t, "trap 'echo trapped-term; exit 0' TERM")
		w.WriteLine(t, "echo armed")
		w.WaitOutput(t, "armed", waitLong)
		w.Kill(t, "TERM")
		code, err := w.Wait(2*time.Second + waitLong)
		require.NoError(t, err)
		assert.Equal(t, 143, code)
		t.Logf("trap ran: %v", strings.Contains(w.Stdout(), "trapped-term"))
	})
	t.Run("term-ignored-killed-after-grace", func(t *testing.T) {
		w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "5s"}})
		w.WriteLine(t, "trap '' TERM")
		w.WriteLine(t, "echo armed; sleep 1000")
		w.WaitOutput(t, "armed", waitLong)
		waitProc(t, w.Container, "sleep 1000")
		w.Kill(t, "TERM")
		// during the grace period status reports draining
		Eventually(t, 4*time.Second, 100*time.Millisecond, "status state draining during grace", func() (bool, string) {
			r := w.ExecWith(t, ExecOpts{}, warmpodInRootfs, "status")
			if r.Err != nil || r.ExitCode != 0 {
				return false, r.String()
			}
			return strings.Contains(r.Stdout, `"draining"`), r.Stdout
		})
		code, err := w.Wait(5*time.Second + waitLong)
		require.NoError(t, err, "warmpod must KILL after --grace")
		assert.Equal(t, 143, code)
	})
}

func TestJobRunExitCodes(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	w.startJob(t, "j1")
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -KILL $$", 137},
		{"kill -TERM $$", 143},
	} {
		r := w.JobRun(t, "sh", "-c", tc.script)
		assert.Equal(t, tc.want, r.ExitCode, "job run -- sh -c %s: %s", strconv.Quote(tc.script), r)
	}
}

// TestIdleDeadlineNotWhileBusy: the idle deadline must not end a running job;
// after job end the pod is idle again and the deadline applies.
func TestIdleDeadlineNotWhileBusy(t *testing.T) {
	w := startWarmpod(t, wpOpts{IdleTimeout: "5s"})
	w.startJob(t, "j1")
	time.Sleep(8 * time.Second)
	require.False(t, w.Exited(), "warmpod exited (idle deadline?) while a job was active; stderr:\n%s", w.Stderr())
	st := w.Status(t)
	assert.Equal(t, "busy", st["state"], "%v", st)

	r := w.WP(t, "", "job", "end")
	require.Equal(t, 0, r.ExitCode, "job end: %s", r)
	code, err := w.Wait(waitLong)
	require.NoError(t, err, "idle deadline after job end")
	assert.Equal(t, 0, code)
}

// TestFileVariable: a variable with "file":true is delivered as a path to a
// file holding the value (GitLab semantics), and the file is gone after job end.
func TestFileVariable(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	const body = "first line\nfile-s3cr3t"
	r := w.JobStart(t, jobSpec(t, "j1", "s3cr3t", jobVar{Key: "CFG", Value: body, File: true}, fooVar))
	require.Equal(t, 0, r.ExitCode, "job start: %s", r)

	r = w.JobRun(t, "sh", "-c", `test -f "$CFG" && echo "path=$CFG" && cat "$CFG"`)
	require.Equal(t, 0, r.ExitCode, "$CFG must name a regular file: %s", r)
	lines := strings.SplitN(r.Stdout, "\n", 2)
	require.Len(t, lines, 2, r.String())
	path := strings.TrimPrefix(lines[0], "path=")
	assert.True(t, strings.HasPrefix(path, "/"), "path %q", path)
	assert.Equal(t, body, strings.TrimSuffix(lines[1], "\n"))

	r = w.WP(t, "", "job", "end")
	require.Equal(t, 0, r.ExitCode, "job end: %s", r)
	_, _, code := w.Exec(t, "", "test", "-e", path)
	assert.NotEqual(t, 0, code, "file variable %s still exists after job end", path)
}
