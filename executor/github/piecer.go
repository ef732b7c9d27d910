package github

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// workPiece is one piece of the _work archive: its bytes, held until the
// pod has them, and their SHA-256 (lower-case hex).
type workPiece struct {
	i    int
	data []byte
	sum  string
	last bool
}

// piecer is the io.Writer the _work archive is written to: it cuts the
// archive into pieces of chunk bytes and hashes each piece as its bytes
// arrive, so the bytes are read once, and hands each piece on ready as
// soon as it is full (the last one, possibly empty, at close). At most
// slots pieces exist at a time: a Write waits for a piece sent to be
// released when all are in use. A Write after ctx is done fails with its
// cause.
type piecer struct {
	ctx   context.Context
	chunk int
	ready chan workPiece
	free  chan []byte
	slots int // pieces that may still be allocated

	buf  []byte
	hash hash.Hash
	n    int   // pieces handed on
	size int64 // bytes written

	// hashing is the time spent hashing; waiting the time spent
	// waiting for a slot or for the sender to take a piece (the
	// archive's writer was ahead of the sends).
	hashing, waiting time.Duration
}

func newPiecer(ctx context.Context, chunk, slots int) *piecer {
	return &piecer{ctx: ctx, chunk: chunk, ready: make(chan workPiece), free: make(chan []byte, slots), slots: slots, hash: sha256.New()}
}

// Write appends b to the archive.
func (p *piecer) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		if p.buf == nil {
			buf, err := p.alloc()
			if err != nil {
				return written, err
			}
			p.buf = buf[:0]
			p.hash.Reset()
		}
		k := min(len(b), p.chunk-len(p.buf))
		p.buf = append(p.buf, b[:k]...)
		th := time.Now()
		p.hash.Write(b[:k])
		p.hashing += time.Since(th)
		b, written, p.size = b[k:], written+k, p.size+int64(k)
		if len(p.buf) == p.chunk {
			if err := p.emit(false); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// close hands on the last piece (empty when the archive's size is a
// multiple of chunk). The caller closes ready.
func (p *piecer) close() error {
	if p.buf == nil {
		p.buf = []byte{}
		p.hash.Reset()
	}
	return p.emit(true)
}

// release gives a sent piece's buffer back.
func (p *piecer) release(b []byte) {
	select {
	case p.free <- b:
	default: // more buffers than slots: cannot happen; let it go
	}
}

// alloc is a free buffer: a released one, a new one while slots remain,
// else the next released one.
func (p *piecer) alloc() ([]byte, error) {
	select {
	case b := <-p.free:
		return b, nil
	default:
	}
	if p.slots > 0 {
		p.slots--
		return make([]byte, 0, p.chunk), nil
	}
	t := time.Now()
	defer func() { p.waiting += time.Since(t) }()
	select {
	case b := <-p.free:
		return b, nil
	case <-p.ctx.Done():
		return nil, context.Cause(p.ctx)
	}
}

// emit hands the current piece on.
func (p *piecer) emit(last bool) error {
	piece := workPiece{i: p.n, data: p.buf, sum: hex.EncodeToString(p.hash.Sum(nil)), last: last}
	t := time.Now()
	defer func() { p.waiting += time.Since(t) }()
	select {
	case p.ready <- piece:
		p.n++
		p.buf = nil
		return nil
	case <-p.ctx.Done():
		return context.Cause(p.ctx)
	}
}

// workTimings is where a _work transfer's time went, for its debug line
// (which make bench-github reads: key=value, durations in ms).
type workTimings struct {
	bytes           int64
	pieces, streams int
	// wall is sendWork's whole time; collect the archive's writing
	// (walk, read, tar) and hash its hashing, both while the sends
	// run; wait the archive's writer waiting for the sends.
	wall, collect, hash, wait time.Duration
	// put is the sum of the puts of all pieces but the last (each an
	// exec: the transfer, the pod's check, write and fsync), putWall
	// the time from the first put's start to the last one's end; last
	// the last piece's exec, extract the unpack in it (as the pod
	// measured it; -1: not known).
	put, putWall, last, extract time.Duration
}

func (t workTimings) String() string {
	ms := func(d time.Duration) string {
		if d < 0 {
			return "-1"
		}
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	return fmt.Sprintf("bytes=%d pieces=%d streams=%d wall_ms=%s collect_ms=%s hash_ms=%s wait_ms=%s put_ms=%s put_wall_ms=%s last_ms=%s extract_ms=%s",
		t.bytes, t.pieces, t.streams, ms(t.wall), ms(t.collect), ms(t.hash), ms(t.wait), ms(t.put), ms(t.putWall), ms(t.last), ms(t.extract))
}

// extractTime reads the unpack's "warmpod-extract-cs N" line from its
// output: N centiseconds; -1 when there is no such line or N is not a
// number of at most 9 digits.
func extractTime(out string) time.Duration {
	for _, l := range strings.Split(out, "\n") {
		v, ok := strings.CutPrefix(l, "warmpod-extract-cs ")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || len(v) > 9 {
			return -1
		}
		return time.Duration(n) * 10 * time.Millisecond
	}
	return -1
}
