package stageclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/putfile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakePID1 is a Source over a job log it writes itself: the stage's
// output is appended with write, and finish appends the end marker and
// records the outcome the way PID 1 does (outcome first, marker after).
type fakePID1 struct {
	t    *testing.T
	log  string
	mu   sync.Mutex
	st   control.StageStatus
	done chan struct{}
	// calls records the job named by each call, per kind.
	calls map[string][]string
	// waitTimeouts answers that many Waits with "still running" first.
	waitTimeouts int
	waitErr      error
}

func newFake(t *testing.T, start int64) *fakePID1 {
	log := filepath.Join(t.TempDir(), "output.log")
	require.NoError(t, os.WriteFile(log, bytes.Repeat([]byte("p"), int(start)), 0o600))
	return &fakePID1{t: t, log: log, done: make(chan struct{}), calls: map[string][]string{},
		st: control.StageStatus{Stage: "build", PID: 7, Running: true, LogStart: start}}
}

func (f *fakePID1) write(s string) {
	fh, err := os.OpenFile(f.log, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(f.t, err)
	_, err = fh.WriteString(s)
	require.NoError(f.t, err)
	require.NoError(f.t, fh.Close())
}

func (f *fakePID1) size() int64 {
	fi, err := os.Stat(f.log)
	require.NoError(f.t, err)
	return fi.Size()
}

// finish ends the stage with code, then writes a marker that is not the
// stage's output.
func (f *fakePID1) finish(code int) {
	end := f.size()
	f.mu.Lock()
	f.st.Running, f.st.ExitCode, f.st.LogEnd = false, &code, &end
	f.mu.Unlock()
	close(f.done)
	f.write("\n--- warmpod: stage build ended ---\n")
}

func (f *fakePID1) record(kind, job string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[kind] = append(f.calls[kind], job)
}

func (f *fakePID1) jobs(kind string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls[kind]...)
}

func (f *fakePID1) Status(_ context.Context, job, stage string) (control.StageStatus, error) {
	f.record("status", job)
	require.Equal(f.t, "build", stage)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st, nil
}

func (f *fakePID1) Wait(ctx context.Context, job, _ string, _ time.Duration) (control.StageStatus, bool, error) {
	f.record("wait", job)
	f.mu.Lock()
	if f.waitErr != nil {
		defer f.mu.Unlock()
		return control.StageStatus{}, false, f.waitErr
	}
	if f.waitTimeouts > 0 {
		f.waitTimeouts--
		f.mu.Unlock()
		return control.StageStatus{}, false, nil
	}
	f.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return control.StageStatus{}, false, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st, true, nil
}

func (f *fakePID1) Renew(_ context.Context, job string) { f.record("renew", job) }

func (f *fakePID1) stream(live func() bool) *Stream {
	return &Stream{Source: f, Job: "j1", LogPath: f.log, Live: live, Poll: time.Millisecond, Renew: time.Millisecond}
}

// Output written while the stage runs arrives in order and complete; the
// end marker after LogEnd does not.
func TestCopyRunningStage(t *testing.T) {
	for _, from := range []int64{0, 3, 11} {
		f := newFake(t, 100)
		var out bytes.Buffer
		errc := make(chan error, 1)
		var final control.StageStatus
		go func() {
			var err error
			final, err = f.stream(nil).Copy(context.Background(), f.st, from, &out)
			errc <- err
		}()
		f.write("hello\n")
		time.Sleep(5 * time.Millisecond)
		f.write("world\n")
		f.finish(3)
		require.NoError(t, <-errc)
		assert.Equal(t, "hello\nworld\n"[from:], out.String(), "from %d", from)
		require.NotNil(t, final.ExitCode)
		assert.Equal(t, 3, *final.ExitCode)
		assert.Equal(t, int64(112), *final.LogEnd)
	}
}

// The race of the end marker: the read sees the marker before the end is
// known; the status check finds the stage ended and cuts the read at
// LogEnd.
func TestCopyCutsAtLogEndWhenTheEndComesWithTheRead(t *testing.T) {
	f := newFake(t, 10)
	view := f.st
	f.write("all of it\n")
	f.finish(0)
	f.waitErr = nil
	var out bytes.Buffer
	// The stage looked running when the call attached.
	final, err := f.stream(nil).Copy(context.Background(), view, 0, &out)
	require.NoError(t, err)
	assert.Equal(t, "all of it\n", out.String())
	assert.Equal(t, 0, *final.ExitCode)
}

// A stage that ended before the call attached (a retry after the end) is
// copied from the offset without waiting.
func TestCopyEndedStage(t *testing.T) {
	f := newFake(t, 0)
	f.write("0123456789")
	f.finish(1)
	var out bytes.Buffer
	final, err := f.stream(nil).Copy(context.Background(), f.st, 4, &out)
	require.NoError(t, err)
	assert.Equal(t, "456789", out.String())
	assert.Equal(t, 1, *final.ExitCode)
	assert.Empty(t, f.jobs("wait"), "an ended stage is not waited for")
}

// While the executor is there every call names the job and the lease is
// renewed; once it is gone no call names it and nothing renews it.
func TestCopyNamesTheJobOnlyWhileLive(t *testing.T) {
	for _, live := range []bool{true, false} {
		f := newFake(t, 0)
		f.waitTimeouts = 2
		var out bytes.Buffer
		errc := make(chan error, 1)
		go func() {
			_, err := f.stream(func() bool { return live }).Copy(context.Background(), f.st, 0, &out)
			errc <- err
		}()
		f.write("x")
		time.Sleep(20 * time.Millisecond)
		f.finish(0)
		require.NoError(t, <-errc)
		want := ""
		if live {
			want = "j1"
			assert.NotEmpty(t, f.jobs("renew"), "live: renewed")
		} else {
			assert.Empty(t, f.jobs("renew"), "gone: never renewed")
		}
		require.Len(t, f.jobs("wait"), 3, "asked again after each timed-out wait")
		for _, kind := range []string{"wait", "status"} {
			for _, j := range f.jobs(kind) {
				assert.Equal(t, want, j, "live=%v %s", live, kind)
			}
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestCopyErrors(t *testing.T) {
	t.Run("PID 1 lost", func(t *testing.T) {
		f := newFake(t, 0)
		f.waitErr = errors.New("PID 1: connection refused")
		_, err := f.stream(nil).Copy(context.Background(), f.st, 0, &bytes.Buffer{})
		require.ErrorContains(t, err, "connection refused")
	})
	t.Run("exec stream broken", func(t *testing.T) {
		f := newFake(t, 0)
		f.write("x")
		f.finish(0)
		_, err := f.stream(nil).Copy(context.Background(), f.st, 0, failWriter{})
		require.ErrorContains(t, err, "writing the output: broken pipe")
	})
	t.Run("interrupted", func(t *testing.T) {
		f := newFake(t, 0)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel)
		_, err := f.stream(nil).Copy(ctx, f.st, 0, &bytes.Buffer{})
		require.ErrorContains(t, err, "it goes on under PID 1")
	})
	t.Run("no log", func(t *testing.T) {
		f := newFake(t, 0)
		f.log = filepath.Join(t.TempDir(), "missing")
		_, err := f.stream(nil).Copy(context.Background(), f.st, 0, &bytes.Buffer{})
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func jobStatus(t *testing.T, dir string, stages ...control.StageStatus) *control.Response {
	b, err := json.Marshal(control.JobStatus{Job: "j1", Stages: append([]control.StageStatus{}, stages...)})
	require.NoError(t, err)
	return &control.Response{OK: true, Job: "j1", JobDir: dir, Data: b}
}

func TestStore(t *testing.T) {
	script := "echo hi\n"
	sum := sha256.Sum256([]byte(script))
	digest := hex.EncodeToString(sum[:])
	t.Run("new", func(t *testing.T) {
		dir := t.TempDir()
		p, err := Store(jobStatus(t, dir), "build", strings.NewReader(script+"trailing bytes"), int64(len(script)), digest)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(dir, "scripts", "build"), p)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, script, string(b))
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o500), fi.Mode().Perm())
	})
	t.Run("retry reads nothing", func(t *testing.T) {
		dir := t.TempDir()
		p, err := Store(jobStatus(t, dir, control.StageStatus{Stage: "build", SHA256: digest}), "build", failReader{t}, 8, digest)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(dir, "scripts", "build"), p)
	})
	t.Run("other script", func(t *testing.T) {
		_, err := Store(jobStatus(t, t.TempDir(), control.StageStatus{Stage: "build", SHA256: "00"}), "build", failReader{t}, 8, digest)
		require.ErrorIs(t, err, ErrOtherScript)
		assert.EqualError(t, err, `stage "build" already exists in this job with another script`)
	})
	t.Run("bad name", func(t *testing.T) {
		_, err := Store(jobStatus(t, t.TempDir()), "../x", strings.NewReader(script), int64(len(script)), digest)
		require.ErrorIs(t, err, putfile.ErrBadInput)
	})
	t.Run("wrong digest", func(t *testing.T) {
		dir := t.TempDir()
		_, err := Store(jobStatus(t, dir), "build", strings.NewReader(script), int64(len(script)), strings.Repeat("0", 64))
		require.ErrorIs(t, err, putfile.ErrBadInput)
		_, err = os.Stat(filepath.Join(dir, "scripts", "build"))
		require.ErrorIs(t, err, os.ErrNotExist, "nothing left behind")
	})
}

type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("the script was read again")
	return 0, errors.New("no")
}
