package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warmpod/warmpod/control"
)

// Handle serves one control request: the one adapter between the control
// protocol and the supervisor's operations, and the one place where their
// errors become exit codes (ExitCode).
func (s *Supervisor) Handle(_ context.Context, peer control.Peer, req *control.Request) control.Response {
	if req.Job != "" && strings.HasPrefix(req.Op, "job.") && req.Op != control.OpJobStart && req.Op != control.OpJobRenew {
		// A call for a named job is for that job only, and it is a
		// heartbeat for its lease. The operation checks the job again on
		// the loop: the job may end in between.
		if err := s.Renew(req.Job); err != nil {
			return s.fail(fmt.Errorf("job %q: %w", req.Job, err))
		}
	}
	switch req.Op {
	case control.OpJobStart:
		r, err := s.StartJob(req.Spec)
		if err != nil {
			return s.fail(err)
		}
		return s.ok(control.Response{Job: r.ID, Replay: r.Replay, LogPath: r.LogPath})
	case control.OpJobEnd:
		r, err := s.EndJob(req.Job, peer.PID)
		if err != nil {
			return s.fail(err)
		}
		return s.ok(control.Response{Job: r.ID})
	case control.OpJobEnv:
		r, err := s.JobEnv()
		if err != nil {
			return s.fail(err)
		}
		return s.ok(control.Response{Job: r.ID, Env: r.Env, User: r.User, LogPath: r.LogPath})
	case control.OpJobStage:
		r, err := s.StartStage(req.Job, req.Stage, req.Argv, req.Dir, req.SHA256)
		if err != nil {
			return s.fail(err)
		}
		return control.Response{OK: true, Job: r.Job, Replay: r.Replay, Data: r.Status}
	case control.OpJobStatus:
		r, err := s.JobStatus(req.Stage)
		if err != nil {
			return s.fail(err)
		}
		return s.ok(control.Response{Job: r.ID, Data: r.Status, LogPath: r.LogPath, JobDir: r.Dir, User: r.User})
	case control.OpJobWait:
		d, err := parseDuration(req.Duration, time.Hour)
		if err != nil {
			return s.fail(err)
		}
		r, err := s.WaitStage(req.Stage, d)
		if err != nil {
			resp := s.fail(err)
			resp.Job, resp.Data = r.Job, r.Status // still running: its status so far
			return resp
		}
		return control.Response{OK: true, Job: r.Job, Data: r.Status}
	case control.OpJobCancel:
		d, err := parseDuration(req.Duration, s.cfg.Grace)
		if err != nil {
			return s.fail(err)
		}
		if req.Stage != "" {
			r, err := s.CancelStage(req.Job, req.Stage, peer.PID, d)
			if err != nil {
				return s.fail(err)
			}
			return s.ok(control.Response{Job: r.Job, Data: r.Status})
		}
		r, err := s.CancelJob(req.Job, peer.PID, d)
		if err != nil {
			return s.fail(err)
		}
		return s.ok(control.Response{Job: r.ID, Data: r.Status})
	case control.OpJobPut:
		r, err := s.StartPut(req.Job, peer.PID, req.Path)
		if err != nil {
			return s.fail(err)
		}
		return s.ok(control.Response{Job: r.ID, User: r.User})
	case control.OpJobRenew:
		if err := s.Renew(req.Job); err != nil {
			return s.fail(err)
		}
		return s.ok(control.Response{Job: req.Job})
	case control.OpStall:
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
	case control.OpStatus:
		return s.ok(control.Response{Status: s.StatusJSON()})
	case control.OpProbe:
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
	return s.fail(errorf(ErrUsage, "unknown operation %q", req.Op))
}

// ok completes a successful response with the pod's state.
func (s *Supervisor) ok(r control.Response) control.Response {
	r.OK, r.State = true, s.State()
	return r
}

// fail is the response for err: its exit code (ExitCode), its message and
// the pod's state.
func (s *Supervisor) fail(err error) control.Response {
	return control.Response{Code: ExitCode(err), Error: err.Error(), State: s.State()}
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
