package shellproxy

import (
	"errors"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Exit is the outcome of one child process, as seen by the reaper.
type Exit struct {
	// PID is the process ID that was reaped.
	PID int
	// Status is the raw wait status from wait4(2).
	Status unix.WaitStatus
}

// Code returns the exit code the way a shell and every common init report
// it: the exit status for a normal exit, 128+N when the process died of
// signal N (POSIX sh "Exit Status for Commands"; tini, dumb-init and
// catatonit all do the same).
func (e Exit) Code() int {
	switch {
	case e.Status.Exited():
		return e.Status.ExitStatus()
	case e.Status.Signaled():
		return 128 + int(e.Status.Signal())
	default:
		return 255
	}
}

// Reaper is the single owner of wait4 in the process. It reaps every child
// (its own and re-parented orphans) and hands the status of a registered
// child to the one waiter that started it. Because os/exec's Wait would race
// a wait4(-1) loop for the same child (and lose the status), every child of
// PID 1 must be started through Reaper.Start, never through os/exec.
//
// Reap must be called after every SIGCHLD; a periodic call is cheap
// insurance against coalesced signals.
type Reaper struct {
	// mu guards waiters and is held across each fork in Start, so Reap
	// (which takes it too) can never collect a child before its waiter is
	// registered. A leaf lock.
	mu      sync.Mutex
	waiters map[int]chan Exit

	orphans  atomic.Uint64
	lastReap atomic.Int64 // unix nanoseconds of the last Reap call
}

// NewReaper returns a Reaper with no registered children.
func NewReaper() *Reaper {
	r := &Reaper{waiters: make(map[int]chan Exit)}
	r.lastReap.Store(time.Now().UnixNano())
	return r
}

// Start forks and execs argv0 with argv and attr (see syscall.ForkExec) and
// registers the new PID before any Reap can observe its exit. The returned
// channel receives exactly one Exit. Errors are those of syscall.ForkExec
// (for example ENOENT or EACCES for a command that cannot be executed).
//
// The child starts with an empty signal mask whatever mask warmpod itself
// inherited: the Go runtime hands the forking thread's mask to the child,
// and only unblocks the signals it needs itself.
func (r *Reaper) Start(argv0 string, argv []string, attr *syscall.ProcAttr) (int, <-chan Exit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	runtime.LockOSThread()
	var empty, old unix.Sigset_t
	maskErr := unix.PthreadSigmask(unix.SIG_SETMASK, &empty, &old)
	pid, err := syscall.ForkExec(argv0, argv, attr)
	if maskErr == nil {
		_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	}
	runtime.UnlockOSThread()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan Exit, 1)
	r.waiters[pid] = ch
	return pid, ch, nil
}

// Reap collects every child that has exited, without blocking, until
// wait4 reports none left (0 or ECHILD). Registered children go to their
// waiter; the rest are counted as orphans. It returns how many processes it
// reaped.
func (r *Reaper) Reap() int {
	r.lastReap.Store(time.Now().UnixNano())
	n := 0
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return n
		}
		n++
		r.mu.Lock()
		ch, ok := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ok {
			ch <- Exit{PID: pid, Status: ws}
		} else {
			r.orphans.Add(1)
		}
	}
}

// Orphans returns how many processes were reaped that nobody had started
// through Start (re-parented orphans, exec sessions' leftovers).
func (r *Reaper) Orphans() uint64 { return r.orphans.Load() }

// LastReap returns when Reap last ran; a liveness check uses it to tell
// that the reaping loop is still turning.
func (r *Reaper) LastReap() time.Time { return time.Unix(0, r.lastReap.Load()) }

// CatchIgnoredSignals makes every signal that warmpod inherited as ignored
// (SIG_IGN) caught and dropped instead, so that its children start with the
// default disposition: at exec(2) a caught signal becomes SIG_DFL, an
// ignored one stays ignored, and the Go runtime resets only the signals it
// handles itself. Call it once at start-up, before the first Start. It
// returns the signals it took over.
func CatchIgnoredSignals() []os.Signal {
	var sigs []os.Signal
	for i := 1; i <= 64; i++ {
		sig := syscall.Signal(i)
		if sig == syscall.SIGKILL || sig == syscall.SIGSTOP || !signal.Ignored(sig) {
			continue
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) > 0 {
		// Never read: signal.Notify drops what does not fit.
		signal.Notify(make(chan os.Signal, 1), sigs...)
	}
	// The runtime will not take over the signals it reserves for glibc
	// (32 and 33, unused by a static Go binary): reset those to SIG_DFL
	// directly if they are still ignored.
	for i := 1; i <= 64; i++ {
		if i == int(syscall.SIGKILL) || i == int(syscall.SIGSTOP) {
			continue
		}
		if h, err := sigHandler(i); err == nil && h == sigIgn {
			if setSigDefault(i) == nil && !slices.Contains(sigs, os.Signal(syscall.Signal(i))) {
				sigs = append(sigs, syscall.Signal(i))
			}
		}
	}
	return sigs
}

// kernelSigaction is struct sigaction as rt_sigaction(2) takes it on Linux.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const sigIgn = 1 // SIG_IGN

func sigHandler(sig int) (uintptr, error) {
	var old kernelSigaction
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	if e != 0 {
		return 0, e
	}
	return old.handler, nil
}

func setSigDefault(sig int) error {
	act := kernelSigaction{} // SIG_DFL
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
