package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// waits up to timeout for the kubelet to apply them: the container's
// status.resources shows them and the pod has neither a PodResizePending
// nor a PodResizeInProgress condition. Only the cpu and memory of res are
// sent (nothing else is resizable). Errors: [ErrResizeUnsupported],
// [ErrResizeInfeasible], [ErrResizeNotApplied], each with the API
// server's or the kubelet's message, or the API server's own error.
func (k *Cluster) Resize(ctx context.Context, p Pod, res corev1.ResourceRequirements, timeout time.Duration) error {
	want := resizable(res)
	patch := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": p.Container, "resources": want}}}}
	b, _ := json.Marshal(patch)
	_, err := k.CS.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, b, metav1.PatchOptions{}, "resize")
	if apierrors.IsNotFound(err) {
		// The pod itself, or the subresource: tell them apart.
		if _, gerr := k.CS.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
			return fmt.Errorf("resize pod %s: the pod is gone: %w", p.Name, err)
		}
	}
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
		return fmt.Errorf("%w: the API server has no pods/resize (Kubernetes < 1.33?): %v", ErrResizeUnsupported, err)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return fmt.Errorf("%w: %v", ErrResizeUnsupported, err)
	case err != nil:
		return fmt.Errorf("resize pod %s: %w", p.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
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
		case <-time.After(50 * time.Millisecond):
		}
	}
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
