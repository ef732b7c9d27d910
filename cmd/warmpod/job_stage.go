package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/putfile"
	"github.com/warmpod/warmpod/stageclient"
)

// stageShells are tried in this order by --shell auto: bash first, since
// GitLab Runner generates bash scripts that it runs with sh only when bash
// is missing (its shell-detection script for Kubernetes pods uses the same
// order).
var stageShells = []string{"/usr/local/bin/bash", "/usr/bin/bash", "/bin/bash", "/usr/local/bin/sh", "/usr/bin/sh", "/bin/sh", "/busybox/sh"}

// jobStage is the one call an executor needs per stage: the script arrives
// on stdin (exactly --size bytes with that SHA-256), is stored in the job's
// tmpfs directory, runs detached under PID 1 as stage --stage, and its
// output is streamed back on stdout as it is produced; the call exits with
// the stage's exit code.
//
// stderr carries one JSON line when the stage is running (its status, with
// "replay":true when this call attached to a stage started earlier) and
// one when it has ended (its final status): the outcome is never guessed
// from the exit code alone, which a stage may share with warmpod's own
// codes. Exit 74 means the outcome is unknown (PID 1 or the log was lost
// mid-stream); ask job wait.
//
// Retrying after a broken exec stream: repeat the same call with --offset
// set to the number of output bytes already received. A stage that exists
// with the same digest is never run again; the call streams its output
// from that point.
//
// Bytes on stdin after the script are ignored, but the end of stdin means
// the executor is gone: the call stops renewing the lease (a dead executor
// must not keep a job alive) and goes on streaming.
func jobStage(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer stop()
	return runJobStage(ctx, args, stageIO{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		outputGone: func() bool { return outputGone(os.Stdout) }})
}

// stageIO is where one `job stage` call reads its script and writes its
// output and status lines: the process's own files, or one channel of
// `job attach`, which runs the call in its own process (a child process
// per stage was about 1.5 ms of every step's overhead: issue 30).
type stageIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// outputGone tells whether nobody reads stdout any more: the call then
	// stops renewing the lease, so a dead executor keeps no job alive.
	outputGone func() bool
}

// runJobStage is jobStage on sio until ctx ends (a signal, or attach's call
// stopped): the stage goes on under PID 1 for a retry to resume.
func runJobStage(ctx context.Context, args []string, sio stageIO) int {
	fs, sock, job := jobFlags("job stage")
	fs.SetOutput(sio.stderr)
	name := fs.String("stage", "", "stage name (required)")
	size := fs.Int64("size", -1, "exact size of the script on stdin, in bytes (required)")
	sum := fs.String("sha256", "", "hex SHA-256 of the script (required)")
	shell := fs.String("shell", "auto", "interpreter of the script: auto (bash if the image has it, else sh) or a path")
	offset := fs.Int64("offset", 0, "bytes of the stage's output already received: stream from there (a retry)")
	if !parseClientTo(fs, args, sio.stderr) {
		return control.ExitUsage
	}
	if fs.NArg() != 0 || *name == "" || *size < 0 || *sum == "" || *offset < 0 {
		fmt.Fprintln(sio.stderr, "usage: warmpod job stage --job ID --stage NAME --size N --sha256 HEX [--shell auto|PATH] [--offset N] < script")
		return control.ExitUsage
	}
	digest := normalizeHex(*sum)
	interp := *shell
	if interp == "auto" {
		interp = detectShell()
		if interp == "" {
			fmt.Fprintf(sio.stderr, "warmpod: job stage: no shell in the image (tried %v)\n", stageShells)
			return 127
		}
	}
	c := newClient(*sock)
	st, err := c.JobStatus(ctx, *job, "")
	if err != nil {
		return unreachable(sio.stderr, *sock, err)
	}
	if !st.OK {
		fmt.Fprintln(sio.stderr, "warmpod:", st.Error)
		return st.Code
	}
	if st.JobDir == "" || st.LogPath == "" {
		fmt.Fprintln(sio.stderr, "warmpod: job stage: PID 1 did not say where the job's directory is (an older warmpod?)")
		return control.ExitSoftware
	}
	script, err := stageclient.Store(st, *name, sio.stdin, *size, digest)
	if err != nil {
		fmt.Fprintln(sio.stderr, "warmpod: job stage:", err)
		if errors.Is(err, putfile.ErrBadInput) || errors.Is(err, putfile.ErrUnsafePath) || errors.Is(err, stageclient.ErrOtherScript) {
			return control.ExitDataErr
		}
		return control.ExitSoftware
	}
	// The executor keeps stdin open while it is alive; EOF (or an error)
	// after the script means it went away.
	var executorGone atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, sio.stdin)
		executorGone.Store(true)
	}()
	dir, _ := os.Getwd()
	resp, err := c.Stage(ctx, control.StageRequest{Job: *job, Stage: *name, Argv: []string{interp, script}, Dir: dir, SHA256: digest})
	if err != nil {
		return unreachable(sio.stderr, *sock, err)
	}
	if !resp.OK {
		fmt.Fprintln(sio.stderr, "warmpod:", resp.Error)
		return resp.Code
	}
	view, err := resp.StageStatus()
	if err != nil {
		fmt.Fprintln(sio.stderr, "warmpod: job stage: bad answer from PID 1:", err)
		return control.ExitIOErr
	}
	_, _ = sio.stderr.Write(append(resp.Data, '\n'))
	stream := stageclient.Stream{Source: stageclient.ControlSource{Client: control.Client{Socket: *sock}}, Job: resp.Job, LogPath: st.LogPath,
		Live: func() bool { return !executorGone.Load() && !sio.outputGone() }}
	final, err := stream.Copy(ctx, view, *offset, sio.stdout)
	if err != nil {
		fmt.Fprintln(sio.stderr, "warmpod: job stage:", err)
		return control.ExitIOErr
	}
	_, _ = sio.stderr.Write(append(final.AppendJSON(nil), '\n'))
	if final.ExitCode == nil {
		return control.ExitIOErr
	}
	return *final.ExitCode
}

func normalizeHex(v string) string {
	b := []byte(v)
	for i, c := range b {
		if c >= 'A' && c <= 'F' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

func detectShell() string {
	for _, p := range stageShells {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
