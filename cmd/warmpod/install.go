package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/warmpod/warmpod/control"
)

// installCmd copies the running binary to DIR/warmpod (mode 0755),
// atomically: a temporary file in DIR, fsync, chmod, rename, fsync of DIR.
// It is the command of an init container built from the FROM-scratch
// warmpod image that fills an emptyDir, so any job image can run
// DIR/warmpod as its PID 1 without containing it (the pattern GitLab Runner
// uses for dumb-init and Tekton for its entrypoint). A reader of
// DIR/warmpod never sees a partial file. Exit 2 on usage, 73 when the copy
// cannot be written.
func installCmd(args []string) int {
	if len(args) != 1 || args[0] == "" || args[0][0] == '-' {
		fmt.Fprintln(os.Stderr, "usage: warmpod install DIR   (copies this binary to DIR/warmpod, mode 0755)")
		return control.ExitUsage
	}
	dest, err := install(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: install:", err)
		return control.ExitCantCreat
	}
	fmt.Println("installed", dest)
	return 0
}

func install(dir string) (dest string, err error) {
	// /proc/self/exe is the binary that runs, even if its path was
	// replaced or it was started through a symlink.
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return "", err
	}
	defer src.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".warmpod.tmp-*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, src); err != nil {
		return "", err
	}
	if err = tmp.Chmod(0o755); err != nil {
		return "", err
	}
	if err = tmp.Sync(); err != nil {
		return "", err
	}
	if err = tmp.Close(); err != nil {
		return "", err
	}
	dest = filepath.Join(dir, "warmpod")
	if err = os.Rename(tmp.Name(), dest); err != nil {
		return "", err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return dest, nil
}
