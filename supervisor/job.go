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

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/idle"
	"github.com/warmpod/warmpod/tokens"
)

// job is the job holding the lease. Its fields are set at start and only
// read afterwards, except stages and cancelled (guarded by Supervisor.mu).
type job struct {
	spec    *tokens.Spec
	dir     string   // JobsDir/<id>: file variables and TMPDIR, 0700, the job user's
	logPath string   // LogsDir/<id>.log: the stages' output, PID 1's
	env     []string // the job's full environment (base + variables + token + TMPDIR)

	digest    [32]byte // SHA-256 of the spec: a replay must be byte-identical
	stages    map[string]*stage
	order     []string
	cancelled bool
	puts      map[*inflightPut]bool // job puts in flight (StartPut)
}

// StartJob claims the lease for the spec in raw and gives the job a fresh
// shell holding its token and variables. It returns the control response:
// 65 for a bad spec (naming the field), 75 when another job holds the
// lease, the config hash differs or the scope is not the pod's, 69 when
// draining; PID 1's state is unchanged by any refusal.
func (s *Supervisor) StartJob(raw []byte) control.Response {
	spec, err := tokens.ParseSpec(raw)
	if err != nil {
		return control.Response{Code: control.ExitDataErr, Error: err.Error()}
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if s.cfg.ConfigHash != "" && spec.ConfigHash != s.cfg.ConfigHash {
		spec.Wipe()
		return control.Response{Code: control.ExitTempFail, Error: fmt.Sprintf("config_hash %q does not match this pod's %q: the pod was made from another executor configuration", spec.ConfigHash, s.cfg.ConfigHash)}
	}
	now := time.Now()
	s.mu.Lock()
	pinned := s.scope
	if s.cfg.MaxJobs != 1 && pinned != "" && spec.Scope != pinned && s.job == nil {
		s.mu.Unlock()
		spec.Wipe()
		return control.Response{Code: control.ExitTempFail, Error: fmt.Sprintf("scope %q: this pod is pinned to scope %q", spec.Scope, pinned)}
	}
	replay, err := s.machine.Claim(spec.ID, spec.Nonce, spec.Timeout, spec.LeaseTTL, now)
	same := s.job != nil && s.job.digest == sha256.Sum256(raw)
	s.mu.Unlock()
	if replay {
		spec.Wipe()
		if !same {
			return control.Response{Code: control.ExitTempFail, Error: "replay of job " + strconv.Quote(spec.ID) + " with the same nonce but a different spec"}
		}
		return control.Response{OK: true, Job: spec.ID, State: idle.Busy.String(), Replay: true}
	}
	if err != nil {
		spec.Wipe()
		s.publish(now)
		return claimError(err)
	}
	j, err := s.prepareJob(spec)
	if err != nil {
		s.log.Error("job start failed; lease released", "job", spec.ID, "error", err)
		spec.Wipe()
		s.removeJobFiles(spec.ID)
		s.mu.Lock()
		_ = s.machine.Abort(spec.ID, time.Now())
		s.mu.Unlock()
		_ = s.proxy.Replace(s.baseEnv, s.cfg.Grace)
		s.publish(time.Now())
		return control.Response{Code: control.ExitSoftware, Error: "job start failed: " + err.Error()}
	}
	j.digest = sha256.Sum256(raw)
	s.mu.Lock()
	s.job = j
	if s.scope == "" {
		s.scope = spec.Scope
	}
	s.mu.Unlock()
	if dropped := s.proxy.SetDiscardInput(false); dropped > 0 {
		s.log.Info("stdin bytes dropped while idle", "bytes", dropped)
	}
	s.publish(time.Now())
	s.kick()
	s.log.Info("job started", "job", spec.ID, "variables", len(spec.Variables), "timeout", spec.Timeout, "lease_ttl", spec.LeaseTTL)
	return control.Response{OK: true, Job: spec.ID, State: idle.Busy.String(), LogPath: j.logPath}
}

// prepareJob lays out the job's directory and log and replaces the idle
// shell with the job's shell.
func (s *Supervisor) prepareJob(spec *tokens.Spec) (*job, error) {
	j := &job{
		spec:    spec,
		dir:     filepath.Join(s.cfg.JobsDir, spec.ID),
		logPath: filepath.Join(s.cfg.LogsDir, spec.ID+".log"),
		stages:  map[string]*stage{},
	}
	if err := os.MkdirAll(s.cfg.JobsDir, 0o711); err != nil {
		return nil, err
	}
	if err := spec.WriteFiles(j.dir); err != nil {
		return nil, err
	}
	tmp := filepath.Join(j.dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, err
	}
	if u := s.cfg.JobUser; u != nil {
		if err := chownTree(j.dir, int(u.Uid), int(u.Gid)); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(s.cfg.LogsDir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(j.logPath, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	_ = f.Close()
	j.env = append(append([]string(nil), s.baseEnv...), spec.Env(s.cfg.TokenEnv, j.dir)...)
	if !hasKey(spec.Env(s.cfg.TokenEnv, j.dir), "TMPDIR") {
		j.env = append(j.env, "TMPDIR="+tmp)
	}
	if err := s.proxy.Replace(j.env, s.cfg.Grace); err != nil {
		return nil, err
	}
	return j, nil
}

func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func claimError(err error) control.Response {
	switch {
	case errors.Is(err, idle.ErrDraining):
		return control.Response{Code: control.ExitUnavailable, Error: err.Error(), State: idle.Draining.String()}
	default:
		return control.Response{Code: control.ExitTempFail, Error: err.Error(), State: idle.Busy.String()}
	}
}

// EndJob ends the current job for the client whose PID is peer: every
// container process except PID 1, warmpod's own clients and the caller's
// ancestry gets SIGTERM, then SIGKILL after the grace; the secrets are
// zeroed, the job's directory and log removed, and a fresh idle shell
// started (or the pod drains when --max-jobs is reached). Exit 69 when no
// job holds the lease, 75 when jobID names another job.
func (s *Supervisor) EndJob(jobID string, peer int) control.Response {
	return s.endJob(jobID, "job end", peer)
}

func (s *Supervisor) endJob(jobID, reason string, peer int) control.Response {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	lease, ok := s.machine.Lease()
	j := s.job
	s.mu.Unlock()
	if !ok {
		return control.Response{Code: control.ExitUnavailable, Error: idle.ErrNoJob.Error()}
	}
	if jobID != "" && jobID != lease.JobID {
		return control.Response{Code: control.ExitTempFail, Error: idle.ErrWrongJob.Error()}
	}
	// No job shell may be respawned with the job's environment from here on.
	s.proxy.Freeze(s.baseEnv)
	// Uploads of this job die with it: none may land in the next job.
	s.stopPuts(j)
	n := s.killJobProcesses(peer, s.cfg.Grace)
	s.wipeJob()
	s.proxy.SetDiscardInput(s.cfg.IgnoreIdleStdin)
	now := time.Now()
	s.mu.Lock()
	_ = s.machine.Release(lease.JobID, now)
	draining := s.machine.State() == idle.Draining
	s.mu.Unlock()
	if !draining {
		if err := s.proxy.Replace(s.baseEnv, s.cfg.Grace); err != nil {
			s.log.Error("cannot start the idle shell", "error", err)
		}
	}
	s.publish(now)
	s.kick()
	s.log.Info("job ended", "job", lease.JobID, "reason", reason, "terminated", n, "duration", now.Sub(lease.Since).Round(time.Millisecond))
	return control.Response{OK: true, Job: lease.JobID, State: s.State()}
}

// killJobProcesses sends SIGTERM (SIGKILL after grace) to every container
// process except PID 1, warmpod's clients and the ancestry of the client
// peer (caller holds opMu). Daemons that double-forked away were
// re-parented to PID 1 and are included.
func (s *Supervisor) killJobProcesses(peer int, grace time.Duration) int {
	keep := map[int]bool{}
	if procs, err := s.procs.container(); err == nil {
		if peer > 1 {
			keep = ancestors(procs, peer)
		}
		for pid := range s.procs.executorClients(procs) {
			keep[pid] = true
		}
	}
	s.sweeping.Store(true)
	defer s.sweeping.Store(false)
	n := s.procs.terminate(func(p idle.Proc) bool { return keep[p.PID] }, grace)
	s.reaper.Reap()
	return n
}

// current returns the job holding the lease and the lease, read together
// under mu; ok is false when no lease is held (j may still be nil while a
// claimed job is being prepared).
func (s *Supervisor) current() (j *job, lease idle.Lease, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lease, ok = s.machine.Lease()
	return s.job, lease, ok
}

// CancelJob kills every process of the job (SIGTERM, SIGKILL after grace)
// and records the cancellation; the job keeps the lease (its log and
// status stay readable) until job end, with a fresh job shell.
func (s *Supervisor) CancelJob(jobID string, peer int, grace time.Duration) control.Response {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	j, lease, ok := s.current()
	if !ok || j == nil {
		return control.Response{Code: control.ExitUnavailable, Error: idle.ErrNoJob.Error()}
	}
	if jobID != "" && jobID != lease.JobID {
		return control.Response{Code: control.ExitTempFail, Error: idle.ErrWrongJob.Error()}
	}
	s.proxy.Freeze(nil)
	s.stopPuts(j) // an upload must not land after the wipe below
	n := s.killJobProcesses(peer, grace)
	s.mu.Lock()
	j.cancelled = true
	s.mu.Unlock()
	// No job code runs from here on: the executor's copies of the token
	// go now, not at the job end that may never come.
	s.wipeCleanupPaths(j)
	s.waitStages(j, 2*time.Second)
	if err := s.proxy.Replace(j.env, s.cfg.Grace); err != nil {
		s.log.Error("cannot restart the job shell", "error", err)
	}
	s.log.Info("job cancelled", "job", lease.JobID, "terminated", n)
	return control.Response{OK: true, Job: lease.JobID, State: s.State(), Data: s.jobStatusJSON(j, "")}
}

// wipeJob zeroes the job's secrets and removes its files and log (caller
// holds opMu).
func (s *Supervisor) wipeJob() {
	s.mu.Lock()
	j := s.job
	s.job = nil
	s.mu.Unlock()
	if j == nil {
		return
	}
	s.wipeCleanupPaths(j)
	j.spec.Wipe()
	for i := range j.env {
		j.env[i] = ""
	}
	s.removeJobFiles(j.spec.ID)
}

// wipeCleanupPaths removes the contents of the pod's and the job's cleanup
// paths (caller holds opMu, after the job's processes are gone so none
// writes a new copy behind the wipe).
func (s *Supervisor) wipeCleanupPaths(j *job) {
	patterns := append(append([]string(nil), s.cfg.CleanupPaths...), j.spec.CleanupPaths...)
	if len(patterns) == 0 {
		return
	}
	protect := []string{filepath.Dir(s.cfg.JobsDir), s.cfg.JobsDir, s.cfg.LogsDir}
	n, err := tokens.WipeCleanupPaths(patterns, protect)
	if err != nil {
		s.log.Error("cleanup paths not fully wiped", "job", j.spec.ID, "removed", n, "error", err)
		return
	}
	s.log.Debug("cleanup paths wiped", "job", j.spec.ID, "removed", n)
}

func (s *Supervisor) removeJobFiles(id string) {
	if id == "" {
		return
	}
	if err := tokens.RemoveFiles(filepath.Join(s.cfg.JobsDir, id)); err != nil {
		s.log.Error("cannot remove job directory", "job", id, "error", err)
	}
	if err := os.Remove(filepath.Join(s.cfg.LogsDir, id+".log")); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("cannot remove job log", "job", id, "error", err)
	}
}

// JobEnv returns the current job's environment ("KEY=VALUE": its
// variables, token and TMPDIR) and the job user; 69 when no job holds the
// lease.
func (s *Supervisor) JobEnv() control.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	lease, ok := s.machine.Lease()
	if !ok || s.job == nil {
		return control.Response{Code: control.ExitUnavailable, Error: idle.ErrNoJob.Error()}
	}
	if s.job.cancelled {
		return control.Response{Code: control.ExitUnavailable, Error: "job cancelled: only status, logs and end remain"}
	}
	env := s.job.spec.Env(s.cfg.TokenEnv, s.job.dir)
	if !hasKey(env, "TMPDIR") {
		env = append(env, "TMPDIR="+filepath.Join(s.job.dir, "tmp"))
	}
	return control.Response{OK: true, Job: lease.JobID, State: idle.Busy.String(), Env: env, User: s.jobUser(), LogPath: s.job.logPath}
}

func (s *Supervisor) jobUser() string {
	if u := s.cfg.JobUser; u != nil {
		return fmt.Sprintf("%d:%d", u.Uid, u.Gid)
	}
	return ""
}

// Renew is the lease heartbeat of jobID. Errors as idle.Machine.Renew.
func (s *Supervisor) Renew(jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.machine.Renew(jobID, time.Now())
}

// JobStatus returns the job's status document, or one stage's with stage
// set; 69 when no job holds the lease or the stage does not exist.
func (s *Supervisor) JobStatus(stage string) control.Response {
	s.mu.Lock()
	j := s.job
	s.mu.Unlock()
	if j == nil {
		return control.Response{Code: control.ExitUnavailable, Error: idle.ErrNoJob.Error()}
	}
	if stage != "" && s.stageOf(j, stage) == nil {
		return control.Response{Code: control.ExitUnavailable, Error: fmt.Sprintf("no stage %q", stage)}
	}
	return control.Response{OK: true, Job: j.spec.ID, State: s.State(), Data: s.jobStatusJSON(j, stage), LogPath: j.logPath, JobDir: j.dir, User: s.jobUser()}
}

func (s *Supervisor) jobStatusJSON(j *job, only string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if only != "" {
		b, _ := json.Marshal(j.stages[only].view())
		return b
	}
	doc := struct {
		Job       string      `json:"job"`
		Cancelled bool        `json:"cancelled"`
		Log       string      `json:"log"`
		Stages    []stageView `json:"stages"`
	}{Job: j.spec.ID, Cancelled: j.cancelled, Log: j.logPath, Stages: []stageView{}}
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
