// Package lease holds the pure decision logic of warmpod's lease and idle
// deadline: which job holds the pod, when that job's lease expires, and when an
// idle pod drains (exits so Kubernetes can replace it).
//
// Nothing in the Machine starts goroutines, arms timers or sleeps. Every method
// takes the current time as an argument, so the logic is deterministic and
// tested with synthetic times. The caller (the supervisor goroutine of PID 1)
// makes every call from its one goroutine, feeds it activity, and arms one
// timer for Decision.NextWake after each call to Tick.
package lease

import (
	"errors"
	"strconv"
	"time"
)

// State is the coarse state of a Machine. A Machine is in exactly one state at
// a time; in particular it is never Busy and Draining at once.
type State int

const (
	// Idle: no job holds the lease; the pod accepts a Claim. The idle deadline
	// is armed when Config.IdleTimeout > 0.
	Idle State = iota
	// Busy: one job holds the lease; further claims get ErrBusy (or a replay).
	Busy
	// Draining: the pod no longer accepts jobs and the caller should exit once
	// any job still holding the lease has ended. Draining is terminal.
	Draining
)

// String returns "idle", "busy" or "draining" (the names used in the JSON
// status), or "State(N)" for a value outside the enumeration.
func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case Busy:
		return "busy"
	case Draining:
		return "draining"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Sentinel errors returned by Claim, Renew and Release. Compare them with
// errors.Is; they may be wrapped with detail. The exit codes are the CLI's
// mapping (sysexits.h: 75 = EX_TEMPFAIL, retry later; 69 = EX_UNAVAILABLE).
var (
	// ErrBusy: Claim while another job (or the same job with a different or
	// empty nonce) holds the lease. CLI exit 75.
	ErrBusy = errors.New("busy: another job holds the lease")
	// ErrDraining: Claim while Draining, including a claim at or after the
	// idle deadline, which drains the machine. CLI exit 69.
	ErrDraining = errors.New("draining: the pod no longer accepts jobs")
	// ErrNoJob: Renew or Release while no job holds the lease; also Renew of a
	// lease that has already expired. CLI exit 69.
	ErrNoJob = errors.New("no job holds the lease")
	// ErrWrongJob: Renew or Release naming a job other than the holder. CLI
	// exit 75.
	ErrWrongJob = errors.New("lease held by another job")
	// ErrEmptyJobID: Claim with an empty job ID, which could not be told apart
	// from Release("")'s "whatever job is held". The CLI should treat it as
	// a usage error (exit 64).
	ErrEmptyJobID = errors.New("claim needs a non-empty job id")
)

// Reason is why a pod drains: the one set of exit reasons of PID 1. The
// Machine sets ReasonIdleTimeout and ReasonMaxJobs itself; the supervisor
// gives the others to Drain. ExitCode maps each to PID 1's exit status, in
// this one place.
type Reason string

// The drain reasons (Decision.DrainReason, Status.DrainReason, and the
// "reason" of the termination message).
const (
	// ReasonIdleTimeout: the idle deadline (Config.IdleTimeout after the last
	// activity or release) passed.
	ReasonIdleTimeout Reason = "idle-timeout"
	// ReasonMaxJobs: the Config.MaxJobs-th job was released.
	ReasonMaxJobs Reason = "max-jobs"
	// ReasonRequested is recorded when Drain is called with an empty reason.
	ReasonRequested Reason = "requested"
	// ReasonSIGTERM: the container got SIGTERM (the kubelet deletes the
	// pod, or the runtime stops the container).
	ReasonSIGTERM Reason = "sigterm"
	// ReasonCommandExited: the underlying command exited in plain-init mode
	// (--exit-with-command), or could not be started there.
	ReasonCommandExited Reason = "command-exited"
	// ReasonContextCancelled: the supervisor's context was cancelled (an
	// embedding program stops it; PID 1 itself never does).
	ReasonContextCancelled Reason = "context-cancelled"
)

// ExitCode is PID 1's exit status for a drain with reason r: 128+15 = 143
// after SIGTERM (the shell convention for death by a signal, what tini and
// a shell report), the command's own status (commandStatus) after
// ReasonCommandExited, 0 for every other reason (a planned exit, which a
// Job or a restartPolicy: OnFailure pod must not count as a failure).
func (r Reason) ExitCode(commandStatus int) int {
	switch r {
	case ReasonSIGTERM:
		return 128 + 15
	case ReasonCommandExited:
		return commandStatus
	}
	return 0
}

// Planned tells whether r ends a pod that has done its work (idle deadline
// or max jobs): only then may the pod delete itself.
func (r Reason) Planned() bool { return r == ReasonIdleTimeout || r == ReasonMaxJobs }

// Lease expiry reasons (Decision.ExpiryReason).
const (
	// ExpiryTimeout: the job's hard timeout (Lease.Expires) passed.
	ExpiryTimeout = "timeout"
	// ExpiryTTL: no Renew within Lease.TTL (LastRenew+TTL passed).
	ExpiryTTL = "lease_ttl"
)

// Config holds the Machine's policy. Negative values behave like zero.
type Config struct {
	// IdleTimeout is how long the pod may stay Idle (no lease, no activity)
	// before it drains with reason "idle-timeout". 0 = never drain on idleness.
	IdleTimeout time.Duration
	// MaxJobs is the number of jobs the pod runs in its life: when the
	// MaxJobs-th job is released the machine drains with reason "max-jobs".
	// 0 = unlimited.
	MaxJobs int
}

// Lease is the job currently holding the pod, as granted by Claim.
type Lease struct {
	// JobID names the job (non-empty).
	JobID string
	// Nonce is the claimant's idempotency token; a repeated Claim with the same
	// JobID and the same non-empty Nonce is a replay, not a conflict.
	Nonce string
	// Since is when the lease was granted.
	Since time.Time
	// Expires is the hard deadline, Since + the claim's timeout; the zero time
	// when the claim's timeout was <= 0 (no hard deadline).
	Expires time.Time
	// TTL is the heartbeat interval: with TTL > 0 the lease also expires at
	// LastRenew+TTL. 0 = no heartbeat needed.
	TTL time.Duration
	// LastRenew is the time of the last Renew, or Since before the first one.
	LastRenew time.Time
}

// expiry returns when and why the lease expires: the earlier of Expires and
// LastRenew+TTL (ties go to "timeout"), or the zero time when neither applies.
func (l Lease) expiry() (time.Time, string) {
	at, why := l.Expires, ExpiryTimeout
	if l.TTL > 0 {
		ttlAt := l.LastRenew.Add(l.TTL)
		if at.IsZero() || ttlAt.Before(at) {
			at, why = ttlAt, ExpiryTTL
		}
	}
	if at.IsZero() {
		return time.Time{}, ""
	}
	return at, why
}

// Machine is the lease + idle-deadline state machine. Not safe for concurrent
// use: the caller serialises every call (including the read-only ones) under
// one mutex. Times passed in should come from one clock (time.Now, whose
// monotonic reading makes comparisons immune to wall-clock jumps).
type Machine struct {
	cfg Config

	state    State
	lease    Lease
	hasLease bool

	idleSince    time.Time // entering Idle, or the last activity while Idle
	lastActivity time.Time // last Activity call in any state
	deadline     time.Time // idle deadline; meaningful only when armed
	armed        bool      // Idle and IdleTimeout > 0

	jobsRun     int
	drainReason Reason
}

// New returns a Machine that is Idle since now, with its idle deadline armed
// at now+cfg.IdleTimeout (when IdleTimeout > 0).
func New(cfg Config, now time.Time) *Machine {
	if cfg.IdleTimeout < 0 {
		cfg.IdleTimeout = 0
	}
	if cfg.MaxJobs < 0 {
		cfg.MaxJobs = 0
	}
	m := &Machine{cfg: cfg}
	m.enterIdle(now)
	return m
}

// enterIdle makes the machine Idle since now and re-arms the idle deadline.
func (m *Machine) enterIdle(now time.Time) {
	m.state = Idle
	m.idleSince = now
	m.armed = m.cfg.IdleTimeout > 0
	if m.armed {
		m.deadline = now.Add(m.cfg.IdleTimeout)
	}
}

// enterDraining makes the machine Draining with reason and disarms the idle
// deadline. A held lease stays held until Release.
func (m *Machine) enterDraining(reason Reason) {
	m.state = Draining
	m.drainReason = reason
	m.armed = false
}

// applyDeadline drains the machine when it is Idle with an armed deadline and
// now is at or past that deadline (exactly at the deadline counts). Every
// method that can change the state calls it first, so a late call can never
// "rescue" a pod whose deadline has already passed.
func (m *Machine) applyDeadline(now time.Time) {
	if m.state == Idle && m.armed && !now.Before(m.deadline) {
		m.enterDraining(ReasonIdleTimeout)
	}
}

// State returns the current state as of the last call that took a time; it
// does not apply a deadline that has passed since (Tick does).
func (m *Machine) State() State { return m.state }

// Activity records a sign of life at now (a byte on stdin, a foreign process in
// the pod). While Idle it moves IdleSince to now and pushes the idle deadline to
// now+IdleTimeout (never earlier than it was). While Busy or Draining it only
// records the time. Activity at or after an already-passed deadline does not
// revive the pod: the machine drains with reason "idle-timeout" first.
func (m *Machine) Activity(now time.Time) {
	m.applyDeadline(now)
	if now.After(m.lastActivity) {
		m.lastActivity = now
	}
	if m.state != Idle {
		return
	}
	if now.After(m.idleSince) {
		m.idleSince = now
	}
	if m.armed {
		if d := now.Add(m.cfg.IdleTimeout); d.After(m.deadline) {
			m.deadline = d
		}
	}
}

// Claim grants the lease to jobID (Idle → Busy) and disarms the idle deadline.
//
// First, if the machine is Idle and its armed idle deadline is at or before now,
// it becomes Draining (reason "idle-timeout") and Claim returns ErrDraining: a
// claim racing the deadline is either accepted (disarming the deadline) or
// refused, never both. Then:
//   - Draining → ErrDraining (also for a replay of the held lease);
//   - Busy with the same jobID and the same non-empty nonce → replay=true, nil:
//     an idempotent retry of a claim that already succeeded; the lease is not
//     changed;
//   - Busy otherwise → ErrBusy;
//   - empty jobID → ErrEmptyJobID.
//
// The state is unchanged on any error other than the deadline case above.
//
// timeout is the job's hard limit: Lease.Expires = now+timeout; timeout <= 0
// means no hard limit. ttl is the heartbeat interval: with ttl > 0 the lease
// also expires at LastRenew+ttl unless renewed; ttl <= 0 means no heartbeat.
func (m *Machine) Claim(jobID, nonce string, timeout, ttl time.Duration, now time.Time) (replay bool, err error) {
	m.applyDeadline(now)
	switch m.state {
	case Draining:
		return false, ErrDraining
	case Busy:
		if nonce != "" && jobID == m.lease.JobID && nonce == m.lease.Nonce {
			return true, nil
		}
		return false, ErrBusy
	}
	if jobID == "" {
		return false, ErrEmptyJobID
	}
	if ttl < 0 {
		ttl = 0
	}
	m.lease = Lease{JobID: jobID, Nonce: nonce, Since: now, TTL: ttl, LastRenew: now}
	if timeout > 0 {
		m.lease.Expires = now.Add(timeout)
	}
	m.hasLease = true
	m.state = Busy
	m.armed = false
	return false, nil
}

// Renew is the held job's heartbeat: it sets Lease.LastRenew to now, which
// pushes a TTL expiry to now+TTL. It never extends the hard timeout
// (Lease.Expires). Errors: ErrNoJob when no lease is held, or (wrapped) when the
// lease already expired at or before now, since an expired lease is not revived;
// ErrWrongJob when jobID is not the holder. Renew works while Draining if the
// lease is still held.
func (m *Machine) Renew(jobID string, now time.Time) error {
	if !m.hasLease {
		return ErrNoJob
	}
	if jobID != m.lease.JobID {
		return ErrWrongJob
	}
	if at, why := m.lease.expiry(); !at.IsZero() && !now.Before(at) {
		return &expiredError{reason: why}
	}
	if now.After(m.lease.LastRenew) {
		m.lease.LastRenew = now
	}
	return nil
}

// expiredError wraps ErrNoJob for a Renew of an expired lease.
type expiredError struct{ reason string }

func (e *expiredError) Error() string { return ErrNoJob.Error() + ": lease expired (" + e.reason + ")" }
func (e *expiredError) Unwrap() error { return ErrNoJob }

// Release ends the held lease and counts the job in Status.JobsRun. jobID ""
// releases whatever job is held. Busy → Idle, with IdleSince = now and the idle
// deadline re-armed at now+IdleTimeout; or Busy → Draining (reason "max-jobs")
// when this was the Config.MaxJobs-th job. While Draining the state stays
// Draining. Errors: ErrNoJob when no lease is held, ErrWrongJob when jobID is
// neither "" nor the holder; the machine is unchanged on error.
func (m *Machine) Release(jobID string, now time.Time) error {
	if !m.hasLease {
		return ErrNoJob
	}
	if jobID != "" && jobID != m.lease.JobID {
		return ErrWrongJob
	}
	m.hasLease = false
	m.lease = Lease{}
	m.jobsRun++
	switch {
	case m.state == Draining:
	case m.cfg.MaxJobs > 0 && m.jobsRun >= m.cfg.MaxJobs:
		m.enterDraining(ReasonMaxJobs)
	default:
		m.enterIdle(now)
	}
	return nil
}

// Abort undoes a Claim whose job could not be started (for example its
// shell failed to start): the lease is dropped without counting a job run
// and without triggering the max-jobs drain. Busy → Idle with the deadline
// re-armed from now (a failed start still counts as activity). Errors as
// for Release.
func (m *Machine) Abort(jobID string, now time.Time) error {
	if !m.hasLease {
		return ErrNoJob
	}
	if jobID != "" && jobID != m.lease.JobID {
		return ErrWrongJob
	}
	m.hasLease = false
	m.lease = Lease{}
	if m.state != Draining {
		m.enterIdle(now)
	}
	return nil
}

// Drain makes the machine Draining (e.g. on SIGTERM) and records reason
// ("requested" when empty). It is idempotent: once Draining, later calls change
// nothing, so the first reason is kept. A held lease stays held until Release;
// the caller decides whether to wait for or end the job.
func (m *Machine) Drain(reason Reason, now time.Time) {
	m.applyDeadline(now)
	if m.state == Draining {
		return
	}
	if reason == "" {
		reason = ReasonRequested
	}
	m.enterDraining(reason)
}

// Lease returns a copy of the held lease and true, or the zero Lease and false
// when no job holds it. A lease may still be held while Draining.
func (m *Machine) Lease() (Lease, bool) { return m.lease, m.hasLease }

// Decision is what Tick tells the caller to do.
type Decision struct {
	// ExpiredJob, when non-empty, is the job whose lease expired at or before
	// now (hard timeout or TTL). The machine keeps the lease (and stays Busy)
	// until the caller has ended the job and calls Release(ExpiredJob, now);
	// every Tick until then reports it again.
	ExpiredJob string
	// ExpiryReason is "timeout" or "lease_ttl" when ExpiredJob is set.
	ExpiryReason string
	// Drain is true exactly when the machine is Draining: the caller starts
	// (or continues) its drain.
	Drain bool
	// DrainReason is "idle-timeout", "max-jobs", or the reason given to Drain.
	DrainReason Reason
	// NextWake is the earliest instant after now at which Tick must be called
	// again: the idle deadline or the lease expiry. The zero time means no
	// timed wake-up is needed (only a call such as Release or Activity can
	// change anything).
	NextWake time.Time
}

// Tick applies time: when Idle with an armed idle deadline at or before now the
// machine becomes Draining (reason "idle-timeout"); when a lease is held and
// expired at or before now it is reported in ExpiredJob. Exactly at a deadline
// counts as passed; 1 ns before does not. Tick is idempotent for a given now.
func (m *Machine) Tick(now time.Time) Decision {
	m.applyDeadline(now)
	var d Decision
	if m.hasLease {
		if at, why := m.lease.expiry(); !at.IsZero() {
			if now.Before(at) {
				d.NextWake = at
			} else {
				d.ExpiredJob, d.ExpiryReason = m.lease.JobID, why
			}
		}
	}
	if m.state == Idle && m.armed {
		d.NextWake = m.deadline // no lease while Idle
	}
	if m.state == Draining {
		d.Drain, d.DrainReason = true, m.drainReason
	}
	return d
}

// Status is the JSON view of a Machine (for the status endpoint / CLI).
type Status struct {
	// State is "idle", "busy" or "draining".
	State string `json:"state"`
	// JobID is the job holding the lease, if any (also while Draining).
	JobID string `json:"job,omitempty"`
	// JobsRun counts released jobs.
	JobsRun int `json:"jobs_run"`
	// IdleSince is when the machine last entered Idle or last saw activity
	// while Idle; zero (absent from the JSON) while Busy or Draining, when
	// the last idle time says nothing about the pod (issue 39: a busy pod
	// showed the idle_since of before its job).
	IdleSince time.Time `json:"idle_since,omitzero"`
	// IdleDeadline is when an Idle machine drains; nil when IdleTimeout is 0
	// or the machine is Busy/Draining.
	IdleDeadline *time.Time `json:"idle_deadline,omitempty"`
	// DrainReason is set while Draining.
	DrainReason Reason `json:"drain_reason,omitempty"`
}

// Snapshot returns the status at now. Like Tick, it first applies an idle
// deadline at or before now, so a status never shows an Idle pod past its
// deadline.
func (m *Machine) Snapshot(now time.Time) Status {
	m.applyDeadline(now)
	s := Status{
		State:       m.state.String(),
		JobsRun:     m.jobsRun,
		DrainReason: m.drainReason,
	}
	if m.hasLease {
		s.JobID = m.lease.JobID
	}
	if m.state == Idle {
		s.IdleSince = m.idleSince
	}
	if m.state == Idle && m.armed {
		dl := m.deadline
		s.IdleDeadline = &dl
	}
	return s
}

// Ready reports whether the pod should pass its readiness probe at now: Idle,
// and either no idle deadline or now < deadline-margin. The margin (negative
// values act as 0) drops readiness before the drain, so the Service stops
// routing new jobs to a pod that is about to exit. Ready does not change the
// machine.
func (m *Machine) Ready(now time.Time, margin time.Duration) bool {
	if m.state != Idle {
		return false
	}
	if !m.armed {
		return true
	}
	if margin < 0 {
		margin = 0
	}
	return now.Before(m.deadline.Add(-margin))
}
