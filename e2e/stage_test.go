package e2e

// End-to-end tests of the driver-facing calls (issue "Step 6"): `job stage`
// (one exec per stage: script on stdin, output streamed, the stage's exit
// code out, retry without re-running), `job cancel --stage` (the job goes
// on) and `warmpod install`. warmpod is PID 1 of a real runc container.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// stageCall runs `warmpod job stage` with script on stdin.
func stageCall(t *testing.T, w *Warmpod, job, stage, script string, extra ...string) ExecResult {
	t.Helper()
	args := append([]string{"job", "stage", "--job", job, "--stage", stage,
		"--size", strconv.Itoa(len(script)), "--sha256", sha256Hex(script)}, extra...)
	return w.WP(t, script, args...)
}

// stageLines decodes the JSON lines warmpod writes on the call's stderr.
func stageLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "{") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			out = append(out, m)
		}
	}
	return out
}

func TestStageStreamsOutputAndExitCode(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "2s"}})
	token := "tok-" + randHex(8)
	protoStart(t, w, protoSpec{ID: "sg1", Token: token, Timeout: "1h"})

	// Output without a final newline, stderr merged, a background child
	// left behind, and the token visible to the script but not in argv.
	script := "echo out-1\necho err-1 >&2\nsleep 600 &\n[ \"$CI_JOB_TOKEN\" = " + token + " ] && echo token-ok\nprintf 'no newline'\nexit 3\n"
	r := stageCall(t, w, "sg1", "build", script)
	require.NoError(t, r.Err)
	assert.Equal(t, 3, r.ExitCode, r.String())
	assert.Equal(t, "out-1\nerr-1\ntoken-ok\nno newline", r.Stdout, "stdout is the stage's output, byte for byte")
	lines := stageLines(t, r.Stderr)
	require.Len(t, lines, 2, r.Stderr)
	assert.Equal(t, true, lines[0]["running"], r.Stderr)
	assert.Equal(t, float64(3), lines[1]["exit_code"], r.Stderr)
	assert.Equal(t, float64(len(r.Stdout)), lines[1]["log_end"].(float64)-lines[1]["log_start"].(float64), r.Stderr)

	// The script lives in the job's tmpfs directory, 0500; its content never
	// reaches argv.
	ls := w.JobRun(t, "sh", "-c", "stat -c '%a %s' /run/warmpod/jobs/sg1/scripts/build; cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '")
	require.Equal(t, 0, ls.ExitCode, ls.String())
	assert.True(t, strings.HasPrefix(ls.Stdout, "500 "+strconv.Itoa(len(script))+"\n"), ls.Stdout)
	assert.NotContains(t, ls.Stdout, "echo out-1")

	// A retry with the same script attaches: nothing runs again, output
	// resumes after the bytes already received.
	r2 := stageCall(t, w, "sg1", "build", script, "--offset", "6")
	assert.Equal(t, 3, r2.ExitCode, r2.String())
	assert.Equal(t, "err-1\ntoken-ok\nno newline", r2.Stdout)
	l2 := stageLines(t, r2.Stderr)
	require.NotEmpty(t, l2, r2.Stderr)
	assert.Equal(t, true, l2[0]["replay"], r2.Stderr)
	assert.Len(t, w.findProcs(t, "sleep 600"), 1, "the stage did not run twice")

	// Another script under the same name is refused; so is short input.
	r3 := stageCall(t, w, "sg1", "build", "echo other\n")
	assert.Equal(t, 65, r3.ExitCode, r3.String())
	same := w.JobRun(t, "sha256sum", "/run/warmpod/jobs/sg1/scripts/build")
	assert.True(t, strings.HasPrefix(same.Stdout, sha256Hex(script)), "a refused call leaves the stage's script as it was: %s", same.Stdout)
	short := w.WP(t, "echo hi\n", "job", "stage", "--job", "sg1", "--stage", "short", "--size", "100", "--sha256", sha256Hex("echo hi\n"))
	assert.Equal(t, 65, short.ExitCode, short.String())
	st := w.WP(t, "", "job", "status", "--stage", "short")
	assert.Equal(t, 69, st.ExitCode, "a refused script starts no stage: %s", st)

	// A stage that prints a lot streams it all, in order.
	big := "i=0; while [ $i -lt 20000 ]; do echo line-$i; i=$((i+1)); done\n"
	r4 := stageCall(t, w, "sg1", "big", big)
	require.Equal(t, 0, r4.ExitCode, r4.Stderr)
	got := strings.Split(strings.TrimSuffix(r4.Stdout, "\n"), "\n")
	require.Len(t, got, 20000)
	for i, l := range got {
		if l != "line-"+strconv.Itoa(i) {
			t.Fatalf("line %d = %q", i, l)
		}
	}
	protoEnd(t, w)
}

func TestStageCancelKeepsTheJob(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "5s"}})
	protoStart(t, w, protoSpec{ID: "sc1", Token: "tok-" + randHex(8), Timeout: "1h"})
	script := "trap 'echo trapped; exit 7' TERM\necho started\nsleep 600 &\nwait\n"
	res := w.ExecAsync(t, ExecOpts{Stdin: script, Env: []string{"WARMPOD_PROBE_ADDR=" + w.ProbeAddr}},
		warmpodInRootfs, "job", "stage", "--job", "sc1", "--stage", "step", "--size", strconv.Itoa(len(script)), "--sha256", sha256Hex(script))
	waitProc(t, w.Container, "sleep 600")
	t0 := time.Now()
	c := w.WP(t, "", "job", "cancel", "--job", "sc1", "--stage", "step")
	require.Equal(t, 0, c.ExitCode, c.String())
	t.Logf("cancel --stage took %v", time.Since(t0).Round(time.Millisecond))
	select {
	case r := <-res:
		require.NoError(t, r.Err)
		assert.Equal(t, 7, r.ExitCode, "the trap's exit code: %s", r)
		assert.Equal(t, "started\ntrapped\n", r.Stdout)
	case <-time.After(30 * time.Second):
		t.Fatal("job stage did not return after the stage was cancelled")
	}
	protoNoProcs(t, w, "sleep 600", "nothing of the cancelled stage survives")
	// The job goes on: after_script runs in the same pod.
	r := stageCall(t, w, "sc1", "after_script", "echo after\n")
	assert.Equal(t, 0, r.ExitCode, r.String())
	assert.Equal(t, "after\n", r.Stdout)
	protoEnd(t, w)
}

func TestInstallCopiesTheBinary(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	r := w.WP(t, "", "install", "/tmp/inst")
	require.Equal(t, 0, r.ExitCode, r.String())
	assert.Equal(t, "installed /tmp/inst/warmpod\n", r.Stdout)
	_, _, code := w.Exec(t, "", "/tmp/inst/warmpod", "version")
	assert.Equal(t, 0, code)
	out, _, _ := w.Exec(t, "", "sh", "-c", "stat -c %a /tmp/inst/warmpod; ls -a /tmp/inst")
	assert.Equal(t, "755\n.\n..\nwarmpod\n", out, "mode 0755, no temporary file left")
	bad := w.WP(t, "", "install")
	assert.Equal(t, 2, bad.ExitCode)
	ro := w.WP(t, "", "install", "/proc/none")
	assert.Equal(t, 73, ro.ExitCode, ro.String())
}
