package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shim execs the binary beside it however the runner names it, under
// bash -e (as the runner starts a .sh hook) and sh, and starts nothing
// else: with an empty PATH (no dirname to find) it still reaches it.
func TestShimExecsTheBinaryBesideIt(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "warmpod-github.sh"), shim, 0o755))
	// A stand-in for the binary: its shebang is resolved by the kernel,
	// not through PATH.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "warmpod-github"), []byte("#!/bin/sh\necho \"ran $# $1|$2\"\n"), 0o755))
	tests := []struct {
		name, shell, path, cwd string
	}{
		{"bash, an absolute path", "/bin/bash", filepath.Join(dir, "warmpod-github.sh"), "/"},
		{"sh, an absolute path", "/bin/sh", filepath.Join(dir, "warmpod-github.sh"), "/"},
		{"bash, a relative path", "/bin/bash", filepath.Join(filepath.Base(dir), "warmpod-github.sh"), filepath.Dir(dir)},
		{"bash, a bare name in its directory", "/bin/bash", "warmpod-github.sh", dir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.shell); err != nil {
				t.Skipf("no %s", tc.shell)
			}
			cmd := exec.Command(tc.shell, "-e", tc.path, "a b", "c")
			cmd.Dir, cmd.Env = tc.cwd, []string{"PATH=" + t.TempDir()} // no tool to find
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Equal(t, "ran 2 a b|c\n", string(out))
		})
	}
}

// With the per-step build beside it, the shim execs that one, however it
// is named; without, warmpod-github.
func TestShimPrefersThePerStepBuild(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "warmpod-github.sh"), shim, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "warmpod-github"), []byte("#!/bin/sh\necho full $1\n"), 0o755))
	run := func(path, cwd string) string {
		cmd := exec.Command("/bin/bash", "-e", path, "x")
		cmd.Dir, cmd.Env = cwd, []string{"PATH=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	assert.Equal(t, "full x\n", run(filepath.Join(dir, "warmpod-github.sh"), "/"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "warmpod-github-step"), []byte("#!/bin/sh\necho step $1\n"), 0o755))
	assert.Equal(t, "step x\n", run(filepath.Join(dir, "warmpod-github.sh"), "/"))
	assert.Equal(t, "step x\n", run("warmpod-github.sh", dir))
}
