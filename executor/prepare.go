package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// Request is what a driver asks of Prepare: its CI's input for a job,
// turned into the one shape both drivers share.
type Request struct {
	// Pools is the pool manifest (--pools); nil: Prepare reads the pools
	// from the cluster ([Claims.Pools]), their live templates and hashes.
	Pools *pool.Set
	// Image is the job container's image; it picks the pool.
	Image string
	// Sidecars are the job's services, each as the pool container that
	// would serve it ([pool.Set.Choose]).
	Sidecars []pool.Sidecar
	// Resources are the requests and limits the job asks for its
	// container, put over the pool's (nil: the pool's as they are).
	// cpu and memory are resized in place on a warm pod; any other
	// (ephemeral storage: the kubelet cannot resize it) sends the job to
	// a cold pod.
	Resources *corev1.ResourceRequirements
	// Caps are limits in Docker's sense (`--cpus`, `--memory`: what the
	// job's container may use at most), put over Resources: each becomes
	// the container's limit, and its request too where the container
	// requests as much as its limit (a Guaranteed pod stays Guaranteed:
	// an in-place resize cannot change a pod's QoS class) or more than
	// the cap (a request is at most its limit). nil: none.
	Caps corev1.ResourceList
	// Check, when set, refuses a chosen pool before anything is claimed
	// (GitLab: a job that needs the runner's helper binary and a pool
	// without it). Its error fails Prepare as a *session.SystemError.
	Check func(pool.Pool) error
	// Job is what job start hands to the pod.
	Job Job
}

// Prepared is what Prepare got for a job.
type Prepared struct {
	// Pod is the job's pod, which took the job.
	Pod poolapi.Pod
	// Pools is the pool set the choice was made from.
	Pools *pool.Set
	// Pool is the chosen pool (or the default pool's template with the
	// job's image and services: Own false).
	Pool pool.Pool
	// Own is whether Pool is a pool of the job's image and services.
	Own bool
	// ResizeSent and ResizeApplied are when the claim sent an in-place
	// resize of Pod and when the kubelet had applied it; zero when Pod
	// was not resized (also when a resized pod then refused the job and
	// Pod is another).
	ResizeSent, ResizeApplied time.Time
}

// plan is how acquire gets the job its pod.
type plan struct {
	pool pool.Pool
	// warm: claim a warm pod of pool first.
	warm bool
	// cold is the template of the job's cold pod when it is not pool's
	// (the job's resources in it).
	cold *pool.Pool
	// resize is the cpu and memory a warm pod must have for the job: the
	// claim resizes it in place and acquire waits for the kubelet.
	resize *corev1.ResourceRequirements
	// unchecked says why the nodes could not be checked ("" when a node
	// was seen that fits the job's pod).
	unchecked string
	// released: the job has a pool of its own whose warm pods cannot
	// have what it asks (the cold pod is annotated so: ColdReleased).
	released bool
}

// Prepare gets a pod for r.Job and hands the job to it, the one
// sequence of both drivers: read the pools (unless r.Pools), choose one
// ([pool.Set.Choose]), fit the job's resources (refused before any claim
// when no node of the pool could hold them), claim a warm pod (resized
// in place) or create a cold one, and job start. Warnings go to
// Core.Warn, progress to Core.Log. Errors are *session.SystemError; a pod
// this call claimed or created is deleted (or given back to its pool) on
// failure.
func (c *Core) Prepare(ctx context.Context, r Request) (Prepared, error) {
	t0 := time.Now()
	set := r.Pools
	if set == nil {
		var err error
		if set, err = c.Claims.Pools(ctx); err != nil {
			return Prepared{}, session.Errorf("read the pools from the cluster: %v%s", err, Hint(err, "the account needs get and list on deployments and replicasets: "+c.RBAC+"; or give a manifest with --pools"))
		}
		for _, w := range set.Warnings {
			c.warn("not a usable pool: %s", w)
		}
	}
	p, own := set.Choose(r.Image, r.Sidecars)
	if r.Check != nil {
		if err := r.Check(p); err != nil {
			return Prepared{}, &session.SystemError{Err: err}
		}
	}
	if own && p.Stale() {
		c.warn("%s=%q in the pool manifest, but its template hashes to %q: pods made from it are never claimed warm; put the hash in the manifest (warmpod-gitlab --pools FILE pool-hash) and apply it, or let warmpod read the pools from the cluster (no --pools; the pool's warmpod reads WARMPOD_CONFIG_HASH from metadata.labels['pod-template-hash'], as deploy/pool.yaml and deploy/github-pool.yaml do)", poolapi.LabelConfig, p.FileHash, p.Hash)
	}
	if _, imageOwn := set.ForImage(r.Image); imageOwn && !own {
		fmt.Fprintf(c.Log, "warmpod: the pool of image %s runs other services than the job's: a cold pod with the job's services\n", r.Image)
	}
	pl := plan{pool: p, warm: own}
	if r.Resources != nil || len(r.Caps) > 0 {
		var err error
		if pl, err = c.fit(ctx, pl, r.Resources, r.Caps); err != nil {
			return Prepared{}, err
		}
	}
	out := Prepared{Pools: set, Pool: p, Own: own}
	pod, err := c.acquire(ctx, pl, r.Job, &out)
	if err != nil {
		return Prepared{}, err
	}
	out.Pod = pod
	kind := "cold"
	if pod.Warm {
		kind = "warm"
	}
	fmt.Fprintf(c.Log, "warmpod: job %s runs on %s pod %s (pool %s) after %d ms\n", r.Job.ID, kind, pod.Name, pod.Pool, time.Since(t0).Milliseconds())
	return out, nil
}

// warn is one warning line for Core.Warn (Core.Log without one).
func (c *Core) warn(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if c.Warn != nil {
		c.Warn(msg)
		return
	}
	fmt.Fprintf(c.Log, "warmpod: WARNING: %s\n", msg)
}

// fit plans res and caps, the job's resources over pl.pool's: when they
// change the pool's pod, its cold pod's template gets them (cold); a warm
// pod whose container has other cpu or memory is resized in place as it
// is claimed (resize). A change the kubelet cannot make in place
// (ephemeral storage) skips the warm pool.
// Errors, before anything is claimed: a request above its limit once
// merged with the pool's, or a pod no node of the pool can ever hold
// ([Core.nodesFit]).
func (c *Core) fit(ctx context.Context, pl plan, res *corev1.ResourceRequirements, caps corev1.ResourceList) (plan, error) {
	p := pl.pool
	var tmpl corev1.ResourceRequirements
	if bc := p.BuildContainer(&p.Template); bc != nil {
		tmpl = bc.Resources
	}
	// Each step as the API server stores it: a limit without a request
	// is requested at the limit. The pool's pods have their template's
	// defaulted (have: a template of limits only is Guaranteed); the
	// job's values go over the template as written and are defaulted
	// after (a job that raises a limit of such a template raises its
	// request with it), then capped, then defaulted again (a cap of a
	// resource with neither gets its request): the cold pod's template,
	// the resize and the node check all see what the API server would.
	have := defaulted(tmpl)
	want := defaulted(capped(defaulted(merged(tmpl, res)), caps))
	if err := requestsWithinLimits(want); err != nil {
		return pl, &session.SystemError{Err: fmt.Errorf("the job's resources with the pool's (%s): %w", Describe(want), err)}
	}
	cold := p.Modified(func(t *corev1.PodTemplateSpec) {
		if bc := p.BuildContainer(t); bc != nil {
			bc.Resources = want
		}
	})
	unchecked, err := c.nodesFit(ctx, cold)
	if err != nil {
		return pl, err
	}
	pl.unchecked = unchecked
	inPlace, needCold := resizeNeeds(have, &want)
	if inPlace || needCold {
		// Only a pod that differs from the pool's has a template of its
		// own: a job whose figures come out as the pool's gets the pool's
		// pod, and may take one that is starting (Core.notWarm).
		pl.cold = &cold
	}
	switch {
	case needCold:
		if pl.warm {
			fmt.Fprintf(c.Log, "warmpod: the job asks for %s; ephemeral storage cannot change on a running pod: creating a cold pod\n", Describe(want))
			// A pool of the job's own that cannot have it warm: the
			// cold pod's reason is "released", not "no pool".
			pl.released = true
		}
		pl.warm = false
	case inPlace && pl.warm:
		pl.resize = &want
	}
	return pl, nil
}

// defaulted is r with a request for each resource it limits without
// one ([pool.EffectiveRequests]).
func defaulted(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *r.DeepCopy()
	if req := pool.EffectiveRequests(out); len(req) > 0 {
		out.Requests = req
	}
	return out
}

// nodesFit refuses, before anything is claimed, a job whose pod (c's
// template, the job's resources in its container) requests more than any
// node of the pool can allocate: the kubelet would call the resize of
// every warm pod Infeasible and no cold pod would ever be scheduled, so
// claiming one only burns the pool. When the nodes cannot be read (nodes
// are cluster-scoped: the account needs Core.NodesRBAC) it says so once in Core.Log and leaves the check to the
// kubelet; unchecked then says why, for a later refusal ("" when a node
// was found that fits).
func (c *Core) nodesFit(ctx context.Context, p pool.Pool) (unchecked string, err error) {
	req := pool.PodRequests(&p.Template.Spec)
	nodes, err := c.Claims.Nodes(ctx, &p.Template)
	if err != nil {
		hint := ""
		if apierrors.IsForbidden(err) {
			hint = ": " + c.NodesRBAC
		}
		unchecked = fmt.Sprintf("cannot read the nodes of pool %s (%v)%s", p.Name, err, hint)
		fmt.Fprintf(c.Log, "warmpod: %s; the job's resources are not checked against the nodes\n", unchecked)
		return unchecked, nil
	}
	if len(nodes) == 0 {
		unchecked = fmt.Sprintf("no node matches pool %s's nodeName and nodeSelector", p.Name)
		fmt.Fprintf(c.Log, "warmpod: %s; the job's resources are not checked against the nodes\n", unchecked)
		return unchecked, nil
	}
	for _, n := range nodes {
		if n.Fits(req) {
			return "", nil
		}
	}
	var have []string
	for i, n := range nodes {
		if i == 3 {
			have = append(have, fmt.Sprintf("and %d more", len(nodes)-i))
			break
		}
		have = append(have, n.Name+": "+list(n.Allocatable, req))
	}
	return "", &session.SystemError{Err: fmt.Errorf("the job's pod would request %s, more than any node of pool %s can allocate (%s): no pod of the pool can run it; ask for less",
		list(req, req), p.Name, strings.Join(have, "; "))}
}

// awaitFit waits for the kubelet to apply the resize the claim of warm
// pod sent (pl.resize), asking the pod through cl (the job's
// multiplexer, whose stream opens meanwhile). An error releases the pod:
// acquire deletes it unless it wraps pool.ErrGivenBack (the resize was
// infeasible, undone, and the pod is idle in its pool again), and the
// job gets a cold pod, or fails when the error wraps ErrNoFit.
func (c *Core) awaitFit(ctx context.Context, cl session.Cluster, pod poolapi.Pod, pl plan, out *Prepared) error {
	t0 := time.Now()
	if pod.Resize != nil {
		t0 = pod.Resize.SentAt()
	}
	if err := c.Claims.AwaitResize(ctx, pod, c.ResizeTimeout, cl); err != nil {
		err = fmt.Errorf("resize to %s: %w", Describe(*pl.resize), err)
		if errors.Is(err, pool.ErrResizeInfeasible) && pl.unchecked != "" {
			// The kubelet says its node can never hold it, and nothing
			// shows a larger one: another warm pod would get the same
			// answer, a cold pod would never be scheduled.
			return fmt.Errorf("%w: %w; and no node was seen that could hold it (%s): ask for less", ErrNoFit, err, pl.unchecked)
		}
		return err
	}
	now := time.Now()
	out.ResizeSent, out.ResizeApplied = t0, now
	fmt.Fprintf(c.Log, "warmpod: warm pod %s resized in place to %s in %d ms\n", pod.Name, Describe(*pl.resize), now.Sub(t0).Milliseconds())
	return nil
}
