package supervisor

import (
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/lease"
	"github.com/warmpod/warmpod/procscan"
)

// WaitStage waits up to timeout for stage name to end and returns its
// status. Errors: ErrStillRunning (with the status) when it still runs at
// the timeout; lease.ErrNoJob; ErrNoStage.
func (s *Supervisor) WaitStage(name string, timeout time.Duration) (Stage, error) {
	type found struct {
		j  *job
		st *stage
	}
	f, err := call(s, false, func(reply func(found, error)) {
		j := s.ls.job
		switch {
		case j == nil || !j.phase.visible():
			reply(found{}, lease.ErrNoJob)
		case j.stages[name] == nil:
			reply(found{}, errorf(ErrNoStage, "no stage %q", name))
		default:
			reply(found{j, j.stages[name]}, nil)
		}
	})
	if err != nil {
		return Stage{}, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-f.st.done:
	case <-t.C:
		err = errorf(ErrStillRunning, "stage %q still running after %s", name, timeout)
	case <-s.stopped:
		// The loop ended: no outcome will be recorded any more.
		return Stage{}, errorf(ErrExiting, "%v", ErrExiting)
	}
	v, cerr := call(s, false, func(reply func(control.StageStatus, error)) {
		reply(f.st.view(), nil)
	})
	if cerr != nil {
		return Stage{}, cerr
	}
	return Stage{Job: f.j.id, Status: &v}, err
}

// isSHA256Hex tells whether v is 64 lower-case hex digits (a SHA-256).
func isSHA256Hex(v string) bool {
	if len(v) != 64 {
		return false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CancelStage ends one running stage of the current job: SIGTERM to every
// process of the stage's session and to every descendant of its leader
// (so a trap in the stage's script runs), SIGKILL after grace to whatever
// is left of them. Unlike [Supervisor.CancelJob] the job goes on: GitLab's
// graceful cancel still runs after_script and cleanup_file_variables in
// the same pod. A daemon that left the stage's session and was re-parented
// to PID 1 is not reachable from the stage any more; job end kills it.
// The stage ends (its status and end marker) only once none of those
// processes is left, not when its leader exits: a shell that dies of its
// TERM at once leaves children whose traps still print, and their output
// belongs to the stage (Actions steps run under such a shell; GitLab's
// scripts trap TERM and wait). It returns the stage's status then, or,
// should the leader's exit not have been reaped 2 s after its processes
// were gone, the status as it stands. The grace is capped at PID 1's
// --grace, so a caller never holds the job's other operations longer than
// PID 1's own. Errors: lease.ErrNoJob; lease.ErrWrongJob when jobID names
// another job; ErrNoStage.
func (s *Supervisor) CancelStage(jobID, name string, peer int, grace time.Duration) (Stage, error) {
	return call(s, true, func(reply func(Stage, error)) {
		j, err := s.current(jobID)
		if err != nil {
			reply(Stage{}, err)
			return
		}
		st := j.stages[name]
		if st == nil {
			reply(Stage{}, errorf(ErrNoStage, "no stage %q", name))
			return
		}
		leader, stopping := st.pid, st.running && st.pid > 1
		grace = min(grace, s.cfg.Grace)
		l := s.ls.termed.clone()
		st.cancelling = stopping
		n := 0
		s.work("stage cancel", func() {
			if stopping {
				n = s.terminateStage(leader, peer, l, grace)
			}
		}, func() {
			s.log.Info("stage cancelled", "job", j.id, "stage", name, "terminated", n)
			s.stageCancelled(j, st, func() {
				v := st.view()
				reply(Stage{Job: j.id, Status: &v}, nil)
			})
		})
	})
}

// stageCancelEndWait bounds how long a cancel's reply waits, after the
// stage's processes are gone, for the reaper's news of its leader.
const stageCancelEndWait = 2 * time.Second

// stageCancelled is the loop's part of a cancel once its worker has
// stopped the stage's processes: the stage ends if its leader's exit was
// held, and answer runs once it has ended (at once when it has), or
// after stageCancelEndWait at the latest.
func (s *Supervisor) stageCancelled(j *job, st *stage, answer func()) {
	st.cancelling = false
	if st.held != nil {
		ex := *st.held
		st.held = nil
		s.endStage(j, st, ex)
	}
	if !st.running {
		answer()
		return
	}
	answered := false
	once := func() {
		if !answered {
			answered = true
			answer()
		}
	}
	st.onEnd = append(st.onEnd, once)
	time.AfterFunc(stageCancelEndWait, func() { s.post(once) })
}

// terminateStage sends SIGTERM, then SIGKILL after grace, to the stage led
// by leader (a worker). Its processes are those found now (the leader's
// descendants and session) and, at every round of SIGKILL, any process of
// the stage's session (a trap or a make -j child forked after the first
// look: it gets no SIGTERM of its own, see termLedger). A daemon that
// left the session after the first look is not the stage's any more; job
// end stops it.
func (s *Supervisor) terminateStage(leader, peer int, l *termLedger, grace time.Duration) int {
	members := map[int]bool{leader: true}
	keep := map[int]bool{}
	if procs, err := s.fx.Procs.List(); err == nil {
		for _, pid := range procscan.Descendants(procs, leader) {
			members[pid] = true
		}
		for _, p := range procs {
			if p.SID == leader {
				members[p.PID] = true
			}
		}
		if peer > 1 {
			keep = ancestors(procs, peer)
		}
		for pid := range s.fx.Procs.Clients(procs) {
			keep[pid] = true
		}
	}
	n := s.terminate(func(p procscan.Proc) bool { return !(members[p.PID] || p.SID == leader) || keep[p.PID] }, l, grace)
	s.fx.Children.Reap()
	return n
}
