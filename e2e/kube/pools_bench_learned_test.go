//go:build kube

package kubee2e

// make bench-pools' fourth mode (issue 41): warmpod-pools with nothing
// written. Every pool's policy is the one a found pool gets
// (poolsim.LearnedPolicy: no period, idle_count 0, idle_time 30m of the
// day), and the controller runs on the compressed day's clock (pbDayClock),
// so its profile learns the day's 5-minute slots and its policy's times are
// the day's. It starts from the profile the simulator learned from the week
// before the trace (bench/pools-history.csv), as a controller that had run
// that week would have saved it in warmpod.dev/demand-profile.
//
// The same simulator then plays the trace's day itself (pbSimulate), with
// the cluster's pod starts scaled to the day's clock; the report sets its
// warm-claim rate and idle pod-seconds beside the real cluster's and says
// whether they agree within pbSimAgree: where they do, the simulator's
// 15-day figures (bench/pools-sim.md) are checked against a real cluster.

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/pools"
	"github.com/warmpod/warmpod/pools/poolsim"
)

// pbSimAgree is how far (relative) the simulator's warm-claim rate and idle
// pod-seconds may be from the cluster's for the simulator to be trusted on
// this day (issue 41: 10 %).
const pbSimAgree = 0.10

// pbDayClock is the compressed day's clock: wall time t0 is replay second
// 0, and a wall second is pbCompression seconds of the day (pbDayTime,
// with the jump from Tuesday 06:00 to Saturday 09:30). Its timers and
// tickers run pbCompression times faster than the wall clock, so that the
// controller's resync and batch, given on the day's clock, fire at their
// wall-clock rate. Of (pools.WallClock) puts the pods' timestamps on it.
type pbDayClock struct{ t0 time.Time }

var _ pools.WallClock = pbDayClock{}

func (c pbDayClock) Of(t time.Time) time.Time               { return pbDayTime(t.Sub(c.t0)) }
func (c pbDayClock) Now() time.Time                         { return c.Of(time.Now()) }
func (c pbDayClock) Since(t time.Time) time.Duration        { return c.Now().Sub(t) }
func (c pbDayClock) After(d time.Duration) <-chan time.Time { return time.After(d / pbCompression) }
func (c pbDayClock) NewTimer(d time.Duration) clock.Timer {
	return clock.RealClock{}.NewTimer(d / pbCompression)
}
func (c pbDayClock) Sleep(d time.Duration) { time.Sleep(d / pbCompression) }
func (c pbDayClock) Tick(d time.Duration) <-chan time.Time {
	return clock.RealClock{}.Tick(d / pbCompression)
}
func (c pbDayClock) NewTicker(d time.Duration) clock.Ticker {
	return clock.RealClock{}.NewTicker(d / pbCompression)
}

// pbHistoryStart is bench/pools-history.csv's first day (00:00 UTC): the
// week before pbMonday.
var pbHistoryStart = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

// pbSim is what the simulator made of the trace's day.
type pbSim struct {
	// jobs, warm: the trace's day (the replayed windows); idleSec: Ready
	// idle pod-seconds in those windows, in wall seconds (the day's / 150).
	jobs, warm int
	idleSec    float64
	// made: the pods created in those windows, pool pods and cold pods.
	made int
	// pipe, pipeWarm: the 30-job pipeline.
	pipe, pipeWarm int
	// parts: the same figures per part of the day (the trace's segments,
	// in their order), so a disagreement with the cluster is placed.
	parts []pbSimPart
}

// pbSimPart is the simulator's figures in one part of the day.
type pbSimPart struct {
	jobs, warm int
	idleSec    float64
}

// pbSimConfig is the simulation of the bench's days from start: the
// simulator's default world (poolsim.DefaultConfig: the controller's claim
// path of decision 0010, its pods kept sizing.MaxKeepAlive on its own
// clock, the day's) with the controller's and the drivers' times of the
// replay on the day's clock. The pool pods' --idle-timeout
// (deploy/kube-e2e/pool.yaml, 2h) runs on the wall clock: 300 hours of
// the day, past any replay.
func pbSimConfig(start time.Time, days int) poolsim.Config {
	cfg := poolsim.DefaultConfig()
	cfg.Start, cfg.Days, cfg.From, cfg.Budget = start, days, 0, pbBudget.Pods
	cfg.WarmWait, cfg.Resync, cfg.Batch = pbWarmWait*pbCompression, pbResync*pbCompression, pools.DefaultBatch*pbCompression
	cfg.Seed, cfg.Bucket, cfg.Pools, cfg.WallScale = 1, 15*time.Minute, pbPoolNames(), pbCompression
	cfg.IdleTimeout = pbPodIdleTimeout * pbCompression
	return cfg
}

// pbPodIdleTimeout is the pool pods' --idle-timeout
// (deploy/kube-e2e/pool.yaml), wall clock.
const pbPodIdleTimeout = 2 * time.Hour

// pbSimHistory plays bench/pools-history.csv through the simulator in its
// Learned mode, with kube-e2e's usual pod starts, and returns the profiles
// it learned by the trace's Monday 00:00: what the learned mode's
// controller starts from.
func pbSimHistory(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "bench/pools-history.csv"))
	require.NoError(t, err)
	defer f.Close()
	var jobs []poolsim.Job
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "at,") {
			continue
		}
		p := strings.Split(line, ",")
		require.Len(t, p, 4, line)
		at, err := time.Parse(time.RFC3339, p[0])
		require.NoError(t, err, line)
		hold, err := strconv.ParseFloat(p[2], 64)
		require.NoError(t, err, line)
		jobs = append(jobs, poolsim.Job{At: at, Image: p[1], Hold: time.Duration(hold * pbCompression * float64(time.Second)), Kind: p[3]})
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, jobs)
	// Eight days with the eighth empty: Result.Profiles is taken at From,
	// the trace's Monday 00:00, which must fall inside the played days.
	cfg := pbSimConfig(pbHistoryStart, 8)
	cfg.From = 7
	res, err := poolsim.Play(jobs, poolsim.Learned, cfg)
	require.NoError(t, err)
	require.Len(t, res.Profiles, len(pbPoolNames()), "the simulator's profiles at the end of the history")
	return res.Profiles
}

// pbSimDay plays tr's day through the simulator from profiles, as the
// learned mode's controller played it, with pod starts drawn from starts
// (wall clock; the zero model: kube-e2e's usual) and the drivers' cold
// claims lagging as claims says (wall clock; the zero model: none). log,
// when set, gets the simulator's story (poolsim.Config.Log).
func pbSimDay(t *testing.T, tr pbTrace, profiles map[string]string, starts poolsim.StartModel, claims poolsim.ClaimModel, log *slog.Logger) pbSim {
	t.Helper()
	var jobs []poolsim.Job
	for _, j := range tr.jobs {
		kind := j.kind
		if j.inPipeline {
			kind = "pipeline:bench"
		}
		jobs = append(jobs, poolsim.Job{At: pbDayTime(j.at), Image: j.pool, Hold: j.hold * pbCompression, Kind: kind})
	}
	monday := pbMonday.Truncate(24 * time.Hour)
	cfg := pbSimConfig(monday, 7)
	cfg.Profiles = profiles
	starts.Apply(&cfg)
	claims.Apply(&cfg)
	cfg.Log = log
	res, err := poolsim.Play(jobs, poolsim.Learned, cfg)
	require.NoError(t, err)
	s := pbSim{parts: make([]pbSimPart, len(tr.segments))}
	// The replayed windows: Monday 06:00 to Tuesday 06:00, and the weekend
	// hour (the days between are not replayed). A bucket's replay second
	// places it in a part: the parts' bounds are whole buckets (6 s of
	// replay, 15 minutes of the day).
	windows := []struct {
		from, to time.Time
		replay   time.Duration
	}{{pbMonday, pbMonday.Add(pbWeekendAt * pbCompression), 0}, {pbSaturday, pbDayTime(tr.horizon), pbWeekendAt}}
	for _, b := range res.Series {
		for _, w := range windows {
			if b.At.Before(w.from) || !b.At.Before(w.to) {
				continue
			}
			idle := b.Idle * cfg.Bucket.Seconds() / pbCompression
			s.jobs += b.Warm + b.Cold
			s.warm += b.Warm
			s.idleSec += idle
			s.made += b.Made
			at := w.replay + b.At.Sub(w.from)/pbCompression
			for i, seg := range tr.segments {
				if at >= seg.from && at < seg.to {
					s.parts[i].jobs += b.Warm + b.Cold
					s.parts[i].warm += b.Warm
					s.parts[i].idleSec += idle
				}
			}
		}
	}
	if c := res.Pipelines["bench"]; c != nil {
		s.pipe, s.pipeWarm = c.Jobs, c.Warm
	}
	return s
}

// pbClaimSamples are run's cold claims, for poolsim.FitClaims: due as the
// job's warm wait ended after its arrival, claimed when its driver
// claimed.
func pbClaimSamples(run *pbRun) []poolsim.ClaimSample {
	var out []poolsim.ClaimSample
	for _, r := range run.results {
		if !r.warm && r.err == nil && !r.coldClaim.IsZero() {
			out = append(out, poolsim.ClaimSample{Due: run.t0.Add(r.job.at + pbWarmWait), Claimed: r.coldClaim})
		}
	}
	return out
}

// pbWriteSimCheck sets the simulator's day beside the cluster's: played
// with the pod starts the cluster showed in the learned mode (the check)
// and with kube-e2e's usual ones (for reference).
func pbWriteSimCheck(w func(string, ...any), t *testing.T, tr pbTrace, runs []*pbRun, profiles map[string]string) {
	real := pbFind(runs, "learned")
	w("## The simulator checked against the cluster (issue 41)\n\n")
	if real == nil || profiles == nil {
		w("Not judged: the run lacks the mode with nothing written.\n\n")
		return
	}
	median, p95 := pbPercentile(real.meter.started, 0.5), pbPercentile(real.meter.started, 0.95)
	model := poolsim.FitStarts(real.meter.startSamples())
	claims := poolsim.FitClaims(pbClaimSamples(real))
	simLog := filepath.Join(os.TempDir(), "warmpod-pools-bench-"+real.ns+"-sim.log")
	lf, err := os.Create(simLog)
	require.NoError(t, err)
	defer lf.Close()
	t.Logf("the simulator's check, its log: %s (beside the cluster's: %s and %s)", simLog, real.logFile, real.podLog)
	check := pbSimDay(t, tr, profiles, model, claims, slog.New(slog.NewTextHandler(lf, nil)))
	iid := pbSimDay(t, tr, profiles, poolsim.StartModel{Median: median, P95: p95}, claims, nil)
	usual := pbSimDay(t, tr, profiles, poolsim.StartModel{}, poolsim.ClaimModel{}, nil)
	all := func(pbResult) bool { return true }
	pipe := func(x pbResult) bool { return x.job.inPipeline }
	rs, rp := pbStatsOf(real.results, all), pbStatsOf(real.results, pipe)
	rel := func(a, b float64) float64 {
		if b == 0 {
			if a == 0 {
				return 0
			}
			return 1
		}
		return (a - b) / b
	}
	agree := func(r float64) string {
		if r <= pbSimAgree && r >= -pbSimAgree {
			return "**agree**"
		}
		return "**do not agree**"
	}
	rate := func(s pbSim) float64 { return float64(s.warm) / float64(max(s.jobs, 1)) }
	w("The simulator (pools/poolsim: the controller's sizing code on a simulated clock) learned the pools' profiles from the week before ([`bench/pools-history.csv`](pools-history.csv), `poolstrace -history`); the cluster's controller started from those profiles (`%s` on each pool) and the same policy, with nothing written. The simulator then played this day from the same profiles three times. The check, within %.0f %% (relative) of the cluster's figures: pod starts as this cluster's, fitted to its %d pods of this mode (`poolsim.FitStarts`: %s for each pod starting when a pod is made, by least squares, plus a log-normal of what is left, p50 %s, p95 %s; scaled to the day's clock), since on kube-e2e's two cores pods made together start in turn; and the drivers' cold claims as this cluster's, fitted to its %d cold claims of this mode (`poolsim.FitClaims`: %s after the warm wait plus %s for each other cold claim due and not made yet, by least squares; scaled to the day's clock), since drivers whose warm waits end together patch the same starting pods and claim in turn. For reference: one log-normal of this mode's starts (create → Ready p50 %s, p95 %s), whatever the crowd, with the same claims; and kube-e2e's usual starts (3 s / 16 s) with claims at once.\n\n",
		poolapi.AnnotationProfile, 100*pbSimAgree, model.Pods, pbSec(model.PerStarting), pbSec(model.Median), pbSec(model.P95),
		claims.Claims, pbSec(claims.Lag), pbSec(claims.PerPending), pbSec(median), pbSec(p95))
	w("| | simulator, this run's pod starts | cluster | simulator / cluster − 1 | | simulator, one log-normal | simulator, usual pod starts |\n|---|---:|---:|---:|---|---:|---:|\n")
	rr := rel(rate(check), rs.rate())
	w("| warm-claim rate | %d/%d = %.1f %% | %d/%d = %.1f %% | %+.1f %% | %s | %d/%d = %.1f %% | %d/%d = %.1f %% |\n", check.warm, check.jobs, 100*rate(check), rs.warm, rs.n, 100*rs.rate(), 100*rr, agree(rr),
		iid.warm, iid.jobs, 100*rate(iid), usual.warm, usual.jobs, 100*rate(usual))
	ri := rel(check.idleSec, real.meter.total())
	w("| idle pod-seconds (wall) | %.0f | %.0f | %+.1f %% | %s | %.0f | %.0f |\n", check.idleSec, real.meter.total(), 100*ri, agree(ri), iid.idleSec, usual.idleSec)
	w("| the 30-job pipeline warm | %d/%d | %d/%d | | | %d/%d | %d/%d |\n", check.pipeWarm, check.pipe, rp.warm, rp.n, iid.pipeWarm, iid.pipe, usual.pipeWarm, usual.pipe)
	w("| pods created (pool pods and cold pods) | %d | %d | | | %d | %d |\n\n", check.made, real.meter.created, iid.made, usual.made)
	pbWriteSimParts(w, tr, real, check)
}

// pbWriteSimParts places the check's figures in the parts of the day: the
// simulator (this run's pod starts) beside the cluster, cold jobs / jobs
// and idle pod-seconds, so a reader sees which hours disagree.
func pbWriteSimParts(w func(string, ...any), tr pbTrace, real *pbRun, check pbSim) {
	w("Per part of the day, the simulator (this run's pod starts) beside the cluster: cold jobs / jobs, idle pod-seconds.\n\n")
	w("| part of the day (replay s) | simulator | cluster | idle pod-s, simulator − cluster |\n|---|---:|---:|---:|\n")
	for i, seg := range tr.segments {
		sp := check.parts[i]
		st := pbStatsOf(real.results, func(x pbResult) bool { return x.job.at >= seg.from && x.job.at < seg.to })
		ci := pbSum(real.meter.idleSec, i)
		w("| %s (%.0f–%.0f) | %d/%d cold, %.0f pod-s | %d/%d cold, %.0f pod-s | %+.0f |\n", seg.name, seg.from.Seconds(), seg.to.Seconds(),
			sp.jobs-sp.warm, sp.jobs, sp.idleSec, st.n-st.warm, st.n, ci, sp.idleSec-ci)
	}
	w("\n")
}

// pbProfileNote is what the log says of the learned mode's start.
func pbProfileNote(profiles map[string]string) string {
	var sizes []string
	for _, name := range pbPoolNames() {
		sizes = append(sizes, fmt.Sprintf("%s %d bytes", name, len(profiles[name])))
	}
	return strings.Join(sizes, ", ")
}
