package supervisor

import (
	"time"

	"github.com/warmpod/warmpod/procscan"
)

// watchActivity scans for activity once a second until the loop ends, and
// reports it to the loop. It is a watcher, beside the loop and any worker:
// a slow /proc never delays reaping or a signal.
func (s *Supervisor) watchActivity() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastInput time.Time
	var usage procscan.UsageTracker
	for {
		select {
		case <-tick.C:
			if s.active(&lastInput, &usage) {
				s.post(func() { s.ls.machine.Activity(time.Now()) })
			}
		case <-s.stopped:
			return
		}
	}
}

// active tells whether there was activity since the last scan: stdin
// bytes, or a foreign process (not the idle shell, not warmpod's own
// clients) that appeared or used CPU or did I/O since. A foreign process
// that only sleeps (a leaked `kubectl exec` shell, a forgotten `sleep`)
// counts once, when first seen, so it cannot hold an idle pod up forever.
func (s *Supervisor) active(lastInput *time.Time, usage *procscan.UsageTracker) bool {
	if in := s.fx.Shell.LastInput(); in.After(*lastInput) {
		*lastInput = in
		return true
	}
	shell := s.fx.Shell.ShellPID()
	procs, err := s.fx.Procs.List()
	if err != nil {
		return false
	}
	clients := s.fx.Procs.Clients(procs)
	foreign := procscan.Foreign(procs, func(p procscan.Proc) bool {
		return p.PID == shell || clients[p.PID]
	})
	cur := make(map[int]procscan.Usage, len(foreign))
	for _, p := range foreign {
		io, _ := s.fx.Procs.IO(p.PID)
		cur[p.PID] = procscan.Usage{Start: p.Start, CPU: p.CPU, IO: io}
	}
	return usage.Update(cur)
}
