package main

import (
	_ "embed"

	"github.com/warmpod/warmpod/internal/selfinstall"
)

// shim is the file ACTIONS_RUNNER_CONTAINER_HOOKS names (shim.sh).
//
//go:embed shim.sh
var shim []byte

// install copies the running binary to DIR/warmpod-github and writes the
// shim beside it as DIR/warmpod-github.sh (both 0755, atomically): the
// command of an init container that fills an emptyDir of the runner pod from
// the executor image. Errors: DIR cannot be written.
func install(dir string) error {
	return selfinstall.Install(dir, "warmpod-github", map[string][]byte{"warmpod-github.sh": shim})
}
