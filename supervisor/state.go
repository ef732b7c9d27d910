package supervisor

import (
	"time"

	"github.com/warmpod/warmpod/lease"
)

// loopState is everything Run's loop owns. Only the loop goroutine reads
// or writes it: an op's fn, a worker's continuation, a watcher's post, a
// signal's note and a tick all run there, so no lock guards it, and a
// worker gets copies of what it needs before it starts. Other goroutines
// see it only through what the loop publishes: the snapshot that probes
// and status read (publish) and the rule the signal thread forwards by
// (syncForward). Once the loop has ended, Run reads it for the exit.
//
// Each fact has one home. Whether the pod drains, and why, is the
// machine's (lease.Machine.State, its drain reason): the pod phase only
// records how far the supervisor's shutdown has got, the forwarding rule
// and the snapshot are derived from the machine when the loop publishes
// them. Whether a job sweep runs is sweeping's alone; the forwarding rule
// is derived from it too.
type loopState struct {
	// machine is the lease and the idle deadline, and the one source of
	// "draining" and of the drain reason. Ops call it with the current
	// time; evaluate ticks it at the top of every turn of the loop.
	machine *lease.Machine
	// pod is how far the pod's shutdown has got (podPhase): moved by
	// drain (the shutdown is queued), shutdown (its worker starts) and the
	// shutdown's continuation (the loop ends).
	pod podPhase
	// termSeen: a SIGTERM reached the loop, or while it drained any
	// signal that may be a container's stop signal (stopsDeleted). Once
	// PID 1 has deleted its own pod it waits for the kubelet's stop
	// signal (awaitStop) unless that signal has come already: the kubelet
	// sends it once.
	termSeen bool
	// job is the job holding the lease, nil when none. startJob sets it
	// at the claim; it is cleared as the job reaches jobReleased: a failed
	// start, a job end's continuation, the shutdown's continuation.
	job *job
	// scope is the trust domain the first job pinned (reuse with
	// max-jobs != 1), written once, when that job has started.
	scope string
	// termed is the ledger of the SIGTERM the signal thread forwarded to
	// the shell's group (whom it reached, who was running then); nil
	// before. Written once, by adoptForward.
	termed *termLedger
	// workers counts the workers running: work adds one as it starts a
	// worker, the worker's continuation takes it off before it runs. More
	// than one is a broken invariant (work checks it).
	workers int
	// parked holds the exclusive ops that wait for the worker, in arrival
	// order: dispatch appends, unpark takes from the front, drain answers
	// the clients' among them.
	parked []op
	// sweeping: a job end or cancel is terminating the job's processes,
	// from its op until its worker posts that the sweep is done
	// (setSweeping). A SIGTERM is not forwarded meanwhile.
	sweeping bool
	// expiring: the end of an expired lease is queued or running. evaluate
	// sets it as it queues that end; the end's reply clears it, so one
	// expiry queues one end.
	expiring bool
	// status is the command's exit status (plain-init mode), written when
	// the shell exits.
	status int
	// swept counts the processes the shutdown signalled, written by its
	// continuation for the exit line of the log.
	swept int
}

// draining tells whether the pod drains: the machine refuses claims, and
// the supervisor refuses every client's exclusive op (dispatch).
func (ls *loopState) draining() bool { return ls.machine.State() == lease.Draining }

// drainReason is why the pod drains, "" while it does not.
func (ls *loopState) drainReason() lease.Reason {
	return ls.machine.Snapshot(time.Now()).DrainReason
}
