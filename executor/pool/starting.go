package pool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/warmpod/warmpod/poolapi"
)

// ClaimStarting claims the idle pod of p that has been starting the
// longest and waits for it to be Ready. A job that found no Ready pod
// within its warm wait takes it rather than a cold pod of its own: a pod
// of the same template that started earlier, on a node already chosen, is
// Ready sooner than one created now, and no pod is made for the job (the
// pool's ReplicaSet replaces the claimed pod either way).
//
// Candidates are p's idle pods of p's configuration that are starting for
// the first time: scheduled (spec.nodeName set: an unschedulable pod may
// wait for ever), not Ready and never Ready before (a pod past its idle
// deadline's readiness margin is draining, not starting), no container
// restarted or stuck in a state that does not clear by itself (stuck, or
// crash-looping), not being deleted, not retiring, not resized by a
// claimer; and younger than the pool's typical start (typicalStart): pod
// starts have a long tail, so a pod past the typical start is likely a
// slow one, and a cold pod made now likely Ready sooner. The oldest go
// first, in random order among the first startingSpread so that claimers
// at once spread out; a conflict (the kubelet's status write, or another
// claimer) reads the pod again and claims it again while it is still a
// candidate, claimTries times at most. The claim is annotated as a cold
// start of reason why (poolapi.ColdNoIdle): the job was not warm, and the
// pool controller counts it as demand its pool did not meet, as it counts
// a cold pod, at the claim's time (poolapi.AnnotationClaimedAt).
//
// The wait is timeout at most, as a cold pod's (a pod whose container
// waits for a reason that does not clear by itself, crash-looping
// included, fails at once: stuck). It returns nil, nil when no pod is a
// candidate. A claimed pod that fails or is not Ready in time is deleted
// and an error wrapping ErrNotReady returned; the caller then makes a
// cold pod.
func (k *Cluster) ClaimStarting(ctx context.Context, p Pool, owner poolapi.Owner, why Cold, timeout time.Duration) (*poolapi.Pod, error) {
	if p.Pending {
		return nil, nil
	}
	sel := labels.Set{poolapi.LabelPool: p.Name, poolapi.LabelState: poolapi.StateIdle, p.hashKey(): p.Hash}.String()
	list, err := k.CS.CoreV1().Pods(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list pods %s: %w", sel, err)
	}
	typical, known := p.PodStart, p.PodStart > 0
	if !known {
		typical, known = typicalStart(list.Items)
	}
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
	spread := min(len(starting), startingSpread)
	rand.Shuffle(spread, func(i, j int) { starting[i], starting[j] = starting[j], starting[i] })
	for _, pod := range starting {
		claimed, err := k.claimStartingPod(ctx, p, pod, owner, why)
		if err != nil {
			return nil, err
		}
		if claimed == nil {
			continue // another claimer's, or no longer starting
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

// startingSpread is how many of the oldest starting pods ClaimStarting
// tries in random order: claimers that come at once (a burst that emptied
// the pool) spread over them instead of all patching the oldest.
const startingSpread = 4

// claimStartingPod claims pod as ClaimStarting does: after a conflict it
// reads the pod again, and claims it again while it is still a candidate
// (a starting pod's status changes often). Nil, nil: no longer a
// candidate, or gone.
func (k *Cluster) claimStartingPod(ctx context.Context, p Pool, pod *corev1.Pod, owner poolapi.Owner, why Cold) (*corev1.Pod, error) {
	for range claimTries {
		claimed, err := k.claimAs(ctx, pod, owner, why)
		switch {
		case err == nil:
			return claimed, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case !apierrors.IsConflict(err):
			return nil, fmt.Errorf("claim starting pod %s: %w", pod.Name, err)
		}
		if pod, err = k.CS.CoreV1().Pods(k.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("read starting pod: %w", err)
		}
		if !p.startingClaimable(pod) {
			return nil, nil
		}
	}
	return nil, nil
}

// typicalStart is the median start (creation to Ready) of the Ready pods
// among pods, false when none is Ready: ClaimStarting's measure when the
// pool controller has written none (Pool.PodStart).
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
// claimable asks but Ready, and starting for the first time instead.
func (p Pool) startingClaimable(pod *corev1.Pod) bool {
	return pod.Labels[poolapi.LabelPool] == p.Name && pod.Labels[poolapi.LabelState] == poolapi.StateIdle &&
		pod.Labels[p.hashKey()] == p.Hash && pod.DeletionTimestamp == nil && !PodReady(pod) &&
		pod.Annotations[poolapi.AnnotationRetiring] == "" && !resizedByClaimer(pod) &&
		pod.Spec.NodeName != "" && (pod.Status.Phase == corev1.PodPending || pod.Status.Phase == corev1.PodRunning) &&
		stuck(pod) == "" && firstStart(pod)
}

// firstStart tells whether pod is starting for the first time: no
// container has restarted (a crash loop, which the pool's restartPolicy
// Always repeats for ever), and its Ready condition has not changed since
// its containers started. A pod that was Ready and is no longer (warmpod
// drops readiness --ready-margin before its idle deadline, then drains
// and deletes itself) has its condition's last transition after its
// containers' start.
func firstStart(pod *corev1.Pod) bool {
	var started time.Time
	for _, c := range pod.Status.ContainerStatuses {
		if c.RestartCount > 0 {
			return false
		}
		if r := c.State.Running; r != nil && r.StartedAt.After(started) {
			started = r.StartedAt.Time
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && !started.IsZero() && c.LastTransitionTime.After(started) {
			return false
		}
	}
	return true
}
