package pools

import (
	"encoding/json"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// retireCost is the deletion cost of a retiring pod: below any cost a user
// sets on a pool pod.
const retireCost = "-2147483648"

// Status is the JSON of poolapi.AnnotationSizing: the contract's own type,
// which the drivers read too (the measured pod start).
type Status = poolapi.SizingStatus

// readStatus parses d's poolapi.AnnotationSizing; the zero Status when there is
// none or it does not parse (a status is advice, never a reason to fail).
func readStatus(d *appsv1.Deployment) Status {
	return poolapi.ReadSizingStatus(d.Annotations)
}

// poolPods are a pool's pods in the informer's cache, sorted by what they
// are to the controller.
type poolPods struct {
	// idle are Ready unclaimed pods of the pool, starting those on a node
	// and not Ready yet, pending those on no node yet; neither terminating
	// nor retiring.
	idle, starting, pending []*corev1.Pod
	// retiring are pods marked AnnotationRetiring and not yet terminating.
	retiring []*corev1.Pod
	// busy are claimed pods (warm and cold) not yet terminating or ended.
	busy int
}

// sortPods sorts the pods labelled for pool name by their state
// ([pool.StateOf]). A pending pod (on no node yet) is neither idle nor
// busy: sizing counts it toward the pool, as a starting one, and says so.
func sortPods(pods []*corev1.Pod) poolPods {
	var pp poolPods
	for _, p := range pods {
		switch pool.StateOf(p) {
		case poolapi.PodBusy:
			pp.busy++
		case poolapi.PodRetiring:
			pp.retiring = append(pp.retiring, p)
		case poolapi.PodIdle:
			pp.idle = append(pp.idle, p)
		case poolapi.PodStarting:
			pp.starting = append(pp.starting, p)
		case poolapi.PodPending:
			pp.pending = append(pp.pending, p)
		case poolapi.PodGone:
		}
	}
	return pp
}

// observation is what sizing.Decide needs of the pool's pods and history.
// known is when the tracker began to see the pool's claims.
func (pp poolPods) observation(t *Tracker, key string, known, now time.Time) sizing.Observation {
	claims, colds, last, start, ups := t.Demand(key, now)
	return sizing.Observation{
		Idle: len(pp.idle), Starting: len(pp.starting), Pending: len(pp.pending), Busy: pp.busy,
		Claims: claims, ColdStarts: colds, LastClaim: last, PodStart: start, ScaledUpLastMinute: ups,
		Forecast: t.Learn(key, known, now),
	}
}

// retireOrder returns the idle, starting and pending pods in the order a ReplicaSet
// removes pods when it scales down (ActivePodsWithRanks in Kubernetes'
// pkg/controller): not yet scheduled first, then Pending before Running, not
// Ready before Ready. Marking the first n of them retiring (with
// poolapi.AnnotationDeletionCost lowest) and lowering replicas by n makes
// the ReplicaSet pick exactly those n: within a rank the deletion cost comes
// before the ReplicaSet's own tie-breaks, so the controller chooses which
// pods go, and each was made unclaimable first under its resourceVersion.
//
// Within a rank, pods on the node with the fewest of the namespace's pool
// pods (perNode, idle and busy) go first, then the youngest: a node left
// with no pool pod is one a node autoscaler can remove, where retiring the
// youngest scattered the survivors over every node (issue 42). The count is
// of warmpod's pods only; the controller does not watch other pods.
func retireOrder(pp poolPods, perNode map[string]int) []*corev1.Pod {
	pods := append(append(slices.Clone(pp.pending), pp.starting...), pp.idle...)
	rank := func(p *corev1.Pod) int {
		r := 0
		if p.Spec.NodeName != "" {
			r += 4
		}
		if p.Status.Phase == corev1.PodRunning {
			r += 2
		}
		if pool.PodReady(p) {
			r++
		}
		return r
	}
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		if na, nb := perNode[a.Spec.NodeName], perNode[b.Spec.NodeName]; na != nb {
			return na - nb
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	return pods
}

// podsPerNode counts the pods of all that stay on their node, by node:
// what retireOrder calls a node's emptiness. Pods being deleted, finished
// or retiring are on their way off it and do not count.
func podsPerNode(all []*corev1.Pod) map[string]int {
	n := map[string]int{}
	for _, p := range all {
		switch pool.StateOf(p) {
		case poolapi.PodGone, poolapi.PodRetiring, poolapi.PodPending:
			continue
		}
		n[p.Spec.NodeName]++
	}
	return n
}

// podRequests is one pod's requests of CPU (millicores) and memory (bytes),
// for the budget: the sum over its containers, or the largest init
// container's when that is more (the scheduler's rule).
func podRequests(t *corev1.PodTemplateSpec) (milliCPU, memBytes int64) {
	req := pool.PodRequests(&t.Spec)
	return req.Cpu().MilliValue(), req.Memory().Value()
}

// retireMark is the merge patch that makes an idle pod unclaimable and the
// ReplicaSet's first choice to remove, on the condition that it is still at
// resourceVersion rv: a claim that won the pod first changed it, and the
// patch is refused (409), so a claim and a removal never both win one pod.
func retireMark(rv string, at time.Time) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": rv,
		"annotations": map[string]string{
			poolapi.AnnotationRetiring:     at.UTC().Format(time.RFC3339),
			poolapi.AnnotationDeletionCost: retireCost,
		},
	}})
	return b
}

// retireUnmark undoes retireMark on a pod the ReplicaSet did not remove
// (a pod it preferred went first, or the pool grew again), under the same
// precondition.
func retireUnmark(rv string) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": rv,
		"annotations":     map[string]any{poolapi.AnnotationRetiring: nil, poolapi.AnnotationDeletionCost: nil},
	}})
	return b
}

// markedAt is when pod was marked retiring; zero if not or unreadable.
func markedAt(p *corev1.Pod) time.Time {
	t, _ := time.Parse(time.RFC3339, p.Annotations[poolapi.AnnotationRetiring])
	return t
}

// replicasOf is d's spec.replicas (1, the API server's default, when unset).
func replicasOf(d *appsv1.Deployment) int {
	if d.Spec.Replicas == nil {
		return 1
	}
	return int(*d.Spec.Replicas)
}
