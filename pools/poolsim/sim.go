package poolsim

import (
	"container/heap"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/warmpod/warmpod/sizing"
)

// Mode is one way of keeping pools warm, played over the same trace.
type Mode int

const (
	// Fixed: a pool of FixedSize pods per image, written by hand, no
	// controller; the new image's pool is written on the day it appears.
	Fixed Mode = iota
	// Periods: the controller, with a policy written for the trace on each
	// pool (working hours, and a period before each pipeline) and the new
	// image's pool written on the day it appears.
	Periods
	// Learned: the controller with nothing written: each pool's policy is
	// the base template's (LearnedPolicy, no period), and no pool is
	// written for the new image (sizing.DefaultDiscovery finds it).
	Learned
)

func (m Mode) String() string {
	return [...]string{"fixed pools", "controller, periods written", "controller, nothing written"}[m]
}

// FixedSize is the fixed pools' size: 2 per image, bench-pools' anchor.
const FixedSize = 2

// LearnedPolicy is the policy of every pool in the Learned mode, and of a
// pool sizing.Discovery makes: no period, the pool at zero when nothing is
// expected, a claim's capacity kept for idle_time.
const LearnedPolicy = "- idle_count: 0\n  idle_time: 30m"

// periodsPolicy is the policy a person writes for image in the Periods
// mode, knowing the trace: one idle pod in working hours on weekdays, and
// each pipeline's jobs from five minutes before it.
func periodsPolicy(image string) string {
	var b strings.Builder
	b.WriteString("- idle_count: 0\n  idle_time: 30m\n- periods: [\"* 8-18 * * mon-fri\"]\n  idle_count: 1\n  idle_time: 30m\n")
	for _, p := range Pipelines {
		if p.Image != image {
			continue
		}
		days := make([]string, len(p.Days))
		for i, d := range p.Days {
			days[i] = strings.ToLower(d.String()[:3])
		}
		at := time.Date(2000, 1, 1, p.Hour, p.Minute, 0, 0, time.UTC)
		from, to := at.Add(-5*time.Minute), at.Add(5*time.Minute)
		dow := strings.Join(days, ",")
		crons := fmt.Sprintf("\"%d-59 %d * * %s\", \"0-%d %d * * %s\"", from.Minute(), from.Hour(), dow, to.Minute(), to.Hour(), dow)
		if from.Hour() == to.Hour() {
			crons = fmt.Sprintf("\"%d-%d %d * * %s\"", from.Minute(), to.Minute(), from.Hour(), dow)
		}
		fmt.Fprintf(&b, "- periods: [%s]\n  idle_count: %d\n  idle_time: 30m\n", crons, p.Jobs)
	}
	return b.String()
}

// Config is one simulation's setting.
type Config struct {
	// Start is the trace's first day, 00:00 UTC; Days how many are played.
	Start time.Time
	Days  int
	// Budget is the namespace's idle pods (sizing.Budget.Pods).
	Budget int
	// WarmWait is the drivers' warm wait (their default, 1 s).
	WarmWait time.Duration
	// Resync and Batch are the controller's (pools.DefaultResync,
	// pools.DefaultBatch).
	Resync, Batch time.Duration
	// Seed draws the pod start times.
	Seed uint64
	// From is the first day (0-based) the figures count; the days before
	// are the controller's learning.
	From int
	// Bucket is the width of Result.Series' samples.
	Bucket time.Duration
	// Pools are the images whose pools are written at Start; nil: the
	// trace's (Loads, the new image's written on its day but in Learned).
	Pools []string
	// PodStartMedian and PodStartP95 are the log-normal the pod starts
	// are drawn from (0: kube-e2e's, 3 s and 16 s).
	PodStartMedian, PodStartP95 time.Duration
	// Profiles seed the pools' profiles at Start (sizing.Profile.Marshal,
	// by image), as a controller reads warmpod.dev/demand-profile.
	Profiles map[string]string
	// WallScale multiplies each of the cluster's own times the world
	// draws, pod starts and the cold claims' lags (0: 1). make bench-pools
	// replays a day compressed 150× whose pod starts and API calls are the
	// cluster's, not compressed: on the day's clock they are 150× longer.
	WallScale float64
	// PodStartPerStarting is what each pod already starting in the
	// cluster adds to a new pod's start (before WallScale; 0: none):
	// where the node's cores are the limit, tens of pods made at once
	// start in turn, and a pod made into a crowd waits for it. make
	// bench-pools fits it to the cluster's own starts (FitStarts).
	PodStartPerStarting time.Duration
	// Unrefilled plays the controller's claim path since decision 0010
	// (DefaultConfig; false plays the one before it, to compare, in
	// bench/pools-sim.md): the controller makes a sized pool's pods above
	// its written floor itself, so a claim of one makes no replacement
	// (the pod leaves the pool's size with it; a claim at or below the
	// floor is the ReplicaSet's, refilled at once); and a shrink leaves
	// a pod above the decision until it has been Ready and unclaimed for
	// SurplusIdle, as long as the pods so kept fit in what the budget's
	// shares leave and the period's idle_time is not 0, so that a later
	// claim takes it instead of a pod made for it. Without it, a pool is a
	// Deployment whose ReplicaSet replaces every claimed pod within
	// milliseconds, and a shrink removes pods at once.
	Unrefilled  bool
	SurplusIdle time.Duration
	// IdleTimeout is warmpod's --idle-timeout in the pool pods (0:
	// never): a pod Ready and unclaimed this long drains and deletes
	// itself (the idle deadline, counted here from Ready: warmpod starts
	// a pod start's last second before it), and the pool makes another
	// while its size still wants it: the ReplicaSet at once, as for a
	// claim. DefaultConfig: the chart's (ChartIdleTimeout).
	IdleTimeout time.Duration
	// Log, when set, gets what the simulated world did, on its clock (the
	// "at" of each line), for a reader to set beside a cluster's logs: a
	// "pool sized" line at each change of a pool's decided size, like
	// warmpod-pools' (from, to, the reason, the decision's message; a
	// pool's first decision is from 0), and a "pod gone" line when a pool
	// pod leaves its pool (PodGone says how).
	Log *slog.Logger
	// ColdClaimLag and ColdClaimPerPending are the drivers' cold claims'
	// delay after the warm wait (ClaimModel, before WallScale; 0: none):
	// ColdClaimLag, plus ColdClaimPerPending for each other cold claim
	// due and not made yet. make bench-pools fits them to the cluster's
	// own claims (FitClaims: on kube-e2e 0.3–0.6 s plus 0.1 s a claim
	// pending); on a real clock they are small against pod starts of
	// seconds but for a burst of hundreds of claims, and DefaultConfig
	// has none.
	ColdClaimLag, ColdClaimPerPending time.Duration
	// FoundPolicy is the policy of a pool sizing.Discovery makes (empty:
	// LearnedPolicy, which is the controller's pools.FoundPolicy). The
	// controller gives every found pool that one; another here plays what
	// a person would have to write on the new image's pool to have more of
	// its jobs warm, and what that costs (bench/pools-sim.md).
	FoundPolicy string
}

// DefaultConfig is the simulation of issue 41: 15 days from a Monday, the
// figures from day 8 (the second Monday) on.
func DefaultConfig() Config {
	return Config{Start: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), Days: 15, Budget: 60, WarmWait: time.Second,
		Resync: 10 * time.Second, Batch: 200 * time.Millisecond, Seed: 1, From: 7, Bucket: 15 * time.Minute,
		Unrefilled: true, SurplusIdle: sizing.MaxKeepAlive, IdleTimeout: ChartIdleTimeout}
}

// ChartIdleTimeout is the --idle-timeout the chart gives every pool's
// warmpod (charts/warmpod/values.yaml, poolDefaults.args): above
// sizing.MaxKeepAlive, so the controller, not the deadline, says when an
// idle pod above the floor goes. At 30m (the chart's before decision
// 0011) a pod kept for a trickle, or a fixed pool's, was made again each
// half hour: 1.27–1.30 pods per job instead of 1.07–1.09 on seeds 1, 8
// and 101, and 3.0 for fixed pools of 2.
const ChartIdleTimeout = 2 * time.Hour

// podStart draws a pod's creation to Ready: log-normal with median and 95th
// percentile p95 (p95 at or below median: always median), within
// [median/3, 20×median]; by default (median 0) those that
// make bench-pools measured on kube-e2e (bench/pools.md: "pod create →
// Ready p50 / p95", 3 s / 16 s, busybox already pulled), so within
// [1 s, 60 s].
func (d draws) podStart(median, p95 time.Duration) time.Duration {
	m, sigma := 3.0, 1.017 // ln(16/3)/1.645
	switch {
	case median > 0 && p95 > median:
		m, sigma = median.Seconds(), math.Log(float64(p95)/float64(median))/1.645
	case median > 0: // every start the same
		m, sigma = median.Seconds(), 0
	}
	v := m * math.Exp(sigma*d.normal())
	return time.Duration(min(max(v, m/3), 20*m) * float64(time.Second))
}

// Result is what one mode did with the trace, from Config.From on.
type Result struct {
	Mode Mode
	// Jobs and Warm count the jobs (a warm job claimed a pool pod, at once
	// or within the warm wait).
	Jobs, Warm int
	// IdlePodSeconds integrates the Ready unclaimed pool pods;
	// StartingPodSeconds those not Ready yet.
	IdlePodSeconds, StartingPodSeconds float64
	// PodsMade counts every pod created: pool pods and cold pods.
	PodsMade int
	// ColdStarts counts the cold jobs; TookStarting those among them that
	// took a pool pod that was starting (claimStarting) rather than a
	// cold pod of their own; ColdWaitSeconds sums the cold jobs' waits
	// (the warm wait, then until their pod is Ready).
	ColdStarts, TookStarting int
	ColdWaitSeconds          float64
	// ScaleUps and ScaleDowns count the changes of the pools' replicas;
	// Removed the pool pods a scale-down (or a pool's removal) took away
	// without a job: made for nothing.
	ScaleUps, ScaleDowns, Removed int
	// SelfDeleted counts the pool pods that reached their idle deadline
	// (Config.IdleTimeout) unclaimed: also made for nothing.
	SelfDeleted int
	// Pipelines: per pipeline name, its jobs and warm jobs, counted from
	// day 2 for a daily pipeline and from Config.From for another.
	Pipelines map[string]*Count
	// NewImage is the warm flag of each job of the image that appears
	// after day 0, in the order they arrived (so NewImage[5] is its 6th
	// job), over the whole trace, and NewImageAt when each arrived;
	// NewImageName names it.
	NewImage     []bool
	NewImageAt   []time.Time
	NewImageName string
	// PoolsFound and PoolsRemoved count the pools sizing.Discovery made
	// and removed (Learned).
	PoolsFound, PoolsRemoved int
	// Series samples the whole trace by Config.Bucket.
	Series []Sample
	// Profiles are the sized pools' learned profiles at Config.From
	// (sizing.Profile.Marshal, by image): what the controller would have
	// saved by then, for make bench-pools to seed a real controller with.
	Profiles map[string]string
}

// Count is jobs and the warm ones among them.
type Count struct{ Jobs, Warm int }

// Rate is Warm/Jobs (0 without jobs).
func (c Count) Rate() float64 {
	if c.Jobs == 0 {
		return 0
	}
	return float64(c.Warm) / float64(c.Jobs)
}

// Sample is one bucket of a Result's series.
type Sample struct {
	At         time.Time
	Warm, Cold int     // claims in the bucket
	Idle, Busy float64 // mean Ready idle and busy pods
	Made       int     // pods created in the bucket: pool pods and cold pods
}

// WarmRate is Warm/Jobs.
func (r Result) WarmRate() float64 { return Count{r.Jobs, r.Warm}.Rate() }

// Play plays jobs in mode under cfg.
func Play(jobs []Job, mode Mode, cfg Config) (Result, error) {
	w := &world{cfg: cfg, mode: mode, d: draws{rand.NewPCG(cfg.Seed, 0x706f64737461)}, pools: map[string]*pool{},
		res: Result{Mode: mode, Pipelines: map[string]*Count{}}, finder: sizing.NewFinder(sizing.DefaultDiscovery()),
		now: cfg.Start, last: cfg.Start}
	w.end = cfg.Start.AddDate(0, 0, cfg.Days)
	w.from = cfg.Start.AddDate(0, 0, cfg.From)
	w.foundPolicy = cfg.FoundPolicy
	if w.foundPolicy == "" {
		w.foundPolicy = LearnedPolicy
	}
	if _, err := sizing.Parse(w.foundPolicy); err != nil {
		return Result{}, fmt.Errorf("found pools' policy: %w", err)
	}
	w.res.Series = make([]Sample, int(w.end.Sub(cfg.Start)/cfg.Bucket))
	for i := range w.res.Series {
		w.res.Series[i].At = cfg.Start.Add(time.Duration(i) * cfg.Bucket)
	}
	if cfg.Pools == nil {
		for _, l := range Loads {
			if l.From > 0 {
				w.res.NewImageName = l.Image
			}
			if mode == Learned && l.From > 0 {
				continue // no pool written: Discovery's to find
			}
			if err := w.addPool(l.Image, cfg.Start.AddDate(0, 0, l.From), false); err != nil {
				return Result{}, err
			}
		}
	}
	for _, image := range cfg.Pools {
		if err := w.addPool(image, cfg.Start, false); err != nil {
			return Result{}, err
		}
	}
	for i := range jobs {
		if !jobs[i].At.Before(w.end) {
			break
		}
		w.push(event{at: jobs[i].At, kind: evArrive, job: &jobs[i]})
	}
	if mode != Fixed {
		w.push(event{at: cfg.Start, kind: evResync})
		w.push(event{at: w.from, kind: evSnapshot})
	}
	for w.q.Len() > 0 {
		e := heap.Pop(&w.q).(event)
		if !e.at.Before(w.end) {
			break
		}
		w.advance(e.at)
		w.handle(e)
	}
	w.advance(w.end)
	// A job is counted when its wait ends: put them back in the order
	// they arrived (stable: jobs of one instant stay as they were counted).
	order := make([]int, len(w.res.NewImage))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return w.res.NewImageAt[a].Compare(w.res.NewImageAt[b]) })
	warm, at := make([]bool, len(order)), make([]time.Time, len(order))
	for i, o := range order {
		warm[i], at[i] = w.res.NewImage[o], w.res.NewImageAt[o]
	}
	w.res.NewImage, w.res.NewImageAt = warm, at
	return w.res, nil
}

// world is the simulated cluster: pools (Deployments and their
// ReplicaSets), pods, drivers and, but in Fixed, the controller.
type world struct {
	cfg       Config
	mode      Mode
	d         draws
	pools     map[string]*pool
	q         events
	seq       int
	now, last time.Time
	end, from time.Time
	res       Result
	finder    *sizing.Finder
	pending   bool // a batched decision is queued
	nextPod   int
	busy      int // pods running a job
	// outReady is when each starting pod outside the pools' ReplicaSets
	// (a cold pod, a starting pod a job took) becomes Ready, for
	// PodStartPerStarting's count (pruned as it counts).
	outReady []time.Time
	room     int // surplus pods a shrink may still keep (Unrefilled)
	// coldPending counts the cold claims due (a driver's warm wait
	// ended) and not made yet (Config.ColdClaimPerPending).
	coldPending int
	// foundPolicy is Config.FoundPolicy, or LearnedPolicy; Play checks
	// that it parses.
	foundPolicy string
}

// pool is a pool Deployment, its ReplicaSet's pods and the controller's
// history of it (what pools.Tracker keeps).
type pool struct {
	image    string
	replicas int
	rs       []*pod // the ReplicaSet's pods: idle or starting
	policy   sizing.Policy
	sized    bool // the controller sizes it
	found    bool // made by Discovery
	made     time.Time
	// the tracker's history
	claims, colds []time.Time
	last          time.Time
	starts        []time.Duration
	ups           []up
	profile       sizing.Profile
	known         time.Time
	damper        sizing.Damper
	period        int // the active period of the last decision
	decided       int // the last decision's size, for Config.Log
}

type up struct {
	at time.Time
	n  int
}

type pod struct {
	id       int
	pool     *pool
	created  time.Time
	readyAt  time.Time
	ready    bool
	reserved *Job // a driver waits for it (its warm wait)
	// late: reserved's driver claimed it while it was starting, after
	// its warm wait (ClaimStarting): the job is a cold start, counted and
	// busy from the claim, and the pod has left the ReplicaSet.
	late bool
	gone bool
}

type evKind int

const (
	evArrive evKind = iota
	evReady
	evCold
	evResync
	evDecide
	evEnd
	evSnapshot // Result.Profiles, at Config.From
	evIdle     // a pod's idle deadline (Config.IdleTimeout)
	evColdDue  // a driver's warm wait ended: its cold claim comes after the claim model's lag
)

type event struct {
	at   time.Time
	seq  int
	kind evKind
	job  *Job
	pod  *pod
	busy *pool
	// pending: an evCold that evColdDue counted in world.coldPending.
	pending bool
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if c := q[i].at.Compare(q[j].at); c != 0 {
		return c < 0
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (w *world) push(e event) {
	w.seq++
	e.seq = w.seq
	heap.Push(&w.q, e)
}

// advance integrates the pods' states up to t.
func (w *world) advance(t time.Time) {
	if t.Before(w.last) {
		return
	}
	dt := t.Sub(w.last).Seconds()
	var idle, starting float64
	for _, p := range w.pools {
		for _, pd := range p.rs {
			if pd.ready {
				idle++
			} else {
				starting++
			}
		}
	}
	if !w.last.Before(w.from) {
		w.res.IdlePodSeconds += idle * dt
		w.res.StartingPodSeconds += starting * dt
	}
	// The means of the buckets the interval spans, each its part.
	for from := w.last; from.Before(t); {
		i := int(from.Sub(w.cfg.Start) / w.cfg.Bucket)
		to := w.cfg.Start.Add(time.Duration(i+1) * w.cfg.Bucket)
		if t.Before(to) {
			to = t
		}
		if i >= 0 && i < len(w.res.Series) {
			part := to.Sub(from).Seconds() / w.cfg.Bucket.Seconds()
			w.res.Series[i].Idle += idle * part
			w.res.Series[i].Busy += float64(w.busy) * part
		}
		from = to
	}
	w.last, w.now = t, t
}

func (w *world) addPool(image string, at time.Time, found bool) error {
	p := &pool{image: image, made: at, found: found, known: at}
	if text, ok := w.cfg.Profiles[image]; ok {
		prof, err := sizing.UnmarshalProfile(text)
		if err != nil {
			return fmt.Errorf("profile of %s: %w", image, err)
		}
		if prof.Through().After(at) {
			return fmt.Errorf("profile of %s: folded up to %s, after %s", image, prof.Through(), at)
		}
		p.profile = prof
	}
	switch w.mode {
	case Fixed:
		p.replicas = FixedSize
	case Periods:
		pol, err := sizing.Parse(periodsPolicy(image))
		if err != nil {
			return fmt.Errorf("periods policy of %s: %w", image, err)
		}
		p.policy, p.sized = pol, true
	case Learned:
		pol, err := sizing.Parse(LearnedPolicy)
		if err != nil {
			return err
		}
		p.policy, p.sized = pol, true
	}
	if at.After(w.now) {
		// Written on the day the image appears.
		w.push(event{at: at, kind: evResync, busy: p})
		return nil
	}
	w.pools[image] = p
	w.reconcileRS(p)
	return nil
}

func (w *world) handle(e event) {
	switch e.kind {
	case evArrive:
		w.arrive(e.job)
	case evReady:
		w.ready(e.pod)
	case evIdle:
		w.idleDeadline(e.pod)
	case evColdDue:
		lag := w.cfg.ColdClaimLag + time.Duration(w.coldPending)*w.cfg.ColdClaimPerPending
		if w.cfg.WallScale > 0 {
			lag = time.Duration(float64(lag) * w.cfg.WallScale)
		}
		w.coldPending++
		w.push(event{at: w.now.Add(lag), kind: evCold, job: e.job, pending: true})
	case evCold:
		if e.pending {
			w.coldPending--
		}
		if p := w.pools[e.job.Image]; p != nil && w.claimStarting(p, e.job) {
			return
		}
		w.cold(e.job, w.pools[e.job.Image] != nil, w.now.Sub(e.job.At))
	case evEnd:
		w.busy--
	case evSnapshot:
		w.res.Profiles = map[string]string{}
		for name, p := range w.pools {
			if p.sized {
				p.profile.Fold(append(slices.Clone(p.claims), p.colds...), min(p.start(), sizing.MaxPodStart), p.known, w.now)
				w.res.Profiles[name] = p.profile.Marshal()
			}
		}
	case evResync:
		if e.busy != nil { // a pool written at this time
			w.pools[e.busy.image] = e.busy
			w.reconcileRS(e.busy)
			return
		}
		w.decide()
		w.push(event{at: w.now.Add(w.cfg.Resync), kind: evResync})
	case evDecide:
		w.pending = false
		w.decide()
	}
}

// countJob counts j's outcome.
func (w *world) countJob(j *Job, warm bool) {
	if warm {
		w.res.Series[w.bucket()].Warm++
	} else {
		w.res.Series[w.bucket()].Cold++
	}
	if j.Image == w.res.NewImageName {
		w.res.NewImage = append(w.res.NewImage, warm)
		w.res.NewImageAt = append(w.res.NewImageAt, j.At)
	}
	if name, ok := strings.CutPrefix(j.Kind, "pipeline:"); ok {
		from := w.from
		if daily(name) {
			from = w.cfg.Start.AddDate(0, 0, 1)
		}
		if !j.At.Before(from) {
			c := w.res.Pipelines[name]
			if c == nil {
				c = &Count{}
				w.res.Pipelines[name] = c
			}
			c.Jobs++
			if warm {
				c.Warm++
			}
		}
	}
	if j.At.Before(w.from) {
		return
	}
	w.res.Jobs++
	if warm {
		w.res.Warm++
	}
}

func daily(name string) bool {
	for _, p := range Pipelines {
		if p.Name == name {
			return len(p.Days) >= 5
		}
	}
	return false
}

func (w *world) bucket() int {
	return min(max(int(w.now.Sub(w.cfg.Start)/w.cfg.Bucket), 0), len(w.res.Series)-1)
}

// arrive is a driver's claim path: an idle Ready pod of the job's pool at
// once; else one that becomes Ready within the warm wait; else, after the
// warm wait, a cold pod. Without a pool, a cold pod at once.
func (w *world) arrive(j *Job) {
	p := w.pools[j.Image]
	if p == nil {
		w.finder.Cold(j.Image, w.now)
		w.cold(j, false, 0)
		return
	}
	var soonest *pod
	for _, pd := range p.rs {
		if pd.reserved != nil {
			continue
		}
		if pd.ready {
			w.claim(p, pd, j)
			return
		}
		if !pd.readyAt.After(w.now.Add(w.cfg.WarmWait)) && (soonest == nil || pd.readyAt.Before(soonest.readyAt)) {
			soonest = pd
		}
	}
	if soonest != nil {
		soonest.reserved = j
		return
	}
	if w.cfg.ColdClaimLag > 0 || w.cfg.ColdClaimPerPending > 0 {
		w.push(event{at: w.now.Add(w.cfg.WarmWait), kind: evColdDue, job: j})
		return
	}
	w.push(event{at: w.now.Add(w.cfg.WarmWait), kind: evCold, job: j})
}

// claimStarting is the driver's claim after its warm wait
// (executor/pool.Cluster.ClaimStarting): the pool's pod that has been
// starting the longest, but less than the pool's typical start, not
// already waited for, is claimed for j and
// leaves the ReplicaSet, which makes another; j is a cold start, demand
// on the pool as a cold pod is, and runs once that pod is Ready. The
// pool's typical start is the controller's measure, which the driver
// reads from the pool's sizing status. False when no pod of p is
// starting.
func (w *world) claimStarting(p *pool, j *Job) bool {
	// Only a pod younger than the pool's typical start: one past it is
	// slow (a start drawn from the long tail), and a cold pod made now is
	// likely Ready sooner.
	typical := p.start()
	var oldest *pod
	for _, pd := range p.rs {
		if !pd.ready && pd.reserved == nil && w.now.Sub(pd.created) < typical && (oldest == nil || pd.created.Before(oldest.created)) {
			oldest = pd
		}
	}
	if oldest == nil {
		return false
	}
	oldest.reserved, oldest.late = j, true
	w.coldWait(oldest.readyAt.Sub(j.At), true) // the warm wait, the claim's lag, the rest of the pod's start
	if w.cfg.PodStartPerStarting > 0 {
		w.outReady = append(w.outReady, oldest.readyAt)
	}
	w.take(p, oldest, j, false, oldest.readyAt.Add(j.Hold))
	return true
}

// coldWait counts a cold job that waited wait, from Config.From on.
func (w *world) coldWait(wait time.Duration, tookStarting bool) {
	if w.now.Before(w.from) {
		return
	}
	w.res.ColdStarts++
	w.res.ColdWaitSeconds += wait.Seconds()
	if tookStarting {
		w.res.TookStarting++
	}
}

// claim gives pd to j: it leaves the ReplicaSet, which makes another.
func (w *world) claim(p *pool, pd *pod, j *Job) {
	w.take(p, pd, j, true, w.now.Add(j.Hold))
}

// take gives pd to j now, a warm claim or a cold start (claimStarting):
// pd leaves the ReplicaSet, which makes another, j is busy until end, and
// a sized pool records the claim or the cold start as its demand.
func (w *world) take(p *pool, pd *pod, j *Job, warm bool, end time.Time) {
	if warm {
		w.gone(pd, GoneClaimed)
	} else {
		w.gone(pd, GoneClaimedStarting)
	}
	w.leave(p, pd)
	w.countJob(j, warm)
	w.busy++
	w.push(event{at: end, kind: evEnd})
	if p.sized {
		if warm {
			p.claims = append(p.claims, w.now)
		} else {
			p.colds = append(p.colds, w.now)
		}
		p.last = w.now
	}
	w.reconcileRS(p)
	w.batch()
}

// cold makes a cold pod for j: demand on its pool when it has one.
func (w *world) cold(j *Job, demand bool, waited time.Duration) {
	w.countJob(j, false)
	w.made()
	start := w.podStart()
	if w.cfg.PodStartPerStarting > 0 {
		w.outReady = append(w.outReady, w.now.Add(start))
	}
	w.coldWait(waited+start, false)
	w.busy++
	w.push(event{at: w.now.Add(start + j.Hold), kind: evEnd})
	if p := w.pools[j.Image]; p != nil && demand && p.sized {
		p.colds = append(p.colds, w.now)
		p.last = w.now
		p.addStart(start)
	}
	w.batch()
}

func (p *pool) addStart(d time.Duration) {
	p.starts = append(p.starts, d)
	if len(p.starts) > 9 {
		p.starts = p.starts[len(p.starts)-9:]
	}
}

func (w *world) ready(pd *pod) {
	if pd.gone {
		return
	}
	pd.ready = true
	pd.pool.addStart(pd.readyAt.Sub(pd.created))
	if pd.late {
		return // its job was counted at the claim, and runs from now
	}
	if j := pd.reserved; j != nil {
		pd.reserved = nil
		w.claim(pd.pool, pd, j)
		return
	}
	if w.cfg.IdleTimeout > 0 {
		w.push(event{at: w.now.Add(w.cfg.IdleTimeout), kind: evIdle, pod: pd})
	}
}

// idleDeadline is warmpod's idle deadline in pd: unclaimed, it deletes
// itself and leaves its pool, which makes another while its size wants
// it (the ReplicaSet at once; the controller's part, Unrefilled, at its
// next decision, as after a claim).
func (w *world) idleDeadline(pd *pod) {
	p := pd.pool
	if pd.gone || !slices.Contains(p.rs, pd) {
		return // claimed, removed, or its pool removed
	}
	pd.gone = true
	w.res.SelfDeleted++
	w.gone(pd, GoneIdleDeadline)
	w.leave(p, pd)
	w.reconcileRS(p)
	w.batch()
}

// leave takes pd (claimed, or gone at its idle deadline) out of p: out of
// its ReplicaSet, which makes another; above the floor (Unrefilled), the
// controller's pod takes its place in p's size with it, and the next
// decision makes another if it still wants it.
func (w *world) leave(p *pool, pd *pod) {
	p.rs = slices.DeleteFunc(p.rs, func(x *pod) bool { return x == pd })
	if w.cfg.Unrefilled && p.sized && p.replicas > w.floor(p) {
		p.replicas--
	}
}

// made counts a pod created now, pool pod or cold pod.
func (w *world) made() {
	w.res.PodsMade++
	w.res.Series[w.bucket()].Made++
}

// batch queues a decision Batch from now, as a pod event does.
func (w *world) batch() {
	if w.mode == Fixed || w.pending {
		return
	}
	w.pending = true
	w.push(event{at: w.now.Add(w.cfg.Batch), kind: evDecide})
}

// podStart draws a pod start, plus Config.PodStartPerStarting for each
// pod starting now, scaled by Config.WallScale.
func (w *world) podStart() time.Duration {
	d := w.d.podStart(w.cfg.PodStartMedian, w.cfg.PodStartP95)
	if w.cfg.PodStartPerStarting > 0 {
		d += time.Duration(w.starting()) * w.cfg.PodStartPerStarting
	}
	if w.cfg.WallScale > 0 {
		d = time.Duration(float64(d) * w.cfg.WallScale)
	}
	return d
}

// starting counts the pods not Ready yet: the pools' and the cold ones.
func (w *world) starting() int {
	n := 0
	for _, p := range w.pools {
		for _, pd := range p.rs {
			if pd.readyAt.After(w.now) {
				n++
			}
		}
	}
	w.outReady = slices.DeleteFunc(w.outReady, func(t time.Time) bool { return !t.After(w.now) })
	return n + len(w.outReady)
}

// reconcileRS is the ReplicaSet: pods up to replicas, made at once.
func (w *world) reconcileRS(p *pool) {
	for len(p.rs) < p.replicas {
		w.nextPod++
		start := w.podStart()
		pd := &pod{id: w.nextPod, pool: p, created: w.now, readyAt: w.now.Add(start)}
		p.rs = append(p.rs, pd)
		w.made()
		w.push(event{at: pd.readyAt, kind: evReady, pod: pd})
	}
}

// decide is the controller's decision over every sized pool: Decide with
// the learned forecast, Share over the budget, then the sizes (a shrink
// removes the pods the controller retires: not Ready first, then the
// youngest, never one a driver waits for).
func (w *world) decide() {
	if w.mode == Learned {
		w.discover()
	}
	names := make([]string, 0, len(w.pools))
	for name, p := range w.pools {
		if p.sized {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	demands := make([]sizing.Demand, len(names))
	decs := make([]sizing.Decision, len(names))
	for i, name := range names {
		p := w.pools[name]
		cut := w.now.Add(-24 * time.Hour)
		p.claims = slices.DeleteFunc(p.claims, func(t time.Time) bool { return t.Before(cut) })
		p.colds = slices.DeleteFunc(p.colds, func(t time.Time) bool { return t.Before(cut) })
		p.ups = slices.DeleteFunc(p.ups, func(u up) bool { return !u.at.After(w.now.Add(-time.Minute)) })
		start := p.start()
		capped := min(start, sizing.MaxPodStart)
		p.profile.Fold(append(slices.Clone(p.claims), p.colds...), capped, p.known, w.now)
		obs := sizing.Observation{Claims: p.claims, ColdStarts: p.colds, LastClaim: p.last, PodStart: start,
			Forecast: p.profile.Forecast(w.now, min(start, sizing.MaxLead))}
		for _, pd := range p.rs {
			if pd.ready {
				obs.Idle++
			} else {
				obs.Starting++
			}
		}
		for _, u := range p.ups {
			obs.ScaledUpLastMinute += u.n
		}
		decs[i] = sizing.Decide(p.policy, obs, w.now)
		if decs[i].Period != p.period || decs[i].Reason == sizing.ReasonMax {
			p.damper.Reset() // as the controller: a schedule's change is not held
			p.period = decs[i].Period
		}
		decs[i].Idle, _ = p.damper.Damp(w.now, decs[i].Idle, p.replicas, obs.Idle, append(slices.Clone(p.claims), p.colds...))
		_, per := p.policy.Active(w.now)
		demands[i] = sizing.Demand{Name: name, Desired: decs[i].Idle, Min: per.Min, RecentClaims: decs[i].Terms.Demand, Expected: decs[i].Terms.Profile}
	}
	shares := sizing.Share(sizing.Budget{Pods: w.cfg.Budget}, demands)
	w.room = w.cfg.Budget
	for _, n := range shares {
		w.room -= n
	}
	for i, name := range names {
		p := w.pools[name]
		if w.cfg.Log != nil && shares[i] != p.decided {
			reason := string(decs[i].Reason)
			if shares[i] < decs[i].Idle {
				reason = "budget" // as warmpod-pools says a cut share
			}
			w.cfg.Log.Info("pool sized", "at", w.now, "pool", name, "from", p.decided, "to", shares[i], "reason", reason,
				"message", decs[i].Message, "pods", len(p.rs))
		}
		p.decided = shares[i]
		w.size(p, shares[i])
	}
}

// start is p's pod start as the controller counts it: the median of
// those measured, sizing.DefaultPodStart before any.
func (p *pool) start() time.Duration {
	if len(p.starts) == 0 {
		return sizing.DefaultPodStart
	}
	s := slices.Clone(p.starts)
	slices.Sort(s)
	return s[len(s)/2]
}

// size sets p's replicas to n: a grow at once, a shrink by retiring pods.
func (w *world) size(p *pool, n int) {
	switch {
	case n > p.replicas:
		p.ups = append(p.ups, up{w.now, n - p.replicas})
		p.replicas = n
		w.res.ScaleUps++
		w.reconcileRS(p)
	case n < p.replicas:
		w.res.ScaleDowns++
		p.replicas = n
		order := slices.Clone(p.rs)
		slices.SortStableFunc(order, func(a, b *pod) int {
			if a.ready != b.ready {
				if !a.ready {
					return -1
				}
				return 1
			}
			return b.created.Compare(a.created)
		})
		excess := len(p.rs) - n
		for _, pd := range order {
			if excess <= 0 {
				break
			}
			if pd.reserved != nil {
				continue
			}
			if w.cfg.Unrefilled && w.room > 0 && w.keeps(p) && w.keptFor(pd) {
				w.room-- // kept for a later claim, within the budget
				continue
			}
			pd.gone = true
			w.res.Removed++
			w.gone(pd, GoneRemoved)
			p.rs = slices.DeleteFunc(p.rs, func(x *pod) bool { return x == pd })
			excess--
		}
		// Pods a driver waits for stay: replicas cannot go below them.
		p.replicas = max(p.replicas, len(p.rs))
	}
}

// floor is the idle count p's active period writes (max(idle_count, min),
// within max): its ReplicaSet's part of its size (Unrefilled).
func (w *world) floor(p *pool) int {
	_, per := p.policy.Active(w.now)
	return min(max(per.IdleCount, per.Min), per.Max)
}

// keeps tells whether p's active period keeps a pod above the decision:
// its idle_time is not 0 (idle_time 0 keeps nothing for demand).
func (w *world) keeps(p *pool) bool {
	_, per := p.policy.Active(w.now)
	return per.IdleTime > 0
}

// keptFor tells whether pd, above its pool's decision, waits for a later
// claim (Unrefilled): Ready for less than SurplusIdle, or not Ready yet and
// made less than sizing.MaxPodStart ago (the controller's own rule).
func (w *world) keptFor(pd *pod) bool {
	if !pd.ready {
		return w.now.Sub(pd.created) < sizing.MaxPodStart
	}
	return w.now.Sub(pd.readyAt) < w.cfg.SurplusIdle
}

// discover makes the pools Discovery finds due, and removes those it made
// that are no longer used.
func (w *world) discover() {
	rule := sizing.DefaultDiscovery()
	made := 0
	for name, p := range w.pools {
		if !p.found {
			continue
		}
		if rule.Unused(p.made, p.last, w.now) {
			for _, pd := range p.rs {
				pd.gone = true
				w.res.Removed++
				w.gone(pd, GoneRemoved)
			}
			delete(w.pools, name)
			w.res.PoolsRemoved++
			continue
		}
		made++
	}
	for _, image := range w.finder.Due(w.now, made) {
		pol, _ := sizing.Parse(w.foundPolicy) // parsed in Play
		p := &pool{image: image, policy: pol, sized: true, found: true, made: w.now, known: w.now}
		// The cold jobs that found it are its first claims.
		p.colds = w.finder.Colds(image, w.now)
		for _, c := range p.colds {
			if c.After(p.last) {
				p.last = c
			}
		}
		p.known = w.now.Add(-24 * time.Hour)
		w.finder.Made(image)
		w.pools[image] = p
		w.res.PoolsFound++
	}
}

// NewImageFrom counts the jobs of warm from the nth (1-based) on.
func NewImageFrom(warm []bool, n int) Count {
	var c Count
	for i, w := range warm {
		if i+1 < n {
			continue
		}
		c.Jobs++
		if w {
			c.Warm++
		}
	}
	return c
}

// PodGone is how a pool pod left its pool, in Config.Log's "pod gone"
// lines: the words the make bench-pools pod log uses for a cluster's.
type PodGone string

const (
	// GoneClaimed: a driver claimed it Ready (a warm job).
	GoneClaimed PodGone = "claimed"
	// GoneClaimedStarting: a driver claimed it starting, after its warm
	// wait (ClaimStarting: a cold job).
	GoneClaimedStarting PodGone = "claimed starting"
	// GoneRemoved: the controller removed it (a shrink, or its pool's
	// removal).
	GoneRemoved PodGone = "removed"
	// GoneIdleDeadline: it reached warmpod's idle deadline unclaimed.
	GoneIdleDeadline PodGone = "idle deadline"
)

// gone logs pd's leaving its pool (Config.Log).
func (w *world) gone(pd *pod, how PodGone) {
	if w.cfg.Log == nil {
		return
	}
	ready := "-" // never Ready in its pool
	if pd.ready {
		ready = pd.readyAt.UTC().Format(time.RFC3339)
	}
	w.cfg.Log.Info("pod gone", "at", w.now, "pool", pd.pool.image, "made", pd.created.UTC().Format(time.RFC3339), "ready", ready, "how", string(how))
}
