// Package podexec carries a job's calls on its pod (a session.Cluster's
// exec, delete and list) to a child process, one call per process: the
// per-step build of a driver, which links no client-go so that it starts
// in a few milliseconds, reaches the pod directly through the full build
// (its `pod-exec` command) only when the job's multiplexer cannot carry a
// call (none, or it died mid-stage). The request goes in the child's
// environment (a pod, a `warmpod job …` argv, an owner: nothing secret),
// the call's stdin, stdout and stderr through the child's own, and the
// result back on the child's fd 3.
package podexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// EnvRequest is the child's environment variable that holds the Request
// (JSON).
const EnvRequest = "WARMPOD_POD_EXEC"

// The operations of a Request.
const (
	OpExec     = "exec"
	OpExecBulk = "exec-bulk"
	OpDelete   = "delete"
	OpPods     = "pods"
)

// Request is one call.
type Request struct {
	Op    string        `json:"op"`
	Pod   poolapi.Pod   `json:"pod"`
	Argv  []string      `json:"argv,omitempty"`
	Owner poolapi.Owner `json:"owner"`
}

// Result is the child's answer on its fd 3.
type Result struct {
	// Code is the exit code of an exec.
	Code int `json:"code"`
	// Error is the call's error: for an exec, a broken stream (its fate
	// unknown) unless System.
	Error string `json:"error,omitempty"`
	// System says the call never began (no client could be set up): a
	// *session.SystemError, which RunStage does not retry.
	System bool `json:"system,omitempty"`
	// Pods is the list of OpPods.
	Pods []poolapi.Pod `json:"pods,omitempty"`
}

// Client is a session.Cluster whose calls each run in a child process:
// Argv (the full build and its flags; "pod-exec" is appended) with Env.
type Client struct {
	Argv []string
	Env  []string
}

// Exec runs argv in p through a child.
func (c *Client) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	r, err := c.call(ctx, Request{Op: OpExec, Pod: p, Argv: argv}, stdin, stdout, stderr)
	return r.Code, err
}

// ExecBulk is Exec over the child's bulk transport (session.BulkExecer).
func (c *Client) ExecBulk(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	r, err := c.call(ctx, Request{Op: OpExecBulk, Pod: p, Argv: argv}, stdin, stdout, stderr)
	return r.Code, err
}

// Delete deletes p through a child.
func (c *Client) Delete(ctx context.Context, p poolapi.Pod) error {
	_, err := c.call(ctx, Request{Op: OpDelete, Pod: p}, nil, io.Discard, io.Discard)
	return err
}

// PodsOfJob lists owner's pods through a child.
func (c *Client) PodsOfJob(ctx context.Context, owner poolapi.Owner) ([]poolapi.Pod, error) {
	r, err := c.call(ctx, Request{Op: OpPods, Owner: owner}, nil, io.Discard, io.Discard)
	return r.Pods, err
}

// call runs one child. Errors: the child's Result.Error (a
// *session.SystemError when System); a child that could not start (a
// *session.SystemError: nothing began); a child that started and gave no
// result (it crashed or was killed mid-call: the call's fate is unknown,
// as a broken stream's, so RunStage reattaches).
func (c *Client) call(ctx context.Context, req Request, stdin io.Reader, stdout, stderr io.Writer) (Result, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return Result{Code: -1}, &session.SystemError{Err: err}
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		return Result{Code: -1}, &session.SystemError{Err: err}
	}
	defer rr.Close()
	cmd := exec.CommandContext(ctx, c.Argv[0], append(append([]string{}, c.Argv[1:]...), "pod-exec")...)
	cmd.Env = append(append([]string{}, c.Env...), EnvRequest+"="+string(b))
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = []*os.File{rw}
	// Wait returns this long after the child is gone even when a copy of
	// its output is stuck.
	cmd.WaitDelay = 5 * time.Second
	var diag bytes.Buffer
	if stderr == io.Discard {
		cmd.Stderr = &diag
	}
	// stdin through a pipe of our own: a stage's script reader is held
	// open until the call returns (session's holdOpen), so exec's own
	// copy of a non-file stdin would keep Wait waiting for ever.
	var in io.WriteCloser
	if stdin != nil {
		if in, err = cmd.StdinPipe(); err != nil {
			rw.Close()
			return Result{Code: -1}, &session.SystemError{Err: err}
		}
	}
	err = cmd.Start()
	rw.Close()
	if err != nil {
		return Result{Code: -1}, &session.SystemError{Err: fmt.Errorf("start %s pod-exec: %w", c.Argv[0], err)}
	}
	if in != nil {
		go func() {
			_, _ = io.Copy(in, stdin)
			_ = in.Close()
		}()
	}
	out, _ := io.ReadAll(io.LimitReader(rr, 16<<20))
	werr := cmd.Wait()
	var r Result
	if len(out) == 0 || json.Unmarshal(out, &r) != nil {
		return Result{Code: -1}, fmt.Errorf("%s pod-exec gave no result (%v) %s", c.Argv[0], werr, strings.TrimSpace(diag.String()))
	}
	switch {
	case r.Error == "":
		return r, nil
	case r.System:
		return r, &session.SystemError{Err: errors.New(r.Error)}
	default:
		return r, errors.New(r.Error)
	}
}

// Serve carries out the Request in req (EnvRequest's value) on cl, the
// call's stdin, stdout and stderr the process's, and writes its Result to
// result (the child's fd 3). connectErr is the error of setting up cl,
// which then is nil: every call fails with it as never begun. It returns
// Main is a full build's pod-exec command: it connects (connect, after
// making fd 3 close-on-exec: the result pipe is this process's only, and
// a credential plugin the client starts must not hold it open) and
// serves the one request of EnvRequest on its stdio, the result on fd 3.
// It returns the exit code ([Serve]).
func Main(connect func() (session.Cluster, error)) int {
	syscall.CloseOnExec(3)
	cl, err := connect()
	if err != nil {
		// A typed nil behind the interface is no cluster.
		cl = nil
	}
	return Serve(context.Background(), cl, err, os.Getenv(EnvRequest), os.Stdin, os.Stdout, os.Stderr, os.NewFile(3, "result"))
}

// the child's exit code: 0, or 2 for a request it cannot read.
func Serve(ctx context.Context, cl session.Cluster, connectErr error, req string, stdin io.Reader, stdout, stderr, result io.Writer) int {
	var rq Request
	if err := json.Unmarshal([]byte(req), &rq); err != nil {
		fmt.Fprintf(stderr, "pod-exec: %s: %v\n", EnvRequest, err)
		return 2
	}
	var r Result
	var err error
	if connectErr != nil {
		r.Code, r.System, err = -1, true, connectErr
	} else {
		switch rq.Op {
		case OpExec:
			r.Code, err = cl.Exec(ctx, rq.Pod, rq.Argv, stdin, stdout, stderr)
		case OpExecBulk:
			r.Code, err = session.BulkExec(cl)(ctx, rq.Pod, rq.Argv, stdin, stdout, stderr)
		case OpDelete:
			err = cl.Delete(ctx, rq.Pod)
		case OpPods:
			r.Pods, err = cl.PodsOfJob(ctx, rq.Owner)
		default:
			fmt.Fprintf(stderr, "pod-exec: unknown op %q\n", rq.Op)
			return 2
		}
	}
	if err != nil {
		r.Error = err.Error()
		var se *session.SystemError
		r.System = r.System || errors.As(err, &se)
	}
	b, _ := json.Marshal(r)
	_, _ = result.Write(b)
	return 0
}
