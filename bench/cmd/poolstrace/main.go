// Command poolstrace writes the job-arrival trace of `make bench-pools`
// (bench/pools-trace.csv): a working day of CI jobs on three pools,
// compressed so that one replay on the kube-e2e cluster takes about ten
// minutes. The trace is generated once and committed; this program is how
// it was made, and its test checks that the committed file is still what
// it writes:
//
//	cd bench && go run ./cmd/poolstrace > pools-trace.csv
//	cd bench && go run ./cmd/poolstrace -history > pools-history.csv
//
// The day (Monday 06:00 to Tuesday 06:00, then one hour of a Saturday):
//
//   - three pools with different rates at their peak: alpine 8 jobs an
//     hour (short jobs, lint and the like), golang 4 an hour (tests), node
//     2 an hour (builds);
//   - night until 07:30, a morning ramp to the peak at 10:00, a lunch dip
//     (60 %), the afternoon, 70 % from 16:00, down to nothing by 19:00;
//   - one pipeline of 30 golang jobs at 11:00, all arriving within 2 s of
//     replay (5 minutes of the day);
//   - an idle night with one scheduled job at 02:00;
//   - a weekend hour, Saturday 10:00 to 11:00: two pushes, of 3 and 2 jobs.
//
// Arrival times are compressed by Compression (a day's hour is 24 s of
// replay); job durations are not: they are what a job holds its pod for
// in the replay, seconds to a minute, as the pods' start times on the
// cluster are not compressed either. Arrivals are a Poisson process
// thinned by the day's rate profile, durations log-normal per pool, both
// from a fixed seed and computed from raw 64-bit draws (no library
// distribution whose algorithm might change), so the output is the same
// on every machine and Go version.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"time"
)

// Compression is how many seconds of the day one second of replay stands
// for.
const Compression = 150

// weekendAt is the replay time of Saturday 09:30: right after Tuesday
// 06:00 (the days between are not replayed; the pools are idle in them).
const weekendAt = 24 * 3600 / Compression

// pool is one pool's load: its peak rate and its jobs' durations.
type pool struct {
	name string
	// perHour is the arrival rate at the day's peak, jobs per hour of the day.
	perHour float64
	// median, lo, hi: job duration in replay seconds (log-normal with
	// sigma 0.5 around median, clipped to [lo, hi]).
	median, lo, hi float64
}

var pools = []pool{
	{"alpine", 8, 8, 3, 20},
	{"golang", 4, 25, 10, 60},
	{"node", 2, 15, 5, 40},
}

// segment is one part of the day, linear from f0 to f1 of the peak rate,
// from hour h0 to h1 of Monday (24 and more: Tuesday).
type segment struct {
	h0, h1, f0, f1 float64
	name           string
}

var profile = []segment{
	{6, 7.5, 0, 0, "night (Mon 06:00-07:30)"},
	{7.5, 10, 0, 1, "morning ramp (07:30-10:00)"},
	{10, 12, 1, 1, "morning with the pipeline at 11:00 (10:00-12:00)"},
	{12, 13, 0.6, 0.6, "lunch (12:00-13:00)"},
	{13, 16, 1, 1, "afternoon (13:00-16:00)"},
	{16, 17.5, 0.7, 0.7, "late afternoon (16:00-17:30)"},
	{17.5, 19, 0.7, 0, "evening (17:30-19:00)"},
	{19, 30, 0, 0, "night with one job at 02:00 (19:00-06:00)"},
}

// rate is the fraction of the peak rate at hour h of Monday.
func rate(h float64) float64 {
	for _, s := range profile {
		if h >= s.h0 && h < s.h1 {
			if s.h1 == s.h0 {
				return s.f0
			}
			// The ramp's f goes from f0 at h0 to f1 at h1.
			return s.f0 + (s.f1-s.f0)*(h-s.h0)/(s.h1-s.h0)
		}
	}
	return 0
}

// job is one row of the trace.
type job struct {
	at   float64 // replay seconds from the start
	day  string  // the day's time it stands for
	pool string
	hold float64 // replay seconds the job holds its pod
	kind string  // day, pipeline, nightly, weekend
}

// draws turns a PCG's raw output into the few distributions the trace
// needs, with formulas written here.
type draws struct{ src *rand.PCG }

// unit is uniform in (0, 1): 53 random bits, never 0.
func (d draws) unit() float64 {
	return (float64(d.src.Uint64()>>11) + 0.5) / (1 << 53)
}

// exp is exponential with mean 1.
func (d draws) exp() float64 { return -math.Log(d.unit()) }

// normal is standard normal (Box-Muller, one of the pair).
func (d draws) normal() float64 {
	return math.Sqrt(-2*math.Log(d.unit())) * math.Cos(2*math.Pi*d.unit())
}

// hold is a job duration of p.
func (d draws) hold(p pool) float64 {
	v := p.median * math.Exp(0.5*d.normal())
	return math.Round(min(max(v, p.lo), p.hi)*10) / 10
}

// dayTime names replay second at of the Monday part ("Mon 08:13:24").
func dayTime(at float64) string {
	s := int(math.Round(at*Compression)) + 6*3600
	day := "Mon"
	if s >= 24*3600 {
		day, s = "Tue", s-24*3600
	}
	return fmt.Sprintf("%s %02d:%02d:%02d", day, s/3600, s/60%60, s%60)
}

// weekendTime is the replay time of Saturday hh:mm:ss.
func weekendTime(h, m, s int) float64 {
	return weekendAt + float64((h*3600+m*60+s)-(9*3600+30*60))/Compression
}

// expected is the mean number of day jobs of p: its peak rate times the
// profile's hours at the peak (8.425).
func expected(p pool) float64 {
	hours := 0.0
	for _, s := range profile {
		hours += (s.h1 - s.h0) * (s.f0 + s.f1) / 2
	}
	return p.perHour * hours
}

// dayJobs draws p's jobs of the day from seed: a Poisson process at the
// peak rate from 07:30 to 19:00, each arrival kept with the profile's
// probability at its time (thinning).
func dayJobs(p pool, seed uint64) []job {
	var jobs []job
	d := draws{rand.NewPCG(20261202, seed)}
	peakPerSecond := p.perHour / 3600 // per second of the day
	for t := 7.5 * 3600; ; {
		t += d.exp() / peakPerSecond
		if t >= 19*3600 {
			return jobs
		}
		keep := d.unit() < rate(t/3600)
		hold := d.hold(p)
		if keep {
			at := (t - 6*3600) / Compression
			jobs = append(jobs, job{at: at, day: dayTime(at), pool: p.name, hold: hold, kind: "day"})
		}
	}
}

// generate makes the trace's jobs, sorted by arrival.
func generate() []job {
	var jobs []job
	// Each pool's day jobs come from the first seed (1, 2, ...) that gives
	// a number of jobs within 10 % of the expected one: a day that is
	// typical of its rates, not a lucky or unlucky draw (a seed of the
	// first try left the node pool 7 jobs where 17 are expected).
	for i, p := range pools {
		for seed := uint64(1); ; seed++ {
			js := dayJobs(p, uint64(i)<<32|seed)
			if math.Abs(float64(len(js))-expected(p)) <= 0.1*expected(p) {
				jobs = append(jobs, js...)
				break
			}
		}
	}
	// The pipeline: 30 golang test jobs at 11:00, arriving within 2 s.
	d := draws{rand.NewPCG(20261202, 100)}
	start := float64(11-6) * 3600 / Compression
	for range 30 {
		at := start + 2*d.unit()
		jobs = append(jobs, job{at: at, day: dayTime(at), pool: "golang", hold: math.Round((15+45*d.unit())*10) / 10, kind: "pipeline"})
	}
	// The nightly job at 02:00.
	at := float64(26-6) * 3600 / Compression
	jobs = append(jobs, job{at: at, day: dayTime(at), pool: "alpine", hold: 15, kind: "nightly"})
	// The weekend hour: a push at 10:12 (lint, test, build) and one at
	// 10:41 (lint, test).
	for _, w := range []struct {
		h, m, s int
		pool    string
		hold    float64
	}{
		{10, 12, 0, "alpine", 6}, {10, 12, 40, "golang", 30}, {10, 13, 10, "node", 20},
		{10, 41, 0, "alpine", 5}, {10, 41, 30, "golang", 28},
	} {
		at := weekendTime(w.h, w.m, w.s)
		jobs = append(jobs, job{at: at, day: fmt.Sprintf("Sat %02d:%02d:%02d", w.h, w.m, w.s), pool: w.pool, hold: w.hold, kind: "weekend"})
	}
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].at < jobs[j].at })
	return jobs
}

// write prints the trace as CSV, with '#' comment lines that say what it
// is and name its segments ("#segment,FROM,TO,NAME" in replay seconds, for
// the benchmark's idle pod-seconds per part of the day).
func write(w io.Writer, jobs []job) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# Job arrivals of make bench-pools: generated by bench/cmd/poolstrace (see its doc comment); do not edit.\n")
	fmt.Fprintf(b, "# A compressed working day: one second of replay is %d seconds of the day (an hour is %g s).\n", Compression, 3600.0/Compression)
	fmt.Fprintf(b, "# Monday 06:00 is replay second 0, Tuesday 06:00 is %d, then Saturday 09:30-11:00 from %d to %g.\n", weekendAt, weekendAt, weekendTime(11, 0, 0))
	fmt.Fprintf(b, "# Columns: id, at_s (replay seconds), day (the time it stands for), pool, hold_s (replay seconds the job holds its pod), kind.\n")
	fmt.Fprintf(b, "# Pools at peak: ")
	for i, p := range pools {
		if i > 0 {
			fmt.Fprintf(b, ", ")
		}
		fmt.Fprintf(b, "%s %g jobs/h (hold median %g s, %g-%g s)", p.name, p.perHour, p.median, p.lo, p.hi)
	}
	fmt.Fprintf(b, ".\n")
	for _, s := range profile {
		fmt.Fprintf(b, "#segment,%g,%g,%s\n", (s.h0-6)*3600/Compression, (s.h1-6)*3600/Compression, s.name)
	}
	fmt.Fprintf(b, "#segment,%d,%g,weekend hour (Sat 09:30-11:00)\n", weekendAt, weekendTime(11, 0, 0))
	fmt.Fprintf(b, "id,at_s,day,pool,hold_s,kind\n")
	for i, j := range jobs {
		fmt.Fprintf(b, "%d,%.3f,%s,%s,%.1f,%s\n", i+1, j.at, j.day, j.pool, j.hold, j.kind)
	}
	return b.Flush()
}

// The history (-history, bench/pools-history.csv) is the week before the
// trace's Monday, 2026-11-23 to 29, drawn the same way with other seeds,
// on the day's clock (it is simulated, not replayed): each weekday's jobs
// from 07:30 to 19:00, its pipeline at 11:00 and its nightly job at 02:00
// of the next day, and two pushes on the Saturday between 10:00 and 11:00.
// make bench-pools plays it through the simulator (pools/poolsim) to learn
// the profile its fourth mode's controller starts from: the week the
// controller would have seen before that Monday.

// historyStart is the history's first day, the week before the trace's
// Monday (2026-11-30).
var historyStart = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

// dayJob is one row of the history: at on the day's clock; hold in replay
// seconds, as the trace's.
type dayJob struct {
	at   time.Time
	pool string
	hold float64
	kind string
}

// history makes the history's jobs, sorted by arrival.
func history() []dayJob {
	var jobs []dayJob
	on := func(day int, replay float64) time.Time {
		// replay seconds from 06:00 of the day, as dayJobs counts them
		return historyStart.AddDate(0, 0, day).Add(6*time.Hour + time.Duration(replay*Compression*float64(time.Second))).Round(time.Second)
	}
	for day := range 5 { // Monday to Friday
		for i, p := range pools {
			for seed := uint64(1); ; seed++ {
				js := dayJobs(p, uint64(i)<<32|uint64(day+1)<<16|seed)
				if math.Abs(float64(len(js))-expected(p)) <= 0.1*expected(p) {
					for _, j := range js {
						jobs = append(jobs, dayJob{on(day, j.at), p.name, j.hold, "day"})
					}
					break
				}
			}
		}
		d := draws{rand.NewPCG(20261123, uint64(day))}
		for range 30 {
			jobs = append(jobs, dayJob{on(day, float64(11-6)*3600/Compression+2*d.unit()), "golang", math.Round((15+45*d.unit())*10) / 10, "pipeline"})
		}
		jobs = append(jobs, dayJob{on(day, float64(26-6)*3600/Compression), "alpine", 15, "nightly"})
	}
	d := draws{rand.NewPCG(20261123, 5)}
	for range 2 { // Saturday: a push of lint, test and build, somewhere in 10:00-11:00
		at := historyStart.AddDate(0, 0, 5).Add(10*time.Hour + time.Duration(d.unit()*55*float64(time.Minute))).Round(time.Second)
		jobs = append(jobs, dayJob{at, "alpine", 6, "weekend"}, dayJob{at.Add(40 * time.Second), "golang", 30, "weekend"},
			dayJob{at.Add(70 * time.Second), "node", 20, "weekend"})
	}
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].at.Before(jobs[j].at) })
	return jobs
}

// writeHistory prints the history as CSV.
func writeHistory(w io.Writer, jobs []dayJob) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# The week before bench/pools-trace.csv's Monday: generated by bench/cmd/poolstrace -history (see its doc comment); do not edit.\n")
	fmt.Fprintf(b, "# On the day's clock (simulated by make bench-pools, not replayed): at is UTC; hold_s is replay seconds, as the trace's.\n")
	fmt.Fprintf(b, "at,pool,hold_s,kind\n")
	for _, j := range jobs {
		fmt.Fprintf(b, "%s,%s,%.1f,%s\n", j.at.Format(time.RFC3339), j.pool, j.hold, j.kind)
	}
	return b.Flush()
}

func main() {
	hist := flag.Bool("history", false, "write the week before the trace (bench/pools-history.csv), not the trace")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "poolstrace: unexpected argument %q: it takes only -history\n", flag.Arg(0))
		os.Exit(2)
	}
	if *hist {
		if err := writeHistory(os.Stdout, history()); err != nil {
			fmt.Fprintln(os.Stderr, "poolstrace:", err)
			os.Exit(1)
		}
		return
	}
	if err := write(os.Stdout, generate()); err != nil {
		fmt.Fprintln(os.Stderr, "poolstrace:", err)
		os.Exit(1)
	}
}
