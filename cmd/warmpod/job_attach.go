package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
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
// of package muxproto): each Open runs `warmpod job …` as a child process
// exactly as a direct exec would run it (same working directory and
// environment), its stdin, stdout and stderr carried on the frame's
// channel and its exit code in an Exit frame. It exits when its stdin
// ends (the stream was cut: the calls it runs are stopped, and each stage
// they streamed goes on under PID 1 for a reattach to resume), when the
// job is no longer the pod's (Bye "job-ended"), or on SIGTERM.
func jobAttach(args []string) int {
	fs, sock, job := jobFlags("job attach")
	if !parseClient(fs, args) || fs.NArg() != 0 || *job == "" {
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
	case strings.Contains(st.Error, idleNoJob):
		return false, 0
	}
	fmt.Fprintln(os.Stderr, "warmpod:", st.Error)
	return false, st.Code
}

// idleNoJob is the text of PID 1's answer when no job holds the lease
// (lease.ErrNoJob; the code, 69, is also a draining pod's).
const idleNoJob = "no job holds the lease"

type attacher struct {
	exe, sock, job string
	w              *muxproto.Writer

	mu    sync.Mutex
	calls map[uint32]*attachCall
	seen  bool // the job has held the lease since attach began
	ended bool // the job is over: no new call
	wg    sync.WaitGroup
}

// attachCall is one running child and its stdin queue.
type attachCall struct {
	cmd   *exec.Cmd
	stdin *byteQueue
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
			if err := a.handle(f); err != nil {
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
func (a *attacher) handle(f muxproto.Frame) error {
	switch f.Type {
	case muxproto.TypeOpen:
		o, err := muxproto.DecodeOpen(f)
		if err != nil {
			return err
		}
		a.open(f.Channel, o.Argv)
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
			_ = c.cmd.Process.Kill() // our child, not yet waited for (it is still in calls)
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
func (a *attacher) open(ch uint32, argv []string) {
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
	if err := cmd.Start(); err != nil {
		refuse("%v", err)
		return
	}
	c := &attachCall{cmd: cmd, stdin: newByteQueue()}
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
		_ = c.cmd.Process.Kill()
	}
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
