package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/podcmd"
	"github.com/warmpod/warmpod/poolapi"
)

// RunStage runs one stage of job jobID in pod: script goes to the pod on
// the exec's stdin, `warmpod job stage` runs it detached under the pod's
// PID 1 and streams its output back to stdout (warmpod's own messages to
// stderr). A broken stream is reattached with --offset (bytes already
// written to stdout), so the stage never runs twice and no byte is lost or
// repeated. A value on cancel (the CI system's cancel or timeout) becomes
// `warmpod job cancel --stage` in the pod, so the stage's traps run and
// nothing of it survives, and RunStage still streams the stage to its end.
// It returns the stage's final status (its ExitCode set). Errors are
// *SystemError: warmpod refused the stage, the stream failed more than
// MaxStreamRetries times, or the Cluster's Exec returned a *SystemError
// (an exec that never began: it is not retried).
func (c *Session) RunStage(ctx context.Context, pod poolapi.Pod, jobID, name string, script []byte, stdout, stderr io.Writer, cancel <-chan struct{}) (*control.StageStatus, error) {
	sum := sha256.Sum256(script)
	digest := hex.EncodeToString(sum[:])

	runDone := make(chan struct{})
	defer close(runDone)
	go func() {
		select {
		case <-cancel:
		case <-ctx.Done():
			return
		case <-runDone:
			return
		}
		c.cancelStage(ctx, pod, jobID, name, runDone)
	}()

	out := &countingWriter{w: stdout}
	var lastErr error
	for attempt := 0; ; attempt++ {
		errs := &stderrParser{w: stderr}
		argv := podcmd.JobStage{Bin: pod.Bin, Job: jobID, Stage: name, Size: len(script), SHA256: digest, Offset: out.n, Shell: c.Shell}.Argv()
		stdin := newHoldOpen(script)
		code, err := c.Cluster.Exec(ctx, pod, argv, stdin, out, errs)
		stdin.close()
		errs.flush()
		if f := errs.final(out.n); f != nil {
			if f.ExitCode == nil {
				return nil, Errorf("stage %s: no exit code", name)
			}
			return f, nil
		}
		if se := (*SystemError)(nil); errors.As(err, &se) {
			// Not a broken stream: the exec never began (no client could
			// be set up, say), and asking again gets the same answer.
			return nil, err
		}
		if err == nil && len(errs.lines) > 0 {
			// The call ran the stage but ended before all its output
			// arrived: reattach.
			err = fmt.Errorf("the stream ended %d bytes into the stage's output", out.n)
		}
		if err == nil {
			// warmpod's own error (usage, no job, bad script, no shell):
			// the stage did not run, or its outcome is unknown.
			return nil, Errorf("warmpod job stage in pod %s: exit %d: %s", pod.Name, code, errs.lastMessage())
		}
		lastErr = err
		if attempt >= c.MaxStreamRetries || ctx.Err() != nil {
			return nil, Errorf("stage %s: exec stream to pod %s failed %d times: %v", name, pod.Name, attempt+1, lastErr)
		}
		fmt.Fprintf(stderr, "\nwarmpod: exec stream to pod %s broke (%v): reattaching at byte %d\n", pod.Name, err, out.n)
		select {
		case <-time.After(time.Duration(attempt+1) * 500 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// cancelStage asks the pod's PID 1 to cancel stage name until it has, or
// the stage has ended on its own (done closed), for 2 minutes at most:
// the stage may not be registered (69) or started (75) yet when the
// cancel comes.
func (c *Session) cancelStage(ctx context.Context, pod poolapi.Pod, jobID, name string, done <-chan struct{}) {
	fmt.Fprintf(c.Log, "warmpod: cancelling stage %s in pod %s\n", name, pod.Name)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	argv := podcmd.JobCancel{Bin: pod.Bin, Job: jobID, Stage: name, Grace: c.CancelGrace}.Argv()
	for {
		var errb bytes.Buffer
		code, err := c.Cluster.Exec(cctx, pod, argv, nil, io.Discard, &errb)
		if err == nil && code == 0 {
			return
		}
		select {
		case <-done:
			return
		case <-cctx.Done():
			fmt.Fprintf(c.Log, "warmpod: cancel of stage %s: exit %d %v %s\n", name, code, err, strings.TrimSpace(errb.String()))
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// countingWriter counts the bytes that reached the output: the offset a
// reattach resumes from.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// stderrParser splits `warmpod job stage`'s stderr: its status lines
// (control.StageStatus) are kept, everything else goes on to w.
type stderrParser struct {
	w     io.Writer
	buf   []byte
	lines []control.StageStatus
	msg   string
}

func (p *stderrParser) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.line(p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *stderrParser) line(l []byte) {
	if bytes.HasPrefix(l, []byte(`{"stage":`)) {
		var s control.StageStatus
		if json.Unmarshal(l, &s) == nil {
			p.lines = append(p.lines, s)
			return
		}
	}
	if len(bytes.TrimSpace(l)) > 0 {
		p.msg = string(l)
	}
	_, _ = fmt.Fprintf(p.w, "%s\n", l)
}

func (p *stderrParser) flush() {
	if len(p.buf) > 0 {
		p.line(p.buf)
		p.buf = nil
	}
}

// final is the stage's final status line, if the call printed it and the
// output holds all of the stage's output (received bytes, over every
// attempt, reach log_end − log_start): a stream that broke after the
// status line but before the last output bytes is reattached, not taken
// for the end.
func (p *stderrParser) final(received int64) *control.StageStatus {
	for i := len(p.lines) - 1; i >= 0; i-- {
		l := &p.lines[i]
		if !l.Running && l.ExitCode != nil {
			if l.LogEnd != nil && received < *l.LogEnd-l.LogStart {
				return nil
			}
			return l
		}
	}
	return nil
}

func (p *stderrParser) lastMessage() string { return p.msg }

// holdOpen is an exec's stdin: the script, then nothing until close. The
// pod's `warmpod job stage` takes the end of its stdin for the end of the
// executor and stops renewing the job's lease.
type holdOpen struct {
	r    *bytes.Reader
	done chan struct{}
	once sync.Once
}

func newHoldOpen(b []byte) *holdOpen {
	return &holdOpen{r: bytes.NewReader(b), done: make(chan struct{})}
}

func (h *holdOpen) Read(p []byte) (int, error) {
	if h.r.Len() > 0 {
		return h.r.Read(p)
	}
	<-h.done
	return 0, io.EOF
}

// Held returns what is left of the script before the stdin is held open
// (a fake Cluster reads the script without waiting for the end).
func (h *holdOpen) Held() []byte {
	b := make([]byte, h.r.Len())
	_, _ = h.r.Read(b)
	return b
}

func (h *holdOpen) close() { h.once.Do(func() { close(h.done) }) }
