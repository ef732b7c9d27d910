package shellproxy

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// pump copies the container's stdin to whichever shell is current. Bytes
// read from stdin wait in queue until a target accepts them, so switching
// shells (Detach, then Attach) never drops a byte: a write interrupted by
// Detach puts its unwritten remainder back at the front of the queue.
type pump struct {
	mu      sync.Mutex // guards every field below; cond waits on it; a leaf lock
	cond    *sync.Cond
	queue   [][]byte
	target  *os.File
	writing bool
	queued  int  // bytes in queue
	eof     bool // stdin reached end of file or failed
	closed  bool

	eofChar  byte // how to say end of input to the target (0: close it)
	lastByte byte // last byte written to the target

	// closeOnEOF: once stdin is at EOF and the queue is empty, close the
	// target so the shell sees end of input (plain-init mode).
	closeOnEOF bool

	lastInput  atomic.Int64  // unix nanoseconds of the last byte read
	dropped    atomic.Uint64 // bytes discarded because no shell would take them
	discarding atomic.Bool   // drop input instead of queueing it
}

// readChunk is the size of one read from stdin (bytes); maxQueued bounds
// the stdin bytes held for a shell (bytes).
const (
	readChunk = 64 << 10
	maxQueued = 1 << 20
)

func newPump(closeOnEOF bool) *pump {
	p := &pump{closeOnEOF: closeOnEOF}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// readFrom reads src until EOF or error, queueing every chunk. It returns
// when src is exhausted; the pump keeps delivering what was queued.
func (p *pump) readFrom(src io.Reader) {
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
		if n > 0 && p.discarding.Load() {
			p.dropped.Add(uint64(n))
		} else if n > 0 {
			p.lastInput.Store(time.Now().UnixNano())
			p.mu.Lock()
			p.queue = append(p.queue, buf[:n:n])
			p.queued += n
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		if err != nil {
			p.mu.Lock()
			p.eof = true
			p.cond.Broadcast()
			p.mu.Unlock()
			return
		}
	}
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
	p.mu.Lock()
	p.target = t
	p.eofChar = eofChar
	p.lastByte = 0
	p.cond.Broadcast()
	p.mu.Unlock()
}

// detach stops delivery to the current target and returns once no write
// to it is in flight. Bytes not yet written stay queued.
func (p *pump) detach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.target
	p.target = nil
	if t != nil && p.writing {
		_ = t.SetWriteDeadline(time.Unix(1, 0))
	}
	for p.writing {
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

// close stops run.
func (p *pump) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
}
