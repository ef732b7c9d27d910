package poolsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/sizing"
)

// The committed trace is what Generate writes for seed 1: the generator
// and the file agree (go test -run TestCommittedTrace -update rewrites it).
func TestCommittedTrace(t *testing.T) {
	cfg := DefaultConfig()
	var b bytes.Buffer
	require.NoError(t, WriteCSV(&b, Generate(1, cfg.Start, cfg.Days)))
	const file = "testdata/trace-seed1.csv"
	if os.Getenv("POOLSIM_UPDATE") != "" {
		require.NoError(t, os.WriteFile(file, b.Bytes(), 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String(), "POOLSIM_UPDATE=1 go test -run TestCommittedTrace ./pools/poolsim rewrites it")
	jobs, err := ReadCSV(bytes.NewReader(want))
	require.NoError(t, err)
	assert.Equal(t, Generate(1, cfg.Start, cfg.Days), jobs)
}

func TestGenerateShape(t *testing.T) {
	cfg := DefaultConfig()
	jobs := Generate(7, cfg.Start, cfg.Days)
	byKind := map[string]int{}
	for _, j := range jobs {
		kind, _, _ := strings.Cut(j.Kind, ":")
		byKind[kind]++
		wd := j.At.Weekday()
		if strings.HasPrefix(j.Kind, "pipeline:") {
			assert.NotContains(t, []time.Weekday{time.Saturday, time.Sunday}, wd, "no pipeline on weekends")
		}
		if j.Image == "python" {
			assert.False(t, j.At.Before(cfg.Start.AddDate(0, 0, 2)), "the new image appears on day 3 (a Wednesday)")
		}
	}
	// 11 weekdays of the two daily pipelines (42 jobs), 3 Mondays of 20.
	assert.Equal(t, 11*42+3*20, byKind["pipeline"])
	assert.GreaterOrEqual(t, byKind["burst"], 15*burstMin)
	assert.LessOrEqual(t, byKind["burst"], 15*burstMax)
	assert.Greater(t, byKind["background"], 1000)
}

func TestReadCSVRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"fields":   "2026-11-02T10:00:00.000Z,alpine,60\n",
		"time":     "yesterday,alpine,60,background\n",
		"hold":     "2026-11-02T10:00:00.000Z,alpine,-1,background\n",
		"no image": "2026-11-02T10:00:00.000Z,,60,background\n",
		"order":    "2026-11-02T10:00:01.000Z,alpine,60,background\n2026-11-02T10:00:00.000Z,alpine,60,background\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadCSV(strings.NewReader(text))
			require.Error(t, err)
		})
	}
}

// TestTargets plays traces of 15 days three ways and checks issue 41's
// targets for the controller with nothing written, from day 8 on: a
// warm-claim rate of at least 90 % and at least the fixed pools', at most
// 0.3× their idle pod-seconds, every recurring pipeline at least 0.8 warm
// (the daily ones from day 2), the new image's jobs from its 6th at least
// 90 % warm, at most 1.1 pods made per job. Seeds 1 to 8 were looked at
// while the keep-alive was chosen; 101 to 103 were not, before this test
// was written. The "warm from its 6th job" read strictly (every
// one of the new image's jobs from its 6th) is met on every seed by none
// of the ways tried, the fixed pools included; bench/pools-sim.md plays
// what it would cost.
func TestTargets(t *testing.T) {
	cfg := DefaultConfig()
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 101, 102, 103}
	if testing.Short() || raceEnabled {
		seeds = []uint64{1, 101}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			jobs := Generate(seed, cfg.Start, cfg.Days)
			fixed, err := Play(jobs, Fixed, cfg)
			require.NoError(t, err)
			learned, err := Play(jobs, Learned, cfg)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, learned.WarmRate(), 0.90, "warm-claim rate")
			assert.GreaterOrEqual(t, learned.WarmRate(), fixed.WarmRate(), "warm-claim rate against the fixed pools'")
			assert.LessOrEqual(t, learned.IdlePodSeconds, 0.3*fixed.IdlePodSeconds, "idle pod-seconds against the fixed pools'")
			require.Len(t, learned.Pipelines, len(Pipelines))
			for name, c := range learned.Pipelines {
				assert.GreaterOrEqual(t, c.Rate(), 0.8, "pipeline %s: %d/%d warm", name, c.Warm, c.Jobs)
			}
			assert.Equal(t, 1, learned.PoolsFound, "the new image's pool is found")
			// "Warm from its 6th job", read as its jobs from the 6th as warm
			// as all jobs are asked to be; every one of them warm is not
			// met by the fixed pools either (bench/pools-sim.md).
			ni := NewImageFrom(learned.NewImage, 6)
			assert.GreaterOrEqual(t, ni.Rate(), 0.9, "the new image from its 6th job: %d/%d warm", ni.Warm, ni.Jobs)
			assert.LessOrEqual(t, float64(learned.PodsMade), 1.1*float64(len(jobs)), "pods made against the jobs")
			t.Logf("warm %.3f (fixed %.3f), idle %.2f×, pods made %.2f× the jobs, the new image's jobs from its 6th %.2f warm",
				learned.WarmRate(), fixed.WarmRate(), learned.IdlePodSeconds/fixed.IdlePodSeconds,
				float64(learned.PodsMade)/float64(len(jobs)), NewImageFrom(learned.NewImage, 6).Rate())
		})
	}
}

// A fixed pool of two never scales and makes one pod per job, and one
// for each pod that reached its idle deadline unclaimed (the chart's
// --idle-timeout: through a night, a fixed pool's pods are made again).
func TestFixedPoolsMakeOnePodPerJob(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Days = 3
	jobs := Generate(1, cfg.Start, cfg.Days)
	r, err := Play(jobs, Fixed, cfg)
	require.NoError(t, err)
	assert.Zero(t, r.ScaleUps+r.ScaleDowns)
	// Each job: a claim (its pod replaced) or a cold pod; plus the pools'
	// first pods (the new image's pool is written on day 3).
	pools := 0
	for _, l := range Loads {
		if l.From < cfg.Days {
			pools++
		}
	}
	assert.Positive(t, r.SelfDeleted, "the nights are longer than the idle deadline")
	assert.Equal(t, len(jobs)+FixedSize*pools+r.SelfDeleted, r.PodsMade)
	cfg.IdleTimeout = 0
	r, err = Play(jobs, Fixed, cfg)
	require.NoError(t, err)
	assert.Zero(t, r.SelfDeleted)
	assert.Equal(t, len(jobs)+FixedSize*pools, r.PodsMade, "without an idle deadline")
}

// The series' means add up to the integrals: a night without events is
// spread over its buckets, not put in the first.
func TestSeriesMatchIdlePodSeconds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Days, cfg.From = 3, 0
	r, err := Play(Generate(1, cfg.Start, cfg.Days), Fixed, cfg)
	require.NoError(t, err)
	sum := 0.0
	for _, s := range r.Series {
		sum += s.Idle * cfg.Bucket.Seconds()
		assert.LessOrEqual(t, s.Idle, float64(FixedSize*len(Loads)), "at %s", s.At)
	}
	assert.InDelta(t, r.IdlePodSeconds, sum, 1)
}

// Config.Pools writes just those pools; Config.WallScale stretches the
// starts; Result.Profiles is what was learned by Config.From and reads
// back as a profile that expects the daily pipeline.
func TestPlayPoolsScaleProfiles(t *testing.T) {
	start := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) // a Monday
	var jobs []Job
	for day := range 8 {
		at := start.AddDate(0, 0, day).Add(11 * time.Hour)
		for i := range 10 {
			jobs = append(jobs, Job{At: at.Add(time.Duration(i) * 100 * time.Millisecond), Image: "golang", Hold: 5 * time.Minute, Kind: "pipeline:test"})
		}
	}
	cfg := Config{Start: start, Days: 8, From: 7, Budget: 20, WarmWait: time.Second, Resync: 10 * time.Second,
		Batch: 200 * time.Millisecond, Seed: 1, Bucket: time.Hour, Pools: []string{"golang", "ruby"}}
	res, err := Play(jobs, Learned, cfg)
	require.NoError(t, err)
	require.Len(t, res.Profiles, 2, "a profile per pool written, and only those")
	p, err := sizing.UnmarshalProfile(res.Profiles["golang"])
	require.NoError(t, err)
	assert.Equal(t, start.AddDate(0, 0, 7), p.Through(), "learned up to Config.From")
	f := p.Forecast(start.AddDate(0, 0, 7).Add(10*time.Hour+55*time.Minute), time.Minute)
	assert.GreaterOrEqual(t, f.Pods, 8, "the profile expects the 11:00 pipeline")
	assert.Equal(t, 10, res.Jobs)
	assert.Equal(t, 10, res.Warm, "warm from the profile on day 8")

	// The profiles seed a simulation of day 8 alone, as a controller that
	// reads them back from its pools: warm from the first job.
	day8 := cfg
	day8.Start, day8.Days, day8.From, day8.Profiles = start.AddDate(0, 0, 7), 1, 0, res.Profiles
	seeded, err := Play(jobs[70:], Learned, day8)
	require.NoError(t, err)
	assert.Equal(t, 10, seeded.Warm, "warm from the seeded profile")
	day8.Profiles = map[string]string{"golang": "not a profile"}
	_, err = Play(jobs[70:], Learned, day8)
	assert.ErrorContains(t, err, "profile of golang")

	// Pod starts of a median of a minute, 20× kube-e2e's: the pods spend
	// that much longer starting, and the profile starts them that much
	// earlier (a lead of one pod start): still warm.
	slowCfg := cfg
	slowCfg.PodStartMedian, slowCfg.PodStartP95 = time.Minute, 2*time.Minute
	slowStarts, err := Play(jobs, Learned, slowCfg)
	require.NoError(t, err)
	assert.Greater(t, slowStarts.StartingPodSeconds, 10*res.StartingPodSeconds)
	assert.Equal(t, 10, slowStarts.Warm)

	// Pod starts 100× longer (5 minutes median): the pipeline's pods are
	// not Ready in time on its first day, on any.
	cfg.WallScale = 100
	slow, err := Play(jobs, Learned, cfg)
	require.NoError(t, err)
	assert.Less(t, slow.Warm, res.Warm)
}

// Config.Unrefilled, the controller's claim path since decision 0010: a
// claim above the floor makes no replacement and a pod above the decision
// waits for a claim up to SurplusIdle, so the same jobs take fewer pods
// than with a ReplicaSet's refill and fewer are removed unused; the pods
// kept stay within the budget.
func TestUnrefilledMakesFewerPods(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Days, cfg.From = 5, 0
	jobs := Generate(1, cfg.Start, cfg.Days)
	before := cfg
	before.Unrefilled, before.SurplusIdle = false, 0
	refilled, err := Play(jobs, Learned, before)
	require.NoError(t, err)
	w := cfg
	require.True(t, w.Unrefilled)
	unrefilled, err := Play(jobs, Learned, w)
	require.NoError(t, err)
	assert.Less(t, unrefilled.PodsMade, refilled.PodsMade)
	assert.Less(t, unrefilled.Removed, refilled.Removed)
	assert.GreaterOrEqual(t, unrefilled.WarmRate(), 0.9)
	assert.GreaterOrEqual(t, unrefilled.PodsMade, unrefilled.Warm, "each warm claim took a pod made for the pool")

	w.Budget = 3
	tight, err := Play(jobs, Learned, w)
	require.NoError(t, err)
	for _, s := range tight.Series {
		assert.LessOrEqual(t, s.Idle, float64(w.Budget), "at %s: the surplus kept fits in the budget", s.At)
	}
}

// Config.FoundPolicy plays a found pool with another policy than the
// controller's: with one idle pod kept at all times, a pod is Ready
// through each night and the idle pod-seconds are more (and on these six
// days of seed 1, no fewer of the new image's jobs are warm; on seed 4's
// fifteen days more are cold, bench/pools-sim.md); a policy that does not
// parse is refused before anything is played.
func TestFoundPolicy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Days, cfg.From = 6, 0
	jobs := Generate(1, cfg.Start, cfg.Days)
	found, err := Play(jobs, Learned, cfg)
	require.NoError(t, err)
	require.Equal(t, 1, found.PoolsFound)
	kept := cfg
	kept.FoundPolicy = "- idle_count: 1\n  idle_time: 30m"
	one, err := Play(jobs, Learned, kept)
	require.NoError(t, err)
	require.Equal(t, 1, one.PoolsFound)
	require.Equal(t, len(found.NewImage), len(one.NewImage))
	assert.GreaterOrEqual(t, NewImageFrom(one.NewImage, 6).Warm, NewImageFrom(found.NewImage, 6).Warm)
	assert.Greater(t, one.IdlePodSeconds, found.IdlePodSeconds, "a pod kept through the nights")
	// Through each night after it was found, the kept pod is the only
	// idle one (the other pools fall to zero); every 2 h it reaches its
	// idle deadline and its replacement starts for a few seconds.
	night := 0
	for _, s := range one.Series {
		if h := s.At.Hour(); s.At.After(found.NewImageAt[0].AddDate(0, 0, 1)) && h >= 1 && h < 5 {
			night++
			assert.InDelta(t, 1, s.Idle, 0.05, "at %s", s.At)
		}
	}
	assert.Positive(t, night)

	kept.FoundPolicy = "- idle_count: many"
	_, err = Play(jobs, Learned, kept)
	assert.ErrorContains(t, err, "found pools' policy")
}

// Config.PodStartPerStarting: thirty cold pods made at once start in
// turn, each later by what the pods already starting add (every start 3 s
// here, plus 1 s per pod ahead of it: 3 s to 32 s), and pods made once
// those are Ready start in 3 s again.
func TestPodStartPerStarting(t *testing.T) {
	start := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var jobs []Job
	for _, at := range []time.Duration{11 * time.Hour, 12 * time.Hour} {
		for range 30 {
			jobs = append(jobs, Job{At: start.Add(at), Image: "golang", Hold: time.Minute})
		}
	}
	cfg := Config{Start: start, Days: 1, Budget: 20, WarmWait: time.Second, Resync: 10 * time.Second,
		Batch: 200 * time.Millisecond, Seed: 1, Bucket: time.Hour, Pools: []string{"ruby"},
		PodStartMedian: 3 * time.Second}
	alone, err := Play(jobs, Fixed, cfg)
	require.NoError(t, err)
	require.Equal(t, 60, alone.ColdStarts)
	assert.InDelta(t, 60*3.0, alone.ColdWaitSeconds, 0.01)
	cfg.PodStartPerStarting = time.Second
	crowd, err := Play(jobs, Fixed, cfg)
	require.NoError(t, err)
	assert.InDelta(t, 2*(30*3.0+29*30/2), crowd.ColdWaitSeconds, 0.01, "each burst: 3 s each and 0+1+…+29 s of the pods ahead")
}

// FitStarts finds the share of each pod starting ahead in a crowd's
// starts, and the rest of each start as the log-normal's; a pod deleted
// before Ready slowed those made while it started, and a cluster whose
// starts do not grow with the crowd gets no share.
func TestFitStarts(t *testing.T) {
	t0 := time.Date(2026, 11, 2, 11, 0, 0, 0, time.UTC)
	var crowd []StartSample
	// Ten pods made 10 ms apart, each 2 s plus 0.5 s per pod ahead.
	for i := range 10 {
		made := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		crowd = append(crowd, StartSample{Made: made, Ready: made.Add(2*time.Second + time.Duration(i)*500*time.Millisecond)})
	}
	// One made later, alone: 2 s.
	alone := t0.Add(time.Minute)
	crowd = append(crowd, StartSample{Made: alone, Ready: alone.Add(2 * time.Second)})
	m := FitStarts(crowd)
	assert.Equal(t, 11, m.Pods)
	assert.InDelta(t, 0.5, m.PerStarting.Seconds(), 0.001)
	assert.InDelta(t, 2, m.Median.Seconds(), 0.01)
	assert.InDelta(t, 2, m.P95.Seconds(), 0.01)

	// A pod deleted while starting counts for those made before it went.
	gone := []StartSample{
		{Made: t0, Gone: t0.Add(time.Second)},
		{Made: t0.Add(100 * time.Millisecond), Ready: t0.Add(3100 * time.Millisecond)},
		{Made: t0.Add(4 * time.Second), Ready: t0.Add(6 * time.Second)},
	}
	m = FitStarts(gone)
	assert.Equal(t, 2, m.Pods)
	assert.InDelta(t, 1, m.PerStarting.Seconds(), 0.001, "3 s with one ahead, 2 s alone")

	var flat []StartSample
	for i := range 5 {
		made := t0.Add(time.Duration(i) * time.Millisecond)
		flat = append(flat, StartSample{Made: made, Ready: made.Add(time.Duration(5-i) * time.Second)})
	}
	m = FitStarts(flat)
	assert.Zero(t, m.PerStarting, "starts that shrink with the crowd: no share")
	assert.Equal(t, 3*time.Second, m.Median)
	assert.Zero(t, FitStarts(nil).Pods)
}

// Config.Log tells the world's story in lines a reader sets beside a
// cluster's: each pod's leaving once, by how it left, adding up to the
// Result's counts, and each change of a decided size, in time order.
// Fixed pools have no decisions, and their pods reach the idle deadline
// at night; the controller's go by claims and removals.
func TestLogSaysWhatTheWorldDid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Days, cfg.From = 4, 0
	jobs := Generate(1, cfg.Start, cfg.Days)
	seen := map[PodGone]int{}
	for _, mode := range []Mode{Fixed, Learned} {
		var buf bytes.Buffer
		cfg.Log = slog.New(slog.NewJSONHandler(&buf, nil))
		res, err := Play(jobs, mode, cfg)
		require.NoError(t, err)
		gone := map[PodGone]int{}
		sized := 0
		var last time.Time
		dec := json.NewDecoder(&buf)
		for dec.More() {
			var line struct {
				Msg, Pool, How, Ready string
				At                    time.Time
				From, To              int
			}
			require.NoError(t, dec.Decode(&line))
			assert.False(t, line.At.Before(last), "lines in time order")
			last = line.At
			assert.NotEmpty(t, line.Pool)
			switch line.Msg {
			case "pod gone":
				gone[PodGone(line.How)]++
				seen[PodGone(line.How)]++
				if line.How == string(GoneClaimedStarting) {
					assert.Equal(t, "-", line.Ready, "a pod claimed starting was never Ready in its pool")
				}
			case "pool sized":
				sized++
				assert.NotEqual(t, line.From, line.To)
			default:
				t.Fatalf("unexpected line %q", line.Msg)
			}
		}
		assert.Equal(t, res.Warm, gone[GoneClaimed], "%s", mode)
		assert.Equal(t, res.TookStarting, gone[GoneClaimedStarting], "%s", mode)
		assert.Equal(t, res.Removed, gone[GoneRemoved], "%s", mode)
		assert.Equal(t, res.SelfDeleted, gone[GoneIdleDeadline], "%s", mode)
		assert.Equal(t, mode != Fixed, sized > 0, "%s: decisions", mode)
	}
	for _, how := range []PodGone{GoneClaimed, GoneClaimedStarting, GoneRemoved, GoneIdleDeadline} {
		assert.Positive(t, seen[how], "the trace makes pods go by %s", how)
	}
}

// Config.ColdClaimLag and ColdClaimPerPending: cold claims due together
// (eight jobs whose warm wait ended at once) come one after another, the
// k-th (0-based) after the lag and k times the per-pending share, each
// scaled by WallScale; without them all come as the warm wait ends.
func TestColdClaimLag(t *testing.T) {
	start := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	at := start.Add(10 * time.Hour)
	var jobs []Job
	for range 10 {
		jobs = append(jobs, Job{At: at, Image: "golang", Hold: time.Hour})
	}
	claims := func(lag, per time.Duration, scale float64) ([]time.Duration, float64) {
		var buf bytes.Buffer
		cfg := Config{Start: start, Days: 1, Budget: 20, WarmWait: time.Second, Resync: 10 * time.Second,
			Batch: 200 * time.Millisecond, Seed: 1, Bucket: time.Hour, Pools: []string{"golang"},
			PodStartMedian: 3 * time.Second, ColdClaimLag: lag, ColdClaimPerPending: per, WallScale: scale,
			Log: slog.New(slog.NewJSONHandler(&buf, nil))}
		res, err := Play(jobs, Fixed, cfg)
		require.NoError(t, err)
		require.Equal(t, FixedSize, res.Warm)
		var out []time.Duration
		dec := json.NewDecoder(&buf)
		for dec.More() {
			var line struct {
				Msg, How string
				At       time.Time
			}
			require.NoError(t, dec.Decode(&line))
			if line.How == string(GoneClaimedStarting) {
				out = append(out, line.At.Sub(at))
			}
		}
		require.Len(t, out, len(jobs)-FixedSize, "each cold job took a starting pod")
		return out, res.ColdWaitSeconds
	}
	at0, _ := claims(0, 0, 0)
	for _, d := range at0 {
		assert.Equal(t, time.Second, d, "as the warm wait ends")
	}
	lagged, waited := claims(500*time.Millisecond, time.Second, 0)
	var fit []ClaimSample
	least := 0.0
	for k, d := range lagged {
		assert.Equal(t, time.Second+500*time.Millisecond+time.Duration(k)*time.Second, d, "claim %d", k)
		fit = append(fit, ClaimSample{Due: at.Add(time.Second), Claimed: at.Add(d)})
		least += d.Seconds()
	}
	// Each cold job waited from its arrival to its claim at least (its
	// pod was still starting then), the lag included.
	assert.GreaterOrEqual(t, waited, least)
	// The claims fit back to the model, though all were due at once.
	m := FitClaims(fit)
	assert.InDelta(t, 0.5, m.Lag.Seconds(), 1e-9)
	assert.InDelta(t, 1, m.PerPending.Seconds(), 1e-9)
	scaled, _ := claims(500*time.Millisecond, time.Second, 2)
	for k, d := range scaled {
		assert.Equal(t, time.Second+2*(500*time.Millisecond+time.Duration(k)*time.Second), d, "claim %d, scaled", k)
	}
}

// FitClaims finds a claim's lag and what each claim pending before it
// adds, from claims due 10 ms apart that came 0.3 s plus 0.1 s for each
// one ahead after their due, and one alone later; a claim before its due
// (clocks apart) is left out, and claims that do not wait on each other
// give no per-pending share.
func TestFitClaims(t *testing.T) {
	t0 := time.Date(2026, 11, 2, 11, 0, 0, 0, time.UTC)
	var s []ClaimSample
	for i := range 12 {
		due := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		s = append(s, ClaimSample{Due: due, Claimed: due.Add(300*time.Millisecond + time.Duration(i)*100*time.Millisecond)})
	}
	alone := t0.Add(time.Minute)
	s = append(s, ClaimSample{Due: alone, Claimed: alone.Add(300 * time.Millisecond)}, ClaimSample{Due: alone.Add(time.Minute), Claimed: alone})
	m := FitClaims(s)
	assert.Equal(t, 13, m.Claims)
	assert.InDelta(t, 0.1, m.PerPending.Seconds(), 0.001)
	assert.InDelta(t, 0.3, m.Lag.Seconds(), 0.001)
	var cfg Config
	m.Apply(&cfg)
	assert.Equal(t, m.Lag, cfg.ColdClaimLag)
	assert.Equal(t, m.PerPending, cfg.ColdClaimPerPending)

	var apart []ClaimSample
	for i := range 5 {
		due := t0.Add(time.Duration(i) * time.Minute)
		apart = append(apart, ClaimSample{Due: due, Claimed: due.Add(time.Duration(200+10*i) * time.Millisecond)})
	}
	m = FitClaims(apart)
	assert.Zero(t, m.PerPending)
	assert.InDelta(t, 0.22, m.Lag.Seconds(), 0.001, "the mean lag")
	assert.Zero(t, FitClaims(nil).Claims)

	// Delays that a free line would meet at a negative lag (0.2 s a
	// claim pending, −0.5 s alone): no lag, and the line through the
	// origin.
	var steep []ClaimSample
	for i := range 4 {
		due := t0.Add(time.Duration(i) * time.Millisecond)
		steep = append(steep, ClaimSample{Due: due, Claimed: due.Add(time.Duration(max(200*(i+1)-500, 10)) * time.Millisecond)})
	}
	m = FitClaims(steep)
	assert.Zero(t, m.Lag)
	assert.Positive(t, m.PerPending)
}
