// Package executor is the CI-neutral core of warmpod's executor side: get
// a pod for a job (claim a Ready idle pod of the job image's pool, or
// create a cold one from the pool's template) and hand the job to warmpod
// in the pod (`warmpod job start`, the token and variables on stdin).
// What follows on that pod (stages with resume and cancel, the lease, job
// end and the sweep) is package executor/session's, which a driver's
// per-call process uses without this package's Kubernetes types. Each CI
// system's contract lives in a package of its own below this one
// (executor/gitlab: GitLab Runner's Custom executor; executor/github: the
// Actions runner's container hook) and keeps the job's pod between its
// calls its own way. executor/pool is the Kubernetes side (client-go).
package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/podcmd"
	"github.com/warmpod/warmpod/poolapi"
)

// Cluster is what the core needs of Kubernetes: a job's calls
// (session.Cluster) and Claims. *pool.Cluster is the real one, tests use
// a fake.
type Cluster interface {
	session.Cluster
	Claims
}

// Claims gets a job its pod: read the pools, claim a warm pod (resized
// in place) or create a cold one.
type Claims interface {
	// Pools reads the pool Deployments of the namespace
	// ([pool.Cluster.Pools]): their live templates, and the current
	// ReplicaSet's pod-template-hash as the hash of the pods to claim.
	Pools(ctx context.Context) (*pool.Set, error)
	// ClaimWarm claims a Ready idle pod of p for owner within wait,
	// resized in place to fit first when fit is set; nil when there is
	// none ([pool.Cluster.ClaimWarm]).
	ClaimWarm(ctx context.Context, p pool.Pool, owner poolapi.Owner, wait time.Duration, fit *corev1.ResourceRequirements) (*poolapi.Pod, error)
	// AwaitResize waits until the kubelet has applied the in-place resize
	// the claim sent, asking the pod through via
	// ([pool.Cluster.AwaitResize]).
	AwaitResize(ctx context.Context, p poolapi.Pod, timeout time.Duration, via pool.Execer) error
	// Nodes lists the nodes a template's pods may run on, with what each
	// can allocate ([pool.Cluster.Nodes]).
	Nodes(ctx context.Context, t *corev1.PodTemplateSpec) ([]pool.Node, error)
	// ClaimStarting claims the pod of p that has been starting the
	// longest, annotated as a cold start of why, and waits until it is
	// Ready (at most timeout); nil when none is starting
	// ([pool.Cluster.ClaimStarting]).
	ClaimStarting(ctx context.Context, p pool.Pool, owner poolapi.Owner, why pool.Cold, timeout time.Duration) (*poolapi.Pod, error)
	// CreateCold creates a pod from p's template, annotated with why, and
	// waits until it is Ready (at most timeout).
	CreateCold(ctx context.Context, p pool.Pool, owner poolapi.Owner, why pool.Cold, timeout time.Duration) (poolapi.Pod, error)
}

// Core runs the CI-neutral steps of a job: the claim here, the calls on
// the pod through its Session (its Cluster reaches the pod, often
// through the job's multiplexer). Its fields are set once; a Core is used
// by one process (one CI call) at a time.
type Core struct {
	session.Session
	// Claims claims or creates the job's pod (the cluster itself, never
	// the multiplexer).
	Claims Claims
	// WarmWait is how long Prepare waits for a Ready idle pod before it
	// falls back to a cold pod (0: one look).
	WarmWait time.Duration
	// ResizeTimeout bounds the wait for an in-place resize of a warm pod;
	// when it is not applied by then the pod is released and the job gets
	// a cold pod with its resources.
	ResizeTimeout time.Duration
	// ReadyTimeout bounds the wait for a cold pod to be Ready.
	ReadyTimeout time.Duration
	// RBAC names the manifest of the executor's Role, for the errors of
	// calls the API server forbids ("deploy/gitlab-rbac.yaml").
	RBAC string
	// NodesRBAC says what lets the account read the nodes (cluster-scoped:
	// a ClusterRole and its binding), for the trace of a node-fit check the
	// API server forbids.
	NodesRBAC string
	// Warn, when set, shows a warning (one line, no prefix) the way the
	// CI system shows them; nil: a "WARNING:" line in Log.
	Warn func(msg string)
	// Attach, when set, is called by Prepare with each pod it got, before
	// job start: it returns the Cluster to start the job through (the
	// job's multiplexer, which opens its stream into the pod meanwhile, so
	// the first stage finds it ready) and release, called with whether the
	// pod took the job (false: the multiplexer is stopped).
	Attach func(pod poolapi.Pod) (cl session.Cluster, release func(ok bool))
}

// Job is what Prepare hands to the pod's warmpod at job start.
type Job struct {
	// ID names the job in the pod (warmpod's lease) and, in Owner, labels
	// the pod: a Kubernetes label value (at most 63 bytes of
	// [A-Za-z0-9._-]).
	ID string
	// Token is the job's token: $CI_JOB_TOKEN in the pod, on job start's
	// stdin only. May be empty.
	Token string
	// Timeout is the job's time limit (0: one hour). The lease in the pod
	// gets LeaseMargin more: the CI system enforces its timeout itself and
	// still runs its clean-up calls after it.
	Timeout time.Duration
	// Variables become the job's environment in the pod (job start's
	// stdin, never argv).
	Variables []control.JobVariable
	// Owner labels a claimed or cold pod for the job.
	Owner poolapi.Owner
}

// LeaseMargin is added to a job's timeout for warmpod's lease.
const LeaseMargin = 10 * time.Minute

// maxLease is the longest job timeout warmpod's job start accepts.
const maxLease = 168 * time.Hour

// acquire gets a pod for job and hands the job to it: a warm pod of
// pl.pool when pl.warm and one is Ready within WarmWait (resized in place
// to pl.resize and waited for: awaitFit), else (notWarm) the pool's pod
// that is starting or a cold pod. A pod that refuses the job (75: busy or
// another configuration; 69: draining) is deleted and the next one
// tried, five times at most. Errors are *session.SystemError; a pod this call
// claimed or created is deleted on failure.
func (c *Core) acquire(ctx context.Context, pl plan, job Job, out *Prepared) (poolapi.Pod, error) {
	p, warm := pl.pool, pl.warm
	released := pl.released
	began := time.Now()
	for attempt := 0; attempt < 5; attempt++ {
		var pod *poolapi.Pod
		var err error
		var cl session.Cluster
		release := func(bool) {}
		if warm {
			pod, err = c.Claims.ClaimWarm(ctx, p, job.Owner, c.WarmWait, pl.resize)
			switch {
			case errors.Is(err, pool.ErrResizeUnsupported):
				// Every pod of the pool would be refused alike, and
				// none was claimed.
				fmt.Fprintf(c.Log, "warmpod: warm pods of pool %s cannot be resized in place: %v: creating a cold pod\n", p.Name, err)
				pod, warm, released = nil, false, true
			case err != nil:
				return poolapi.Pod{}, &session.SystemError{Err: err}
			}
			if pod != nil && pl.resize != nil {
				cl, release = c.attach(*pod)
				if err := c.awaitFit(ctx, cl, *pod, pl, out); err != nil {
					release(false)
					if err := c.unfit(ctx, *pod, err); err != nil {
						return poolapi.Pod{}, err
					}
					pod, warm, released, cl = nil, false, true, nil
				}
			}
		}
		if pod == nil {
			if pod, err = c.notWarm(ctx, pl, warm, released, job, began); err != nil {
				return poolapi.Pod{}, err
			}
		}
		if cl == nil {
			cl, release = c.attach(*pod)
		}
		code, msg, err := c.startJob(ctx, cl, job, *pod)
		if err == nil && code == 0 {
			release(true)
			return *pod, nil
		}
		release(false)
		c.DeletePod(ctx, *pod)
		out.ResizeSent, out.ResizeApplied = time.Time{}, time.Time{}
		if err != nil && forbidden(err) {
			// Every pod would be refused the same way: stop here rather
			// than burn the pool.
			return poolapi.Pod{}, session.Errorf("job start on pod %s: %v (the executor's account needs create and get on pods/exec: %s)", pod.Name, err, c.RBAC)
		}
		if err == nil && code != control.ExitTempFail && code != control.ExitUnavailable {
			return poolapi.Pod{}, session.Errorf("job start on pod %s: exit %d: %s", pod.Name, code, msg)
		}
		if err != nil {
			msg = err.Error()
		}
		fmt.Fprintf(c.Log, "warmpod: pod %s did not take the job (%s): trying another\n", pod.Name, msg)
	}
	return poolapi.Pod{}, session.Errorf("no pod took the job after 5 tries")
}

// notWarm gets a job its pod when it has no warm one (acquire): the
// pool's pod that is starting, when the job's pod would be the pool's own
// and one has just started, else a cold pod from pl.cold's template, or
// pl.pool's, annotated with why it is cold. began is when acquire began.
func (c *Core) notWarm(ctx context.Context, pl plan, warm, released bool, job Job, began time.Time) (*poolapi.Pod, error) {
	p, cp := pl.pool, pl.pool
	if pl.cold != nil {
		cp = *pl.cold
	}
	why := pool.Cold{Reason: poolapi.ColdReleased, Waited: time.Since(began)}
	coldTimeout := c.ReadyTimeout
	switch {
	case warm && p.Pending:
		why.Reason = poolapi.ColdPending
		fmt.Fprintf(c.Log, "warmpod: pool %s is rolling out a new template and has no pod of it yet: creating a cold pod (image %s)\n", p.Name, p.Image)
	case warm:
		why.Reason = poolapi.ColdNoIdle
		if pl.resize == nil && pl.cold == nil {
			// A pod of the pool that is starting is Ready sooner than a
			// cold pod made now, and makes no pod more. Not with a resize
			// (a pod not yet Ready has no settled cgroup to resize:
			// resizeSettle), nor when the job's cold pod would differ
			// from the pool's.
			t0 := time.Now()
			sp, err := c.Claims.ClaimStarting(ctx, p, job.Owner, why, c.ReadyTimeout)
			switch {
			case err != nil:
				fmt.Fprintf(c.Log, "warmpod: a starting pod of pool %s: %v\n", p.Name, err)
			case sp != nil:
				fmt.Fprintf(c.Log, "warmpod: no warm pod of pool %s (config %s) is Ready: took pod %s, which was starting, Ready after %d ms\n", p.Name, p.Hash, sp.Name, time.Since(t0).Milliseconds())
				return sp, nil
			}
			// A cold pod after a starting one that was not Ready gets
			// what is left of the ready timeout (a quarter of it at
			// least): the job waits for one pod's start, not two.
			coldTimeout = max(c.ReadyTimeout-time.Since(t0), c.ReadyTimeout/4)
		}
		fmt.Fprintf(c.Log, "warmpod: no warm pod of pool %s (config %s) is Ready: creating a cold pod (image %s)\n", p.Name, p.Hash, p.Image)
	case !released:
		why.Reason = poolapi.ColdNoPool
		fmt.Fprintf(c.Log, "warmpod: no pool runs image %s as this job asks: creating a cold pod from pool %s's template\n", p.Image, p.Name)
	}
	cold, err := c.Claims.CreateCold(ctx, cp, job.Owner, why, coldTimeout)
	if err != nil {
		return nil, &session.SystemError{Err: err}
	}
	return &cold, nil
}

// ErrNoFit, in an error of awaitFit, says that no pod of the pool can have
// the job's resources, warm or cold (the kubelet called them infeasible
// and nothing shows a larger node): Prepare fails with it rather than
// spend another pod on them.
var ErrNoFit = errors.New("no pod of the pool can have the job's resources")

// unfit deals with warm pod, which awaitFit could not make what the job asks
// (err): a pod awaitFit gave back to its pool ([pool.ErrGivenBack]) is left to
// it, any other is deleted. It returns the *session.SystemError that ends the
// acquisition for [ErrNoFit]; nil: the job gets a cold pod.
func (c *Core) unfit(ctx context.Context, pod poolapi.Pod, err error) error {
	next := "creating a cold pod"
	if errors.Is(err, ErrNoFit) {
		next = "refusing the job"
	}
	if errors.Is(err, pool.ErrGivenBack) {
		fmt.Fprintf(c.Log, "warmpod: warm pod %s went back to pool %s: %v: %s\n", pod.Name, pod.Pool, err, next)
	} else {
		fmt.Fprintf(c.Log, "warmpod: warm pod %s released: %v: %s\n", pod.Name, err, next)
		c.DeletePod(ctx, pod)
	}
	if errors.Is(err, ErrNoFit) {
		return &session.SystemError{Err: err}
	}
	return nil
}

// attach is Attach for pod, or the cluster itself without one.
func (c *Core) attach(pod poolapi.Pod) (session.Cluster, func(ok bool)) {
	if c.Attach == nil {
		return c.Cluster, func(bool) {}
	}
	return c.Attach(pod)
}

func (c *Core) startJob(ctx context.Context, cl session.Cluster, job Job, pod poolapi.Pod) (int, string, error) {
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	spec := c.jobSpec(job, pod, hex.EncodeToString(nonce))
	b, _ := json.Marshal(spec)
	b = append(b, '\n')
	defer clear(b)
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	code, err := cl.Exec(ctx, pod, podcmd.JobStart{Bin: pod.Bin}.Argv(), bytes.NewReader(b), &out, &errb)
	return code, strings.TrimSpace(errb.String()), err
}

// jobSpec is the job start's spec for job on pod: the job's timeout (an
// hour when unset) plus LeaseMargin, at most what warmpod accepts.
func (c *Core) jobSpec(job Job, pod poolapi.Pod, nonce string) control.JobSpec {
	timeout := job.Timeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	// warmpod refuses a lease longer than 168 h (65).
	timeout = min(timeout, maxLease-LeaseMargin)
	spec := control.JobSpec{ID: job.ID, Nonce: nonce, Token: job.Token,
		Timeout: (timeout + LeaseMargin).String(), ConfigHash: pod.Hash, Variables: job.Variables}
	if spec.Variables == nil {
		spec.Variables = []control.JobVariable{}
	}
	if c.LeaseTTL > 0 {
		spec.LeaseTTL = c.LeaseTTL.String()
	}
	return spec
}

// Hint is what to do about err from the API server: the RBAC rule
// (rbac) only when the API server refused with 403; where the API server
// is when it could not be reached (a refused connection is no RBAC
// matter); nothing otherwise.
func Hint(err error, rbac string) string {
	var ne net.Error
	var oe *net.OpError
	switch {
	case err == nil:
		return ""
	case forbidden(err):
		return " (" + rbac + ")"
	case errors.As(err, &oe), errors.As(err, &ne), strings.Contains(err.Error(), "connection refused"):
		return " (the API server could not be reached: check the kubeconfig's server, or the pod's KUBERNETES_SERVICE_HOST, and that the API server is up)"
	}
	return ""
}

// forbidden tells an API server's 403 (RBAC) from a failure that another
// pod might not have; exec upgrade errors carry it only in their text.
func forbidden(err error) bool {
	return apierrors.IsForbidden(err) || strings.Contains(err.Error(), " is forbidden: ")
}
