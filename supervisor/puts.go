package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/putfile"
)

// maxPuts bounds the `job put`s in flight for one job (each holds a
// descriptor and a goroutine in PID 1).
const maxPuts = 64

// putStopWait bounds how long a job end waits for one killed writer to be
// gone (SIGKILL is not delayed by the writer; only an uninterruptible
// sleep in the kernel can hold it).
const putStopWait = 5 * time.Second

// inflightPut is a `job put` registered by StartPut: a writer process in
// the container, outside PID 1's tree (it came in through an exec), that
// is writing tmp for the job that held the lease when it asked. Why PID 1
// tracks it: the writer is an executor client, which a job end spares, so
// without this an upload started by one job could complete, or leave its
// temporary file, during the next. Its fields never change after
// StartPut; done is closed once the writer is gone and tmp handled.
type inflightPut struct {
	pid  int
	tmp  string
	pin  Pinned
	done chan struct{}
}

// StartPut registers the caller (peer PID) as a writer of the temporary
// file tmp for the job holding the lease and returns the job user, for the
// file's owner. jobID, when set, must be that job.
//
// From here on the write belongs to the job: when that job ends (by job
// end, lease expiry or drain) the writer is killed and tmp removed before
// the lease is released, so the final rename can never happen during a
// later job; when the writer dies on its own, tmp is removed too.
//
// Errors: ErrInvalid when tmp is not a put temporary file or lies in PID
// 1's logs directory, in RuntimeDir, or in the jobs directory outside this
// job's own directory; lease.ErrNoJob; ErrCancelled; lease.ErrWrongJob;
// ErrRefused when the job has maxPuts writes in flight; an internal error
// when the caller cannot be pinned.
func (s *Supervisor) StartPut(jobID string, peer int, tmp string) (JobInfo, error) {
	if !filepath.IsAbs(tmp) || filepath.Clean(tmp) != tmp || !putfile.IsTempName(filepath.Base(tmp)) {
		return JobInfo{}, errorf(ErrInvalid, "job put: not a put temporary file path")
	}
	d := filepath.Dir(tmp)
	if d == s.cfg.RuntimeDir || within(d, s.cfg.LogsDir) || d == s.cfg.JobsDir {
		return JobInfo{}, errorf(ErrInvalid, "job put: %s is in PID 1's runtime directory", d)
	}
	return call(s, true, func(reply func(JobInfo, error)) {
		j, err := s.current(jobID)
		switch {
		case err != nil:
			reply(JobInfo{}, err)
			return
		case j.phase == jobCancelled:
			reply(JobInfo{}, errorf(ErrCancelled, "job cancelled: only status, logs, wait, cancel and end remain"))
			return
		case within(d, s.cfg.JobsDir) && !within(d, j.dir):
			// The jobs directory is PID 1's; of it, a put may write in
			// this job's own directory only (a file there is wiped at
			// job end; anywhere else it would outlive the job).
			reply(JobInfo{}, errorf(ErrInvalid, "job put: %s is in PID 1's runtime directory, outside this job's", d))
			return
		case len(j.puts) >= maxPuts:
			reply(JobInfo{}, errorf(ErrRefused, "job put: too many writes in flight for this job"))
			return
		}
		pin, err := s.fx.Writers.Pin(peer)
		if err != nil {
			reply(JobInfo{}, fmt.Errorf("job put: cannot pin the writer: %w", err))
			return
		}
		p := &inflightPut{pid: peer, tmp: tmp, pin: pin, done: make(chan struct{})}
		if j.puts == nil {
			j.puts = map[*inflightPut]bool{}
		}
		j.puts[p] = true
		go s.watchPut(j.id, p, func() { delete(j.puts, p) })
		reply(JobInfo{ID: j.id, User: s.jobUser()}, nil)
	})
}

// within tells whether path is dir or below it (both clean).
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// watchPut waits for the writer to exit, removes its temporary file (gone
// already after a successful rename), and has the loop forget it.
func (s *Supervisor) watchPut(jobID string, p *inflightPut, forget func()) {
	p.pin.Wait()
	if err := putfile.RemoveTemp(p.tmp); err != nil {
		s.log.Warn("put temporary file not removed", "job", jobID, "path", p.tmp, "error", err)
	}
	p.pin.Close()
	close(p.done)
	s.post(forget)
}

// stopPuts kills the writers in puts, which were in flight for j, and
// waits until each is gone and its temporary file removed (a worker). It
// returns how many it stopped.
func (s *Supervisor) stopPuts(j *job, puts []*inflightPut) int {
	for _, p := range puts {
		p.pin.Kill()
	}
	deadline := time.After(putStopWait)
	for _, p := range puts {
		select {
		case <-p.done:
		case <-deadline:
			s.log.Error("a job put writer did not die after SIGKILL", "job", j.id, "pid", p.pid)
			return len(puts)
		}
	}
	if len(puts) > 0 {
		s.log.Info("in-flight job puts stopped", "job", j.id, "count", len(puts))
	}
	return len(puts)
}

// Pidfds is the real Writers: it pins a process with pidfd_open(2), so a
// signal reaches exactly that process even if its PID number has been
// reused since (pidfd_send_signal(2)).
type Pidfds struct{}

// Pin opens a pidfd for pid. Errors from pidfd_open(2) (ESRCH: gone;
// ENOSYS: Linux before 5.3).
func (Pidfds) Pin(pid int) (Pinned, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return pidfd{os.NewFile(uintptr(fd), "pidfd")}, nil
}

type pidfd struct{ f *os.File }

// Wait blocks until the process has exited: a pidfd turns readable then
// (pidfd_open(2)). Through Go's poller when it takes the pidfd, polling
// every 50 ms otherwise.
func (p pidfd) Wait() {
	exited := func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return n > 0 || (err != nil && !errors.Is(err, unix.EINTR))
	}
	rc, err := p.f.SyscallConn()
	if err == nil && rc.Read(exited) == nil {
		return
	}
	for {
		done := true
		if rc != nil {
			_ = rc.Control(func(fd uintptr) { done = exited(fd) })
		}
		if done {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill sends SIGKILL through the pidfd; nothing once it is closed.
func (p pidfd) Kill() {
	if rc, err := p.f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
	}
}

// Close releases the pidfd.
func (p pidfd) Close() { _ = p.f.Close() }
