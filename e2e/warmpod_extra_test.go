package e2e

// Further end-to-end checks beyond the basic list: races, quoting, config via
// flags and WARMPOD_* env, the job lease timeout, and stdout pumping.

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentJobStart: of several simultaneous job starts exactly one wins
// the lease, the others exit 75, and status names the winner.
func TestConcurrentJobStart(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	const n = 8
	var chs []<-chan ExecResult
	for i := 0; i < n; i++ {
		chs = append(chs, w.ExecAsync(t, ExecOpts{Stdin: jobSpec(t, "j"+strconv.Itoa(i), "tok"+strconv.Itoa(i), fooVar)},
			warmpodInRootfs, "job", "start"))
	}
	winner, winners := "", 0
	for i, ch := range chs {
		r := <-ch
		require.NoError(t, r.Err)
		switch r.ExitCode {
		case 0:
			winners++
			winner = "j" + strconv.Itoa(i)
		case exitTempFail:
		default:
			t.Errorf("job start j%d: unexpected exit: %s", i, r)
		}
	}
	require.Equal(t, 1, winners, "exactly one concurrent job start must win")
	assert.Equal(t, winner, statusJobID(w.Status(t)))
	r := w.JobRun(t, "sh", "-c", `echo "$CI_JOB_TOKEN"`)
	assert.Equal(t, "tok"+strings.TrimPrefix(winner, "j"), strings.TrimSpace(r.Stdout), "env must be the winner's: %s", r)
}

// TestJobEndKillsRunningJobRun: job end while `job run` is still running
// kills the command; the job run client returns with a non-zero status.
func TestJobEndKillsRunningJobRun(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	w.startJob(t, "j1")
	ch := w.ExecAsync(t, ExecOpts{Timeout: 60 * time.Second}, warmpodInRootfs, "job", "run", "--", "sleep", "1000")
	waitProc(t, w.Container, "sleep 1000")

	r := w.WP(t, "", "job", "end")
	require.Equal(t, 0, r.ExitCode, "job end: %s", r)
	select {
	case r := <-ch:
		require.NoError(t, r.Err)
		assert.NotEqual(t, 0, r.ExitCode, "job run of a killed command: %s", r)
	case <-time.After(waitLong):
		t.Fatalf("job run still running %v after job end; ps:\n%s", waitLong, formatPS(w.PS(t)))
	}
	assert.Empty(t, w.findProcs(t, "sleep 1000"), "sleep survived job end")
}

// TestJobEnvQuoting: values with quotes, $, backticks, backslashes and
// newlines arrive unchanged through job run, `job env` + eval, and the job
// shell fed by the container's stdin.
func TestJobEnvQuoting(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	const v = "it's $HOME `id` \"dq\" \\n\nsecond line; echo INJECTED"
	r := w.JobStart(t, jobSpec(t, "j1", "s3cr3t", jobVar{Key: "Q", Value: v, Masked: true}))
	require.Equal(t, 0, r.ExitCode, "job start: %s", r)

	r = w.JobRun(t, "sh", "-c", `printf '[%s]' "$Q"`)
	assert.Equal(t, "["+v+"]", r.Stdout, "job run: %s", r)

	r = w.JobRun(t, "sh", "-c", warmpodInRootfs+` job env > /tmp/env.sh && unset Q && . /tmp/env.sh && printf '[%s]' "$Q"; rm -f /tmp/env.sh`)
	assert.Equal(t, "["+v+"]", r.Stdout, "job env sourced: %s", r)
	assert.NotContains(t, r.Stdout, "\nINJECTED")

	w.WriteLine(t, `printf '<%s>\n' "$Q"; echo quoting-done`)
	w.WaitOutput(t, "quoting-done", waitLong)
	assert.Contains(t, w.Stdout(), "<"+v+">", "job shell")
}

// TestJobLeaseTimeout: the spec's "timeout" ends the job by itself.
func TestJobLeaseTimeout(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	spec, err := json.Marshal(map[string]any{"id": "j1", "token": "s3cr3t", "timeout": "2s", "variables": []jobVar{fooVar}})
	require.NoError(t, err)
	r := w.JobStart(t, string(spec)+"\n")
	require.Equal(t, 0, r.ExitCode, "job start: %s", r)
	r = w.JobRun(t, "sh", "-c", "sleep 1000 >/dev/null 2>&1 &")
	require.Equal(t, 0, r.ExitCode, r.String())

	Eventually(t, waitLong, 200*time.Millisecond, "job lease expires", func() (bool, string) {
		st := w.Status(t)
		return st["state"] == "idle", strings.TrimSpace(w.WP(t, "", "status").Stdout)
	})
	w.requireHTTP(t, "/readyz", 200)
	assert.Equal(t, exitUnavailable, w.JobRun(t, "true").ExitCode, "job run after lease timeout")
	assert.Empty(t, w.findProcs(t, "sleep 1000"), "job process survived the lease timeout")
}

// TestTokenEnvFlag: --token-env renames the token variable.
func TestTokenEnvFlag(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--token-env", "MY_TOKEN"}})
	w.startJob(t, "j1")
	r := w.JobRun(t, "sh", "-c", `echo "my=$MY_TOKEN ci=$CI_JOB_TOKEN"`)
	assert.Equal(t, "my=s3cr3t ci=", strings.TrimSpace(r.Stdout), r.String())
}

// TestEnvConfig: WARMPOD_* variables configure PID 1 like flags do, and the
// subcommands (which inherit the container env via runc exec) follow them.
func TestEnvConfig(t *testing.T) {
	w := startWarmpod(t, wpOpts{
		Socket: "/run/custom/wp.sock",
		Env: []string{
			"WARMPOD_CONTROL_SOCKET=/run/custom/wp.sock",
			"WARMPOD_TOKEN_ENV=ENV_TOKEN",
			"WARMPOD_LOG_FORMAT=json",
		},
	})
	w.startJob(t, "j1")
	r := w.JobRun(t, "sh", "-c", `echo "env=$ENV_TOKEN"`)
	assert.Equal(t, "env=s3cr3t", strings.TrimSpace(r.Stdout), r.String())
	_, _, code := w.Exec(t, "", "test", "-e", controlSocket)
	assert.NotEqual(t, 0, code, "default socket must not exist when WARMPOD_CONTROL_SOCKET is set")

	logs := strings.TrimSpace(w.Stderr())
	require.NotEmpty(t, logs, "no logs at debug level")
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		assert.NoError(t, json.Unmarshal([]byte(line), &m), "log line is not JSON: %q", line)
	}
}

// TestShellOutputLarge: the stdout pump neither loses nor reorders data.
func TestShellOutputLarge(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	const n = 200000
	w.WriteLine(t, "seq 1 "+strconv.Itoa(n)+"; echo seq-done")
	w.WaitOutput(t, "seq-done\n", waitLong)
	out := w.Stdout()
	lines := strings.Split(strings.TrimSuffix(out[:strings.Index(out, "seq-done\n")], "\n"), "\n")
	require.Len(t, lines, n)
	for i, l := range lines {
		if l != strconv.Itoa(i+1) {
			t.Fatalf("line %d is %q, want %d", i, l, i+1)
		}
	}
}

// TestJobEndKillsEverything: job end kills whatever the job left, however it
// was started: orphans of runc exec (reparented to PID 1), a plain runc exec
// process, processes in their own session (setsid), processes of uid 1000,
// background jobs of the job shell, and a TERM-ignoring one (after --grace).
func TestJobEndKillsEverything(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "3s"}})
	w.startJob(t, "j1")
	w.Exec(t, "", "sh", "-c", "sleep 3001 >/dev/null 2>&1 &")
	direct := w.ExecAsync(t, ExecOpts{Timeout: 60 * time.Second}, "sleep", "3002")
	w.JobRun(t, "sh", "-c", "setsid sleep 3003 >/dev/null 2>&1 &")
	w.JobRun(t, "sh", "-c", `setsid sh -c 'trap "" TERM HUP INT; sleep 3004' >/dev/null 2>&1 &`)
	w.ExecWith(t, ExecOpts{User: "1000:1000"}, "sh", "-c", "sleep 3005 >/dev/null 2>&1 &")
	w.WriteLine(t, "(trap '' TERM; setsid sleep 3006 >/dev/null 2>&1 &)")
	for i := 1; i <= 6; i++ {
		waitProc(t, w.Container, "sleep 300"+strconv.Itoa(i))
	}

	r := w.ExecWith(t, ExecOpts{Timeout: 60 * time.Second}, warmpodInRootfs, "job", "end")
	require.NoError(t, r.Err)
	assert.Equal(t, 0, r.ExitCode, "job end: %s", r)
	Eventually(t, 5*time.Second, 100*time.Millisecond, "all job leftovers gone", func() (bool, string) {
		ps := w.PS(t)
		for _, p := range ps {
			if strings.Contains(p.Args, "sleep 300") || p.Zombie() {
				return false, formatPS(ps)
			}
		}
		return true, ""
	})
	select {
	case r := <-direct:
		assert.NotEqual(t, 0, r.ExitCode, "direct runc exec sleep: %s", r)
	case <-time.After(waitLong):
		t.Errorf("runc exec sleep 3002 still running after job end")
	}
	assert.Equal(t, "idle", w.Status(t)["state"])
}

// TestJobEndSlowKillDefaultGrace: when a leftover ignores TERM, job end has
// to wait --grace (default 10s) before KILL. The `job end` client must still
// get its answer (exit 0, JSON ok) rather than a socket timeout.
func TestJobEndSlowKillDefaultGrace(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	w.startJob(t, "j1")
	w.JobRun(t, "sh", "-c", `sh -c 'trap "" TERM; sleep 6000' >/dev/null 2>&1 &`)
	waitProc(t, w.Container, "sleep 6000")

	r := w.ExecWith(t, ExecOpts{Timeout: 60 * time.Second}, warmpodInRootfs, "job", "end")
	require.NoError(t, r.Err)
	assert.Equal(t, 0, r.ExitCode, "job end with a TERM-ignoring leftover: %s", r)
	Eventually(t, waitLong, 200*time.Millisecond, "job ended", func() (bool, string) {
		st := w.Status(t)
		return st["state"] == "idle", strings.TrimSpace(w.WP(t, "", "status").Stdout)
	})
	assert.Empty(t, w.findProcs(t, "sleep 6000"))
}
