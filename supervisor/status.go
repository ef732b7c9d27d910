package supervisor

import (
	"errors"
	"fmt"
	"time"

	"github.com/warmpod/warmpod/internal/jsonenc"
	"github.com/warmpod/warmpod/lease"
)

// snapshot is what probes and status read without going through the loop.
type snapshot struct {
	status lease.Status
	dl     time.Time
}

// publish stores a lock-free snapshot for probes and status (loop only).
func (s *Supervisor) publish(now time.Time) {
	st := s.ls.machine.Snapshot(now)
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

// podStatus is the status document: the machine's view, and what PID 1
// adds to it. It never holds a secret.
type podStatus struct {
	lease.Status
	Version string `json:"version"`             // Config.Version
	Stdio   string `json:"stdio"`               // the shell's stdio mode
	Shell   int    `json:"shell_pid,omitempty"` // the current shell, absent when none
	// ShellError is why no shell runs: the last start's error (the
	// command not found: `warmpod -- stauts`); absent while one runs.
	ShellError string `json:"shell_error,omitempty"`
	Orphans    uint64 `json:"orphans_reaped"` // re-parented processes reaped
}

// podStatus reads the status document from the snapshot and the effects
// (any goroutine).
func (s *Supervisor) podStatus() podStatus {
	sn := s.snap.Load()
	st := podStatus{Status: sn.status, Version: s.cfg.Version, Stdio: string(s.fx.Shell.Mode()),
		Shell: s.fx.Shell.ShellPID(), Orphans: s.fx.Children.Orphans()}
	if err := s.fx.Shell.StartError(); err != nil && st.Shell == 0 {
		st.ShellError = err.Error()
	}
	return st
}

// StatusJSON returns the status document as one JSON line: state, job id,
// jobs run, idle since, idle deadline, version (the probe server's
// /status; the status operation carries the same document).
func (s *Supervisor) StatusJSON() []byte {
	st := s.podStatus()
	return append(st.AppendJSON(nil), '\n')
}

// AppendJSON appends the status document as encoding/json.Marshal writes
// it, the embedded lease.Status's members first (jsonenc; status_test.go
// compares the two).
func (p *podStatus) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.String("state", p.State)
	o.OmitEmpty("job", p.JobID)
	o.Int("jobs_run", int64(p.JobsRun))
	if !p.IdleSince.IsZero() {
		o.Time("idle_since", p.IdleSince)
	}
	if p.IdleDeadline != nil {
		o.Time("idle_deadline", *p.IdleDeadline)
	}
	if p.DrainReason != "" {
		o.String("drain_reason", string(p.DrainReason))
	}
	o.String("version", p.Version)
	o.String("stdio", p.Stdio)
	if p.Shell != 0 {
		o.Int("shell_pid", int64(p.Shell))
	}
	o.OmitEmpty("shell_error", p.ShellError)
	o.Uint("orphans_reaped", p.Orphans)
	return o.End()
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
