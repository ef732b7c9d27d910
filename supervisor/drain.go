package supervisor

import (
	"time"

	"github.com/warmpod/warmpod/lease"
	"github.com/warmpod/warmpod/procscan"
)

// evaluate runs the lease/deadline machine and acts on its decision; it
// returns when it must run again.
func (s *Supervisor) evaluate(now time.Time) time.Time {
	d := s.ls.machine.Tick(now)
	if d.ExpiredJob != "" && !s.ls.expiring {
		s.ls.expiring = true
		s.log.Warn("job lease expired", "job", d.ExpiredJob, "reason", d.ExpiryReason)
		s.dispatch(op{excl: true, fn: func() {
			s.endJob(d.ExpiredJob, "expired ("+d.ExpiryReason+")", 0, func(Ended, error) { s.ls.expiring = false })
		}})
	}
	if d.Drain {
		s.drain(d.DrainReason)
	}
	s.publish(now)
	return d.NextWake
}

// drain makes the pod drain for reason (the machine keeps the first
// reason) and queues the shutdown, once: the machine refuses claims from
// now on, and the shutdown runs as soon as the job operations queued
// before it have.
func (s *Supervisor) drain(reason lease.Reason) {
	now := time.Now()
	s.ls.machine.Drain(reason, now)
	if s.ls.pod != podServing {
		return // queued already
	}
	if s.movePod(podShutdownQueued) != nil {
		return
	}
	s.syncForward()
	s.publish(now)
	// Clients waiting in line are answered at once (dispatch refuses
	// those that come later); the loop's own ops (a lease expiry) stay.
	parked := s.ls.parked
	s.ls.parked = nil
	for _, o := range parked {
		s.dispatch(o)
	}
	s.dispatch(op{excl: true, fn: s.shutdown})
}

// shutdown ends the job (if any) and stops every process: SIGTERM, then
// SIGKILL after the grace period, to all but warmpod's own clients; a
// client still reading its answer (the `job end` that reached --max-jobs)
// gets time to exit by itself, then whatever is left gets the same TERM →
// KILL.
func (s *Supervisor) shutdown() {
	// PID 1 exits whatever the phases say: a refused move is logged
	// (broken) and the shutdown goes on.
	_ = s.movePod(podShuttingDown)
	s.log.Info("draining", "reason", s.ls.drainReason())
	j := s.ls.job
	var puts []*inflightPut
	if j != nil {
		_ = s.moveJob(j, jobEnding)
		puts = j.inflight()
	}
	l := s.ls.termed.clone()
	grace := s.cfg.Grace
	n := 0
	s.work("shutdown", func() {
		s.fx.Shell.Freeze(nil)
		s.stopPuts(j, puts)
		var clients map[int]bool
		if procs, err := s.fx.Procs.List(); err == nil {
			clients = s.fx.Procs.Clients(procs)
		}
		n = s.terminate(func(p procscan.Proc) bool { return clients[p.PID] }, l, grace)
		s.waitGone(func(p procscan.Proc) bool { return !clients[p.PID] }, 2*time.Second)
		// The same ledger: a client gets its one TERM at this point;
		// whatever started since the first TERM gets none, and SIGKILL
		// after 1 s.
		n += s.terminate(nil, l, time.Second)
		s.fx.Shell.Stop(time.Second)
		s.wipe(j)
	}, func() {
		if j != nil {
			s.release(j)
		}
		s.ls.swept = n
		if s.movePod(podShutDown) != nil {
			// The shutdown has run: the loop must end, whatever phase
			// the pod was wrongly in.
			s.ls.pod = podShutDown
		}
	})
}
