package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/muxproto"
)

// attachWatch is how often `job attach` looks whether its job is still
// the pod's: it exits soon after the job ends, so the executor's
// multiplexer (which exits with it) never outlives the job. The look does
// not name the job, so it never renews the lease: only a call that streams
// a stage for a live executor does that.
const attachWatch = 2 * time.Second

// attachNoJob bounds how long `job attach` waits for its job to start
// (the executor attaches right after its claim and starts the job through
// the stream): a claim that never became a job leaves no attach behind.
const attachNoJob = time.Minute

// jobAttach serves one job's calls over its stdin and stdout (the frames
// of package muxproto): each Open runs `warmpod job …` exactly as a direct
// exec would run it (same working directory and environment), its stdin,
// stdout and stderr carried on the frame's channel and its exit code in an
// Exit frame. `job stage`, one per step or stage, runs in attach's own
// process; every other command as a child process. It exits when its stdin
// ends (the stream was cut: the calls it runs are stopped, and each stage
// they streamed goes on under PID 1 for a reattach to resume), when the
// job is no longer the pod's (Bye "job-ended"), or on SIGTERM.
func jobAttach(args []string) int {
	fs, sock, job := jobFlags("job attach")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	if fs.NArg() != 0 || *job == "" {
		fmt.Fprintln(os.Stderr, "usage: warmpod job attach --job ID   (frames of package muxproto on stdin and stdout)")
		return control.ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer stop()
	seen, code := attachJobState(ctx, *sock, *job)
	if code != 0 {
		return code
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: job attach:", err)
		return control.ExitSoftware
	}
	a := &attacher{exe: exe, sock: *sock, job: *job, w: muxproto.NewWriter(os.Stdout), calls: map[uint32]*attachCall{}, seen: seen}
	return a.serve(ctx, os.Stdin)
}

// attachJobState tells whether job holds the pod's lease (true) or no job
// does yet (false, 0), asking without naming it (no renewal). Another
// job's pod (75), a draining one or a PID 1 out of reach (69) is refused:
// it prints why and returns the exit code.
func attachJobState(ctx context.Context, sock, job string) (bool, int) {
	pid1 := newClient(sock)
	st, code := pid1.answer(pid1.JobStatus(ctx, "", ""))
	if st == nil {
		return false, code
	}
	switch {
	case st.OK && st.Job == job:
		return true, 0
	case st.OK:
		fmt.Fprintf(os.Stderr, "warmpod: job attach: the pod runs another job, not %q\n", job)
		return false, control.ExitTempFail
	case st.Refusal == control.RefusalNoJob:
		return false, 0
	}
	fmt.Fprintln(os.Stderr, "warmpod:", st.Error)
	return false, st.Code
}

type attacher struct {
	exe, sock, job string
	w              *muxproto.Writer

	mu    sync.Mutex
	calls map[uint32]*attachCall
	seen  bool // the job has held the lease since attach began
	ended bool // the job is over: no new call
	wg    sync.WaitGroup
}

// attachCall is one running call and its stdin queue.
type attachCall struct {
	stdin *byteQueue
	// stop ends the call: its child is killed, or its run in attach's
	// process cancelled (a stage goes on under PID 1 either way).
	stop func()
}

func (a *attacher) serve(ctx context.Context, in io.Reader) int {
	if err := a.w.WriteDoc(muxproto.TypeHello, 0, muxproto.Hello{Version: muxproto.Version, Job: a.job, PID: os.Getpid(), Heartbeat: true}); err != nil {
		return control.ExitIOErr
	}
	readErr := make(chan error, 1)
	go func() {
		r := muxproto.NewReader(in)
		for {
			f, err := r.Read()
			if err != nil {
				readErr <- err
				return
			}
			if err := a.handle(ctx, f); err != nil {
				readErr <- err
				return
			}
		}
	}()
	tick := time.NewTicker(attachWatch)
	defer tick.Stop()
	began := time.Now()
	for {
		select {
		case err := <-readErr:
			// The stream ended or broke: nobody reads the calls' output.
			if !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "warmpod: job attach:", err)
			}
			a.stopAll()
			a.wg.Wait()
			return 0
		case <-ctx.Done():
			a.stopAll()
			a.wg.Wait()
			_ = a.w.WriteDoc(muxproto.TypeBye, 0, muxproto.Bye{Reason: "signal"})
			return 0
		case <-tick.C:
			current, code := attachJobState(ctx, a.sock, a.job)
			a.mu.Lock()
			a.seen = a.seen || current
			seen := a.seen
			a.mu.Unlock()
			if !seen && code == 0 && time.Since(began) < attachNoJob {
				continue // the job has not started yet
			}
			if !current {
				// The calls still running (a job end, a stage's last
				// output) finish and report first: the job is over, so
				// none of them runs for long.
				a.mu.Lock()
				a.ended = true
				a.mu.Unlock()
				a.wg.Wait()
				_ = a.w.WriteDoc(muxproto.TypeBye, 0, muxproto.Bye{Reason: "job-ended"})
				return 0
			}
		}
	}
}

// handle acts on one frame from the host. An error ends the stream: the
// host broke the protocol.
func (a *attacher) handle(ctx context.Context, f muxproto.Frame) error {
	switch f.Type {
	case muxproto.TypeOpen:
		o, err := muxproto.DecodeOpen(f)
		if err != nil {
			return err
		}
		a.open(ctx, f.Channel, o.Argv)
	case muxproto.TypeStdin, muxproto.TypeStdinEOF, muxproto.TypeClose:
		a.mu.Lock()
		c := a.calls[f.Channel]
		a.mu.Unlock()
		if c == nil {
			return nil // the call has ended: late stdin goes nowhere
		}
		switch f.Type {
		case muxproto.TypeStdin:
			c.stdin.push(f.Payload)
		case muxproto.TypeStdinEOF:
			c.stdin.close()
		default:
			c.stdin.close()
			c.stop()
		}
	case muxproto.TypePing:
		// The stream's heartbeat: answered at once, so that bytes cross
		// both ways however long a stage is silent.
		if len(f.Payload) <= muxproto.MaxPing {
			_ = a.w.Write(muxproto.TypePong, 0, f.Payload)
		}
	case muxproto.TypeBye:
		return io.EOF
	default:
		return fmt.Errorf("unexpected %s frame from the host", f.Type)
	}
	return nil
}

// open starts argv as channel ch. A call that cannot start is answered
// with a refused Exit at once.
func (a *attacher) open(ctx context.Context, ch uint32, argv []string) {
	refuse := func(format string, v ...any) {
		_ = a.w.WriteDoc(muxproto.TypeExit, ch, muxproto.Exit{Error: fmt.Sprintf(format, v...), Refused: true})
	}
	if !muxproto.Carried(argv) {
		refuse("job attach runs only the warmpod job commands of muxproto.Carried, not %q", argv)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		refuse("job %s has ended in the pod", a.job)
		return
	}
	if a.calls[ch] != nil {
		refuse("channel %d is in use", ch)
		return
	}
	if argv[2] == "stage" {
		if c := a.stageInProcess(ctx, ch, argv[3:]); c != nil {
			a.calls[ch] = c
		}
		return
	}
	cmd := exec.Command(a.exe, argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		refuse("%v", err)
		return
	}
	// The child's output goes straight into frames: cmd.Wait returns once
	// both are copied, and only then is the Exit frame sent, after all
	// of the call's output.
	cmd.Stdout = a.w.DataWriter(muxproto.TypeStdout, ch)
	cmd.Stderr = a.w.DataWriter(muxproto.TypeStderr, ch)
	group := argv[2] == "exec"
	if group {
		// job exec becomes a command that starts its own (the hook's
		// unpack: cat, tar): in a process group of its own, a stopped
		// call stops all of it, so nothing of it races the executor's
		// retry of the same command.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		refuse("%v", err)
		return
	}
	// Our child, not yet waited for while it is in calls: Kill cannot
	// reach another process, nor its group (the child leads it, and its
	// pid is not reused before it is waited for).
	stop := func() { _ = cmd.Process.Kill() }
	if pid := cmd.Process.Pid; group && pid > 1 {
		stop = func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }
	}
	c := &attachCall{stdin: newByteQueue(), stop: stop}
	a.calls[ch] = c
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		c.stdin.copyTo(stdin)
		_ = stdin.Close()
	}()
	go func() {
		defer a.wg.Done()
		err := cmd.Wait()
		a.mu.Lock()
		delete(a.calls, ch)
		a.mu.Unlock()
		c.stdin.close()
		exit := muxproto.Exit{Code: cmd.ProcessState.ExitCode()}
		if argv[2] == "start" && exit.Code == 0 {
			a.mu.Lock()
			a.seen = true // its end is watched from now on
			a.mu.Unlock()
		}
		if exit.Code < 0 {
			exit = muxproto.Exit{Error: fmt.Sprintf("warmpod %s in the pod: %v", argv[2], err)}
		}
		_ = a.w.WriteDoc(muxproto.TypeExit, ch, exit)
	}()
}

// stopAll stops every running call: their stdin ends (a stage client
// stops renewing the lease) and the process is killed; each stage it
// streamed goes on under PID 1.
func (a *attacher) stopAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.calls {
		c.stdin.close()
		c.stop()
	}
}

// stageInProcess runs `job stage args` as channel ch in attach's own
// process: the same code as the command, with the channel's stdin, stdout
// and stderr, and ctx's end (attach's signal, a Close, the stream's end)
// in the place of a kill; nil when it could not start (refused). Called
// with a.mu held.
func (a *attacher) stageInProcess(ctx context.Context, ch uint32, args []string) *attachCall {
	cctx, cancel := context.WithCancel(ctx)
	c := &attachCall{stdin: newByteQueue(), stop: cancel}
	// A pipe, as a child's stdin is: io.Pipe would link about 8 KB more
	// into PID 1's binary (make size).
	stdin, feed, err := os.Pipe()
	if err != nil {
		cancel()
		_ = a.w.WriteDoc(muxproto.TypeExit, ch, muxproto.Exit{Error: err.Error(), Refused: true})
		return nil
	}
	sio := stageIO{stdin: stdin, stdout: a.w.DataWriter(muxproto.TypeStdout, ch), stderr: a.w.DataWriter(muxproto.TypeStderr, ch),
		outputGone: func() bool { return cctx.Err() != nil }}
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		c.stdin.copyTo(feed)
		_ = feed.Close() // the end of the executor's stdin, as a child's pipe would close
	}()
	go func() {
		defer a.wg.Done()
		exit := runInProcess(cctx, args, sio)
		if cctx.Err() != nil && exit.Error == "" {
			// Stopped (a Close, the stream's end, attach's signal): what
			// the call says then (a short script, PID 1 "unreachable")
			// is the stop's doing, not the stage's. As a killed child's
			// was, its fate is unknown: the executor reattaches with
			// --offset, and a stage PID 1 started is streamed, not lost.
			exit = muxproto.Exit{Error: fmt.Sprintf("warmpod stage in the pod: stopped: %v", context.Cause(cctx))}
		}
		cancel()
		// A call that has returned reads no more stdin: what is still
		// queued fails, as a write to a dead child's pipe would.
		_ = stdin.Close()
		a.mu.Lock()
		delete(a.calls, ch)
		a.mu.Unlock()
		c.stdin.close()
		_ = a.w.WriteDoc(muxproto.TypeExit, ch, exit)
	}()
	return c
}

// runInProcess is runJobStage's exit as an Exit frame; a panic on the
// call's own goroutine, which in a child would have been its own crash,
// is the call's error and not the end of the job's other calls (the
// goroutines the call starts, such as its stream's wait, are not
// covered).
func runInProcess(ctx context.Context, args []string, sio stageIO) (exit muxproto.Exit) {
	defer func() {
		if r := recover(); r != nil {
			exit = muxproto.Exit{Error: fmt.Sprintf("warmpod stage in the pod: panic: %v", r)}
		}
	}()
	return muxproto.Exit{Code: runJobStage(ctx, args, sio)}
}

// byteQueue is an unbounded queue of stdin bytes: the frame reader never
// blocks on one call's child, so a child that does not read its stdin
// cannot stall the other channels.
type byteQueue struct {
	mu     sync.Mutex
	bufs   [][]byte
	closed bool
	ready  chan struct{}
}

func newByteQueue() *byteQueue { return &byteQueue{ready: make(chan struct{}, 1)} }

func (q *byteQueue) push(b []byte) {
	q.mu.Lock()
	if !q.closed {
		q.bufs = append(q.bufs, b)
	}
	q.mu.Unlock()
	q.wake()
}

func (q *byteQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *byteQueue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// copyTo writes the queue to w until it is closed and drained, or w
// fails.
func (q *byteQueue) copyTo(w io.Writer) {
	for {
		q.mu.Lock()
		bufs, closed := q.bufs, q.closed
		q.bufs = nil
		q.mu.Unlock()
		for _, b := range bufs {
			if _, err := w.Write(b); err != nil {
				return
			}
		}
		if closed && len(bufs) == 0 {
			return
		}
		if len(bufs) == 0 {
			<-q.ready
		}
	}
}
