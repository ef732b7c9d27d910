package github

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// The piecer cuts what is written into pieces of chunk bytes whatever
// the writes' sizes, each with the SHA-256 of its own bytes, the last
// one marked (empty when the size is a multiple of chunk).
func TestPiecer(t *testing.T) {
	for _, tc := range []struct {
		name          string
		size, chunk   int
		write         int
		wantLens      []int
		wantLastEmpty bool
	}{
		{"nothing", 0, 4, 3, []int{0}, true},
		{"less than a piece", 3, 4, 2, []int{3}, false},
		{"a multiple of the chunk", 8, 4, 3, []int{4, 4, 0}, true},
		{"writes larger than a piece", 10, 4, 7, []int{4, 4, 2}, false},
		{"byte by byte", 9, 4, 1, []int{4, 4, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			in := make([]byte, tc.size)
			for i := range in {
				in[i] = byte(i * 7)
			}
			pc := newPiecer(context.Background(), tc.chunk, 2)
			var got []workPiece
			done := make(chan struct{})
			go func() {
				defer close(done)
				for p := range pc.ready {
					got = append(got, workPiece{i: p.i, data: slices.Clone(p.data), sum: p.sum, last: p.last})
					pc.release(p.data)
				}
			}()
			for b := in; len(b) > 0; b = b[min(tc.write, len(b)):] {
				n, err := pc.Write(b[:min(tc.write, len(b))])
				require.NoError(t, err)
				require.Equal(t, min(tc.write, len(b)), n)
			}
			require.NoError(t, pc.close())
			close(pc.ready)
			<-done
			var lens []int
			var all []byte
			for i, p := range got {
				lens = append(lens, len(p.data))
				assert.Equal(t, i, p.i)
				assert.Equal(t, i == len(got)-1, p.last, "only the last piece is marked")
				sum := sha256.Sum256(p.data)
				assert.Equal(t, hex.EncodeToString(sum[:]), p.sum, "piece %d's digest", i)
				all = append(all, p.data...)
			}
			assert.Equal(t, tc.wantLens, lens)
			assert.Equal(t, string(in), string(all), "the pieces put together are what was written")
			assert.Equal(t, int64(tc.size), pc.size)
		})
	}
}

// A Write waits while all slots are in use and fails with the cause once
// the transfer is cancelled (a put failed): the archive's writer never
// holds more than slots pieces and never blocks past a failure.
func TestPiecerStopsOnCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	pc := newPiecer(ctx, 4, 2)
	taken := make(chan workPiece, 10)
	go func() {
		for p := range pc.ready {
			taken <- p // never released
		}
		close(taken)
	}()
	werr := make(chan error, 1)
	go func() {
		_, err := pc.Write(make([]byte, 100))
		werr <- err
	}()
	<-taken
	<-taken
	select {
	case err := <-werr:
		t.Fatalf("Write returned %v with every slot in use", err)
	case <-time.After(50 * time.Millisecond):
	}
	boom := errors.New("put failed")
	cancel(boom)
	select {
	case err := <-werr:
		assert.ErrorIs(t, err, boom)
	case <-time.After(10 * time.Second):
		t.Fatal("Write still blocked 10 s after the cancel")
	}
	close(pc.ready)
	for range taken {
	}
}

func TestExtractTime(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want time.Duration
	}{
		{"warmpod-extract-cs 123\nalpine\n", 1230 * time.Millisecond},
		{"alpine\nwarmpod-extract-cs 0\n", 0},
		{"alpine\n", -1},
		{"", -1},
		{"warmpod-extract-cs -5\n", -1},
		{"warmpod-extract-cs 12x\n", -1},
		{"warmpod-extract-cs 99999999999999999999\n", -1},
		{"warmpod-extract-cs \n", -1},
	} {
		assert.Equal(t, tc.want, extractTime(tc.out), "%q", tc.out)
	}
}

func FuzzExtractTime(f *testing.F) {
	for _, s := range []string{"warmpod-extract-cs 123\n", "alpine\n", "warmpod-extract-cs 1e9", "warmpod-extract-cs +7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		d := extractTime(out)
		if d != -1 && (d < 0 || d > 999999999*10*time.Millisecond) {
			t.Fatalf("extractTime(%q) = %v", out, d)
		}
	})
}

// countingCluster is a fakeCluster that tells how many puts ran at once
// and can fail one piece's put for good.
type countingCluster struct {
	*fakeCluster
	mu          sync.Mutex
	running, hi int
	failPiece   string // a put of this destination exits 1
}

func (c *countingCluster) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c.mu.Lock()
	c.running++
	c.hi = max(c.hi, c.running)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}()
	if c.failPiece != "" && slices.Contains(argv, c.failPiece) {
		_, _ = io.Copy(io.Discard, stdin)
		fmt.Fprintln(stderr, "warmpod: job put: no space left on device")
		return 1, nil
	}
	// Long enough for the other sends to start meanwhile.
	time.Sleep(20 * time.Millisecond)
	return c.fakeCluster.Exec(ctx, p, argv, stdin, stdout, stderr)
}

// The pieces go several at once, never more than Streams, and arrive
// whole: put together in order they are the archive, the last one (with
// the unpack) sent after all the others.
func TestSendWorkInParallel(t *testing.T) {
	defer goleak.VerifyNone(t)
	r := newRunner(t)
	r.write("repo/repo/big.bin", strings.Repeat("0123456789abcdef", 1000))
	f := &countingCluster{fakeCluster: &fakeCluster{}}
	h, out, _ := r.hook(nil)
	h.Cluster, h.Cfg.Streams = f, 3
	st := &State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}}
	_, err := h.sendWork(context.Background(), debugWriter{h.Stdout}, h.Cluster, st)
	require.NoError(t, err)
	assert.Equal(t, 3, f.hi, "Streams puts at once")
	var names []string
	for n := range f.puts {
		names = append(names, n)
	}
	slices.Sort(names)
	require.Greater(t, len(names), 10)
	lastExec := argvs(f.fakeCluster)[len(argvs(f.fakeCluster))-1]
	require.Greater(t, len(lastExec), 13)
	assert.Equal(t, []string{"/warmpod/warmpod", "job", "exec", "--job", "gh-1", "--", "sh"}, lastExec[:7], "the unpack goes last, as a job exec")
	assert.Equal(t, names[len(names)-1], lastExec[13], "with the last piece (job exec --job ID -- sh -c SCRIPT sh BIN job put DEST …)")
	var archive []byte
	for _, n := range names {
		archive = append(archive, f.puts[n]...)
	}
	assert.Contains(t, tarNames(t, archive), "repo/repo/big.bin")
	assert.Regexp(t, `_work timings: bytes=\d+ pieces=\d+ streams=3 wall_ms=\d+ collect_ms=\d+ hash_ms=\d+ wait_ms=\d+ put_ms=\d+ put_wall_ms=\d+ last_ms=\d+ extract_ms=-1`, out.String())
}

// A piece the pod refuses (not a broken stream: a full disk) ends the
// transfer with the pod's words, sends nothing more and leaves no
// goroutine behind; so does a _work that cannot be read.
func TestSendWorkFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(r *runner, f *countingCluster)
		wantErr string
	}{
		{"a piece refused", func(_ *runner, f *countingCluster) { f.failPiece = "/__w/.warmpod-work.0002" },
			"job put /__w/.warmpod-work.0002 in pod w1: exit 1: warmpod: job put: no space left on device"},
		{"no _work to read", func(r *runner, _ *countingCluster) {
			r.env["RUNNER_TEMP"] = filepath.Join(r.root, "gone", "_temp")
		}, "the _work archive of " + "%ROOT%/gone: lstat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			r := newRunner(t)
			r.write("repo/repo/big.bin", strings.Repeat("0123456789abcdef", 1000))
			f := &countingCluster{fakeCluster: &fakeCluster{}}
			tc.setup(r, f)
			h, _, _ := r.hook(nil)
			h.Cluster, h.Cfg.Streams = f, 3
			st := &State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}}
			_, err := h.sendWork(context.Background(), debugWriter{h.Stdout}, h.Cluster, st)
			require.Error(t, err)
			assert.Contains(t, err.Error(), strings.ReplaceAll(tc.wantErr, "%ROOT%", r.root))
			for _, a := range argvs(f.fakeCluster) {
				assert.NotContains(t, a, "sh", "no unpack after a failure")
			}
		})
	}
}

// Cancelling the job mid-transfer ends it with the cancel, promptly.
func TestSendWorkCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	r := newRunner(t)
	r.write("repo/repo/big.bin", strings.Repeat("0123456789abcdef", 1000))
	ctx, cancel := context.WithCancel(context.Background())
	f := &blockingCluster{started: make(chan struct{}, 100)}
	h, _, _ := r.hook(nil)
	h.Cluster, h.Cfg.Streams = f, 2
	st := &State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}}
	errc := make(chan error, 1)
	go func() {
		_, err := h.sendWork(ctx, debugWriter{h.Stdout}, h.Cluster, st)
		errc <- err
	}()
	<-f.started
	cancel()
	select {
	case err := <-errc:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "context canceled")
	case <-time.After(10 * time.Second):
		t.Fatal("sendWork still running 10 s after the cancel")
	}
}

// blockingCluster's execs run until their context ends, as an exec does
// whose stream hangs.
type blockingCluster struct {
	fakeCluster
	started chan struct{}
}

func (b *blockingCluster) Exec(ctx context.Context, _ poolapi.Pod, _ []string, stdin io.Reader, _, _ io.Writer) (int, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return -1, ctx.Err()
}

// A file that changed size between its header and its content is an
// error, not an archive whose sizes lie.
func TestWriteEntryChangedFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("short"), 0o644))
	info, err := os.Lstat(p)
	require.NoError(t, err)
	var b bytes.Buffer
	err = writeEntry(tar.NewWriter(&b), p, "f", grownInfo{info})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "changed while it was read (5 of 6 bytes)")
}

// grownInfo is a file's information from before it lost a byte.
type grownInfo struct{ fs.FileInfo }

func (g grownInfo) Size() int64 { return g.FileInfo.Size() + 1 }

// bulkCluster is a fakeCluster with the bulk transport of pool.Cluster:
// it counts the calls that came through it.
type bulkCluster struct {
	*fakeCluster
	bulk int
}

func (b *bulkCluster) ExecBulk(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	b.mu.Lock()
	b.bulk++
	b.mu.Unlock()
	return b.fakeCluster.Exec(ctx, p, argv, stdin, stdout, stderr)
}

// Every piece of _work, the last one with its unpack too, goes by the
// Cluster's bulk transport when it has one (SPDY first: pool.Cluster).
func TestSendWorkPiecesGoByTheBulkTransport(t *testing.T) {
	r := newRunner(t)
	r.write("repo/repo/big.bin", strings.Repeat("0123456789abcdef", 1000))
	for _, lazy := range []bool{false, true} {
		f := &bulkCluster{fakeCluster: &fakeCluster{}}
		h, _, _ := r.hook(nil)
		h.Cfg.Streams = 2
		h.Cluster = f
		if lazy {
			h.Cluster = &session.Lazy{Connect: func() (session.Cluster, error) { return f, nil }}
		}
		st := &State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}}
		_, err := h.sendWork(context.Background(), debugWriter{h.Stdout}, h.Cluster, st)
		require.NoError(t, err)
		execs := argvs(f.fakeCluster)
		require.Greater(t, len(execs), 10)
		assert.Equal(t, len(execs)-1, f.bulk, "lazy=%v: every piece but the last went by ExecBulk", lazy)
		assert.Equal(t, "exec", execs[len(execs)-1][2], "lazy=%v: the last, with the unpack, by Exec (the job's stream carries it)", lazy)
	}
}

// A warmpod older than `job exec` says so (exit 2, "unknown job
// command"): the last piece and its unpack go again as a plain direct
// exec of sh, and the transfer succeeds.
func TestSendWorkToAnOlderWarmpod(t *testing.T) {
	r := newRunner(t)
	r.write("repo/repo/big.bin", strings.Repeat("0123456789abcdef", 1000))
	f := &bulkCluster{fakeCluster: &fakeCluster{noJobExec: true}}
	h, _, _ := r.hook(nil)
	h.Cluster = f
	st := &State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}}
	_, err := h.sendWork(context.Background(), debugWriter{h.Stdout}, h.Cluster, st)
	require.NoError(t, err)
	execs := argvs(f.fakeCluster)
	require.Greater(t, len(execs), 2)
	n := len(execs)
	assert.Equal(t, "exec", execs[n-2][2], "the last piece as a job exec")
	assert.Equal(t, execs[n-2][6:], execs[n-1], "then the same command, unwrapped")
	assert.Equal(t, n-1, f.bulk, "the plain one by direct exec (the bulk transport), as the other pieces")
	assert.Len(t, f.puts, n-1, "every piece arrived")
}

// A last piece larger than the stream takes (maxStreamPiece) goes by the
// bulk transport as the others do, and the unpack alone follows as a job
// exec without stdin; all the pieces, the last too, arrive.
func TestSendWorkLargeLastPieceGoesBulk(t *testing.T) {
	r := newRunner(t)
	r.write("repo/repo/big.bin", strings.Repeat("0123456789abcdef", (3*maxStreamPiece)/16))
	f := &bulkCluster{fakeCluster: &fakeCluster{}}
	h, _, _ := r.hook(nil)
	h.Cfg.ChunkSize = 2 * maxStreamPiece // the last piece: a little over maxStreamPiece
	h.Cluster = f
	st := &State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}}
	_, err := h.sendWork(context.Background(), debugWriter{h.Stdout}, h.Cluster, st)
	require.NoError(t, err)
	execs := argvs(f.fakeCluster)
	require.Len(t, execs, 3, "two pieces, then the unpack")
	assert.Equal(t, 2, f.bulk, "both pieces by the bulk transport")
	u := execs[2]
	assert.Equal(t, []string{"/warmpod/warmpod", "job", "exec", "--job", "gh-1", "--", "sh", "-c"}, u[:8])
	assert.True(t, strings.HasPrefix(u[8], "set -- 2\n"), "the unpack of 2 pieces: %q", u[8])
	assert.Len(t, u, 9, "no put in it")
	assert.Len(t, f.puts, 2)
}

// Through the job's multiplexer, an older attach refuses the job exec
// (mux.ErrRefused): the command goes again as a plain direct exec.
func TestSendWorkToAnOlderAttach(t *testing.T) {
	r := newRunner(t)
	r.write("repo/repo/small.txt", "hello")
	f := &refusingCluster{bulkCluster: &bulkCluster{fakeCluster: &fakeCluster{}}}
	h, _, _ := r.hook(nil)
	h.Cluster = f
	st := &State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}}
	_, err := h.sendWork(context.Background(), debugWriter{h.Stdout}, h.Cluster, st)
	require.NoError(t, err)
	execs := argvs(f.fakeCluster)
	require.NotEmpty(t, execs)
	assert.Equal(t, "sh", execs[len(execs)-1][0], "the last piece and the unpack, unwrapped, by direct exec")
	assert.Equal(t, 1, f.refused)
}

// refusingCluster refuses every job exec as an older attach does through
// the multiplexer.
type refusingCluster struct {
	*bulkCluster
	refused int
}

func (c *refusingCluster) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) > 2 && argv[2] == "exec" {
		c.refused++
		return 0, fmt.Errorf("%w: job attach runs only the warmpod job commands of muxproto.Carried", mux.ErrRefused)
	}
	return c.bulkCluster.Exec(ctx, p, argv, stdin, stdout, stderr)
}
