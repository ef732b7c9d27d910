package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/jobspec"
	"github.com/warmpod/warmpod/lease"
	"github.com/warmpod/warmpod/procscan"
)

// Ended is the outcome of EndJob and CancelJob.
type Ended struct {
	ID     string             // the job's id
	Status *control.JobStatus // CancelJob: the job's status document; nil for EndJob
}

// EndJob ends the current job for the client whose PID is peer: every
// container process except PID 1, warmpod's own clients and the caller's
// ancestry gets SIGTERM, then SIGKILL after the grace; the secrets are
// zeroed, the job's directory and log removed, and a fresh idle shell
// started (or the pod drains when --max-jobs is reached). It answers once
// the idle shell is up, so a client that sees the answer sees a pod with
// no trace of the job. Errors: lease.ErrNoJob when no job holds the
// lease, lease.ErrWrongJob when jobID names another job.
func (s *Supervisor) EndJob(jobID string, peer int) (Ended, error) {
	return call(s, true, func(reply func(Ended, error)) { s.endJob(jobID, "job end", peer, reply) })
}

// endJob ends the job holding the lease (an exclusive op: no worker runs).
// Two workers in turn: the job end's (sweep, wipe), then, after the lease
// is released, the idle shell's; reply comes after the second.
func (s *Supervisor) endJob(jobID, why string, peer int, reply func(Ended, error)) {
	held, ok := s.ls.machine.Lease()
	if !ok {
		reply(Ended{}, lease.ErrNoJob)
		return
	}
	if jobID != "" && jobID != held.JobID {
		reply(Ended{}, lease.ErrWrongJob)
		return
	}
	j := s.ls.job
	var puts []*inflightPut
	if j != nil {
		if err := s.moveJob(j, jobEnding); err != nil {
			reply(Ended{}, err)
			return
		}
		puts = j.inflight()
	}
	// From here until the sweep is done, a SIGTERM is not forwarded: the
	// sweep sends every job process (the shell's group included) its TERM.
	s.setSweeping(true)
	l := s.ls.termed.clone()
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
		if j != nil {
			s.release(j)
		}
		now := time.Now()
		_ = s.ls.machine.Release(held.JobID, now)
		s.publish(now)
		done := func() {
			s.log.Info("job ended", "job", held.JobID, "reason", why, "terminated", n, "duration", time.Since(held.Since).Round(time.Millisecond))
			reply(Ended{ID: held.JobID}, nil)
		}
		// The release may have drained the machine (the max-jobs-th job):
		// the shutdown comes next, and needs no idle shell.
		if s.ls.draining() {
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
		if err == nil {
			err = s.moveJob(j, jobCancelled)
		}
		if err != nil {
			reply(Ended{}, err)
			return
		}
		s.setSweeping(true)
		l := s.ls.termed.clone()
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
			// the token go at once, not at the job end that may never
			// come.
			s.wipeCleanupPaths(j)
			waitAll(stages, 2*time.Second)
			if err := s.fx.Shell.Replace(j.env, s.cfg.Grace); err != nil {
				s.log.Error("cannot restart the job shell", "error", err)
			}
		}, func() {
			s.setSweeping(false)
			s.log.Info("job cancelled", "job", j.id, "terminated", n)
			st := s.jobStatus(j)
			reply(Ended{ID: j.id, Status: &st}, nil)
		})
	})
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
	s.removeJobFiles(j)
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
	var n int
	if s.cfg.JobUser != nil {
		// First as the job user, who may remove what it made in its own
		// directories (PID 1 needs no CAP_DAC_OVERRIDE for that), then as
		// PID 1 for the rest (entries of root's directories).
		_ = s.asJobUser(func() error {
			n, _ = jobspec.WipeCleanupPaths(patterns, protect)
			return nil
		})
	}
	m, err := jobspec.WipeCleanupPaths(patterns, protect)
	n += m
	if err != nil {
		s.log.Error("cleanup paths not fully wiped", "job", j.id, "removed", n, "error", err)
		return
	}
	s.log.Debug("cleanup paths wiped", "job", j.id, "removed", n)
}

// removeJobFiles removes the job's directory (its file variables, zeroed
// first by jobspec.RemoveFiles), its TMPDIR and its log (a worker).
func (s *Supervisor) removeJobFiles(j *job) {
	id := j.id
	if id == "" {
		return
	}
	s.removeJobDir(id)
	if j.tmp != "" && !within(j.tmp, j.dir) {
		s.removeJobTmp(j)
	}
	if err := os.Remove(filepath.Join(s.cfg.LogsDir, id+".log")); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("cannot remove job log", "job", id, "error", err)
	}
}

// removeJobTmp removes the job's TMPDIR under TmpDir: as the job user
// first (it is theirs, 0700, in a directory that is often sticky, where
// PID 1 without CAP_FOWNER may not remove another user's entry), then as
// PID 1 for whatever that left. RemoveAll removes a symbolic link the job
// put in its place, never what the link names.
func (s *Supervisor) removeJobTmp(j *job) {
	if err := s.removeAsJobUserThenPID1(func() error { return os.RemoveAll(j.tmp) }); err != nil {
		s.log.Error("cannot remove the job's TMPDIR", "job", j.id, "path", j.tmp, "error", err)
	}
}

// removeJobDir removes the job's directory, its file variables zeroed
// first (jobspec.RemoveFiles): as the job user when there is one (the
// directory is theirs, 0700: PID 1 needs no CAP_DAC_OVERRIDE), then as
// PID 1 for whatever that left (with CAP_DAC_OVERRIDE, also what the job
// user made unreadable to itself). A missing directory is no error.
func (s *Supervisor) removeJobDir(id string) {
	dir := filepath.Join(s.cfg.JobsDir, id)
	if err := s.removeAsJobUserThenPID1(func() error { return jobspec.RemoveFiles(dir) }); err != nil {
		s.log.Error("cannot remove job directory", "job", id, "error", err)
	}
}

// removeAsJobUserThenPID1 runs remove as the job user (what the job made
// is theirs: PID 1 needs neither CAP_DAC_OVERRIDE nor, in a sticky
// directory, CAP_FOWNER), and once more as PID 1 when that failed and
// there is a job user, for what the job user cannot remove. It returns
// the last run's error.
func (s *Supervisor) removeAsJobUserThenPID1(remove func() error) error {
	err := s.asJobUser(remove)
	if err != nil && s.cfg.JobUser != nil {
		err = remove()
	}
	return err
}
