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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

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

// pbSim is what the simulator made of the history and the trace's day.
type pbSim struct {
	// profiles are the pools' profiles at the end of the history (by pool).
	profiles map[string]string
	// jobs, warm: the trace's day (the replayed windows); idleSec: Ready
	// idle pod-seconds in those windows, in wall seconds (the day's / 150).
	jobs, warm int
	idleSec    float64
	// pipe, pipeWarm: the 30-job pipeline.
	pipe, pipeWarm int
	podsMade       int
}

// pbSimConfig is the simulation of the bench's days: the controller's and
// the drivers' times of the replay on the day's clock.
func pbSimConfig() poolsim.Config {
	return poolsim.Config{Start: pbHistoryStart, Days: 13, From: 7, Budget: pbBudget.Pods,
		WarmWait: pbWarmWait * pbCompression, Resync: pbResync * pbCompression, Batch: pools.DefaultBatch * pbCompression,
		Seed: 1, Bucket: 15 * time.Minute, Pools: pbPoolNames(), PodStartScale: pbCompression}
}

// pbSimulate plays bench/pools-history.csv then tr through the simulator in
// its Learned mode.
func pbSimulate(t *testing.T, tr pbTrace) pbSim {
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
	for _, j := range tr.jobs {
		kind := j.kind
		if j.inPipeline {
			kind = "pipeline:bench"
		}
		jobs = append(jobs, poolsim.Job{At: pbDayTime(j.at), Image: j.pool, Hold: j.hold * pbCompression, Kind: kind})
	}
	cfg := pbSimConfig()
	res, err := poolsim.Play(jobs, poolsim.Learned, cfg)
	require.NoError(t, err)
	s := pbSim{profiles: res.Profiles, podsMade: res.PodsMade}
	require.Len(t, s.profiles, len(pbPoolNames()), "the simulator's profiles at the end of the history")
	// The replayed windows: Monday 06:00 to Tuesday 06:00, and the weekend
	// hour (the days between are not replayed).
	windows := [][2]time.Time{{pbMonday, pbMonday.Add(pbWeekendAt * pbCompression)},
		{pbSaturday, pbDayTime(tr.horizon)}}
	for _, b := range res.Series {
		for _, w := range windows {
			if !b.At.Before(w[0]) && b.At.Before(w[1]) {
				s.jobs += b.Warm + b.Cold
				s.warm += b.Warm
				s.idleSec += b.Idle * cfg.Bucket.Seconds() / pbCompression
			}
		}
	}
	if c := res.Pipelines["bench"]; c != nil {
		s.pipe, s.pipeWarm = c.Jobs, c.Warm
	}
	return s
}

// pbWriteSimCheck sets the simulator's day beside the cluster's.
func pbWriteSimCheck(w func(string, ...any), runs []*pbRun, sim *pbSim) {
	real := pbFind(runs, "learned")
	w("## The simulator checked against the cluster (issue 41)\n\n")
	if real == nil || sim == nil {
		w("Not judged: the run lacks the mode with nothing written.\n\n")
		return
	}
	all := func(pbResult) bool { return true }
	pipe := func(x pbResult) bool { return x.job.inPipeline }
	rs, rp := pbStatsOf(real.results, all), pbStatsOf(real.results, pipe)
	simRate := float64(sim.warm) / float64(max(sim.jobs, 1))
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
	w("The simulator (pools/poolsim, the controller's sizing code on a simulated clock) played the history week and then this day, in its mode with nothing written, its pod starts drawn from kube-e2e's measured ones and scaled to the day's clock; the cluster played the day with the controller seeded with the profile the simulator learned from the history. Agreement is within %.0f %% (relative) of the cluster's figure.\n\n", 100*pbSimAgree)
	w("| | simulator | cluster | simulator / cluster − 1 | |\n|---|---:|---:|---:|---|\n")
	rr := rel(simRate, rs.rate())
	w("| warm-claim rate | %d/%d = %.1f %% | %d/%d = %.1f %% | %+.1f %% | %s |\n", sim.warm, sim.jobs, 100*simRate, rs.warm, rs.n, 100*rs.rate(), 100*rr, agree(rr))
	ri := rel(sim.idleSec, real.meter.total())
	w("| idle pod-seconds (wall) | %.0f | %.0f | %+.1f %% | %s |\n", sim.idleSec, real.meter.total(), 100*ri, agree(ri))
	w("| the 30-job pipeline warm | %d/%d | %d/%d | | |\n", sim.pipeWarm, sim.pipe, rp.warm, rp.n)
	w("| pods made (the simulator: the whole 13 days) | %d | %d | | |\n\n", sim.podsMade, real.meter.created)
}

// pbProfileNote is what the report says of the learned mode's start.
func pbProfileNote(sim *pbSim) string {
	if sim == nil {
		return ""
	}
	var sizes []string
	for _, name := range pbPoolNames() {
		sizes = append(sizes, fmt.Sprintf("%s %d bytes", name, len(sim.profiles[name])))
	}
	return strings.Join(sizes, ", ")
}
