package supervisor

import (
	"errors"
	"fmt"
	"slices"
)

// The job's and the pod's phases, and the one way to change them: each
// phase lists the phases it may move to (jobMoves, podMoves), and moveJob
// and movePod refuse any other move. A refused move is a bug of the
// supervisor: it is logged at Error, fails the test that caused it
// (broken), and returns an error the caller answers with; it never
// panics, since PID 1 must go on reaping and serving the other jobs.

// errIllegalMove is the kind of a refused move (exit 70 to a client: a
// bug of PID 1, not of the request).
var errIllegalMove = errors.New("illegal state transition")

// jobPhase is where the job holding the lease is in its life. The lease
// machine says Busy for all of them but jobReleased.
//
//	Starting ──start──► Running ──end──► Ending ──wiped──► Released
//	    │                  │                ▲
//	    │               cancel              │
//	    │                  ▼                │
//	    │              Cancelled ──end──────┘
//	    │              (cancel again: Cancelled)
//	    └──the start failed──► Released
type jobPhase uint8

const (
	// jobStarting: claimed; a worker writes the job's files and replaces
	// the shell. Only that worker touches spec and env.
	jobStarting jobPhase = iota
	// jobRunning: stages, uploads and env are served.
	jobRunning
	// jobCancelled: job cancel began; no job code runs from then on. Only
	// status, logs, waits, end (and another cancel) remain, and the job
	// keeps the lease until its end.
	jobCancelled
	// jobEnding: a worker kills the job's processes and wipes its secrets.
	// Only that worker touches spec and env; status and waits are served.
	jobEnding
	// jobReleased: the job is gone (ended, or its start failed); the loop
	// forgets it.
	jobReleased
)

// String names the phase for logs and errors.
func (p jobPhase) String() string {
	switch p {
	case jobStarting:
		return "starting"
	case jobRunning:
		return "running"
	case jobCancelled:
		return "cancelled"
	case jobEnding:
		return "ending"
	case jobReleased:
		return "released"
	}
	return fmt.Sprintf("jobPhase(%d)", uint8(p))
}

// jobMoves lists the phases a job in phase from may move to. An end needs
// no worker before it (the exclusive ops wait for the worker), so none
// starts while the job starts, and a job ends once. A second cancel sweeps
// again: whatever the job's clean-up left (a trap's command) is killed.
func jobMoves(from jobPhase) []jobPhase {
	switch from {
	case jobStarting:
		return []jobPhase{jobRunning, jobReleased}
	case jobRunning:
		return []jobPhase{jobCancelled, jobEnding}
	case jobCancelled:
		return []jobPhase{jobCancelled, jobEnding}
	case jobEnding:
		return []jobPhase{jobReleased}
	}
	return nil
}

// takesOps tells whether a job in phase p is the current job for the
// operations that name one (current): not while a worker prepares or
// wipes it.
func (p jobPhase) takesOps() bool { return p == jobRunning || p == jobCancelled }

// visible tells whether a job in phase p answers status and waits: from
// the moment its start has completed until it is released.
func (p jobPhase) visible() bool { return p != jobStarting && p != jobReleased }

// podPhase is how far the pod's shutdown has got. Whether the pod drains
// is the lease machine's (loopState.draining); the phase says what the
// supervisor has done about it.
//
//	Serving ──drain──► ShutdownQueued ──its turn──► ShuttingDown ──swept──► ShutDown
type podPhase uint8

const (
	// podServing: no shutdown queued. The machine may already be draining
	// within a turn of the loop (the max-jobs-th release); evaluate queues
	// the shutdown at the top of the next turn.
	podServing podPhase = iota
	// podShutdownQueued: drain has run: clients waiting in line were
	// answered, and the shutdown waits for the worker and the loop's own
	// ops queued before it.
	podShutdownQueued
	// podShuttingDown: the shutdown's worker stops every process.
	podShuttingDown
	// podShutDown: the shutdown's worker has completed: the loop ends.
	podShutDown
)

// String names the phase for logs and errors.
func (p podPhase) String() string {
	switch p {
	case podServing:
		return "serving"
	case podShutdownQueued:
		return "shutdown-queued"
	case podShuttingDown:
		return "shutting-down"
	case podShutDown:
		return "shut-down"
	}
	return fmt.Sprintf("podPhase(%d)", uint8(p))
}

// podMoves lists the phases a pod in phase from may move to: forward
// only, one step at a time, so the shutdown is queued once and runs once.
func podMoves(from podPhase) []podPhase {
	switch from {
	case podServing:
		return []podPhase{podShutdownQueued}
	case podShutdownQueued:
		return []podPhase{podShuttingDown}
	case podShuttingDown:
		return []podPhase{podShutDown}
	}
	return nil
}

// moveJob moves j to phase to, or refuses an illegal move (loop only).
// from records the phase j left, for the status document (j.cancelled).
func (s *Supervisor) moveJob(j *job, to jobPhase) error {
	if !slices.Contains(jobMoves(j.phase), to) {
		return s.broken(errorf(errIllegalMove, "job %s: illegal move %s → %s", j.id, j.phase, to))
	}
	j.from, j.phase = j.phase, to
	return nil
}

// movePod moves the pod to phase to, or refuses an illegal move (loop
// only).
func (s *Supervisor) movePod(to podPhase) error {
	if !slices.Contains(podMoves(s.ls.pod), to) {
		return s.broken(errorf(errIllegalMove, "pod: illegal move %s → %s", s.ls.pod, to))
	}
	s.ls.pod = to
	return nil
}

// broken reports err, a broken invariant of the loop's state, and returns
// it: an Error line in PID 1's log and, when a test set onBroken, that
// test's failure (loop only).
func (s *Supervisor) broken(err error) error {
	s.log.Error("supervisor invariant broken", "error", err)
	if s.onBroken != nil {
		s.onBroken(err)
	}
	return err
}
