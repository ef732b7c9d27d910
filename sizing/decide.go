package sizing

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// DefaultPodStart is the pod start time Decide assumes before one is measured
// (Observation.PodStart <= 0): about what a cold pod of the kube-e2e cluster
// took through the GitLab driver (bench/gitlab-kube.md: 4 s of overhead) with
// a margin for pulling a job image. A longer guess keeps more pods warm.
const DefaultPodStart = 30 * time.Second

// MaxPodStart caps the pod start time Decide and the profile's window use. The
// demand term counts the claims within one pod start: with no cap, a slow
// node (an image pull that stalls, a node short of CPU) would lengthen the
// window, ask for more pods, load the node further and feed back (issue
// 41). Two minutes is four times the slowest cold start measured on
// kube-e2e (bench/cold-pod-timeline.md) with an image pull.
const MaxPodStart = 2 * time.Minute

// MaxLead caps how far ahead of a recurring burst the profile pre-warms:
// the pool's measured pod start, not capped at MaxPodStart, since an
// earlier start costs idle pod-time only, never more pods (the profile's
// window, which sets how many, stays capped). Pods that take longer than
// half an hour to start are a broken node, not a lead to plan for.
const MaxLead = 30 * time.Minute

// Observation is what the controller saw of one pool at the time of a
// decision. Negative counts read as 0.
type Observation struct {
	// Idle is the pool's Ready, unclaimed pods.
	Idle int
	// Starting is the pool's pods on a node and not Ready yet (in its
	// ReplicaSet, so they count toward its replicas).
	Starting int
	// Pending is the pool's pods that no node has taken yet: the scheduler
	// finds no room, or waits for a node an autoscaler adds. They are
	// neither idle nor busy, and count toward the pool as Starting do: a
	// pool whose pods wait for room does not grow for want of Ready pods,
	// as more pods would only wait beside them. The message says how many.
	Pending int
	// Busy is the claimed pods of the pool that are still running a job.
	// They have left the ReplicaSet: no figure of Decide counts them, only
	// scale_factor reads them.
	Busy int
	// Claims are the times of recent warm claims (a pod relabelled out of the
	// pool), and ColdStarts of recent cold fallbacks (a job that found no idle
	// pod and got a pod of its own): both are jobs that wanted a pod of this
	// pool. Any order; times before now - IdleTime - PodStart are ignored and
	// may be pruned by the caller.
	Claims, ColdStarts []time.Time
	// PodStart is the measured time a new pod of the pool takes from creation
	// to Ready; <= 0 = not measured yet (DefaultPodStart).
	PodStart time.Duration
	// LastClaim is the time of the pool's last claim or job, warm or cold,
	// even when its time is no longer in Claims; zero = none known.
	LastClaim time.Time
	// ScaledUpLastMinute is how many pods the controller added to the pool's
	// size (the sum of its increases of the decided size) in the minute
	// before now, for max_growth_rate.
	ScaledUpLastMinute int
	// Size is the pool's size as last decided, from which max_growth_rate
	// counts growth (0: Idle + Starting + Pending). A pool whose claimed
	// pods are not replaced until the next decision (the pool controller's
	// pods above the floor) has fewer pods than its size between a claim
	// and the refill: the refill is no growth.
	Size int
	// Forecast is what the pool's learned Profile expects from now until one
	// pod start ahead (Profile.Forecast); the zero Forecast when nothing is
	// learned or expected.
	Forecast Forecast
}

// Reason is the rule that set a Decision's idle count: the reason of the
// Event on the pool and of its status, so it is machine-readable and stable.
type Reason string

// The reasons, from the period's own figure to the limits applied last.
const (
	// ReasonPeriod: the active period's idle_count.
	ReasonPeriod Reason = "period"
	// ReasonScaleFactor: scale_factor × busy pods (capped by
	// scale_factor_limit) is above idle_count.
	ReasonScaleFactor Reason = "scale_factor"
	// ReasonDemand: the recent claims need more than the schedule: the most
	// claims of the last idle_time that arrived within one pod start time.
	ReasonDemand Reason = "demand"
	// ReasonProfile: the pool's learned profile expects more, within one
	// pod start, than the schedule and the recent claims ask for: a
	// pipeline that recurs at this time of day or of the week.
	ReasonProfile Reason = "profile"
	// ReasonKeepAlive: one pod kept after the last claim for the pool's
	// keep-alive (the 95th percentile of the gaps between its recent
	// claims, at most MaxKeepAlive): the next job of a steady trickle
	// finds it.
	ReasonKeepAlive Reason = "keep_alive"
	// ReasonIdleTime: no claim for idle_time, so the pool goes back to the
	// period's idle_count (below its current size).
	ReasonIdleTime Reason = "idle_time"
	// ReasonMin: raised to the period's min.
	ReasonMin Reason = "min"
	// ReasonMax: cut to the period's max.
	ReasonMax Reason = "max"
	// ReasonGrowthLimit: cut to what max_growth_rate still allows this minute.
	ReasonGrowthLimit Reason = "growth_limit"
)

// Terms are the figures Decide took the largest of, for a status that shows
// why a pool has its size.
type Terms struct {
	// IdleCount is the active period's idle_count.
	IdleCount int
	// Scale is ceil(scale_factor × busy), capped by scale_factor_limit.
	Scale int
	// Demand is the most claims (warm and cold) of the last idle_time that
	// arrived within one pod start time.
	Demand int
	// Profile is what the learned profile expects (Forecast.Pods).
	Profile int
	// KeepAlive is 1 while the last claim is within the pool's keep-alive,
	// else 0.
	KeepAlive int
}

// Decision is the idle count a pool should have now, and why.
type Decision struct {
	// Idle is the desired number of idle (or starting) pods: the replicas of
	// the pool's Deployment. Never a count of busy pods.
	Idle int
	// Reason is the rule that set Idle last.
	Reason Reason
	// Message says the same for a human: the period, the figures, the limits.
	Message string
	// Period is the index of the active period in the policy; -1 =
	// DefaultPeriod.
	Period int
	// Terms are the figures before min, max and the growth limit.
	Terms Terms
}

// Decide returns how many idle pods the pool should have at now under policy
// p. With per the active period (Policy.Active):
//
//	target = max(idle_count, scale term, demand term, profile term,
//	             keep-alive term), clamped to [min, max],
//	         then to current + what max_growth_rate still allows
//
// The scale term is GitLab's: idle capacity = max(idle_count, in use ×
// scale_factor), capped by scale_factor_limit (the Policy of gitlab-runner's
// executors/kubernetes/autoscaler/policy.go). The demand term is Little's
// law: claims arriving at a rate r, each taking a replacement pod PodStart to
// become Ready, need r × PodStart idle pods to all find one; measured over a
// window of one PodStart, that is the number of claims in the window, so a
// burst of 30 jobs asks for 30 pods at once instead of a fixed step. The
// largest such count among the claims of the last idle_time is kept, which is
// GitLab's idle_time for a pool: capacity the demand needed stays until
// idle_time after that demand, and idle_time after the last claim the pool is
// back at idle_count (0 = scale to zero; idle_time 0 = demand keeps nothing).
// The profile term is what the pool's learned Profile expects within one pod
// start (Observation.Forecast): the recurring demand that comes before any
// claim of today shows it. The keep-alive term is one pod for the pool's
// keep-alive after its last claim (keepAlive). Both need idle_time above
// 0: idle_time 0 keeps nothing for demand. The pod start used is capped at
// MaxPodStart.
// Growth is limited, a shrink never is: the caller removes idle pods, never
// busy ones.
func Decide(p Policy, obs Observation, now time.Time) Decision {
	idx, per := p.Active(now)
	obs = sanitize(obs)
	start := obs.PodStart
	if start <= 0 {
		start = DefaultPodStart
	}
	start = min(max(start, time.Second), MaxPodStart)
	t := Terms{IdleCount: per.IdleCount, Scale: scaleTerm(per, obs.Busy), Demand: demandTerm(obs, now, start, per.IdleTime)}
	var keep time.Duration
	// idle_time 0 says: keep nothing for demand. Neither what was
	// learned nor a keep-alive overrides it.
	if per.IdleTime > 0 {
		t.Profile = min(max(obs.Forecast.Pods, 0), MaxCount)
		keep = keepAlive(obs, now, start)
		if last := lastClaim(obs); keep > 0 && !last.IsZero() && now.Sub(last) < keep {
			t.KeepAlive = 1
		}
	}
	current := obs.Idle + obs.Starting + obs.Pending
	if obs.Size > 0 {
		current = obs.Size
	}
	d := Decision{Idle: t.IdleCount, Reason: ReasonPeriod, Period: idx, Terms: t}
	var notes []string
	if obs.Pending > 0 {
		notes = append(notes, fmt.Sprintf("%d Pending (on no node yet)", obs.Pending))
	}
	if t.Scale > d.Idle {
		d.Idle, d.Reason = t.Scale, ReasonScaleFactor
	}
	if t.Demand > d.Idle {
		d.Idle, d.Reason = t.Demand, ReasonDemand
	}
	if t.KeepAlive > d.Idle {
		d.Idle, d.Reason = t.KeepAlive, ReasonKeepAlive
		notes = append(notes, fmt.Sprintf("keep-alive %s after the last claim", keep.Round(time.Second)))
	}
	if t.Profile > d.Idle {
		d.Idle, d.Reason = t.Profile, ReasonProfile
		notes = append(notes, obs.Forecast.Why)
	}
	last := lastClaim(obs)
	if d.Reason == ReasonPeriod && current > d.Idle && !last.IsZero() && now.Sub(last) >= per.IdleTime {
		d.Reason = ReasonIdleTime
		notes = append(notes, fmt.Sprintf("no claim since %s (idle_time %s)", last.UTC().Format(time.RFC3339), per.IdleTime))
	}
	if d.Idle < per.Min {
		d.Idle, d.Reason = per.Min, ReasonMin
		notes = append(notes, fmt.Sprintf("raised to min %d", per.Min))
	}
	if d.Idle > per.Max {
		d.Idle, d.Reason = per.Max, ReasonMax
		notes = append(notes, fmt.Sprintf("cut to max %d", per.Max))
	}
	if per.MaxGrowthRate > 0 && d.Idle > current {
		allowed := current + max(0, per.MaxGrowthRate-obs.ScaledUpLastMinute)
		if d.Idle > allowed {
			d.Idle, d.Reason = allowed, ReasonGrowthLimit
			notes = append(notes, fmt.Sprintf("growth limited to %d/min (%d added in the last minute)", per.MaxGrowthRate, obs.ScaledUpLastMinute))
		}
	}
	// A Period built by hand skips Parse's checks; the answer stays a count.
	d.Idle = min(max(d.Idle, 0), MaxCount)
	d.Message = message(d, start, per, notes)
	return d
}

// sanitize reads negative counts as 0 so that no figure goes below zero.
func sanitize(o Observation) Observation {
	o.Idle, o.Starting, o.Pending, o.Busy = max(o.Idle, 0), max(o.Starting, 0), max(o.Pending, 0), max(o.Busy, 0)
	o.ScaledUpLastMinute, o.Size = max(o.ScaledUpLastMinute, 0), max(o.Size, 0)
	return o
}

// scaleTerm is ceil(scale_factor × busy), capped by scale_factor_limit when
// that is set and by MaxCount (the float never overflows the int).
func scaleTerm(per Period, busy int) int {
	if per.ScaleFactor <= 0 || busy == 0 {
		return 0
	}
	v := math.Ceil(per.ScaleFactor * float64(busy))
	if v > MaxCount {
		v = MaxCount
	}
	n := int(v)
	if per.ScaleFactorLimit > 0 && n > per.ScaleFactorLimit {
		n = per.ScaleFactorLimit
	}
	return n
}

// demandTerm is the most claims (warm and cold) of the last idleTime that
// arrived within one window of length start. Claims idleTime old or older are
// forgotten, so that idle_time after the last claim the term is 0. The count
// of a window only rises at a claim, so the windows worth trying are those
// that end at a claim. Claims after now (another node's clock a little ahead)
// count as now.
func demandTerm(obs Observation, now time.Time, start, idleTime time.Duration) int {
	from := now.Add(-idleTime)
	var ts []time.Time
	for _, list := range [][]time.Time{obs.Claims, obs.ColdStarts} {
		for _, c := range list {
			if c.After(now) {
				c = now
			}
			if c.After(from) {
				ts = append(ts, c)
			}
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	best, lo := 0, 0
	for hi, end := range ts {
		// The window (end-start, end]; lo only moves forward as end does.
		for !ts[lo].After(end.Add(-start)) {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return min(best, MaxCount)
}

// MaxKeepAlive caps the keep-alive: an hour of one idle pod per pool is
// the most a trickle of jobs keeps. KeepAliveGaps is how many gaps between
// claims (in the history the caller passes, a day) make a keep-alive.
const (
	MaxKeepAlive  = time.Hour
	KeepAliveGaps = 3
)

// keepAlive is how long one pod stays after the last claim: the 95th
// percentile of the gaps between the pool's recent claims (warm and cold)
// that are longer than one pod start (shorter ones are a burst, the demand
// term's), at most MaxKeepAlive; 0 with fewer than KeepAliveGaps gaps. It is the
// keep-alive of Shahrad et al.'s hybrid histogram policy ("Serverless in
// the Wild", USENIX ATC 2020), which keeps a function loaded up to the
// 99th percentile of its idle times with a cap: a pool whose jobs come
// every 15 minutes keeps one pod between them, where a fixed idle_time
// of 5 minutes left two jobs in three cold. The 95th, not the 99th: a
// day's gaps are few, and the 99th of 30 is the longest, the night.
func keepAlive(obs Observation, now time.Time, start time.Duration) time.Duration {
	return KeepAlive(append(slices.Clone(obs.Claims), obs.ColdStarts...), now, start)
}

// KeepAlive is the keep-alive Decide gives a pool whose claims (warm and
// cold, any order) are claims at now, its pods starting in start.
func KeepAlive(claims []time.Time, now time.Time, start time.Duration) time.Duration {
	var ts []time.Time
	for _, c := range claims {
		if !c.After(now) {
			ts = append(ts, c)
		}
	}
	if len(ts) < KeepAliveGaps+1 {
		return 0
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	gaps := make([]time.Duration, 0, len(ts)-1)
	for i := 1; i < len(ts); i++ {
		if g := ts[i].Sub(ts[i-1]); g > start {
			gaps = append(gaps, g)
		}
	}
	if len(gaps) < KeepAliveGaps {
		return 0
	}
	slices.Sort(gaps)
	return min(gaps[(len(gaps)*95+99)/100-1], MaxKeepAlive)
}

// lastClaim is the latest of LastClaim and the claim times.
func lastClaim(obs Observation) time.Time {
	last := obs.LastClaim
	for _, list := range [][]time.Time{obs.Claims, obs.ColdStarts} {
		for _, c := range list {
			if c.After(last) {
				last = c
			}
		}
	}
	return last
}

// message says the decision for a human: the target, the active period, the
// three figures, and what the limits did.
func message(d Decision, start time.Duration, per Period, notes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d idle (%s): ", d.Idle, d.Reason)
	if d.Period < 0 {
		b.WriteString("no period matches, default")
	} else {
		fmt.Fprintf(&b, "period %d", d.Period)
	}
	fmt.Fprintf(&b, " idle_count %d; scale_factor %d; demand %d (most claims within one pod start of %s in the last idle_time %s)",
		d.Terms.IdleCount, d.Terms.Scale, d.Terms.Demand, start, per.IdleTime)
	if d.Terms.Profile > 0 {
		fmt.Fprintf(&b, "; profile %d", d.Terms.Profile)
	}
	for _, n := range notes {
		b.WriteString("; " + n)
	}
	return b.String()
}
