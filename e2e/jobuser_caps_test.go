package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// podCaps are the capabilities the shipped pod templates leave the
// warmpod container (deploy/pool.yaml and the others: all dropped but
// these): all that --job-user needs.
var podCaps = []any{"CAP_KILL", "CAP_SETUID", "CAP_SETGID"}

// --job-user in a container with only the pod templates' capabilities
// (no CAP_CHOWN, CAP_DAC_OVERRIDE or CAP_FOWNER): job start makes the
// job's directory, file variables and TMPDIR as the job user, a stage's
// script is stored as that user, and job end removes the job's files and
// wipes a cleanup path the job user filled, in directories root may not
// enter without CAP_DAC_OVERRIDE. A directory the job left under the next
// job's name does not fail the next job.
func TestJobUserWithThePodTemplatesCapabilities(t *testing.T) {
	w := protoStartWarmpodCapsEdit(t, wpOpts{Flags: []string{"--job-user", "1000:1000", "--cleanup-path", "/home/user"}},
		func(spec map[string]any) {
			caps := spec["process"].(map[string]any)["capabilities"].(map[string]any)
			for set := range caps {
				caps[set] = []any{}
			}
			for _, set := range []string{"bounding", "effective", "permitted"} {
				caps[set] = podCaps
			}
		})
	caps, _, _ := w.Exec(t, "", "grep", "CapEff", "/proc/1/status")
	require.Contains(t, caps, "00000000000000e0", "PID 1 has KILL, SETGID and SETUID only")

	protoStart(t, w, protoSpec{ID: "u1", Token: "tok-" + randHex(8), Timeout: "1h",
		Variables: []jobVar{{Key: "CFG", Value: "x", File: true}}})
	script := `id -u; id -g; cat "$CFG"; echo; touch "$TMPDIR/w" && echo tmp-ok
mkdir -p /home/user/w/d && echo s > /home/user/w/d/f && chmod 0700 /home/user/w && echo build-ok
mkdir /run/warmpod/jobs/u2 && echo squat
`
	r := stageCall(t, w, "u1", "ids", script)
	require.Equal(t, 0, r.ExitCode, r.String())
	assert.Equal(t, "1000\n1000\nx\ntmp-ok\nbuild-ok\nsquat\n", r.Stdout, "the stage ran as the job user, its file variable and TMPDIR usable")
	protoEnd(t, w)

	left, _, _ := w.Exec(t, "", "ls", "-A", "/run/warmpod/jobs", "/home/user", "/tmp")
	assert.Equal(t, "/home/user:\n\n/run/warmpod/jobs:\nu2\n\n/tmp:\n", left, "the job's directory, its TMPDIR in the sticky /tmp and the cleanup path's contents are gone")

	protoStart(t, w, protoSpec{ID: "u2", Token: "tok-" + randHex(8), Timeout: "1h",
		Variables: []jobVar{{Key: "CFG", Value: "y", File: true}}})
	r = stageCall(t, w, "u2", "again", `cat "$CFG"; echo; ls -ld "$TMPDIR" | cut -d' ' -f1`)
	require.Equal(t, 0, r.ExitCode, r.String())
	assert.Equal(t, "y\ndrwx------\n", r.Stdout)
	protoEnd(t, w)
	left, _, _ = w.Exec(t, "", "ls", "-A", "/run/warmpod/jobs")
	assert.Empty(t, strings.TrimSpace(left))
	for _, bad := range []string{"cannot remove job directory", "cannot remove the job's TMPDIR", "cleanup paths not fully wiped", "cannot prepare directory", "job start failed"} {
		assert.NotContains(t, w.Stderr(), bad)
	}
}
