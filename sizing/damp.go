package sizing

import (
	"slices"
	"time"
)

// The windows of Damper, Knative's autoscaler's defaults (its stable window
// of 60 s, and a panic window a tenth of it): the scale-down a decision asks
// for waits for a stable window in which no decision asked for more, and a
// burst that arrives faster than the pool's idle pods puts it in panic, in
// which it does not shrink at all.
const (
	StableWindow = time.Minute
	PanicWindow  = 6 * time.Second
)

// Damper keeps a pool's size from flapping: the controller passes each of
// the pool's decisions through it. Not safe for concurrent use: the
// controller's worker owns one per pool. The zero Damper is ready.
type Damper struct {
	asked      []asked
	panicUntil time.Time
}

// Reset forgets the pool's past decisions and panic: the next decision is
// applied as it is. The controller resets a pool's Damper when its policy
// or its active period changes, or a max cuts it: a change a person or a
// schedule asks for is not held.
func (d *Damper) Reset() { *d = Damper{} }

type asked struct {
	at time.Time
	n  int
}

// Damp returns the idle count to set at now when the decision asks for
// desired, the pool's replicas are current, ready of its idle pods are
// Ready, and claims are its recent claims (warm and cold, any order):
//
//   - a growth at once: a burst is met at its rate;
//   - panic, as Knative's: when the claims of the last PanicWindow are at
//     least twice the Ready idle pods (and two or more), the pool panics
//     until a StableWindow after the last such moment, and while it
//     panics it does not shrink;
//   - otherwise a shrink only to the most any decision of the last
//     StableWindow asked for, so a figure that dips for one decision and
//     comes back (a claim that leaves a window as another enters it) does
//     not remove a pod the next decision makes again.
//
// held reports that the answer is above desired.
func (d *Damper) Damp(now time.Time, desired, current, ready int, claims []time.Time) (n int, held bool) {
	d.asked = slices.DeleteFunc(d.asked, func(a asked) bool { return !a.at.After(now.Add(-StableWindow)) })
	d.asked = append(d.asked, asked{now, desired})
	recent := 0
	for _, c := range claims {
		if c.After(now.Add(-PanicWindow)) && !c.After(now) {
			recent++
		}
	}
	if recent >= 2 && recent >= 2*ready {
		d.panicUntil = now.Add(StableWindow)
	}
	if desired >= current {
		return desired, false
	}
	if now.Before(d.panicUntil) {
		return current, true
	}
	n = desired
	for _, a := range d.asked {
		n = max(n, a.n)
	}
	n = min(n, current)
	return n, n > desired
}
