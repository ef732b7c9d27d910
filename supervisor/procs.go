package supervisor

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/warmpod/warmpod/idle"
	"golang.org/x/sys/unix"
)

// ProcTable is the real Processes: the container's /proc. It knows which
// processes belong to the container and which of them are warmpod's own.
// Its fields are set by NewProcTable and only read afterwards.
type ProcTable struct {
	root   string // "/proc"
	self   int
	selfNS bool   // /proc shows our PID namespace and we are its init
	exe    string // readlink of our own /proc/self/exe
}

// NewProcTable reads the process table mounted at root ("/proc").
func NewProcTable(root string) *ProcTable {
	v := &ProcTable{root: root, self: os.Getpid()}
	if link, err := os.Readlink(root + "/self"); err == nil && link == strconv.Itoa(v.self) {
		v.selfNS = v.self == 1
	}
	v.exe, _ = os.Readlink(root + "/self/exe")
	return v
}

// List returns the processes warmpod is responsible for, except
// itself. As the PID 1 of a namespace whose /proc is mounted, that is every
// process; otherwise (a subreaper, or a /proc from another namespace) only
// its descendants, so that no process outside warmpod's tree is ever
// touched.
func (v *ProcTable) List() ([]idle.Proc, error) {
	all, err := idle.ReadProcs(v.root)
	if err != nil {
		return nil, err
	}
	out := all[:0:0]
	if v.selfNS {
		for _, p := range all {
			if p.PID > 1 {
				out = append(out, p)
			}
		}
		return out, nil
	}
	desc := make(map[int]bool)
	for _, pid := range idle.Descendants(all, v.self) {
		desc[pid] = true
	}
	for _, p := range all {
		if desc[p.PID] && p.PID > 1 {
			out = append(out, p)
		}
	}
	return out, nil
}

// isClient tells whether pid runs warmpod's own binary (a `warmpod job`,
// `probe` or `status` client).
func (v *ProcTable) isClient(pid int) bool {
	if v.exe == "" {
		return false
	}
	link, err := os.Readlink(v.root + "/" + strconv.Itoa(pid) + "/exe")
	return err == nil && link == v.exe
}

// Clients returns the warmpod clients that came in through an exec
// session (kubectl exec, runc exec): their ancestry leaves the namespace
// (a PPID of 0) without passing through PID 1. A warmpod binary that job
// code started descends from PID 1 (directly, or re-parented to it) and is
// job code like any other: it is not spared, whatever its name.
func (v *ProcTable) Clients(procs []idle.Proc) map[int]bool {
	parent := make(map[int]int, len(procs))
	for _, p := range procs {
		parent[p.PID] = p.PPID
	}
	out := map[int]bool{}
	for _, p := range procs {
		if !v.isClient(p.PID) {
			continue
		}
		pid, seen := p.PID, 0
		for pid > 1 && seen < len(procs)+1 {
			pp, ok := parent[pid]
			if !ok {
				break
			}
			if pp == 0 {
				out[p.PID] = true
				break
			}
			pid, seen = pp, seen+1
		}
	}
	return out
}

// ancestors returns pid and its ancestors among procs (the chain of the
// process that asked for a clean-up must survive it).
func ancestors(procs []idle.Proc, pid int) map[int]bool {
	parent := make(map[int]int, len(procs))
	for _, p := range procs {
		parent[p.PID] = p.PPID
	}
	out := map[int]bool{}
	for pid > 1 && !out[pid] {
		out[pid] = true
		pid = parent[pid]
	}
	return out
}

// Terminate sends SIGTERM to every container process that keep does not
// protect, waits up to grace for them to be gone, then SIGKILLs what is
// left and waits (bounded) for that too. It returns how many processes were
// signalled. PIDs below 2 are never signalled. Processes in termed have
// had their SIGTERM already (PID 1 forwarded the pod's SIGTERM to the
// shell's process group): they get no second one, since many programs take
// a second SIGTERM as "abort now" and skip their clean-up, but they are
// still SIGKILLed after grace.
func (v *ProcTable) Terminate(keep func(idle.Proc) bool, termed map[int]bool, grace time.Duration) int {
	targets := v.targets(keep)
	if len(targets) == 0 {
		return 0
	}
	for _, pid := range targets {
		if !termed[pid] {
			sendSignal(pid, unix.SIGTERM)
		}
	}
	if v.WaitGone(keep, grace) {
		return len(targets)
	}
	// The KILL rounds spare nothing that keep does not protect, not even
	// a process that looks like a runtime's exec init (any process can
	// call itself "runc:[2:INIT]"; a real one has exec'd long before).
	all := func(p idle.Proc) bool { return keep != nil && keep(p) }
	for round := 0; round < 3; round++ {
		for _, pid := range v.targetsOf(all) {
			sendSignal(pid, unix.SIGKILL)
		}
		if v.waitGoneOf(all, 2*time.Second) {
			break
		}
	}
	return len(targets)
}

// targets lists the container processes to signal: not zombies, not kept,
// and not a runtime's exec init still entering the container.
func (v *ProcTable) targets(keep func(idle.Proc) bool) []int {
	return v.targetsOf(func(p idle.Proc) bool { return entering(p) || (keep != nil && keep(p)) })
}

func (v *ProcTable) targetsOf(skip func(idle.Proc) bool) []int {
	procs, err := v.List()
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range procs {
		if p.State == 'Z' || skip(p) {
			continue
		}
		out = append(out, p.PID)
	}
	return out
}

// WaitGone polls every 10 ms, up to d, until no process outside keep
// (and no runtime exec init still entering) is left.
func (v *ProcTable) WaitGone(keep func(idle.Proc) bool, d time.Duration) bool {
	return v.waitGoneOf(func(p idle.Proc) bool { return entering(p) || (keep != nil && keep(p)) }, d)
}

func (v *ProcTable) waitGoneOf(skip func(idle.Proc) bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if len(v.targetsOf(skip)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// IO returns rchar+wchar of pid (/proc/PID/io); false when unreadable
// (the process is gone, or belongs to another user).
func (v *ProcTable) IO(pid int) (uint64, bool) { return idle.ReadIO(v.root, pid) }

func sendSignal(pid int, sig unix.Signal) {
	if pid > 1 {
		_ = unix.Kill(pid, sig)
	}
}

// entering tells whether p is a runtime's init that is still setting up an
// exec session (runc's "runc:[2:INIT]" before it execs the command, e.g. a
// `kubectl exec ... warmpod status` arriving during a clean-up). Killing it
// would fail that exec with "read init-p: connection reset by peer".
func entering(p idle.Proc) bool {
	return strings.HasPrefix(p.Comm, "runc:[")
}
