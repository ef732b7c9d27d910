// Package supervisor is PID 1's single owner of state: it ties the lease
// and idle deadline (package idle), the underlying shell (package
// shellproxy), the job's secrets (package tokens) and the control socket
// (package control) together, and decides when the pod drains.
package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/idle"
	"github.com/warmpod/warmpod/kube"
	"github.com/warmpod/warmpod/shellproxy"
	"golang.org/x/sys/unix"
)

// Config configures a Supervisor.
type Config struct {
	// Command is the underlying shell's argv (default /bin/sh).
	Command []string
	// Stdio is the shellproxy mode.
	Stdio shellproxy.Mode
	// IdleTimeout is how long the pod may stay idle before it drains
	// (0 = never).
	IdleTimeout time.Duration
	// Grace is how long processes get between SIGTERM and SIGKILL when a
	// job ends or the pod shuts down. It must stay below the pod's
	// terminationGracePeriodSeconds.
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
	// CleanupPaths are directory patterns (tokens.CheckCleanupPath) whose
	// contents are removed whenever a job ends, by job end, lease expiry,
	// cancel or drain; each job spec's cleanup_paths add to them.
	CleanupPaths []string
	// MaxJobs: after this many jobs the pod drains (0 = unlimited).
	MaxJobs int
	// ConfigHash, when set, must equal a job spec's config_hash.
	ConfigHash string
	// JobUser, when set, runs shells and stages as this user.
	JobUser *syscall.Credential
	// IgnoreIdleStdin drops stdin bytes while no job holds the lease
	// (counted and logged) instead of giving them to the idle shell.
	IgnoreIdleStdin bool
	// TerminationLog is where the one-line JSON exit reason goes
	// (terminationMessagePath, /dev/termination-log in a pod); written only
	// when the file exists, as the kubelet's bind mount makes it. Empty: off.
	TerminationLog string
	// SelfDelete is "auto" (delete the pod after an idle or max-jobs exit
	// when the downward-API env and a service-account token are present),
	// "always" (try, and log why it cannot) or "never".
	SelfDelete string
	// ServiceAccountDir holds token, ca.crt, namespace (default
	// /var/run/secrets/kubernetes.io/serviceaccount).
	ServiceAccountDir string
	// TestHooks enables test-only control operations (debug.stall).
	TestHooks bool
	// ProcRoot is where /proc is mounted (default "/proc").
	ProcRoot string
	// CgroupRoot is where the container's cgroup file system is mounted
	// (default "/sys/fs/cgroup"), for the OOM-kill counter.
	CgroupRoot string
	// Version is reported by status.
	Version string
	// Log receives warmpod's own messages.
	Log hclog.Logger
	// Stdin, Stdout, Stderr default to the process's own.
	Stdin, Stdout, Stderr *os.File
}

// Supervisor runs PID 1. Create with New, then Run.
type Supervisor struct {
	cfg    Config
	log    hclog.Logger
	reaper *shellproxy.Reaper
	proxy  *shellproxy.Proxy
	procs  procView

	opMu    sync.Mutex // serialises job start/end, expiry and drain
	mu      sync.Mutex // guards machine and job; held only briefly
	machine *idle.Machine
	job     *job   // the job holding the lease, nil when none
	scope   string // trust domain pinned by the first job (reuse with max-jobs != 1)
	baseEnv []string
	stall   chan time.Duration // test hook: stall the main loop

	snap      atomic.Pointer[snapshot]
	heartbeat atomic.Int64 // unix ns of the main loop's last turn
	wake      chan struct{}
	draining  chan struct{}
	drainOnce sync.Once
	drainWhy  atomic.Value // string
	expiring  atomic.Bool  // a lease-expiry clean-up is running
	exitCode  atomic.Int32
	termed    map[int]bool // got the pod's SIGTERM from onSignal; Run's goroutine only
	sweeping  atomic.Bool  // a job's processes are being terminated (killJobProcesses)
}

// snapshot is what probes and status read without taking any lock.
type snapshot struct {
	status idle.Status
	ready  bool
	at     time.Time
	dl     time.Time
}

// New prepares a Supervisor: it does not start anything yet.
func New(cfg Config) (*Supervisor, error) {
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"/bin/sh"}
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.JobsDir == "" {
		cfg.JobsDir = "/run/warmpod/jobs"
	}
	if cfg.LogsDir == "" {
		cfg.LogsDir = "/run/warmpod/logs"
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.Stdin == nil {
		cfg.Stdin, cfg.Stdout, cfg.Stderr = os.Stdin, os.Stdout, os.Stderr
	}
	s := &Supervisor{
		cfg:      cfg,
		log:      cfg.Log,
		reaper:   shellproxy.NewReaper(),
		procs:    newProcView(cfg.ProcRoot),
		wake:     make(chan struct{}, 1),
		draining: make(chan struct{}),
		baseEnv:  os.Environ(),
		stall:    make(chan time.Duration, 1),
	}
	now := time.Now()
	s.machine = idle.New(idle.Config{IdleTimeout: cfg.IdleTimeout, MaxJobs: cfg.MaxJobs}, now)
	s.heartbeat.Store(now.UnixNano())
	proxy, err := shellproxy.New(shellproxy.Config{
		Command: cfg.Command,
		Mode:    cfg.Stdio,
		Stdin:   cfg.Stdin, Stdout: cfg.Stdout, Stderr: cfg.Stderr,
		Respawn:    !cfg.ExitWithCommand,
		Credential: cfg.JobUser,
		Reaper:     s.reaper,
		Log:        cfg.Log.Named("shell"),
	})
	if err != nil {
		return nil, err
	}
	s.proxy = proxy
	s.publish(now)
	return s, nil
}

// forwarded are the signals PID 1 passes on to the shell's process group
// (DESIGN.md §4). SIGTERM is forwarded too and also starts the shutdown.
var forwarded = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2,
	unix.SIGALRM, unix.SIGCONT, unix.SIGWINCH,
}

// Run starts the shell and serves until the pod drains. It returns PID 1's
// exit status: 0 after an idle drain, 143 after SIGTERM, the command's
// status in plain-init mode (127/126 when it cannot be executed).
func (s *Supervisor) Run(ctx context.Context) int {
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			s.log.Warn("not PID 1 and cannot become a child subreaper: orphans will not be reaped", "error", err)
		} else {
			s.log.Info("not PID 1: running as child subreaper", "pid", os.Getpid())
		}
	}
	if caught := shellproxy.CatchIgnoredSignals(); len(caught) > 0 {
		s.log.Debug("inherited ignored signals reset for children", "signals", fmt.Sprint(caught))
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, append([]os.Signal{unix.SIGCHLD, unix.SIGTERM, unix.SIGPIPE, unix.SIGTTIN, unix.SIGTTOU, unix.SIGTSTP}, forwarded...)...)
	defer signal.Stop(sigs)

	if !s.cfg.ExitWithCommand {
		s.prepareDirs()
	}
	s.proxy.SetDiscardInput(s.cfg.IgnoreIdleStdin)
	if err := s.proxy.Start(s.baseEnv); err != nil {
		if s.cfg.ExitWithCommand {
			// Exactly one line on stderr, as a shell would print it.
			fmt.Fprintf(s.cfg.Stderr, "warmpod: %v\n", err)
			s.proxy.Close()
			return shellproxy.ExecErrorCode(err)
		}
		s.log.Error("cannot start the shell; retrying", "command", s.cfg.Command[0], "error", err)
	}
	s.log.Info("warm", "shell", s.cfg.Command[0], "stdio", string(s.proxy.Mode()), "idle_timeout", s.cfg.IdleTimeout, "pid", os.Getpid())

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	if !s.cfg.ExitWithCommand {
		// The /proc scan runs beside the loop that reaps and forwards
		// signals, so it never delays either.
		go s.watchActivity(ctx)
	}
	for {
		s.heartbeat.Store(time.Now().UnixNano())
		next := s.evaluate(time.Now())
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), time.Millisecond))
		}
		select {
		case sig := <-sigs:
			s.onSignal(sig.(unix.Signal))
		case <-tick.C:
			s.reaper.Reap() // insurance against coalesced SIGCHLDs
		case <-timer.C:
		case <-s.wake:
		case d := <-s.stall:
			s.log.Warn("test hook: stalling the main loop", "for", d)
			time.Sleep(d)
		case ex := <-s.proxy.Exited():
			s.log.Info("command exited", "code", ex.Code())
			s.exitCode.Store(int32(ex.Code()))
			s.startDrain("command-exited", ex.Code())
		case <-s.draining:
			return s.shutdown(sigs)
		case <-ctx.Done():
			s.startDrain("context-cancelled", 0)
		}
	}
}

func (s *Supervisor) onSignal(sig unix.Signal) {
	switch sig {
	case unix.SIGCHLD:
		s.reaper.Reap()
	case unix.SIGPIPE, unix.SIGTTIN, unix.SIGTTOU, unix.SIGTSTP:
		// Never stop or kill PID 1 for these (a closed stdout, tty access
		// from a background group).
	case unix.SIGTERM:
		s.log.Info("SIGTERM: shutting down", "grace", s.cfg.Grace)
		s.proxy.Freeze(nil) // a shell that exits on TERM is not replaced
		// A job-end sweep in progress has sent (or is sending) SIGTERM
		// to every job process, the shell's group included: forwarding
		// now would be a second one.
		if !s.sweeping.Load() {
			pgid := s.proxy.ShellPID()
			_ = s.proxy.Signal(unix.SIGTERM)
			s.recordTermed(pgid)
		}
		s.startDrain("sigterm", 128+int(unix.SIGTERM))
	case unix.SIGWINCH:
		s.proxy.Resize()
		_ = s.proxy.Signal(sig)
	default:
		s.log.Debug("forwarding signal", "signal", sig.String())
		_ = s.proxy.Signal(sig)
	}
}

// evaluate runs the lease/deadline machine and acts on its decision; it
// returns when it must run again.
func (s *Supervisor) evaluate(now time.Time) time.Time {
	s.mu.Lock()
	d := s.machine.Tick(now)
	s.mu.Unlock()
	s.publish(now)
	if d.ExpiredJob != "" && s.expiring.Swap(true) == false {
		go func() {
			defer s.expiring.Store(false)
			s.log.Warn("job lease expired", "job", d.ExpiredJob, "reason", d.ExpiryReason)
			_ = s.endJob(d.ExpiredJob, "expired ("+d.ExpiryReason+")", 0)
		}()
	}
	if d.Drain {
		code := 0
		if d.DrainReason == "sigterm" {
			code = 143
		}
		s.startDrain(d.DrainReason, code)
	}
	return d.NextWake
}

// watchActivity scans for activity once a second until the pod drains.
func (s *Supervisor) watchActivity(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastInput time.Time
	var usage idle.UsageTracker
	for {
		select {
		case <-tick.C:
			s.scanActivity(&lastInput, &usage)
			s.kick()
		case <-s.draining:
			return
		case <-ctx.Done():
			return
		}
	}
}

// scanActivity reports activity to the idle machine: stdin bytes, or a
// foreign process (not the idle shell, not warmpod's own clients) that
// appeared or used CPU or did I/O since the last scan. A foreign process
// that only sleeps (a leaked `kubectl exec` shell, a forgotten `sleep`)
// counts once, when first seen, so it cannot hold an idle pod up forever.
func (s *Supervisor) scanActivity(lastInput *time.Time, usage *idle.UsageTracker) {
	now := time.Now()
	active := false
	if in := s.proxy.LastInput(); in.After(*lastInput) {
		*lastInput = in
		active = true
	}
	if !active {
		shell := s.proxy.ShellPID()
		procs, err := s.procs.container()
		if err == nil {
			clients := s.procs.executorClients(procs)
			foreign := idle.Foreign(procs, func(p idle.Proc) bool {
				return p.PID == shell || clients[p.PID]
			})
			cur := make(map[int]idle.Usage, len(foreign))
			for _, p := range foreign {
				io, _ := idle.ReadIO(s.cfg.ProcRoot, p.PID)
				cur[p.PID] = idle.Usage{Start: p.Start, CPU: p.CPU, IO: io}
			}
			active = usage.Update(cur)
		}
	}
	if active {
		s.mu.Lock()
		s.machine.Activity(now)
		s.mu.Unlock()
		s.publish(now)
	}
}

// recordTermed notes which processes the SIGTERM just forwarded to process
// group pgid reached, so the shutdown sweep does not send them a second one
// (Run's goroutine only: onSignal and shutdown both run on it). The scan
// comes after the kill(2): a member forked before it got the signal; one
// forked in the microseconds between would be spared a TERM it never got
// and still be SIGKILLed after the grace period, as would a new process
// that reused a recorded PID before the sweep (the PID space would have to
// wrap within those milliseconds).
func (s *Supervisor) recordTermed(pgid int) {
	if pgid <= 1 {
		return
	}
	procs, err := s.procs.container()
	if err != nil {
		return
	}
	if s.termed == nil {
		s.termed = map[int]bool{}
	}
	for _, p := range procs {
		if p.PGID == pgid && p.State != 'Z' {
			s.termed[p.PID] = true
		}
	}
}

func (s *Supervisor) startDrain(reason string, code int) {
	s.drainOnce.Do(func() {
		s.drainWhy.Store(reason)
		if reason != "command-exited" {
			s.exitCode.Store(int32(code))
		}
		s.mu.Lock()
		s.machine.Drain(reason, time.Now())
		s.mu.Unlock()
		s.publish(time.Now())
		close(s.draining)
	})
}

// shutdown ends the job (if any), stops every process, and returns the exit
// status.
func (s *Supervisor) shutdown(sigs <-chan os.Signal) int {
	reason, _ := s.drainWhy.Load().(string)
	s.log.Info("draining", "reason", reason)
	// Keep reaping while processes die.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig == unix.SIGCHLD {
					s.reaper.Reap()
				}
			case <-time.After(100 * time.Millisecond):
				s.reaper.Reap()
			case <-stop:
				return
			}
		}
	}()
	s.opMu.Lock()
	jobID := ""
	s.mu.Lock()
	j := s.job
	if j != nil {
		jobID = j.spec.ID
	}
	jobsRun := s.machine.Snapshot(time.Now()).JobsRun
	s.mu.Unlock()
	s.proxy.Freeze(nil)
	s.stopPuts(j)
	// Everything but warmpod's own clients first; a client still reading
	// its answer (the `job end` that reached --max-jobs) gets time to exit
	// by itself, then whatever is left gets the same TERM → KILL.
	var clients map[int]bool
	if procs, err := s.procs.container(); err == nil {
		clients = s.procs.executorClients(procs)
	}
	n := s.procs.terminateExcept(func(p idle.Proc) bool { return clients[p.PID] }, s.termed, s.cfg.Grace)
	s.procs.waitGone(func(p idle.Proc) bool { return !clients[p.PID] }, 2*time.Second)
	n += s.procs.terminate(nil, time.Second)
	s.proxy.Stop(time.Second)
	s.wipeJob()
	s.opMu.Unlock()
	close(stop)
	s.reaper.Reap()
	s.proxy.Close()
	code := int(s.exitCode.Load())
	s.log.Info("exit", "reason", reason, "code", code, "terminated", n)
	s.writeTermination(kube.TerminationMessage{Reason: reason, ExitCode: code, Job: jobID, JobsRun: jobsRun, Version: s.cfg.Version})
	if code == 0 && (reason == idle.ReasonIdleTimeout || reason == idle.ReasonMaxJobs) {
		s.deleteSelf()
	}
	return code
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

// writeTermination writes the exit reason where the kubelet reads it.
func (s *Supervisor) writeTermination(m kube.TerminationMessage) {
	path := s.cfg.TerminationLog
	if path == "" {
		return
	}
	if _, err := os.Stat(path); err != nil {
		s.log.Debug("no termination log", "path", path, "error", err)
		return
	}
	if err := kube.WriteTerminationMessage(path, m); err != nil {
		s.log.Warn("cannot write the termination message", "error", err)
	}
}

// deleteSelf deletes the pod through the API server (--self-delete), so
// the garbage collector removes the Secrets and ConfigMaps it owns.
func (s *Supervisor) deleteSelf() {
	if s.cfg.SelfDelete == "never" {
		return
	}
	cfg, err := kube.FromEnv(os.Getenv, s.cfg.ServiceAccountDir)
	if err != nil {
		if s.cfg.SelfDelete == "always" || !errors.Is(err, kube.ErrNotInCluster) {
			s.log.Warn("pod not deleted", "error", err)
		} else {
			s.log.Debug("not in a cluster: no self-deletion", "error", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := cfg.DeleteSelf(ctx, s.log.Named("kube"))
	if err != nil {
		s.log.Warn("self-deletion", "result", string(res), "error", err)
		return
	}
	s.log.Info("self-deletion", "result", string(res), "pod", cfg.Pod.Namespace+"/"+cfg.Pod.Name)
}

// publish stores a lock-free snapshot for probes and status.
func (s *Supervisor) publish(now time.Time) {
	s.mu.Lock()
	st := s.machine.Snapshot(now)
	ready := s.machine.Ready(now, s.cfg.ReadyMargin)
	s.mu.Unlock()
	var dl time.Time
	if st.IdleDeadline != nil {
		dl = *st.IdleDeadline
	}
	s.snap.Store(&snapshot{status: st, ready: ready, at: now, dl: dl})
}

func (s *Supervisor) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// State returns "idle", "busy" or "draining".
func (s *Supervisor) State() string { return s.snap.Load().status.State }

// Live is the liveness check of the main loop: it fails when the loop has
// not turned for 5 s (it turns at least once a second).
func (s *Supervisor) Live() error {
	if age := time.Since(time.Unix(0, s.heartbeat.Load())); age > 5*time.Second {
		return fmt.Errorf("supervisor loop stalled for %s", age.Round(time.Second))
	}
	return nil
}

// Reaping is the liveness check of the reaper: it fails when no reap has
// run for 5 s.
func (s *Supervisor) Reaping() error {
	if age := time.Since(s.reaper.LastReap()); age > 5*time.Second {
		return fmt.Errorf("reaper idle for %s", age.Round(time.Second))
	}
	return nil
}

// Ready is the readiness check: nil only while idle and accepting a job,
// and not within ReadyMargin of the idle deadline.
func (s *Supervisor) Ready() error {
	sn := s.snap.Load()
	if sn.status.State != idle.Idle.String() {
		return errors.New(sn.status.State)
	}
	if !sn.dl.IsZero() && !time.Now().Before(sn.dl.Add(-s.cfg.ReadyMargin)) {
		return errors.New("idle deadline imminent")
	}
	return nil
}

// ShellUp is the readiness check that a shell is running.
func (s *Supervisor) ShellUp() error {
	if s.proxy.ShellPID() <= 1 {
		return errors.New("no shell")
	}
	return nil
}

// StatusJSON returns the status document: state, job id, jobs run, idle
// since, idle deadline, version. It never holds a secret.
func (s *Supervisor) StatusJSON() []byte {
	sn := s.snap.Load()
	doc := struct {
		idle.Status
		Version string `json:"version"`
		Stdio   string `json:"stdio"`
		Shell   int    `json:"shell_pid,omitempty"`
		Orphans uint64 `json:"orphans_reaped"`
	}{sn.status, s.cfg.Version, string(s.proxy.Mode()), s.proxy.ShellPID(), s.reaper.Orphans()}
	b, _ := json.Marshal(doc)
	return append(b, '\n')
}

// Handle serves one control request.
func (s *Supervisor) Handle(_ context.Context, peer control.Peer, req *control.Request) control.Response {
	if req.Job != "" && strings.HasPrefix(req.Op, "job.") && req.Op != control.OpJobStart {
		// A call for a named job is for that job only, and it is a
		// heartbeat for its lease.
		if err := s.Renew(req.Job); err != nil {
			code := control.ExitUnavailable
			if errors.Is(err, idle.ErrWrongJob) {
				code = control.ExitTempFail
			}
			return control.Response{Code: code, Error: fmt.Sprintf("job %q: %v", req.Job, err)}
		}
	}
	switch req.Op {
	case control.OpJobStart:
		return s.StartJob(req.Spec)
	case control.OpJobEnd:
		return s.EndJob(req.Job, peer.PID)
	case control.OpJobEnv:
		return s.JobEnv()
	case control.OpJobStage:
		return s.StartStage(req.Job, req.Stage, req.Argv, req.Dir, req.SHA256)
	case control.OpJobStatus:
		return s.JobStatus(req.Stage)
	case control.OpJobWait:
		d, err := parseDuration(req.Duration, time.Hour)
		if err != nil {
			return control.Response{Code: control.ExitUsage, Error: err.Error()}
		}
		return s.WaitStage(req.Stage, d)
	case control.OpJobCancel:
		d, err := parseDuration(req.Duration, s.cfg.Grace)
		if err != nil {
			return control.Response{Code: control.ExitUsage, Error: err.Error()}
		}
		if req.Stage != "" {
			return s.CancelStage(req.Job, req.Stage, peer.PID, d)
		}
		return s.CancelJob(req.Job, peer.PID, d)
	case control.OpJobPut:
		return s.StartPut(req.Job, peer, req.Path)
	case control.OpJobRenew:
		if err := s.Renew(req.Job); err != nil {
			code := control.ExitUnavailable
			if errors.Is(err, idle.ErrWrongJob) {
				code = control.ExitTempFail
			}
			return control.Response{Code: code, Error: err.Error()}
		}
		return control.Response{OK: true, Job: req.Job, State: s.State()}
	case control.OpStall:
		if !s.cfg.TestHooks {
			return control.Response{Code: control.ExitUsage, Error: "test hooks are off (WARMPOD_TEST_HOOKS=1)"}
		}
		d, err := parseDuration(req.Duration, time.Minute)
		if err != nil {
			return control.Response{Code: control.ExitUsage, Error: err.Error()}
		}
		select {
		case s.stall <- d:
		default:
		}
		return control.Response{OK: true}
	case control.OpStatus:
		return control.Response{OK: true, State: s.State(), Status: s.StatusJSON()}
	case control.OpProbe:
		var err error
		switch req.Probe {
		case "live":
			err = errors.Join(s.Live(), s.Reaping())
		case "ready":
			err = errors.Join(s.Ready(), s.ShellUp())
		default:
			return control.Response{Code: control.ExitUsage, Error: "probe: want live or ready"}
		}
		if err != nil {
			return control.Response{Code: 1, Error: err.Error(), State: s.State()}
		}
		return control.Response{OK: true, State: s.State()}
	}
	return control.Response{Code: control.ExitUsage, Error: fmt.Sprintf("unknown operation %q", req.Op)}
}

// parseDuration parses a Go duration, def when empty. Errors name the value.
func parseDuration(v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q: want a Go duration such as 30s", v)
	}
	return d, nil
}
