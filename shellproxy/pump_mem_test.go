package shellproxy

import (
	"io"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// oneByteReader returns its bytes one Read at a time, as a slow writer
// (or someone typing) on the container's stdin does.
type oneByteReader struct{ left int }

func (r *oneByteReader) Read(b []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	r.left--
	b[0] = 'x'
	return 1, nil
}

// Short reads queued while no shell takes them cost about their size,
// not a 64 KiB read buffer each: the queue's bound counts bytes.
func TestQueuedShortReadsCostTheirSize(t *testing.T) {
	const n = 3000
	p := newPump(false)
	defer p.close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p.copyFrom(&oneByteReader{left: n})
	runtime.GC()
	runtime.ReadMemStats(&after)
	p.mu.Lock()
	queued := p.queued
	p.mu.Unlock()
	require.Equal(t, n, queued)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d one-byte reads queued: heap grew by %d KiB", n, grew>>10)
	require.Less(t, grew, int64(4<<20), "queued one-byte reads hold their read buffers (64 KiB each would be %d MiB)", n*readChunk>>20)
}

func TestFit(t *testing.T) {
	buf := make([]byte, readChunk)
	require.Less(t, cap(fit(buf, 10)), 64, "a short read is copied")
	require.Equal(t, readChunk, cap(fit(buf, readChunk)), "a full read keeps its buffer")
	require.Nil(t, fit(buf, 0))
}
