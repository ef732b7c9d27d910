package pool

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/warmpod/warmpod/poolapi"
)

// ClaimStarting claims the idle pod of p that has been starting the
// longest and waits up to timeout for it to be Ready. A job that found no
// Ready pod within its warm wait takes it rather than a cold pod of its
// own: a pod of the same template that started earlier, on a node already
// chosen, is Ready sooner than one created now, and no pod is made for
// the job (a cold pod is one pod more than the jobs run; the pool's
// ReplicaSet replaces the claimed pod either way).
//
// Candidates are p's idle pods of p's configuration that are scheduled
// (spec.nodeName set: an unschedulable pod may wait for ever), younger
// than the pool's typical start (typicalStart, when a pod of the pool is
// Ready to measure it by), not Ready,
// not being deleted, not retiring, not resized by a claimer, and with no
// container stuck in a state that does not clear by itself (stuck). The
// oldest goes first; a conflict (another claimer, or the kubelet's status
// write) moves on to the next. The claim is annotated as a cold start of
// reason why (poolapi.ColdNoIdle): the job was not warm, and the pool
// controller counts it as demand its pool did not meet, as it counts a
// cold pod, while the claim time is the patch's (AnnotationClaimedAt).
//
// It returns nil, nil when no pod is starting. A claimed pod that fails
// or is not Ready within timeout is deleted and an error wrapping
// ErrNotReady returned; the caller then makes a cold pod.
func (k *Cluster) ClaimStarting(ctx context.Context, p Pool, owner poolapi.Owner, why Cold, timeout time.Duration) (*poolapi.Pod, error) {
	if p.Pending {
		return nil, nil
	}
	sel := labels.Set{poolapi.LabelPool: p.Name, poolapi.LabelState: poolapi.StateIdle, p.hashKey(): p.Hash}.String()
	list, err := k.CS.CoreV1().Pods(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list pods %s: %w", sel, err)
	}
	typical, known := typicalStart(list.Items)
	now := time.Now()
	var starting []*corev1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		if p.startingClaimable(pod) && (!known || now.Sub(pod.CreationTimestamp.Time) < typical) {
			starting = append(starting, pod)
		}
	}
	slices.SortStableFunc(starting, func(a, b *corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	for _, pod := range starting {
		claimed, err := k.claimAs(ctx, pod, owner, why)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("claim starting pod %s: %w", pod.Name, err)
		}
		out := claimedPod(claimed, p, nil)
		out.Warm = false
		if err := k.waitReady(ctx, claimed, timeout); err != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = k.Delete(dctx, *out)
			return nil, err
		}
		return out, nil
	}
	return nil, nil
}

// typicalStart is the median start (creation to Ready) of the Ready pods
// among pods, false when none is Ready. A starting pod older than that is
// a slow one (an image pulled from afar, a busy node): pod starts have a
// long tail, so the longer a pod has been starting the longer it is
// likely still to take, and a cold pod made now is likely Ready sooner
// (the simulator's cold jobs waited longer when they took such pods:
// bench/pools-sim.md).
func typicalStart(pods []corev1.Pod) (time.Duration, bool) {
	var starts []time.Duration
	for i := range pods {
		if !PodReady(&pods[i]) {
			continue
		}
		for _, c := range pods[i].Status.Conditions {
			if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
				starts = append(starts, c.LastTransitionTime.Sub(pods[i].CreationTimestamp.Time))
			}
		}
	}
	if len(starts) == 0 {
		return 0, false
	}
	slices.Sort(starts)
	return starts[len(starts)/2], true
}

// startingClaimable tells whether ClaimStarting may take pod: what
// claimable asks but Ready, and scheduled with nothing stuck instead.
func (p Pool) startingClaimable(pod *corev1.Pod) bool {
	return pod.Labels[poolapi.LabelPool] == p.Name && pod.Labels[poolapi.LabelState] == poolapi.StateIdle &&
		pod.Labels[p.hashKey()] == p.Hash && pod.DeletionTimestamp == nil && !PodReady(pod) &&
		pod.Annotations[poolapi.AnnotationRetiring] == "" && !resizedByClaimer(pod) &&
		pod.Spec.NodeName != "" && (pod.Status.Phase == corev1.PodPending || pod.Status.Phase == corev1.PodRunning) &&
		stuck(pod) == ""
}
