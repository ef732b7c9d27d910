package supervisor

import (
	"strings"
	"time"

	"github.com/warmpod/warmpod/idle"
	"golang.org/x/sys/unix"
)

// The sweep: SIGTERM, a grace period, SIGKILL, over the container's
// processes. It is the supervisor's (not the process table's) so that the
// rule of who gets which signal runs the same on the real /proc and on
// the unit tests' fake one; Processes only lists and signals.

// terminate sends SIGTERM to every container process that keep does not
// protect, waits up to grace for them to be gone, then SIGKILLs what is
// left and waits (bounded) for that too. It returns how many processes
// were signalled. PIDs below 2 are never signalled. Processes in termed
// have had their SIGTERM already (PID 1 forwarded the pod's SIGTERM to
// the shell's process group): they get no second one, since many programs
// take a second SIGTERM as "abort now" and skip their clean-up, but they
// are still SIGKILLed after grace. It runs in a worker, never on the
// loop: it can take the whole grace period.
func (s *Supervisor) terminate(keep func(idle.Proc) bool, termed map[int]bool, grace time.Duration) int {
	targets := s.targets(func(p idle.Proc) bool { return entering(p) || (keep != nil && keep(p)) })
	if len(targets) == 0 {
		return 0
	}
	for _, pid := range targets {
		if !termed[pid] {
			s.signal(pid, unix.SIGTERM)
		}
	}
	if s.waitGone(keep, grace) {
		return len(targets)
	}
	// The KILL rounds spare nothing that keep does not protect, not even
	// a process that looks like a runtime's exec init (any process can
	// call itself "runc:[2:INIT]"; a real one has exec'd long before).
	all := func(p idle.Proc) bool { return keep != nil && keep(p) }
	for round := 0; round < 3; round++ {
		for _, pid := range s.targets(all) {
			s.signal(pid, unix.SIGKILL)
		}
		if s.waitGoneOf(all, 2*time.Second) {
			break
		}
	}
	return len(targets)
}

// targets lists the live container processes that skip does not spare
// (zombies are already dead: only their parent's wait ends them).
func (s *Supervisor) targets(skip func(idle.Proc) bool) []int {
	procs, err := s.fx.Procs.List()
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range procs {
		if p.State == 'Z' || skip(p) {
			continue
		}
		out = append(out, p.PID)
	}
	return out
}

// waitGone polls every 10 ms, up to d, until no process outside keep
// (and no runtime exec init still entering) is left; it tells whether
// none is.
func (s *Supervisor) waitGone(keep func(idle.Proc) bool, d time.Duration) bool {
	return s.waitGoneOf(func(p idle.Proc) bool { return entering(p) || (keep != nil && keep(p)) }, d)
}

func (s *Supervisor) waitGoneOf(skip func(idle.Proc) bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if len(s.targets(skip)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// signal sends sig to pid, never to PID 1 or below (kill(2) of 0 or -1
// would reach a whole group or every process).
func (s *Supervisor) signal(pid int, sig unix.Signal) {
	if pid > 1 {
		s.fx.Procs.Signal(pid, sig)
	}
}

// entering tells whether p is a runtime's init that is still setting up an
// exec session (runc's "runc:[2:INIT]" before it execs the command, e.g. a
// `kubectl exec ... warmpod status` arriving during a clean-up). Killing it
// would fail that exec with "read init-p: connection reset by peer".
func entering(p idle.Proc) bool {
	return strings.HasPrefix(p.Comm, "runc:[")
}
