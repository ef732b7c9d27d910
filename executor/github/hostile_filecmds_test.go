package github

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/poolapi"
)

// stepPod plays a step that controls the bytes after the marker: either
// it read the marker from its own stage script (JOBDIR/scripts/NAME, mode
// 0500 owned by the job user; its path is in /proc/$PPID/cmdline), or an
// earlier step put a `wc` of its own first in GITHUB_PATH, which the
// stage script runs after `export PATH=<prependPath>:"$PATH"`.
type stepPod struct {
	*fakeCluster
	after func(marker string) string // what the stage prints
}

func (s *stepPod) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) > 2 && argv[1] == "job" && argv[2] == "stage" {
		in := stdin.(interface{ Held() []byte }).Held()
		m := regexp.MustCompile(`::warmpod-file-commands-[0-9a-f]+::`).Find(in)
		out := s.after(string(m))
		fmt.Fprint(stdout, out)
		code, end := 0, int64(len(out))
		b, _ := json.Marshal(control.StageStatus{Stage: argv[6], ExitCode: &code, LogEnd: &end})
		fmt.Fprintf(stderr, "%s\n", b)
		return 0, nil
	}
	return s.fakeCluster.Exec(ctx, p, argv, stdin, stdout, stderr)
}

func hostileStep(t *testing.T, after func(string) string) (int, string, string) {
	r := newRunner(t)
	r.write("_temp/abc.sh", "true")
	r.write("_temp/_runner_file_commands/set_env_1", "")
	c := &stepPod{fakeCluster: &fakeCluster{}, after: after}
	h, out, errb := r.hook(&fakeCluster{})
	h.Cluster = c
	state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}, Runner: "runner-0"})
	code, _ := r.call(h, CmdRunScriptStep, ScriptStepArgs{EntryPoint: "sh", EntryPointArgs: []string{"-e", "/__w/_temp/abc.sh"},
		EnvironmentVariables: map[string]string{"GITHUB_ENV": "/__w/_temp/_runner_file_commands/set_env_1"},
		PrependPath:          []string{"/tmp/evil-bin"}}, state, nil)
	return code, out.String(), errb.String()
}

// A size line the pod chose must be an error when it is more than the
// bytes that follow, not a make([]byte, n) (it used to panic: makeslice:
// len out of range).
func TestHostileFileCommandSizeIsAnError(t *testing.T) {
	var code int
	assert.NotPanics(t, func() {
		code, _, _ = hostileStep(t, func(m string) string { return "out\n" + m + "\n9223372036854775807\n" })
	}, "a forged size must be an error, not a crash of the hook")
	assert.NotEqual(t, 0, code)
}

// The step's environment must not steer the commands that frame its file
// commands: the step's PATH (GITHUB_PATH of earlier steps) must not pick
// their wc and cat, and a step IFS with a digit must not turn `exit $rc`
// into `exit ”` (they used to share the wrapper shell's environment).
func TestHostileStepEnvDoesNotSteerTheWrapper(t *testing.T) {
	var script string
	c := &stepPod{fakeCluster: &fakeCluster{}, after: func(m string) string { return m + "\n-1\n" }}
	r := newRunner(t)
	r.write("_temp/_runner_file_commands/set_env_1", "")
	h, _, _ := r.hook(&fakeCluster{})
	h.Cluster = &scriptGrab{stepPod: c, got: &script}
	state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}, Runner: "runner-0"})
	r.call(h, CmdRunScriptStep, ScriptStepArgs{EntryPoint: "sh",
		EnvironmentVariables: map[string]string{"GITHUB_ENV": "/__w/_temp/_runner_file_commands/set_env_1", "IFS": "0"},
		PrependPath:          []string{"/tmp/evil-bin"}}, state, nil)
	require.NotEmpty(t, script)
	t.Logf("stage script:\n%s", script)
	assert.NotContains(t, script, "exit $rc\n", "an unquoted $rc is split by the step's IFS")
	// The step's PATH must not pick the wc and cat that frame the file
	// commands: either the step's environment is set in a subshell that
	// has ended (a ")" between) or the framing names its tools.
	if i, j := strings.Index(script, "export PATH="), strings.Index(script, "wc -c"); i >= 0 && j > i {
		between := script[i:j]
		assert.True(t, strings.Contains(between, ")") || strings.Contains(script[j-12:j], "command -p"),
			"the step's PATH (GITHUB_PATH of earlier steps) picks the wc that frames the file commands")
	}
}

type scriptGrab struct {
	*stepPod
	got *string
}

func (s *scriptGrab) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) > 2 && argv[2] == "stage" {
		h := stdin.(interface{ Held() []byte })
		b := h.Held()
		*s.got = string(b)
		return s.stepPod.Exec(ctx, p, argv, &held{b}, stdout, stderr)
	}
	return s.stepPod.Exec(ctx, p, argv, stdin, stdout, stderr)
}

type held struct{ b []byte }

func (h *held) Read(p []byte) (int, error) { return 0, io.EOF }
func (h *held) Held() []byte               { return h.b }
