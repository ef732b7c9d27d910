package pools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// The pods above a pool's floor (decision 0010). A pool's Deployment keeps
// the floor a person wrote (its ReplicaSet refills it at once, with or
// without this controller); the controller makes the pods above it
// itself, from the Deployment's template with the current ReplicaSet's
// pod-template-hash, and an ownerReference to the Deployment as their
// controller. No ReplicaSet adopts or counts a
// pod that has a controller, so a claim of one makes no replacement: the
// next decision makes one if it still wants it. A ReplicaSet replaced every
// claimed pod within milliseconds, whatever the decision 200 ms later, and
// the pods a falling decision then removed were made for no job (issue
// 41's pods made ≤ 1.1× jobs).
//
// A pod of its own above the decision stays while it is not Ready or has
// been Ready for less than sizing.MaxKeepAlive, as long as no pool's
// growth waits for the budget's room and the period's idle_time is not 0:
// the next claim takes it instead of a pod made for that claim. Then it is deleted under its UID and
// resourceVersion, so that a claim made meanwhile wins and the deletion
// loses (the claim's own rule).

// expectTTL is how long a pod the controller created counts as starting
// before its informer shows it: the informer's lag is milliseconds; a pod
// deleted before it was ever seen must not hold its pool's size forever.
const expectTTL = time.Minute

// Back-off of a pool's creates after one is refused: the first wait, and
// the most, doubling in between (the controller's work queue backs off
// from 500 ms to 2 min; the ReplicaSet controller's creates also wait for
// its queue's back-off after a FailedCreate).
const (
	createBackoff    = time.Second
	createBackoffMax = 2 * time.Minute
)

// refusal is a pool's back-off after a refused create: no create before
// until; delay is the wait that set it.
type refusal struct {
	until time.Time
	delay time.Duration
}

// ownPods are a pool's pods the controller made, by what they are to it.
type ownPods struct {
	// standing are idle, starting and pending pods of the current
	// template: the pool's size above its ReplicaSet's.
	standing []*corev1.Pod
	// stale are idle, starting and pending pods of an older template: no
	// driver claims them warm (their pod-template-hash is not the pool's).
	stale []*corev1.Pod
	// claimed are its pods claimed without the claim releasing them (a
	// driver older than decision 0010): the controller releases them, or
	// the pool's removal would delete a running job's pod with it.
	claimed []*corev1.Pod
}

// splitOwn divides pods (one pool's) into those of its ReplicaSets and
// those the controller made (pool.MadeByController), which it sorts by
// hash, the current ReplicaSet's pod-template-hash ("" unknown: none is
// stale).
func splitOwn(pods []*corev1.Pod, d *appsv1.Deployment, hash string) (rs []*corev1.Pod, own ownPods) {
	for _, p := range pods {
		if !ownedBy(p, d) {
			rs = append(rs, p)
			continue
		}
		switch pool.StateOf(p) {
		case poolapi.PodBusy:
			own.claimed = append(own.claimed, p)
		case poolapi.PodIdle, poolapi.PodStarting, poolapi.PodPending:
			if hash != "" && p.Labels[poolapi.LabelTemplateHash] != hash {
				own.stale = append(own.stale, p)
			} else {
				own.standing = append(own.standing, p)
			}
		}
	}
	return rs, own
}

// ownedBy tells whether p is a pod the controller made for d.
func ownedBy(p *corev1.Pod, d *appsv1.Deployment) bool {
	c := metav1.GetControllerOf(p)
	return c != nil && c.UID == d.UID && pool.MadeByController(p)
}

// currentRS is d's current ReplicaSet among rsets (those d controls): the
// one of d's revision (deployment.kubernetes.io/revision), once the
// Deployment controller has seen d's spec (observedGeneration) and when d
// is not paused. The Deployment controller makes the ReplicaSet of a new
// template and gives d its revision before it writes the generation
// observed, so this ReplicaSet's template is d's live one with its
// pod-template-hash (the drivers compare the templates themselves,
// pool.CurrentHash; the informer here keeps no template, whose bytes were
// most of a ReplicaSet's). nil when there is none yet: nothing is made.
func currentRS(d *appsv1.Deployment, rsets []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	rev := d.Annotations[revisionAnnotation]
	if d.Spec.Paused || d.Status.ObservedGeneration < d.Generation || rev == "" {
		return nil
	}
	for _, rs := range rsets {
		if rs.Annotations[revisionAnnotation] == rev && rs.Labels[poolapi.LabelTemplateHash] != "" {
			return rs
		}
	}
	return nil
}

// revisionAnnotation is the Deployment controller's revision of a
// Deployment and of each of its ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// rsetsByOwner are the namespace's pool ReplicaSets by the UID of the
// Deployment that controls them: one list per decision, not one per pool.
func (c *Controller) rsetsByOwner(ns string) map[types.UID][]*appsv1.ReplicaSet {
	m := map[types.UID][]*appsv1.ReplicaSet{}
	if c.rsets == nil {
		return m
	}
	rsets, err := c.rsets.ReplicaSets(ns).List(labels.Everything())
	if err != nil {
		return m
	}
	for _, rs := range rsets {
		if o := metav1.GetControllerOf(rs); o != nil {
			m[o.UID] = append(m[o.UID], rs)
		}
	}
	return m
}

// podFor is a new pod of pool d from its live template, with its current
// ReplicaSet rs's pod-template-hash, controlled by d.
func podFor(d *appsv1.Deployment, rs *appsv1.ReplicaSet) *corev1.Pod {
	t := d.Spec.Template.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[poolapi.LabelTemplateHash] = rs.Labels[poolapi.LabelTemplateHash]
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: rs.Name + "-",
			Namespace:    d.Namespace,
			Labels:       t.Labels,
			Annotations:  t.Annotations,
			// No blockOwnerDeletion: it would need the update
			// permission on the Deployment's finalizers, and a pool's
			// removal need not wait for its idle pods.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment",
				Name: d.Name, UID: d.UID, Controller: &yes}},
		},
		Spec: t.Spec,
	}
}

// expected is how many pods the controller created for pool key that its
// informer does not show yet; seen are the names of the pool's pods in the
// cache. Names seen, or older than expectTTL, are forgotten.
func (c *Controller) expected(key string, seen map[string]bool, now time.Time) int {
	m := c.expect[key]
	for name, at := range m {
		switch {
		case seen[name]:
			delete(m, name)
		case now.Sub(at) > expectTTL:
			// Deleted before the watch showed it, or a watch that lags
			// by more than expectTTL: the next decision may make the pod
			// again, so it is said.
			c.log.Info("a pod made is not in the cache after expectTTL; no longer counted", "pool", key, "pod", name, "made", at, "ttl", expectTTL)
			delete(m, name)
		}
	}
	if len(m) == 0 {
		delete(c.expect, key)
	}
	return len(m)
}

// makePods creates n pods of pool x above its floor. Errors: the API
// server's; the pods made before it count. A refused create starts or
// doubles the pool's back-off (refusal), during which apply makes none.
func (c *Controller) makePods(ctx context.Context, x decided, n int, now time.Time) (int, error) {
	// A refill after a claim is no growth: max_growth_rate counts the
	// increases of the decided size (apply), as it counted a ReplicaSet's
	// replicas, whose refills were not the controller's.
	if x.rs == nil {
		return 0, nil
	}
	made := 0
	for range n {
		p, err := c.cs.CoreV1().Pods(x.d.Namespace).Create(ctx, podFor(x.d, x.rs), metav1.CreateOptions{})
		if err != nil && ctx.Err() != nil {
			// The decision ended (shutdown, leadership lost): nothing
			// refused the pod.
			return made, fmt.Errorf("creating a pod: %w", err)
		}
		if err != nil {
			r := c.refused[x.key]
			if now.Sub(r.until) > createBackoffMax {
				r.delay = 0 // refused long ago: a new refusal starts over
			}
			r.delay = min(max(2*r.delay, createBackoff), createBackoffMax)
			r.until = now.Add(r.delay)
			c.refused[x.key] = r
			c.m.errors.WithLabelValues("create").Inc()
			// A quota or an admission policy that refuses the pod: said
			// on the pool, as a ReplicaSet's FailedCreate would be.
			c.rec.Eventf(x.d, corev1.EventTypeWarning, EventScaleFailed, "creating a pod above the floor: %v", err)
			return made, fmt.Errorf("creating a pod: %w", err)
		}
		if c.expect[x.key] == nil {
			c.expect[x.key] = map[string]time.Time{}
		}
		c.expect[x.key][p.Name] = now
		made++
	}
	delete(c.refused, x.key)
	return made, nil
}

// shed removes up to n of pool x's own pods above its decision, in the
// ReplicaSet's removal order (retireOrder). A pod keptFor a later claim
// stays, unless the period's idle_time is 0 (which keeps nothing for
// demand) or *need, the pods other pools' growth waits for, is above 0:
// each such pod deleted takes one off it. It returns how many were
// deleted. Errors: the API server's, other than a conflict (claimed
// meanwhile) or a pod gone.
func (c *Controller) shed(ctx context.Context, x decided, n int, need *int, now time.Time) (int, error) {
	gone := 0
	for _, p := range retireOrder(sortPods(x.own.standing), x.perNode) {
		if gone >= n {
			break
		}
		kept := x.per.IdleTime > 0 && c.keptFor(p, now)
		if kept && *need <= 0 {
			continue
		}
		ok, err := c.deletePod(ctx, p)
		if err != nil {
			return gone, err
		}
		if ok {
			gone++
			if kept {
				*need--
			}
		}
	}
	return gone, nil
}

// keptFor tells whether p, above its pool's decision, is kept for a
// later claim: Ready for less than sizing.MaxKeepAlive, or not Ready yet
// and made less than sizing.MaxPodStart ago. A pod that does not become
// Ready (unschedulable, its image not pulled, its probe failing) is not
// kept: it holds a node's requests for nothing.
func (c *Controller) keptFor(p *corev1.Pod, now time.Time) bool {
	ready, at := readyAt(p)
	if !ready {
		return now.Sub(c.tracker.of(p.CreationTimestamp.Time)) < sizing.MaxPodStart
	}
	return now.Sub(c.tracker.of(at)) < sizing.MaxKeepAlive
}

// dropStale deletes the pool's own pods of an older template.
func (c *Controller) dropStale(ctx context.Context, x decided) error {
	var errs []error
	for _, p := range x.own.stale {
		if _, err := c.deletePod(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// release takes the Deployment's ownership off claimed pods, under each
// pod's resourceVersion (a conflict is left to the next decision).
// Errors: the API server's others.
func (c *Controller) release(ctx context.Context, claimed []*corev1.Pod) error {
	var errs []error
	for _, p := range claimed {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": p.ResourceVersion, "ownerReferences": nil}})
		_, err := c.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			c.m.errors.WithLabelValues("release").Inc()
			errs = append(errs, fmt.Errorf("releasing pod %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// deletePod deletes p on the condition that it is still the pod the cache
// showed (UID and resourceVersion): a claim changed it, so a claim and a
// deletion never both win one pod. False when the condition or the pod
// was gone. Errors: the API server's others.
func (c *Controller) deletePod(ctx context.Context, p *corev1.Pod) (bool, error) {
	uid, rv := p.UID, p.ResourceVersion
	err := c.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	}
	c.m.errors.WithLabelValues("delete").Inc()
	return false, fmt.Errorf("deleting pod %s: %w", p.Name, err)
}
