// Package selfinstall copies the running executable (and files that go with
// it) into a directory, atomically: the command of an init container that
// fills an emptyDir of a runner pod from an image that holds nothing but
// static binaries (no cp, no shell, no /tmp).
package selfinstall

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/warmpod/warmpod/internal/durable"
)

// Install writes the running executable to dir/name and each of extra (file
// name → content) beside it, every file 0755 and written atomically (a
// temporary file in dir, fsync, rename), then fsyncs dir. It makes dir when
// missing. Errors: dir cannot be made or written, /proc/self/exe cannot be
// read.
func Install(dir, name string, extra map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer src.Close()
	if err := writeAtomic(dir, name, src); err != nil {
		return err
	}
	for n, b := range extra {
		// Straight from memory: an image FROM scratch has no /tmp.
		if err := writeAtomic(dir, n, bytes.NewReader(b)); err != nil {
			return err
		}
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
