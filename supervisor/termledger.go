package supervisor

import "github.com/warmpod/warmpod/procscan"

// procID names one process for its lifetime: its PID and its start time
// (clock ticks after boot, /proc/PID/stat field 22). A PID that a later
// process reuses has another start time, so it is another procID.
type procID struct {
	pid   int
	start uint64
}

func idOf(p procscan.Proc) procID { return procID{p.PID, p.Start} }

// termLedger is what one stop (the pod's shutdown, a job end or cancel, a
// stage cancel) knows of the SIGTERMs it has sent, across its rounds: the
// forward to the shell's process group, the sweep, the shutdown's second
// look for warmpod's own clients. It carries two rules:
//
//   - One SIGTERM per process. Many programs take a second SIGTERM as
//     "abort now" and skip their clean-up (a shell's trap is interrupted,
//     Go's os/signal default handler exits), so a process in sent gets no
//     second one, whoever sent the first.
//   - A SIGTERM only for a process that was running when the stop sent its
//     first one (running). A process started later is the clean-up of one
//     that got its TERM: the `date` or `rm` of a shell's trap, the flush a
//     handler forks. A TERM of its own would cut that clean-up short (tini
//     issue 78's complaint, made worse). It gets SIGKILL after the grace
//     period, like everything still there then.
//
// running is nil until the first SIGTERM goes out; begin records it.
// Not safe for concurrent use: the goroutine that sends owns it (the
// signal thread, then the loop, then one worker, with a clone each time).
type termLedger struct {
	sent    map[procID]bool
	running map[procID]bool
}

// begin records, at the stop's first SIGTERM, which processes are running
// (procs as listed right after, or just before, that SIGTERM). A later
// call changes nothing: the first SIGTERM of the stop is the cut.
func (l *termLedger) begin(procs []procscan.Proc) {
	if l.running != nil {
		return
	}
	l.running = make(map[procID]bool, len(procs))
	for _, p := range procs {
		if p.State != 'Z' {
			l.running[idOf(p)] = true
		}
	}
}

// due tells whether p gets a SIGTERM now: it was running at the first
// SIGTERM of the stop and has not had one.
func (l *termLedger) due(p procscan.Proc) bool {
	id := idOf(p)
	return !l.sent[id] && (l.running == nil || l.running[id])
}

// mark records that p had its SIGTERM.
func (l *termLedger) mark(p procscan.Proc) {
	if l.sent == nil {
		l.sent = map[procID]bool{}
	}
	l.sent[idOf(p)] = true
}

// clone returns a copy a worker may own; a nil ledger clones to an empty
// one (no SIGTERM sent yet, nothing running recorded).
func (l *termLedger) clone() *termLedger {
	c := &termLedger{sent: map[procID]bool{}}
	if l == nil {
		return c
	}
	for id := range l.sent {
		c.sent[id] = true
	}
	if l.running != nil {
		c.running = make(map[procID]bool, len(l.running))
		for id := range l.running {
			c.running[id] = true
		}
	}
	return c
}
