//go:build kube

package kubee2e

// The environment a `run:` step sees, warmpod's hook against the upstream
// k8s-novolume hook, for the same job through hookrun.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upstreamHookrun runs example through the upstream k8s-novolume hook in
// namespace ns (made by the fixture's cluster-setup.sh, deleted after the
// test), as ../shared/actions-hooks/run-upstream.sh runs it.
func upstreamHookrun(t *testing.T, ns, example string) (*hookResult, string) {
	t.Helper()
	hooks := hooksDir(t)
	build := os.Getenv("HOOKS_BUILD_DIR")
	if build == "" {
		build = "/var/tmp/actions-hooks-build"
	}
	upstream := filepath.Join(build, "k8s-novolume", "index.js")
	require.FileExists(t, upstream, "make actions-hooks builds it")
	kc, err := exec.Command(filepath.Join(hooks, "cluster-setup.sh"), ns).Output()
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Command(kubectl, "delete", "namespace", ns, "--wait=false").Run() })
	res := filepath.Join(t.TempDir(), "result.json")
	cmd := exec.Command(filepath.Join(hooks, "hookrun"), "--hook", upstream, "--out", res, example)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+strings.TrimSpace(string(kc)), "ACTIONS_RUNNER_POD_NAME="+ns+"-0",
		"ACTIONS_RUNNER_IMAGE=localhost/hooks/runner:v1", "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE="+filepath.Join(hooks, "hooks", "upstream-template.yaml"),
		"ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true", "HOOKRUN_TMP="+t.TempDir())
	log, _ := cmd.CombinedOutput()
	return readResult(t, res, log)
}

// stepEnv is the environment step id printed between ENV-BEGIN and
// ENV-END with `export -p` (busybox sh: `export NAME='value'`, a value's
// further lines on lines of their own), by name. hookrun's fresh GUIDs
// (the file command files) and run id are made "GUID" and "RUN-ID", so
// that two runs of one job compare equal.
func stepEnv(t *testing.T, r *hookResult, id string) map[string]string {
	t.Helper()
	guid := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	env := map[string]string{}
	in, last := false, ""
	for _, s := range r.Steps {
		if s.ID != id {
			continue
		}
		for _, o := range s.Output {
			switch {
			case o.Kind != "":
			case o.Text == "ENV-BEGIN":
				in = true
			case o.Text == "ENV-END":
				in = false
			case !in:
			case strings.HasPrefix(o.Text, "export ") && strings.Contains(o.Text, "="):
				k, v, _ := strings.Cut(strings.TrimPrefix(o.Text, "export "), "=")
				env[k], last = guid.ReplaceAllString(v, "GUID"), k
			case last != "":
				env[last] += "\n" + guid.ReplaceAllString(o.Text, "GUID")
			}
		}
	}
	require.NotEmpty(t, env, "step %s printed no environment", id)
	if v, ok := env["GITHUB_RUN_ID"]; ok {
		env["GITHUB_RUN_ID"] = regexp.MustCompile(`[0-9]+`).ReplaceAllString(v, "RUN-ID")
	}
	return env
}

// podOwn tells whether a variable is the pod's or its shell's rather than
// the runner's: it comes from the pod both hooks make differently (its
// name, its image's or template's PATH, the API server's address,
// warmpod's downward-API variables), from warmpod's job hand-over (the
// job's TMPDIR; CI_JOB_TOKEN, empty for an Actions job), from the shell
// (OLDPWD: the directory the step's wrapper started in), or is HOME,
// which the upstream hook drops (its createContainerSpec leaves HOME out:
// the step sees the image's /root, not the runner's /github/home).
func podOwn(name string) bool {
	switch name {
	case "HOSTNAME", "HOME", "PATH", "TMPDIR", "CI_JOB_TOKEN", "OLDPWD":
		return true
	}
	for _, p := range []string{"KUBERNETES_", "POD_", "WARMPOD_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// The step of a job sees GITHUB_ACTIONS=true and CI=true, which GitHub
// documents as always set, and, apart from the pod's own variables
// (podOwn), exactly the environment the upstream hook gives it, values
// byte for byte: the job container's env, the step's env, the runner's
// GITHUB_* and RUNNER_*.
func TestGitHubHookStepEnvMatchesUpstream(t *testing.T) {
	g := newGHPool(t, 1, false)
	ex := writeExample(t, map[string]any{"name": "stepenv", "expect": "success",
		"container": map[string]any{"image": "localhost/hooks/job:v1", "env": map[string]any{"JOB_LEVEL": "from the job's container", "MULTI": "line 1\nline 2"}},
		"env":       map[string]any{"WORKFLOW_LEVEL": "it's the workflow's"},
		"steps": []map[string]any{
			{"id": "ga", "run": "echo GA=${GITHUB_ACTIONS-unset} CI=${CI-unset}"},
			{"id": "env", "run": "echo ENV-BEGIN; export -p; echo ENV-END", "env": map[string]any{"STEP_LEVEL": "the step's"}},
		}})
	r, log := g.run(t, ex, "gh-runner-env")
	require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
	_, _, lines := r.step(t, "ga")
	assert.Contains(t, lines, "GA=true CI=true", "GitHub documents both as always set")

	up, ulog := upstreamHookrun(t, "hooks-stepenv", ex)
	require.Equal(t, "success", up.Result, "the upstream hook:\n%s", ulog)
	_, _, lines = up.step(t, "ga")
	require.Contains(t, lines, "GA=true CI=true", "the upstream hook sets them")

	ours, theirs := stepEnv(t, r, "env"), stepEnv(t, up, "env")
	var diff []string
	names := map[string]bool{}
	for k := range ours {
		names[k] = true
	}
	for k := range theirs {
		names[k] = true
	}
	for k := range names {
		if podOwn(k) {
			continue
		}
		o, inOurs := ours[k]
		u, inTheirs := theirs[k]
		switch {
		case !inOurs:
			diff = append(diff, fmt.Sprintf("%s: only upstream's step has it (=%s)", k, u))
		case !inTheirs:
			diff = append(diff, fmt.Sprintf("%s: only warmpod's step has it (=%s)", k, o))
		case o != u:
			diff = append(diff, fmt.Sprintf("%s: warmpod %s, upstream %s", k, o, u))
		}
	}
	sort.Strings(diff)
	assert.Empty(t, diff, "the step's environment differs from the upstream hook's")
	assert.Equal(t, `'from the job'"'"'s container'`, ours["JOB_LEVEL"], "the container's env reached the step")
	assert.Equal(t, "'true'", ours["GITHUB_ACTIONS"])
}
