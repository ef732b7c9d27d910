package supervisor

import (
	"fmt"
	"strings"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/lease"
)

// jobStatus is j's status document, read on the loop so that a worker's
// continuation or a handler marshals a copy.
func (s *Supervisor) jobStatus(j *job) control.JobStatus {
	doc := control.JobStatus{Job: j.id, Cancelled: j.cancelled(), Log: j.logPath, Stages: []control.StageStatus{}}
	for _, name := range j.order {
		doc.Stages = append(doc.Stages, j.stages[name].view())
	}
	return doc
}

// JobInfo is what JobEnv and JobStatus tell about the current job.
type JobInfo struct {
	ID      string               // the job's id
	Env     []string             // JobEnv: its variables, token and TMPDIR ("KEY=VALUE")
	User    string               // the job user as "UID:GID", "" when none
	LogPath string               // the job's output log
	Dir     string               // JobStatus: the job's directory
	Job     *control.JobStatus   // JobStatus without a stage: the job's status document
	Stage   *control.StageStatus // JobStatus with a stage: that stage's status document
}

// current returns the job holding the lease, which must be jobID when
// that is set, in a phase that takes operations (loop only). Errors:
// lease.ErrNoJob, lease.ErrWrongJob.
func (s *Supervisor) current(jobID string) (*job, error) {
	held, ok := s.ls.machine.Lease()
	j := s.ls.job
	if !ok || j == nil || !j.phase.takesOps() {
		return nil, lease.ErrNoJob
	}
	if jobID != "" && jobID != held.JobID {
		return nil, lease.ErrWrongJob
	}
	return j, nil
}

// JobEnv returns the current job's environment and user. Errors:
// lease.ErrNoJob, ErrCancelled.
func (s *Supervisor) JobEnv() (JobInfo, error) {
	return call(s, false, func(reply func(JobInfo, error)) {
		j, err := s.current("")
		switch {
		case err != nil:
			reply(JobInfo{}, err)
		case j.phase == jobCancelled:
			reply(JobInfo{}, errorf(ErrCancelled, "job cancelled: only status, logs, wait, cancel and end remain"))
		default:
			reply(JobInfo{ID: j.id, Env: s.jobEnv(j), User: s.jobUser(), LogPath: j.logPath}, nil)
		}
	})
}

// jobUser is the job user as "UID:GID", "" when stages run as PID 1's.
func (s *Supervisor) jobUser() string {
	if u := s.cfg.JobUser; u != nil {
		return fmt.Sprintf("%d:%d", u.Uid, u.Gid)
	}
	return ""
}

// Renew is the lease heartbeat of jobID. Errors as lease.Machine.Renew.
func (s *Supervisor) Renew(jobID string) error {
	_, err := call(s, false, func(reply func(struct{}, error)) {
		reply(struct{}{}, s.ls.machine.Renew(jobID, time.Now()))
	})
	return err
}

// JobStatus returns the job's status document, or one stage's with stage
// set, also while the job ends. Errors: lease.ErrNoJob, ErrNoStage.
func (s *Supervisor) JobStatus(stage string) (JobInfo, error) {
	return call(s, false, func(reply func(JobInfo, error)) {
		j := s.ls.job
		if j == nil || !j.phase.visible() {
			reply(JobInfo{}, lease.ErrNoJob)
			return
		}
		info := JobInfo{ID: j.id, LogPath: j.logPath, Dir: j.dir, User: s.jobUser()}
		if stage == "" {
			doc := s.jobStatus(j)
			info.Job = &doc
		} else if st := j.stages[stage]; st != nil {
			v := st.view()
			info.Stage = &v
		} else {
			reply(JobInfo{}, errorf(ErrNoStage, "no stage %q", stage))
			return
		}
		reply(info, nil)
	})
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
