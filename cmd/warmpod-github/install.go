package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/warmpod/warmpod/internal/durable"
)

// shim is the file ACTIONS_RUNNER_CONTAINER_HOOKS names (shim.sh).
//
//go:embed shim.sh
var shim []byte

// install copies the running binary to DIR/warmpod-github and writes the
// shim beside it as DIR/warmpod-github.sh (both 0755), each atomically (a
// temporary file, fsync, rename, fsync of DIR): the command of an init
// container that fills an emptyDir of the runner pod from an image that
// holds this binary alone. Errors: DIR cannot be written.
func install(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer src.Close()
	if err := writeAtomic(dir, "warmpod-github", src); err != nil {
		return err
	}
	// The shim straight from memory: an image FROM scratch has no /tmp.
	if err := writeAtomic(dir, "warmpod-github.sh", bytes.NewReader(shim)); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}

func writeAtomic(dir, name string, r io.Reader) (err error) {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, r); err != nil {
		return err
	}
	if err = tmp.Chmod(0o755); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("install %s: %w", name, err)
	}
	return nil
}
