package stageclient

import (
	"context"
	"fmt"
	"time"

	"github.com/warmpod/warmpod/control"
)

// Source answers what a stream asks PID 1 about its stage. job names the
// job, which renews its lease; it is empty when the call must not (the
// executor is gone).
type Source interface {
	// Status returns the stage's status now.
	Status(ctx context.Context, job, stage string) (control.StageStatus, error)
	// Wait blocks until the stage has ended or timeout has passed; ended
	// is false when it still runs.
	Wait(ctx context.Context, job, stage string, timeout time.Duration) (st control.StageStatus, ended bool, err error)
	// Renew is the lease's heartbeat; its failure is not the stream's
	// (the next call that names the job is refused if the lease is gone).
	Renew(ctx context.Context, job string)
}

// ControlSource is the Source of PID 1's control socket.
type ControlSource struct {
	// Client reaches PID 1; leave its Timeout 0 (a wait lasts up to an
	// hour).
	Client control.Client
}

// Status implements Source with job.status. Errors: PID 1 not reached,
// refused the call (its message and exit code), or answered no status.
func (c ControlSource) Status(ctx context.Context, job, stage string) (control.StageStatus, error) {
	r, err := c.Client.JobStatus(ctx, job, stage)
	return stageAnswer(r, err)
}

// Wait implements Source with job.wait.
func (c ControlSource) Wait(ctx context.Context, job, stage string, timeout time.Duration) (control.StageStatus, bool, error) {
	r, err := c.Client.Wait(ctx, job, stage, timeout)
	if err == nil && r.Code == control.ExitTempFail {
		return control.StageStatus{}, false, nil
	}
	st, err := stageAnswer(r, err)
	return st, err == nil, err
}

// Renew implements Source with job.renew, bounded by 2 s so that a
// stalled PID 1 does not hold up the stream.
func (c ControlSource) Renew(ctx context.Context, job string) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, _ = c.Client.Renew(rctx, job)
}

func stageAnswer(r *control.Response, err error) (control.StageStatus, error) {
	if err != nil {
		return control.StageStatus{}, fmt.Errorf("PID 1: %w", err)
	}
	if !r.OK {
		return control.StageStatus{}, fmt.Errorf("PID 1: %s (exit %d)", r.Error, r.Code)
	}
	st, err := r.StageStatus()
	if err != nil {
		return control.StageStatus{}, fmt.Errorf("PID 1: %w", err)
	}
	return st, nil
}
