package sizing

import (
	"cmp"
	"slices"
	"time"
)

// Discovery is the rule by which pools are found from the jobs (issue 41):
// an image that keeps going cold for want of a pool (cold reason no-pool)
// gets a pool of its own, made from the base template the operator names,
// and a pool made this way that stops being used is removed. A pool a
// person wrote is never made nor removed by it. The zero Discovery is off.
type Discovery struct {
	// After is how many cold jobs of one image without a pool, within
	// Within, make a pool for it. 0 = off.
	After  int
	Within time.Duration
	// IdleFor is how long a pool made this way may go without a claim
	// before it is removed.
	IdleFor time.Duration
	// Max caps how many pools made this way exist at once.
	Max int
}

// DefaultDiscovery is the rule the chart turns on with one value: a pool
// after the third cold job of an image within a day (one job is a try, two
// may be a retry, three is use), removed after a week without a claim (a
// weekly pipeline keeps its pool), at most 20 such pools per namespace.
func DefaultDiscovery() Discovery {
	return Discovery{After: 3, Within: 24 * time.Hour, IdleFor: 7 * 24 * time.Hour, Max: 20}
}

// Finder counts the cold jobs without a pool, per image, and says which
// images are due a pool. Not safe for concurrent use: the controller's
// worker owns it.
type Finder struct {
	rule  Discovery
	colds map[string][]time.Time
}

// NewFinder returns a Finder for rule.
func NewFinder(rule Discovery) *Finder { return &Finder{rule: rule, colds: map[string][]time.Time{}} }

// Cold records a cold job of image, at at, that found no pool for its image.
func (f *Finder) Cold(image string, at time.Time) {
	if f.rule.After <= 0 || image == "" {
		return
	}
	f.colds[image] = append(f.colds[image], at)
}

// Colds are the recorded cold jobs of image within the rule's window
// before now: the claims a new pool's demand history starts from.
func (f *Finder) Colds(image string, now time.Time) []time.Time {
	var out []time.Time
	for _, t := range f.colds[image] {
		if !t.Before(now.Add(-f.rule.Within)) && !t.After(now) {
			out = append(out, t)
		}
	}
	return out
}

// Due returns the images that should get a pool now, the most cold jobs
// first (then by name), no more than the rule's Max less made (the pools
// made this way that exist). It forgets cold jobs older than the window.
// The caller makes the pools and calls Made for each.
func (f *Finder) Due(now time.Time, made int) []string {
	type due struct {
		image string
		n     int
	}
	var ds []due
	for image := range f.colds {
		recent := f.Colds(image, now)
		if len(recent) == 0 {
			delete(f.colds, image)
			continue
		}
		f.colds[image] = recent
		if len(recent) >= f.rule.After {
			ds = append(ds, due{image, len(recent)})
		}
	}
	slices.SortFunc(ds, func(a, b due) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.image, b.image)
	})
	var out []string
	for _, d := range ds {
		if made+len(out) >= f.rule.Max {
			break
		}
		out = append(out, d.image)
	}
	return out
}

// Made forgets image's cold jobs: it has a pool now.
func (f *Finder) Made(image string) { delete(f.colds, image) }

// Unused reports whether a pool this rule made at created, last claimed at
// lastClaim (zero: never), should be removed at now.
func (r Discovery) Unused(created, lastClaim, now time.Time) bool {
	last := created
	if lastClaim.After(last) {
		last = lastClaim
	}
	return r.IdleFor > 0 && now.Sub(last) >= r.IdleFor
}
