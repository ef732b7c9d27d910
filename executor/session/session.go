// Package session makes a CI job's calls into the pod it holds: run a
// stage with resume and cancel (`warmpod job stage`, `job cancel
// --stage`), renew the lease, end the job and delete its pods. It is what
// a driver's per-call process (a GitLab stage, an Actions step) needs, so
// it imports no client-go and no Kubernetes types: those are the claim's
// (package executor, on executor/pool), and a per-call process does not
// pay their start-up (issue 40). Its pods and owners are package
// poolapi's; its command lines package podcmd's.
package session

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/warmpod/warmpod/podcmd"
	"github.com/warmpod/warmpod/poolapi"
)

// Cluster is what a job's calls need of Kubernetes: exec into the pod,
// delete it, list the job's pods. *pool.Cluster is the real one, the
// job's multiplexer (executor/mux) carries the same calls over one
// stream, tests use a fake.
type Cluster interface {
	// Exec runs argv in the pod and returns its exit code; an error means
	// the stream failed and the command's fate is unknown.
	Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
	// Delete deletes the pod (uid precondition); gone is no error.
	Delete(ctx context.Context, p poolapi.Pod) error
	// PodsOfJob lists the pods labelled for owner.
	PodsOfJob(ctx context.Context, owner poolapi.Owner) ([]poolapi.Pod, error)
}

// BulkExecer is a Cluster with a second transport for an exec that
// carries many bytes or lives long (pool.Cluster.ExecBulk: SPDY first,
// which the API server passes through as it is).
type BulkExecer interface {
	ExecBulk(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// BulkExec is cl's ExecBulk when it has one (BulkExecer), else its Exec
// (a test's fake Cluster).
func BulkExec(cl Cluster) func(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if b, ok := cl.(BulkExecer); ok {
		return b.ExecBulk
	}
	return cl.Exec
}

// Session makes a job's calls over a Cluster. Its fields are set once; a
// Session is used by one process (one CI call) at a time.
type Session struct {
	Cluster Cluster
	// Log gets the executor's own messages, one line each ("warmpod: …"):
	// the CI system's job log.
	Log io.Writer
	// LeaseTTL is the job's lease heartbeat in the pod: an executor that
	// vanishes leaves a pod that ends the job within it and then drains
	// (0: no heartbeat, only the job's timeout).
	LeaseTTL time.Duration
	// MaxStreamRetries bounds how often RunStage reattaches to a stage
	// after a broken exec stream.
	MaxStreamRetries int
	// CancelGrace is the grace period RunStage's cancel gives the stage
	// (SIGTERM, then SIGKILL after it); 0: the pod's --grace.
	CancelGrace time.Duration
	// Shell is the interpreter of RunStage's scripts in the pod, `job
	// stage --shell` (a path, or a name looked up in the job's PATH);
	// empty: auto, bash if the image has it (GitLab's scripts need it).
	Shell string
}

// SystemError is a failure of the pod, the cluster or a stream (not of
// the job's own code): each CI system reports it as its own kind of
// failure (GitLab's $SYSTEM_FAILURE_EXIT_CODE, a hook's non-zero exit).
type SystemError struct{ Err error }

func (e *SystemError) Error() string { return e.Err.Error() }
func (e *SystemError) Unwrap() error { return e.Err }

// Errorf returns a *SystemError.
func Errorf(format string, a ...any) error { return &SystemError{Err: fmt.Errorf(format, a...)} }

// DeletePod deletes p (bounded by 15 s, also when ctx is cancelled: a
// cancelled call must still leave no pod); a failure is logged.
func (c *Session) DeletePod(ctx context.Context, p poolapi.Pod) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := c.Cluster.Delete(dctx, p); err != nil {
		fmt.Fprintf(c.Log, "warmpod: delete pod %s: %v\n", p.Name, err)
	}
}

// End ends the job in its pod (`warmpod job end`: its processes stopped,
// its token and files wiped; the pod then drains and deletes itself) and
// deletes the pod as well, so it goes also when it cannot delete itself
// (no RoleBinding) or when job end failed. A pod with sidecars is only
// deleted (see below). pod may be nil (the CI system
// lost track of it). Pods labelled for owner other than pod (a call that
// died between creating a pod and recording it) are deleted too. End
// never fails: errors are logged.
func (c *Session) End(ctx context.Context, pod *poolapi.Pod, jobID string, owner poolapi.Owner) {
	// The job's pods are listed while the job ends: the list does not
	// depend on it (the job's own pod is told apart by its uid), and the
	// call then waits for one round trip less.
	type listed struct {
		pods []poolapi.Pod
		err  error
	}
	lc := make(chan listed, 1)
	go func() {
		pods, err := c.Cluster.PodsOfJob(ctx, owner)
		lc <- listed{pods, err}
	}()
	if pod != nil && pod.Sidecars > 0 {
		// A pod with sidecars is deleted at once, with the sidecars' short
		// grace (pool.SidecarGrace): the kubelet's SIGTERM makes warmpod
		// end the job as job end would (the job's processes stopped, its
		// secrets gone with the pod's tmpfs). After a job end, warmpod's
		// own deletion of its pod would come first, with the template's
		// grace period, and a service that ignores SIGTERM would keep the
		// pod Terminating for all of it.
		c.DeletePod(ctx, *pod)
	} else if pod != nil {
		var errb bytes.Buffer
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		code, err := c.Cluster.Exec(cctx, *pod, podcmd.JobEnd{Bin: pod.Bin, Job: jobID}.Argv(), nil, io.Discard, &errb)
		cancel()
		if err != nil || code != 0 {
			fmt.Fprintf(c.Log, "warmpod: job end in pod %s: exit %d %v %s\n", pod.Name, code, err, strings.TrimSpace(errb.String()))
		}
		c.DeletePod(ctx, *pod)
	}
	l := <-lc
	if l.err != nil {
		fmt.Fprintf(c.Log, "warmpod: list pods of job %s: %v\n", jobID, l.err)
		return
	}
	for _, p := range l.pods {
		if pod == nil || p.UID != pod.UID {
			c.DeletePod(ctx, p)
		}
	}
}

// KeepAlive renews the lease of job jobID in pod every LeaseTTL/3 until
// the returned stop is called: for a CI system that holds a job without a
// stage running in its pod (an Actions container step runs in a pod of its
// own), so the pod's lease does not lapse meanwhile. A failed renewal is
// logged; the next one tries again. Without a LeaseTTL there is nothing to
// renew.
func (c *Session) KeepAlive(ctx context.Context, pod poolapi.Pod, jobID string) (stop func()) {
	if c.LeaseTTL <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(c.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var errb bytes.Buffer
			rctx, rcancel := context.WithTimeout(ctx, c.LeaseTTL/3)
			// `job status --job` renews the lease it names (the heartbeat
			// job stage and job logs --follow send while they run).
			code, err := c.Cluster.Exec(rctx, pod, podcmd.JobStatus{Bin: pod.Bin, Job: jobID}.Argv(), nil, io.Discard, &errb)
			rcancel()
			if (err != nil || code != 0) && ctx.Err() == nil {
				fmt.Fprintf(c.Log, "warmpod: renew the lease of job %s in pod %s: exit %d %v %s\n", jobID, pod.Name, code, err, strings.TrimSpace(errb.String()))
			}
		}
	}()
	return func() { cancel(); <-done }
}
