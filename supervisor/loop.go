package supervisor

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/lease"
)

// The loop and its one worker. A worker is the goroutine that does an
// op's blocking effects (a TERM → grace → KILL sweep, a shell swap, a
// wipe) for the loop, then posts its continuation back to it; work starts
// it. There is at most one at a time: the ops that start one are
// exclusive and wait in line (parked) while one runs, and a continuation
// that needs a second worker (a job end's idle shell) starts it after its
// own has been counted off. Watchers (a stage's exit, a put's writer,
// the /proc scan) are not workers: they wait for an event beside any
// worker and post what they saw.

// op is a request run on the loop. An exclusive op changes the job: it
// waits while a worker runs, so it never sees a job half-ended.
type op struct {
	excl bool
	fn   func()
	// refuse answers the caller with an error instead of running fn (nil
	// for the loop's own ops: a lease expiry, the shutdown).
	refuse func(error)
}

// loop is the owner of the state: it runs until the shutdown worker has
// completed.
func (s *Supervisor) loop(ctx context.Context, sigs <-chan os.Signal) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	done := ctx.Done()
	for s.ls.pod != podShutDown {
		now := time.Now()
		s.heartbeat.Store(now.UnixNano())
		if next := s.evaluate(now); !next.IsZero() {
			timer.Reset(max(next.Sub(now), time.Millisecond))
		}
		select {
		case r := <-s.notes:
			s.onSignal(r)
		case sig := <-sigs:
			// A note of the signal thread comes first: its SIGTERM was
			// forwarded before the shell could exit, so it is queued
			// before the SIGCHLD of that exit, and the shell must be
			// frozen before that exit is reaped (or it is respawned).
			s.takeNotes()
			s.onSignal(s.forward(sig.(unix.Signal)))
		case <-tick.C:
			s.takeNotes()        // as for a SIGCHLD: a TERMed shell is frozen before its exit is reaped
			s.fx.Children.Reap() // insurance against coalesced SIGCHLDs
		case <-timer.C:
		case o := <-s.ops:
			s.dispatch(o)
		case f := <-s.events:
			f()
			s.unpark()
		case ex := <-s.fx.Shell.Exited():
			s.log.Info("command exited", "code", ex.Code())
			s.ls.status = ex.Code()
			s.drain(lease.ReasonCommandExited)
		case <-done:
			done = nil
			s.drain(lease.ReasonContextCancelled)
		}
	}
}

// dispatch runs o now, or parks it when it is exclusive and a worker runs
// or other exclusive ops wait before it.
func (s *Supervisor) dispatch(o op) {
	if o.excl && s.ls.draining() && o.refuse != nil {
		// The shutdown ends the job itself. A client must not wait for it
		// (it would wait through the grace period, then be terminated as
		// a process left over).
		o.refuse(errorf(lease.ErrDraining, "%v: PID 1 is shutting down (%s) and ends the job itself", lease.ErrDraining, s.ls.drainReason()))
		return
	}
	if o.excl && (s.ls.workers > 0 || len(s.ls.parked) > 0) {
		s.ls.parked = append(s.ls.parked, o)
		return
	}
	o.fn()
}

// unpark runs parked ops in order until one starts a worker. Nothing runs
// after the shutdown: its callers learn ErrExiting when the loop ends.
func (s *Supervisor) unpark() {
	for s.ls.workers == 0 && len(s.ls.parked) > 0 && s.ls.pod != podShutDown {
		o := s.ls.parked[0]
		s.ls.parked = s.ls.parked[1:]
		o.fn()
	}
}

// work runs slow in a new goroutine, the worker, then its continuation
// then on the loop (loop only). slow must not touch the loop's state: it
// gets what it needs from its caller, on the loop, before. The worker is
// counted off before then runs, so then may start the next one.
//
// A second worker beside a running one is a bug (two sweeps or shell
// swaps at once, an op that sees a job half-ended): it is reported as a
// broken invariant, and still run, since dropping the effect would be
// worse than running it late.
func (s *Supervisor) work(name string, slow, then func()) {
	s.ls.workers++
	if s.ls.workers > 1 {
		_ = s.broken(fmt.Errorf("worker %q started while %d other worker(s) run", name, s.ls.workers-1))
	}
	go func() {
		slow()
		s.post(func() {
			s.ls.workers--
			then()
		})
	}()
}

// post runs f on the loop, or drops it when the loop has ended.
func (s *Supervisor) post(f func()) {
	select {
	case s.events <- f:
	case <-s.stopped:
	}
}

// result is the reply of an op; v holds the op's typed value (call
// asserts it back).
type result struct {
	v   any
	err error
}

// call runs fn on the loop (after any worker, when excl) and waits for the
// reply fn gives, at once or later from a worker's continuation.
// ErrExiting when the loop ended first. The waiting is callOp's, not
// generic: a copy of it for each of the ops' result types made PID 1's
// binary about 12 KB bigger (issue 30); the boxing it costs is one small
// allocation per control request at most.
func call[T any](s *Supervisor, excl bool, fn func(reply func(T, error))) (T, error) {
	r := callOp(s, excl, func(reply func(any, error)) {
		fn(func(v T, err error) { reply(v, err) })
	})
	v, _ := r.v.(T) // the zero T when there is no value (refused, ErrExiting)
	return v, r.err
}

// callOp is call with the reply's value boxed.
func callOp(s *Supervisor, excl bool, fn func(reply func(any, error))) result {
	ch := make(chan result, 1)
	o := op{
		excl:   excl,
		fn:     func() { fn(func(v any, err error) { ch <- result{v, err} }) },
		refuse: func(err error) { ch <- result{nil, err} },
	}
	select {
	case s.ops <- o:
	case <-s.stopped:
		return result{nil, errorf(ErrExiting, "%v", ErrExiting)}
	}
	select {
	case r := <-ch:
		return r
	case <-s.stopped:
		select {
		case r := <-ch:
			return r
		default:
			return result{nil, errorf(ErrExiting, "%v", ErrExiting)}
		}
	}
}
