package supervisor

import (
	"context"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/podapi"
	"github.com/warmpod/warmpod/procscan"
	"github.com/warmpod/warmpod/shellproxy"
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
	// Start runs the first shell with env ("KEY=VALUE").
	Start(env []string) error
	// Replace stops the current shell (SIGKILL after grace) and starts a
	// fresh one with env.
	Replace(env []string, grace time.Duration) error
	// Stop stops the current shell and starts no other.
	Stop(grace time.Duration)
	// Freeze keeps the current shell from being replaced when it exits,
	// until the next Replace; a non-nil env is the next shell's.
	Freeze(env []string)
	// Retire is Freeze without waiting for a swap in progress (the
	// signal thread, before it forwards SIGTERM).
	Retire()
	// Close restores the terminal and stops copying stdin.
	Close()
	// Exited delivers the command's exit in plain-init mode.
	Exited() <-chan shellproxy.Exit
	// ShellPID is the current shell's PID, 0 when none.
	ShellPID() int
	// StartError is why the last start of a shell failed, nil once one
	// has started.
	StartError() error
	// Signal sends sig to the current shell's process group.
	Signal(sig unix.Signal) error
	// Resize copies the container terminal's window size to the shell's.
	Resize()
	// LastInput is when the last stdin byte arrived.
	LastInput() time.Time
	// SetDiscardInput drops (true) or delivers stdin bytes, and returns
	// how many were dropped since the last call.
	SetDiscardInput(discard bool) uint64
	// Mode is the stdio mode (pty, pipe, inherit).
	Mode() shellproxy.Mode
}

// Children starts and reaps PID 1's children (*shellproxy.Reaper).
type Children interface {
	// Start forks a child of PID 1 and returns its PID and a channel that
	// gets its one Exit.
	Start(argv0 string, argv []string, attr *syscall.ProcAttr) (int, <-chan shellproxy.Exit, error)
	// Reap collects every child that has exited, without blocking, and
	// returns how many.
	Reap() int
	// LastReap is when Reap last ran (the reaper's liveness).
	LastReap() time.Time
	// Orphans counts the reaped processes nobody had started with Start.
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
	// DeleteSelf deletes the pod through the API server, bounded by ctx,
	// and tells whether the pod is going (deleted now, or gone already):
	// the kubelet will stop the container.
	DeleteSelf(ctx context.Context) bool
}

// Effects are the interfaces the supervisor acts through.
type Effects struct {
	Shell    Shell     // the shell behind PID 1's stdio
	Children Children  // PID 1's children: the shell, the stages
	Procs    Processes // the container's process table
	Writers  Writers   // pins `job put` writers
	Pod      Pod       // the termination message and the self-deletion
}
