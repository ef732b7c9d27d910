package supervisor

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/warmpod/warmpod/jobspec"
)

// job is the job holding the lease. Owned by the loop, except spec and env
// while a worker of jobStarting or jobEnding has them. id, dir, logPath
// and digest are set at claim and never change.
type job struct {
	id      string
	spec    *jobspec.Spec
	dir     string   // JobsDir/<id>: file variables (and TMPDIR without TmpDir), 0700, the job user's
	tmp     string   // the job's TMPDIR, set by prepareJob: under TmpDir, or dir/tmp
	logPath string   // LogsDir/<id>.log: the stages' output, PID 1's
	env     []string // the job's full environment (base + variables + token + TMPDIR)
	digest  [32]byte // SHA-256 of the spec: a replay must be byte-identical
	// phase is where the job is in its life, changed by moveJob only;
	// from is the phase it left for phase, so an ending job still tells
	// whether it was cancelled.
	phase, from jobPhase
	stages      map[string]*stage
	order       []string
	puts        map[*inflightPut]bool // job puts in flight (StartPut)
}

// cancelled tells whether job cancel began for j: it is cancelled, or it
// ends after a cancel. The status document says so until the job is gone.
func (j *job) cancelled() bool {
	return j.phase == jobCancelled || (j.phase == jobEnding && j.from == jobCancelled)
}

// inflight lists the uploads in flight.
func (j *job) inflight() []*inflightPut {
	out := make([]*inflightPut, 0, len(j.puts))
	for p := range j.puts {
		out = append(out, p)
	}
	return out
}

// release moves j, the current job, to jobReleased and forgets it (loop
// only). The job is gone whether or not the move was legal.
func (s *Supervisor) release(j *job) {
	_ = s.moveJob(j, jobReleased)
	s.ls.job = nil
}

// Started is the outcome of StartJob.
type Started struct {
	ID      string // the job's id
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
	if s.cfg.MaxJobs != 1 && s.ls.scope != "" && spec.Scope != s.ls.scope && s.ls.job == nil {
		refuse(errorf(ErrRefused, "scope %q: this pod is pinned to scope %q", spec.Scope, s.ls.scope))
		return
	}
	now := time.Now()
	replay, err := s.ls.machine.Claim(spec.ID, spec.Nonce, spec.Timeout, spec.LeaseTTL, now)
	if replay {
		if s.ls.job == nil || s.ls.job.digest != digest {
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
		phase:   jobStarting,
		stages:  map[string]*stage{},
	}
	s.ls.job = j
	s.publish(now)
	var startErr error
	s.work("job start", func() {
		startErr = s.prepareJob(j)
		if startErr != nil {
			spec.Wipe()
			s.removeJobFiles(j)
			_ = s.fx.Shell.Replace(s.cfg.BaseEnv, s.cfg.Grace)
		}
	}, func() { s.started(j, startErr, reply) })
}

// started is the continuation of a job start's worker: the job runs, or
// its start failed and the lease is released again.
func (s *Supervisor) started(j *job, startErr error, reply func(Started, error)) {
	if startErr != nil {
		s.log.Error("job start failed; lease released", "job", j.id, "error", startErr)
		s.release(j)
		_ = s.ls.machine.Abort(j.id, time.Now())
		s.publish(time.Now())
		reply(Started{}, fmt.Errorf("job start failed: %w", startErr))
		return
	}
	if err := s.moveJob(j, jobRunning); err != nil {
		reply(Started{}, err)
		return
	}
	if s.ls.scope == "" {
		s.ls.scope = j.spec.Scope
	}
	if dropped := s.fx.Shell.SetDiscardInput(false); dropped > 0 {
		s.log.Info("stdin bytes dropped while idle", "bytes", dropped)
	}
	s.publish(time.Now())
	s.log.Info("job started", "job", j.id, "variables", len(j.spec.Variables), "timeout", j.spec.Timeout, "lease_ttl", j.spec.LeaseTTL)
	reply(Started{ID: j.id, LogPath: j.logPath}, nil)
}

// prepareJob lays out the job's directory and log and replaces the idle
// shell with the job's shell (a worker: it may wait the grace period for
// the idle shell to go).
func (s *Supervisor) prepareJob(j *job) error {
	if err := os.MkdirAll(s.cfg.JobsDir, 0o711); err != nil {
		return err
	}
	// A job user can create entries in the jobs directory: one it left
	// under this job's name in an earlier job must not fail this start.
	s.removeJobDir(j.id)
	// The job's directory, its file variables and TMPDIR are made as the
	// job user (asJobUser): theirs from birth, no chown. MkdirTemp's
	// random name means no earlier job of this pod can have made the
	// TMPDIR (or a symbolic link of that name) in the shared TmpDir.
	var tmpErr error
	if err := s.asJobUser(func() error {
		if err := j.spec.WriteFiles(j.dir); err != nil {
			return err
		}
		if s.cfg.TmpDir != "" {
			t, err := os.MkdirTemp(s.cfg.TmpDir, "warmpod-job-"+j.id+"-")
			if err == nil {
				j.tmp = t
				return nil
			}
			tmpErr = err
		}
		j.tmp = filepath.Join(j.dir, "tmp")
		return os.Mkdir(j.tmp, 0o700)
	}); err != nil {
		return err
	}
	if tmpErr != nil {
		s.log.Warn("job TMPDIR on the memory volume: it cannot be made on disk", "job", j.id, "tmp_dir", s.cfg.TmpDir, "error", tmpErr)
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
		env = append(env, "TMPDIR="+j.tmp)
	}
	return env
}
