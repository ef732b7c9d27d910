package mux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// Runner is the process on the executor's host whose life is the job's:
// for the Actions runner, the process that starts the hook for every step
// of the job (the hook's parent at prepare_job, the runner's worker). PID
// and Start (its start time, in clock ticks since boot: field 22 of
// /proc/PID/stat) name it across PID reuse.
type Runner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// RunnerOf returns the Runner of process pid. Errors: no such process,
// pid 1 or below (a parent that is init: the runner is gone already), or
// /proc unreadable.
func RunnerOf(pid int) (*Runner, error) {
	if pid <= 1 {
		return nil, fmt.Errorf("pid %d is no runner", pid)
	}
	start, err := procStart(pid)
	if err != nil {
		return nil, err
	}
	return &Runner{PID: pid, Start: start}, nil
}

// procStart reads the start time of process pid from /proc/PID/stat
// (field 22, after the command name in parentheses, which may itself hold
// spaces and parentheses).
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// runnerGone returns a channel that is closed once r's process has exited
// (at once when it is not there, or is another process under its PID), or
// ctx ends. The process is held by a pidfd, so a PID reused after its exit
// is never taken for it.
func runnerGone(ctx context.Context, r Runner) <-chan struct{} {
	gone := make(chan struct{})
	fd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		close(gone) // ESRCH: it exited and was reaped
		return gone
	}
	// Opened: the pidfd is that process for good. It is r's when its
	// start time is r's.
	if start, err := procStart(r.PID); err != nil || start != r.Start {
		unix.Close(fd)
		close(gone)
		return gone
	}
	go func() {
		defer close(gone)
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for ctx.Err() == nil {
			// A pidfd is readable once its process has exited. The
			// second's timeout only lets ctx end the wait.
			n, err := unix.Poll(fds, 1000)
			if err != nil && !errors.Is(err, unix.EINTR) {
				return
			}
			if n > 0 {
				return
			}
		}
	}()
	return gone
}

// KeepLease renews the lease of job in pod through cl every ttl/3
// (executor.Core.KeepAlive: `job status --job`, which renews the lease
// it names) while the runner's process lives, and returns when it has
// exited or ctx ends. So a pause between two steps longer than ttl does
// not end the job, and a runner that dies still leaves a pod whose lease
// lapses within ttl, as when nothing renews it. It returns true when the
// runner is gone.
func KeepLease(ctx context.Context, cl session.Cluster, pod poolapi.Pod, job string, ttl time.Duration, r Runner, log io.Writer) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gone := runnerGone(ctx, r)
	core := &session.Session{Cluster: cl, Log: log, LeaseTTL: ttl}
	stop := core.KeepAlive(ctx, pod, job)
	defer stop()
	select {
	case <-gone:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}
