package supervisor

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/procscan"
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
func (v *ProcTable) List() ([]procscan.Proc, error) {
	all, err := procscan.ReadProcs(v.root)
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
	for _, pid := range procscan.Descendants(all, v.self) {
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
func (v *ProcTable) Clients(procs []procscan.Proc) map[int]bool {
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
func ancestors(procs []procscan.Proc, pid int) map[int]bool {
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

// IO returns rchar+wchar of pid (/proc/PID/io); false when unreadable
// (the process is gone, or belongs to another user).
func (v *ProcTable) IO(pid int) (uint64, bool) { return procscan.ReadIO(v.root, pid) }

// Signal sends sig to pid; a process that is gone already (ESRCH) is
// not an error worth reporting. PIDs below 2 are refused: kill(2) of 0 or
// -1 reaches a whole group or every process, and PID 1 is warmpod.
func (v *ProcTable) Signal(pid int, sig unix.Signal) {
	if pid > 1 {
		_ = unix.Kill(pid, sig)
	}
}
