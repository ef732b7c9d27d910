package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/jsonenc"
)

// Handle serves one control request: the one adapter between the control
// protocol and the supervisor's operations, the one place where their
// errors become exit codes (ExitCode) and where their typed results become
// JSON (the documents in control.Response's Data and Status).
func (s *Supervisor) Handle(_ context.Context, peer control.Peer, req *control.Request) control.Response {
	if req.Job != "" && strings.HasPrefix(req.Op, "job.") && req.Op != control.OpJobStart && req.Op != control.OpJobRenew {
		// A call for a named job is for that job only, and it is a
		// heartbeat for its lease. The operation checks the job again on
		// the loop: the job may end in between.
		if err := s.Renew(req.Job); err != nil {
			return s.fail(fmt.Errorf("job %q: %w", req.Job, err))
		}
	}
	h, ok := s.handlers()[req.Op]
	if !ok {
		return s.fail(errorf(ErrUsage, "unknown operation %q", req.Op))
	}
	return h(peer, req)
}

// handler serves one operation of the control protocol.
type handler func(peer control.Peer, req *control.Request) control.Response

func (s *Supervisor) handlers() map[string]handler {
	return map[string]handler{
		control.OpJobStart:  s.handleJobStart,
		control.OpJobEnd:    s.handleJobEnd,
		control.OpJobEnv:    s.handleJobEnv,
		control.OpJobStage:  s.handleJobStage,
		control.OpJobStatus: s.handleJobStatus,
		control.OpJobWait:   s.handleJobWait,
		control.OpJobCancel: s.handleJobCancel,
		control.OpJobPut:    s.handleJobPut,
		control.OpJobRenew:  s.handleJobRenew,
		control.OpStall:     s.handleStall,
		control.OpStatus:    s.handleStatus,
		control.OpProbe:     s.handleProbe,
	}
}

func (s *Supervisor) handleJobStart(_ control.Peer, req *control.Request) control.Response {
	r, err := s.StartJob(req.Spec)
	if err != nil {
		// The executor sees the answer; an operator reading PID 1's log
		// must see it too. Busy, claimed elsewhere (75) or draining (69)
		// is routine in a pool; a bad spec (65) is worth a warning; a
		// failed start (70) was logged as an error where it failed.
		// Spec errors never quote the spec's values (jobspec.SpecError),
		// so this logs no secret.
		code := ExitCode(err)
		switch code {
		case control.ExitTempFail, control.ExitUnavailable:
			s.log.Info("job start refused", "code", code, "error", err)
		case control.ExitSoftware:
		default:
			s.log.Warn("job start refused", "code", code, "error", err)
		}
		return s.fail(err)
	}
	return s.ok(control.Response{Job: r.ID, Replay: r.Replay, LogPath: r.LogPath})
}

func (s *Supervisor) handleJobEnd(peer control.Peer, req *control.Request) control.Response {
	r, err := s.EndJob(req.Job, peer.PID)
	if err != nil {
		return s.fail(err)
	}
	return s.ok(control.Response{Job: r.ID})
}

func (s *Supervisor) handleJobEnv(control.Peer, *control.Request) control.Response {
	r, err := s.JobEnv()
	if err != nil {
		return s.fail(err)
	}
	return s.ok(control.Response{Job: r.ID, Env: r.Env, User: r.User, LogPath: r.LogPath})
}

func (s *Supervisor) handleJobStage(_ control.Peer, req *control.Request) control.Response {
	r, err := s.StartStage(req.Job, req.Stage, req.Argv, req.Dir, req.SHA256)
	if err != nil {
		return s.fail(err)
	}
	return control.Response{OK: true, Job: r.Job, Replay: r.Replay, Data: doc(r.Status)}
}

func (s *Supervisor) handleJobStatus(_ control.Peer, req *control.Request) control.Response {
	r, err := s.JobStatus(req.Stage)
	if err != nil {
		return s.fail(err)
	}
	data := doc(r.Job)
	if r.Stage != nil {
		data = doc(r.Stage)
	}
	return s.ok(control.Response{Job: r.ID, Data: data, LogPath: r.LogPath, JobDir: r.Dir, User: r.User})
}

func (s *Supervisor) handleJobWait(_ control.Peer, req *control.Request) control.Response {
	d, err := parseDuration(req.Duration, time.Hour)
	if err != nil {
		return s.fail(err)
	}
	r, err := s.WaitStage(req.Stage, d)
	if err != nil {
		resp := s.fail(err)
		resp.Job, resp.Data = r.Job, doc(r.Status) // still running: its status so far
		return resp
	}
	return control.Response{OK: true, Job: r.Job, Data: doc(r.Status)}
}

func (s *Supervisor) handleJobCancel(peer control.Peer, req *control.Request) control.Response {
	d, err := parseDuration(req.Duration, s.cfg.Grace)
	if err != nil {
		return s.fail(err)
	}
	if req.Stage != "" {
		r, err := s.CancelStage(req.Job, req.Stage, peer.PID, d)
		if err != nil {
			return s.fail(err)
		}
		return s.ok(control.Response{Job: r.Job, Data: doc(r.Status)})
	}
	r, err := s.CancelJob(req.Job, peer.PID, d)
	if err != nil {
		return s.fail(err)
	}
	return s.ok(control.Response{Job: r.ID, Data: doc(r.Status)})
}

func (s *Supervisor) handleJobPut(peer control.Peer, req *control.Request) control.Response {
	r, err := s.StartPut(req.Job, peer.PID, req.Path)
	if err != nil {
		return s.fail(err)
	}
	return s.ok(control.Response{Job: r.ID, User: r.User})
}

func (s *Supervisor) handleJobRenew(_ control.Peer, req *control.Request) control.Response {
	if err := s.Renew(req.Job); err != nil {
		return s.fail(fmt.Errorf("job %q: %w", req.Job, err))
	}
	return s.ok(control.Response{Job: req.Job})
}

func (s *Supervisor) handleStall(_ control.Peer, req *control.Request) control.Response {
	if !s.cfg.TestHooks {
		return s.fail(errorf(ErrUsage, "test hooks are off (WARMPOD_TEST_HOOKS=1)"))
	}
	d, err := parseDuration(req.Duration, time.Minute)
	if err == nil {
		err = s.Stall(d)
	}
	if err != nil {
		return s.fail(err)
	}
	return control.Response{OK: true}
}

func (s *Supervisor) handleStatus(control.Peer, *control.Request) control.Response {
	return s.ok(control.Response{Status: doc(new(s.podStatus()))})
}

func (s *Supervisor) handleProbe(_ control.Peer, req *control.Request) control.Response {
	var err error
	switch req.Probe {
	case "live":
		err = errors.Join(s.Live(), s.Reaping())
	case "ready":
		err = errors.Join(s.Ready(), s.ShellUp())
	default:
		return s.fail(errorf(ErrUsage, "probe: want live or ready"))
	}
	if err != nil {
		// A failed probe is exit 1, as an exec probe's command fails.
		return control.Response{Code: 1, Error: err.Error(), State: s.State()}
	}
	return s.ok(control.Response{})
}

// ok completes a successful response with the pod's state.
func (s *Supervisor) ok(r control.Response) control.Response {
	r.OK, r.State = true, s.State()
	return r
}

// fail is the response for err: its exit code (ExitCode), its message and
// the pod's state.
func (s *Supervisor) fail(err error) control.Response {
	return control.Response{Code: ExitCode(err), Error: err.Error(), Refusal: RefusalOf(err), State: s.State()}
}

// doc marshals a result's document for the wire; nil (the field is left
// out) when there is none. The documents hold strings, numbers and times
// only, so marshalling cannot fail.
func doc[T any, P interface {
	*T
	jsonenc.Appender
}](v P) json.RawMessage {
	if v == nil {
		return nil
	}
	return v.AppendJSON(nil)
}

// parseDuration parses a non-negative Go duration, def when empty. Errors
// (ErrUsage) name the value.
func parseDuration(v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errorf(ErrUsage, "duration %q: want a Go duration such as 30s", v)
	}
	return d, nil
}
