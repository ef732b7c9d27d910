// Package supervisor is PID 1's single owner of state: it ties the lease
// and idle deadline (package lease), the underlying shell (package
// shellproxy), the job's secrets (package jobspec) and the control socket
// (package control) together, and decides when the pod drains.
//
// One goroutine, Run's loop, owns every piece of mutable state (loopState:
// the lease.Machine, the job and its stages and uploads, the pinned scope,
// the pod's shutdown). Nothing else touches it and no lock guards it.
// Control handlers send the loop an op and wait for its reply; what takes
// time (a TERM → grace → KILL sweep, replacing the shell, waiting for a
// stage, deleting the pod) runs in a worker goroutine, one at a time, that
// gets only what it needs and posts its completion back to the loop.
// While a worker runs, ops that change the job (start, end, cancel, a
// stage, an upload) wait in order in a queue, and every other op
// (renewals, status, env, probes, signals, reaping) is served at once: no
// grace period ever holds the loop.
package supervisor

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/internal/fsuser"
	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/lease"
	"github.com/warmpod/warmpod/podapi"
	"github.com/warmpod/warmpod/shellproxy"
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
	// TmpDir is where each job's TMPDIR is made: a fresh 0700 directory
	// of the job user's, warmpod-job-<id>-<random>, removed when the job
	// ends. It belongs on the container's disk (cmd/warmpod: PID 1's own
	// $TMPDIR, else /tmp), because a job's temporary files (go test
	// binaries, archives, package downloads) outgrow JobsDir's memory
	// volume and would count against the pod's memory limit; a stock
	// Kubernetes executor's job has its /tmp on disk too. Empty, or when
	// the directory cannot be made there (no /tmp, a read-only root file
	// system): TMPDIR is JobsDir/<id>/tmp, and a warning says so.
	TmpDir string
	// ExitWithCommand makes warmpod a plain init: no respawn, exit with
	// the command's status.
	ExitWithCommand bool
	// LogsDir holds one 0700-protected output log per job (default
	// /run/warmpod/logs).
	LogsDir string
	// RuntimeDir is the control socket's directory (/run/warmpod): no
	// `job put` may write there, next to the socket.
	RuntimeDir string
	// CleanupPaths are directory patterns (jobspec.CheckCleanupPath) whose
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
	// cfg, log and fx are set by New and only read afterwards.
	cfg Config
	log *initlog.Logger
	fx  Effects

	ops     chan op       // requests for the loop (control handlers, the loop's own)
	events  chan func()   // completions of workers and watchers, run by the loop
	notes   chan received // signals Forward has already acted on
	stopped chan struct{} // closed when the loop has ended

	// fwd is what the signal thread reads and writes (under its mutex)
	// to forward a signal without waiting for the loop.
	fwd forwardGate

	// Written by the loop, read lock-free by probes and status.
	snap      atomic.Pointer[snapshot]
	heartbeat atomic.Int64 // unix ns of the loop's last turn

	// ls is the loop's own state: only Run's goroutine reads or writes it.
	ls loopState

	// onBroken, when set (by a test, before Run), is told of every broken
	// invariant of the loop's state besides PID 1's log (see broken). Read
	// on the loop only.
	onBroken func(error)
}

// New prepares a Supervisor around the given effects: it starts nothing.
// The effects must all be set.
func New(cfg Config, fx Effects, log *initlog.Logger) *Supervisor {
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
		log = initlog.Discard()
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
		ls:      loopState{machine: lease.New(lease.Config{IdleTimeout: cfg.IdleTimeout, MaxJobs: cfg.MaxJobs}, now)},
	}
	s.heartbeat.Store(now.UnixNano())
	s.publish(now)
	return s
}

// Run starts the shell and serves until the pod drains. sigs carries the
// signals os/signal delivers (cmd/warmpod subscribes to every catchable
// one); a signal the signal thread takes first reaches Forward instead.
// forward decides which are forwarded. It returns PID 1's exit status
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

	// The loop has ended: this goroutine is its last owner, and reads its
	// state once more for the exit.
	s.fx.Children.Reap()
	s.fx.Shell.Close()
	reason := s.ls.drainReason()
	code := reason.ExitCode(s.ls.status)
	s.log.Info("exit", "reason", reason, "code", code, "terminated", s.ls.swept)
	st := s.snap.Load().status
	s.fx.Pod.Terminated(podapi.TerminationMessage{Reason: string(reason), ExitCode: code, Job: st.JobID, JobsRun: st.JobsRun, Version: s.cfg.Version})
	if code == 0 && reason.Planned() {
		dctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		going := s.fx.Pod.DeleteSelf(dctx)
		cancel()
		if going && !s.ls.termSeen {
			s.awaitStop(ctx, sigs)
		}
	}
	return code
}

// deletedWait bounds how long PID 1 waits, after deleting its own pod,
// for the kubelet to stop its container. The kubelet sees a deletion
// through its watch of the API server and stops the container at once,
// normally within a second; the bound is for a kubelet that never does
// (a static pod's mirror, a kubelet cut from the API server), after which
// PID 1 exits as it used to.
const deletedWait = 30 * time.Second

// awaitStop keeps PID 1 alive after it has deleted its own pod until the
// kubelet stops the container (the container's stop signal: SIGTERM
// unless its spec names another) or deletedWait has passed, reaping
// meanwhile. Exiting at once races the kubelet: a container that exits
// before the kubelet has seen its pod's deletion is, to the kubelet, a
// running pod's container that ended, and restartPolicy Always (every
// Deployment's pod) restarts it. That is a restart count alerts watch
// (kube-state-metrics' restarts, KubePodCrashLooping) and a fresh PID 1,
// warm, in a pod that is being deleted after its one job; seen on
// kube-e2e under load as restartCount 1 on a pool pod after its job.
// The exit code stays the drain's (0): the termination message is
// written already.
func (s *Supervisor) awaitStop(ctx context.Context, sigs <-chan os.Signal) {
	t := time.NewTimer(deletedWait)
	defer t.Stop()
	// The liveness checks read the loop's heartbeat and the last reap: a
	// kubelet slow to see the deletion must not find PID 1 dead (and
	// restart the container, the very thing this wait avoids).
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.heartbeat.Store(time.Now().UnixNano())
		select {
		case <-tick.C:
			s.fx.Children.Reap()
		case sig := <-sigs:
			if us, ok := sig.(unix.Signal); ok && stopsDeleted(us) {
				s.log.Debug("stopped after self-deletion", "signal", us)
				return
			}
			s.fx.Children.Reap() // SIGCHLD: an orphan the sweep left, reparented to PID 1
		case r := <-s.notes:
			// The signal thread's: the loop has ended, this is their
			// reader now.
			if stopsDeleted(r.sig) {
				s.log.Debug("stopped after self-deletion", "signal", r.sig)
				return
			}
		case <-ctx.Done():
			return
		case <-t.C:
			s.log.Warn("the kubelet did not stop the container after the pod's deletion; exiting", "waited", deletedWait)
			return
		}
	}
}

// stopsDeleted tells which signals end awaitStop: any the kubelet may
// send as a container's stop signal, that is every signal PID 1 would
// forward but the two that never mean "stop" (SIGWINCH, a terminal
// resize; SIGCONT).
func stopsDeleted(sig unix.Signal) bool {
	return !notForwarded(sig) && sig != unix.SIGWINCH && sig != unix.SIGCONT
}

// prepareDirs creates the jobs directory (0711: a job user may traverse
// to its own job directory) and the logs directory (0700) before any job
// code runs, owned by PID 1, whatever a writable emptyDir held before.
// With a job user the jobs directory is 01770 and its group the job
// user's (jobsDirMode), so PID 1 can make each job's directory as that
// user without CAP_CHOWN.
func (s *Supervisor) prepareDirs() {
	jobsMode, jobsGid := s.jobsDirMode()
	for _, d := range []struct {
		path string
		mode os.FileMode
		gid  int
	}{{s.cfg.JobsDir, jobsMode, jobsGid}, {s.cfg.LogsDir, 0o700, os.Getegid()}} {
		err := os.MkdirAll(d.path, d.mode)
		if err == nil && d.gid == os.Getegid() {
			err = os.Lchown(d.path, os.Geteuid(), d.gid)
		} else if err == nil {
			// Root may give its own directory to a group it is a member
			// of without CAP_CHOWN: fsuser makes it one, on one thread.
			err = fsuser.Do(0, d.gid, func() error { return os.Lchown(d.path, os.Geteuid(), d.gid) })
		}
		if err == nil {
			err = os.Chmod(d.path, d.mode)
		}
		if err != nil {
			s.log.Warn("cannot prepare directory", "path", d.path, "error", err)
		}
	}
}

// jobsDirMode is the jobs directory's mode and group: 0711 and PID 1's
// group; with a job user 01770 and the job user's group, so that the job
// user (the only member of that group that runs in the pod besides PID 1)
// may create its job's directory there and remove it (os.RemoveAll reads
// the parent: the names it sees are its own jobs'), and cannot remove or
// rename what it does not own (sticky).
func (s *Supervisor) jobsDirMode() (os.FileMode, int) {
	if u := s.cfg.JobUser; u != nil {
		return 0o770 | os.ModeSticky, int(u.Gid)
	}
	return 0o711, os.Getegid()
}

// asJobUser runs fn with the job user's file-system identity when there
// is one (package fsuser: what fn creates is the job user's, without
// CAP_CHOWN, and it may remove what the job user made without
// CAP_DAC_OVERRIDE), else as PID 1.
func (s *Supervisor) asJobUser(fn func() error) error {
	u := s.cfg.JobUser
	if u == nil {
		return fn()
	}
	return fsuser.Do(int(u.Uid), int(u.Gid), fn)
}
