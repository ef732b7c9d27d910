package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/putfile"
)

// jobPut writes stdin to PATH atomically (temp file, fsync, digest check,
// chmod, rename) for the job holding the lease: short input or a digest
// mismatch exits 65 and leaves nothing behind; no job, or --job naming a
// job that does not hold the lease, exits 69 or 75 before anything is
// written. PID 1 registers the write: if the job ends first, it kills this
// process and removes the temporary file, so a write never outlives its job.
func jobPut(args []string) int {
	fs, sock, job := jobFlags("job put")
	size := fs.Int64("size", -1, "exact number of bytes on stdin (required)")
	sum := fs.String("sha256", "", "hex SHA-256 of the content (required)")
	mode := fs.String("mode", "0644", "file mode (octal)")
	pos, ok := parseClientArgs(fs, args)
	if !ok {
		return control.ExitUsage
	}
	if len(pos) != 1 || *size < 0 || *sum == "" {
		fmt.Fprintln(os.Stderr, "usage: warmpod job put PATH --size N --sha256 HEX [--mode 0644] [--job ID]")
		return control.ExitUsage
	}
	m, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil || m > 0o7777 {
		fmt.Fprintf(os.Stderr, "warmpod: --mode %q: want an octal file mode\n", *mode)
		return control.ExitUsage
	}
	// PID 1 refuses a destination among its own files (the socket's
	// directory, the logs) when this client registers, before anything
	// is written.
	dest, _ := filepath.Abs(pos[0])
	refused := 0
	claim := func(tmp string) (int, int, error) {
		pid1 := newClient(*sock)
		resp, code := pid1.answer(pid1.Put(context.Background(), *job, tmp))
		if resp == nil {
			refused = code
			return 0, 0, errors.New("PID 1 not reachable")
		}
		if !resp.OK {
			refused = resp.Code
			return 0, 0, errors.New(resp.Error)
		}
		uid, gid := -1, -1
		if resp.User != "" {
			cred, err := control.ParseUser(resp.User)
			if err != nil {
				refused = control.ExitSoftware
				return 0, 0, fmt.Errorf("job user %q: %w", resp.User, err)
			}
			uid, gid = int(cred.Uid), int(cred.Gid)
		}
		return uid, gid, nil
	}
	if err := putfile.Put(dest, os.Stdin, *size, *sum, putfile.Options{Mode: os.FileMode(m), Claim: claim}); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: job put:", err)
		switch {
		case refused != 0:
			return refused
		case errors.Is(err, putfile.ErrBadInput) || errors.Is(err, putfile.ErrUnsafePath):
			return control.ExitDataErr
		}
		return control.ExitSoftware
	}
	return 0
}
