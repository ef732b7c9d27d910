package shellproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pump copies the container's stdin to whichever shell is current. Bytes
// read from stdin wait in queue until a target accepts them, so switching
// shells (Detach, then Attach) never drops a byte: a write interrupted by
// Detach puts its unwritten remainder back at the front of the queue.
// When stdin and the shell's stdin are both pipes, bytes are spliced from
// one to the other instead while nothing is queued (see spliceFrom).
type pump struct {
	mu       sync.Mutex // guards every field below; cond waits on it; a leaf lock
	cond     *sync.Cond
	queue    [][]byte
	target   *os.File
	writing  bool // run is writing a chunk to target
	splicing bool // spliceFrom is splicing stdin into target
	queued   int  // bytes in queue
	eof      bool // stdin reached end of file or failed
	closed   bool

	// targetRC is target's raw connection when stdin bytes may be spliced
	// into it (a non-blocking pipe in Go's poller, eofChar 0), nil when
	// they must be copied; decided once per attach.
	targetRC syscall.RawConn
	// noSplice: a splice failed in a way that says this kernel or this
	// pair of pipes cannot splice (EINVAL, ENOSYS, ...): copy from now on.
	noSplice bool
	// wake is the eventfd close signals so that spliceFrom stops waiting
	// for stdin; -1 while spliceFrom is not running.
	wake int

	eofChar  byte // how to say end of input to the target (0: close it)
	lastByte byte // last byte written to the target

	// closeOnEOF: once stdin is at EOF and the queue is empty, close the
	// target so the shell sees end of input (plain-init mode).
	closeOnEOF bool

	lastInput  atomic.Int64  // unix nanoseconds of the last byte read
	dropped    atomic.Uint64 // bytes discarded because no shell would take them
	discarding atomic.Bool   // drop input instead of queueing it

	spliced atomic.Uint64 // bytes moved by splice, for tests and benchmarks
}

// readChunk is the size of one read from stdin (bytes); maxQueued bounds
// the stdin bytes held for a shell (bytes).
const (
	readChunk = 64 << 10
	maxQueued = 1 << 20
)

func newPump(closeOnEOF bool) *pump {
	p := &pump{closeOnEOF: closeOnEOF, wake: -1}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// readFrom reads src until EOF or error, queueing every chunk. It returns
// when src is exhausted (or, for a pipe, when the pump is closed); the pump
// keeps delivering what was queued. A pipe is handed to spliceFrom, which
// moves its bytes without copying them where it can.
func (p *pump) readFrom(src io.Reader) {
	if f, ok := src.(*os.File); ok && isFIFO(f) && p.spliceFrom(f) {
		return
	}
	p.copyFrom(src)
}

// copyFrom is readFrom for any reader: every chunk is read into memory and
// queued for run to write.
func (p *pump) copyFrom(src io.Reader) {
	for {
		// Back-pressure: stop reading stdin while maxQueued bytes wait for
		// a shell, so a flood (or a shell that does not read) costs at most
		// that much memory; the writer on the other side simply blocks.
		p.mu.Lock()
		for p.queued >= maxQueued && !p.closed {
			p.cond.Wait()
		}
		p.mu.Unlock()
		buf := make([]byte, readChunk)
		n, err := src.Read(buf)
		p.took(fit(buf, n))
		if err != nil {
			p.setEOF()
			return
		}
	}
}

// fit returns buf[:n] in memory of about its size. The queue's bound
// (maxQueued) counts bytes, and a short read (a typed line, one byte at a
// time from a slow writer) kept in its readChunk buffer would hold 64 KiB
// per byte counted; a copy keeps what the queue holds within twice its
// byte count.
func fit(buf []byte, n int) []byte {
	if n < len(buf)/2 {
		return append([]byte(nil), buf[:n]...)
	}
	return buf[:n:n]
}

// took accounts for b, just read from stdin: dropped while discarding,
// else stamped as input activity and queued.
func (p *pump) took(b []byte) {
	if len(b) == 0 {
		return
	}
	if p.discarding.Load() {
		p.dropped.Add(uint64(len(b)))
		return
	}
	p.lastInput.Store(time.Now().UnixNano())
	p.mu.Lock()
	p.queue = append(p.queue, b)
	p.queued += len(b)
	p.cond.Broadcast()
	p.mu.Unlock()
}

// setEOF records that stdin ended (or failed); run then ends the target's
// input once the queue is empty, in plain-init mode.
func (p *pump) setEOF() {
	p.mu.Lock()
	p.eof = true
	p.cond.Broadcast()
	p.mu.Unlock()
}

// run delivers queued bytes to the current target until close is called.
func (p *pump) run() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for !p.closed && (p.target == nil || len(p.queue) == 0) {
			if p.target != nil && p.eof && p.closeOnEOF && len(p.queue) == 0 {
				p.endInput()
				continue
			}
			p.cond.Wait()
		}
		if p.closed {
			return
		}
		t, chunk := p.target, p.queue[0]
		p.queue = p.queue[1:]
		p.writing = true
		p.mu.Unlock()
		n, err := t.Write(chunk)
		p.mu.Lock()
		p.writing = false
		p.queued -= n
		if n > 0 {
			p.lastByte = chunk[n-1]
		}
		if n < len(chunk) {
			p.queue = append([][]byte{chunk[n:]}, p.queue...)
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && p.target == t {
			// The shell's side is gone for good (EIO on a hung-up pty,
			// EPIPE): stop writing there; the next Attach resumes.
			p.target = nil
		}
		p.cond.Broadcast()
	}
}

// endInput tells the current target that stdin has ended (caller holds
// mu): a pipe is closed; a pty cannot be half-closed, so end-of-file is
// typed instead (twice when a partial line is pending: the first ^D only
// flushes it).
func (p *pump) endInput() {
	t := p.target
	p.target = nil
	if p.eofChar == 0 {
		_ = t.Close()
		return
	}
	eof := []byte{p.eofChar}
	if p.lastByte != 0 && p.lastByte != '\n' {
		eof = append(eof, p.eofChar)
	}
	_ = t.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = t.Write(eof)
	_ = t.SetWriteDeadline(time.Time{})
}

// attach makes t the destination of stdin bytes. eofChar is 0 for a pipe,
// or the terminal's VEOF character for a pty master.
func (p *pump) attach(t *os.File, eofChar byte) {
	rc := spliceTarget(t, eofChar)
	p.mu.Lock()
	p.target = t
	p.targetRC = rc
	p.eofChar = eofChar
	p.lastByte = 0
	p.cond.Broadcast()
	p.mu.Unlock()
}

// detach stops delivery to the current target and returns once no write
// or splice to it is in flight. Bytes not yet written stay queued; bytes
// not yet spliced stay in stdin.
func (p *pump) detach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.target
	p.target = nil
	p.targetRC = nil
	if t != nil && (p.writing || p.splicing) {
		// Wakes a write or splice waiting for room in a full pipe: the
		// shell may never read again.
		_ = t.SetWriteDeadline(time.Unix(1, 0))
	}
	for p.writing || p.splicing {
		p.cond.Wait()
	}
	if t != nil {
		_ = t.SetWriteDeadline(time.Time{})
	}
}

// prepend puts b in front of everything queued (bytes a shell was given but
// never read go to the next shell first).
func (p *pump) prepend(b []byte) {
	if len(b) == 0 {
		return
	}
	p.mu.Lock()
	p.queue = append([][]byte{b}, p.queue...)
	p.queued += len(b)
	p.cond.Broadcast()
	p.mu.Unlock()
}

// discard drops everything queued and returns how many bytes that was.
func (p *pump) discard() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, b := range p.queue {
		n += len(b)
	}
	p.queue = nil
	p.queued = 0
	p.dropped.Add(uint64(n))
	p.cond.Broadcast()
	return n
}

// close stops run, and spliceFrom once it is not moving bytes. A write or
// splice waiting for room in the target is interrupted (the deadline
// stays: the pump is done with the target); bytes still in stdin stay
// there.
func (p *pump) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.target != nil && (p.writing || p.splicing) {
		_ = p.target.SetWriteDeadline(time.Unix(1, 0))
	}
	if p.wake >= 0 {
		var one [8]byte // an eventfd counter increment, host byte order
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(p.wake, one[:])
	}
	p.cond.Broadcast()
}
