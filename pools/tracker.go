package pools

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// ProfileSaveEvery is how long a change to a pool's learned profile waits
// before it is saved: one write per pool per hour at most, 17 writes a
// minute at 1,000 pools that all learn. A new leader reads what was saved;
// the slots since are unknown to it (skipped, not counted as quiet), so a
// leader change costs at most the learning of an hour.
const ProfileSaveEvery = time.Hour

// history is how much of a pool's past the tracker keeps. sizing.Decide
// reads the claims of the last idle_time only; a day covers every idle_time
// a sane policy sets, and a longer one still sees the last claim (kept
// apart) for its idle_time rule, but not the size of a burst over a day old.
const history = 24 * time.Hour

// startSamples is how many pod start times a pool keeps; its PodStart is
// their median, so one slow image pull does not set the pool's size for an
// hour, yet a pool whose pods became slower follows within a few pods.
const startSamples = 9

// Claim is one job that wanted a pod of a pool, as the tracker saw it.
type Claim struct {
	// Pool is the pool's name (the pod's warmpod.dev/pool label).
	Pool string
	// At is when the job got its pod (the claim's AnnotationClaimedAt; a
	// cold pod's creation).
	At time.Time
	// Warm is false for a cold fallback.
	Warm bool
	// Wait is from the driver's first look for a pod to a Ready pod it
	// holds; < 0 = not known yet (a cold pod's is known when it is Ready).
	Wait time.Duration
}

// poolHistory is what the tracker knows of one pool.
type poolHistory struct {
	claims, colds []time.Time
	last          time.Time
	starts        []time.Duration
	ups           []scaleUp
	// waits are the claims of the last history whose wait is known, in
	// the order their waits became known (Recent).
	waits []waitSample
	// profile is the pool's learned demand; changed when it first learned
	// something since it was last saved (zero: nothing).
	profile sizing.Profile
	changed time.Time
}

// scaleUp is one increase of a pool's replicas by the controller.
type scaleUp struct {
	at time.Time
	n  int
}

// Tracker turns pod events into each pool's demand: claims (a pod whose
// warmpod.dev/state became claimed), cold starts (a cold pod whose
// AnnotationColdReason is demand), and pod start times (creation to Ready of
// the pool's own pods and of its cold pods, but not of a no-pool cold pod:
// another image). Every pod counts once, whatever the number of events the
// informer delivers for it (by UID). Safe for concurrent use: informer
// handlers write, the reconcile reads.
type Tracker struct {
	mu    sync.Mutex
	pools map[string]*poolHistory // by namespace/name
	seen  map[types.UID]uint8     // what was counted of a pod: seen* bits
	// began is when the tracker began to see claims (Began).
	began time.Time
	// ignoreBefore[pool]: claims at or before it are already in a seeded
	// figure (see Seed).
	ignoreBefore map[string]time.Time
	// of puts a time a pod carries (its creation, its claim, its Ready
	// transition: the wall clock's) on the controller's clock; the
	// identity but under make bench-pools' compressed day (see New).
	of func(time.Time) time.Time
}

// Bits of Tracker.seen.
const (
	seenClaim uint8 = 1 << iota
	seenStart
	seenWait
)

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{pools: map[string]*poolHistory{}, seen: map[types.UID]uint8{}, ignoreBefore: map[string]time.Time{},
		of: func(t time.Time) time.Time { return t }}
}

func (t *Tracker) pool(key string) *poolHistory {
	h := t.pools[key]
	if h == nil {
		h = &poolHistory{}
		t.pools[key] = h
	}
	return h
}

// Observed is what one pod event added to a pool's history.
type Observed struct {
	// Claim is the claim the pod made, counted now; nil when none is new.
	Claim *Claim
	// Wait is a claim's wait that became known now (a warm claim's at once,
	// a cold pod's when it is Ready); < 0 = none. WaitWarm tells which.
	Wait     time.Duration
	WaitWarm bool
	// Start is a pod start time measured now (creation to Ready of a pool
	// pod or a cold pod); 0 = none.
	Start time.Duration
	// NoPool is the image of a cold pod whose job found no pool for it
	// (poolapi.ColdNoPool), seen now for the first time, created at
	// NoPoolAt; "" = none. sizing.Discovery counts them.
	NoPool   string
	NoPoolAt time.Time
}

// Observe counts what pod tells, once per pod: the claim it made, its wait,
// its start time. now stands in for a claim time the pod does not carry (a
// claim by a driver older than AnnotationClaimedAt).
func (t *Tracker) Observe(pod *corev1.Pod, now time.Time) Observed {
	o := Observed{Wait: -1}
	name := pod.Labels[poolapi.LabelPool]
	if name == "" {
		return o
	}
	key := pod.Namespace + "/" + name
	t.mu.Lock()
	defer t.mu.Unlock()
	bits := t.seen[pod.UID]
	defer func() { t.seen[pod.UID] = bits }()
	h := t.pool(key)
	cold := pod.Annotations[poolapi.AnnotationColdReason]
	claimed := pod.Labels[poolapi.LabelState] == poolapi.StateClaimed
	if claimed && bits&seenClaim == 0 {
		bits |= seenClaim
		if poolapi.ColdReason(cold) == poolapi.ColdNoPool {
			o.NoPool, o.NoPoolAt = pool.JobImage(&pod.Spec), t.of(pod.CreationTimestamp.Time)
		}
		if c, ok := claimOf(pod, name, cold, now, t.of); ok && c.At.After(t.ignoreBefore[key]) {
			addClaim(h, c)
			o.Claim = &c
			if c.Warm {
				o.Wait, o.WaitWarm = c.Wait, true
				bits |= seenWait
				addWait(h, waitSample{at: c.At, wait: c.Wait, warm: true})
			}
		}
	}
	ready, at := readyAt(pod)
	if !ready || bits&seenStart != 0 {
		return o
	}
	bits |= seenStart
	if claimed && cold == "" {
		// A claimed pool pod was Ready long before its claim: its start
		// was measured then, or is unknown.
		return o
	}
	if poolapi.ColdReason(cold) == poolapi.ColdNoPool {
		// The default pool's template with the job's image: its start
		// (that image's pull) is not a start of this pool's pods.
		return o
	}
	wall := at.Sub(pod.CreationTimestamp.Time) // the claim wait's unit
	if v, err := time.Parse(time.RFC3339Nano, pod.Annotations[poolapi.AnnotationClaimedAt]); err == nil && cold != "" {
		// A starting pool pod claimed: the job waited from its claim.
		wall = at.Sub(v)
	}
	if start := t.of(at).Sub(t.of(pod.CreationTimestamp.Time)); start > 0 {
		o.Start = start
		h.starts = append(h.starts, start)
		if len(h.starts) > startSamples {
			h.starts = h.starts[len(h.starts)-startSamples:]
		}
	}
	if cold != "" && bits&seenWait == 0 && poolapi.ColdReason(cold).Demand() && bits&seenClaim != 0 {
		// A cold pod's wait ends when it is Ready.
		bits |= seenWait
		o.Wait = waitOf(pod) + max(wall, 0)
		if c, ok := claimOf(pod, name, cold, now, t.of); ok {
			addWait(h, waitSample{at: c.At, wait: o.Wait})
		}
	}
	return o
}

// claimOf is the claim a claimed pod stands for: a warm claim, or a cold
// start whose reason is demand (its wait is known once it is Ready). of
// puts a time the pod carries on the controller's clock, as now is.
func claimOf(pod *corev1.Pod, name, cold string, now time.Time, of func(time.Time) time.Time) (Claim, bool) {
	if cold != "" {
		if !poolapi.ColdReason(cold).Demand() {
			return Claim{}, false
		}
		// A cold pod is claimed as it is made; a pool pod a driver took
		// while it was starting (a cold start too: the job waited for
		// it) at its AnnotationClaimedAt.
		at := pod.CreationTimestamp.Time
		if v, err := time.Parse(time.RFC3339Nano, pod.Annotations[poolapi.AnnotationClaimedAt]); err == nil {
			at = v
		}
		if at = of(at); at.After(now.Add(maxSkew)) {
			at = now // as a warm claim's
		}
		return Claim{Pool: name, At: at, Wait: -1}, true
	}
	at := now
	if v, err := time.Parse(time.RFC3339Nano, pod.Annotations[poolapi.AnnotationClaimedAt]); err == nil && !of(v).After(now.Add(maxSkew)) {
		// A claimed-at beyond now is not a driver's: the claim counts
		// now, or it would hold its demand until that date.
		at = of(v)
	}
	return Claim{Pool: name, At: at, Warm: true, Wait: waitOf(pod)}, true
}

// addClaim adds c to h.
func addClaim(h *poolHistory, c Claim) {
	if c.Warm {
		h.claims = append(h.claims, c.At)
	} else {
		h.colds = append(h.colds, c.At)
	}
	if c.At.After(h.last) {
		h.last = c.At
	}
}

// waitOf reads AnnotationClaimWait; 0 when absent or bad.
func waitOf(pod *corev1.Pod) time.Duration {
	ms, err := strconv.ParseInt(pod.Annotations[poolapi.AnnotationClaimWait], 10, 64)
	if err != nil || ms < 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// readyAt tells whether pod is Ready and since when.
func readyAt(pod *corev1.Pod) (bool, time.Time) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// Forget drops what was counted of a pod that is gone, so the map of seen
// pods does not grow without end.
func (t *Tracker) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, uid)
}

// ScaledUp records that the controller raised pool key's replicas by n at.
func (t *Tracker) ScaledUp(key string, n int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.pool(key)
	h.ups = append(h.ups, scaleUp{at: at, n: n})
}

// Seed restores what an earlier leader persisted in a pool's status
// (Status.Demand claims at Status.DemandAt, Status.LastClaim), so that a
// takeover keeps the capacity a burst needed instead of starting from no
// history. Claims at or before Status.DecidedAt are in that figure already
// and are not counted again. Seeding a pool the tracker has claims of
// already does nothing. A status dated after now (beyond maxSkew) is not
// an earlier leader's: seeding it would hold the pool up until that date
// and ignore every real claim before it; it is refused, and the pool
// learns from its pods.
func (t *Tracker) Seed(key string, s Status, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range []struct {
		name string
		at   time.Time
	}{{"decidedAt", s.DecidedAt}, {"demandAt", s.DemandAt}, {"lastClaim", s.LastClaim}} {
		if f.at.After(now.Add(maxSkew)) {
			return fmt.Errorf("status: %s %s is after now", f.name, f.at.UTC().Format(time.RFC3339))
		}
	}
	h := t.pool(key)
	if len(h.claims)+len(h.colds) > 0 || !h.last.IsZero() {
		return nil
	}
	for range min(s.Demand, 10_000) {
		h.claims = append(h.claims, s.DemandAt)
	}
	h.last = s.LastClaim
	t.ignoreBefore[key] = s.DecidedAt
	return nil
}

// maxSkew is how far after the controller's now a time a pod or a status
// carries may be and still be taken as written (another node's clock, or
// the API server's): beyond it, a claim counts at now and a status is not
// seeded.
const maxSkew = time.Minute

// SeedProfile restores pool key's learned profile from the text an earlier
// leader saved (poolapi.AnnotationProfile), unless the tracker learned one
// already. Errors: sizing.UnmarshalProfile's, or a profile folded past now
// (a clock ahead, or an annotation edited: it would never fold again); the
// pool then learns anew.
func (t *Tracker) SeedProfile(key, text string, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.pool(key)
	if !h.profile.Empty() {
		return nil
	}
	p, err := sizing.UnmarshalProfile(text)
	if err != nil {
		return err
	}
	if p.Through().After(now.Add(sizing.ProfileSlot)) {
		return fmt.Errorf("profile: folded up to %s, after now", p.Through().UTC().Format(time.RFC3339))
	}
	h.profile = p
	return nil
}

// Learn folds pool key's ended slots into its profile (claims are known
// since known, the controller's start) and returns what the profile
// expects from now until one pod start ahead. The pod start is the
// measured one, capped at sizing.MaxPodStart for the window of the slots
// it folds and at sizing.MaxLead for how far ahead it looks.
func (t *Tracker) Learn(key string, known, now time.Time) sizing.Forecast {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.pool(key)
	start := medianStart(h.starts)
	if h.profile.Due(known, now) && h.profile.Fold(slices.Concat(h.claims, h.colds), min(start, sizing.MaxPodStart), known, now) && h.changed.IsZero() {
		h.changed = now
	}
	return h.profile.Forecast(now, min(start, sizing.MaxLead))
}

// ProfileToSave is pool key's profile to persist now, marshalled: when it
// learned something since it was last saved, ProfileSaveEvery ago or more.
// A pool that only saw quiet slots where it knew of no demand has learned
// nothing and is not written.
func (t *Tracker) ProfileToSave(key string, now time.Time) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.pool(key)
	if h.changed.IsZero() || now.Sub(h.changed) < ProfileSaveEvery {
		return "", false
	}
	return h.profile.Marshal(), true
}

// ProfileSaved records that the profile ProfileToSave returned was saved
// (the worker that decides saves: nothing was learned in between).
func (t *Tracker) ProfileSaved(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pool(key).changed = time.Time{}
}

// medianStart is the median of the measured starts; sizing.DefaultPodStart
// when none is.
func medianStart(starts []time.Duration) time.Duration {
	if len(starts) == 0 {
		return sizing.DefaultPodStart
	}
	s := slices.Clone(starts)
	slices.Sort(s)
	return s[len(s)/2]
}

// Demand is a pool's history as sizing.Observation wants it: its recent
// warm claims and cold starts, its last claim, its measured pod start (the
// median of the last few; 0 = none yet) and how many pods the controller
// added in the minute before now. It prunes what is older than history.
func (t *Tracker) Demand(key string, now time.Time) (claims, colds []time.Time, last time.Time, podStart time.Duration, upLastMinute int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.pool(key)
	cut := now.Add(-history)
	h.claims = slices.DeleteFunc(h.claims, func(c time.Time) bool { return c.Before(cut) })
	h.colds = slices.DeleteFunc(h.colds, func(c time.Time) bool { return c.Before(cut) })
	h.waits = slices.DeleteFunc(h.waits, func(w waitSample) bool { return w.at.Before(cut) })
	h.ups = slices.DeleteFunc(h.ups, func(u scaleUp) bool { return !u.at.After(now.Add(-time.Minute)) })
	for _, u := range h.ups {
		upLastMinute += u.n
	}
	if len(h.starts) > 0 {
		podStart = medianStart(h.starts)
	}
	return slices.Clone(h.claims), slices.Clone(h.colds), h.last, podStart, upLastMinute
}

// SeedColds adds the cold jobs of a pool just made for them (the jobs
// that found no pool, sizing.Finder.Colds) to its history: its demand and
// keep-alive start from them.
func (t *Tracker) SeedColds(key string, colds []time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.pool(key)
	for _, c := range colds {
		addClaim(h, Claim{At: c, Wait: -1})
	}
}

// LastClaim is pool key's last claim, warm or cold; zero when none is known.
func (t *Tracker) LastClaim(key string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pool(key).last
}

// Remove forgets a pool that is gone.
func (t *Tracker) Remove(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pools, key)
	delete(t.ignoreBefore, key)
}
