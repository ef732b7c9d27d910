package stageclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/warmpod/warmpod/control"
)

// DefaultPoll is how often a stream looks for new output in the job log
// while the stage runs. The end of the stage is not polled: a blocking
// job.wait reports it at once.
const DefaultPoll = 20 * time.Millisecond

// DefaultRenew is how often a stream renews the job's lease while the log
// has nothing new (an output read asks PID 1 for the stage's status, which
// names the job and renews it too).
const DefaultRenew = time.Second

// Stream copies one stage's output from the job log.
type Stream struct {
	// Source is PID 1.
	Source Source
	// Job is the job holding the lease. Calls name it only while Live.
	Job string
	// LogPath is the job log (Response.LogPath of job.status).
	LogPath string
	// Live tells whether the executor is still there: its stdin is open
	// and its stdout can be written. Once it is false no call names the
	// job, so a client left behind by a dead executor never keeps the job
	// alive. Nil: always.
	Live func() bool
	// Poll and Renew override DefaultPoll and DefaultRenew (0: default).
	Poll, Renew time.Duration
}

// Copy writes the stage's output, bytes [LogStart+from, LogEnd) of the
// job log, to out as they are written, and returns the stage's final
// status once it has ended and every byte up to LogEnd was written. view
// is the stage's status when the call attached; from is the number of
// output bytes an earlier, broken call already delivered (a retry resumes
// there, byte for byte). Errors: a write error of out (the exec stream
// broke), the log or PID 1 lost, ctx cancelled (the stage goes on under
// PID 1).
func (s *Stream) Copy(ctx context.Context, view control.StageStatus, from int64, out io.Writer) (control.StageStatus, error) {
	f, err := os.Open(s.LogPath)
	if err != nil {
		return control.StageStatus{}, err
	}
	defer f.Close()
	ended := make(chan outcome, 1)
	wctx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	if view.Running {
		go s.waitEnd(wctx, view.Stage, ended)
	} else {
		ended <- outcome{v: view}
	}
	c := &copier{s: s, f: f, out: out, stage: view.Stage, pos: view.LogStart + from, limit: -1, buf: make([]byte, 64<<10)}
	return c.run(ctx, ended)
}

// outcome is the stage's end as waitEnd learnt it.
type outcome struct {
	v   control.StageStatus
	err error
}

// waitEnd sends the stage's final status (or why it could not be had) on
// ended. A wait names the job only while the executor is there, so it is
// asked again after each hour the stage still runs.
func (s *Stream) waitEnd(ctx context.Context, stage string, ended chan<- outcome) {
	for {
		v, done, err := s.Source.Wait(ctx, s.job(), stage, time.Hour)
		if err != nil {
			ended <- outcome{err: err}
			return
		}
		if done {
			ended <- outcome{v: v}
			return
		}
	}
}

func (s *Stream) live() bool { return s.Live == nil || s.Live() }

// job is the job to name in a call: none once the executor is gone.
func (s *Stream) job() string {
	if s.live() {
		return s.Job
	}
	return ""
}

// copier is one Copy's position in the log.
type copier struct {
	s     *Stream
	f     *os.File
	out   io.Writer
	stage string
	buf   []byte
	// pos is the next log byte to write; limit is LogEnd once the end is
	// known (-1 before).
	pos, limit int64
	// final is the stage's final status once known.
	final *control.StageStatus
}

// run reads what the log has, writes it, and when there is nothing new
// waits for the next poll or the stage's end.
func (c *copier) run(ctx context.Context, ended <-chan outcome) (control.StageStatus, error) {
	poll, renewEvery := or(c.s.Poll, DefaultPoll), or(c.s.Renew, DefaultRenew)
	lastRenew := time.Now()
	tick := time.NewTimer(poll)
	defer tick.Stop()
	for {
		n, err := c.read()
		if err != nil {
			return control.StageStatus{}, err
		}
		if n > 0 {
			if err := c.emit(ctx, n); err != nil {
				return control.StageStatus{}, err
			}
			continue
		}
		if c.final != nil {
			return *c.final, nil
		}
		if time.Since(lastRenew) >= renewEvery {
			if c.s.live() {
				c.s.Source.Renew(ctx, c.s.Job)
			}
			lastRenew = time.Now()
		}
		tick.Reset(poll)
		select {
		case o := <-ended:
			if o.err != nil && ctx.Err() != nil {
				// The wait failed because ctx ended (both cases were ready
				// and select chose this one): the stage was interrupted,
				// not lost, and must be said as such.
				return control.StageStatus{}, interrupted(ctx)
			}
			if o.err != nil {
				return control.StageStatus{}, o.err
			}
			c.end(o.v)
		case <-tick.C:
		case <-ctx.Done():
			return control.StageStatus{}, interrupted(ctx)
		}
	}
}

// read reads what the log holds at pos, up to the stage's end when known.
func (c *copier) read() (int, error) {
	want := int64(len(c.buf))
	if c.limit >= 0 {
		want = min(want, c.limit-c.pos)
	}
	if want <= 0 {
		return 0, nil
	}
	n, err := c.f.ReadAt(c.buf[:want], c.pos)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return n, nil
}

// emit writes the n bytes just read. While the end is unknown it first
// asks whether the stage still runs: the stage may have ended, and its
// end marker (which is not the stage's output) been written, before the
// read. PID 1 records the outcome before it writes the marker, so a stage
// still running now means the read holds only the stage's output.
func (c *copier) emit(ctx context.Context, n int) error {
	if c.final == nil {
		v, err := c.s.Source.Status(ctx, c.s.job(), c.stage)
		if err != nil {
			return err
		}
		if !v.Running {
			c.end(v)
			n = int(max(0, min(int64(n), c.limit-c.pos)))
		}
	}
	if _, err := c.out.Write(c.buf[:n]); err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	c.pos += int64(n)
	return nil
}

// end records the stage's final status; the output ends at its LogEnd
// (where the copy is when PID 1 gave none).
func (c *copier) end(v control.StageStatus) {
	c.final = &v
	c.limit = c.pos
	if v.LogEnd != nil {
		c.limit = *v.LogEnd
	}
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// interrupted is Copy's error when ctx ends while the stage runs: the
// stage is not stopped by it (PID 1 owns it), only no longer followed.
func interrupted(ctx context.Context) error {
	return fmt.Errorf("interrupted (%v) while the stage runs; it goes on under PID 1", context.Cause(ctx))
}
