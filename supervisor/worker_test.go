package supervisor

import (
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// workers reads the loop's worker count on the loop.
func (p *pod) workers() int {
	n, err := call(p.s, false, func(reply func(int, error)) { reply(p.s.ls.workers, nil) })
	require.NoError(p.t, err)
	return n
}

// A second worker beside a running one is reported (PID 1's log at Error,
// the test's hook) and still run.
func TestWorkReportsASecondWorker(t *testing.T) {
	s, broken, log := bare(t)
	release := make(chan struct{})
	var ran sync.WaitGroup
	ran.Add(2)
	slow := func() { ran.Done(); <-release }
	s.work("first", slow, func() {})
	require.Empty(t, *broken)
	s.work("second", slow, func() {})
	require.Len(t, *broken, 1)
	assert.Contains(t, (*broken)[0].Error(), `worker "second" started while 1 other worker(s) run`)
	assert.Contains(t, log.String(), "level=ERROR")
	ran.Wait()       // both ran
	close(s.stopped) // no loop takes their continuations: they are dropped
	close(release)
}

// Many overlapping operations, each of which needs a worker (job start,
// stage and job cancel, job end and the idle shell after it, a lease
// expiry, the shutdown), come in while workers run: they wait in line,
// and never does a second worker start beside the first (onBroken fails
// the test at once, in work). Sampled on the loop meanwhile, the count is
// never above one; at the end it is zero.
func TestOneWorkerAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 3 * time.Second, MaxJobs: 0})
		p.w.mu.Lock()
		p.w.stopSlow = 500 * time.Millisecond // every shell swap takes a while
		p.w.mu.Unlock()
		synctest.Wait()
		var wg sync.WaitGroup
		for i, id := range []string{"a", "b", "c"} {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 100 * time.Millisecond)
				if _, err := p.s.StartJob(spec(id, `"lease_ttl":"20s"`)); err != nil {
					return // busy: another job holds the lease
				}
				stubborn := p.w.spawn(1, 0, "stubborn")
				p.w.ignoreTERM(stubborn)
				_, err := p.s.StartStage(id, "build", []string{"/bin/sh"}, "", "")
				assert.NoError(t, err)
				writer := p.w.spawn(0, 0, "warmpod")
				_, err = p.s.StartPut(id, writer, filepath.Join(t.TempDir(), ".o.tmp-0123456789abcdef"))
				assert.NoError(t, err)
				var cancels sync.WaitGroup
				cancels.Go(func() { _, _ = p.s.CancelStage(id, "build", 0, time.Second) })
				cancels.Go(func() { _, _ = p.s.CancelJob(id, 0, time.Second) })
				cancels.Go(func() { _, _ = p.s.CancelJob(id, 0, time.Second) })
				cancels.Wait()
				if id == "c" {
					return // no job end: its lease expires
				}
				_, err = p.s.EndJob(id, 0)
				assert.NoError(t, err)
			})
		}
		busy := 0
		for range 30 {
			time.Sleep(700 * time.Millisecond)
			n := p.workers()
			assert.LessOrEqual(t, n, 1)
			if n == 1 {
				busy++
			}
		}
		assert.Positive(t, busy, "some samples fell while a worker ran")
		wg.Wait()
		time.Sleep(30 * time.Second) // c's lease expires: its end and idle shell
		assert.Equal(t, "idle", p.state())
		assert.Zero(t, p.workers())
		p.w.ignoreTERM(p.w.spawn(1, 0, "stubborn"))
		p.sigs <- unix.SIGTERM
		assert.Equal(t, 143, p.exitCode())
	})
}

// A job end answers after two workers in turn: its own (sweep, wipe) and,
// once the lease is released, the idle shell's. A job start that came in
// meanwhile waits for both: it must not swap the shell while the idle
// shell is being started.
func TestJobEndIdleShellHoldsTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second, MaxJobs: 0})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		p.w.mu.Lock()
		p.w.stopSlow = 3 * time.Second
		p.w.mu.Unlock()
		start := time.Now()
		ended := make(chan time.Duration, 1)
		go func() {
			_, err := p.s.EndJob("a", 0)
			assert.NoError(t, err)
			ended <- time.Since(start)
		}()
		synctest.Wait()
		_, err = p.s.StartJob(spec("b"))
		require.NoError(t, err)
		assert.Equal(t, 6*time.Second, time.Since(start), "the idle shell's swap, then the job's")
		assert.Equal(t, 3*time.Second, <-ended, "the end answers once the idle shell is up")
		assert.Equal(t, 143, p.stop())
	})
}
