package pools

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/warmpod/warmpod/poolapi"
)

// tpod builds the pods the tracker sees, as the drivers and the ReplicaSet
// leave them.
type tpod struct {
	uid, pool string
	claimed   bool
	created   time.Time
	// ready: Ready since readyAt; false: a Ready condition False.
	ready   bool
	readyAt time.Time
	ann     map[string]string
}

func (p tpod) build() *corev1.Pod {
	state := poolapi.StateIdle
	if p.claimed {
		state = poolapi.StateClaimed
	}
	st := corev1.ConditionFalse
	if p.ready {
		st = corev1.ConditionTrue
	}
	ann := map[string]string{}
	for k, v := range p.ann {
		ann[k] = v
	}
	lbl := map[string]string{poolapi.LabelState: state}
	if p.pool != "" {
		lbl[poolapi.LabelPool] = p.pool
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.uid, Namespace: ns, UID: k8stypes.UID(p.uid), Labels: lbl, Annotations: ann,
			CreationTimestamp: metav1.NewTime(p.created)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(p.readyAt)}}},
	}
}

// t0 is the tracker tests' now.
var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// warmClaim is a pool pod created 10 min before at, claimed at at (its
// claimed-at annotation) after waitMs of looking.
func warmClaim(uid string, at time.Time, waitMs int) tpod {
	return tpod{uid: uid, pool: "alpine", claimed: true, created: at.Add(-10 * time.Minute), ready: true,
		readyAt: at.Add(-9 * time.Minute), ann: map[string]string{
			poolapi.AnnotationClaimedAt: at.Format(time.RFC3339Nano), poolapi.AnnotationClaimWait: strconv.Itoa(waitMs)}}
}

// coldPod is a cold pod of reason, created at created after waitMs of
// looking for a warm one; Ready after start when ready.
func coldPod(uid, reason string, created time.Time, waitMs int, ready bool, start time.Duration) tpod {
	return tpod{uid: uid, pool: "alpine", claimed: true, created: created, ready: ready, readyAt: created.Add(start),
		ann: map[string]string{poolapi.AnnotationColdReason: reason, poolapi.AnnotationClaimWait: strconv.Itoa(waitMs)}}
}

// demand reads pool alpine's history at now.
type demand struct {
	claims, colds []time.Time
	last          time.Time
	start         time.Duration
	ups           int
}

func demandOf(tr *Tracker, now time.Time) demand {
	var d demand
	d.claims, d.colds, d.last, d.start, d.ups = tr.Demand(ns+"/alpine", now)
	return d
}

// Every pod counts once, whatever the events the informer delivers for it:
// its add, its updates (a status change, the kubelet's Ready), and the
// same object again on a relist.
func TestTrackerCountsEachPodOnce(t *testing.T) {
	claimAt := t0.Add(-time.Minute)
	idle := tpod{uid: "p", pool: "alpine", created: t0.Add(-20 * time.Minute), ready: true, readyAt: t0.Add(-19 * time.Minute)}
	claimed := warmClaim("p", claimAt, 40)
	claimed.created, claimed.readyAt = idle.created, idle.readyAt
	starting := coldPod("c", "no-idle", t0.Add(-30*time.Second), 2000, false, 0)
	readyCold := coldPod("c", "no-idle", t0.Add(-30*time.Second), 2000, true, 6*time.Second)
	cases := []struct {
		name         string
		events       []tpod
		claims, cold int
		starts       time.Duration
		// counted: the index of the event that reports the claim (-1: none).
		counted int
	}{
		{"warm claim: add, update, relist", []tpod{claimed, claimed, claimed}, 1, 0, 0, 0},
		{"idle, then claimed, then relist", []tpod{idle, claimed, claimed}, 1, 0, time.Minute, 1},
		{"cold: starting, Ready, relist", []tpod{starting, readyCold, readyCold}, 0, 1, 6 * time.Second, 0},
		{"idle pod: add, update, relist", []tpod{idle, idle, idle}, 0, 0, time.Minute, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker()
			for i, e := range tc.events {
				o := tr.Observe(e.build(), t0)
				if i == tc.counted {
					assert.NotNil(t, o.Claim, "event %d counts the claim", i)
				} else {
					assert.Nil(t, o.Claim, "event %d counts nothing more", i)
				}
			}
			d := demandOf(tr, t0)
			assert.Len(t, d.claims, tc.claims)
			assert.Len(t, d.colds, tc.cold)
			assert.Equal(t, tc.starts, d.start)
		})
	}
}

// A warm claim's time is the claim's own (AnnotationClaimedAt), so a
// controller that starts later or sees the event late puts the claim where
// it happened; without the annotation (an older driver) or with a bad one
// it is now.
func TestTrackerWarmClaimTime(t *testing.T) {
	at := t0.Add(-3*time.Minute - 250*time.Millisecond)
	cases := []struct {
		name      string
		claimedAt *string // nil: annotation absent
		want      time.Time
	}{
		{"annotated", ptrTo(at.Format(time.RFC3339Nano)), at},
		{"absent", nil, t0},
		{"unreadable", ptrTo("yesterday"), t0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := warmClaim("p", at, 15)
			delete(p.ann, poolapi.AnnotationClaimedAt)
			if tc.claimedAt != nil {
				p.ann[poolapi.AnnotationClaimedAt] = *tc.claimedAt
			}
			o := NewTracker().Observe(p.build(), t0)
			require.NotNil(t, o.Claim)
			assert.True(t, o.Claim.Warm)
			assert.Equal(t, "alpine", o.Claim.Pool)
			assert.True(t, tc.want.Equal(o.Claim.At), "claim at %s, want %s", o.Claim.At, tc.want)
			// A warm claim's wait is known at once.
			assert.Equal(t, 15*time.Millisecond, o.Wait)
			assert.True(t, o.WaitWarm)
		})
	}
}

func ptrTo(s string) *string { return &s }

// Only a cold pod whose job wanted a pod of its pool is demand on that
// pool: no idle pod was Ready (no-idle) or the pool was rolling out
// (pending). A job whose image has no pool (no-pool, made from the default
// pool's template) or whose warm pod was claimed and released (released,
// counted at its claim) is not.
func TestTrackerColdReasons(t *testing.T) {
	created := t0.Add(-time.Minute)
	cases := []struct {
		reason string
		demand bool
	}{
		{string(poolapi.ColdNoIdle), true},
		{string(poolapi.ColdPending), true},
		{string(poolapi.ColdNoPool), false},
		{string(poolapi.ColdReleased), false},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			tr := NewTracker()
			o := tr.Observe(coldPod("c", tc.reason, created, 500, true, 5*time.Second).build(), t0)
			d := demandOf(tr, t0)
			assert.Empty(t, d.claims, "a cold pod is never a warm claim")
			if !tc.demand {
				assert.Nil(t, o.Claim)
				assert.Empty(t, d.colds)
				assert.True(t, d.last.IsZero(), "not the pool's last claim either")
				assert.Equal(t, time.Duration(-1), o.Wait, "no claim, no wait")
				return
			}
			require.NotNil(t, o.Claim)
			assert.False(t, o.Claim.Warm)
			assert.True(t, created.Equal(o.Claim.At), "a cold claim is at the pod's creation")
			assert.Equal(t, []time.Time{created}, d.colds)
			assert.True(t, created.Equal(d.last))
		})
	}
}

// A cold pod's wait is known when it is Ready: the driver's look for a
// warm pod (AnnotationClaimWait) plus the pod's creation to Ready. It is
// reported once, at the event that shows it Ready.
func TestTrackerColdWaitOnceReady(t *testing.T) {
	created := t0.Add(-time.Minute)
	cases := []struct {
		name   string
		events []tpod
		// waits: what each event reports (-1: nothing).
		waits []time.Duration
	}{
		{"starting, Ready, update", []tpod{
			coldPod("c", "no-idle", created, 1500, false, 0),
			coldPod("c", "no-idle", created, 1500, true, 7*time.Second),
			coldPod("c", "no-idle", created, 1500, true, 7*time.Second)},
			[]time.Duration{-1, 8500 * time.Millisecond, -1}},
		{"first seen Ready", []tpod{
			coldPod("c", "pending", created, 0, true, 12*time.Second),
			coldPod("c", "pending", created, 0, true, 12*time.Second)},
			[]time.Duration{12 * time.Second, -1}},
		{"not demand: never", []tpod{
			coldPod("c", "no-pool", created, 1500, false, 0),
			coldPod("c", "no-pool", created, 1500, true, 7*time.Second)},
			[]time.Duration{-1, -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker()
			for i, e := range tc.events {
				o := tr.Observe(e.build(), t0)
				assert.Equal(t, tc.waits[i], o.Wait, "event %d", i)
				assert.False(t, o.WaitWarm, "event %d", i)
			}
		})
	}
}

// A pool's pod start is the median of its last 9 measured starts (creation
// to Ready of its own pods and of its cold pods); a claimed pool pod was
// Ready long before its claim and adds none, nor does a pod not Ready.
func TestTrackerPodStart(t *testing.T) {
	secs := func(ss ...int) []tpod {
		var out []tpod
		for i, s := range ss {
			c := t0.Add(-time.Hour)
			out = append(out, tpod{uid: "p" + strconv.Itoa(i), pool: "alpine", created: c, ready: true, readyAt: c.Add(time.Duration(s) * time.Second)})
		}
		return out
	}
	notReady := secs(3)[0]
	notReady.ready = false
	cases := []struct {
		name string
		pods []tpod
		want time.Duration
	}{
		// The last 9 are 10..90: median 50 (of all 12 it would be 40; of
		// the first 9, 20).
		{"median of the last 9", secs(1, 2, 3, 10, 20, 30, 40, 50, 60, 70, 80, 90), 50 * time.Second},
		{"unsorted", secs(9, 1, 8), 8 * time.Second},
		{"one", secs(4), 4 * time.Second},
		{"none", nil, 0},
		{"claimed pool pods add none", []tpod{warmClaim("a", t0, 1), warmClaim("b", t0, 1)}, 0},
		{"a claimed pool pod among starts", append(secs(2, 4), warmClaim("a", t0, 1)), 4 * time.Second},
		{"a cold pod's start counts", []tpod{coldPod("c", "no-idle", t0.Add(-time.Minute), 0, true, 11*time.Second)}, 11 * time.Second},
		// A no-pool cold pod is the default pool's template with the job's
		// image: its start (that image's pull) is not one of this pool's.
		{"a no-pool cold pod's start does not count", append(secs(4), coldPod("c", "no-pool", t0.Add(-time.Minute), 0, true, 90*time.Second)), 4 * time.Second},
		{"a released cold pod's start counts", append(secs(4), coldPod("c", "released", t0.Add(-time.Minute), 0, true, 9*time.Second)), 9 * time.Second},
		{"not Ready adds none", []tpod{notReady}, 0},
		{"Ready before created adds none", secs(-5), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker()
			for _, p := range tc.pods {
				tr.Observe(p.build(), t0)
			}
			assert.Equal(t, tc.want, demandOf(tr, t0).start)
		})
	}
}

// A new leader seeds a pool from the status the last one wrote: Demand
// claims at DemandAt and LastClaim, and does not count again the claims at
// or before DecidedAt (they are in that figure). Seeding a pool that has
// claims already does nothing.
func TestTrackerSeed(t *testing.T) {
	demandAt, lastClaim, decided := t0.Add(-4*time.Minute), t0.Add(-3*time.Minute), t0.Add(-2*time.Minute)
	st := Status{Demand: 3, DemandAt: demandAt, LastClaim: lastClaim, DecidedAt: decided}
	cases := []struct {
		name   string
		before []tpod // observed before the seed
		after  []tpod // observed after it
		claims []time.Time
		last   time.Time
	}{
		{"seeded", nil, nil, []time.Time{demandAt, demandAt, demandAt}, lastClaim},
		{"claims up to DecidedAt are in the figure", nil,
			[]tpod{warmClaim("a", decided.Add(-time.Second), 1), warmClaim("b", decided, 1)},
			[]time.Time{demandAt, demandAt, demandAt}, lastClaim},
		{"a claim after DecidedAt counts", nil, []tpod{warmClaim("a", decided.Add(time.Millisecond), 1)},
			[]time.Time{demandAt, demandAt, demandAt, decided.Add(time.Millisecond)}, decided.Add(time.Millisecond)},
		{"a pool with claims is not seeded", []tpod{warmClaim("a", decided.Add(-time.Minute), 1)},
			[]tpod{warmClaim("b", decided.Add(-time.Second), 1)},
			[]time.Time{decided.Add(-time.Minute), decided.Add(-time.Second)}, decided.Add(-time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker()
			for _, p := range tc.before {
				tr.Observe(p.build(), t0)
			}
			require.NoError(t, tr.Seed(ns+"/alpine", st, t0))
			for _, p := range tc.after {
				tr.Observe(p.build(), t0)
			}
			d := demandOf(tr, t0)
			assert.Equal(t, tc.claims, d.claims)
			assert.True(t, tc.last.Equal(d.last), "last claim %s, want %s", d.last, tc.last)
		})
	}
	t.Run("other pools are not seeded", func(t *testing.T) {
		tr := NewTracker()
		require.NoError(t, tr.Seed(ns+"/alpine", st, t0))
		claims, _, last, _, _ := tr.Demand(ns+"/ubuntu", t0)
		assert.Empty(t, claims)
		assert.True(t, last.IsZero())
	})
	t.Run("a status dated after now is not seeded", func(t *testing.T) {
		// Seeded, it would hold the pool at 100,000 until 2099 and
		// ignore every real claim before (the hostile trial's).
		future := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
		tr := NewTracker()
		err := tr.Seed(ns+"/alpine", Status{Demand: 100_000, DemandAt: future, DecidedAt: future}, t0)
		require.ErrorContains(t, err, "decidedAt 2099-01-01T00:00:00Z is after now")
		tr.Observe(warmClaim("a", t0.Add(-time.Second), 1).build(), t0)
		assert.Equal(t, []time.Time{t0.Add(-time.Second)}, demandOf(tr, t0).claims, "the real claim counts")
		require.NoError(t, tr.Seed(ns+"/alpine", Status{DecidedAt: t0.Add(maxSkew)}, t0), "within the skew")
	})
	t.Run("a claimed-at after now counts now", func(t *testing.T) {
		tr := NewTracker()
		tr.Observe(warmClaim("a", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), 1).build(), t0)
		p := coldPod("c", "no-idle", t0.Add(-time.Second), 0, false, 0)
		p.ann[poolapi.AnnotationClaimedAt] = "2099-01-01T00:00:00Z"
		tr.Observe(p.build(), t0)
		d := demandOf(tr, t0)
		assert.Equal(t, []time.Time{t0}, d.claims)
		assert.Equal(t, []time.Time{t0}, d.colds)
	})
	t.Run("a huge figure is capped", func(t *testing.T) {
		tr := NewTracker()
		require.NoError(t, tr.Seed(ns+"/alpine", Status{Demand: 25_000, DemandAt: demandAt, DecidedAt: decided}, t0))
		assert.Len(t, demandOf(tr, t0).claims, 10_000)
	})
}

// Demand forgets claims and cold starts older than a day (the last claim
// stays known) and sums the pods the controller added in the minute before
// now, a scale-up exactly a minute old no longer counting.
func TestTrackerDemandPrunes(t *testing.T) {
	tr := NewTracker()
	key := ns + "/alpine"
	dayAgo := t0.Add(-history)
	for i, at := range []time.Time{dayAgo.Add(-time.Nanosecond), dayAgo, t0.Add(-time.Hour)} {
		tr.Observe(warmClaim("w"+strconv.Itoa(i), at, 1).build(), t0)
		tr.Observe(coldPod("c"+strconv.Itoa(i), "no-idle", at, 1, false, 0).build(), t0)
	}
	for _, u := range []struct {
		ago time.Duration
		n   int
	}{{61 * time.Second, 100}, {time.Minute, 10}, {59 * time.Second, 3}, {0, 2}} {
		tr.ScaledUp(key, u.n, t0.Add(-u.ago))
	}
	d := demandOf(tr, t0)
	assert.Equal(t, []time.Time{dayAgo, t0.Add(-time.Hour)}, d.claims)
	assert.Equal(t, []time.Time{dayAgo, t0.Add(-time.Hour)}, d.colds)
	assert.Equal(t, 5, d.ups)

	// An hour on: the day-old claims are gone, the last one stays; so do
	// the scale-ups.
	later := t0.Add(time.Hour)
	d = demandOf(tr, later)
	assert.Equal(t, []time.Time{t0.Add(-time.Hour)}, d.claims)
	assert.Equal(t, []time.Time{t0.Add(-time.Hour)}, d.colds)
	assert.Zero(t, d.ups)
	d = demandOf(tr, later.Add(history))
	assert.Empty(t, d.claims)
	assert.Empty(t, d.colds)
	assert.True(t, t0.Add(-time.Hour).Equal(d.last), "the last claim outlives the history")
	assert.Len(t, tr.pools[key].claims, 0, "pruned, not only filtered")
}

// Forget drops a pod that is gone from the pods seen (so the map does not
// grow without end), and Remove a pool that is gone with its history and
// its seed's cut-off; neither touches another pod or pool.
func TestTrackerForgetAndRemove(t *testing.T) {
	t.Run("forget", func(t *testing.T) {
		tr := NewTracker()
		a, b := warmClaim("a", t0, 1).build(), warmClaim("b", t0, 1).build()
		tr.Observe(a, t0)
		tr.Observe(b, t0)
		require.Len(t, tr.seen, 2)
		tr.Forget(a.UID)
		assert.Len(t, tr.seen, 1)
		assert.Contains(t, tr.seen, b.UID)
		assert.Nil(t, tr.Observe(b, t0).Claim, "b is still known")
		// The claim itself stays in the pool's history.
		assert.Len(t, demandOf(tr, t0).claims, 2)
	})
	t.Run("remove", func(t *testing.T) {
		tr := NewTracker()
		other := warmClaim("u", t0, 1)
		other.pool = "ubuntu"
		require.NoError(t, tr.Seed(ns+"/alpine", Status{Demand: 2, DemandAt: t0.Add(-time.Minute), DecidedAt: t0}, t0))
		tr.Observe(other.build(), t0)
		tr.Remove(ns + "/alpine")
		d := demandOf(tr, t0)
		assert.Empty(t, d.claims)
		assert.True(t, d.last.IsZero())
		assert.NotContains(t, tr.ignoreBefore, ns+"/alpine", "the seed's cut-off goes with the pool")
		claims, _, _, _, _ := tr.Demand(ns+"/ubuntu", t0)
		assert.Len(t, claims, 1, "another pool keeps its history")
	})
	t.Run("pods of no pool are not tracked", func(t *testing.T) {
		tr := NewTracker()
		p := warmClaim("x", t0, 1)
		p.pool = ""
		o := tr.Observe(p.build(), t0)
		assert.Nil(t, o.Claim)
		assert.Empty(t, tr.seen)
		assert.Empty(t, tr.pools)
	})
}

// A controller on a clock that is not the wall clock (pools.WallClock: make
// bench-pools' compressed day) counts the pods' times on its clock: a warm
// claim's annotation, a cold pod's creation, a start from creation to
// Ready. now, the fallback of a claim without its annotation, is on that
// clock already and is not mapped again.
func TestTrackerOnAnotherClock(t *testing.T) {
	wall := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	day := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	of := func(t time.Time) time.Time { return day.Add(t.Sub(wall) * 150) }
	tr := NewTracker()
	tr.of = of
	noAnn := warmClaim("b", wall, 1)
	delete(noAnn.ann, poolapi.AnnotationClaimedAt)
	for _, p := range []tpod{
		warmClaim("a", wall.Add(2*time.Second), 1),
		noAnn,
		coldPod("c", "no-idle", wall.Add(4*time.Second), 0, true, 3*time.Second),
	} {
		tr.Observe(p.build(), t0)
	}
	d := demandOf(tr, day.Add(time.Hour))
	assert.Equal(t, []time.Time{day.Add(5 * time.Minute), t0}, d.claims)
	assert.Equal(t, []time.Time{day.Add(10 * time.Minute)}, d.colds)
	assert.Equal(t, 450*time.Second, d.start, "3 wall seconds are 450 of the day")
}

// The profile pre-warms one measured pod start ahead of a burst it
// learned, even a start longer than sizing.MaxPodStart (up to
// sizing.MaxLead): an earlier start costs idle time, not pods.
func TestTrackerLearnLeadIsTheMeasuredStart(t *testing.T) {
	day1 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	burst := day1.Add(11 * time.Hour)
	for _, tc := range []struct {
		start  time.Duration
		before time.Duration // asked this long before the burst's time of day
		want   bool
	}{
		{30 * time.Second, 10 * time.Minute, false}, // 10:50 + 30 s + a slot ends before 11:00
		{6 * time.Minute, 10 * time.Minute, true},   // 10:50 + 6 min + a slot reaches 11:00
		{time.Hour, 10 * time.Minute, true},         // capped at MaxLead, still past 11:00
		{2 * time.Hour, 40 * time.Minute, false},    // 10:20 + MaxLead (not 2 h) + a slot ends before 11:00
	} {
		t.Run(tc.start.String()+"/"+tc.before.String(), func(t *testing.T) {
			tr := NewTracker()
			for i := range 9 {
				c := day1.Add(time.Hour)
				tr.Observe(tpod{uid: "s" + strconv.Itoa(i), pool: "alpine", created: c, ready: true, readyAt: c.Add(tc.start)}.build(), c)
			}
			for i := range 5 {
				tr.Observe(warmClaim("c"+strconv.Itoa(i), burst.Add(time.Duration(i)*time.Second), 1).build(), burst)
			}
			tr.Learn(ns+"/alpine", day1, burst.Add(time.Hour)) // folds the burst's slot
			f := tr.Learn(ns+"/alpine", day1, burst.AddDate(0, 0, 1).Add(-tc.before))
			assert.Equal(t, tc.want, f.Pods >= 5, "expects the burst %s before it, the next day: %+v", tc.before, f)
		})
	}
}

// A pool pod a driver claimed while it was starting (its warm wait over,
// executor/pool.Cluster.ClaimStarting) is a cold start of its pool: its
// claim is at its claimed-at, not at its creation by the ReplicaSet, its
// wait runs from that claim until Ready, and its start (creation to
// Ready) is one of the pool's.
func TestTrackerStartingPodClaimed(t *testing.T) {
	created, claimed := t0.Add(-time.Minute), t0.Add(-time.Minute+4*time.Second)
	p := coldPod("s", "no-idle", created, 1000, false, 0)
	p.ann[poolapi.AnnotationClaimedAt] = claimed.Format(time.RFC3339Nano)
	tr := NewTracker()
	o := tr.Observe(p.build(), t0)
	require.NotNil(t, o.Claim)
	assert.Equal(t, claimed, o.Claim.At)
	assert.False(t, o.Claim.Warm)
	p.ready, p.readyAt = true, created.Add(7*time.Second)
	o = tr.Observe(p.build(), t0)
	assert.Equal(t, 4*time.Second, o.Wait, "1 s of warm wait, then 3 s from the claim to Ready")
	assert.Equal(t, 7*time.Second, o.Start)
	d := demandOf(tr, t0)
	assert.Equal(t, []time.Time{claimed}, d.colds)
}
