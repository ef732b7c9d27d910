package supervisor

import (
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/procscan"
)

// The sweep: SIGTERM, a grace period, SIGKILL, over the container's
// processes. It is the supervisor's (not the process table's) so that the
// rule of who gets which signal runs the same on the real /proc and on
// the unit tests' fake one; Processes only lists and signals.

// terminate sends SIGTERM to every container process that keep does not
// protect and that l says is due one (termLedger: one SIGTERM per
// process, none to a process started after the stop's first), waits up
// to grace for every process outside keep to be gone, then SIGKILLs what
// is left and waits (bounded) for that too. It returns how many
// processes it found to stop. PIDs below 2 are never signalled. l is
// updated with what was sent, for the next round of the same stop. It
// runs in a worker, never on the loop: it can take the whole grace
// period.
func (s *Supervisor) terminate(keep func(procscan.Proc) bool, l *termLedger, grace time.Duration) int {
	procs, err := s.fx.Procs.List()
	if err != nil {
		return 0
	}
	// This listing is the stop's cut when nothing was sent before (no
	// forwarded SIGTERM): what runs now gets a TERM, what starts from
	// here on is clean-up.
	l.begin(procs)
	skip := func(p procscan.Proc) bool { return p.State == 'Z' || entering(p) || (keep != nil && keep(p)) }
	n := 0
	for _, p := range procs {
		if skip(p) {
			continue
		}
		n++
		if l.due(p) {
			s.term(p.PID)
			l.mark(p)
		}
	}
	if n == 0 {
		return 0
	}
	if s.waitGone(keep, grace) {
		return n
	}
	// The KILL rounds spare nothing that keep does not protect, not even
	// a process that looks like a runtime's exec init (any process can
	// call itself "runc:[2:INIT]"; a real one has exec'd long before),
	// nor a process that started after the first SIGTERM.
	all := func(p procscan.Proc) bool { return keep != nil && keep(p) }
	for round := 0; round < 3; round++ {
		for _, pid := range s.targets(all) {
			s.signal(pid, unix.SIGKILL)
		}
		if s.waitGoneOf(all, 2*time.Second) {
			break
		}
	}
	return n
}

// term sends pid SIGTERM, then SIGCONT. A stopped process (SIGSTOP, or a
// job-control stop) does not run its TERM handler until it is continued:
// without the SIGCONT it would sit stopped through the grace period and
// die of the SIGKILL with its clean-up never run. The TERM goes first so
// that it is pending when the process resumes, and its handler is the
// first thing it runs (systemd sends the same pair, in the same order,
// for the same reason). To a running process SIGCONT does nothing.
func (s *Supervisor) term(pid int) {
	s.signal(pid, unix.SIGTERM)
	s.signal(pid, unix.SIGCONT)
}

// targets lists the live container processes that skip does not spare
// (zombies are already dead: only their parent's wait ends them).
func (s *Supervisor) targets(skip func(procscan.Proc) bool) []int {
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
func (s *Supervisor) waitGone(keep func(procscan.Proc) bool, d time.Duration) bool {
	return s.waitGoneOf(func(p procscan.Proc) bool { return entering(p) || (keep != nil && keep(p)) }, d)
}

func (s *Supervisor) waitGoneOf(skip func(procscan.Proc) bool, d time.Duration) bool {
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
func entering(p procscan.Proc) bool {
	return strings.HasPrefix(p.Comm, "runc:[")
}
