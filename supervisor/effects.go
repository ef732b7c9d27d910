package supervisor

import (
	"context"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/podapi"
	"github.com/warmpod/warmpod/procscan"
	"github.com/warmpod/warmpod/shellproxy"
	"golang.org/x/sys/unix"
)

// The supervisor acts on the world only through these interfaces. The
// real ones (shellproxy.Proxy, shellproxy.Reaper, ProcTable, Pidfds,
// KubePod) are built in cmd/warmpod; the unit tests give fakes, so the
// lease, job, cancel, drain and signal paths run through the real Run loop
// under testing/synctest, without root. The clock is the time package:
// inside a synctest bubble it is synthetic.

// Shell is the underlying shell behind PID 1's stdio (*shellproxy.Proxy).
// Its methods are safe for concurrent use; Replace and Stop may take up to
// their grace period, so the supervisor calls them only from a worker.
type Shell interface {
	Start(env []string) error
	Replace(env []string, grace time.Duration) error
	Stop(grace time.Duration)
	Freeze(env []string)
	Retire()
	Close()
	Exited() <-chan shellproxy.Exit
	ShellPID() int
	Signal(sig unix.Signal) error
	Resize()
	LastInput() time.Time
	SetDiscardInput(discard bool) uint64
	Mode() shellproxy.Mode
}

// Children starts and reaps PID 1's children (*shellproxy.Reaper).
type Children interface {
	Start(argv0 string, argv []string, attr *syscall.ProcAttr) (int, <-chan shellproxy.Exit, error)
	Reap() int
	LastReap() time.Time
	Orphans() uint64
}

// Processes is the container's process table (ProcTable): what a job end
// must stop, and who is an executor's client to spare.
type Processes interface {
	// List returns the processes PID 1 is responsible for, except itself.
	List() ([]procscan.Proc, error)
	// Clients returns the PIDs among procs that are warmpod clients that
	// came in through an exec session.
	Clients(procs []procscan.Proc) map[int]bool
	// Signal sends sig to pid (nothing when it is gone, nothing to a
	// PID below 2).
	Signal(pid int, sig unix.Signal)
	// IO returns the bytes pid has read and written (rchar + wchar), and
	// false when they cannot be read.
	IO(pid int) (uint64, bool)
}

// Writers pins the process of a `job put` so a job end can kill exactly it
// (Pidfds).
type Writers interface {
	// Pin refers to process pid from now on, whatever later reuses its
	// number. Errors when it cannot.
	Pin(pid int) (Pinned, error)
}

// Pinned is a process that Writers pinned.
type Pinned interface {
	// Wait blocks until the process has exited.
	Wait()
	// Kill sends it SIGKILL (nothing if it is gone).
	Kill()
	// Close releases the pin.
	Close()
}

// Pod is the pod PID 1 runs in (KubePod).
type Pod interface {
	// Terminated records the exit reason where the kubelet reads it.
	Terminated(m podapi.TerminationMessage)
	// DeleteSelf deletes the pod through the API server, bounded by ctx.
	DeleteSelf(ctx context.Context)
}

// Effects are the interfaces the supervisor acts through.
type Effects struct {
	Shell    Shell
	Children Children
	Procs    Processes
	Writers  Writers
	Pod      Pod
}
