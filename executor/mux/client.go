package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/muxproto"
	"github.com/warmpod/warmpod/poolapi"
)

// Cluster is an session.Cluster whose Exec into the job's pod goes
// through the job's multiplexer when it answers, and through the embedded
// Cluster's direct exec when it does not (no socket, another job's, not
// attached in time): the direct path is the tested one of every call
// without a multiplexer, so a dead multiplexer never fails a job. Every
// other method is the embedded Cluster's.
type Cluster struct {
	session.Cluster
	// Sock is the job's multiplexer socket; Job and Pod the job and pod
	// it must serve (it refuses a call for another).
	Sock string
	Job  string
	Pod  poolapi.Pod
	// Log gets one line when this process falls back to direct exec.
	Log io.Writer
	// Accepted, when set, is called when the multiplexer has taken a
	// call (its Accept came): an instant of a benchmark's timeline.
	Accepted func()

	off  atomic.Bool // the multiplexer failed mid-call: direct from here on
	said atomic.Bool

	viaMux, direct atomic.Int64
}

// Calls returns how many execs this Cluster sent through the multiplexer
// and how many directly (the driver's timings record them).
func (c *Cluster) Calls() (viaMux, direct int64) { return c.viaMux.Load(), c.direct.Load() }

// ErrRefused: the pod's `job attach` refused a call the multiplexer had
// taken, before running anything of it (an older warmpod that does not
// carry the command, or a job that ended). Its stdin may have been read,
// so only the caller, which holds the bytes, can send it another way.
var ErrRefused = errors.New("the pod's job attach refused the call")

// errUnavailable: the multiplexer did not take the call; nothing of its
// stdin was read.
var errUnavailable = errors.New("multiplexer unavailable")

// answerTimeout bounds the wait for the multiplexer to take a call
// (Accept): it opens its stream into the pod meanwhile, which takes an
// exec's round trip.
const answerTimeout = 20 * time.Second

// Exec runs argv in p as session.Cluster.Exec does. Errors: as a direct
// exec's; a call the multiplexer took and then lost (its stream into the
// pod broke, or it died) is a broken stream, which the core's stage
// reattaches with --offset.
func (c *Cluster) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	// Only warmpod's own job commands go over the stream (attach runs
	// nothing else; a shell goes as `job exec`), others direct.
	if c.usable() && p.UID == c.Pod.UID && muxproto.Carried(argv) {
		code, err := c.call(ctx, argv, stdin, stdout, stderr)
		if !errors.Is(err, errUnavailable) {
			c.viaMux.Add(1)
			return code, err
		}
		if c.Log != nil && !c.said.Swap(true) {
			fmt.Fprintf(c.Log, "warmpod: %v: direct exec\n", err)
		}
	}
	c.direct.Add(1)
	return c.Cluster.Exec(ctx, p, argv, stdin, stdout, stderr)
}

// ExecBulk runs a call of many bytes (session.BulkExecer: the pieces of
// the GitHub hook's _work) by direct exec, never over the stream, where
// it would hold up the job's other calls.
func (c *Cluster) ExecBulk(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c.direct.Add(1)
	return session.BulkExec(c.Cluster)(ctx, p, argv, stdin, stdout, stderr)
}

// Delete deletes the job's pod through the multiplexer's connection when
// it answers (cleanup then needs no connection of its own), directly
// otherwise.
func (c *Cluster) Delete(ctx context.Context, p poolapi.Pod) error {
	if c.usable() && p.UID == c.Pod.UID {
		err := c.request(ctx, request{Op: "delete"}, nil)
		if !errors.Is(err, errUnavailable) {
			return err
		}
	}
	return c.Cluster.Delete(ctx, p)
}

// PodsOfJob lists the pods labelled for owner as Delete does.
func (c *Cluster) PodsOfJob(ctx context.Context, owner poolapi.Owner) ([]poolapi.Pod, error) {
	if c.usable() && owner.Job == c.Job {
		var pods []poolapi.Pod
		err := c.request(ctx, request{Op: "pods-of-job", Owner: owner}, &pods)
		if !errors.Is(err, errUnavailable) {
			return pods, err
		}
	}
	return c.Cluster.PodsOfJob(ctx, owner)
}

func (c *Cluster) usable() bool { return c.Sock != "" && !c.off.Load() }

// request makes one API request through the multiplexer; result gets the
// answer's JSON. errUnavailable: it did not take the request.
func (c *Cluster) request(ctx context.Context, req request, result any) error {
	conn, _, r, err := c.dial(ctx, muxproto.TypeRequest, req)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	_ = conn.SetReadDeadline(time.Now().Add(answerTimeout + 30*time.Second))
	for {
		f, err := r.Read()
		if err != nil {
			return fmt.Errorf("%w: %v", errUnavailable, err)
		}
		switch f.Type {
		case muxproto.TypeStdout:
			if result != nil {
				if err := muxproto.Decode(f, result); err != nil {
					return err
				}
			}
		case muxproto.TypeExit:
			var x muxproto.Exit
			if err := muxproto.Decode(f, &x); err != nil {
				return err
			}
			if x.Refused {
				return fmt.Errorf("%w: %s", errUnavailable, x.Error)
			}
			if x.Error != "" {
				return errors.New(x.Error)
			}
			return nil
		}
	}
}

// dial connects to the multiplexer and sends the Hello (this job and pod)
// and the call's first frame (an Open or a Request). Errors are
// errUnavailable: nothing of the call reached it.
func (c *Cluster) dial(ctx context.Context, t muxproto.Type, first any) (net.Conn, *muxproto.Writer, *muxproto.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Sock)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	w := muxproto.NewWriter(conn)
	err = w.WriteJSON(muxproto.TypeHello, 0, muxproto.Hello{Version: muxproto.Version, Job: c.Job, PodUID: string(c.Pod.UID)})
	if err == nil {
		err = w.WriteJSON(t, 0, first)
	}
	r := muxproto.NewReader(conn)
	if err != nil {
		// A multiplexer that refused the Hello (another job's, another
		// version) closes at once, maybe before the next frame is
		// written: its refusal says why.
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		if f, rerr := r.Read(); rerr == nil && f.Type == muxproto.TypeExit {
			var x muxproto.Exit
			if muxproto.Decode(f, &x) == nil && x.Error != "" {
				err = errors.New(x.Error)
			}
		}
		conn.Close()
		return nil, nil, nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	return conn, w, r, nil
}

func (c *Cluster) call(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	conn, w, r, err := c.dial(ctx, muxproto.TypeOpen, muxproto.Open{Argv: argv})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	_ = conn.SetReadDeadline(time.Now().Add(answerTimeout))
	f, err := r.Read()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	if f.Type == muxproto.TypeExit {
		var x muxproto.Exit
		_ = muxproto.Decode(f, &x)
		return 0, fmt.Errorf("%w: %s", errUnavailable, x.Error)
	}
	if f.Type != muxproto.TypeAccept {
		return 0, fmt.Errorf("%w: it answered with a %s frame", errUnavailable, f.Type)
	}
	_ = conn.SetReadDeadline(time.Time{})
	if c.Accepted != nil {
		c.Accepted()
	}
	if stdin != nil {
		go func() {
			buf := make([]byte, muxproto.MaxData)
			for {
				n, err := stdin.Read(buf)
				if n > 0 && w.Write(muxproto.TypeStdin, 0, buf[:n]) != nil {
					return
				}
				if err != nil {
					break
				}
			}
			_ = w.Write(muxproto.TypeStdinEOF, 0, nil)
		}()
	} else {
		_ = w.Write(muxproto.TypeStdinEOF, 0, nil)
	}
	for {
		f, err := r.Read()
		if err != nil {
			if ctx.Err() != nil {
				return 0, context.Cause(ctx)
			}
			// The multiplexer died mid-call: this process goes direct.
			c.off.Store(true)
			return 0, fmt.Errorf("the job's multiplexer went away mid-call: %v", err)
		}
		switch f.Type {
		case muxproto.TypeStdout:
			if _, err := stdout.Write(f.Payload); err != nil {
				return 0, err
			}
		case muxproto.TypeStderr:
			if _, err := stderr.Write(f.Payload); err != nil {
				return 0, err
			}
		case muxproto.TypeExit:
			var x muxproto.Exit
			if err := muxproto.Decode(f, &x); err != nil {
				return 0, err
			}
			if x.Refused {
				return 0, fmt.Errorf("%w: %s", ErrRefused, x.Error)
			}
			if x.Error != "" {
				return 0, errors.New(x.Error)
			}
			return x.Code, nil
		}
	}
}
