package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/poolapi"
)

// The processes a step's stage script starts besides the step itself are
// each a part of the step's overhead (issue 30): mkdir only for a
// directory that is not there, once per directory; wc and cat only for a
// file command that holds something. The bytes after the marker are the
// same as ever: a size line and the bytes, 0 for an empty file, -1 for a
// missing one. The script runs under a real sh, with a PATH whose mkdir,
// wc, cat and rm log their names before they run the real ones.
func TestStepScriptStartsOnlyTheProcessesItNeeds(t *testing.T) {
	tests := []struct {
		name string
		// mkdirs: the step's file directories made before the script runs.
		mkdirs bool
		// step is what the step does (its files are $A and $B).
		step string
		want string // the processes the wrapper started, in order
		out  string // what follows the marker
	}{
		{name: "a later step, its file commands left empty", mkdirs: true, step: "true",
			want: "rm\n", out: "0\n0\n-1\n"},
		{name: "a job's first step: one mkdir for the directory of both files", step: "true",
			want: "rm\nmkdir\n", out: "0\n0\n-1\n"},
		{name: "a step that writes one file command", mkdirs: true, step: `echo 'k=v' >> "$A"`,
			want: "rm\nwc\ncat\n", out: "4\nk=v\n0\n-1\n"},
		{name: "a step that removes one", mkdirs: true, step: `rm -f "$B"`,
			want: "rm\nrm\n", out: "0\n-1\n-1\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin, log := loggingTools(t, "mkdir", "wc", "cat", "rm")
			fcDir := filepath.Join(dir, "_temp", "_runner_file_commands")
			if tc.mkdirs {
				require.NoError(t, os.MkdirAll(fcDir, 0o755))
			}
			a, b := filepath.Join(fcDir, "set_output_1"), filepath.Join(fcDir, "set_env_1")
			var script bytes.Buffer
			writeStepScript(&script, map[string][]byte{a: nil, b: nil}, map[string]string{"A": a, "B": b}, nil, "",
				[]string{"/bin/sh", "-c", tc.step}, []string{a, b, filepath.Join(dir, "gone")}, "::m::")
			sp := filepath.Join(dir, "stage.sh")
			require.NoError(t, os.WriteFile(sp, script.Bytes(), 0o500))
			cmd := exec.Command("/bin/sh", sp)
			cmd.Env = []string{"PATH=" + bin}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			_, after, found := strings.Cut(string(out), "::m::\n")
			require.True(t, found, "%s", out)
			assert.Equal(t, tc.out, after, "the file commands after the marker")
			ran, err := os.ReadFile(log)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(ran), "the processes the wrapper started (the step's own included)")
		})
	}
}

// loggingTools is a directory of the named tools, each a script that
// appends its name to the returned log file and then execs the real one.
func loggingTools(t *testing.T, names ...string) (dir, log string) {
	t.Helper()
	dir = t.TempDir()
	log = filepath.Join(dir, "ran.log")
	require.NoError(t, os.WriteFile(log, nil, 0o644))
	for _, n := range names {
		real, err := exec.LookPath(n)
		require.NoError(t, err)
		body := fmt.Sprintf("#!/bin/sh\necho %s >> %s\nexec %s \"$@\"\n", n, log, real)
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(body), 0o755))
	}
	return dir, log
}

// shellGrab is a stepPod that keeps each job stage's argv.
type shellGrab struct {
	*stepPod
	argv [][]string
}

func (s *shellGrab) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) > 2 && argv[2] == "stage" {
		s.argv = append(s.argv, argv)
	}
	return s.stepPod.Exec(ctx, p, argv, stdin, stdout, stderr)
}

// A step's stage script is POSIX sh and runs under sh (job stage --shell
// sh), not bash, whose start and subshell cost more on every step.
func TestRunScriptStepRunsItsStageUnderSh(t *testing.T) {
	r := newRunner(t)
	r.write("_temp/abc.sh", "true")
	c := &shellGrab{stepPod: &stepPod{fakeCluster: &fakeCluster{}, after: func(string) string { return "" }}}
	h, out, errb := r.hook(&fakeCluster{})
	h.Cluster = c
	state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}, Runner: "runner-0"})
	code, _ := r.call(h, CmdRunScriptStep, ScriptStepArgs{EntryPoint: "bash", EntryPointArgs: []string{"-e", "/__w/_temp/abc.sh"}}, state, nil)
	require.Equal(t, 0, code, "stdout %s stderr %s", out, errb)
	require.Len(t, c.argv, 1)
	assert.Equal(t, []string{"--shell", "sh"}, c.argv[0][len(c.argv[0])-2:])
}
