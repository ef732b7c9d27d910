package shellproxy

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// blockingPipe returns a pipe whose ends are blocking descriptors outside
// Go's poller: what a container runtime hands PID 1 as its stdin.
func blockingPipe(t testing.TB) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	require.NoError(t, unix.Pipe2(fds[:], unix.O_CLOEXEC))
	r, w = os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "stdin-writer")
	t.Cleanup(func() { closeAll(r, w) })
	return r, w
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	_, _ = rng.Read(b)
	return b
}

// startPump runs p's reader on src and its writer, and returns a function
// that closes p and waits for the reader to return.
func startPump(t testing.TB, p *pump, src io.Reader) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { p.readFrom(src); close(done) }()
	go p.run()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			p.close()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("readFrom did not return after close")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// The splice path is taken exactly when stdin is a pipe and the target a
// non-blocking pipe with no eofChar, and delivery is byte-exact either way.
func TestPumpTakesTheSplicePathOnlyBetweenPipes(t *testing.T) {
	data := randomBytes(512<<10, 1)
	type source struct {
		name string
		open func(t *testing.T) *os.File // the write side is fed data, then closed
	}
	feedPipe := func(t *testing.T, r, w *os.File) *os.File {
		go func() { _, _ = w.Write(data); _ = w.Close() }()
		return r
	}
	sources := map[string]func(t *testing.T) *os.File{
		"blocking pipe": func(t *testing.T) *os.File { r, w := blockingPipe(t); return feedPipe(t, r, w) },
		"poller pipe": func(t *testing.T) *os.File {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			t.Cleanup(func() { closeAll(r, w) })
			return feedPipe(t, r, w)
		},
		"regular file": func(t *testing.T) *os.File {
			name := t.TempDir() + "/stdin"
			require.NoError(t, os.WriteFile(name, data, 0o600))
			f, err := os.Open(name)
			require.NoError(t, err)
			t.Cleanup(func() { _ = f.Close() })
			return f
		},
		"/dev/null": func(t *testing.T) *os.File {
			f, err := os.Open(os.DevNull)
			require.NoError(t, err)
			t.Cleanup(func() { _ = f.Close() })
			return f
		},
	}
	// A target is our end plus the shell's end, which the test drains.
	targets := map[string]func(t *testing.T) (ours, shells *os.File){
		"pipe": func(t *testing.T) (*os.File, *os.File) {
			r, w, err := stdinPipe()
			require.NoError(t, err)
			t.Cleanup(func() { closeAll(r, w) })
			return w, r
		},
		"blocking pipe": func(t *testing.T) (*os.File, *os.File) {
			r, w := blockingPipe(t)
			return w, r
		},
		"socket": func(t *testing.T) (*os.File, *os.File) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			require.NoError(t, unix.SetNonblock(fds[0], true))
			ours, shells := os.NewFile(uintptr(fds[0]), "sock0"), os.NewFile(uintptr(fds[1]), "sock1")
			t.Cleanup(func() { closeAll(ours, shells) })
			return ours, shells
		},
	}
	for _, tc := range []struct {
		source, target string
		discard        bool
		wantSplice     bool
	}{
		{source: "blocking pipe", target: "pipe", wantSplice: true},
		{source: "poller pipe", target: "pipe", wantSplice: true},
		{source: "blocking pipe", target: "pipe", discard: true},
		{source: "regular file", target: "pipe"},
		{source: "/dev/null", target: "pipe"},
		{source: "blocking pipe", target: "blocking pipe"},
		{source: "blocking pipe", target: "socket"},
	} {
		name := fmt.Sprintf("%s to %s", tc.source, tc.target)
		if tc.discard {
			name += " discarding"
		}
		t.Run(name, func(t *testing.T) {
			src := sources[tc.source](t)
			ours, shells := targets[tc.target](t)
			p := newPump(true) // end of stdin closes the target: the test reads to EOF
			p.discarding.Store(tc.discard)
			p.attach(ours, 0)
			stop := startPump(t, p, src)
			got, err := io.ReadAll(shells)
			require.NoError(t, err)
			stop()
			want := data
			switch {
			case tc.source == "/dev/null":
				want = nil
			case tc.discard:
				want = nil
				require.Equal(t, uint64(len(data)), p.dropped.Load())
			}
			require.True(t, bytes.Equal(want, got), "got %d bytes, want %d", len(got), len(want))
			if tc.wantSplice {
				require.Equal(t, uint64(len(data)), p.spliced.Load(), "every byte spliced")
			} else {
				require.Zero(t, p.spliced.Load(), "nothing spliced")
			}
		})
	}
}

// shellSim stands for one shell: a pipe the pump writes and a reader that
// takes bytes from it at its own pace until stopped.
type shellSim struct {
	r, w *os.File
	got  bytes.Buffer
	stop chan struct{}
	done chan struct{}
}

func startShellSim(t *testing.T, slow bool) *shellSim {
	t.Helper()
	// Both ends in Go's poller, so the reader can be stopped with a
	// deadline; the write end is non-blocking as stdinPipe's is.
	r, w, err := os.Pipe()
	require.NoError(t, err)
	s := &shellSim{r: r, w: w, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		buf := make([]byte, 64<<10)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			n := len(buf)
			if slow {
				n = 1 + rand.IntN(4096)
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
			}
			k, err := r.Read(buf[:n])
			s.got.Write(buf[:k])
			if err != nil {
				return
			}
		}
	}()
	return s
}

// retire does what Proxy.retire does with a shell's pipe once the pump is
// detached: stop the shell, close our end, hand what it never read back to
// the pump. It returns every byte the shell received, in order.
func (s *shellSim) retire(t *testing.T, p *pump) []byte {
	t.Helper()
	close(s.stop)
	_ = s.r.SetReadDeadline(time.Unix(1, 0))
	<-s.done
	require.NoError(t, s.r.SetReadDeadline(time.Time{}))
	require.NoError(t, s.w.Close())
	left, err := io.ReadAll(s.r)
	require.NoError(t, err)
	require.NoError(t, s.r.Close())
	p.prepend(left)
	return s.got.Bytes()
}

// No stdin byte is lost, duplicated or reordered however often the shell
// is replaced while a large stream flows: 64 MiB through a blocking stdin
// pipe, shells detached and attached every few milliseconds, sometimes
// with a gap (bytes queue meanwhile), sometimes while a slow shell has let
// its pipe fill (the splice is waiting for room).
func TestPumpSpliceLosesNoByteAcrossShellReplacements(t *testing.T) {
	size := 64 << 20
	if testing.Short() {
		size = 16 << 20
	}
	data := randomBytes(size, 2)
	src, feed := blockingPipe(t)
	p := newPump(false)
	stop := startPump(t, p, src)
	go func() {
		// Writes of assorted sizes, as a terminal or a runner would.
		for off := 0; off < len(data); {
			n := min(len(data)-off, 1+rand.IntN(256<<10))
			if _, err := feed.Write(data[off : off+n]); err != nil {
				return
			}
			off += n
		}
	}()
	var out bytes.Buffer
	out.Grow(len(data))
	sh := startShellSim(t, false)
	p.attach(sh.w, 0)
	swaps := 0
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if rand.IntN(2) == 0 {
			// Half the swaps come while bytes are being spliced: once the
			// queue left by the last swap has drained (slow under -race).
			for spliced, t0 := p.spliced.Load(), time.Now(); p.spliced.Load() == spliced && time.Since(t0) < time.Second; {
				time.Sleep(100 * time.Microsecond)
			}
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		p.detach()
		out.Write(sh.retire(t, p))
		if out.Len() >= len(data) {
			break
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d bytes after %d swaps", out.Len(), len(data), swaps)
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // no shell: stdin queues
		}
		sh = startShellSim(t, rand.IntN(3) == 0)
		p.attach(sh.w, 0)
		swaps++
		if out.Len() >= len(data) {
			break
		}
	}
	stop()
	got := out.Bytes()
	require.Equal(t, len(data), len(got), "bytes delivered after %d swaps", swaps)
	if !bytes.Equal(data, got) {
		t.Fatalf("stream differs at byte %d of %d (after %d swaps)", firstDiff(data, got), len(data), swaps)
	}
	require.NotZero(t, p.spliced.Load(), "the splice path was used")
	require.Less(t, p.spliced.Load(), uint64(len(data)), "the copy path was used too (gaps between shells)")
	t.Logf("%d swaps; %d of %d bytes spliced", swaps, p.spliced.Load(), len(data))
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// Spliced bytes are input activity, stamped as read bytes are.
func TestPumpSpliceStampsActivity(t *testing.T) {
	src, feed := blockingPipe(t)
	r, w, err := stdinPipe()
	require.NoError(t, err)
	t.Cleanup(func() { closeAll(r, w) })
	p := newPump(false)
	p.attach(w, 0)
	startPump(t, p, src)
	require.Zero(t, p.lastInput.Load())
	var last int64
	for i, line := range []string{"echo one\n", "echo two\n"} {
		before := time.Now().UnixNano()
		_, err := feed.Write([]byte(line))
		require.NoError(t, err)
		buf := make([]byte, len(line))
		_, err = io.ReadFull(r, buf)
		require.NoError(t, err)
		require.Equal(t, line, string(buf))
		// The stamp follows the splice's return, and the shell may read
		// the bytes before that: wait for it (microseconds).
		require.Eventually(t, func() bool { return p.lastInput.Load() >= before }, 5*time.Second, time.Millisecond, "line %d", i)
		stamp := p.lastInput.Load()
		require.Greater(t, stamp, last, "line %d", i)
		last = stamp
	}
	require.Equal(t, uint64(len("echo one\necho two\n")), p.spliced.Load(), "the bytes were spliced, not read")
}

// Detach returns promptly while a splice waits for room in a shell pipe
// that nobody reads, and the bytes that did not fit reach the next shell.
func TestPumpDetachInterruptsASpliceOnAFullPipe(t *testing.T) {
	src, feed := blockingPipe(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { closeAll(r, w) })
	// One page: the pipe fills at once. (Not w.Fd(): it would make w
	// blocking, and a blocking target is never spliced.)
	capacity := 0
	rc, err := w.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, rc.Control(func(fd uintptr) { capacity, err = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 4096) }))
	require.NoError(t, err)
	p := newPump(false)
	p.attach(w, 0)
	stop := startPump(t, p, src)
	data := randomBytes(4*capacity, 3)
	wrote := make(chan error, 1)
	go func() { _, err := feed.Write(data); wrote <- err }()
	// The shell's pipe fills and the splice is left waiting for room.
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.splicing && p.spliced.Load() >= uint64(capacity)
	}, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	detached := make(chan struct{})
	go func() { p.detach(); close(detached) }()
	select {
	case <-detached:
	case <-time.After(2 * time.Second):
		t.Fatal("detach did not return while a splice waited on a full pipe")
	}
	require.NoError(t, w.Close())
	first, err := io.ReadAll(r)
	require.NoError(t, err)
	p.prepend(first) // as retire does: the next shell gets what this one never read
	r2, w2, err := stdinPipe()
	require.NoError(t, err)
	t.Cleanup(func() { closeAll(r2, w2) })
	p.attach(w2, 0)
	got := make([]byte, len(data))
	_, err = io.ReadFull(r2, got)
	require.NoError(t, err)
	require.NoError(t, <-wrote)
	require.Equal(t, -1, firstDiff(data, got), "first differing byte")
	stop()
}

// End of stdin still ends the shell's input after spliced bytes: the pipe
// is closed (plain-init mode), or the eofChar is typed, which only a copy
// can do (the bytes must be seen to know whether a line is pending), so
// such a target is never spliced.
func TestPumpEOFAfterSplicedInput(t *testing.T) {
	for _, tc := range []struct {
		name       string
		closeOnEOF bool
		eofChar    byte
		input      string
		want       string
		wantSplice bool
		wantClosed bool
	}{
		{name: "pipe closed at EOF", closeOnEOF: true, input: "abc\n", want: "abc\n", wantSplice: true, wantClosed: true},
		{name: "eofChar after a full line", closeOnEOF: true, eofChar: 4, input: "abc\n", want: "abc\n\x04"},
		{name: "eofChar twice after a partial line", closeOnEOF: true, eofChar: 4, input: "abc", want: "abc\x04\x04"},
		{name: "respawn mode leaves the pipe open", input: "abc\n", want: "abc\n", wantSplice: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, feed := blockingPipe(t)
			r, w, err := stdinPipe()
			require.NoError(t, err)
			t.Cleanup(func() { closeAll(r, w) })
			p := newPump(tc.closeOnEOF)
			p.attach(w, tc.eofChar)
			stop := startPump(t, p, src)
			_, err = feed.WriteString(tc.input)
			require.NoError(t, err)
			require.NoError(t, feed.Close())
			got := make([]byte, len(tc.want))
			_, err = io.ReadFull(r, got)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			// r blocks (it is the shell's stdin): ask poll(2) instead. A
			// closed write end shows as POLLHUP; an open, empty pipe as
			// nothing at all.
			fds := []unix.PollFd{{Fd: int32(r.Fd()), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 300)
			require.NoError(t, err)
			if tc.wantClosed {
				require.Equal(t, 1, n)
				require.NotZero(t, fds[0].Revents&unix.POLLHUP, "write end closed")
			} else {
				require.Zero(t, n, "nothing more, and the write end still open")
			}
			stop()
			if tc.wantSplice {
				require.Equal(t, uint64(len(tc.input)), p.spliced.Load())
			} else {
				require.Zero(t, p.spliced.Load())
			}
		})
	}
}

// close ends a splice reader waiting for stdin, and it leaves no
// descriptor behind (its duplicate of stdin and its eventfd).
func TestPumpCloseEndsTheSpliceReader(t *testing.T) {
	src, _ := blockingPipe(t)
	r, w, err := stdinPipe()
	require.NoError(t, err)
	t.Cleanup(func() { closeAll(r, w) })
	fds0 := countFds(t)
	p := newPump(false)
	p.attach(w, 0)
	done := make(chan struct{})
	go func() { p.readFrom(src); close(done) }()
	go p.run()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.wake >= 0
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, fds0+2, countFds(t), "a duplicate of stdin and an eventfd")
	p.close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("readFrom still waiting for stdin after close")
	}
	require.Equal(t, fds0, countFds(t))
}

// A stdin pipe smaller than the shell's pipe (the default 64 KiB) is grown
// to spliceMax, so one wake-up of the pump moves up to that much.
func TestPumpGrowsASmallStdinPipe(t *testing.T) {
	src, feed := blockingPipe(t)
	p := newPump(false)
	startPump(t, p, src)
	require.Eventually(t, func() bool {
		n, err := unix.FcntlInt(feed.Fd(), unix.F_GETPIPE_SZ, 0)
		return err == nil && n == spliceMax
	}, 5*time.Second, time.Millisecond)
}
