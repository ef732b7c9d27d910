package github

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/poolapi"
)

// The runner passes a JavaScript action's inputs as INPUT_<NAME>, the
// name upper-cased with spaces made '_' and hyphens kept
// (INPUT_NODE-VERSION, INPUT_FETCH-DEPTH, INPUT_GITHUB-TOKEN,
// INPUT_PERSIST-CREDENTIALS), and @actions/core reads them back so.
// A shell cannot export such a name, so writeStepScript passes them to
// the entry point through env(1), as the upstream k8s hook does (`env
// "K=V" ...`). (Found by a hostile review: they used to be dropped.)
func TestHostileHyphenatedActionInputsReachTheAction(t *testing.T) {
	r := newRunner(t)
	f := &fakeCluster{}
	h, out, errb := r.hook(f)
	state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}, Runner: "runner-0"})
	code, _ := r.call(h, CmdRunScriptStep, ScriptStepArgs{EntryPoint: "/__e/node20/bin/node",
		EntryPointArgs: []string{"/__w/_actions/actions/checkout/v4/dist/index.js"},
		EnvironmentVariables: map[string]string{"INPUT_REPOSITORY": "o/r", "INPUT_FETCH-DEPTH": "0",
			"INPUT_PERSIST-CREDENTIALS": "false", "INPUT_TOKEN": "ghs_x"}}, state, nil)
	assert.Equal(t, 0, code)
	require.Len(t, f.scripts, 1)
	t.Logf("stage script:\n%s\nstdout %q stderr %q", f.scripts[0], out, errb)
	assert.Contains(t, f.scripts[0], "INPUT_REPOSITORY")
	assert.Contains(t, f.scripts[0], "INPUT_FETCH-DEPTH", "a hyphenated input must reach the action")
	assert.Contains(t, f.scripts[0], "INPUT_PERSIST-CREDENTIALS", "a hyphenated input must reach the action")
}
