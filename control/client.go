package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/warmpod/warmpod/internal/jsondec"
)

// Client is the typed client of PID 1's control socket: one method per
// operation, so no caller builds a Request by hand and every request's
// shape is pinned by the golden files in testdata/golden (see
// golden_test.go). Each method makes one connection (Call) and returns
// PID 1's Response as it came: a Response with OK false carries PID 1's
// refusal and the exit code to use (Code); a non-nil error means PID 1
// was not reached or the exchange broke (exit ExitUnavailable).
type Client struct {
	// Socket is the path of PID 1's control socket (--control-socket).
	Socket string
	// Timeout bounds each exchange on top of ctx (0: ctx alone). Leave it
	// 0 for a Client that waits (Wait may last as long as its timeout).
	Timeout time.Duration
}

// StageRequest is what Client.Stage starts.
type StageRequest struct {
	// Job is the job holding the lease (the request renews it).
	Job string
	// Stage is the stage's name (ValidStageName).
	Stage string
	// Argv is the stage leader's command line; Argv[0] an absolute path.
	Argv []string
	// Dir is the leader's working directory; empty: PID 1's.
	Dir string
	// SHA256 is the hex digest of the stage's script: a second request
	// with the same name and digest attaches instead of running it again.
	SHA256 string
}

// Start claims the pod for the job spec line (a JobSpec, as JSON): the
// spec holds secrets, so the caller clears its copy after the call.
// Errors: spec is not valid JSON (nothing is sent), or Call's.
func (c Client) Start(ctx context.Context, spec json.RawMessage) (*Response, error) {
	if !json.Valid(spec) {
		return nil, errors.New("job spec: not valid JSON")
	}
	return c.do(ctx, &Request{Op: OpJobStart, Spec: spec})
}

// End ends the job (job may be empty: the current one).
func (c Client) End(ctx context.Context, job string) (*Response, error) {
	return c.do(ctx, &Request{Op: OpJobEnd, Job: job})
}

// Env returns the job's environment in Response.Env ("KEY=VALUE").
func (c Client) Env(ctx context.Context, job string) (*Response, error) {
	return c.do(ctx, &Request{Op: OpJobEnv, Job: job})
}

// Status returns PID 1's status document in Response.Status.
func (c Client) Status(ctx context.Context) (*Response, error) {
	return c.do(ctx, &Request{Op: OpStatus})
}

// Probe asks for the "live" or "ready" check; Response.OK is the result.
func (c Client) Probe(ctx context.Context, kind string) (*Response, error) {
	return c.do(ctx, &Request{Op: OpProbe, Probe: kind})
}

// JobStatus returns the job's status (a JobStatus in Data, with LogPath,
// JobDir and User set), or with stage set that stage's StageStatus.
func (c Client) JobStatus(ctx context.Context, job, stage string) (*Response, error) {
	return c.do(ctx, &Request{Op: OpJobStatus, Job: job, Stage: stage})
}

// Stage starts (or, with the same digest, attaches to) a stage; Data holds
// its StageStatus.
func (c Client) Stage(ctx context.Context, r StageRequest) (*Response, error) {
	return c.do(ctx, &Request{Op: OpJobStage, Job: r.Job, Stage: r.Stage, Argv: r.Argv, Dir: r.Dir, SHA256: r.SHA256})
}

// Wait waits up to timeout for the stage to end; Data holds its
// StageStatus. A stage still running at the timeout answers
// ExitTempFail.
func (c Client) Wait(ctx context.Context, job, stage string, timeout time.Duration) (*Response, error) {
	return c.do(ctx, &Request{Op: OpJobWait, Job: job, Stage: stage, Duration: timeout.String()})
}

// Cancel kills the job's processes, or stage's only when stage is set;
// grace is the SIGTERM → SIGKILL delay (0: PID 1's --grace).
func (c Client) Cancel(ctx context.Context, job, stage string, grace time.Duration) (*Response, error) {
	d := ""
	if grace > 0 {
		d = grace.String()
	}
	return c.do(ctx, &Request{Op: OpJobCancel, Job: job, Stage: stage, Duration: d})
}

// Renew is the lease's heartbeat for job.
func (c Client) Renew(ctx context.Context, job string) (*Response, error) {
	return c.do(ctx, &Request{Op: OpJobRenew, Job: job})
}

// Put registers the caller's write of the temporary file path for job, so
// that PID 1 removes it if the job ends before the write is done.
func (c Client) Put(ctx context.Context, job, path string) (*Response, error) {
	return c.do(ctx, &Request{Op: OpJobPut, Job: job, Path: path})
}

// Stall stalls PID 1's main loop for d, a Go duration passed as given
// (test hook: PID 1 needs WARMPOD_TEST_HOOKS=1).
func (c Client) Stall(ctx context.Context, d string) (*Response, error) {
	return c.do(ctx, &Request{Op: OpStall, Duration: d})
}

func (c Client) do(ctx context.Context, req *Request) (*Response, error) {
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	return Call(ctx, c.Socket, req)
}

// StageStatus decodes Data as a stage's status (the answer of Stage,
// Wait, and JobStatus with a stage). Errors: Data is not one.
func (r *Response) StageStatus() (StageStatus, error) {
	var s StageStatus
	if err := jsondec.Value(r.Data, stageStatusFunc(&s)); err != nil {
		return StageStatus{}, fmt.Errorf("bad stage status: %w", err)
	}
	return s, nil
}

// JobStatus decodes Data as the job's status (the answer of JobStatus
// without a stage). Errors: Data is not one.
func (r *Response) JobStatus() (JobStatus, error) {
	var s JobStatus
	if err := jsondec.Value(r.Data, jobStatusFunc(&s)); err != nil {
		return JobStatus{}, fmt.Errorf("bad job status: %w", err)
	}
	return s, nil
}
