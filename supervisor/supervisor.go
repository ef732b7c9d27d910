// Package supervisor is PID 1's single owner of state: it ties the lease
// and idle deadline (package idle), the underlying shell (package
// shellproxy), the job's secrets (package tokens) and the control socket
// (package control) together, and decides when the pod drains.
//
// One goroutine, Run's loop, owns every piece of mutable state: the
// lease.Machine, the job and its stages and uploads, the pinned scope, the
// drain reason. Nothing else touches them and no lock guards them. Control
// handlers send the loop an op and wait for its reply; what takes time (a
// TERM → grace → KILL sweep, replacing the shell, waiting for a stage,
// deleting the pod) runs in a worker goroutine that gets only what it
// needs and posts its completion back to the loop. While a worker runs,
// ops that change the job (start, end, cancel, a stage, an upload) wait in
// order in a queue, and every other op (renewals, status, env, probes,
// signals, reaping) is served at once: no grace period ever holds the loop.
package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/lease"
	"github.com/warmpod/warmpod/podapi"
	"github.com/warmpod/warmpod/procscan"
	"github.com/warmpod/warmpod/shellproxy"
	"golang.org/x/sys/unix"
)

// Config configures a Supervisor. Durations are wall-clock.
type Config struct {
	// Command is the underlying shell's argv; its first word is logged,
	// and printed when it cannot be started in plain-init mode.
	Command []string
	// BaseEnv is the environment of the idle shell and the base of every
	// job's ("KEY=VALUE"; os.Environ() in PID 1).
	BaseEnv []string
	// IdleTimeout is how long the pod may stay idle before it drains
	// (0 = never).
	IdleTimeout time.Duration
	// Grace is how long processes get between SIGTERM and SIGKILL when a
	// job ends or the pod shuts down. It must stay below the pod's
	// terminationGracePeriodSeconds, after which the kubelet SIGKILLs PID 1
	// and with it every process of the container.
	Grace time.Duration
	// ReadyMargin: readiness turns false this long before the idle
	// deadline, so executors stop picking the pod before it refuses claims.
	ReadyMargin time.Duration
	// TokenEnv is the variable that carries the job token (CI_JOB_TOKEN).
	TokenEnv string
	// JobsDir holds one 0700 directory per job for file variables
	// (default /run/warmpod/jobs, on tmpfs in a pod).
	JobsDir string
	// ExitWithCommand makes warmpod a plain init: no respawn, exit with
	// the command's status.
	ExitWithCommand bool
	// LogsDir holds one 0700-protected output log per job (default
	// /run/warmpod/logs).
	LogsDir string
	// RuntimeDir is the control socket's directory (/run/warmpod): no
	// `job put` may write there, next to the socket.
	RuntimeDir string
	// CleanupPaths are directory patterns (tokens.CheckCleanupPath) whose
	// contents are removed whenever a job ends, by job end, lease expiry,
	// cancel or drain; each job spec's cleanup_paths add to them.
	CleanupPaths []string
	// MaxJobs: after this many jobs the pod drains (0 = unlimited).
	MaxJobs int
	// ConfigHash, when set, must equal a job spec's config_hash.
	ConfigHash string
	// JobUser, when set, runs stages as this user (the shell's user is
	// the Shell's business).
	JobUser *syscall.Credential
	// IgnoreIdleStdin drops stdin bytes while no job holds the lease
	// (counted and logged) instead of giving them to the idle shell.
	IgnoreIdleStdin bool
	// TestHooks enables test-only control operations (debug.stall).
	TestHooks bool
	// CgroupRoot is where the container's cgroup file system is mounted
	// (default "/sys/fs/cgroup"), for the OOM-kill counter.
	CgroupRoot string
	// Version is reported by status.
	Version string
	// Stderr gets the one line PID 1 prints when the command cannot be
	// started in plain-init mode (default os.Stderr).
	Stderr *os.File
}

// Supervisor runs PID 1. Create with New, then Run.
type Supervisor struct {
	cfg Config
	log *slog.Logger
	fx  Effects

	ops     chan op       // requests for the loop (control handlers, watchers)
	events  chan func()   // completions of workers, run by the loop
	notes   chan received // signals Forward has already acted on
	stopped chan struct{} // closed when the loop has ended

	// fwd lets the signal thread forward a signal without waiting for the
	// loop, under the same rules the loop would apply.
	fwd struct {
		mu sync.Mutex // guards the fields below; held across the kill(2) of a forward
		// draining and sweeping mirror the loop's reason != "" and
		// sweeping: the loop sets them, under mu, before it acts on
		// them, so no forward slips in after the loop took over.
		draining, sweeping bool
		// termForwarded is set by the one SIGTERM forward sends: a
		// second SIGTERM to PID 1 before the loop has begun the drain is
		// not forwarded again (one SIGTERM per process).
		termForwarded bool
		// termPending is that forward's ledger until the loop adopts it
		// as termed.
		termPending *termLedger
	}

	// Written by the loop, read lock-free by probes and status.
	snap      atomic.Pointer[snapshot]
	heartbeat atomic.Int64 // unix ns of the loop's last turn

	// Guarded by: the loop (Run's goroutine). No other goroutine reads or
	// writes these.
	machine  *lease.Machine
	job      *job
	scope    string       // trust domain pinned by the first job (reuse with max-jobs != 1)
	termed   *termLedger  // the forwarded SIGTERM: whom it reached, who was running then (nil before)
	working  string       // the effect whose worker runs ("" when none)
	parked   []op         // exclusive ops waiting for that worker, in arrival order
	sweeping bool         // a job end or cancel is terminating the job's processes
	expiring bool         // the end of an expired lease is queued or running
	reason   lease.Reason // why the pod drains; "" until it does
	status   int          // the command's exit status (plain-init mode)
	finished bool         // the shutdown worker has completed
	swept    int          // processes the shutdown signalled
}

// op is a request run on the loop. An exclusive op changes the job: it
// waits while a worker runs, so it never sees a job half-ended.
type op struct {
	excl bool
	fn   func()
	// refuse answers the caller with an error instead of running fn (nil
	// for the loop's own ops: a lease expiry, the shutdown).
	refuse func(error)
}

// snapshot is what probes and status read without going through the loop.
type snapshot struct {
	status lease.Status
	dl     time.Time
}

// New prepares a Supervisor around the given effects: it starts nothing.
// The effects must all be set.
func New(cfg Config, fx Effects, log *slog.Logger) *Supervisor {
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.JobsDir == "" {
		cfg.JobsDir = "/run/warmpod/jobs"
	}
	if cfg.LogsDir == "" {
		cfg.LogsDir = "/run/warmpod/logs"
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"/bin/sh"}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now()
	s := &Supervisor{
		cfg:     cfg,
		log:     log,
		fx:      fx,
		ops:     make(chan op),
		events:  make(chan func()),
		notes:   make(chan received, 64),
		stopped: make(chan struct{}),
		machine: lease.New(lease.Config{IdleTimeout: cfg.IdleTimeout, MaxJobs: cfg.MaxJobs}, now),
	}
	s.heartbeat.Store(now.UnixNano())
	s.publish(now)
	return s
}

// Run starts the shell and serves until the pod drains. sigs carries
// every signal PID 1 gets (signal.Notify with no list, in cmd/warmpod);
// onSignal decides which are forwarded. It returns PID 1's exit status
// (lease.Reason.ExitCode): 0 after an idle drain, 143 after SIGTERM, the
// command's status in plain-init mode (127/126 when it cannot be
// executed).
func (s *Supervisor) Run(ctx context.Context, sigs <-chan os.Signal) int {
	if !s.cfg.ExitWithCommand {
		s.prepareDirs()
	}
	s.fx.Shell.SetDiscardInput(s.cfg.IgnoreIdleStdin)
	if err := s.fx.Shell.Start(s.cfg.BaseEnv); err != nil {
		if s.cfg.ExitWithCommand {
			// Exactly one line on stderr, as a shell would print it.
			fmt.Fprintf(s.cfg.Stderr, "warmpod: %v\n", err)
			s.fx.Shell.Close()
			close(s.stopped)
			return shellproxy.ExecErrorCode(err)
		}
		s.log.Error("cannot start the shell; retrying", "command", s.cfg.Command[0], "error", err)
	}
	s.log.Info("warm", "shell", s.cfg.Command[0], "stdio", string(s.fx.Shell.Mode()), "idle_timeout", s.cfg.IdleTimeout, "pid", os.Getpid())
	if !s.cfg.ExitWithCommand {
		// The /proc scan runs beside the loop, so it never delays reaping
		// or a signal.
		go s.watchActivity()
	}
	s.loop(ctx, sigs)
	close(s.stopped)

	s.fx.Children.Reap()
	s.fx.Shell.Close()
	code := s.reason.ExitCode(s.status)
	s.log.Info("exit", "reason", s.reason, "code", code, "terminated", s.swept)
	st := s.snap.Load().status
	s.fx.Pod.Terminated(podapi.TerminationMessage{Reason: string(s.reason), ExitCode: code, Job: st.JobID, JobsRun: st.JobsRun, Version: s.cfg.Version})
	if code == 0 && s.reason.Planned() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		s.fx.Pod.DeleteSelf(ctx)
		cancel()
	}
	return code
}

// loop is the owner of the state: it runs until the shutdown worker has
// completed.
func (s *Supervisor) loop(ctx context.Context, sigs <-chan os.Signal) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	done := ctx.Done()
	for !s.finished {
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
			s.status = ex.Code()
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
	if o.excl && s.reason != "" && o.refuse != nil {
		// The drain has begun: the shutdown ends the job itself. A client
		// must not wait for it (it would wait through the grace period,
		// then be terminated as a process left over).
		o.refuse(errorf(lease.ErrDraining, "%v: PID 1 is shutting down (%s) and ends the job itself", lease.ErrDraining, s.reason))
		return
	}
	if o.excl && (s.working != "" || len(s.parked) > 0) {
		s.parked = append(s.parked, o)
		return
	}
	o.fn()
}

// unpark runs parked ops in order until one starts a worker. Nothing runs
// after the shutdown: its callers learn ErrExiting when the loop ends.
func (s *Supervisor) unpark() {
	for s.working == "" && len(s.parked) > 0 && !s.finished {
		o := s.parked[0]
		s.parked = s.parked[1:]
		o.fn()
	}
}

// work runs slow in a new goroutine, then its continuation then on the
// loop. slow must not touch the loop's state: it gets what it needs from
// its caller, on the loop, before.
func (s *Supervisor) work(name string, slow, then func()) {
	s.working = name
	go func() {
		slow()
		s.post(func() {
			s.working = ""
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

// result is the reply of an op.
type result[T any] struct {
	v   T
	err error
}

// call runs fn on the loop (after any worker, when excl) and waits for the
// reply fn gives, now or later from a worker's continuation. ErrExiting
// when the loop ended first.
func call[T any](s *Supervisor, excl bool, fn func(reply func(T, error))) (T, error) {
	ch := make(chan result[T], 1)
	var zero T
	o := op{
		excl:   excl,
		fn:     func() { fn(func(v T, err error) { ch <- result[T]{v, err} }) },
		refuse: func(err error) { ch <- result[T]{zero, err} },
	}
	select {
	case s.ops <- o:
	case <-s.stopped:
		return zero, errorf(ErrExiting, "%v", ErrExiting)
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-s.stopped:
		select {
		case r := <-ch:
			return r.v, r.err
		default:
			return zero, errorf(ErrExiting, "%v", ErrExiting)
		}
	}
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

func notForwarded(sig unix.Signal) bool {
	switch sig {
	case unix.SIGCHLD, unix.SIGURG, unix.SIGPIPE,
		unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU,
		unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGTRAP, unix.SIGSYS, unix.SIGABRT:
		return true
	}
	return false
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
	select {
	case s.notes <- r:
	case <-s.stopped:
	}
}

// forward does the urgent part of a signal, on whichever goroutine took
// it: the signal thread (Forward) or the loop (os/signal's fallback).
// Nothing is forwarded once the drain has begun (the shutdown sweep
// decides what each process gets), and a SIGTERM is not forwarded while
// a job end or cancel sweeps (that sweep sends the shell's group its
// TERM).
func (s *Supervisor) forward(sig unix.Signal) received {
	r := received{sig: sig}
	if notForwarded(sig) {
		return r
	}
	s.fwd.mu.Lock()
	defer s.fwd.mu.Unlock()
	switch {
	case s.fwd.draining:
		return r
	case sig == unix.SIGTERM:
		if s.fwd.sweeping || s.fwd.termForwarded {
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

// setSweeping marks a job sweep as started or ended, for the loop and for
// forward. A SIGTERM forward had sent before the sweep started is
// adopted now, so the sweep sends its processes no second one, and none
// to the processes that started after it.
func (s *Supervisor) setSweeping(on bool) {
	s.sweeping = on
	s.setForwarding(func() { s.fwd.sweeping = on })
}

// setForwarding changes forward's rules (change runs under fwd.mu) and
// adopts the ledger of a SIGTERM forwarded before the change, so the
// sweep or shutdown that follows keeps its rules (termLedger).
func (s *Supervisor) setForwarding(change func()) {
	s.fwd.mu.Lock()
	change()
	pending := s.fwd.termPending
	s.fwd.termPending = nil
	s.fwd.mu.Unlock()
	s.adoptForward(pending)
}

// onSignal is the loop's part of a signal, after forward.
func (s *Supervisor) onSignal(r received) {
	switch sig := r.sig; {
	case sig == unix.SIGCHLD:
		s.fx.Children.Reap()
	case notForwarded(sig):
	case sig == unix.SIGTERM && s.reason == "":
		if r.forwarded {
			// Adopted here or by setSweeping/drain, whichever comes
			// first; it is the same ledger.
			s.adoptForward(r.ledger)
		}
		s.log.Info("SIGTERM: shutting down", "grace", s.cfg.Grace, "forwarded", r.forwarded)
		// A shell that exits on TERM is not replaced. Freeze waits for a
		// shell swap in progress, and a worker's swap waits for the old
		// shell to be reaped, which only this loop does: while a worker
		// runs, freeze from a goroutine of its own (the shutdown worker,
		// which comes after that one, freezes again anyway).
		if s.working != "" {
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
	if l != nil && s.termed == nil {
		s.termed = l
	}
}

// evaluate runs the lease/deadline machine and acts on its decision; it
// returns when it must run again.
func (s *Supervisor) evaluate(now time.Time) time.Time {
	d := s.machine.Tick(now)
	if d.ExpiredJob != "" && !s.expiring {
		s.expiring = true
		s.log.Warn("job lease expired", "job", d.ExpiredJob, "reason", d.ExpiryReason)
		s.dispatch(op{excl: true, fn: func() {
			s.endJob(d.ExpiredJob, "expired ("+d.ExpiryReason+")", 0, func(Ended, error) { s.expiring = false })
		}})
	}
	if d.Drain {
		s.drain(d.DrainReason)
	}
	s.publish(now)
	return d.NextWake
}

// drain starts the pod's drain for reason (the first reason wins): the
// machine refuses claims from now on, and the shutdown runs as soon as
// the job operations queued before it have.
func (s *Supervisor) drain(reason lease.Reason) {
	if s.reason != "" {
		return
	}
	s.reason = reason
	s.setForwarding(func() { s.fwd.draining = true })
	now := time.Now()
	s.machine.Drain(reason, now)
	s.publish(now)
	// Clients waiting in line are answered now (dispatch refuses those
	// that come later); the loop's own ops (a lease expiry) stay.
	parked := s.parked
	s.parked = nil
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
	s.log.Info("draining", "reason", s.reason)
	j := s.job
	var puts []*inflightPut
	if j != nil {
		j.phase = phaseEnding
		puts = j.inflight()
	}
	l := s.termed.clone()
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
		// The same ledger: a client gets its one TERM now; whatever
		// started since the first TERM gets none, and SIGKILL after 1 s.
		n += s.terminate(nil, l, time.Second)
		s.fx.Shell.Stop(time.Second)
		s.wipe(j)
	}, func() {
		s.job = nil
		s.swept = n
		s.finished = true
	})
}

// prepareDirs creates the jobs directory (0711: a job user may traverse
// to its own job directory) and the logs directory (0700) before any job
// code runs, owned by PID 1, whatever a writable emptyDir held before.
func (s *Supervisor) prepareDirs() {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{s.cfg.JobsDir, 0o711}, {s.cfg.LogsDir, 0o700}} {
		err := os.MkdirAll(d.path, d.mode)
		if err == nil {
			err = os.Lchown(d.path, os.Geteuid(), os.Getegid())
		}
		if err == nil {
			err = os.Chmod(d.path, d.mode)
		}
		if err != nil {
			s.log.Warn("cannot prepare directory", "path", d.path, "error", err)
		}
	}
}

// watchActivity scans for activity once a second until the loop ends, and
// reports it to the loop.
func (s *Supervisor) watchActivity() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastInput time.Time
	var usage procscan.UsageTracker
	for {
		select {
		case <-tick.C:
			if s.active(&lastInput, &usage) {
				s.post(func() { s.machine.Activity(time.Now()) })
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

// publish stores a lock-free snapshot for probes and status (loop only).
func (s *Supervisor) publish(now time.Time) {
	st := s.machine.Snapshot(now)
	var dl time.Time
	if st.IdleDeadline != nil {
		dl = *st.IdleDeadline
	}
	s.snap.Store(&snapshot{status: st, dl: dl})
}

// State returns "idle", "busy" or "draining".
func (s *Supervisor) State() string { return s.snap.Load().status.State }

// Live is the liveness check of the loop: it fails when the loop has not
// turned for 5 s (it turns at least once a second).
func (s *Supervisor) Live() error {
	if age := time.Since(time.Unix(0, s.heartbeat.Load())); age > 5*time.Second {
		return fmt.Errorf("supervisor loop stalled for %s", age.Round(time.Second))
	}
	return nil
}

// Reaping is the liveness check of the reaper: it fails when no reap has
// run for 5 s.
func (s *Supervisor) Reaping() error {
	if age := time.Since(s.fx.Children.LastReap()); age > 5*time.Second {
		return fmt.Errorf("reaper idle for %s", age.Round(time.Second))
	}
	return nil
}

// Ready is the readiness check: nil only while idle and accepting a job,
// and not within ReadyMargin of the idle deadline.
func (s *Supervisor) Ready() error {
	sn := s.snap.Load()
	if sn.status.State != lease.Idle.String() {
		return errors.New(sn.status.State)
	}
	if !sn.dl.IsZero() && !time.Now().Before(sn.dl.Add(-s.cfg.ReadyMargin)) {
		return errors.New("idle deadline imminent")
	}
	return nil
}

// ShellUp is the readiness check that a shell is running.
func (s *Supervisor) ShellUp() error {
	if s.fx.Shell.ShellPID() <= 1 {
		return errors.New("no shell")
	}
	return nil
}

// StatusJSON returns the status document: state, job id, jobs run, idle
// since, idle deadline, version. It never holds a secret.
func (s *Supervisor) StatusJSON() []byte {
	sn := s.snap.Load()
	doc := struct {
		lease.Status
		Version string `json:"version"`
		Stdio   string `json:"stdio"`
		Shell   int    `json:"shell_pid,omitempty"`
		Orphans uint64 `json:"orphans_reaped"`
	}{sn.status, s.cfg.Version, string(s.fx.Shell.Mode()), s.fx.Shell.ShellPID(), s.fx.Children.Orphans()}
	b, _ := json.Marshal(doc)
	return append(b, '\n')
}

// Stall holds the loop for d (test hook, debug.stall): probes must see it.
// ErrExiting when the loop has ended.
func (s *Supervisor) Stall(d time.Duration) error {
	_, err := call(s, false, func(reply func(struct{}, error)) {
		s.log.Warn("test hook: stalling the main loop", "for", d)
		reply(struct{}{}, nil)
		time.Sleep(d)
	})
	return err
}
