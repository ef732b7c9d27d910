package supervisor

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warmpod/warmpod/jobspec"
	"github.com/warmpod/warmpod/lease"
	"github.com/warmpod/warmpod/procscan"
)

// jobPhase is where the job holding the lease is in its life. The machine
// says Busy for all of them: Starting → Running → Ending, after which the
// lease is released and the pod is Idle or Draining. A cancel happens
// while Running (job.cancelled).
type jobPhase int

const (
	// phaseStarting: claimed; a worker writes its files and replaces the
	// shell. Only the worker touches spec and env.
	phaseStarting jobPhase = iota
	// phaseRunning: stages, uploads and env are served (until cancelled).
	phaseRunning
	// phaseEnding: a worker kills the job's processes and wipes its
	// secrets. Only the worker touches spec and env; status is served.
	phaseEnding
)

// job is the job holding the lease. Owned by the loop, except spec and env
// while a worker of phaseStarting or phaseEnding has them. id, dir,
// logPath and digest are set at claim and never change.
type job struct {
	id      string
	spec    *jobspec.Spec
	dir     string   // JobsDir/<id>: file variables and TMPDIR, 0700, the job user's
	logPath string   // LogsDir/<id>.log: the stages' output, PID 1's
	env     []string // the job's full environment (base + variables + token + TMPDIR)
	digest  [32]byte // SHA-256 of the spec: a replay must be byte-identical
	phase   jobPhase
	// cancelled: job cancel began; no job code runs from then on, only
	// status, logs and end remain.
	cancelled bool
	stages    map[string]*stage
	order     []string
	puts      map[*inflightPut]bool // job puts in flight (StartPut)
}

// inflight lists the uploads in flight.
func (j *job) inflight() []*inflightPut {
	out := make([]*inflightPut, 0, len(j.puts))
	for p := range j.puts {
		out = append(out, p)
	}
	return out
}

// Started is the outcome of StartJob.
type Started struct {
	ID      string
	LogPath string // the job's output log
	Replay  bool   // a byte-identical start of the job already running
}

// StartJob claims the lease for the spec in raw and gives the job a fresh
// shell holding its token and variables. Errors: ErrInvalid for a bad
// spec (naming the field); lease.ErrBusy when another job holds the lease;
// ErrRefused when the config hash differs, the scope is not the pod's, or
// a replay (same id and nonce) differs in any byte; lease.ErrDraining when
// draining; an internal error when the job's files or shell cannot be
// made (the lease is released again). PID 1's state is unchanged by any
// refusal, and the spec's secrets are wiped whenever it is not started.
func (s *Supervisor) StartJob(raw []byte) (Started, error) {
	spec, err := jobspec.ParseSpec(raw)
	if err != nil {
		return Started{}, errorf(ErrInvalid, "%v", err)
	}
	digest := sha256.Sum256(raw)
	ran := false
	r, err := call(s, true, func(reply func(Started, error)) {
		ran = true
		s.startJob(spec, digest, reply)
	})
	if !ran {
		spec.Wipe() // the loop ended before it took the spec
	}
	return r, err
}

func (s *Supervisor) startJob(spec *jobspec.Spec, digest [32]byte, reply func(Started, error)) {
	refuse := func(err error) {
		spec.Wipe()
		reply(Started{}, err)
	}
	if s.cfg.ConfigHash != "" && spec.ConfigHash != s.cfg.ConfigHash {
		refuse(errorf(ErrRefused, "config_hash %q does not match this pod's %q: the pod was made from another executor configuration", spec.ConfigHash, s.cfg.ConfigHash))
		return
	}
	if s.cfg.MaxJobs != 1 && s.scope != "" && spec.Scope != s.scope && s.job == nil {
		refuse(errorf(ErrRefused, "scope %q: this pod is pinned to scope %q", spec.Scope, s.scope))
		return
	}
	now := time.Now()
	replay, err := s.machine.Claim(spec.ID, spec.Nonce, spec.Timeout, spec.LeaseTTL, now)
	if replay {
		if s.job == nil || s.job.digest != digest {
			refuse(errorf(ErrRefused, "replay of job %s with the same nonce but a different spec", strconv.Quote(spec.ID)))
			return
		}
		spec.Wipe()
		reply(Started{ID: spec.ID, Replay: true}, nil)
		return
	}
	if err != nil {
		refuse(err)
		return
	}
	j := &job{
		id:      spec.ID,
		spec:    spec,
		dir:     filepath.Join(s.cfg.JobsDir, spec.ID),
		logPath: filepath.Join(s.cfg.LogsDir, spec.ID+".log"),
		digest:  digest,
		phase:   phaseStarting,
		stages:  map[string]*stage{},
	}
	s.job = j
	s.publish(now)
	var startErr error
	s.work("job start", func() {
		startErr = s.prepareJob(j)
		if startErr != nil {
			spec.Wipe()
			s.removeJobFiles(j.id)
			_ = s.fx.Shell.Replace(s.cfg.BaseEnv, s.cfg.Grace)
		}
	}, func() {
		if startErr != nil {
			s.log.Error("job start failed; lease released", "job", j.id, "error", startErr)
			s.job = nil
			_ = s.machine.Abort(j.id, time.Now())
			s.publish(time.Now())
			reply(Started{}, fmt.Errorf("job start failed: %w", startErr))
			return
		}
		j.phase = phaseRunning
		if s.scope == "" {
			s.scope = spec.Scope
		}
		if dropped := s.fx.Shell.SetDiscardInput(false); dropped > 0 {
			s.log.Info("stdin bytes dropped while idle", "bytes", dropped)
		}
		s.publish(time.Now())
		s.log.Info("job started", "job", j.id, "variables", len(spec.Variables), "timeout", spec.Timeout, "lease_ttl", spec.LeaseTTL)
		reply(Started{ID: j.id, LogPath: j.logPath}, nil)
	})
}

// prepareJob lays out the job's directory and log and replaces the idle
// shell with the job's shell (a worker: it may wait the grace period for
// the idle shell to go).
func (s *Supervisor) prepareJob(j *job) error {
	if err := os.MkdirAll(s.cfg.JobsDir, 0o711); err != nil {
		return err
	}
	if err := j.spec.WriteFiles(j.dir); err != nil {
		return err
	}
	tmp := filepath.Join(j.dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	if u := s.cfg.JobUser; u != nil {
		if err := chownTree(j.dir, int(u.Uid), int(u.Gid)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(s.cfg.LogsDir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(j.logPath, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_ = f.Close()
	j.env = append(append([]string(nil), s.cfg.BaseEnv...), s.jobEnv(j)...)
	return s.fx.Shell.Replace(j.env, s.cfg.Grace)
}

// jobEnv is what a job adds to the base environment: its variables, its
// token and TMPDIR (unless a variable sets it).
func (s *Supervisor) jobEnv(j *job) []string {
	env := j.spec.Env(s.cfg.TokenEnv, j.dir)
	if !hasKey(env, "TMPDIR") {
		env = append(env, "TMPDIR="+filepath.Join(j.dir, "tmp"))
	}
	return env
}

func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// Ended is the outcome of EndJob and CancelJob.
type Ended struct {
	ID     string
	Status json.RawMessage // CancelJob: the job's status document
}

// EndJob ends the current job for the client whose PID is peer: every
// container process except PID 1, warmpod's own clients and the caller's
// ancestry gets SIGTERM, then SIGKILL after the grace; the secrets are
// zeroed, the job's directory and log removed, and a fresh idle shell
// started (or the pod drains when --max-jobs is reached). Errors:
// lease.ErrNoJob when no job holds the lease, lease.ErrWrongJob when jobID
// names another job.
func (s *Supervisor) EndJob(jobID string, peer int) (Ended, error) {
	return call(s, true, func(reply func(Ended, error)) { s.endJob(jobID, "job end", peer, reply) })
}

func (s *Supervisor) endJob(jobID, why string, peer int, reply func(Ended, error)) {
	held, ok := s.machine.Lease()
	if !ok {
		reply(Ended{}, lease.ErrNoJob)
		return
	}
	if jobID != "" && jobID != held.JobID {
		reply(Ended{}, lease.ErrWrongJob)
		return
	}
	j := s.job
	var puts []*inflightPut
	if j != nil {
		j.phase = phaseEnding
		puts = j.inflight()
	}
	// From here until the sweep is done, a SIGTERM is not forwarded: the
	// sweep sends every job process (the shell's group included) its TERM.
	s.setSweeping(true)
	l := s.termed.clone()
	n := 0
	s.work("job end", func() {
		// No job shell may be respawned with the job's environment from
		// here on.
		s.fx.Shell.Freeze(s.cfg.BaseEnv)
		// Uploads of this job die with it: none may land in the next job.
		s.stopPuts(j, puts)
		n = s.killJobProcesses(peer, l, s.cfg.Grace)
		s.post(func() { s.setSweeping(false) })
		s.wipe(j)
		s.fx.Shell.SetDiscardInput(s.cfg.IgnoreIdleStdin)
	}, func() {
		s.setSweeping(false)
		s.job = nil
		now := time.Now()
		_ = s.machine.Release(held.JobID, now)
		s.publish(now)
		done := func() {
			s.log.Info("job ended", "job", held.JobID, "reason", why, "terminated", n, "duration", time.Since(held.Since).Round(time.Millisecond))
			reply(Ended{ID: held.JobID}, nil)
		}
		if s.machine.State() == lease.Draining {
			done()
			return
		}
		s.work("idle shell", func() {
			if err := s.fx.Shell.Replace(s.cfg.BaseEnv, s.cfg.Grace); err != nil {
				s.log.Error("cannot start the idle shell", "error", err)
			}
		}, done)
	})
}

// killJobProcesses sends SIGTERM (SIGKILL after grace) to every container
// process except PID 1, warmpod's clients and the ancestry of the client
// peer (a worker). Daemons that double-forked away were re-parented to
// PID 1 and are included. l says who had a SIGTERM already (the pod's,
// forwarded just before the sweep began; a stage cancel's) and who was
// running at the first one: none gets a second, and a process started
// after it gets none (termLedger).
func (s *Supervisor) killJobProcesses(peer int, l *termLedger, grace time.Duration) int {
	keep := map[int]bool{}
	if procs, err := s.fx.Procs.List(); err == nil {
		if peer > 1 {
			keep = ancestors(procs, peer)
		}
		for pid := range s.fx.Procs.Clients(procs) {
			keep[pid] = true
		}
	}
	n := s.terminate(func(p procscan.Proc) bool { return keep[p.PID] }, l, grace)
	s.fx.Children.Reap()
	return n
}

// CancelJob kills every process of the job (SIGTERM, SIGKILL after grace)
// and records the cancellation; the job keeps the lease (its log and
// status stay readable) until job end, with a fresh job shell. Errors as
// EndJob.
func (s *Supervisor) CancelJob(jobID string, peer int, grace time.Duration) (Ended, error) {
	return call(s, true, func(reply func(Ended, error)) {
		j, err := s.current(jobID)
		if err != nil {
			reply(Ended{}, err)
			return
		}
		j.cancelled = true
		s.setSweeping(true)
		l := s.termed.clone()
		puts := j.inflight()
		var stages []<-chan struct{}
		for _, st := range j.stages {
			stages = append(stages, st.done)
		}
		n := 0
		s.work("job cancel", func() {
			s.fx.Shell.Freeze(nil)
			s.stopPuts(j, puts) // an upload must not land after the wipe below
			n = s.killJobProcesses(peer, l, grace)
			s.post(func() { s.setSweeping(false) })
			// No job code runs from here on: the executor's copies of
			// the token go now, not at the job end that may never come.
			s.wipeCleanupPaths(j)
			waitAll(stages, 2*time.Second)
			if err := s.fx.Shell.Replace(j.env, s.cfg.Grace); err != nil {
				s.log.Error("cannot restart the job shell", "error", err)
			}
		}, func() {
			s.setSweeping(false)
			s.log.Info("job cancelled", "job", j.id, "terminated", n)
			reply(Ended{ID: j.id, Status: s.jobStatusJSON(j)}, nil)
		})
	})
}

// current returns the job holding the lease, which must be jobID when
// that is set, in a phase that takes operations (loop only). Errors:
// lease.ErrNoJob, lease.ErrWrongJob.
func (s *Supervisor) current(jobID string) (*job, error) {
	held, ok := s.machine.Lease()
	j := s.job
	if !ok || j == nil || j.phase == phaseStarting || j.phase == phaseEnding {
		return nil, lease.ErrNoJob
	}
	if jobID != "" && jobID != held.JobID {
		return nil, lease.ErrWrongJob
	}
	return j, nil
}

// waitAll waits up to d for every channel to be closed.
func waitAll(chs []<-chan struct{}, d time.Duration) {
	deadline := time.After(d)
	for _, ch := range chs {
		select {
		case <-ch:
		case <-deadline:
			return
		}
	}
}

// wipe zeroes the job's secrets and removes its files, log and cleanup
// paths (a worker, after the job's processes are gone).
func (s *Supervisor) wipe(j *job) {
	if j == nil {
		return
	}
	s.wipeCleanupPaths(j)
	j.spec.Wipe()
	for i := range j.env {
		j.env[i] = ""
	}
	s.removeJobFiles(j.id)
}

// wipeCleanupPaths removes the contents of the pod's and the job's cleanup
// paths (a worker, after the job's processes are gone so none writes a new
// copy behind the wipe). PID 1's own directories are never wiped.
func (s *Supervisor) wipeCleanupPaths(j *job) {
	patterns := append(append([]string(nil), s.cfg.CleanupPaths...), j.spec.CleanupPaths...)
	if len(patterns) == 0 {
		return
	}
	protect := []string{filepath.Dir(s.cfg.JobsDir), s.cfg.JobsDir, s.cfg.LogsDir}
	n, err := jobspec.WipeCleanupPaths(patterns, protect)
	if err != nil {
		s.log.Error("cleanup paths not fully wiped", "job", j.id, "removed", n, "error", err)
		return
	}
	s.log.Debug("cleanup paths wiped", "job", j.id, "removed", n)
}

func (s *Supervisor) removeJobFiles(id string) {
	if id == "" {
		return
	}
	if err := jobspec.RemoveFiles(filepath.Join(s.cfg.JobsDir, id)); err != nil {
		s.log.Error("cannot remove job directory", "job", id, "error", err)
	}
	if err := os.Remove(filepath.Join(s.cfg.LogsDir, id+".log")); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("cannot remove job log", "job", id, "error", err)
	}
}

// JobInfo is what JobEnv and JobStatus tell about the current job.
type JobInfo struct {
	ID      string
	Env     []string        // JobEnv: its variables, token and TMPDIR ("KEY=VALUE")
	User    string          // the job user as "UID:GID", "" when none
	LogPath string          // the job's output log
	Dir     string          // JobStatus: the job's directory
	Status  json.RawMessage // JobStatus: the job's, or one stage's, status document
}

// JobEnv returns the current job's environment and user. Errors:
// lease.ErrNoJob, ErrCancelled.
func (s *Supervisor) JobEnv() (JobInfo, error) {
	return call(s, false, func(reply func(JobInfo, error)) {
		j, err := s.current("")
		switch {
		case err != nil:
			reply(JobInfo{}, err)
		case j.cancelled:
			reply(JobInfo{}, errorf(ErrCancelled, "job cancelled: only status, logs and end remain"))
		default:
			reply(JobInfo{ID: j.id, Env: s.jobEnv(j), User: s.jobUser(), LogPath: j.logPath}, nil)
		}
	})
}

func (s *Supervisor) jobUser() string {
	if u := s.cfg.JobUser; u != nil {
		return fmt.Sprintf("%d:%d", u.Uid, u.Gid)
	}
	return ""
}

// Renew is the lease heartbeat of jobID. Errors as lease.Machine.Renew.
func (s *Supervisor) Renew(jobID string) error {
	_, err := call(s, false, func(reply func(struct{}, error)) {
		reply(struct{}{}, s.machine.Renew(jobID, time.Now()))
	})
	return err
}

// JobStatus returns the job's status document, or one stage's with stage
// set, also while the job ends. Errors: lease.ErrNoJob, ErrNoStage.
func (s *Supervisor) JobStatus(stage string) (JobInfo, error) {
	return call(s, false, func(reply func(JobInfo, error)) {
		j := s.job
		if j == nil || j.phase == phaseStarting {
			reply(JobInfo{}, lease.ErrNoJob)
			return
		}
		info := JobInfo{ID: j.id, LogPath: j.logPath, Dir: j.dir, User: s.jobUser()}
		if stage == "" {
			info.Status = s.jobStatusJSON(j)
		} else if st := j.stages[stage]; st != nil {
			info.Status, _ = json.Marshal(st.view())
		} else {
			reply(JobInfo{}, errorf(ErrNoStage, "no stage %q", stage))
			return
		}
		reply(info, nil)
	})
}

// jobStatusJSON is the job's status document (loop only).
func (s *Supervisor) jobStatusJSON(j *job) json.RawMessage {
	doc := struct {
		Job       string      `json:"job"`
		Cancelled bool        `json:"cancelled"`
		Log       string      `json:"log"`
		Stages    []stageView `json:"stages"`
	}{Job: j.id, Cancelled: j.cancelled, Log: j.logPath, Stages: []stageView{}}
	for _, name := range j.order {
		doc.Stages = append(doc.Stages, j.stages[name].view())
	}
	b, _ := json.Marshal(doc)
	return b
}

// hasKey tells whether env ("KEY=VALUE" entries) sets key.
func hasKey(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}
