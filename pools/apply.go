package pools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// apply gives pool x the size target: its ReplicaSet the part of target
// up to the floor a person wrote (scaled up at once, down only by idle pods
// it marked retiring first), and the pods above the floor made or removed
// by the controller itself (own.go: a surplus pod stays for a later claim
// unless *need, the pods other pools' growth waits for, takes its room);
// then an Event and the status when the decided size changed, and the
// pool's gauges.
func (c *Controller) apply(ctx context.Context, x decided, target int, need *int, now time.Time) error {
	d := x.d
	reason := string(x.dec.Reason)
	if target < x.dec.Idle {
		reason = "budget"
	}
	c.setGauges(x, now)
	// Pods of an older template first: their room is counted free.
	errs := []error{c.unmarkStale(ctx, x.rsPods.retiring, now), c.dropStale(ctx, x)}
	rsCur := replicasOf(d)
	own := len(x.own.standing) + x.exp
	// The ReplicaSet grows to the written floor, by what the
	// controller's own pods do not already hold (a floor that rises
	// under pods pre-warmed for it would otherwise have the ReplicaSet
	// make as many again; it takes the floor over as they are claimed),
	// and never above the floor. One above it (a pool sized before
	// decision 0010, or a floor lowered) gives its pods up as the
	// decision falls instead of having them retired and made again by the
	// controller: a pool at 10 would otherwise have all 10 unclaimable
	// for a pod start.
	rsWant := min(target, max(rsCur, min(target, x.floor)-own))
	rsNext, floorErr := c.applyFloor(ctx, x, rsWant, now)
	var makeErr error
	unmade := false
	switch want := target - rsWant; {
	case own < want && x.rs == nil:
		// A paused Deployment, or one whose new ReplicaSet the
		// Deployment controller has not made yet: nothing to make the
		// pods from. Not reported: the size is not set.
		unmade = true
	case own < want && now.Before(c.refused[x.key].until):
		// A create refused lately (a quota, an admission policy): the
		// next one waits for the pool's back-off, not for the next
		// decision, which any pod event brings within Batch. Not
		// reported: the size is not set.
		unmade = true
	case own < want:
		var made int
		made, makeErr = c.makePods(ctx, x, want-own, now)
		own += made
	case own > want:
		// Pods kept above the decision go when it falls by their keep,
		// or for another pool's growth: neither changes the decided
		// size, which the Event and the status report.
		gone, err := c.shed(ctx, x, own-want, need, now)
		own -= gone
		errs = append(errs, err)
	}
	errs = append(errs, floorErr, makeErr)
	c.m.replicas.WithLabelValues(d.Namespace, d.Name).Set(float64(rsNext + own))
	prev := c.reportedSize(x)
	switch {
	case floorErr != nil || makeErr != nil || unmade:
		// Not reported: the next decision tries again.
	case target != prev:
		if target > prev {
			c.tracker.ScaledUp(x.key, target-prev, now)
		}
		c.reportSize(ctx, x, prev, target, rsCur, rsNext, own, reason, now)
	case readStatus(d).Reason == "invalid" && c.revalidated[x.key] != d.ResourceVersion:
		// The size was already right, but the status still says the
		// policy is invalid: status and NOTES would go on telling a
		// person their fixed policy is broken until the size moves.
		c.policyValidAgain(ctx, x, prev, reason, now)
	}
	return errors.Join(errs...)
}

// reportedSize is the size last reported for pool x (its Event and
// status): this process's, else the status an earlier leader wrote,
// else the pool's size now.
func (c *Controller) reportedSize(x decided) int {
	if n, ok := c.reported[x.key]; ok {
		return n
	}
	if st := readStatus(x.d); !st.DecidedAt.IsZero() && st.Reason != "invalid" {
		return st.Replicas
	}
	return x.size()
}

// applyFloor gives pool x's ReplicaSet want replicas: at once up, down
// only by the idle pods it could mark retiring. It returns the replicas
// set. Errors: the API server's (the replicas stay as they were).
func (c *Controller) applyFloor(ctx context.Context, x decided, want int, now time.Time) (int, error) {
	d := x.d
	ns, name := d.Namespace, d.Name
	cur := replicasOf(d)
	next := want
	if want < cur {
		var err error
		if next, err = c.retire(ctx, x, want, cur, now); err != nil {
			return cur, err
		}
	}
	if next == cur {
		return cur, nil
	}
	scale := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: d.ResourceVersion},
		Spec:       autoscalingv1.ScaleSpec{Replicas: int32(next)},
	}
	// The Deployment's resourceVersion from the cache is the precondition:
	// a size someone else set since (kubectl scale, another leader) is not
	// overwritten unseen; the retry decides again from the newer object.
	if _, err := c.cs.AppsV1().Deployments(ns).UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
		c.m.errors.WithLabelValues("scale").Inc()
		if !apierrors.IsConflict(err) {
			c.rec.Eventf(d, corev1.EventTypeWarning, EventScaleFailed, "replicas %d → %d: %v", cur, next, err)
		}
		return cur, fmt.Errorf("scale %d → %d: %w", cur, next, err)
	}
	if next > cur {
		// max_growth_rate counts the decided size's growth (apply), not
		// this part of it.
		c.grown[x.key] = grown{replicas: next, base: d.ResourceVersion}
	}
	return next, nil
}

// reportSize reports that pool x's decided size went from prev to next
// pods (its ReplicaSet's replicas from rsCur to rsNext, own the pods the
// controller keeps above them): the metrics, an Event, a log line and the
// status.
func (c *Controller) reportSize(ctx context.Context, x decided, prev, next, rsCur, rsNext, own int, reason string, now time.Time) {
	c.reported[x.key] = next
	ns, name := x.d.Namespace, x.d.Name
	dir := "up"
	if next < prev {
		dir = "down"
	}
	c.m.scaleChanges.WithLabelValues(ns, name, dir, reason).Inc()
	msg := fmt.Sprintf("pods %d → %d: %s", prev, next, x.dec.Message)
	if reason == "budget" {
		msg = fmt.Sprintf("pods %d → %d: the namespace's idle budget gives %d of the %d the policy asks (%s)", prev, next, next, x.dec.Idle, x.dec.Message)
	}
	if rsNext != rsCur {
		msg += fmt.Sprintf("; its ReplicaSet's replicas %d → %d", rsCur, rsNext)
	}
	if kept := rsNext + own - next; kept > 0 {
		msg += fmt.Sprintf("; %d above it kept for a later claim, each until Ready for %s", kept, sizing.MaxKeepAlive)
	}
	c.rec.Event(x.d, corev1.EventTypeNormal, eventReason(reason), msg)
	c.log.Info("pool sized", "namespace", ns, "pool", name, "from", prev, "to", next, "replicas", rsNext, "reason", reason, "message", msg)
	st := Status{Replicas: next, Reason: reason, Message: msg, Desired: x.dec.Idle, Demand: x.dec.Terms.Demand,
		DemandAt: demandAt(x.claims, x.dec.Terms.Demand), LastClaim: x.lastDem.UTC(), PodStart: x.start.Seconds(), DecidedAt: now.UTC()}
	if err := c.writeStatus(ctx, x.d, st); err != nil {
		// The size is set; the status is advice. Not retried.
		c.m.errors.WithLabelValues("status").Inc()
		c.log.Warn("writing the pool's status failed", "pool", name, "err", err)
	}
}

// policyValidAgain reports, once, that pool x's policy parses again where
// its status says invalid and its size stays cur: an Event and the status
// of the decision. The status is advice: a failed write is logged, and the
// next decision tries again (it still reads "invalid"); a written one is
// not written again while the cache still shows the Deployment it was
// written on.
func (c *Controller) policyValidAgain(ctx context.Context, x decided, cur int, reason string, now time.Time) {
	msg := fmt.Sprintf("%s is valid again; replicas %d: %s", poolapi.AnnotationPolicy, cur, x.dec.Message)
	c.rec.Event(x.d, corev1.EventTypeNormal, EventPolicyValid, msg)
	st := Status{Replicas: cur, Reason: reason, Message: msg, Desired: x.dec.Idle, Demand: x.dec.Terms.Demand,
		DemandAt: demandAt(x.claims, x.dec.Terms.Demand), LastClaim: x.lastDem.UTC(), PodStart: x.start.Seconds(), DecidedAt: now.UTC()}
	if err := c.writeStatus(ctx, x.d, st); err != nil {
		c.m.errors.WithLabelValues("status").Inc()
		c.log.Warn("writing the pool's status failed", "pool", x.d.Name, "err", err)
		return
	}
	c.revalidated[x.key] = x.d.ResourceVersion
}

// eventReason is the Event reason for a sizing reason: "ScaledBy" and the
// reason in CamelCase (ScaledByDemand, ScaledByIdleTime, ScaledByBudget…),
// so `kubectl get events --field-selector reason=ScaledByBudget` finds them.
func eventReason(r string) string {
	var b strings.Builder
	b.WriteString("ScaledBy")
	for _, w := range strings.Split(r, "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// demandAt is the time of the last claim of the busiest window: the latest
// claim when the demand term is set (a seed at that time keeps the figure
// for one idle_time after it, as the claims themselves would).
func demandAt(claims []time.Time, demand int) time.Time {
	var last time.Time
	if demand == 0 {
		return last
	}
	for _, t := range claims {
		if t.After(last) {
			last = t
		}
	}
	return last.UTC()
}

// setGauges sets the pool's gauges from its pods and decision.
func (c *Controller) setGauges(x decided, now time.Time) {
	ns, name := x.d.Namespace, x.d.Name
	c.m.idle.WithLabelValues(ns, name).Set(float64(len(x.pods.idle)))
	c.m.starting.WithLabelValues(ns, name).Set(float64(len(x.pods.starting) + len(x.pods.pending)))
	c.m.busy.WithLabelValues(ns, name).Set(float64(x.pods.busy))
	c.m.desired.WithLabelValues(ns, name).Set(float64(x.dec.Idle))
	c.m.podStart.WithLabelValues(ns, name).Set(x.start.Seconds())
	n := 0
	for _, t := range x.claims {
		if t.After(now.Add(-time.Minute)) {
			n++
		}
	}
	c.m.claimsPerMinute.WithLabelValues(ns, name).Set(float64(n))
	for _, k := range []string{kind(true), kind(false)} {
		// The series exist from the pool's first decision, at 0: a pool
		// without claims shows 0 warm and 0 cold on a dashboard and in
		// rate(), not "no data" until its first job.
		c.m.claims.WithLabelValues(ns, name, k)
		c.m.claimWait.WithLabelValues(ns, name, k)
	}
}

// retire marks, in the ReplicaSet's own removal order, the idle,
// starting and pending pods beyond target retiring, each under its resourceVersion, and
// returns the replicas to set: never fewer than the pods left unmarked, so
// the ReplicaSet removes only marked pods. A pod claimed meanwhile has left
// the ReplicaSet and counts as neither; pods not created yet are simply not
// created. A pod whose mark is refused twice ends the marking there (the
// ReplicaSet would remove it before the pods after it).
func (c *Controller) retire(ctx context.Context, x decided, target, cur int, now time.Time) (int, error) {
	order := retireOrder(x.rsPods, x.perNode)
	excess, stay := len(order)-target, len(order)
	for _, p := range order {
		if excess <= 0 {
			break
		}
		res, err := c.mark(ctx, p, now)
		if err != nil {
			c.m.errors.WithLabelValues("retire").Inc()
			// Scale by the marks so far: those pods are unclaimable now.
			return min(cur, max(target, stay)), err
		}
		if res == kept {
			// It stays unmarked, and a ReplicaSet removes a pod not
			// Ready before a Ready one whatever their deletion costs:
			// marking further pods of the order would have it remove
			// this one. The next decision tries again.
			break
		}
		// Marked, or left the ReplicaSet (claimed): one pod fewer that
		// stays, one fewer to remove.
		stay--
		excess--
	}
	return min(cur, max(target, stay)), nil
}

// markResult is what mark did to a pod.
type markResult int

const (
	// marked: the pod is retiring; the ReplicaSet will remove it.
	marked markResult = iota
	// left: the pod was claimed, deleted or relabelled meanwhile: it is no
	// longer the ReplicaSet's, and not the controller's to remove.
	left
	// kept: the pod kept changing under the mark; it stays idle.
	kept
)

// mark marks one pod retiring. A refusal because the kubelet updated the
// pod's status meanwhile is retried once from the pod as it is now.
// Errors: the API server's, other than a conflict or a pod gone.
func (c *Controller) mark(ctx context.Context, p *corev1.Pod, now time.Time) (markResult, error) {
	pods := c.cs.CoreV1().Pods(p.Namespace)
	rv := p.ResourceVersion
	for try := 0; try < 2; try++ {
		_, err := pods.Patch(ctx, p.Name, types.MergePatchType, retireMark(rv, now), metav1.PatchOptions{})
		switch {
		case err == nil:
			return marked, nil
		case apierrors.IsNotFound(err):
			return left, nil
		case !apierrors.IsConflict(err):
			return kept, err
		}
		fresh, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return left, nil
		}
		if err != nil {
			return kept, err
		}
		if fresh.UID != p.UID || fresh.DeletionTimestamp != nil || fresh.Labels[poolapi.LabelState] != poolapi.StateIdle {
			return left, nil
		}
		rv = fresh.ResourceVersion
	}
	return kept, nil
}

// unmarkStale takes the retiring mark off pods the ReplicaSet kept for
// longer than RetireGrace, so they can be claimed again.
func (c *Controller) unmarkStale(ctx context.Context, retiring []*corev1.Pod, now time.Time) error {
	var errs []error
	for _, p := range retiring {
		if at := markedAt(p); !at.IsZero() && now.Sub(at) < c.cfg.RetireGrace {
			continue
		}
		_, err := c.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, retireUnmark(p.ResourceVersion), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			c.m.errors.WithLabelValues("retire").Inc()
			errs = append(errs, fmt.Errorf("unmark %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// writeStatus writes st into d's poolapi.AnnotationSizing.
func (c *Controller) writeStatus(ctx context.Context, d *appsv1.Deployment, st Status) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return c.patchAnnotation(ctx, d, poolapi.AnnotationSizing, string(b))
}

// patchAnnotation sets one annotation of d (a merge patch of that one key:
// what a person or another writer set beside it stays).
func (c *Controller) patchAnnotation(ctx context.Context, d *appsv1.Deployment, key, value string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	_, err := c.cs.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
