package supervisor

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/lease"
)

// Signals reach PID 1 on two paths. The signal thread (package
// internal/sigwait, started by cmd/warmpod on the main OS thread) takes a
// process-directed signal with rt_sigtimedwait(2) and calls Forward, which
// forwards it at once and hands the loop a note; when that thread is busy
// the kernel gives the signal to another thread, and os/signal delivers it
// to the loop's sigs channel, where the loop forwards it itself. Both call
// forward, under the same rules, read from forwardGate: the one lock of
// the supervisor, since the signal thread must decide without waiting for
// the loop.

// ForwardedSignals lists the signals PID 1 forwards to the shell's process
// group: 1–64 without those notForwarded keeps, SIGKILL and SIGSTOP
// (uncatchable), and 32 and 33 (reserved by C libraries for their
// threads; the shell never gets them from a runtime).
func ForwardedSignals() []unix.Signal {
	var out []unix.Signal
	for s := unix.Signal(1); s <= 64; s++ {
		if !notForwarded(s) && s != unix.SIGKILL && s != unix.SIGSTOP && s != 32 && s != 33 {
			out = append(out, s)
		}
	}
	return out
}

// notForwarded tells which signals PID 1 keeps, as tini and catatonit
// do: SIGCHLD (it reaps), SIGURG (the Go runtime's preemption signal),
// SIGPIPE (its own stdout closed), the job-control stops SIGTSTP, SIGTTIN
// and SIGTTOU (PID 1 is nobody's job: stopping it would hang the pod), and
// the synchronous fault signals, which concern the process that faulted
// (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT). Every other
// catchable signal (SIGHUP, SIGINT, SIGQUIT, SIGUSR1/2, SIGALRM, SIGCONT,
// SIGWINCH, SIGPWR, SIGXCPU, the real-time signals, ...) goes to the
// shell's process group.
func notForwarded(sig unix.Signal) bool {
	switch sig {
	case unix.SIGCHLD, unix.SIGURG, unix.SIGPIPE,
		unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU,
		unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGTRAP, unix.SIGSYS, unix.SIGABRT:
		return true
	}
	return false
}

// forwardRule is what forward may send, derived by the loop from its
// state (loopState.forwardRule) and published to the gate (syncForward).
type forwardRule uint8

const (
	// forwardAll: every signal notForwarded does not keep goes to the
	// shell's group, SIGTERM once.
	forwardAll forwardRule = iota
	// forwardNoTERM: a job end or cancel sweeps; it sends every job
	// process (the shell's group included) its TERM, so forward does not.
	forwardNoTERM
	// forwardNothing: the pod drains; the shutdown sweep decides what each
	// process gets.
	forwardNothing
)

// forwardRule derives the rule from the machine and the sweep.
func (ls *loopState) forwardRule() forwardRule {
	switch {
	case ls.draining():
		return forwardNothing
	case ls.sweeping:
		return forwardNoTERM
	}
	return forwardAll
}

// forwardGate is the signal thread's view of the loop and its record of
// the one SIGTERM it forwards.
type forwardGate struct {
	// mu guards the fields below. It is held across the kill(2) of a
	// forward, so the loop's change of rule (syncForward) comes entirely
	// before or after a forward: no forward slips in after the loop took
	// over, and a forward's ledger is adopted before the sweep that
	// follows copies termed.
	mu sync.Mutex
	// rule is the loop's, as of its last syncForward.
	rule forwardRule
	// termForwarded is set by the one SIGTERM forward sends: a second
	// SIGTERM to PID 1 before the loop has begun the drain is not
	// forwarded again (one SIGTERM per process).
	termForwarded bool
	// termPending is that forward's ledger until the loop adopts it as
	// termed.
	termPending *termLedger
}

// received is a signal PID 1 took and what forward did with it.
type received struct {
	sig       unix.Signal
	forwarded bool        // sent to the shell's process group
	ledger    *termLedger // a forwarded SIGTERM's: the group it reached, who was running
}

// Forward is the entry of the signal thread (cmd/warmpod, package
// sigwait): it forwards sig at once, under the rules the loop applies,
// and then hands the loop a note for the rest (the log line, the drain
// on SIGTERM). Forwarding first and logging after keeps a slow log
// writer or a busy loop out of the time a job's TERM handler waits. Safe
// from any goroutine; it returns once the loop has the note or has
// stopped.
func (s *Supervisor) Forward(sig unix.Signal) {
	r := s.forward(sig)
	// The note goes to the buffer whenever it has room, the loop ended
	// or not: after the loop, awaitStop reads it (the kubelet's SIGTERM
	// after PID 1 deleted its pod), and one select over both cases would
	// drop it half the time, the closed stopped being as ready.
	select {
	case s.notes <- r:
		return
	default:
	}
	select {
	case s.notes <- r:
	case <-s.stopped:
	}
}

// forward does the urgent part of a signal, on whichever goroutine took
// it: the signal thread (Forward) or the loop (os/signal's path). It
// reads only the gate and calls only the shell and the process table,
// whose methods are safe from any goroutine.
func (s *Supervisor) forward(sig unix.Signal) received {
	r := received{sig: sig}
	if notForwarded(sig) {
		return r
	}
	s.fwd.mu.Lock()
	defer s.fwd.mu.Unlock()
	switch {
	case s.fwd.rule == forwardNothing:
		return r
	case sig == unix.SIGTERM:
		if s.fwd.rule == forwardNoTERM || s.fwd.termForwarded {
			return r
		}
		// The shell must not be replaced when the TERM ends it: the loop
		// freezes it too, but may reap its exit first.
		s.fx.Shell.Retire()
		pgid := s.fx.Shell.ShellPID()
		_ = s.fx.Shell.Signal(sig)
		// A stopped member of the group runs its TERM handler only once
		// continued (see term).
		_ = s.fx.Shell.Signal(unix.SIGCONT)
		r.ledger = s.forwardLedger(pgid)
		s.fwd.termForwarded = true
		s.fwd.termPending = r.ledger
	case sig == unix.SIGWINCH:
		s.fx.Shell.Resize()
		_ = s.fx.Shell.Signal(sig)
	default:
		_ = s.fx.Shell.Signal(sig)
	}
	r.forwarded = true
	return r
}

// takeNotes handles the notes the signal thread has queued.
func (s *Supervisor) takeNotes() {
	for {
		select {
		case r := <-s.notes:
			s.onSignal(r)
		default:
			return
		}
	}
}

// setSweeping marks a job sweep as started or ended and publishes the
// rule that follows (loop only).
func (s *Supervisor) setSweeping(on bool) {
	s.ls.sweeping = on
	s.syncForward()
}

// syncForward publishes the loop's forwarding rule to the gate, and adopts
// the ledger of a SIGTERM forwarded before the change, so the sweep or
// shutdown that follows sends its processes no second TERM, and none to
// the processes that started after it (termLedger). The loop calls it
// whenever what the rule derives from changes: a sweep starts or ends,
// the pod begins to drain.
func (s *Supervisor) syncForward() {
	rule := s.ls.forwardRule()
	s.fwd.mu.Lock()
	s.fwd.rule = rule
	pending := s.fwd.termPending
	s.fwd.termPending = nil
	s.fwd.mu.Unlock()
	s.adoptForward(pending)
}

// onSignal is the loop's part of a signal, after forward.
func (s *Supervisor) onSignal(r received) {
	if stopsDeleted(r.sig) && (r.sig == unix.SIGTERM || s.ls.draining()) {
		// Any signal that could be the container's stop signal (an
		// image's STOPSIGNAL may be SIGQUIT, as nginx's is) counts
		// while draining; before the drain only SIGTERM, the one that
		// drains.
		s.ls.termSeen = true
	}
	switch sig := r.sig; {
	case sig == unix.SIGCHLD:
		s.fx.Children.Reap()
	case notForwarded(sig):
	case sig == unix.SIGTERM && !s.ls.draining():
		if r.forwarded {
			// Adopted here or by syncForward, whichever comes first; it
			// is the same ledger.
			s.adoptForward(r.ledger)
		}
		s.log.Info("SIGTERM: shutting down", "grace", s.cfg.Grace, "forwarded", r.forwarded)
		// A shell that exits on TERM is not replaced. Freeze waits for a
		// shell swap in progress, and a worker's swap waits for the old
		// shell to be reaped, which only this loop does: while a worker
		// runs, freeze from a goroutine of its own (the shutdown worker,
		// which comes after that one, freezes again anyway). That
		// goroutine is no worker: it touches no state of the loop and
		// posts nothing.
		if s.ls.workers > 0 {
			go s.fx.Shell.Freeze(nil)
		} else {
			s.fx.Shell.Freeze(nil)
		}
		s.drain(lease.ReasonSIGTERM)
	case r.forwarded:
		s.log.Debug("forwarded signal", "signal", sig.String())
	}
}

// forwardLedger is the ledger of a SIGTERM just forwarded to process group
// pgid, read on the goroutine that sent it, right after the kill(2): every
// live process listed was running at the forward (the shutdown sweep
// sends a TERM to those of them outside the group, and none to a process
// started later), and the group's members had theirs. A member forked in
// the microseconds between the kill(2) and the listing either got the
// signal (fork(2) restarts when a group signal is pending) or is the
// clean-up of a member that did: either way it gets no TERM of its own,
// and SIGKILL after the grace period if it is still there. When the
// table cannot be read, nothing is recorded and the sweep's own listing
// is the cut. ProcTable reads /proc and holds no state, so any goroutine
// may call it.
func (s *Supervisor) forwardLedger(pgid int) *termLedger {
	l := &termLedger{}
	if pgid <= 1 {
		return l
	}
	procs, err := s.fx.Procs.List()
	if err != nil {
		return l
	}
	l.begin(procs)
	for _, p := range procs {
		if p.PGID == pgid && p.State != 'Z' {
			l.mark(p)
		}
	}
	return l
}

// adoptForward makes l, the forwarded SIGTERM's ledger, the pod's (loop
// only). There is one forward per pod, so a second call brings the same
// ledger or nil.
func (s *Supervisor) adoptForward(l *termLedger) {
	if l != nil && s.ls.termed == nil {
		s.ls.termed = l
	}
}
