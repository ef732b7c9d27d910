package joblog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func readAll(t testing.TB, path string, opts ReadOptions) []byte {
	t.Helper()
	var out bytes.Buffer
	if st, err := os.Stat(path); err == nil {
		out.Grow(int(st.Size()) + int(st.Size())/4) // records add ~20%
	}
	require.NoError(t, Read(context.Background(), path, &out, opts))
	return out.Bytes()
}

func TestParseRecord(t *testing.T) {
	tests := []struct {
		rec     string
		off     int64
		line    string
		wantErr bool
	}{
		{rec: "12 hello world", off: 12, line: "hello world"},
		{rec: "1 ", off: 1, line: ""},
		{rec: "0  lead", off: 0, line: " lead"},
		{rec: "9223372036854775807 x", off: 9223372036854775807, line: "x"},
		{rec: "", wantErr: true},
		{rec: "12", wantErr: true},
		{rec: " 12 x", wantErr: true},
		{rec: "-1 x", wantErr: true},
		{rec: "+1 x", wantErr: true},
		{rec: "1a x", wantErr: true},
		{rec: "99999999999999999999 x", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.rec, func(t *testing.T) {
			off, line, err := ParseRecord(tc.rec)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.off, off)
			require.Equal(t, tc.line, line)
		})
	}
}

// TestRecordFraming pins the exact output, including the '\n' added to
// split pieces and to a partial last line, and the reassembly rule.
func TestRecordFraming(t *testing.T) {
	tests := []struct {
		name    string
		content string
		opts    ReadOptions
		want    string
	}{
		{
			name:    "split, exact MaxLine, empty and partial lines",
			content: "ab\n\nabcd\nabcdefghij\nxyz",
			opts:    ReadOptions{MaxLine: 4},
			want:    "3 ab\n4 \n9 abcd\n13 abcd\n17 efgh\n20 ij\n23 xyz\n",
		},
		{
			name:    "split piece then lone newline",
			content: "abcde\n",
			opts:    ReadOptions{MaxLine: 4},
			want:    "4 abcd\n6 e\n",
		},
		{
			name:    "resume mid-line",
			content: "hello\nworld\n",
			opts:    ReadOptions{Offset: 2},
			want:    "6 llo\n12 world\n",
		},
		{
			name:    "offset at end",
			content: "hello\n",
			opts:    ReadOptions{Offset: 6},
			want:    "",
		},
		{
			name:    "offset beyond end prints nothing",
			content: "hello\n",
			opts:    ReadOptions{Offset: 100},
			want:    "",
		},
		{
			name:    "empty file",
			content: "",
			want:    "",
		},
		{
			name:    "only partial line",
			content: "no newline",
			want:    "10 no newline\n",
		},
		{
			name:    "carriage returns and spaces are data",
			content: "a b\r\n \n",
			want:    "5 a b\r\n7  \n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, []byte(tc.content))
			out := readAll(t, p, tc.opts)
			require.Equal(t, tc.want, string(out))
			got := reassemble(t, tc.opts.Offset, parseOutput(t, out))
			want := ""
			if int(tc.opts.Offset) < len(tc.content) {
				want = tc.content[tc.opts.Offset:]
			}
			require.Equal(t, want, string(got))
		})
	}
}

func TestReassembleRule(t *testing.T) {
	tests := []struct {
		name  string
		start int64
		recs  []record
		want  string
		ok    bool
	}{
		{name: "line with newline", start: 0, recs: []record{{4, "abc"}}, want: "abc\n", ok: true},
		{name: "split piece", start: 0, recs: []record{{3, "abc"}, {5, "d"}}, want: "abcd\n", ok: true},
		{name: "partial at EOF", start: 10, recs: []record{{13, "abc"}}, want: "abc", ok: true},
		{name: "empty line", start: 0, recs: []record{{1, ""}}, want: "\n", ok: true},
		{name: "too many bytes", start: 0, recs: []record{{5, "abc"}}},
		{name: "too few bytes", start: 0, recs: []record{{2, "abc"}}},
		{name: "empty record consuming nothing", start: 3, recs: []record{{3, ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reassembleErr(tc.start, tc.recs)
			if !tc.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}

// TestReadResume reads a 5 MB log completely, then resumes at 20 offsets
// taken from records and 5 mid-line byte offsets; each resumed read must
// reassemble to exactly the file's bytes from its offset.
func TestReadResume(t *testing.T) {
	rng := seeded(t)
	const maxLine = DefaultMaxLine
	data := genLog(rng, 5<<20, maxLine)
	p := writeFile(t, data)

	full := parseOutput(t, readAll(t, p, ReadOptions{}))
	requireSameBytes(t, data, reassemble(t, 0, full), "full read")
	require.Equal(t, int64(len(data)), full[len(full)-1].off)
	isBoundary := make(map[int64]bool, len(full))
	split := 0
	for i, r := range full {
		isBoundary[r.off] = true
		require.LessOrEqual(t, len(r.line), maxLine)
		prev := int64(0)
		if i > 0 {
			prev = full[i-1].off
		}
		if r.off-prev == int64(len(r.line)) {
			split++
		}
	}
	require.Greater(t, split, 4, "the log must contain split and partial lines")

	type resume struct {
		name string
		off  int64
	}
	var cases []resume
	for range 20 {
		cases = append(cases, resume{"record", full[rng.IntN(len(full))].off})
	}
	for len(cases) < 25 {
		off := rng.Int64N(int64(len(data)))
		if isBoundary[off] || off == 0 || data[off-1] == '\n' {
			continue
		}
		cases = append(cases, resume{"mid-line", off})
	}
	cases = append(cases, resume{"start", 0}, resume{"end", int64(len(data))})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recs := parseOutput(t, readAll(t, p, ReadOptions{Offset: tc.off}))
			requireSameBytes(t, data[tc.off:], reassemble(t, tc.off, recs), "resume")
			if isBoundary[tc.off] {
				// From a record boundary the records are exactly the
				// tail of the full read: nothing lost, nothing repeated.
				i := slices.IndexFunc(full, func(r record) bool { return r.off == tc.off })
				require.Equal(t, full[i+1:], nonNil(recs))
			}
		})
	}
}

func nonNil(r []record) []record {
	if r == nil {
		return []record{}
	}
	return r
}

// followRead runs Read in follow mode into a pipe and collects records
// until the record offset reaches total, then cancels ctx. It returns the
// records and Read's error.
func followRead(t *testing.T, path string, total int64, opts ReadOptions) ([]record, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // safety net only
	defer cancel()
	opts.Follow = true
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := Read(ctx, path, pw, opts)
		_ = pw.Close()
		errc <- err
	}()
	var recs []record
	// Not bufio.ScanLines: it would drop a '\r' that ends a line.
	br := bufio.NewReader(pr)
	for {
		rec, err := br.ReadString('\n')
		if err == io.EOF {
			require.Empty(t, rec, "incomplete record at end of stream")
			break
		}
		require.NoError(t, err)
		off, line, err := ParseRecord(rec[:len(rec)-1])
		require.NoError(t, err)
		recs = append(recs, record{off, line})
		if off == total {
			cancel()
		}
	}
	return recs, <-errc
}

// TestFollow appends to the log from a goroutine, in random pieces that
// often end mid-line, while a follower reads it.
func TestFollow(t *testing.T) {
	tests := []struct {
		name    string
		maxLine int   // Read's MaxLine
		genMax  int   // genLog's maxLine: its longest lines are about 3*genMax
		offset  int64 // start offset (beyond the end at first)
		size    int
	}{
		{name: "no split", maxLine: 1 << 20, genMax: 1000, size: 300 << 10},
		{name: "long lines split", maxLine: 1000, genMax: 1000, size: 300 << 10},
		{name: "offset beyond end waits", maxLine: 1 << 20, genMax: 1000, offset: 12345, size: 100 << 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := seeded(t)
			data := genLog(rng, tc.size, tc.genMax)
			data = append(data, '\n') // complete the last line
			p := writeFile(t, nil)

			// Cut data into pieces at random points.
			var pieces [][]byte
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(3000))
				pieces, rest = append(pieces, rest[:n]), rest[n:]
			}
			werr := make(chan error, 1)
			// The writer holds back the second half until the reader has
			// been at EOF once, so the test sees a poll however the two
			// goroutines are scheduled (on a loaded machine the writer
			// could otherwise finish before the reader starts).
			polled := make(chan struct{})
			var pollOnce sync.Once
			go func() {
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					werr <- err
					return
				}
				defer f.Close()
				for i, piece := range pieces {
					if i == len(pieces)/2 {
						select {
						case <-polled:
						case <-time.After(10 * time.Second):
							werr <- errors.New("the reader never polled")
							return
						}
					}
					if _, err := f.Write(piece); err != nil {
						werr <- err
						return
					}
					if i%16 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
				werr <- nil
			}()
			polls := 0
			recs, err := followRead(t, p, int64(len(data)), ReadOptions{
				Offset:  tc.offset,
				Poll:    time.Millisecond,
				MaxLine: tc.maxLine,
				OnPoll:  func() { polls++; pollOnce.Do(func() { close(polled) }) },
			})
			require.NoError(t, err, "cancel ends follow with nil")
			require.NoError(t, <-werr)
			requireSameBytes(t, data[tc.offset:], reassemble(t, tc.offset, recs), "follow")
			// Held-back partial lines make follow output identical to a
			// one-shot read of the final file: every line exactly once.
			once := parseOutput(t, readAll(t, p, ReadOptions{Offset: tc.offset, MaxLine: tc.maxLine}))
			require.Equal(t, once, recs)
			require.Positive(t, polls, "OnPoll is called at EOF")
		})
	}
}

// failWriter accepts limit bytes, then fails (a broken exec stream).
type failWriter struct {
	buf   bytes.Buffer
	limit int
}

var errBroken = errors.New("stream broken")

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) <= w.limit {
		w.limit -= len(p)
		return w.buf.Write(p)
	}
	n, _ := w.buf.Write(p[:w.limit])
	w.limit = 0
	return n, errBroken
}

func TestBrokenStream(t *testing.T) {
	rng := seeded(t)
	data := genLog(rng, 2<<20, 4096)
	p := writeFile(t, data)
	full := parseOutput(t, readAll(t, p, ReadOptions{MaxLine: 4096}))

	tests := []struct {
		name   string
		limit  int
		follow bool
	}{
		{name: "nothing sent", limit: 0},
		{name: "inside first record", limit: 3},
		{name: "a few records", limit: 1000},
		{name: "mid file", limit: 777_777},
		{name: "mid file, follow", limit: 1_234_567, follow: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := ReadOptions{MaxLine: 4096, Follow: tc.follow, Poll: time.Millisecond}
			w := &failWriter{limit: tc.limit}
			err := Read(context.Background(), p, w, opts)
			require.ErrorIs(t, err, errBroken)
			require.Equal(t, tc.limit, w.buf.Len())

			first := completeRecords(t, w.buf.Bytes())
			last := int64(0)
			if len(first) > 0 {
				last = first[len(first)-1].off
			}
			opts.Offset, opts.Follow = last, false
			second := parseOutput(t, readAll(t, p, opts))
			got := append(reassemble(t, 0, first), reassemble(t, last, second)...)
			requireSameBytes(t, data, got, "resumed")
			require.Equal(t, full, append(first, second...), "no record lost or repeated")
		})
	}
}

// TestGone removes or replaces the file while a follower waits at EOF.
func TestGone(t *testing.T) {
	replace := func(p string) error {
		tmp := p + ".new"
		if err := os.WriteFile(tmp, []byte("new file\n"), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, p)
	}
	appendTo := func(p, s string) error {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(s)
		return err
	}
	tests := []struct {
		name   string
		action func(p string) error
		want   string
	}{
		{name: "deleted", action: os.Remove, want: "2 a\n4 b\n"},
		{name: "replaced", action: replace, want: "2 a\n4 b\n"},
		{
			name: "deleted after more output, partial line delivered",
			action: func(p string) error {
				if err := appendTo(p, "c\npart"); err != nil {
					return err
				}
				return os.Remove(p)
			},
			want: "2 a\n4 b\n6 c\n10 part\n",
		},
		{
			name: "parent directory replaced by a file",
			action: func(p string) error {
				d := filepath.Dir(p)
				if err := os.RemoveAll(d); err != nil {
					return err
				}
				return os.WriteFile(d, nil, 0o644)
			},
			want: "2 a\n4 b\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "logs", "output.log")
			require.NoError(t, os.Mkdir(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte("a\nb\n"), 0o644))
			atEOF := make(chan struct{})
			var once sync.Once
			var out bytes.Buffer
			errc := make(chan error, 1)
			go func() {
				errc <- Read(context.Background(), p, &out, ReadOptions{
					Follow: true,
					Poll:   time.Millisecond,
					OnPoll: func() { once.Do(func() { close(atEOF) }) },
				})
			}()
			<-atEOF
			require.NoError(t, tc.action(p))
			err := <-errc
			require.ErrorIs(t, err, ErrGone)
			require.Equal(t, tc.want, out.String())
		})
	}
}

func TestWaitFile(t *testing.T) {
	tests := []struct {
		name        string
		createAfter time.Duration // 0: never
		wait        time.Duration
		follow      bool
		wantErr     error
	}{
		{name: "appears in time", createAfter: 200 * time.Millisecond, wait: 2 * time.Second},
		{name: "appears in time, follow", createAfter: 200 * time.Millisecond, wait: 2 * time.Second, follow: true},
		{name: "never appears", wait: 300 * time.Millisecond, wantErr: ErrNotFound},
		{name: "no wait", wait: 0, wantErr: ErrNotFound},
		{name: "no wait, follow", wait: 0, follow: true, wantErr: ErrNotFound},
	}
	const content = "first\nsecond\n"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "output.log")
			created := make(chan error, 1)
			if tc.createAfter > 0 {
				go func() {
					time.Sleep(tc.createAfter)
					// Create atomically so the reader never sees it empty.
					tmp := p + ".tmp"
					if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
						created <- err
						return
					}
					created <- os.Rename(tmp, p)
				}()
			}
			opts := ReadOptions{WaitFile: tc.wait}
			if tc.follow {
				opts.Poll = time.Millisecond
				recs, err := followRead(t, p, int64(len(content)), opts)
				if tc.wantErr != nil {
					require.ErrorIs(t, err, tc.wantErr)
					return
				}
				require.NoError(t, err)
				require.Equal(t, content, string(reassemble(t, 0, recs)))
				require.NoError(t, <-created)
				return
			}
			var out bytes.Buffer
			err := Read(context.Background(), p, &out, opts)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Zero(t, out.Len())
				return
			}
			require.NoError(t, err)
			require.NoError(t, <-created)
			require.Equal(t, "6 first\n13 second\n", out.String())
		})
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, []byte("x\n"))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		path    string
		opts    ReadOptions
		wantErr error // nil: expect no error; errAny: any error
	}{
		{name: "negative offset", ctx: context.Background(), path: p, opts: ReadOptions{Offset: -1}, wantErr: errAny},
		{name: "directory", ctx: context.Background(), path: dir, wantErr: errAny},
		{name: "canceled, no follow", ctx: canceled, path: p, wantErr: context.Canceled},
		{name: "canceled, follow", ctx: canceled, path: p, opts: ReadOptions{Follow: true}},
		{name: "canceled while waiting for file, follow", ctx: canceled, path: filepath.Join(dir, "nope"),
			opts: ReadOptions{Follow: true, WaitFile: time.Hour}},
		{name: "canceled while waiting for file", ctx: canceled, path: filepath.Join(dir, "nope"),
			opts: ReadOptions{WaitFile: time.Hour}, wantErr: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Read(tc.ctx, tc.path, io.Discard, tc.opts)
			switch tc.wantErr {
			case nil:
				require.NoError(t, err)
			case errAny:
				require.Error(t, err)
				require.NotErrorIs(t, err, ErrNotFound)
				require.NotErrorIs(t, err, ErrGone)
			default:
				require.ErrorIs(t, err, tc.wantErr)
			}
		})
	}
}

var errAny = errors.New("any error")

// shortWriter claims to write less than asked without an error.
type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestShortWrite(t *testing.T) {
	p := writeFile(t, []byte("hello\n"))
	require.ErrorIs(t, Read(context.Background(), p, shortWriter{}, ReadOptions{}), io.ErrShortWrite)
}

func BenchmarkRead(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := genLog(rng, 5<<20, DefaultMaxLine)
	p := filepath.Join(b.TempDir(), "output.log")
	require.NoError(b, os.WriteFile(p, data, 0o644))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Read(context.Background(), p, io.Discard, ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
