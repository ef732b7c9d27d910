package shellproxy

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// spliceMax bounds one splice (bytes): what the shell's pipe holds
// (stdinPipe asks for 1 MiB). A splice moves what stdin has, up to this.
const spliceMax = 1 << 20

// spliceFrom is readFrom for a stdin that is a pipe: bytes go from stdin
// into the shell's pipe with splice(2), never through this process's
// memory, whenever that keeps every guarantee of the copy; otherwise a
// chunk is read and queued exactly as copyFrom does. It returns false,
// having taken nothing from stdin, when it cannot run at all (copyFrom
// takes over), and true once stdin is at end of file or the pump is
// closed.
//
// Waiting. PID 1's stdin is normally a blocking pipe outside Go's poller
// (os.NewFile leaves a blocking descriptor alone), and its flags belong to
// an open file description shared with whoever created it, so they are
// left alone. spliceFrom waits for it with poll(2) on a duplicate of the
// descriptor (ours to close, so closing the *os.File never races with it)
// together with an eventfd that close signals, so shutdown never leaves
// this goroutine blocked. Only when stdin is readable are bytes taken:
//
//   - Splice, when a splice target is attached (spliceRCLocked), nothing
//     is queued and run is not writing. The shell's end is non-blocking,
//     which makes the kernel treat the whole pipe-to-pipe splice as
//     non-blocking: it moves what stdin has (up to spliceMax) or fails with
//     EAGAIN having moved nothing. As stdin was readable and nothing else
//     reads it, EAGAIN means the shell's pipe is full; the wait for room is
//     the runtime poller's (RawConn.Write), which detach and close end with
//     a write deadline exactly as they end run's blocked writes.
//   - Read and queue otherwise: no target, discarding, a pty, a splice
//     that failed for good.
//
// Not Go's own way between two files (splice into an internal pipe, then
// out of it): with a blocking stdin the first splice sleeps in the kernel
// where close cannot reach it (as read(2) does in copyFrom), and bytes
// parked in the internal pipe would be in flight whenever a shell is
// swapped, to be read back into the queue. Nor a
// non-blocking reopen of /proc/self/fd/0 for the poller: it needs /proc
// and permission on the runtime's pipe, and measured no faster here.
//
// No byte lost, none duplicated, order kept. A splice moves bytes from
// stdin's pipe into the shell's pipe in one system call and returns how
// many it moved; bytes it did not move are still in stdin (EAGAIN, EPIPE
// and an interrupted wait move none). So a byte is always in stdin, in the
// queue or in a shell's pipe, never held in flight by this goroutine, and
// detach has nothing to put back: when a shell is replaced, retire reads
// what the old shell left unread in its pipe and prepends it to the queue,
// for spliced bytes exactly as for written ones. Order holds because a
// splice starts only when the queue is empty and no write is in flight,
// and while a splice target is attached nothing more is read into the
// queue until it has drained (holdLocked), so everything queued earlier
// reaches the shell before anything spliced later.
//
// Activity and back-pressure. A splice that moved bytes stamps lastInput
// as a read does, and the queue stays bounded by maxQueued. One thing
// moves: while a shell that takes splices does not read, new bytes wait
// in stdin's pipe rather than in the queue, so they count as input when
// they move, as they already did once the queue was full.
func (p *pump) spliceFrom(f *os.File) bool {
	in, err := dupFd(f)
	if err != nil {
		return false
	}
	growPipe(in, spliceMax)
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(in)
		return false
	}
	p.mu.Lock()
	p.wake = wake
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.wake = -1 // close must not write to a number the kernel may reuse
		p.mu.Unlock()
		_ = unix.Close(wake)
		_ = unix.Close(in)
	}()
	for {
		p.mu.Lock()
		for !p.closed && p.holdLocked() {
			p.cond.Wait()
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return true
		}
		ready, err := waitReadable(in, wake)
		if err != nil {
			return false // poll itself failed; nothing was taken, copyFrom goes on
		}
		if !ready {
			return true // close signalled wake
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return true
		}
		t, rc := p.target, p.spliceRCLocked()
		if rc != nil && (len(p.queue) > 0 || p.writing) {
			// A shell was attached while we waited and bytes queued
			// before it must go first: holdLocked waits for them.
			p.mu.Unlock()
			continue
		}
		p.splicing = rc != nil
		p.mu.Unlock()
		if rc != nil {
			if p.spliceOnce(in, t, rc) {
				return true
			}
			continue
		}
		buf := make([]byte, readChunk)
		n, err := readFd(in, buf)
		if errors.Is(err, unix.EAGAIN) {
			continue // a non-blocking stdin that something else emptied
		}
		if n > 0 {
			p.took(fit(buf, n))
		}
		if n <= 0 || err != nil {
			p.setEOF()
			return true
		}
	}
}

// holdLocked reports whether spliceFrom must leave stdin alone for now
// (caller holds mu). With a splice target attached: until what is queued
// has been written, because splicing now would overtake it, and reading
// more into the queue could keep it from ever draining (a shell slower
// than stdin), which would keep every later byte on the copy path.
// Without one: while maxQueued bytes wait, the back-pressure of copyFrom.
func (p *pump) holdLocked() bool {
	if p.spliceRCLocked() != nil {
		return len(p.queue) > 0 || p.writing
	}
	return p.queued >= maxQueued
}

// spliceRCLocked returns the raw connection of the target when the next
// stdin bytes may be spliced into it, else nil (caller holds mu). Dropped
// bytes (discarding) must be read to be counted, so they are never
// spliced.
func (p *pump) spliceRCLocked() syscall.RawConn {
	if p.target == nil || p.noSplice || p.discarding.Load() {
		return nil
	}
	return p.targetRC
}

// spliceOnce splices what stdin (in) has into t, whose raw connection is
// rc, and records the outcome; it reports whether stdin is at end of
// file. The caller has set p.splicing.
func (p *pump) spliceOnce(in int, t *os.File, rc syscall.RawConn) (eof bool) {
	n, drained, err := spliceInto(in, rc)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.splicing = false
	p.cond.Broadcast()
	if n > 0 {
		p.spliced.Add(uint64(n))
		p.lastInput.Store(time.Now().UnixNano())
		return false
	}
	var errno unix.Errno
	switch {
	case drained, errors.Is(err, os.ErrDeadlineExceeded):
		// Nothing moved: stdin was emptied behind our back, or detach or
		// close ended the wait for room. The bytes are still in stdin.
	case err == nil:
		// 0 bytes and no error: stdin has no writer left and is empty.
		p.eof = true
		return true
	case errors.As(err, &errno) && errno == unix.EPIPE:
		// The shell's end has no reader left: gone for good, as run
		// treats a failed write. The bytes are still in stdin.
		if p.target == t {
			p.target, p.targetRC = nil, nil
		}
	case errors.As(err, &errno):
		// EINVAL, ENOSYS, EOPNOTSUPP (a kernel, seccomp profile or pipe
		// pair that will not splice) or anything else: copy from now on.
		p.noSplice = true
	default:
		// The poller cannot wait for this target (not pollable, closed):
		// copy to it, and let run's write report what is wrong.
		if p.target == t {
			p.targetRC = nil
		}
	}
	return false
}

// spliceInto makes one splice from in into rc's descriptor that moves
// bytes, waiting in the runtime poller while the target pipe is full. It
// returns the bytes moved, drained when stdin turned out to be empty (no
// error then), or the splice's errno or the poller's error (nothing
// moved).
func spliceInto(in int, rc syscall.RawConn) (n int, drained bool, err error) {
	werr := rc.Write(func(out uintptr) bool {
		for {
			m, serr := unix.Splice(in, nil, int(out), nil, spliceMax, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case serr == unix.EINTR:
				continue
			case serr == unix.EAGAIN && !readableNow(in):
				drained = true
			case serr == unix.EAGAIN:
				return false // the target is full: wait for room
			case serr != nil:
				err = serr
			default:
				n = int(m)
			}
			return true
		}
	})
	if werr != nil {
		return 0, false, werr
	}
	return n, drained, err
}

// waitReadable blocks until in is readable (data, or end of file) or wake
// is signalled; ready is false for the latter.
func waitReadable(in, wake int) (ready bool, err error) {
	fds := []unix.PollFd{{Fd: int32(wake), Events: unix.POLLIN}, {Fd: int32(in), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue // poll(2) is never restarted after a signal handler
		}
		if err != nil {
			return false, err
		}
		if fds[0].Revents != 0 {
			return false, nil
		}
		if fds[1].Revents != 0 {
			return true, nil
		}
	}
}

// readableNow tells whether a read of in would not block.
func readableNow(in int) bool {
	fds := []unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// growPipe raises the capacity of the pipe behind fd to size bytes when it
// is smaller (best effort; never shrinks it). Each wake-up of the pump
// moves at most what stdin holds, and each one also wakes the writer and
// the shell: with the default 64 KiB that is 16 round trips per MiB, which
// cost more CPU than the splices themselves. The pipe is the container
// runtime's, but only its buffer grows (to the size of the shell's pipe,
// charged to the pipe's owner as any pipe buffer); what the writer sees is
// that it blocks later, as it did when the pump queued 1 MiB itself.
func growPipe(fd, size int) {
	if cur, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0); err == nil && cur < size {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, size)
	}
}

// readFd is read(2) on in, retried on EINTR.
func readFd(in int, b []byte) (int, error) {
	for {
		n, err := unix.Read(in, b)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// dupFd duplicates f's descriptor (close-on-exec) without switching it to
// blocking mode, as (*os.File).Fd would.
func dupFd(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd := -1
	cerr := rc.Control(func(fd uintptr) {
		nfd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if cerr != nil {
		return -1, cerr
	}
	return nfd, err
}

// isFIFO tells whether f is a pipe (or named pipe): the only source
// spliceFrom handles. Regular files, /dev/null, terminals and sockets are
// copied.
func isFIFO(f *os.File) bool {
	if f == nil {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	fifo := false
	_ = rc.Control(func(fd uintptr) { fifo = fdIsFIFO(int(fd)) })
	return fifo
}

// fdIsFIFO tells whether fd is a pipe or a named pipe.
func fdIsFIFO(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
}

// spliceTarget returns t's raw connection when stdin bytes may be spliced
// into it, else nil: t must be a pipe, so the shell sees plain bytes and
// an eofChar is never needed (a pty master is not a pipe), and
// non-blocking, so a splice into it never sleeps in the kernel where
// detach could not wake it (Go puts a non-blocking descriptor in its
// poller, which does the waiting).
func spliceTarget(t *os.File, eofChar byte) syscall.RawConn {
	if t == nil || eofChar != 0 {
		return nil
	}
	rc, err := t.SyscallConn()
	if err != nil {
		return nil
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		if !fdIsFIFO(int(fd)) {
			return
		}
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		ok = err == nil && fl&unix.O_NONBLOCK != 0
	})
	if !ok {
		return nil
	}
	return rc
}
