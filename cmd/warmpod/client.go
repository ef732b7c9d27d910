package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/warmpod/warmpod/internal/flagenv"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/joblog"
	"github.com/warmpod/warmpod/jobspec"
	"github.com/warmpod/warmpod/putfile"
	"github.com/warmpod/warmpod/shellproxy"
	"golang.org/x/sys/unix"
)

const jobUsage = `usage: warmpod job COMMAND [--control-socket PATH] [--job ID] ...
  start                                  claim the pod: one JSON job spec line on stdin
  run [--detach --stage NAME] -- cmd...  run in the job's environment (detached: as a stage of PID 1)
  stage --stage NAME --size N --sha256 HEX [--offset N] < script
                                         run a script as a stage, stream its output, exit with its code
  logs [--offset N] [--follow]           the job log as "<offset> <line>" (exit 100: log gone)
  status [--stage S] | wait --stage S [--timeout D]
  cancel [--stage S] [--grace D] | put PATH --size N --sha256 HEX [--mode M] | env | end
  attach                                 serve the executor's multiplexer: muxproto frames on stdin/stdout
Run "warmpod job COMMAND -h" for a command's flags.`

// specReadTimeout bounds how long `job start` waits for the job spec line
// on stdin.
const specReadTimeout = 10 * time.Second

func clientFlags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	sock := fs.String("control-socket", defaultSocket, "PID 1's control socket (env WARMPOD_CONTROL_SOCKET)")
	return fs, sock
}

// jobFlags adds --job: the job the call is for; it renews that job's lease
// (the heartbeat of a spec with lease_ttl) and is refused when another job
// holds the lease.
func jobFlags(name string) (*flag.FlagSet, *string, *string) {
	fs, sock := clientFlags(name)
	job := fs.String("job", "", "job id: the call renews that job's lease")
	return fs, sock, job
}

// parseClient parses flags up to the first positional argument, which
// stays in fs.Args() with everything after it (probe live, job run cmd
// args); see parseClientArgs for commands whose flags may follow their
// positional argument.
func parseClient(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if err := flagenv.Apply(fs, "WARMPOD_"); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return false
	}
	return true
}

// parseClientArgs parses flags and positional arguments in any order
// ("put --job a PATH --size N" and "put PATH --job a --size N" alike; Go's
// flag package alone stops at the first positional) and returns the
// positional ones; everything after "--" is positional.
func parseClientArgs(fs *flag.FlagSet, args []string) ([]string, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if err := flagenv.Apply(fs, "WARMPOD_"); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return nil, false
	}
	return pos, true
}

// callTimeout bounds any client's exchange with PID 1 (a job end takes up
// to --grace plus the kill and reap).
const callTimeout = 10 * time.Minute

// client is a client command's connection to PID 1: the contract's typed
// client, every exchange bounded by callTimeout.
type client struct{ control.Client }

func newClient(sock string) client {
	return client{control.Client{Socket: sock, Timeout: callTimeout}}
}

// answer passes on PID 1's answer and its exit code; an unreachable
// socket is exit 69, said on stderr.
func (c client) answer(resp *control.Response, err error) (*control.Response, int) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "warmpod: PID 1 not reachable at %s: %v\n", c.Socket, err)
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
		fmt.Fprintln(os.Stderr, jobUsage)
		return control.ExitUsage
	}
	switch args[0] {
	case "start":
		return jobStart(args[1:])
	case "run":
		return jobRun(args[1:])
	case "stage":
		return jobStage(args[1:])
	case "env":
		return jobEnv(args[1:])
	case "end":
		return jobEnd(args[1:])
	case "put":
		return jobPut(args[1:])
	case "logs":
		return jobLogs(args[1:])
	case "status":
		return jobStatus(args[1:])
	case "wait":
		return jobWait(args[1:])
	case "cancel":
		return jobCancel(args[1:])
	case "attach":
		return jobAttach(args[1:])
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Println(jobUsage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "warmpod: unknown job command %q\n%s\n", args[0], jobUsage)
	return control.ExitUsage
}

func jobStart(args []string) int {
	fs, sock := clientFlags("job start")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	line, err := readSpecLine(os.Stdin, jobspec.MaxSpecBytes, specReadTimeout)
	if err != nil {
		return result(&control.Response{Code: control.ExitDataErr, Error: "job spec: " + err.Error()})
	}
	defer clear(line)
	if !json.Valid(line) {
		return result(&control.Response{Code: control.ExitDataErr, Error: "job spec: not valid JSON"})
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Start(context.Background(), line))
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
		b, err := control.ReadLine(bufio.NewReaderSize(r, 64<<10), max)
		if errors.Is(err, io.EOF) || err == nil && len(bytes.TrimSpace(b)) == 0 {
			err = errors.New("empty input")
		}
		ch <- res{b, err}
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
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.End(context.Background(), *job))
	if resp == nil {
		return code
	}
	return result(resp)
}

func jobEnv(args []string) int {
	fs, sock, job := jobFlags("job env")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Env(context.Background(), *job))
	if resp == nil {
		return code
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
		return resp.Code
	}
	if err := jobspec.RenderExports(os.Stdout, resp.Env); err != nil {
		return 1
	}
	return 0
}

func jobRun(args []string) int {
	fs, sock, job := jobFlags("job run")
	detach := fs.Bool("detach", false, "run as a stage of PID 1 and return at once (needs --stage)")
	stageName := fs.String("stage", "", "stage name (with --detach): its output goes to the job log between marker lines")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	argv := fs.Args()
	if len(argv) == 0 || *detach != (*stageName != "") {
		fmt.Fprintln(os.Stderr, "usage: warmpod job run [--job ID] [--detach --stage NAME] -- command args...")
		return control.ExitUsage
	}
	if *detach {
		dir, _ := os.Getwd()
		pid1 := newClient(*sock)
		resp, code := pid1.answer(pid1.Stage(context.Background(), control.StageRequest{Job: *job, Stage: *stageName, Argv: argv, Dir: dir}))
		if resp == nil {
			return code
		}
		if !resp.OK {
			return result(resp)
		}
		fmt.Println(string(resp.Data))
		return 0
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Env(context.Background(), *job))
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
	// The command is found in the job's PATH, as a stage's is.
	path, err := shellproxy.LookPath(argv[0], env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return shellproxy.ExecErrorCode(err)
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if resp.User != "" {
		cred, err := control.ParseUser(resp.User)
		if err != nil {
			fmt.Fprintln(os.Stderr, "warmpod: job user:", err)
			return control.ExitSoftware
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
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
	err = cmd.Wait()
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
	if !ok || len(pos) != 1 || *size < 0 || *sum == "" {
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

// jobLogs prints the job log from --offset as "<offset> <line>" records,
// like gitlab-runner-helper read-logs; exit 100 when the log disappears.
func jobLogs(args []string) int {
	fs, sock, job := jobFlags("job logs")
	offset := fs.Int64("offset", 0, "byte offset to resume from")
	follow := fs.Bool("follow", false, "keep reading as the log grows (renews the lease)")
	waitFile := fs.Duration("wait-file-timeout", time.Minute, "how long to wait for the log to exist")
	path := fs.String("path", "", "log file (default: the current job's)")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	if *offset < 0 {
		fmt.Fprintln(os.Stderr, "warmpod: job logs: --offset must not be negative")
		return control.ExitUsage
	}
	id := *job
	if *path == "" {
		pid1 := newClient(*sock)
		resp, code := pid1.answer(pid1.JobStatus(context.Background(), *job, ""))
		if resp == nil {
			return code
		}
		if !resp.OK {
			fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
			return resp.Code
		}
		*path, id = resp.LogPath, resp.Job
	}
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer stop()
	ctx, gone := context.WithCancelCause(ctx)
	defer gone(nil)
	var lastRenew time.Time
	renew := func() {
		if id == "" || time.Since(lastRenew) < time.Second {
			return
		}
		// Only a live reader may keep the job alive: a follower whose
		// exec client died (kubectl killed: the process inside the
		// container survives it) must not renew a dead executor's lease.
		// A quiet stage writes nothing that would fail, so ask the
		// kernel instead.
		if outputGone(os.Stdout) {
			gone(errNoReader)
			return
		}
		lastRenew = time.Now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, _ = control.Client{Socket: *sock}.Renew(rctx, id)
	}
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	err := joblog.Read(ctx, *path, flushWriter{out}, joblog.ReadOptions{Offset: *offset, Follow: *follow, WaitFile: *waitFile, OnPoll: renew})
	_ = out.Flush()
	switch {
	case errors.Is(context.Cause(ctx), errNoReader):
		fmt.Fprintln(os.Stderr, "warmpod: job logs:", errNoReader)
		return 1
	case errors.Is(err, joblog.ErrGone), errors.Is(err, joblog.ErrNotFound):
		fmt.Fprintln(os.Stderr, "warmpod: job logs:", err)
		return control.ExitLogGone
	case err != nil:
		fmt.Fprintln(os.Stderr, "warmpod: job logs:", err)
		return 1
	}
	return 0
}

// errNoReader ends a follower whose output nobody reads any more.
var errNoReader = errors.New("nobody reads the output any more (the exec client is gone): stopped, and the lease no longer renewed")

// outputGone tells whether nobody can read f any more: poll(2) reports
// POLLERR on a pipe whose read end is closed and POLLHUP on a socket or
// terminal whose other side is gone. It costs one syscall and writes
// nothing, so it works while the followed job is quiet. A regular file
// or /dev/null never reports gone.
func outputGone(f *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLOUT}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0
}

// flushWriter flushes after every record so a follower sees lines at once.
type flushWriter struct{ w *bufio.Writer }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil && f.w.Buffered() > 0 && p[len(p)-1] == '\n' {
		err = f.w.Flush()
	}
	return n, err
}

func jobStatus(args []string) int {
	fs, sock, job := jobFlags("job status")
	stage := fs.String("stage", "", "only this stage")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.JobStatus(context.Background(), *job, *stage))
	if resp == nil {
		return code
	}
	if !resp.OK {
		return result(resp)
	}
	fmt.Println(string(resp.Data))
	return 0
}

// jobWait waits for a stage to end: exit 0 when it has (its outcome is in
// the JSON printed), 75 when it still runs after --timeout.
func jobWait(args []string) int {
	fs, sock, job := jobFlags("job wait")
	stage := fs.String("stage", "", "stage to wait for (required)")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long (exit 75)")
	if !parseClient(fs, args) || *stage == "" {
		fmt.Fprintln(os.Stderr, "usage: warmpod job wait --stage NAME [--timeout D]")
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Wait(context.Background(), *job, *stage, *timeout))
	if resp == nil {
		return code
	}
	if len(resp.Data) > 0 {
		fmt.Println(string(resp.Data))
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
	}
	return resp.Code
}

func jobCancel(args []string) int {
	fs, sock, job := jobFlags("job cancel")
	grace := fs.Duration("grace", 0, "SIGTERM → SIGKILL delay (default: PID 1's --grace)")
	stage := fs.String("stage", "", "cancel only this stage; the job goes on (GitLab's graceful cancel runs after_script next)")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Cancel(context.Background(), *job, *stage, *grace))
	if resp == nil {
		return code
	}
	return result(resp)
}

func debugCmd(args []string) int {
	fs, sock := clientFlags("debug")
	if !parseClient(fs, args) || fs.NArg() != 2 || fs.Arg(0) != "stall" {
		fmt.Fprintln(os.Stderr, "usage: warmpod debug stall DURATION   (test hook; PID 1 needs WARMPOD_TEST_HOOKS=1)")
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Stall(context.Background(), fs.Arg(1)))
	if resp == nil {
		return code
	}
	return result(resp)
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
	resp, err := control.Client{Socket: *sock}.Probe(ctx, fs.Arg(0))
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
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Status(context.Background()))
	if resp == nil {
		return code
	}
	_, _ = os.Stdout.Write(append(resp.Status, '\n'))
	return 0
}
