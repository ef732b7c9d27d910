// Package poolsim plays a trace of CI jobs of many days through warmpod's
// sizing code on a simulated clock, in minutes, to show how pools that
// size themselves compare with pools written by hand (issue 41): fixed
// pools, the controller with periods written for the trace, and the
// controller with nothing written. The controller's decisions are the
// package sizing's own (Decide, Share, Profile, Discovery); the world
// around them (ReplicaSets, kubelet, drivers) is modelled here, with pod
// start times drawn from those measured on kube-e2e.
package poolsim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Job is one arrival of a trace.
type Job struct {
	// At is when the job reaches the runner and its driver looks for a pod.
	At time.Time
	// Image is the job's image: the pool that would serve it.
	Image string
	// Hold is how long the job holds its pod.
	Hold time.Duration
	// Kind says where it comes from: "background", "burst" (the day's
	// unannounced burst), or "pipeline:NAME" (a recurring pipeline).
	Kind string
}

// Pipeline is a recurring pipeline of the trace: Jobs jobs of Image at
// Hour:Minute UTC on the days Days (time.Monday …), arriving within Spread
// of a start that is up to Lag late.
type Pipeline struct {
	Name         string
	Image        string
	Hour, Minute int
	Days         []time.Weekday
	Jobs         int
}

// Load is one image's background load: PerHour jobs an hour at the day's
// peak (weekdays), the day's profile scaling it, and HoldMedian the median
// time a job holds its pod. From is the day (0 = the trace's first) the
// image first appears.
type Load struct {
	Image      string
	PerHour    float64
	HoldMedian time.Duration
	From       int
}

// The trace's shape, fixed before any tuning of the sizing (issue 41): the
// peak rates are bench/cmd/poolstrace's (make bench-pools' working day),
// the pipelines are the kind of scheduled pipelines a team has (a daily
// test suite, a daily build, a weekly job), the new image is the one a
// team adopts in the middle of a week.
var (
	Loads = []Load{
		{Image: "alpine", PerHour: 8, HoldMedian: 3 * time.Minute},
		{Image: "golang", PerHour: 4, HoldMedian: 8 * time.Minute},
		{Image: "node", PerHour: 2, HoldMedian: 5 * time.Minute},
		{Image: "python", PerHour: 3, HoldMedian: 4 * time.Minute, From: 2},
	}
	Pipelines = []Pipeline{
		{Name: "golang-tests", Image: "golang", Hour: 11, Days: weekdays, Jobs: 30},
		{Name: "node-build", Image: "node", Hour: 9, Minute: 30, Days: weekdays, Jobs: 12},
		{Name: "alpine-weekly", Image: "alpine", Hour: 14, Days: []time.Weekday{time.Monday}, Jobs: 20},
	}
	weekdays = []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}
)

const (
	// pipelineSpread is how long a pipeline's jobs take to reach the
	// runner, and pipelineLag how late its start may be (the CI server's
	// scheduler).
	pipelineSpread = time.Minute
	pipelineLag    = 2 * time.Minute
	// burstMin and burstMax bound the size of the day's unannounced burst
	// (a merge train, a retried pipeline), which arrives within
	// pipelineSpread at a uniform time of 08:00–18:00 on a uniform image
	// among those that exist that day.
	burstMin, burstMax = 8, 20
	// weekendPerHour is the background of a weekend day, all images
	// together, 10:00–16:00.
	weekendPerHour = 1.0
)

// dayRate is the fraction of the peak rate at hour h (0–24) of a weekday:
// nothing before 07:30, a ramp to the peak at 10:00, a lunch dip, 70 %
// from 16:00, nothing after 19:00 (bench/cmd/poolstrace's day).
func dayRate(h float64) float64 {
	switch {
	case h < 7.5 || h >= 19:
		return 0
	case h < 10:
		return (h - 7.5) / 2.5
	case h >= 12 && h < 13:
		return 0.6
	case h < 16:
		return 1
	case h < 17.5:
		return 0.7
	default:
		return 0.7 * (19 - h) / 1.5
	}
}

// draws turns a PCG's output into the few distributions needed, with the
// formulas written here, so a seed gives the same trace on every Go.
type draws struct{ src *rand.PCG }

func (d draws) unit() float64 { return (float64(d.src.Uint64()>>11) + 0.5) / (1 << 53) }
func (d draws) exp() float64  { return -math.Log(d.unit()) }
func (d draws) normal() float64 {
	return math.Sqrt(-2*math.Log(d.unit())) * math.Cos(2*math.Pi*d.unit())
}

// hold is a job's hold: log-normal (sigma 0.5) around median, in [30 s, 30 min].
func (d draws) hold(median time.Duration) time.Duration {
	v := float64(median) * math.Exp(0.5*d.normal())
	return time.Duration(min(max(v, float64(30*time.Second)), float64(30*time.Minute))).Round(time.Second)
}

// Generate makes a trace of days days from start (a Monday 00:00 UTC) with
// seed: each image's background (a Poisson process thinned by dayRate on
// weekdays, weekendPerHour shared on weekends), the pipelines on their
// days, and one unannounced burst every day. Sorted by arrival.
func Generate(seed uint64, start time.Time, days int) []Job {
	d := draws{rand.NewPCG(seed, 0x7761726d706f6f6c)}
	var jobs []Job
	for day := range days {
		midnight := start.AddDate(0, 0, day)
		weekend := midnight.Weekday() == time.Saturday || midnight.Weekday() == time.Sunday
		var images []Load
		for _, l := range Loads {
			if day >= l.From {
				images = append(images, l)
			}
		}
		if weekend {
			for t := 10 * time.Hour; ; {
				t += time.Duration(d.exp() / weekendPerHour * float64(time.Hour))
				if t >= 16*time.Hour {
					break
				}
				l := images[int(d.unit()*float64(len(images)))]
				jobs = append(jobs, Job{At: midnight.Add(t), Image: l.Image, Hold: d.hold(l.HoldMedian), Kind: "background"})
			}
		} else {
			for _, l := range images {
				for t := 7*time.Hour + 30*time.Minute; ; {
					t += time.Duration(d.exp() / l.PerHour * float64(time.Hour))
					if t >= 19*time.Hour {
						break
					}
					keep := d.unit() < dayRate(t.Hours())
					hold := d.hold(l.HoldMedian)
					if keep {
						jobs = append(jobs, Job{At: midnight.Add(t), Image: l.Image, Hold: hold, Kind: "background"})
					}
				}
			}
			for _, p := range Pipelines {
				if !slices.Contains(p.Days, midnight.Weekday()) {
					continue
				}
				at := midnight.Add(time.Duration(p.Hour)*time.Hour + time.Duration(p.Minute)*time.Minute +
					time.Duration(d.unit()*float64(pipelineLag)))
				median := holdOf(p.Image)
				for range p.Jobs {
					jobs = append(jobs, Job{At: at.Add(time.Duration(d.unit() * float64(pipelineSpread))).Round(time.Millisecond),
						Image: p.Image, Hold: d.hold(median), Kind: "pipeline:" + p.Name})
				}
			}
		}
		// The day's unannounced burst.
		l := images[int(d.unit()*float64(len(images)))]
		at := midnight.Add(8*time.Hour + time.Duration(d.unit()*float64(10*time.Hour)))
		n := burstMin + int(d.unit()*float64(burstMax-burstMin+1))
		for range n {
			jobs = append(jobs, Job{At: at.Add(time.Duration(d.unit() * float64(pipelineSpread))).Round(time.Millisecond),
				Image: l.Image, Hold: d.hold(l.HoldMedian), Kind: "burst"})
		}
	}
	for i := range jobs {
		jobs[i].At = jobs[i].At.Round(time.Millisecond)
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return a.At.Compare(b.At) })
	return jobs
}

// holdOf is the hold median of image's load.
func holdOf(image string) time.Duration {
	for _, l := range Loads {
		if l.Image == image {
			return l.HoldMedian
		}
	}
	return 5 * time.Minute
}

// WriteCSV writes jobs as CSV with a header line: at (RFC 3339 with
// milliseconds, UTC), image, hold in seconds, kind.
func WriteCSV(w io.Writer, jobs []Job) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "at,image,hold_s,kind")
	for _, j := range jobs {
		fmt.Fprintf(bw, "%s,%s,%d,%s\n", j.At.UTC().Format("2006-01-02T15:04:05.000Z"), j.Image, int(j.Hold/time.Second), j.Kind)
	}
	return bw.Flush()
}

// ReadCSV reads what WriteCSV wrote; lines starting with # are comments.
// Errors name the line.
func ReadCSV(r io.Reader) ([]Job, error) {
	var jobs []Job
	s := bufio.NewScanner(r)
	n := 0
	for s.Scan() {
		n++
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") || line == "at,image,hold_s,kind" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("line %d: %d fields, want 4 (at,image,hold_s,kind)", n, len(f))
		}
		at, err := time.Parse(time.RFC3339Nano, f[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: at: %w", n, err)
		}
		hold, err := strconv.Atoi(f[2])
		if err != nil || hold < 0 {
			return nil, fmt.Errorf("line %d: hold_s %q is not a count of seconds", n, f[2])
		}
		if f[1] == "" {
			return nil, fmt.Errorf("line %d: no image", n)
		}
		jobs = append(jobs, Job{At: at.UTC(), Image: f[1], Hold: time.Duration(hold) * time.Second, Kind: f[3]})
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if !slices.IsSortedFunc(jobs, func(a, b Job) int { return a.At.Compare(b.At) }) {
		return nil, fmt.Errorf("the jobs are not in the order of their arrival")
	}
	return jobs, nil
}
