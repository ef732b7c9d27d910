package main

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/shellproxy"
)

// initProcess readies this process's signals as an init's: inherited
// ignored signals reset for its children, and every signal delivered to
// the returned channel.
func initProcess(log *initlog.Logger) chan os.Signal {
	if caught := shellproxy.CatchIgnoredSignals(); len(caught) > 0 {
		log.Debug("inherited ignored signals reset for children", "signals", fmt.Sprint(caught))
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, caught()...)
	return sigs
}

// becomeSubreaper makes this process a child subreaper when it is not
// PID 1, so that orphans are still reaped. It runs once this process is
// sure to be the pod's init (after the control socket check), before the
// first child.
func becomeSubreaper(log *initlog.Logger) {
	if os.Getpid() == 1 {
		return
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		log.Warn("not PID 1 and cannot become a child subreaper: orphans will not be reaped", "error", err)
	} else {
		log.Info("not PID 1: running as child subreaper", "pid", os.Getpid())
	}
}

// caught lists the signals PID 1 subscribes to through os/signal: all of
// 1–64 but SIGKILL and SIGSTOP (which cannot be caught) and SIGURG, the
// Go runtime's own preemption signal, which arrives often and means
// nothing to PID 1: relayed, it would only crowd the 64-slot channel,
// where a dropped SIGCHLD would leave a zombie to the 1 s reap tick.
// Signals 32–34 are in the list but Notify cannot take them: the runtime
// leaves them to the C library (docs/explanations/guarantees-and-threats.md).
func caught() []os.Signal {
	var out []os.Signal
	for s := unix.Signal(1); s <= 64; s++ {
		if s != unix.SIGKILL && s != unix.SIGSTOP && s != unix.SIGURG {
			out = append(out, s)
		}
	}
	return out
}

// harden applies the process-level protections of PID 1: no inherited fd
// reaches a child, cwd "/", no core
// dumps and not dumpable, so job code running as another user cannot read
// PID 1's memory, environment or fds through /proc (prctl(2) PR_SET_DUMPABLE).
func harden(log *initlog.Logger) {
	// Descriptors inherited from whoever started PID 1 (a runtime, a test
	// harness) must not leak into the shell: mark every fd >= 3 close-on-exec.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
			for _, e := range fds {
				if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
					unix.CloseOnExec(fd)
				}
			}
		}
	}
	if err := os.Chdir("/"); err != nil {
		log.Warn("chdir /", "error", err)
	}
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Warn("cannot make PID 1 non-dumpable", "error", err)
	}
}
