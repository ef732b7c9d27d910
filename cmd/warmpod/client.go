package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/shellproxy"
	"github.com/warmpod/warmpod/tokens"
	"golang.org/x/sys/unix"
)

// specReadTimeout bounds how long `job start` waits for the job spec line
// on stdin.
const specReadTimeout = 10 * time.Second

func clientFlags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	sock := fs.String("control-socket", defaultSocket, "PID 1's control socket (env WARMPOD_CONTROL_SOCKET)")
	return fs, sock
}

func parseClient(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if err := envTwins(fs); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return false
	}
	return true
}

// callTimeout bounds any client's exchange with PID 1 (a job end takes up
// to --grace plus the kill and reap).
const callTimeout = 10 * time.Minute

// call talks to PID 1; an unreachable socket is exit 69.
func call(ctx context.Context, sock string, req *control.Request) (*control.Response, int) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := control.Call(ctx, sock, req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warmpod: PID 1 not reachable at %s: %v\n", sock, err)
		return nil, control.ExitUnavailable
	}
	return resp, resp.Code
}

func printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// result prints the one-line JSON answer of a state-changing command on
// stdout (the executor's machine channel) and the error on stderr.
func result(resp *control.Response) int {
	out := map[string]any{"ok": resp.OK}
	if resp.Job != "" {
		out["job"] = resp.Job
	}
	if resp.State != "" {
		out["state"] = resp.State
	}
	if resp.Replay {
		out["replay"] = true
	}
	if resp.Error != "" {
		out["error"] = resp.Error
		out["code"] = resp.Code
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
	}
	printJSON(out)
	return resp.Code
}

func jobCmd(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: warmpod job start|run|env|end")
		return control.ExitUsage
	}
	switch args[0] {
	case "start":
		return jobStart(args[1:])
	case "run":
		return jobRun(args[1:])
	case "env":
		return jobEnv(args[1:])
	case "end":
		return jobEnd(args[1:])
	}
	fmt.Fprintf(os.Stderr, "warmpod: unknown job command %q\n", args[0])
	return control.ExitUsage
}

func jobStart(args []string) int {
	fs, sock := clientFlags("job start")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	line, err := readSpecLine(os.Stdin, tokens.MaxSpecBytes, specReadTimeout)
	if err != nil {
		return result(&control.Response{Code: control.ExitDataErr, Error: "job spec: " + err.Error()})
	}
	defer clear(line)
	if !json.Valid(line) {
		return result(&control.Response{Code: control.ExitDataErr, Error: "job spec: not valid JSON"})
	}
	resp, code := call(context.Background(), *sock, &control.Request{Op: control.OpJobStart, Spec: line})
	if resp == nil {
		return code
	}
	return result(resp)
}

// readSpecLine reads one line (without needing EOF) of at most max bytes
// within timeout.
func readSpecLine(r io.Reader, max int, timeout time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		var out []byte
		for {
			chunk, err := br.ReadSlice('\n')
			out = append(out, chunk...)
			if len(out) > max+1 {
				ch <- res{nil, fmt.Errorf("longer than %d bytes", max)}
				return
			}
			if err == nil {
				ch <- res{out[:len(out)-1], nil}
				return
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) && len(strings.TrimSpace(string(out))) > 0 {
				ch <- res{out, nil}
				return
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("empty input")
			}
			ch <- res{nil, err}
			return
		}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(timeout):
		return nil, fmt.Errorf("no complete line on stdin within %s", timeout)
	}
}

func jobEnd(args []string) int {
	fs, sock := clientFlags("job end")
	job := fs.String("job", "", "end only if this job holds the lease")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	resp, code := call(context.Background(), *sock, &control.Request{Op: control.OpJobEnd, Job: *job})
	if resp == nil {
		return code
	}
	return result(resp)
}

func jobEnv(args []string) int {
	fs, sock := clientFlags("job env")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	resp, code := call(context.Background(), *sock, &control.Request{Op: control.OpJobEnv})
	if resp == nil {
		return code
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
		return resp.Code
	}
	if err := tokens.RenderExports(os.Stdout, resp.Env); err != nil {
		return 1
	}
	return 0
}

func jobRun(args []string) int {
	fs, sock := clientFlags("job run")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "usage: warmpod job run -- command args...")
		return control.ExitUsage
	}
	resp, code := call(context.Background(), *sock, &control.Request{Op: control.OpJobEnv})
	if resp == nil {
		return code
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
		return resp.Code
	}
	env := mergeEnv(os.Environ(), resp.Env)
	for i := range resp.Env {
		resp.Env[i] = ""
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return shellproxy.ExecErrorCode(err)
	}
	go func() {
		for sig := range sigs {
			_ = cmd.Process.Signal(sig)
		}
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return 1
	}
	return 0
}

// mergeEnv overlays the job's "KEY=VALUE" entries on base.
func mergeEnv(base, job []string) []string {
	keys := make(map[string]bool, len(job))
	for _, kv := range job {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(base)+len(job))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, job...)
}

func probeCmd(args []string) int {
	fs, sock := clientFlags("probe")
	if !parseClient(fs, args) || fs.NArg() != 1 || (fs.Arg(0) != "live" && fs.Arg(0) != "ready") {
		fmt.Fprintln(os.Stderr, "usage: warmpod probe live|ready")
		return control.ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := control.Call(ctx, *sock, &control.Request{Op: control.OpProbe, Probe: fs.Arg(0)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: probe:", err)
		return 1
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod: probe failed:", resp.Error)
		return 1
	}
	return 0
}

func statusCmd(args []string) int {
	fs, sock := clientFlags("status")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	resp, code := call(context.Background(), *sock, &control.Request{Op: control.OpStatus})
	if resp == nil {
		return code
	}
	_, _ = os.Stdout.Write(append(resp.Status, '\n'))
	return 0
}
