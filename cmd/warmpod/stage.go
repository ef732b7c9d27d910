package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/putfile"
	"golang.org/x/sys/unix"
)

// stageView is PID 1's stage status document (job status --stage), as
// the contract defines it.
type stageView = control.StageStatus

// stagePoll is how often a stage stream looks for new output in the job
// log while the stage runs (the end of the stage is not polled: a blocking
// job.wait reports it at once).
const stagePoll = 20 * time.Millisecond

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
	fs, sock, job := jobFlags("job stage")
	name := fs.String("stage", "", "stage name (required)")
	size := fs.Int64("size", -1, "exact size of the script on stdin, in bytes (required)")
	sum := fs.String("sha256", "", "hex SHA-256 of the script (required)")
	shell := fs.String("shell", "auto", "interpreter of the script: auto (bash if the image has it, else sh) or a path")
	offset := fs.Int64("offset", 0, "bytes of the stage's output already received: stream from there (a retry)")
	if !parseClient(fs, args) || fs.NArg() != 0 || *name == "" || *size < 0 || *sum == "" || *offset < 0 {
		fmt.Fprintln(os.Stderr, "usage: warmpod job stage --job ID --stage NAME --size N --sha256 HEX [--shell auto|PATH] [--offset N] < script")
		return control.ExitUsage
	}
	digest := normalizeHex(*sum)
	interp := *shell
	if interp == "auto" {
		interp = detectShell()
		if interp == "" {
			fmt.Fprintf(os.Stderr, "warmpod: job stage: no shell in the image (tried %v)\n", stageShells)
			return 127
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer stop()

	st, code := call(ctx, *sock, &control.Request{Op: control.OpJobStatus, Job: *job})
	if st == nil {
		return code
	}
	if !st.OK {
		fmt.Fprintln(os.Stderr, "warmpod:", st.Error)
		return st.Code
	}
	if st.JobDir == "" || st.LogPath == "" {
		fmt.Fprintln(os.Stderr, "warmpod: job stage: PID 1 did not say where the job's directory is (an older warmpod?)")
		return control.ExitSoftware
	}
	// A stage of that name exists already (a retry): with the same script
	// nothing is written again, with another one the call is refused
	// before it touches the job's files.
	var existing struct {
		Stages []struct {
			Stage  string `json:"stage"`
			SHA256 string `json:"sha256"`
		} `json:"stages"`
	}
	_ = json.Unmarshal(st.Data, &existing)
	script, exists := filepath.Join(st.JobDir, "scripts", *name), false
	var err error
	for _, e := range existing.Stages {
		if e.Stage == *name {
			if e.SHA256 != digest {
				fmt.Fprintf(os.Stderr, "warmpod: job stage: stage %q already exists in this job with another script\n", *name)
				return control.ExitDataErr
			}
			exists = true
		}
	}
	if !exists {
		script, err = putScript(st, *name, os.Stdin, *size, digest)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: job stage:", err)
		if errors.Is(err, putfile.ErrBadInput) || errors.Is(err, putfile.ErrUnsafePath) {
			return control.ExitDataErr
		}
		return control.ExitSoftware
	}
	// The executor keeps stdin open while it is alive; EOF (or an error)
	// after the script means it went away.
	var executorGone atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		executorGone.Store(true)
	}()

	dir, _ := os.Getwd()
	resp, code := call(ctx, *sock, &control.Request{Op: control.OpJobStage, Job: *job, Stage: *name,
		Argv: []string{interp, script}, Dir: dir, SHA256: digest})
	if resp == nil {
		return code
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
		return resp.Code
	}
	var view stageView
	if err := json.Unmarshal(resp.Data, &view); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: job stage: bad answer from PID 1:", err)
		return control.ExitIOErr
	}
	_, _ = os.Stderr.Write(append(resp.Data, '\n'))

	live := func() bool { return !executorGone.Load() && !outputGone(os.Stdout) }
	final, err := streamStage(ctx, *sock, resp.Job, st.LogPath, view, *offset, os.Stdout, live)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: job stage:", err)
		return control.ExitIOErr
	}
	b, _ := json.Marshal(final)
	_, _ = os.Stderr.Write(append(b, '\n'))
	if final.ExitCode == nil {
		return control.ExitIOErr
	}
	return *final.ExitCode
}

// putScript stores a stage's script as JOBDIR/scripts/NAME (mode 0500,
// owned by the job user), atomically and verified: size bytes from r whose
// SHA-256 is digest. It returns the script's path. The directory is the
// job's tmpfs, removed at job end; the script (which holds the job's
// variables, token included) never appears in argv.
func putScript(st *control.Response, name string, r io.Reader, size int64, digest string) (string, error) {
	if !validStageName(name) {
		return "", fmt.Errorf("%w: stage name %q: want [A-Za-z0-9][A-Za-z0-9._-]*, at most 128 bytes", putfile.ErrBadInput, name)
	}
	uid, gid := -1, -1
	if st.User != "" {
		cred, err := parseUser(st.User)
		if err != nil {
			return "", fmt.Errorf("job user: %v", err)
		}
		uid, gid = int(cred.Uid), int(cred.Gid)
	}
	dir := filepath.Join(st.JobDir, "scripts")
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if uid >= 0 {
		if err := os.Lchown(dir, uid, gid); err != nil {
			return "", err
		}
	}
	path := filepath.Join(dir, name)
	if err := putfile.Put(path, io.LimitReader(r, size), size, digest, putfile.Options{Mode: 0o500, UID: uid, GID: gid}); err != nil {
		return "", err
	}
	return path, nil
}

// validStageName mirrors PID 1's rule for stage names (they become file
// names and marker lines): [A-Za-z0-9][A-Za-z0-9._-]*, 1–128 bytes.
func validStageName(v string) bool {
	if len(v) == 0 || len(v) > 128 {
		return false
	}
	for i, c := range []byte(v) {
		alnum := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
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

// streamStage copies the stage's output, bytes [LogStart+from, LogEnd) of
// the job log, to out as it is written, and returns the stage's final
// status once it has ended and every byte up to LogEnd was written. The
// end is learnt from a blocking job.wait, so the call returns as soon as
// the stage has ended, not a poll later. While live says the executor is
// there, the job's lease is renewed about once a second and every call
// names the job (a call that names it renews it too); once live is false
// no call names the job, so a client left behind by a dead executor never
// keeps the job alive. Errors: a write error of out (the exec stream
// broke), the log or PID 1 lost.
func streamStage(ctx context.Context, sock, job, logPath string, view stageView, from int64, out io.Writer, live func() bool) (stageView, error) {
	jobIfLive := func() string {
		if live() {
			return job
		}
		return ""
	}
	renew := func() {
		if !live() {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, _ = control.Call(rctx, sock, &control.Request{Op: control.OpJobRenew, Job: job})
	}
	f, err := os.Open(logPath)
	if err != nil {
		return stageView{}, err
	}
	defer f.Close()

	type outcome struct {
		v   stageView
		err error
	}
	ended := make(chan outcome, 1)
	wctx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	if view.Running {
		go func() {
			for {
				r, err := control.Call(wctx, sock, &control.Request{Op: control.OpJobWait, Job: jobIfLive(), Stage: view.Stage, Duration: "1h"})
				if err != nil {
					ended <- outcome{err: fmt.Errorf("PID 1: %w", err)}
					return
				}
				if r.Code == control.ExitTempFail {
					continue // still running after an hour
				}
				if !r.OK {
					ended <- outcome{err: fmt.Errorf("PID 1: %s (exit %d)", r.Error, r.Code)}
					return
				}
				var v stageView
				if err := json.Unmarshal(r.Data, &v); err != nil {
					ended <- outcome{err: fmt.Errorf("PID 1: bad stage status: %w", err)}
					return
				}
				ended <- outcome{v: v}
				return
			}
		}()
	} else {
		ended <- outcome{v: view}
	}

	pos := view.LogStart + from
	limit := int64(-1)
	var final *stageView
	buf := make([]byte, 64<<10)
	lastRenew := time.Now()
	tick := time.NewTimer(stagePoll)
	defer tick.Stop()
	for {
		want := int64(len(buf))
		if limit >= 0 {
			want = min(want, limit-pos)
		}
		n := 0
		if want > 0 {
			n, err = f.ReadAt(buf[:want], pos)
			if err != nil && !errors.Is(err, io.EOF) {
				return stageView{}, err
			}
		}
		if n > 0 {
			if final == nil {
				// The stage may have ended, and its end marker been
				// written, before this read: PID 1 records the outcome
				// before it writes the marker, so a stage still running
				// now means the read holds only the stage's output.
				v, err := stageStatus(ctx, sock, jobIfLive(), view.Stage)
				if err != nil {
					return stageView{}, err
				}
				if !v.Running {
					final = &v
					limit = pos
					if v.LogEnd != nil {
						limit = *v.LogEnd
					}
					n = int(max(0, min(int64(n), limit-pos)))
				}
			}
			if _, err := out.Write(buf[:n]); err != nil {
				return stageView{}, fmt.Errorf("writing the output: %w", err)
			}
			pos += int64(n)
			continue
		}
		if final != nil {
			return *final, nil
		}
		if time.Since(lastRenew) >= time.Second {
			renew()
			lastRenew = time.Now()
		}
		tick.Reset(stagePoll)
		select {
		case o := <-ended:
			if o.err != nil {
				return stageView{}, o.err
			}
			final = &o.v
			if o.v.LogEnd != nil {
				limit = *o.v.LogEnd
			} else {
				limit = pos
			}
		case <-tick.C:
		case <-ctx.Done():
			return stageView{}, fmt.Errorf("interrupted (%v) while the stage runs; it goes on under PID 1", context.Cause(ctx))
		}
	}
}

// stageStatus asks PID 1 for one stage's status.
func stageStatus(ctx context.Context, sock, job, stage string) (stageView, error) {
	r, err := control.Call(ctx, sock, &control.Request{Op: control.OpJobStatus, Job: job, Stage: stage})
	if err != nil {
		return stageView{}, fmt.Errorf("PID 1: %w", err)
	}
	if !r.OK {
		return stageView{}, fmt.Errorf("PID 1: %s (exit %d)", r.Error, r.Code)
	}
	var v stageView
	if err := json.Unmarshal(r.Data, &v); err != nil {
		return stageView{}, fmt.Errorf("PID 1: bad stage status: %w", err)
	}
	return v, nil
}
