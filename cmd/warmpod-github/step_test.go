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

// The per-step build carries out a step itself and hands every other
// command to the full build beside it, its stdin intact; it links no
// client-go.
func TestPerStepBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	dir := t.TempDir()
	for name, tags := range map[string]string{"warmpod-github": "", "warmpod-github-step": "percall"} {
		out, err := exec.Command("go", "build", "-tags", tags, "-o", filepath.Join(dir, name), ".").CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	deps, err := exec.Command("go", "list", "-tags", "percall", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", deps)
	assert.NotContains(t, string(deps), "k8s.io/", "the per-step build links a Kubernetes package")

	run := func(bin, stdin string) (string, int) {
		cmd := exec.Command(filepath.Join(dir, bin))
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent/kubeconfig", "KUBERNETES_SERVICE_HOST=")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return string(out), code
	}
	v, err := exec.Command(filepath.Join(dir, "warmpod-github-step"), "version").CombinedOutput()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(v), "warmpod-github-step "), "%s", v)

	// prepare_job is the full build's: its error (no kubeconfig) shows it
	// got the command.
	prepare := `{"command":"prepare_job","responseFile":"","args":{"container":{"image":"alpine:3.20"}},"state":null}` + "\n"
	out, code := run("warmpod-github-step", prepare)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "/nonexistent/kubeconfig", "the full build read the command and looked for a client")
	// A step without a state is the step build's own refusal, no client.
	out, code = run("warmpod-github-step", `{"command":"run_script_step","args":{"entryPoint":"sh"},"state":null}`+"\n")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "did prepare_job succeed?")
	// Without the full build beside it, a command it hands over fails
	// with a message that says what is missing.
	require.NoError(t, os.Remove(filepath.Join(dir, "warmpod-github")))
	out, code = run("warmpod-github-step", prepare)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "the full hook must sit beside warmpod-github-step")
}
