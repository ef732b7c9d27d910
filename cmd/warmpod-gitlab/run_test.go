package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The per-stage build (run_exec's) carries out run itself and hands every
// other command to the full build beside it; it links no client-go.
func TestPerStageBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	dir := t.TempDir()
	for name, tags := range map[string]string{"warmpod-gitlab": "", "warmpod-gitlab-run": "percall"} {
		out, err := exec.Command("go", "build", "-tags", tags, "-o", filepath.Join(dir, name), ".").CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	deps, err := exec.Command("go", "list", "-tags", "percall", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", deps)
	assert.NotContains(t, string(deps), "k8s.io/", "the per-stage build links a Kubernetes package")

	state := t.TempDir()
	run := func(args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(dir, "warmpod-gitlab-run"), append([]string{"--state-dir", state}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent/kubeconfig", "KUBERNETES_SERVICE_HOST=",
			"CUSTOM_ENV_CI_JOB_ID=7", "SYSTEM_FAILURE_EXIT_CODE=3", "BUILD_FAILURE_EXIT_CODE=4")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return string(out), code
	}
	v, code := run("version")
	assert.Equal(t, 0, code, v)
	assert.True(t, strings.HasPrefix(v, "warmpod-gitlab-run "), "%s", v)

	// config is the full build's: its JSON shows it ran there.
	out, code := run("config")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, `"builds_dir":"/builds"`)
	// prepare too: its error (no kubeconfig) shows it looked for a client.
	out, code = run("prepare")
	assert.Equal(t, 3, code, out)
	assert.Contains(t, out, "/nonexistent/kubeconfig", "the full build got prepare")
	// run is the per-stage build's own: without prepare's state it fails
	// as a system failure, with no client.
	script := filepath.Join(t.TempDir(), "script")
	require.NoError(t, os.WriteFile(script, []byte("echo hi\n"), 0o644))
	out, code = run("run", script, "build_script")
	assert.Equal(t, 3, code, out)
	assert.Contains(t, out, "did prepare succeed?")
	assert.NotContains(t, out, "kubeconfig")
	// A mistyped command is refused, exit 2 (by the full build, as any
	// command but run).
	out, code = run("rnu", script, "build_script")
	assert.Equal(t, 2, code, out)
	// Without the full build beside it, a command it hands over fails
	// with a message that says what is missing.
	require.NoError(t, os.Remove(filepath.Join(dir, "warmpod-gitlab")))
	out, code = run("config")
	assert.Equal(t, 3, code, out, "$SYSTEM_FAILURE_EXIT_CODE")
	assert.Contains(t, out, "which must sit beside warmpod-gitlab-run")
}
