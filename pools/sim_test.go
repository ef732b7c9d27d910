package pools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// simConfig is the size of one simulation.
type simConfig struct {
	pools, jobsPerHour int
	start              time.Time
	duration           time.Duration
	// budget is the namespace's idle pods.
	budget int
	// bursts are the minutes at which a 30-job pipeline arrives (within
	// two seconds) on one pool.
	bursts []int
	// learned seeds every pool's saved demand profile with the run's own
	// arrivals on the five weekdays before it, so the controller starts as
	// after a week of learning: it pre-warms the pipelines and keeps a
	// pool's trickle pod from its first decision.
	learned bool
}

// simPolicy is one of the pools' policies, by pool index modulo 4: a
// steady pool, one that scales to zero, GitLab's scale_factor, and office
// hours whose period ends at 10:00, inside every run. idleTimes are the
// idle_times it has, initial the size it asks with no demand at the start.
type simPolicy struct {
	text      string
	idleTimes []time.Duration
	initial   int
}

var simPolicies = []simPolicy{
	{"- idle_count: 1\n  idle_time: 10m\n  max: 20", []time.Duration{10 * time.Minute}, 1},
	{"- idle_count: 0\n  idle_time: 5m", []time.Duration{5 * time.Minute}, 0},
	{"- idle_count: 0\n  idle_time: 20m\n  min: 1\n  scale_factor: 0.5\n  scale_factor_limit: 5", []time.Duration{20 * time.Minute}, 1},
	{"- idle_count: 0\n  idle_time: 5m\n- periods: [\"* 9 * * mon-fri\"]\n  idle_count: 2\n  idle_time: 15m\n  max_growth_rate: 10",
		[]time.Duration{5 * time.Minute, 15 * time.Minute}, 2},
}

// simBoundary is when the office-hours period ends (a Monday).
var simBoundary = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// TestSimulation is issue 28's "past one cluster": the real Controller
// (New, Start, Reconcile over its informers) sizing 1,000 pools of one
// namespace, within one budget of 1,200 idle pods, under 10,000 jobs an
// hour (each pool's share by a 1/rank popularity, jobs of 1 to 10 minutes,
// three 30-job pipelines) for a simulated hour from 09:30 on a Monday, on
// a fake clock, against the fake API server. The test plays the rest of
// the cluster: the ReplicaSets (pods of deploy/pool.yaml's template up to
// replicas, Ready after the pool's pod start; on a scale-down the pods a
// real ReplicaSet removes, replicaSetRemoves), the drivers (a claim of an
// idle Ready pod not marked retiring, with its resourceVersion as
// precondition and the claimed-at and claim-wait annotations; else a cold
// pod annotated cold-reason no-idle) and the jobs' ends (the pod
// deleted). One retire mark in five races a job that claims the same pod
// first, one in seven a kubelet status update (one in 77 before the
// mark's retry too), so every conflict path is taken. The controller
// decides every Resync (10 s) and after each pipeline; its writes are
// counted on its own client, apart from the test's.
//
// The bound. The controller writes a pool only when its size changes
// (the scale, its status and one Event) and marks only the idle pods it
// removes. A pool's size is a function of what its decision reads: its
// pods (claims, cold pods, pods created, Ready or removed, jobs ended),
// the claims inside its idle_time (a claim leaves it idle_time after it),
// its period (a boundary), its scale-ups of the last minute (the growth
// limit), and the budget, which moves other pools only by what a pool
// takes or gives. So, with "touched" the pools one of those changed for
// since the decision before:
//
//	changes of a decision ≤ pools touched + pools the budget cuts, or cut
//	                        before (for their restore)
//	writes of a minute    = 3 × changes + marks (one per pod removed, one
//	                        per mark a race refused, then a read) + unmarks
//
// and a pool nothing touched is never written, whatever the number of
// pools. The test checks each change of size against that (none may be
// spurious), and that an Event comes with each change and a status with no
// other, a mark only with a removal, the pools' replicas within the
// budget, no write from a decision over an unchanged cluster, no pod
// removed by a ReplicaSet that the controller had not marked, and no
// claimed pod ever marked retiring or removed. Each job touches its pool a
// few times (its claim, the replacement's creation and Ready, its
// window's end, its end), so the writes follow the jobs, not the pools.
// It logs the writes per minute by kind, the changes by reason, the
// controller's heap (informer caches, history, metrics: the heap in use
// with it minus after it is dropped) and the warm-claim rate, which
// docs/design/pools.md reports ("Past one cluster"). -short runs 100 pools
// and 1,000 jobs an hour for 20 minutes across the same boundary.
func TestSimulation(t *testing.T) {
	cfg := simConfig{pools: 1000, jobsPerHour: 10_000, start: simBoundary.Add(-30 * time.Minute), duration: time.Hour,
		budget: 1200, bursts: []int{12, 31, 47}}
	if testing.Short() {
		cfg = simConfig{pools: 100, jobsPerHour: 1000, start: simBoundary.Add(-10 * time.Minute), duration: 20 * time.Minute,
			budget: 120, bursts: []int{7}}
	}
	w := newSimWorld(t, cfg)
	w.run()
	w.report()
}

// TestSimulationLearned is TestSimulation with every pool's profile
// learned (simConfig.learned): the controller pre-warms from the first
// decision on, and the forecast's slot boundaries are what touch a pool
// besides its pods and claims (simWorld.forecastTouches). Those windows
// cover most of each slot, so here the bound on changes holds only
// loosely (TestSimulation's is the tight one); this run measures what
// learning costs: the writes (the first decision of a leader with learned
// profiles pre-warms every pool that expects jobs at once) and the heap.
// Under the race detector it runs the -short size: TestSimulation covers
// the same code at full size there.
func TestSimulationLearned(t *testing.T) {
	cfg := simConfig{pools: 1000, jobsPerHour: 10_000, start: simBoundary.Add(-30 * time.Minute), duration: time.Hour,
		budget: 1200, bursts: []int{12, 31, 47}, learned: true}
	if testing.Short() || raceEnabled {
		cfg = simConfig{pools: 100, jobsPerHour: 1000, start: simBoundary.Add(-10 * time.Minute), duration: 20 * time.Minute,
			budget: 120, bursts: []int{7}, learned: true}
	}
	w := newSimWorld(t, cfg)
	w.run()
	w.report()
}

// seedProfiles saves into each pool's Deployment the profile a controller
// would have learned on the five weekdays before (a week ago Monday to
// Friday), each day's arrivals drawn as the run's are but with a seed of
// its own (the same rates and pipelines, other jobs), and schedules the
// touches of its forecast (forecastTouches).
func (w *simWorld) seedProfiles() {
	byPool := map[string][]time.Time{}
	for _, back := range []int{7, 6, 5, 4, 3} { // Mon … Fri of the week before
		for _, a := range w.draw(rand.New(rand.NewPCG(28, uint64(back))), w.cfg.start.AddDate(0, 0, -back)) {
			byPool[a.pool.name] = append(byPool[a.pool.name], a.at)
		}
	}
	known := w.cfg.start.AddDate(0, 0, -7)
	for _, p := range w.pools {
		var prof sizing.Profile
		prof.Fold(byPool[p.name], p.start, known, w.cfg.start)
		obj, err := w.api.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), ns, p.name)
		require.NoError(w.t, err)
		d := obj.(*appsv1.Deployment).DeepCopy()
		d.Annotations[poolapi.AnnotationProfile] = prof.Marshal()
		require.NoError(w.t, w.api.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), d, ns))
		w.forecastTouches(p)
	}
}

// forecastTouches schedules the decisions where pool p's forecast may
// change (sizing.Profile.Forecast, with the tracker's lead of one measured
// pod start): when the slot now is in changes (its trickle too), and when
// one lead and one slot ahead reaches the next slot's start, for any lead
// the controller may have measured (the default before a start is
// measured; within a quarter of p's start after). Each is a window up to
// the decision after it, and the shrink it may ask for waits a stable
// window after any point of it.
func (w *simWorld) forecastTouches(p *simPool) {
	end := w.cfg.start.Add(w.cfg.duration)
	first := w.cfg.start.Truncate(sizing.ProfileSlot)
	slack := DefaultResync + time.Second
	for b := first; !b.After(end.Add(sizing.ProfileSlot + sizing.DefaultPodStart)); b = b.Add(sizing.ProfileSlot) {
		ahead := b.Add(-sizing.ProfileSlot)
		for _, win := range [][2]time.Time{
			{b, b.Add(slack)},
			{ahead.Add(-sizing.DefaultPodStart), ahead.Add(-sizing.DefaultPodStart + slack)},
			{ahead.Add(-p.start * 5 / 4).Add(-time.Second), ahead.Add(-p.start * 3 / 4).Add(slack)},
		} {
			from := win[0].Add(sizing.StableWindow - DefaultResync)
			w.later = append(w.later,
				simTouch{at: win[0], pool: p.name, stable: true, until: win[1]},
				simTouch{at: from, pool: p.name, stable: true, until: win[1].Add(sizing.StableWindow + sizing.PanicWindow + 3*DefaultResync + time.Second)})
		}
	}
}

// simPool is one pool as the test's ReplicaSet and drivers know it.
type simPool struct {
	name   string
	policy simPolicy
	start  time.Duration // its pods' start, creation to Ready (± a quarter)
	node   string
	owned  map[string]bool // its ReplicaSet's standing pods
	mine   map[string]bool // the controller's standing pods (own.go)
	dirty  bool            // the ReplicaSet should look at it
	// claims are its claims and cold starts, for the keep-alive's end.
	claims []time.Time
	// replicas is its Deployment's, as its ReplicaSet last saw it.
	replicas int
}

// simJob is a running job on its pod.
type simJob struct {
	pod  string
	pool *simPool
	end  time.Time
}

// simArrival is a job of the trace.
type simArrival struct {
	at   time.Time
	pool *simPool
}

// simTouch is a change a pool's decision will read at a time to come.
type simTouch struct {
	at   time.Time
	pool string
	// stable: the end of a stable window after another touch (not
	// followed by one more). It touches every decision from at until
	// until: the shrink the Damper held in a panic comes a stable window
	// after the panic's last decision.
	stable bool
	until  time.Time
}

// simWorld is the cluster around the controller.
type simWorld struct {
	t     *testing.T
	cfg   simConfig
	rng   *rand.Rand
	api   *apiServer
	view  *ctrlView
	clock *clocktesting.FakeClock
	c     *Controller
	stop  func()
	tmpl  corev1.PodTemplateSpec

	pools    []*simPool
	byName   map[string]*simPool
	arrivals []simArrival
	jobs     []simJob
	starting map[string]time.Time // pod → when the kubelet makes it Ready
	seq      int
	barrier  int

	// touched are the pools touched since the last decision, allowed those
	// the decision under way may change; later are touches to come; cut the
	// pools whose last change was the budget's.
	touched, allowed, cut map[string]bool
	later                 []simTouch

	// What happened.
	warm, cold, raced, bumped, busyMax int
	idle, idleMax                      int // the pools' replicas together
	removed, removedUnmarked           int
	spurious                           []string
	reasons                            map[string]int
	perMin                             map[int]*simMinute
	heapBefore, heapAfterStart         uint64
	heapEnd, heapDropped               uint64
	podsAtEnd                          int
}

// simMinute is what one simulated minute saw.
type simMinute struct {
	jobs, ends, decisions, touched, allowed int
}

func newSimWorld(t *testing.T, cfg simConfig) *simWorld {
	t.Helper()
	w := &simWorld{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(28, 1000)), tmpl: shippedTemplate(t),
		byName: map[string]*simPool{}, starting: map[string]time.Time{}, touched: map[string]bool{},
		allowed: map[string]bool{}, cut: map[string]bool{}, reasons: map[string]int{}, perMin: map[int]*simMinute{}}
	w.clock = clocktesting.NewFakeClock(cfg.start)
	// The plain object tracker: the field-managed one of NewClientset
	// computes managed fields at every write, which the simulation does
	// not need and cannot afford at this scale.
	w.api = &apiServer{Clientset: fake.NewSimpleClientset(), rv: 100, writes: map[string]int{}}
	w.api.PrependReactor("*", "*", w.api.react)
	w.api.PrependReactor("*", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			w.throttle()
		}
		return false, nil, nil
	})
	for i := range cfg.pools {
		p := &simPool{name: fmt.Sprintf("pool-%04d", i), policy: simPolicies[i%4], start: time.Duration(4+i%17) * time.Second,
			node: "node-" + strconv.Itoa(i%50), owned: map[string]bool{}, mine: map[string]bool{}}
		w.pools = append(w.pools, p)
		w.byName[p.name] = p
		d := poolDeployment(p.name, p.policy.text, p.policy.initial)
		d.Spec.Template = *w.tmpl.DeepCopy()
		d.Spec.Template.Labels[poolapi.LabelPool] = p.name
		require.NoError(t, w.api.Tracker().Add(d))
		require.NoError(t, w.api.Tracker().Add(replicaSetOf(d, simHash)))
		for range p.policy.initial {
			w.createPod(p, cfg.start.Add(-time.Hour), true)
		}
		p.replicas = p.policy.initial
		w.idle += p.replicas
		if i%4 == 3 {
			w.later = append(w.later, simTouch{at: simBoundary, pool: p.name})
		}
	}
	// A pool Deployment without a policy: in the controller's cache,
	// never sized.
	require.NoError(t, w.api.Tracker().Add(poolDeployment("sim-barrier", "", 0)))
	w.trace()
	if cfg.learned {
		w.seedProfiles()
	}
	w.api.writes = map[string]int{}
	w.heapBefore = heapInUse()
	w.startController()
	w.heapAfterStart = heapInUse()
	return w
}

// shippedTemplate is the pod template of deploy/pool.yaml's pool, so that
// the controller's cache holds pods of a real pool's size.
func shippedTemplate(t *testing.T) corev1.PodTemplateSpec {
	b, err := os.ReadFile("../deploy/pool.yaml")
	require.NoError(t, err)
	for _, doc := range strings.Split(string(b), "\n---") {
		var d appsv1.Deployment
		if yaml.Unmarshal([]byte(doc), &d) == nil && d.Kind == "Deployment" {
			return d.Spec.Template
		}
	}
	t.Fatal("no Deployment in deploy/pool.yaml")
	return corev1.PodTemplateSpec{}
}

// trace draws the job arrivals: jobsPerHour spread uniformly over the run,
// each to a pool by a 1/rank popularity (rank = the pool's index), and the
// pipelines.
func (w *simWorld) trace() {
	w.arrivals = w.draw(w.rng, w.cfg.start)
}

// draw is trace's arrivals of a run from start, drawn with rng.
func (w *simWorld) draw(rng *rand.Rand, start time.Time) []simArrival {
	var arrivals []simArrival
	n := int(float64(w.cfg.jobsPerHour) * w.cfg.duration.Hours())
	var total float64
	for i := range w.pools {
		total += 1 / float64(i+1)
	}
	for range n {
		at := start.Add(time.Duration(rng.Int64N(int64(w.cfg.duration))))
		x := rng.Float64() * total
		p := w.pools[len(w.pools)-1]
		for i, q := range w.pools {
			if x -= 1 / float64(i+1); x < 0 {
				p = q
				break
			}
		}
		arrivals = append(arrivals, simArrival{at: at, pool: p})
	}
	for k, m := range w.cfg.bursts {
		p := w.pools[(20+30*k)%len(w.pools)]
		for j := range 30 {
			at := start.Add(time.Duration(m)*time.Minute + time.Duration(j)*60*time.Millisecond)
			arrivals = append(arrivals, simArrival{at: at, pool: p})
		}
	}
	slices.SortStableFunc(arrivals, func(a, b simArrival) int { return a.at.Compare(b.at) })
	return arrivals
}

// startController makes the Controller over its own view of the API
// server and starts it (informers synced, status seeded).
func (w *simWorld) startController() {
	w.view = newCtrlView(w)
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(w.t, err)
	w.c = New(w.view, Config{Namespace: ns, Budget: sizing.Budget{Pods: w.cfg.budget}},
		slog.New(slog.NewTextHandler(io.Discard, nil)), w.clock, &simRecorder{w: w}, m)
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = func() {
		cancel()
		w.c.queue.ShutDown()
		w.c.factory.Shutdown()
		w.c.podFactory.Shutdown()
	}
	w.t.Cleanup(func() {
		if w.stop != nil {
			w.stop()
		}
		w.view.stopped()
	})
	require.NoError(w.t, w.c.Start(ctx))
}

// minute is the simulated minute of now, from 0.
func (w *simWorld) minute() *simMinute {
	m := int(w.clock.Now().Sub(w.cfg.start) / time.Minute)
	if w.perMin[m] == nil {
		w.perMin[m] = &simMinute{}
	}
	return w.perMin[m]
}

// run plays the cluster a second at a time and lets the controller decide
// every Resync and after a pipeline.
func (w *simWorld) run() {
	next := 0
	end := w.cfg.start.Add(w.cfg.duration)
	w.decide()
	if !w.cfg.learned {
		require.Zero(w.t, w.view.total(), "the first decision, with every pool at its policy's size, writes nothing")
	}
	for now := w.cfg.start; now.Before(end); {
		now = now.Add(time.Second)
		w.clock.SetTime(now)
		w.kubelet(now)
		w.jobEnds(now)
		burst := 0
		for ; next < len(w.arrivals) && !w.arrivals[next].at.After(now); next++ {
			w.arrive(w.arrivals[next].pool, now)
			burst++
		}
		w.replicaSets(now)
		since := now.Sub(w.cfg.start)
		if since%DefaultResync == 0 || burst >= 10 {
			w.decide()
			w.replicaSets(now)
			// Within the budget, but for pods whose mark was refused twice
			// (they stay until the next decision).
			w.idleMax = max(w.idleMax, w.idle)
			require.LessOrEqual(w.t, w.idle, w.cfg.budget+w.view.kept, "idle pods (replicas) beyond the budget")
		}
		if since%time.Minute == 0 {
			// The fakes keep every call with a copy of its object.
			w.api.ClearActions()
			w.view.ClearActions()
		}
		if since%(10*time.Minute) == 0 {
			w.checkClaimedNeverRetiring()
		}
	}
	w.decide()
	// The ReplicaSets carry out what it scaled down (at the end of a
	// learned run a slot begins, and the forecast may ask for fewer).
	w.replicaSets(end)
	before := w.view.total()
	w.decide()
	require.Equal(w.t, before, w.view.total(), "a decision over an unchanged cluster writes")
	w.checkClaimedNeverRetiring()
	w.heapEnd = heapInUse()
	cached, err := w.c.pods.List(labels.Everything())
	require.NoError(w.t, err)
	w.podsAtEnd = len(cached)
	w.stop()
	w.stop, w.c = nil, nil
	w.view.stopped()
	w.heapDropped = heapInUse()
}

// decide waits until the controller's caches and its handlers have seen
// every write (as harness.settle does) and runs one Reconcile, which may
// change the pools touched since the last one and those of the budget.
func (w *simWorld) decide() {
	w.settle()
	now := w.clock.Now()
	kept := w.later[:0]
	var held []simTouch
	for _, l := range w.later {
		switch {
		case l.at.After(now):
			kept = append(kept, l)
		default:
			w.touched[l.pool] = true
			if l.stable && l.until.After(now) {
				kept = append(kept, l)
			}
			if !l.stable {
				// A shrink it asks for may wait a stable window.
				held = append(held, w.stableTouch(l.at, l.pool))
			}
		}
	}
	w.later = append(kept, held...)
	w.allowed, w.touched = w.touched, map[string]bool{}
	m := w.minute()
	m.decisions++
	m.touched += len(w.allowed)
	for p := range w.cut {
		if !w.allowed[p] {
			m.allowed++
		}
	}
	m.allowed += len(w.allowed)
	require.NoError(w.t, w.c.Reconcile(context.Background()))
	// A growth the budget holds until other pools' give-backs are gone is
	// a cut too: a later decision restores it, touched or not.
	for key := range w.c.waiting {
		_, name, _ := strings.Cut(key, "/")
		w.cut[name] = true
	}
}

// touch records that pool p changed for its next decision: now, and
// after each of its idle_times and at its keep-alive's end when the change
// is a claim (the keep-alive for any pod start the controller may have
// measured: a gap counts only when longer than the pod start).
func (w *simWorld) touch(p *simPool, claim bool) {
	now := w.clock.Now()
	w.touched[p.name] = true
	// The shrink a change asks for may wait a stable window
	// (sizing.Damper), or a panic's stable window after a claim.
	w.later = append(w.later, w.stableTouch(now, p.name))
	if claim {
		for _, it := range p.policy.idleTimes {
			w.later = append(w.later, simTouch{at: now.Add(it), pool: p.name})
		}
		p.claims = append(slices.DeleteFunc(p.claims, func(c time.Time) bool { return c.Before(now.Add(-history)) }), now)
		for _, start := range []time.Duration{time.Second, p.start / 2, p.start, p.start * 2, sizing.DefaultPodStart} {
			if keep := sizing.KeepAlive(p.claims, now, start); keep > 0 {
				w.later = append(w.later, simTouch{at: now.Add(keep), pool: p.name})
			}
		}
	}
}

// stableTouch is the touch of the end of a stable window after a touch at
// at (see simTouch.stable).
func (w *simWorld) stableTouch(at time.Time, pool string) simTouch {
	// A panic ends a stable window after the last decision that saw the
	// burst, which may come a resync (a decision runs at least every
	// resync) before or a panic window after the touch.
	from := at.Add(sizing.StableWindow - DefaultResync)
	return simTouch{at: from, pool: pool, stable: true, until: from.Add(sizing.PanicWindow + 3*DefaultResync + time.Second)}
}

// settle writes a barrier pod and bumps a barrier Deployment, and waits
// until the controller's pod handler has counted the pod (one handler
// goroutine takes the events in order: every earlier pod event is done)
// and its Deployment cache holds the bump.
func (w *simWorld) settle() {
	w.barrier++
	w.throttle()
	_ = w.api.Tracker().Delete(podsGVR, ns, "barrier-"+strconv.Itoa(w.barrier-1))
	now := w.clock.Now()
	uid := k8stypes.UID("barrier-uid-" + strconv.Itoa(w.barrier))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "barrier-" + strconv.Itoa(w.barrier), Namespace: ns, UID: uid,
		ResourceVersion: w.api.nextRV(), CreationTimestamp: metav1.NewTime(now.Add(-time.Second)),
		Labels: map[string]string{poolapi.LabelPool: "sim-barrier", poolapi.LabelState: poolapi.StateIdle}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}}}}
	w.throttle()
	require.NoError(w.t, w.api.Tracker().Add(p))
	obj, err := w.api.Tracker().Get(depsGVR, ns, "sim-barrier")
	require.NoError(w.t, err)
	d := obj.(*appsv1.Deployment)
	d.ResourceVersion = w.api.nextRV()
	w.throttle()
	require.NoError(w.t, w.api.Tracker().Update(depsGVR, d, ns))
	tr := w.c.tracker
	require.Eventually(w.t, func() bool {
		tr.mu.Lock()
		seen := tr.seen[uid]&seenStart != 0
		tr.mu.Unlock()
		c, err := w.c.deps.Deployments(ns).Get("sim-barrier")
		return seen && err == nil && c.ResourceVersion == d.ResourceVersion
	}, 30*time.Second, 100*time.Microsecond, "the controller's caches did not catch up")
}

// createPod is the ReplicaSet creating a pod of p at created (Ready at
// once when ready, else after p's pod start).
func (w *simWorld) createPod(p *simPool, created time.Time, ready bool) {
	w.seq++
	name := fmt.Sprintf("%s-%d", p.name, w.seq)
	pod := w.podOf(p, name, created)
	if ready {
		setReady(pod, created.Add(p.start))
	} else {
		w.starting[name] = created.Add(w.jitter(p.start))
	}
	if w.c == nil {
		require.NoError(w.t, w.api.Tracker().Add(pod))
	} else {
		_, err := w.api.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
		require.NoError(w.t, err)
		w.touch(p, false)
	}
	p.owned[name] = true
}

// podOf is a pod of p's template as the API server holds it: scheduled,
// its containers' statuses, not Ready yet.
func (w *simWorld) podOf(p *simPool, name string, created time.Time) *corev1.Pod {
	t := w.tmpl.DeepCopy()
	t.Labels[poolapi.LabelPool] = p.name
	t.Labels[poolapi.LabelTemplateHash] = simHash
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: k8stypes.UID("uid-" + name),
		ResourceVersion: w.api.nextRV(), CreationTimestamp: metav1.NewTime(created), GenerateName: p.name + "-",
		Labels: t.Labels, Annotations: t.Annotations}, Spec: t.Spec}
	w.schedule(pod, p, created)
	return pod
}

// simHash is the pools' pod-template-hash.
const simHash = "5d8f7c9b6"

// schedule is the scheduler and the kubelet on a new pod of p: its node,
// its containers' statuses, not Ready yet.
func (w *simWorld) schedule(pod *corev1.Pod, p *simPool, created time.Time) {
	t := &pod.Spec
	t.NodeName = p.node
	st := corev1.PodStatus{Phase: corev1.PodPending, PodIP: "10.1.2.3", HostIP: "10.0.0.1", QOSClass: corev1.PodQOSBurstable,
		StartTime: ptr.To(metav1.NewTime(created))}
	for _, c := range t.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			ImageID: c.Image + "@sha256:0123456789abcdef", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}})
	}
	for _, c := range t.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			ImageID: c.Image + "@sha256:0123456789abcdef", ContainerID: "containerd://" + pod.Name, Started: ptr.To(true)})
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		s := corev1.ConditionTrue
		if ct == corev1.ContainersReady || ct == corev1.PodReady {
			s = corev1.ConditionFalse
		}
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: ct, Status: s, LastTransitionTime: metav1.NewTime(created)})
	}
	pod.Status = st
}

// setReady is the kubelet's status of a pod Ready since at.
func setReady(p *corev1.Pod, at time.Time) {
	p.Status.Phase = corev1.PodRunning
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady || c.Type == corev1.PodReady {
			p.Status.Conditions[i].Status = corev1.ConditionTrue
			p.Status.Conditions[i].LastTransitionTime = metav1.NewTime(at)
		}
	}
}

// jitter is d ± a quarter.
func (w *simWorld) jitter(d time.Duration) time.Duration {
	return d*3/4 + time.Duration(w.rng.Int64N(int64(d)/2+1))
}

// kubelet makes the pods whose start is over Ready.
func (w *simWorld) kubelet(now time.Time) {
	var due []string
	for name, at := range w.starting {
		if !at.After(now) {
			due = append(due, name)
		}
	}
	slices.Sort(due)
	for _, name := range due {
		at := w.starting[name]
		delete(w.starting, name)
		obj, err := w.api.Tracker().Get(podsGVR, ns, name)
		require.NoError(w.t, err)
		p := obj.(*corev1.Pod)
		setReady(p, at)
		p.ResourceVersion = w.api.nextRV()
		_, err = w.api.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		require.NoError(w.t, err)
		w.touch(w.byName[p.Labels[poolapi.LabelPool]], false)
	}
}

// jobEnds deletes the pods of the jobs that ended.
func (w *simWorld) jobEnds(now time.Time) {
	kept := w.jobs[:0]
	for _, j := range w.jobs {
		if j.end.After(now) {
			kept = append(kept, j)
			continue
		}
		require.NoError(w.t, w.api.CoreV1().Pods(ns).Delete(context.Background(), j.pod, metav1.DeleteOptions{}))
		delete(w.starting, j.pod)
		w.touch(j.pool, false)
		w.minute().ends++
	}
	w.jobs = kept
}

// arrive is a driver serving a job of p: a warm claim, else a cold pod.
func (w *simWorld) arrive(p *simPool, now time.Time) {
	w.minute().jobs++
	names := make([]string, 0, len(p.owned)+len(p.mine))
	for name := range p.owned {
		names = append(names, name)
	}
	for name := range p.mine {
		names = append(names, name)
	}
	slices.Sort(names)
	w.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for _, name := range names {
		obj, err := w.api.Tracker().Get(podsGVR, ns, name)
		require.NoError(w.t, err)
		pod := obj.(*corev1.Pod)
		if pool.PodReady(pod) && pod.Annotations[poolapi.AnnotationRetiring] == "" && w.claim(p, pod, now) {
			w.warm++
			return
		}
	}
	w.cold++
	w.seq++
	name := fmt.Sprintf("%s-cold-%d", p.name, w.seq)
	pod := w.podOf(p, name, now)
	pod.Labels[poolapi.LabelState] = poolapi.StateClaimed
	pod.Labels[poolapi.LabelJob] = name
	pod.Annotations = map[string]string{poolapi.AnnotationColdReason: string(poolapi.ColdNoIdle), poolapi.AnnotationClaimWait: "0"}
	_, err := w.api.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(w.t, err)
	w.starting[name] = now.Add(w.jitter(p.start))
	w.touch(p, true)
	w.jobs = append(w.jobs, simJob{pod: name, pool: p, end: now.Add(w.jobLength())})
}

// claim is the driver's claim of pod: its labels and the demand
// annotations, with its resourceVersion as precondition. False when the
// API server refused it (another claim or a retire mark won the pod).
func (w *simWorld) claim(p *simPool, pod *corev1.Pod, now time.Time) bool {
	drop := ""
	if p.mine[pod.Name] {
		drop = `"ownerReferences":null,` // as the drivers' claim does
	}
	patch := fmt.Sprintf(`{"metadata":{%s"resourceVersion":%q,"labels":{%q:%q,%q:%q},"annotations":{%q:%q,%q:"%d"}}}`,
		drop, pod.ResourceVersion, poolapi.LabelState, poolapi.StateClaimed, poolapi.LabelJob, pod.Name,
		poolapi.AnnotationClaimedAt, now.UTC().Format(time.RFC3339Nano), poolapi.AnnotationClaimWait, 5+w.rng.IntN(40))
	_, err := w.api.CoreV1().Pods(ns).Patch(context.Background(), pod.Name, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsConflict(err) {
		return false
	}
	require.NoError(w.t, err)
	if p.mine[pod.Name] {
		// The controller's pod takes its place in the pool's size with
		// it: nothing replaces it.
		delete(p.mine, pod.Name)
		w.idle--
	} else {
		delete(p.owned, pod.Name)
		p.dirty = true // its ReplicaSet lost a pod
	}
	w.touch(p, true)
	w.jobs = append(w.jobs, simJob{pod: pod.Name, pool: p, end: now.Add(w.jobLength())})
	w.busyMax = max(w.busyMax, len(w.jobs))
	return true
}

// jobLength is a job's run: 1 to 10 minutes.
func (w *simWorld) jobLength() time.Duration {
	return time.Minute + time.Duration(w.rng.Int64N(int64(9*time.Minute)))
}

// replicaSets is every ReplicaSet that has something to do: pods up to
// its replicas, or the pods it removes down to them.
func (w *simWorld) replicaSets(now time.Time) {
	for _, name := range w.view.scaled() {
		w.byName[name].dirty = true
	}
	for _, p := range w.pools {
		if !p.dirty {
			continue
		}
		p.dirty = false
		obj, err := w.api.Tracker().Get(depsGVR, ns, p.name)
		require.NoError(w.t, err)
		want := replicasOf(obj.(*appsv1.Deployment))
		w.idle += want - p.replicas
		p.replicas = want
		for len(p.owned) < want {
			w.createPod(p, now, false)
		}
		if len(p.owned) > want {
			w.scaleDown(p, len(p.owned)-want)
		}
	}
}

// scaleDown removes n of p's pods in a ReplicaSet's order
// (replicaSetRemoves), and counts those the controller had not marked.
func (w *simWorld) scaleDown(p *simPool, n int) {
	var pods []*corev1.Pod
	for name := range p.owned {
		obj, err := w.api.Tracker().Get(podsGVR, ns, name)
		require.NoError(w.t, err)
		pods = append(pods, obj.(*corev1.Pod))
	}
	for _, pod := range replicaSetRemoves(pods, n) {
		require.NotEqual(w.t, poolapi.StateClaimed, pod.Labels[poolapi.LabelState], "a ReplicaSet removes a claimed pod")
		if pod.Annotations[poolapi.AnnotationRetiring] == "" {
			w.removedUnmarked++
		}
		w.removed++
		require.NoError(w.t, w.api.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}))
		delete(p.owned, pod.Name)
		delete(w.starting, pod.Name)
		w.touch(p, false)
	}
}

// checkClaimedNeverRetiring: no pod of a running job carries the retire
// mark, and none is gone before its job ended.
func (w *simWorld) checkClaimedNeverRetiring() {
	for _, j := range w.jobs {
		obj, err := w.api.Tracker().Get(podsGVR, ns, j.pod)
		require.NoError(w.t, err, "a job's pod is gone before the job ended")
		require.Empty(w.t, obj.(*corev1.Pod).Annotations[poolapi.AnnotationRetiring], "pod %s of a running job is marked retiring", j.pod)
	}
}

// changed is one change of a pool's size by the controller (its Event):
// allowed when the pool was touched, or the budget moves it.
func (w *simWorld) changed(name, reason string) {
	w.reasons[reason]++
	budget := reason == "ScaledByBudget"
	switch {
	case w.allowed[name] || w.cut[name]:
	case budget:
		w.minute().allowed++ // a pool the budget cuts now
	default:
		w.spurious = append(w.spurious, fmt.Sprintf("%s (%s) at %s", name, reason, w.clock.Now().Format(time.TimeOnly)))
	}
	if budget {
		w.cut[name] = true
	} else {
		delete(w.cut, name)
	}
	// The growth limit reads the scale-ups of the last minute.
	w.later = append(w.later, simTouch{at: w.clock.Now().Add(time.Minute), pool: name})
}

// report logs the figures and asserts the bounds of TestSimulation's doc
// comment.
func (w *simWorld) report() {
	t, v := w.t, w.view
	minutes := int(w.cfg.duration / time.Minute)
	jobs := w.warm + w.cold
	scale, status, events := v.sum("update/deployments/scale"), v.sum("patch/deployments"), v.sum("events")
	t.Logf("%d pools, %d jobs in %s (%d warm: %.1f%%, %d cold), %d decisions, at most %d jobs running",
		w.cfg.pools, jobs, w.cfg.duration, w.warm, 100*float64(w.warm)/float64(jobs), w.cold, w.decisions(), w.busyMax)
	profiles := v.sum("patch/deployments/profile")
	t.Logf("controller writes: %d scale, %d status, %d Events, %d profile saves, %d pods made and %d deleted above the floors, %d pod patches (%d marks, %d refused by a race: %d claims first, %d kubelet updates first, %d pods kept as a mark's retry was refused too; %d unmarks), %d re-reads",
		scale, status, events, profiles, v.sum("create/pods"), v.sum("delete/pods"), v.sum("patch/pods"), v.marks, v.refused, w.raced, w.bumped, v.kept, v.unmarks, v.sum("get/pods"))
	t.Logf("changes by reason: %v", w.reasons)
	t.Logf("writes per minute: mean %.0f, max %d (minute %d); the test's own writes (ReplicaSets, kubelet, drivers): %d",
		float64(v.total())/float64(minutes), v.maxMinute(), v.busiestMinute(), w.api.total()-v.total())
	for m := range minutes + 1 {
		s, per := w.perMin[m], v.perMin[m]
		if s == nil {
			continue
		}
		t.Logf("  minute %2d: %3d jobs %3d ends %d decisions %4d touched | %3d scale %3d status %3d Events %3d pods made %3d deleted %3d pod patches",
			m, s.jobs, s.ends, s.decisions, s.touched, per["update/deployments/scale"], per["patch/deployments"], per["events"],
			per["create/pods"], per["delete/pods"], per["patch/pods"])
	}
	t.Logf("heap in use: %.1f MiB before the controller, %.1f MiB once its caches synced, %.1f MiB at the end (%d pods cached), %.1f MiB once it is dropped: the controller's %.1f MiB",
		mib(w.heapBefore), mib(w.heapAfterStart), mib(w.heapEnd), w.podsAtEnd, mib(w.heapDropped), mib(w.heapEnd-min(w.heapEnd, w.heapDropped)))
	t.Logf("the ReplicaSets removed %d pods, %d of them unmarked; the pools' replicas together at most %d (budget %d)",
		w.removed, w.removedUnmarked, w.idleMax, w.cfg.budget)

	require.Empty(t, w.spurious, "changes of size of pools nothing touched")
	for m, s := range w.perMin {
		require.LessOrEqual(t, v.perMin[m]["update/deployments/scale"], s.allowed, "minute %d: scale writes beyond the pools touched or of the budget", m)
	}
	require.LessOrEqual(t, scale, events, "a scale only with a change of size (its Event)")
	require.LessOrEqual(t, status, events, "a status only with a change of size")
	require.LessOrEqual(t, profiles, w.cfg.pools*int(w.cfg.duration/ProfileSaveEvery), "a profile saved at most once per ProfileSaveEvery")
	require.LessOrEqual(t, v.marks, w.removed, "a pod marked but not removed")
	require.Zero(t, v.warnings, "Warning Events")
	require.Zero(t, w.removedUnmarked, "a ReplicaSet removed a pod the controller had not chosen")
	require.Zero(t, v.markedClaimed, "a claimed pod was marked retiring")
	require.Equal(t, len(w.arrivals)+w.raced, jobs)
	require.Greater(t, w.warm, jobs*3/4, "most jobs should find a warm pod")
}

// decisions is the number of Reconciles.
func (w *simWorld) decisions() int {
	n := 0
	for _, s := range w.perMin {
		n += s.decisions
	}
	return n
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// heapInUse is the heap in use after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// total is the number of writes the apiServer took.
func (s *apiServer) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.writes {
		n += c
	}
	return n
}

// throttle waits, before a write, until every watch of the controller has
// room for its event: the fake's watch channel holds 100 events and
// panics when full, and its reader (pumpWatch) may wait for a CPU while
// the test writes hundreds of objects.
func (w *simWorld) throttle() {
	if w.view == nil {
		return
	}
	w.view.mu.Lock()
	watches := slices.Clone(w.view.watches)
	w.view.mu.Unlock()
	for _, p := range watches {
		deadline := time.Now().Add(30 * time.Second)
		for len(p.in.ResultChan()) >= 64 {
			if time.Now().After(deadline) {
				panic("a watch of the controller has not been read for 30 s")
			}
			runtime.Gosched()
		}
	}
}

// ctrlView is the controller's own client of the simulated API server:
// the same objects and rules (the world's apiServer.react and tracker),
// but its writes are counted apart, by simulated minute and kind, and its
// watches are unbounded (pumpWatch).
type ctrlView struct {
	*fake.Clientset
	w       *simWorld
	mu      sync.Mutex
	perMin  map[int]map[string]int
	dirty   map[string]bool
	watches []*pumpWatch
	again   map[string]bool // pods whose mark's retry is raced too
	// Marks that landed, marks refused (409), unmarks; marks that landed
	// on a claimed pod; Warning Events.
	marks, refused, unmarks, nMarks, markedClaimed, warnings, kept int
}

func newCtrlView(w *simWorld) *ctrlView {
	v := &ctrlView{Clientset: &fake.Clientset{}, w: w, perMin: map[int]map[string]int{}, dirty: map[string]bool{}, again: map[string]bool{}}
	v.AddReactor("*", "*", v.react)
	v.AddReactor("*", "*", k8stesting.ObjectReaction(w.api.Tracker()))
	v.AddWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		in, err := w.api.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		p := newPumpWatch(in)
		v.mu.Lock()
		v.watches = append(v.watches, p)
		v.mu.Unlock()
		return true, p, nil
	})
	return v
}

// count adds one write of kind in the current simulated minute.
func (v *ctrlView) count(kind string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := int(v.w.clock.Now().Sub(v.w.cfg.start) / time.Minute)
	if v.perMin[m] == nil {
		v.perMin[m] = map[string]int{}
	}
	v.perMin[m][kind]++
}

// react counts the controller's writes (and its reads after a conflict),
// plays the races, and passes the call to the world's API server.
func (v *ctrlView) react(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	kind := a.GetVerb() + "/" + a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		kind += "/" + sub
	}
	switch a.GetVerb() {
	case "list", "watch":
		return false, nil, nil
	case "get":
		if kind == "get/pods" {
			v.count(kind) // mark's re-read after a conflict
		}
		return false, nil, nil
	}
	if kind == "patch/deployments" && strings.Contains(string(a.(k8stesting.PatchAction).GetPatch()), poolapi.AnnotationProfile) {
		kind += "/profile" // the learned profile's save, not a status
	}
	v.count(kind)
	if kind == "update/deployments/scale" {
		v.mu.Lock()
		v.dirty[a.(k8stesting.UpdateAction).GetObject().(metav1.Object).GetName()] = true
		v.mu.Unlock()
	}
	pa, isPatch := a.(k8stesting.PatchAction)
	mark := isPatch && kind == "patch/pods" && !strings.Contains(string(pa.GetPatch()), fmt.Sprintf("%q:null", poolapi.AnnotationRetiring))
	switch {
	case mark:
		v.race(pa.GetName())
	case kind == "patch/pods":
		v.unmarks++
	}
	v.w.throttle()
	switch kind {
	case "create/pods":
		return v.create(a.(k8stesting.CreateAction))
	case "delete/pods":
		return v.delete(a.(k8stesting.DeleteAction))
	}
	if isPatch && strings.HasPrefix(kind, "patch/deployments") {
		if handled, obj, err := v.w.api.react(a); handled { // counts it
			return handled, obj, err
		}
		return v.patchAnnotations(pa)
	}
	handled, obj, err := v.w.api.react(a)
	switch {
	case mark && err == nil:
		v.marks++
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[poolapi.LabelState] == poolapi.StateClaimed {
			v.markedClaimed++
		}
	case mark && apierrors.IsConflict(err):
		v.refused++
	}
	return handled, obj, err
}

// create is the controller making a pod above its pool's floor: the
// scheduler and the kubelet take it from there as they do a ReplicaSet's.
func (v *ctrlView) create(a k8stesting.CreateAction) (bool, k8sruntime.Object, error) {
	w := v.w
	pod := a.GetObject().(*corev1.Pod)
	p := w.byName[pod.Labels[poolapi.LabelPool]]
	now := w.clock.Now()
	pod.CreationTimestamp = metav1.NewTime(now)
	w.schedule(pod, p, now)
	handled, obj, err := w.api.react(a)
	if err == nil {
		w.starting[pod.Name] = now.Add(w.jitter(p.start))
		p.mine[pod.Name] = true
		w.idle++
		w.touch(p, false)
	}
	return handled, obj, err
}

// delete is the controller removing a pod of its own above the decision.
func (v *ctrlView) delete(a k8stesting.DeleteAction) (bool, k8sruntime.Object, error) {
	w := v.w
	obj, err := w.api.Tracker().Get(podsGVR, a.GetNamespace(), a.GetName())
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod)
	handled, obj, err := w.api.react(a)
	if err == nil {
		p := w.byName[pod.Labels[poolapi.LabelPool]]
		require.True(w.t, p.mine[pod.Name], "the controller deleted a pod not its own or claimed: %s", pod.Name)
		delete(p.mine, pod.Name)
		delete(w.starting, pod.Name)
		w.idle--
		w.removed++
		w.touch(p, false)
	}
	return handled, obj, err
}

// patchAnnotations applies the controller's status patch, a merge patch
// of metadata.annotations only, as the API server would, without the
// fake's JSON round trip of the whole Deployment (most of the
// simulation's time under -race).
func (v *ctrlView) patchAnnotations(pa k8stesting.PatchAction) (bool, k8sruntime.Object, error) {
	var patch struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	var all map[string]map[string]any
	if err := json.Unmarshal(pa.GetPatch(), &all); err != nil || len(all) != 1 || len(all["metadata"]) != 1 {
		return false, nil, nil // not the status patch: the fake's way
	}
	if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil || patch.Metadata.Annotations == nil {
		return false, nil, nil
	}
	obj, err := v.w.api.Tracker().Get(depsGVR, pa.GetNamespace(), pa.GetName())
	if err != nil {
		return true, nil, err
	}
	d := obj.(*appsv1.Deployment)
	for k, val := range patch.Metadata.Annotations {
		if val == nil {
			delete(d.Annotations, k)
		} else {
			d.Annotations[k] = *val
		}
	}
	return true, d, v.w.api.Tracker().Update(depsGVR, d, d.Namespace)
}

// race: every fifth retire mark, a job claims the pod first (the driver's
// claim lands before the mark); every seventh, the kubelet updates the
// pod's status first, and before the mark's retry too when that is also
// the eleventh. Each changes the pod's resourceVersion under the mark.
func (v *ctrlView) race(name string) {
	v.nMarks++
	w := v.w
	obj, err := w.api.Tracker().Get(podsGVR, ns, name)
	if err != nil {
		return
	}
	pod := obj.(*corev1.Pod)
	p := w.byName[pod.Labels[poolapi.LabelPool]]
	switch {
	case v.nMarks%5 == 0 && pool.PodReady(pod) && pod.Annotations[poolapi.AnnotationRetiring] == "":
		if w.claim(p, pod, w.clock.Now()) {
			w.minute().jobs++
			w.warm++
			w.raced++
		}
	case v.nMarks%7 == 0 || v.again[name]:
		// Every eleventh of those twice: the mark's retry is refused too,
		// and the pod stays.
		if v.again[name] {
			delete(v.again, name)
			v.kept++
		} else if v.nMarks%11 == 0 {
			v.again[name] = true
		}
		pod.ResourceVersion = w.api.nextRV()
		w.throttle()
		require.NoError(w.t, w.api.Tracker().Update(podsGVR, pod, ns))
		w.touch(p, false)
		w.bumped++
	}
}

// scaled returns and forgets the pools the controller scaled.
func (v *ctrlView) scaled() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.dirty))
	for n := range v.dirty {
		out = append(out, n)
	}
	slices.Sort(out)
	clear(v.dirty)
	return out
}

// sum is the writes of kind over the run.
func (v *ctrlView) sum(kind string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, per := range v.perMin {
		n += per[kind]
	}
	return n
}

// writes is minute m's writes (re-reads aside).
func (v *ctrlView) writes(m int) int {
	n := 0
	for k, c := range v.perMin[m] {
		if k != "get/pods" {
			n += c
		}
	}
	return n
}

// total is every write over the run (re-reads aside).
func (v *ctrlView) total() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for m := range v.perMin {
		n += v.writes(m)
	}
	return n
}

// maxMinute is the most writes of one minute; busiestMinute which.
func (v *ctrlView) maxMinute() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.writes(v.busiest())
}

func (v *ctrlView) busiestMinute() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.busiest()
}

func (v *ctrlView) busiest() int {
	best, at := -1, 0
	for m := range v.perMin {
		if n := v.writes(m); n > best || n == best && m < at {
			best, at = n, m
		}
	}
	return at
}

// stopped stops the view's watches once the controller is gone.
func (v *ctrlView) stopped() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, p := range v.watches {
		p.Stop()
	}
	v.watches = nil
}

// simRecorder counts the controller's Events as writes ("events": each
// would be an Event the broadcaster creates or patches) and checks each
// change of size against what touched its pool.
type simRecorder struct{ w *simWorld }

func (r *simRecorder) Event(o k8sruntime.Object, typ, reason, _ string) {
	r.w.view.count("events")
	if typ == corev1.EventTypeWarning {
		r.w.view.warnings++
		return
	}
	if d, ok := o.(*appsv1.Deployment); ok && strings.HasPrefix(reason, "ScaledBy") {
		r.w.changed(d.Name, reason)
	}
}

func (r *simRecorder) Eventf(o k8sruntime.Object, typ, reason, msg string, args ...any) {
	r.Event(o, typ, reason, fmt.Sprintf(msg, args...))
}

func (r *simRecorder) AnnotatedEventf(o k8sruntime.Object, _ map[string]string, typ, reason, msg string, args ...any) {
	r.Event(o, typ, reason, fmt.Sprintf(msg, args...))
}

var _ record.EventRecorder = (*simRecorder)(nil)

// pumpWatch forwards a fake watch through an unbounded queue, so that its
// reader's pace never fills the fake's channel of 100 events (throttle
// waits for the pump, which only moves events).
type pumpWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func newPumpWatch(in watch.Interface) *pumpWatch {
	p := &pumpWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go p.pump()
	return p
}

func (p *pumpWatch) pump() {
	defer close(p.out)
	var q []watch.Event
	in := p.in.ResultChan()
	for in != nil || len(q) > 0 {
		var out chan watch.Event
		var next watch.Event
		if len(q) > 0 {
			out, next = p.out, q[0]
		}
		select {
		case e, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			q = append(q, e)
		case out <- next:
			q = q[1:]
		case <-p.stop:
			return
		}
	}
}

// ResultChan is the forwarded events.
func (p *pumpWatch) ResultChan() <-chan watch.Event { return p.out }

// Stop stops the fake watch and the pump.
func (p *pumpWatch) Stop() {
	p.once.Do(func() {
		close(p.stop)
		p.in.Stop()
	})
}
