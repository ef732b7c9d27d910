package pools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// monday9 is a working Monday morning, UTC.
var monday9 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// A burst of claims is met at the burst's rate: ten jobs within one pod
// start ask for ten idle pods at once (gitlab-runner#4863's 30-job pipeline
// waited on a fixed step), with an Event and a status that say why.
func TestBurstScalesAtItsRate(t *testing.T) {
	now := monday9
	objs := []k8sruntime.Object{poolDeployment("alpine", "- idle_count: 2\n  idle_time: 10m", 2)}
	for i := range 10 {
		objs = append(objs, claimedPod("alpine", fmt.Sprintf("job-%d", i), now.Add(-time.Duration(i)*time.Second)))
	}
	h := newHarness(t, now, sizing.Budget{}, objs...)
	require.NoError(t, h.c.Reconcile(context.Background()))
	assert.Equal(t, 10, h.api.size(t, "alpine"))
	ev := h.events()
	require.Len(t, ev, 1)
	assert.Contains(t, ev[0], "Normal ScaledByDemand pods 2 → 10")
	d, err := h.api.AppsV1().Deployments(ns).Get(context.Background(), "alpine", metav1.GetOptions{})
	require.NoError(t, err)
	st := readStatus(d)
	assert.Equal(t, 10, st.Replicas)
	assert.Equal(t, "demand", st.Reason)
	assert.Equal(t, 10, st.Demand)
	assert.Equal(t, float64(10), testutil.ToFloat64(h.c.m.replicas.WithLabelValues(ns, "alpine")))
	assert.Equal(t, float64(1), testutil.ToFloat64(h.c.m.scaleChanges.WithLabelValues(ns, "alpine", "up", "demand")))

	// Deciding again from the same state writes nothing more.
	h.settle(t)
	before := h.api.Writes("update/deployments/scale")
	require.NoError(t, h.c.Reconcile(context.Background()))
	assert.Equal(t, before, h.api.Writes("update/deployments/scale"))
	assert.Empty(t, h.events())
}

// Scale-down removes idle pods only, chosen by the controller: each is
// marked retiring under its resourceVersion before replicas go down, so a
// claim racing the removal either wins the pod (the mark is refused) or
// finds it retiring (the driver skips it) — never both.
func TestScaleDownRetiresIdlePodsOnly(t *testing.T) {
	now := monday9
	h := newHarness(t, now, sizing.Budget{},
		poolDeployment("alpine", "- idle_count: 1\n  idle_time: 10m", 4),
		idlePod("alpine", "old", true, now.Add(-time.Hour)),
		idlePod("alpine", "young", true, now.Add(-time.Minute)),
		idlePod("alpine", "racing", true, now.Add(-2*time.Minute)),
		idlePod("alpine", "starting", false, now.Add(-time.Second)),
		claimedPod("alpine", "busy", now.Add(-time.Hour)),
	)
	// A driver claims "racing" just before the controller's mark lands.
	h.api.before = func(a k8stesting.Action) error {
		if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetName() == "racing" && strings.Contains(string(pa.GetPatch()), poolapi.AnnotationRetiring) {
			h.api.before = nil
			obj, _ := h.api.Tracker().Get(podsGVR, ns, "racing")
			p := obj.(*corev1.Pod).DeepCopy()
			p.Labels[poolapi.LabelState] = poolapi.StateClaimed
			p.ResourceVersion = h.api.nextRV()
			_ = h.api.Tracker().Update(podsGVR, p, ns)
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "racing", errors.New("modified"))
		}
		return nil
	}
	require.NoError(t, h.c.Reconcile(context.Background()))
	retiring := map[string]bool{}
	pods, err := h.api.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.Annotations[poolapi.AnnotationRetiring] != "" {
			retiring[p.Name] = true
			assert.Equal(t, retireCost, p.Annotations[poolapi.AnnotationDeletionCost])
		}
	}
	// The ReplicaSet's order: the pod not Ready first, then the youngest
	// Ready ones; "racing" was claimed, so "old" stays as the one idle pod.
	assert.Equal(t, map[string]bool{"starting": true, "young": true}, retiring)
	assert.Equal(t, 1, h.api.size(t, "alpine"), "one unmarked idle pod stays: the ReplicaSet removes only the marked ones")
	obj, _ := h.api.Tracker().Get(podsGVR, ns, "racing")
	assert.Equal(t, poolapi.StateClaimed, obj.(*corev1.Pod).Labels[poolapi.LabelState], "the claim won its pod")
	assert.Empty(t, obj.(*corev1.Pod).Annotations[poolapi.AnnotationRetiring])
	obj, _ = h.api.Tracker().Get(podsGVR, ns, "busy")
	assert.Empty(t, obj.(*corev1.Pod).Annotations[poolapi.AnnotationRetiring], "a busy pod is never marked")
	ev := h.events()
	require.Len(t, ev, 1)
	assert.Contains(t, ev[0], "ScaledByIdleTime pods 4 → 1", "the last claim was an hour ago")
}

// A pod the ReplicaSet kept although it was marked (it removed another)
// is made claimable again after the retire grace.
func TestStaleRetiringMarkIsTakenOff(t *testing.T) {
	now := monday9
	p := idlePod("alpine", "kept", true, now.Add(-time.Hour))
	p.Annotations = map[string]string{poolapi.AnnotationRetiring: now.Add(-time.Minute).Format(time.RFC3339), poolapi.AnnotationDeletionCost: retireCost}
	q := idlePod("alpine", "fresh", true, now.Add(-time.Hour))
	q.Annotations = map[string]string{poolapi.AnnotationRetiring: now.Add(-time.Second).Format(time.RFC3339), poolapi.AnnotationDeletionCost: retireCost}
	h := newHarness(t, now, sizing.Budget{}, poolDeployment("alpine", "- idle_count: 1", 1), p, q)
	require.NoError(t, h.c.Reconcile(context.Background()))
	got, _ := h.api.Tracker().Get(podsGVR, ns, "kept")
	assert.Empty(t, got.(*corev1.Pod).Annotations[poolapi.AnnotationRetiring])
	assert.Empty(t, got.(*corev1.Pod).Annotations[poolapi.AnnotationDeletionCost])
	got, _ = h.api.Tracker().Get(podsGVR, ns, "fresh")
	assert.NotEmpty(t, got.(*corev1.Pod).Annotations[poolapi.AnnotationRetiring], "within the grace the ReplicaSet may still remove it")
}

// An invalid policy is reported once (Event, status, metric) naming the
// pool and the field; that pool keeps its size and the other pools go on.
func TestInvalidPolicyKeepsThePoolsSize(t *testing.T) {
	cases := []struct{ name, policy, field string }{
		{"cron", "- periods: [\"* 8-17 * * funday\"]\n  idle_count: 2", "periods"},
		{"over-max", "- idle_count: 5\n  max: 2", "idle_count"},
		{"negative", "- idle_count: -1", "idle_count"},
		{"zone", "- idle_count: 1\n  timezone: Mars/Olympus", "timezone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, monday9, sizing.Budget{},
				poolDeployment("bad", tc.policy, 3),
				poolDeployment("good", "- idle_count: 2", 0))
			require.NoError(t, h.c.Reconcile(context.Background()))
			assert.Equal(t, 3, h.api.size(t, "bad"))
			assert.Equal(t, 2, h.api.size(t, "good"), "the other pools go on")
			ev := strings.Join(h.events(), "\n")
			assert.Contains(t, ev, "Warning InvalidPolicy warmpod.dev/policy is invalid: ")
			assert.Contains(t, ev, "; the pool keeps its 3 replicas")
			assert.Contains(t, ev, tc.field)
			assert.Equal(t, float64(0), testutil.ToFloat64(h.c.m.policyValid.WithLabelValues(ns, "bad")))
			d, err := h.api.AppsV1().Deployments(ns).Get(context.Background(), "bad", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "invalid", readStatus(d).Reason)
			// Reported once per text, not at every decision.
			h.settle(t)
			require.NoError(t, h.c.Reconcile(context.Background()))
			assert.NotContains(t, strings.Join(h.events(), "\n"), "InvalidPolicy")
		})
	}
}

// A pool whose pod template is labelled with another pool's name: the
// controller finds a pool's pods by that label under the Deployment's
// name, so the pods it made for it would never be seen and every decision
// would make them again. It is refused as an invalid policy is: an Event
// naming both names, no pod made, its size kept (a helper's hostile
// review found the pods piling up).
func TestAPoolNotNamedAsItsPodsIsRefused(t *testing.T) {
	d := poolDeployment("golang-pool", "- idle_count: 0\n  idle_time: 10m", 1)
	d.Spec.Template.Labels[poolapi.LabelPool] = "golang"
	at := monday9.Add(-time.Minute).Format(time.RFC3339Nano)
	d.Annotations[poolapi.AnnotationSizing] = fmt.Sprintf(`{"replicas":3,"reason":"demand","demand":3,"demandAt":%q,"lastClaim":%q,"decidedAt":%q}`, at, at, at)
	h := newHarness(t, monday9, sizing.Budget{Pods: 5}, d)
	for range 4 {
		require.NoError(t, h.c.Reconcile(context.Background()))
		h.settle(t)
		h.clock.Step(expectTTL + time.Second)
	}
	assert.Zero(t, h.api.Writes("create/pods"), "no pod made for a pool the controller cannot see")
	assert.Equal(t, 1, h.api.size(t, "golang-pool"), "the pool keeps its replicas")
	ev := strings.Join(h.events(), "\n")
	assert.Equal(t, 1, strings.Count(ev, "Warning InvalidPolicy"), ev)
	assert.Contains(t, ev, `its pod template's label warmpod.dev/pool="golang" is not the Deployment's name "golang-pool"`)
	assert.Equal(t, float64(0), testutil.ToFloat64(h.c.m.policyValid.WithLabelValues(ns, "golang-pool")))
}

// A policy fixed while the pool's size is already right: the status no
// longer says invalid (warmpod-pools status and the chart's NOTES read it),
// and one PolicyValid Event says so; a later decision writes nothing more.
func TestFixedPolicyClearsTheInvalidStatus(t *testing.T) {
	h := newHarness(t, monday9, sizing.Budget{}, poolDeployment("pool", "- idle_count: 3\n  timezone: Mars/Olympus", 3))
	ctx := context.Background()
	require.NoError(t, h.c.Reconcile(ctx))
	d, err := h.api.AppsV1().Deployments(ns).Get(ctx, "pool", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "invalid", readStatus(d).Reason)
	h.events()

	d.Annotations[poolapi.AnnotationPolicy] = "- idle_count: 3"
	d.ResourceVersion = "fixed"
	_, err = h.api.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	h.settle(t)
	require.NoError(t, h.c.Reconcile(ctx))
	assert.Equal(t, 3, h.api.size(t, "pool"), "the size was right: no scale write")
	d, err = h.api.AppsV1().Deployments(ns).Get(ctx, "pool", metav1.GetOptions{})
	require.NoError(t, err)
	st := readStatus(d)
	assert.Equal(t, string(sizing.ReasonPeriod), st.Reason)
	assert.Equal(t, 3, st.Replicas)
	assert.Contains(t, st.Message, "warmpod.dev/policy is valid again; replicas 3: ")
	ev := h.events()
	require.Len(t, ev, 1)
	assert.Contains(t, ev[0], "Normal PolicyValid warmpod.dev/policy is valid again")

	h.settle(t)
	require.NoError(t, h.c.Reconcile(ctx))
	assert.Empty(t, h.events(), "reported once")
}

// A pool's claim series exist from its first decision, at 0, so that a
// dashboard shows a pool without jobs as 0 warm and 0 cold, not "no data".
func TestClaimSeriesExistFromTheFirstDecision(t *testing.T) {
	h := newHarness(t, monday9, sizing.Budget{}, poolDeployment("quiet", "- idle_count: 1", 1))
	assert.Equal(t, 0, testutil.CollectAndCount(h.c.m.claims, "warmpod_pool_claims_total"))
	require.NoError(t, h.c.Reconcile(context.Background()))
	assert.Equal(t, 2, testutil.CollectAndCount(h.c.m.claims, "warmpod_pool_claims_total"), "warm and cold")
	assert.Equal(t, 2, testutil.CollectAndCount(h.c.m.claimWait, "warmpod_pool_claim_wait_seconds"), "warm and cold")
	assert.Equal(t, float64(0), testutil.ToFloat64(h.c.m.claims.WithLabelValues(ns, "quiet", "cold")))
}

// The API server failing: the error is returned for a retry with back-off,
// and nothing changes.
func TestAPIServerDownChangesNothing(t *testing.T) {
	h := newHarness(t, monday9, sizing.Budget{}, poolDeployment("alpine", "- idle_count: 2", 5),
		idlePod("alpine", "a", true, monday9.Add(-time.Hour)))
	h.api.before = func(k8stesting.Action) error { return apierrors.NewServiceUnavailable("etcd is down") }
	err := h.c.Reconcile(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool alpine")
	h.api.before = nil
	assert.Equal(t, 5, h.api.size(t, "alpine"))
}

// One budget across the namespace's pools, shared by demand: the pool
// with claims gets its pods first; the sum stays within the budget. The
// pools it takes them from give them back first: the busy pool grows into
// the room there is at once, and by the rest in the decision after the
// give-backs are seen.
func TestBudgetIsSharedByDemand(t *testing.T) {
	now := monday9
	objs := []k8sruntime.Object{
		poolDeployment("busy", "- idle_count: 2\n  idle_time: 10m", 2),
		poolDeployment("quiet-a", "- idle_count: 2", 2),
		poolDeployment("quiet-b", "- idle_count: 2", 2),
	}
	for i := range 6 {
		objs = append(objs, claimedPod("busy", fmt.Sprintf("job-%d", i), now.Add(-time.Duration(i)*time.Second)))
	}
	h := newHarness(t, now, sizing.Budget{Pods: 8}, objs...)
	require.NoError(t, h.c.Reconcile(context.Background()))
	busy, a, b := h.api.size(t, "busy"), h.api.size(t, "quiet-a"), h.api.size(t, "quiet-b")
	assert.Equal(t, []int{4, 1, 1}, []int{busy, a, b}, "the room of 2 at once, the give-backs written")
	h.settle(t)
	require.NoError(t, h.c.Reconcile(context.Background()))
	busy, a, b = h.api.size(t, "busy"), h.api.size(t, "quiet-a"), h.api.size(t, "quiet-b")
	assert.Equal(t, 6, busy)
	assert.Equal(t, 8, busy+a+b)
	assert.Contains(t, strings.Join(h.events(), "\n"), "ScaledByBudget")
}

// A new leader keeps the capacity the last one set for a burst (seeded
// from the pool's status) instead of scaling to idle_count at once.
func TestTakeoverKeepsBurstCapacity(t *testing.T) {
	now := monday9
	d := poolDeployment("alpine", "- idle_count: 1\n  idle_time: 10m", 8)
	d.Annotations[poolapi.AnnotationSizing] = fmt.Sprintf(`{"replicas":8,"reason":"demand","demand":8,"demandAt":%q,"lastClaim":%q,"decidedAt":%q}`,
		now.Add(-2*time.Minute).Format(time.RFC3339Nano), now.Add(-2*time.Minute).Format(time.RFC3339Nano), now.Add(-time.Minute).Format(time.RFC3339Nano))
	objs := []k8sruntime.Object{d}
	for i := range 8 {
		objs = append(objs, idlePod("alpine", fmt.Sprintf("idle-%d", i), true, now.Add(-time.Minute)))
	}
	// Claims the old leader counted are not counted twice.
	objs = append(objs, claimedPod("alpine", "counted", now.Add(-2*time.Minute)))
	h := newHarness(t, now, sizing.Budget{}, objs...)
	require.NoError(t, h.c.Reconcile(context.Background()))
	assert.Equal(t, 8, h.api.size(t, "alpine"))
	assert.Empty(t, h.events())

	// idle_time after the burst the pool goes back to idle_count.
	h.clock.Step(9 * time.Minute)
	require.NoError(t, h.c.Reconcile(context.Background()))
	assert.Equal(t, 1, h.api.size(t, "alpine"))
	assert.Contains(t, strings.Join(h.events(), "\n"), "ScaledByIdleTime pods 8 → 1")
}

// Pools without a policy are not the controller's.
func TestPoolWithoutPolicyIsLeftAlone(t *testing.T) {
	h := newHarness(t, monday9, sizing.Budget{}, poolDeployment("manual", "", 3))
	require.NoError(t, h.c.Reconcile(context.Background()))
	assert.Equal(t, 3, h.api.size(t, "manual"))
	assert.Zero(t, h.api.Writes("update/deployments/scale"))
}

// A decision writes the pools that grow before those that shrink: jobs that
// wait for a pool are not held behind other pools' marks and scale writes.
func TestGrowthIsWrittenFirst(t *testing.T) {
	now := monday9
	objs := []k8sruntime.Object{
		poolDeployment("a-shrinks", "- idle_count: 0", 2),
		idlePod("a-shrinks", "a1", true, now.Add(-time.Hour)),
		idlePod("a-shrinks", "a2", true, now.Add(-time.Hour)),
		poolDeployment("b-grows", "- idle_count: 3", 0),
	}
	h := newHarness(t, now, sizing.Budget{}, objs...)
	var order []string
	h.api.before = func(a k8stesting.Action) error {
		if a.GetVerb() == "update" && a.GetSubresource() == "scale" {
			order = append(order, a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale).Name)
		}
		return nil
	}
	require.NoError(t, h.c.Reconcile(context.Background()))
	assert.Equal(t, []string{"b-grows", "a-shrinks"}, order)
}

// A pipeline the controller saw on Monday at 11:00 is pre-warmed on
// Tuesday at 10:58 with no period written, by a new leader: the learned
// profile is saved on the pool (ProfileSaveEvery after it learned) and
// read back at the takeover.
func TestLearnedProfileSurvivesATakeover(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 10, 55, 0, 0, time.UTC) // a Monday
	h := newHarness(t, start, sizing.Budget{}, poolDeployment("alpine", "- idle_count: 0\n  idle_time: 5m", 0))
	h.clock.Step(6 * time.Minute) // 11:01
	for i := range 20 {
		_, err := h.api.CoreV1().Pods(ns).Create(ctx, claimedPod("alpine", fmt.Sprintf("job-%d", i), start.Add(5*time.Minute+time.Duration(i)*time.Second)), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	h.settle(t)
	require.NoError(t, h.c.Reconcile(ctx))
	h.clock.Step(5 * time.Minute) // 11:06: the 11:00 slot is learned
	h.settle(t)
	require.NoError(t, h.c.Reconcile(ctx))
	d, err := h.api.AppsV1().Deployments(ns).Get(ctx, "alpine", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, d.Annotations, poolapi.AnnotationProfile, "a profile waits ProfileSaveEvery before it is saved")

	h.clock.Step(ProfileSaveEvery)
	h.settle(t)
	require.NoError(t, h.c.Reconcile(ctx))
	d, err = h.api.AppsV1().Deployments(ns).Get(ctx, "alpine", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, d.Annotations, poolapi.AnnotationProfile)
	saved := d.Annotations[poolapi.AnnotationProfile]
	h.clock.Step(ProfileSaveEvery) // quiet slots over no history: nothing new to save
	h.settle(t)
	require.NoError(t, h.c.Reconcile(ctx))
	d, err = h.api.AppsV1().Deployments(ns).Get(ctx, "alpine", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, saved, d.Annotations[poolapi.AnnotationProfile])

	// Tuesday 10:58, a new leader, no pod of the pool left.
	d.ResourceVersion = ""
	d.Spec.Replicas = ptr.To[int32](0)
	tuesday := start.AddDate(0, 0, 1).Add(3 * time.Minute)
	h2 := newHarness(t, tuesday, sizing.Budget{}, d)
	require.NoError(t, h2.c.Reconcile(ctx))
	assert.Equal(t, 20, h2.api.size(t, "alpine"))
	ev := strings.Join(h2.events(), "\n")
	assert.Contains(t, ev, "Normal ScaledByProfile pods 0 → 20")
	assert.Contains(t, ev, "pre-warming 20 for Tue 11:00 UTC, seen on 1 of the last 1 weekday")
}
