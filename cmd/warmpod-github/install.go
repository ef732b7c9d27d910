//go:build !percall

package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	"github.com/warmpod/warmpod/internal/selfinstall"
)

// shim is the file ACTIONS_RUNNER_CONTAINER_HOOKS names (shim.sh).
//
//go:embed shim.sh
var shim []byte

// stepBuild is the per-step build's file name, beside the full build.
const stepBuild = "warmpod-github-step"

// install copies the running binary to DIR/warmpod-github, the per-step
// build beside it when it is beside this one (the shim runs it for every
// step), and writes the shim as DIR/warmpod-github.sh (all 0755,
// atomically): the command of an init container that fills an emptyDir of
// the runner pod from the executor image. It returns what it wrote.
// Errors: DIR cannot be written, the per-step build cannot be read.
func install(dir string) ([]string, error) {
	extra := map[string][]byte{"warmpod-github.sh": shim}
	if exe, err := os.Executable(); err == nil {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(exe), stepBuild))
		switch {
		case err == nil:
			extra[stepBuild] = b
		case !os.IsNotExist(err):
			return nil, fmt.Errorf("%s: %w", stepBuild, err)
		}
	}
	if err := selfinstall.Install(dir, "warmpod-github", extra); err != nil {
		return nil, err
	}
	out := []string{filepath.Join(dir, "warmpod-github"), filepath.Join(dir, "warmpod-github.sh")}
	if _, ok := extra[stepBuild]; ok {
		out = append(out, filepath.Join(dir, stepBuild))
	}
	return out, nil
}
