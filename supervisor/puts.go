package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/idle"
	"github.com/warmpod/warmpod/joblog"
	"golang.org/x/sys/unix"
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
// temporary file, during the next.
type inflightPut struct {
	pid   int
	tmp   string
	pidfd *os.File      // pidfd_open(2) of the writer, pinned against PID reuse
	done  chan struct{} // closed once the writer is gone and tmp handled
}

// StartPut registers the caller (peer) as a writer of the temporary file
// tmp for the job holding the lease and returns that job and its user, for
// the file's owner. jobID, when set, must be that job (75 otherwise; it
// is checked again under opMu, after Handle's renewal). Exit 69 when no job holds the lease or it was
// cancelled, 65 when tmp is not a put temporary file or lies in PID 1's
// logs directory, 75 when the job has maxPuts writes in flight, 70 when
// the caller cannot be pinned (pidfd_open fails).
//
// From here on the write belongs to the job: when that job ends (by job
// end, lease expiry or drain) the writer is killed and tmp removed before
// the lease is released, so the final rename can never happen during a
// later job; when the writer dies on its own, tmp is removed too.
func (s *Supervisor) StartPut(jobID string, peer control.Peer, tmp string) control.Response {
	if !filepath.IsAbs(tmp) || filepath.Clean(tmp) != tmp || !joblog.IsTempName(filepath.Base(tmp)) {
		return control.Response{Code: control.ExitDataErr, Error: "job put: not a put temporary file path"}
	}
	if d := filepath.Dir(tmp); d == s.cfg.LogsDir || strings.HasPrefix(d, s.cfg.LogsDir+"/") {
		return control.Response{Code: control.ExitDataErr, Error: "job put: the destination is PID 1's logs directory"}
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	j, lease, ok := s.current()
	switch {
	case !ok || j == nil:
		return control.Response{Code: control.ExitUnavailable, Error: idle.ErrNoJob.Error()}
	case j.cancelled:
		return control.Response{Code: control.ExitUnavailable, Error: "job cancelled: only status, logs and end remain"}
	case jobID != "" && jobID != lease.JobID:
		// Handle renewed jobID before opMu was taken; that job may
		// have ended and the next started since.
		return control.Response{Code: control.ExitTempFail, Error: idle.ErrWrongJob.Error()}
	case len(j.puts) >= maxPuts:
		return control.Response{Code: control.ExitTempFail, Error: "job put: too many writes in flight for this job"}
	}
	fd, err := unix.PidfdOpen(peer.PID, unix.PIDFD_NONBLOCK)
	if err != nil {
		return control.Response{Code: control.ExitSoftware, Error: "job put: cannot pin the writer: " + err.Error()}
	}
	p := &inflightPut{pid: peer.PID, tmp: tmp, pidfd: os.NewFile(uintptr(fd), "pidfd"), done: make(chan struct{})}
	s.mu.Lock()
	if j.puts == nil {
		j.puts = map[*inflightPut]bool{}
	}
	j.puts[p] = true
	s.mu.Unlock()
	go s.watchPut(j, p)
	return control.Response{OK: true, Job: lease.JobID, State: idle.Busy.String(), User: s.jobUser()}
}

// watchPut waits for the writer to exit, removes its temporary file (gone
// already after a successful rename) and forgets it.
func (s *Supervisor) watchPut(j *job, p *inflightPut) {
	waitExit(p.pidfd)
	if err := joblog.RemoveTemp(p.tmp); err != nil {
		s.log.Warn("put temporary file not removed", "job", j.spec.ID, "path", p.tmp, "error", err)
	}
	s.mu.Lock()
	delete(j.puts, p)
	s.mu.Unlock()
	_ = p.pidfd.Close()
	close(p.done)
}

// waitExit blocks until the process behind the pidfd f has exited (a pidfd
// turns readable then, pidfd_open(2)), through Go's poller when it takes
// the pidfd, polling every 50 ms otherwise.
func waitExit(f *os.File) {
	exited := func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return n > 0 || (err != nil && !errors.Is(err, unix.EINTR))
	}
	rc, err := f.SyscallConn()
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

// stopPuts kills the writers still in flight for j and waits until each is
// gone and its temporary file removed (caller holds opMu). It returns how
// many it stopped.
func (s *Supervisor) stopPuts(j *job) int {
	if j == nil {
		return 0
	}
	s.mu.Lock()
	var live []*inflightPut
	for p := range j.puts {
		live = append(live, p)
	}
	s.mu.Unlock()
	for _, p := range live {
		// The pidfd names exactly the registered writer, even if its PID
		// number has been reused since (pidfd_send_signal(2)).
		rc, err := p.pidfd.SyscallConn()
		if err == nil {
			_ = rc.Control(func(fd uintptr) { _ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
		}
	}
	deadline := time.After(putStopWait)
	for _, p := range live {
		select {
		case <-p.done:
		case <-deadline:
			s.log.Error("a job put writer did not die after SIGKILL", "job", j.spec.ID, "pid", p.pid)
			return len(live)
		}
	}
	if len(live) > 0 {
		s.log.Info("in-flight job puts stopped", "job", j.spec.ID, "count", len(live))
	}
	return len(live)
}
