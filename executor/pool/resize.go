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
)

// Errors of [Cluster.Resize]. Each means "this pod will not get these
// resources in place": the caller releases the pod and creates a cold one.
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
)

// Resize changes the resources of the pod's warmpod container in place
// through the pods/resize subresource (Kubernetes ≥ 1.33, where
// InPlacePodVerticalScaling is beta and on by default; GA in 1.35) and
// waits up to timeout for the kubelet to apply them. Applied is the first
// of: `warmpod job limits` in the pod says the container's cgroup holds
// them (the kubelet writes the cgroup a PLEG relist and a status sync
// before the status says so: bench/resize-breakdown.md), or the
// container's status.resources show them with neither a PodResizePending
// nor a PodResizeInProgress condition. The status is read all along, so a
// resize the kubelet refuses (Infeasible, Error) or defers is told as
// before, and a pod whose warmpod has no `job limits` (an older image) or
// no readable cgroup waits for the status alone. Only the cpu and memory
// of res are sent (nothing else is resizable). Errors:
// [ErrResizeUnsupported], [ErrResizeInfeasible], [ErrResizeNotApplied],
// each with the API server's or the kubelet's message, or the API
// server's own error.
//
// via runs the command (the job's multiplexer, whose stream into the pod
// is open by then: no exec of its own); nil: a direct exec.
func (k *Cluster) Resize(ctx context.Context, p Pod, res corev1.ResourceRequirements, timeout time.Duration, via Execer) error {
	want := resizable(res)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	var inForce chan bool
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	if via == nil && k.Config != nil {
		via = k
	}
	if via != nil {
		// job limits' exec starts alongside the patch: its set-up (API
		// server, kubelet, runtime) overlaps the kubelet's work. Either
		// order is sound: a status read after the patch still holds the
		// old resources until the kubelet has written the cgroup, and
		// LimitsArgv names nothing when it already holds the new ones.
		inForce = make(chan bool, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			inForce <- k.limitsInForce(ctx, via, p, want, timeout)
		}()
	}
	if _, err := k.patchResize(ctx, p, want); err != nil {
		return err
	}
	return k.awaitResize(ctx, p, want, timeout, inForce)
}

// limitsInForce runs `warmpod job limits` in p for what the resize to
// want changes in the cgroup (LimitsArgv, from the pod's status): true
// when the command says the cgroup holds it; false when there is nothing
// to wait for there or the pod cannot tell (no such command in an older
// image, no cgroup to read, a broken stream).
func (k *Cluster) limitsInForce(ctx context.Context, via Execer, p Pod, want corev1.ResourceRequirements, timeout time.Duration) bool {
	cur, err := k.CS.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	argv := LimitsArgv(p, cur, want, timeout)
	if argv == nil {
		return false
	}
	code, err := via.Exec(ctx, p, argv, nil, io.Discard, io.Discard)
	return err == nil && code == 0
}

// patchResize sends the resize and returns the pod as the API server
// answered it.
func (k *Cluster) patchResize(ctx context.Context, p Pod, want corev1.ResourceRequirements) (*corev1.Pod, error) {
	patch := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": p.Container, "resources": want}}}}
	b, _ := json.Marshal(patch)
	before, err := k.CS.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, b, metav1.PatchOptions{}, "resize")
	if apierrors.IsNotFound(err) {
		// The pod itself, or the subresource: tell them apart.
		if _, gerr := k.CS.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
			return nil, fmt.Errorf("resize pod %s: the pod is gone: %w", p.Name, err)
		}
	}
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
		return nil, fmt.Errorf("%w: the API server has no pods/resize (Kubernetes < 1.33?): %v", ErrResizeUnsupported, err)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return nil, fmt.Errorf("%w: %v", ErrResizeUnsupported, err)
	case err != nil:
		return nil, fmt.Errorf("resize pod %s: %w", p.Name, err)
	}
	return before, nil
}

// awaitResize polls the pod's status until [ResizeApplied] says done or
// refused, or until inForce says true (the cgroup holds the resources);
// false there (the pod cannot tell) leaves the status to decide. ctx
// ends the wait: timeout is for the message.
func (k *Cluster) awaitResize(ctx context.Context, p Pod, want corev1.ResourceRequirements, timeout time.Duration, inForce <-chan bool) error {
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
	Exec(ctx context.Context, p Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
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
// the error when the wait runs out). It is the pure half of Resize.
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
