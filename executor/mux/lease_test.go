package mux

import (
	"context"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// renewPod counts the lease renewals (`job status --job ID`) made in it.
type renewPod struct {
	session.Cluster
	renewals atomic.Int32
}

func (r *renewPod) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 5 && argv[2] == "status" && argv[3] == "--job" && argv[4] == "j1" {
		r.renewals.Add(1)
	}
	return 0, nil
}

// startRunner starts a process that stands in for the runner, reaped at
// the end of the test.
func startRunner(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // our child, not yet reaped before Wait
		_ = cmd.Wait()
	})
	return cmd
}

// The lease is renewed while the runner lives, and no longer once it has
// exited: a runner that dies leaves a lease that lapses within its TTL.
func TestKeepLeaseRenewsWhileTheRunnerLives(t *testing.T) {
	cmd := startRunner(t)
	r, err := RunnerOf(cmd.Process.Pid)
	require.NoError(t, err)
	pod := &renewPod{}
	done := make(chan bool, 1)
	go func() {
		done <- KeepLease(context.Background(), pod, testPod, "j1", 30*time.Millisecond, *r, io.Discard)
	}()
	require.Eventually(t, func() bool { return pod.renewals.Load() >= 3 }, 10*time.Second, 5*time.Millisecond, "renewed while the runner lives")
	require.NoError(t, cmd.Process.Kill()) // exited, not yet reaped: a zombie is gone too
	select {
	case gone := <-done:
		assert.True(t, gone, "it returned for the runner's exit")
	case <-time.After(10 * time.Second):
		t.Fatal("still renewing for a runner that exited")
	}
	n := pod.renewals.Load()
	// KeepLease has joined its renewer: nothing renews from here on.
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, n, pod.renewals.Load())
}

// A runner that is not there (reaped, or its PID now another process's)
// is never renewed for; ctx ends the renewal too.
func TestKeepLeaseEnds(t *testing.T) {
	reaped := exec.Command("true")
	require.NoError(t, reaped.Run())
	live := startRunner(t)
	liveRunner, err := RunnerOf(live.Process.Pid)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		runner Runner
		cancel bool
		gone   bool
	}{
		{"reaped", Runner{PID: reaped.Process.Pid, Start: 1}, false, true},
		{"its pid is another process's", Runner{PID: os.Getpid(), Start: liveRunner.Start + 12345}, false, true},
		{"ctx ends", *liveRunner, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancel {
				cancel()
			}
			defer cancel()
			done := make(chan bool, 1)
			go func() { done <- KeepLease(ctx, &renewPod{}, testPod, "j1", time.Hour, tc.runner, io.Discard) }()
			select {
			case gone := <-done:
				assert.Equal(t, tc.gone, gone)
			case <-time.After(10 * time.Second):
				t.Fatal("KeepLease did not return")
			}
		})
	}
}

func TestRunnerOf(t *testing.T) {
	r, err := RunnerOf(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), r.PID)
	assert.Positive(t, r.Start)
	_, err = RunnerOf(1)
	require.Error(t, err, "init is no runner: the hook's parent is gone")
}
