package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/joblog"
)

// jobLogs prints the job log from --offset as "<offset> <line>" records,
// like gitlab-runner-helper read-logs; exit 100 when the log disappears.
func jobLogs(args []string) int {
	fs, sock, job := jobFlags("job logs")
	offset := fs.Int64("offset", 0, "byte offset to resume from")
	follow := fs.Bool("follow", false, "keep reading as the log grows (renews the lease)")
	waitFile := fs.Duration("wait-file-timeout", time.Minute, "how long to wait for the log to exist")
	path := fs.String("path", "", "log file (default: the current job's)")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	if *offset < 0 {
		fmt.Fprintln(os.Stderr, "warmpod: job logs: --offset must not be negative")
		return control.ExitUsage
	}
	id := *job
	if *path == "" {
		pid1 := newClient(*sock)
		resp, code := pid1.answer(pid1.JobStatus(context.Background(), *job, ""))
		if resp == nil {
			return code
		}
		if !resp.OK {
			fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
			return resp.Code
		}
		*path, id = resp.LogPath, resp.Job
	}
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer stop()
	ctx, gone := context.WithCancelCause(ctx)
	defer gone(nil)
	var lastRenew time.Time
	renew := func() {
		if id == "" || time.Since(lastRenew) < time.Second {
			return
		}
		// Only a live reader may keep the job alive: a follower whose
		// exec client died (kubectl killed: the process inside the
		// container survives it) must not renew a dead executor's lease.
		// A quiet stage writes nothing that would fail, so ask the
		// kernel instead.
		if outputGone(os.Stdout) {
			gone(errNoReader)
			return
		}
		lastRenew = time.Now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, _ = control.Client{Socket: *sock}.Renew(rctx, id)
	}
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	err := joblog.Read(ctx, *path, flushWriter{out}, joblog.ReadOptions{Offset: *offset, Follow: *follow, WaitFile: *waitFile, OnPoll: renew})
	_ = out.Flush()
	switch {
	case errors.Is(context.Cause(ctx), errNoReader):
		fmt.Fprintln(os.Stderr, "warmpod: job logs:", errNoReader)
		return 1
	case errors.Is(err, joblog.ErrGone), errors.Is(err, joblog.ErrNotFound):
		fmt.Fprintln(os.Stderr, "warmpod: job logs:", err)
		return control.ExitLogGone
	case err != nil:
		fmt.Fprintln(os.Stderr, "warmpod: job logs:", err)
		return 1
	}
	return 0
}

// outputGone tells whether nobody can read f any more: poll(2) reports
// POLLERR on a pipe whose read end is closed and POLLHUP on a socket or
// terminal whose other side is gone. It costs one syscall and writes
// nothing, so it works while the followed job is quiet. A regular file
// or /dev/null never reports gone.
func outputGone(f *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLOUT}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0
}

// flushWriter flushes after every record so a follower sees lines at once.
type flushWriter struct{ w *bufio.Writer }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil && f.w.Buffered() > 0 && p[len(p)-1] == '\n' {
		err = f.w.Flush()
	}
	return n, err
}
