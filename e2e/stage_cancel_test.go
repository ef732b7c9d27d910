package e2e

// A cancelled stage leaves nothing behind (issue "Step 15", item 1): the
// script has the shape GitLab Runner generates for its bash/sh shells (an
// outer shell with `trap 'exit 1' TERM` that runs the job's lines in a
// subshell with the same trap), and the job's line is a shell with a trap
// of its own that loops over `sleep 1`.

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gitlabShapedScript wraps line as GitLab Runner's bash writer does
// (shells/bash.go: the TERM trap in the outer shell and again in the
// eval subshell, stdin from /dev/null).
func gitlabShapedScript(line string) string {
	return "trap 'exit 1' TERM\n\n" +
		`case "$(set -o)" in *"pipefail"*) set -o pipefail;; esac; set -o errexit` + "\n" +
		"set +o noclobber\n" +
		"(trap 'exit 1' TERM; eval '" + strings.ReplaceAll(line, "'", `'"'"'`) + "') < /dev/null\n" +
		"exit 0\n"
}

const trapLoopLine = `sh -c 'trap "echo TRAP-RAN >> /tmp/trap.log; echo TRAP-RAN; exit 143" TERM INT; i=1; while :; do echo "N-$i"; i=$((i+1)); sleep 1; done'`

func TestStageCancelLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, script string
	}{
		// The leader and the subshell wait for the job line's shell to
		// run its trap, then exit 1.
		{"gitlab-shaped", gitlabShapedScript(trapLoopLine)},
		// The leader has no trap: it dies of its TERM at once, and the
		// job line's shell, orphaned, runs its trap after it (an Actions
		// step is `sh -e SCRIPT`). The trap's output is still the
		// stage's: the stage ends with its last process.
		{"leader-without-trap", trapLoopLine + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "3s"}})
			protoStart(t, w, protoSpec{ID: "sx1", Token: "tok-" + randHex(8), Timeout: "1h"})
			res := w.ExecAsync(t, ExecOpts{Stdin: tc.script, Env: []string{"WARMPOD_PROBE_ADDR=" + w.ProbeAddr}},
				warmpodInRootfs, "job", "stage", "--job", "sx1", "--stage", "build", "--size", strconv.Itoa(len(tc.script)), "--sha256", sha256Hex(tc.script))
			waitProc(t, w.Container, "sleep 1")
			c := w.WP(t, "", "job", "cancel", "--job", "sx1", "--stage", "build")
			require.Equal(t, 0, c.ExitCode, c.String())
			select {
			case r := <-res:
				require.NoError(t, r.Err)
				assert.Equal(t, 1, strings.Count(r.Stdout, "TRAP-RAN"), "the trap ran once and its output reached the stage's stream: %s", r)
			case <-time.After(30 * time.Second):
				t.Fatal("job stage did not return after the stage was cancelled")
			}
			// The cancel answered once the stage had ended: nothing of it
			// is left, at once.
			for _, p := range w.PS(t) {
				assert.NotContains(t, p.Args, "/scripts/build", "the stage's leader is gone")
				assert.NotContains(t, p.Args, "TRAP-RAN", "the job line's shell is gone")
			}
			log := w.JobRun(t, "cat", "/tmp/trap.log")
			assert.Equal(t, "TRAP-RAN\n", log.Stdout, "the trap ran once")
			protoEnd(t, w)
		})
	}
}
