package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/warmpod/warmpod/poolapi"
)

// Errors of an in-place resize ([Cluster.ClaimWarm], [Cluster.AwaitResize]).
// Each means "this pod will not get these resources in place": the caller
// releases the pod, if it has one, and creates a cold one.
var (
	// ErrResizeUnsupported: the API server has no pods/resize subresource
	// (Kubernetes before 1.33, or the InPlacePodVerticalScaling feature
	// gate off) or refused the change (for example one that would change
	// the pod's QoS class, or a memory limit below what is in use).
	ErrResizeUnsupported = errors.New("in-place resize not possible")
	// ErrResizeInfeasible: the kubelet says the node can never fit it
	// (PodResizePending, reason Infeasible).
	ErrResizeInfeasible = errors.New("resize infeasible on this node")
	// ErrResizeNotApplied: the kubelet had not applied it within the
	// bound (still Deferred or in progress).
	ErrResizeNotApplied = errors.New("resize not applied in time")
	// ErrGivenBack comes with ErrResizeInfeasible from
	// [Cluster.AwaitResize] when it has resized the pod back to the
	// resources it had and given it back to its pool, idle and claimable
	// again: the caller must not delete it.
	ErrGivenBack = errors.New("the pod went back to its pool with its own resources")
)

// Resizing is an in-place resize of a warm pod's warmpod container that
// [Cluster.ClaimWarm] sent (pods/resize, Kubernetes ≥ 1.33, where
// InPlacePodVerticalScaling is beta and on by default; GA in 1.35) and
// [Cluster.AwaitResize] waits for.
type Resizing struct {
	// Want is the cpu and memory sent (nothing else is resizable).
	Want corev1.ResourceRequirements
	// Before is the pod as listed before the resize: its container's
	// status.resources are what the cgroup held ([LimitsArgv]).
	Before *corev1.Pod
	// Sent is when the resize went to the API server.
	Sent time.Time
}

// SentAt is when the resize went to the API server ([poolapi.Resize]).
func (r *Resizing) SentAt() time.Time { return r.Sent }

// resizingOf is the resize the claim of p sent; nil: none.
func resizingOf(p poolapi.Pod) *Resizing {
	r, _ := p.Resize.(*Resizing)
	return r
}

// AwaitResize waits up to timeout for the kubelet to apply p.Resize
// (nil: nothing to wait for). Applied is the first of: `warmpod job
// limits` in the pod says the container's cgroup holds the new resources
// (the kubelet writes the cgroup a status sync before the status says
// so: bench/resize-breakdown.md), or the container's status.resources
// show them with neither a PodResizePending nor a PodResizeInProgress
// condition. The status is read all along, so a resize the kubelet
// refuses (Infeasible, Error) or defers is told as before, and a pod
// whose warmpod has no `job limits` (an older image) or no readable
// cgroup waits for the status alone. Errors: [ErrResizeUnsupported],
// [ErrResizeInfeasible], [ErrResizeNotApplied], each with the API
// server's or the kubelet's message, or the API server's own error. The
// caller releases the pod on any of them. An infeasible resize is undone
// here (giveBack): the kubelet never applied it, so the pod is as it was
// before the claim, and spending it would only cost the pool a pod; the
// error then also wraps [ErrGivenBack]. A resize the kubelet defers (the
// node has no room now) is not undone: it may still be applied.
//
// via runs the command (the job's multiplexer, whose stream into the pod
// is open by then: no exec of its own); nil: a direct exec.
func (k *Cluster) AwaitResize(ctx context.Context, p poolapi.Pod, timeout time.Duration, via Execer) error {
	r := resizingOf(p)
	if r == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	var inForce chan bool
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	if via == nil && k.Config != nil {
		via = k
	}
	if argv := LimitsArgv(p, r.Before, r.Want, timeout); via != nil && argv != nil {
		// The command runs alongside the status reads. Either order is
		// sound: Before holds the resources from before the resize, so
		// LimitsArgv names only values the cgroup did not hold yet.
		inForce = make(chan bool, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, err := via.Exec(ctx, p, argv, nil, io.Discard, io.Discard)
			inForce <- err == nil && code == 0
		}()
	}
	err := k.awaitResize(ctx, p, r.Want, timeout, inForce)
	if errors.Is(err, ErrResizeInfeasible) {
		cancel()
		if gerr := k.giveBack(ctx, p); gerr != nil {
			return fmt.Errorf("%w; giving the pod back to its pool failed: %v", err, gerr)
		}
		return fmt.Errorf("%w; %w", err, ErrGivenBack)
	}
	return err
}

// giveBack undoes a claim whose resize the kubelet refused as infeasible:
// the container gets back the cpu and memory it had before (pods/resize;
// what the resize added is removed), then the pod's labels and claim
// annotations go back to idle, on the condition of its resourceVersion and
// that it is still this claim's pod (its uid, claimed). Its ReplicaSet then
// adopts it again and removes its surplus pod (the replacement it started
// at the claim, while that is not Ready), or, for a pod the pool controller
// made, its owner is put back (unclaimPatch); ClaimWarm takes it again as
// its resources are the pool's (hasOwnResources). It runs even when ctx
// has ended, bounded by abandonTimeout. Errors: the API server's, or a pod
// that is no longer this claim's; the caller deletes the pod then.
func (k *Cluster) giveBack(ctx context.Context, p poolapi.Pod) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	var before corev1.ResourceRequirements
	r := resizingOf(p)
	for _, c := range r.Before.Spec.Containers {
		if c.Name == p.Container {
			before = resizable(c.Resources)
		}
	}
	if _, err := k.patchResize(ctx, p.Name, p.Container, restoring(before, r.Want), ""); err != nil {
		return err
	}
	pods := k.CS.CoreV1().Pods(p.Namespace)
	for range abandonTries {
		cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(cur.UID) != p.UID || cur.Labels[poolapi.LabelState] != poolapi.StateClaimed || cur.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s is no longer this claim's", p.Name)
		}
		_, err = pods.Patch(ctx, p.Name, types.MergePatchType, unclaimPatch(cur.ResourceVersion, r.Before), metav1.PatchOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("pod %s kept changing", p.Name)
}

// restoring is the resources of a resize back to before from want: each
// quantity before had, and null for each one want added (a strategic
// merge patch keeps a key it does not name).
func restoring(before, want corev1.ResourceRequirements) map[string]any {
	out := map[string]any{}
	for _, pair := range []struct {
		key        string
		have, sent corev1.ResourceList
	}{{"requests", before.Requests, want.Requests}, {"limits", before.Limits, want.Limits}} {
		m := map[string]any{}
		for n, q := range pair.have {
			m[string(n)] = q.String()
		}
		for n := range pair.sent {
			if _, ok := pair.have[n]; !ok {
				m[string(n)] = nil
			}
		}
		if len(m) > 0 {
			out[pair.key] = m
		}
	}
	return out
}

// unclaimPatch is the merge patch that makes a claimed pod idle again, on
// the condition that it is still at resourceVersion rv; before is the pod
// as it was before the claim.
func unclaimPatch(rv string, before *corev1.Pod) []byte {
	ann := poolapi.IdleDisruption()
	ann[poolapi.AnnotationClaimedAt], ann[poolapi.AnnotationClaimWait] = nil, nil
	meta := map[string]any{
		"resourceVersion": rv,
		"labels":          map[string]any{poolapi.LabelState: poolapi.StateIdle, poolapi.LabelJob: nil, poolapi.LabelServer: nil, poolapi.LabelRunner: nil},
		"annotations":     ann,
	}
	if before != nil && MadeByController(before) {
		// The claim dropped the pool controller's pod's owner (decision
		// 0010). Idle again without one, it would match the ReplicaSet's
		// selector with no controller: the ReplicaSet would adopt it, be
		// one over its replicas and delete a pod of its choosing, a Ready
		// idle one a driver may be claiming. Its owner back, it is the
		// controller's again, and no ReplicaSet's.
		meta["ownerReferences"] = before.OwnerReferences
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta})
	return b
}

// hasOwnResources tells whether pod's warmpod container has the cpu and
// memory of p's template (a request left out of the template is its
// limit, as the API server defaults it): a pod a claimer resized and gave
// back (giveBack) is the pool's again.
func (p Pool) hasOwnResources(pod *corev1.Pod) bool {
	var tmpl *corev1.Container
	for i := range p.Template.Spec.Containers {
		if p.Template.Spec.Containers[i].Name == p.Container {
			tmpl = &p.Template.Spec.Containers[i]
		}
	}
	if tmpl == nil {
		return false
	}
	want := resizable(tmpl.Resources)
	for n, q := range want.Limits {
		if _, ok := want.Requests[n]; !ok {
			if want.Requests == nil {
				want.Requests = corev1.ResourceList{}
			}
			want.Requests[n] = q
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == p.Container {
			have := resizable(c.Resources)
			return len(have.Requests) == len(want.Requests) && len(have.Limits) == len(want.Limits) &&
				covers(have.Requests, want.Requests) && covers(have.Limits, want.Limits)
		}
	}
	return false
}

// errPodGone: the pod a resize was for does not exist (any more).
var errPodGone = errors.New("the pod is gone")

// patchResize sends the resize of container in pod name to want (a
// corev1.ResourceRequirements, or its JSON form as restoring writes it), as
// ResizeFieldManager, and returns the pod as the API server answered it.
// rv, when set, is the precondition: a pod at another resourceVersion
// gets 409 Conflict (the API server's error, unwrapped by
// apierrors.IsConflict) and is left as it is. Errors that say the resize
// can never be made here wrap [ErrResizeUnsupported]; a pod that is gone
// wraps errPodGone.
func (k *Cluster) patchResize(ctx context.Context, name, container string, want any, rv string) (*corev1.Pod, error) {
	patch := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": container, "resources": want}}}}
	if rv != "" {
		patch["metadata"] = map[string]any{"resourceVersion": rv}
	}
	b, _ := json.Marshal(patch)
	after, err := k.CS.CoreV1().Pods(k.Namespace).Patch(ctx, name, types.StrategicMergePatchType, b, metav1.PatchOptions{FieldManager: ResizeFieldManager}, "resize")
	if apierrors.IsNotFound(err) {
		// The pod itself, or the subresource: tell them apart.
		switch _, gerr := k.CS.CoreV1().Pods(k.Namespace).Get(ctx, name, metav1.GetOptions{}); {
		case apierrors.IsNotFound(gerr):
			return nil, fmt.Errorf("resize pod %s: %w: %w", name, errPodGone, err)
		case gerr != nil:
			return nil, fmt.Errorf("resize pod %s: %v; reading the pod: %w", name, err, gerr)
		}
	}
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
		return nil, fmt.Errorf("%w: the API server has no pods/resize (Kubernetes < 1.33?): %v", ErrResizeUnsupported, err)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return nil, fmt.Errorf("%w: %v", ErrResizeUnsupported, err)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("%w: not allowed (the account needs patch on pods/resize; or a ResourceQuota, a LimitRange or an admission webhook refused it): %v", ErrResizeUnsupported, err)
	case err != nil:
		return nil, fmt.Errorf("resize pod %s: %w", name, err)
	}
	return after, nil
}

// awaitResize polls the pod's status until [ResizeApplied] says done or
// refused, or until inForce says true (the cgroup holds the resources);
// false there (the pod cannot tell) leaves the status to decide. ctx
// ends the wait: timeout is for the message.
func (k *Cluster) awaitResize(ctx context.Context, p poolapi.Pod, want corev1.ResourceRequirements, timeout time.Duration, inForce <-chan bool) error {
	last := "no status yet"
	for {
		cur, err := k.CS.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err == nil {
			var done bool
			done, last, err = ResizeApplied(cur, p.Container, want)
			if done || err != nil {
				return err
			}
		} else if ctx.Err() == nil {
			return fmt.Errorf("resize pod %s: %w", p.Name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: after %s: %s", ErrResizeNotApplied, timeout, last)
		case ok := <-inForce:
			if ok {
				return nil
			}
			inForce = nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Execer runs a command in a pod ([Cluster.Exec], or the job's
// multiplexer).
type Execer interface {
	Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// resizable keeps the cpu and memory of res.
func resizable(res corev1.ResourceRequirements) corev1.ResourceRequirements {
	var out corev1.ResourceRequirements
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := res.Requests[n]; ok {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[n] = q
		}
		if q, ok := res.Limits[n]; ok {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[n] = q
		}
	}
	return out
}

// ResizeApplied reads a pod's resize progress for container: done when
// its status.resources hold want's requests and limits and no resize is
// pending or in progress; an [ErrResizeInfeasible] error when the kubelet
// says it can never be; otherwise not done, with what the pod shows (for
// the error when the wait runs out). It is the pure half of AwaitResize.
func ResizeApplied(pod *corev1.Pod, container string, want corev1.ResourceRequirements) (done bool, state string, err error) {
	state = "the kubelet has not reported the new resources"
	if pod.Status.ObservedGeneration != 0 && pod.Status.ObservedGeneration < pod.Generation {
		// The status is of the spec before the patch (Kubernetes ≥ 1.34
		// reports the generation it has seen).
		return false, state, nil
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodResizePending:
			if c.Reason == corev1.PodReasonInfeasible {
				return false, "", fmt.Errorf("%w: %s", ErrResizeInfeasible, c.Message)
			}
			return false, fmt.Sprintf("resize pending (%s): %s", c.Reason, c.Message), nil
		case corev1.PodResizeInProgress:
			if c.Reason == corev1.PodReasonError {
				return false, "", fmt.Errorf("%w: the kubelet failed to apply it: %s", ErrResizeUnsupported, c.Message)
			}
			return false, "resize in progress", nil
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container || cs.Resources == nil {
			continue
		}
		if covers(cs.Resources.Requests, want.Requests) && covers(cs.Resources.Limits, want.Limits) {
			return true, "", nil
		}
	}
	return false, state, nil
}

// covers tells whether have holds every quantity of want, equal.
func covers(have, want corev1.ResourceList) bool {
	for n, q := range want {
		h, ok := have[n]
		if !ok || h.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
