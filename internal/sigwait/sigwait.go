//go:build linux

// Package sigwait takes process-directed signals on one locked OS thread
// with rt_sigtimedwait(2), so PID 1 can act on a signal (forward it to
// the shell) before the Go runtime's own path has even started: that path
// is a handler on whatever thread the kernel picked, os/signal's relay
// goroutine, a channel send and a scheduler wake-up, each a context
// switch on a busy node.
//
// How the kernel picks the taker (kernel/signal.c, complete_signal): a
// process-directed signal goes to the thread group leader (the main
// thread) when that thread does not block it, and to some other thread
// that does not block it otherwise. rt_sigtimedwait unblocks the waited
// set while it sleeps, so a main thread asleep in Wait is the first
// choice and takes the signal; while it is busy (it blocks the set
// between waits) the signal goes to another Go thread, whose runtime
// handler relays it to os/signal. Callers therefore keep os/signal
// subscribed to the same signals as the fallback: every signal is taken
// exactly once, by one path or the other.
//
// The waiting thread must be the main thread: the caller locks the main
// goroutine to it from an init function (runtime.LockOSThread there keeps
// the lock runtime.main holds during initialisation), and New checks it.
// Children are unaffected by the blocked set: the Go runtime gives every
// forked child the signal mask the process started with.
package sigwait

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNotMainThread is returned by New when the calling goroutine is not
// locked to the main thread: signals would keep going to the main thread
// and the waiter would never see one.
var ErrNotMainThread = errors.New("sigwait: not called on the main thread (lock it with runtime.LockOSThread in an init function)")

// Waiter takes the signals of its set on the thread that built it.
type Waiter struct {
	set     unix.Sigset_t
	tid     int
	stop    atomic.Bool
	stopped chan struct{} // closed when Run has returned
}

// New blocks sigs on the calling thread and returns a Waiter for them.
// The calling goroutine must stay locked to the main thread for as long
// as the Waiter runs. SIGKILL and SIGSTOP cannot be waited for and are
// left out, as are signal numbers outside 1–64. Errors: ErrNotMainThread,
// or rt_sigprocmask's.
func New(sigs []unix.Signal) (*Waiter, error) {
	if unix.Gettid() != unix.Getpid() {
		return nil, ErrNotMainThread
	}
	w := &Waiter{tid: unix.Gettid(), stopped: make(chan struct{})}
	for _, s := range sigs {
		if s < 1 || s > 64 || s == unix.SIGKILL || s == unix.SIGSTOP {
			continue
		}
		w.set.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &w.set, nil); err != nil {
		return nil, err
	}
	return w, nil
}

// Has reports whether sig is in the Waiter's set.
func (w *Waiter) Has(sig unix.Signal) bool {
	if sig < 1 || sig > 64 {
		return false
	}
	return w.set.Val[(sig-1)/64]&(1<<((uint(sig)-1)%64)) != 0
}

// Run hands every signal of the set to fn, on the calling thread, until
// Stop; fn runs before anything else looks at the signal, so it should
// do the urgent part and leave logging to others. Run must be called on
// the goroutine that called New. On return it unblocks the set again, so
// a signal that comes later takes the os/signal path.
func (w *Waiter) Run(fn func(unix.Signal)) {
	defer close(w.stopped)
	defer func() { _ = unix.PthreadSigmask(unix.SIG_UNBLOCK, &w.set, nil) }()
	runtime.LockOSThread() // already locked by the caller; this only nests
	defer runtime.UnlockOSThread()
	for !w.stop.Load() {
		sig, err := w.wait()
		if err != nil {
			// EINTR: a signal outside the set ran its handler on this
			// thread (Stop's wake-up among them). EAGAIN cannot happen
			// without a timeout. Anything else (EFAULT, EINVAL) is a bug
			// here, and returning hands the signals to os/signal.
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			return
		}
		fn(sig)
	}
}

// wait is rt_sigtimedwait(set, NULL, NULL): it sleeps until a signal of
// the set is pending for this thread or the process and dequeues it. The
// kernel's sigset is 64 bits (_NSIG/8 bytes), the first word of Val.
func (w *Waiter) wait() (unix.Signal, error) {
	r, _, errno := unix.Syscall6(unix.SYS_RT_SIGTIMEDWAIT, uintptr(unsafe.Pointer(&w.set)), 0, 0, 8, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return unix.Signal(r), nil
}

// Stop makes Run return and waits until it has (at most about timeout;
// zero means 1 s). It wakes the waiting thread with a thread-directed
// SIGURG, which the Go runtime handles (it is its preemption signal) and
// ignores when no preemption is due, and which interrupts
// rt_sigtimedwait with EINTR. The wake-up is repeated, since one sent
// just before the thread enters the wait would be lost.
func (w *Waiter) Stop(timeout time.Duration) {
	if timeout <= 0 {
		timeout = time.Second
	}
	w.stop.Store(true)
	deadline := time.Now().Add(timeout)
	for {
		_ = unix.Tgkill(unix.Getpid(), w.tid, unix.SIGURG)
		select {
		case <-w.stopped:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return
		}
	}
}
