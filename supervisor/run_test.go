package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/lease"
)

// These tests drive the real Run loop on a fake world (fakes_test.go) in
// a synctest bubble: time is synthetic, so a 10-minute idle deadline or a
// 10 s grace period takes no wall time, and "at 10 s" is exact.

func spec(id string, extra ...string) []byte {
	s := fmt.Sprintf(`{"id":%q,"nonce":"n-%s","token":"tok-%s","variables":[{"key":"A","value":"1"}]`, id, id, id)
	for _, e := range extra {
		s += "," + e
	}
	return []byte(s + "}")
}

func (p *pod) state() string { return p.s.State() }

// stop ends the pod with SIGTERM and returns its exit status.
func (p *pod) stop() int {
	p.sigs <- unix.SIGTERM
	return p.exitCode()
}

func hasEnv(env []string, kv string) bool { return slices.Contains(env, kv) }

func TestJobStartAndEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{IdleTimeout: time.Hour, Grace: 10 * time.Second})
		synctest.Wait()
		idleShell := p.w.ShellPID()
		require.Equal(t, "idle", p.state())
		require.NoError(t, p.s.Ready())

		r, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		assert.Equal(t, "a", r.ID)
		assert.Equal(t, "busy", p.state())
		assert.Error(t, p.s.Ready(), "a busy pod is not ready")
		env := (*fakeShell)(p.w).env()
		assert.True(t, hasEnv(env, "CI_JOB_TOKEN=tok-a"), "the job shell holds the token: %v", env)
		assert.True(t, hasEnv(env, "A=1"))
		assert.False(t, p.w.alive(idleShell), "the idle shell was replaced")

		// A second job is refused with 75 while the first holds the lease.
		_, err = p.s.StartJob(spec("b"))
		require.ErrorIs(t, err, lease.ErrBusy)
		assert.Equal(t, control.ExitTempFail, ExitCode(err))

		// Job code: a daemon that left the shell's group.
		daemon := p.w.spawn(1, 0, "daemon")
		info, err := p.s.JobEnv()
		require.NoError(t, err)
		assert.Contains(t, info.Env, "CI_JOB_TOKEN=tok-a")

		_, err = p.s.EndJob("b", 0)
		require.ErrorIs(t, err, lease.ErrWrongJob)
		_, err = p.s.EndJob("a", 0)
		require.NoError(t, err)
		assert.False(t, p.w.alive(daemon), "job end kills every job process")
		assert.Equal(t, "idle", p.state())
		env = (*fakeShell)(p.w).env()
		assert.False(t, hasEnv(env, "CI_JOB_TOKEN=tok-a"), "the idle shell has no token")
		_, err = os.Stat(filepath.Join(p.cfg.JobsDir, "a"))
		assert.ErrorIs(t, err, os.ErrNotExist, "the job directory is gone")
		_, err = p.s.JobEnv()
		assert.ErrorIs(t, err, lease.ErrNoJob)
		assert.Equal(t, 143, p.stop())
	})
}

// A pod whose shell cannot start says why in its status (issue 39: `warmpod
// stauts` ran a PID 1 whose status showed no shell and no reason), and a
// busy pod shows no idle_since (it showed the one from before its job).
func TestStatusSaysWhyNoShellAndNoIdleSinceWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		w.startErr = errors.New(`start stauts: exec: "stauts": executable file not found in $PATH`)
		p := startPodIn(t, Config{IdleTimeout: time.Hour, Grace: time.Second, MaxJobs: 0}, w, nil)
		synctest.Wait()
		st := string(p.s.StatusJSON())
		assert.Contains(t, st, `"shell_error":"start stauts: exec: \"stauts\": executable file not found in $PATH"`)
		assert.NotContains(t, st, `"shell_pid"`)
		assert.Contains(t, st, `"idle_since"`, "idle")

		w.mu.Lock()
		w.startErr = nil
		w.mu.Unlock()
		require.True(t, p.handle(control.Request{Op: control.OpJobStart, Spec: spec("a")}).OK)
		synctest.Wait()
		st = string(p.s.StatusJSON())
		assert.Contains(t, st, `"state":"busy"`)
		assert.NotContains(t, st, `"idle_since"`, "busy: no stale idle_since")
		assert.NotContains(t, st, `"shell_error"`, "the job's shell started")
		assert.Equal(t, 143, p.stop())
	})
}

func TestIdleDeadlineDrainsAndDeletesThePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := startPod(t, Config{IdleTimeout: 10 * time.Minute, ReadyMargin: 10 * time.Second, Grace: time.Second})
		time.Sleep(10*time.Minute - 10*time.Second - time.Nanosecond)
		require.NoError(t, p.s.Ready())
		time.Sleep(time.Nanosecond)
		require.Error(t, p.s.Ready(), "readiness drops ReadyMargin before the deadline")
		code := p.exitCode()
		assert.Equal(t, 10*time.Minute, time.Since(start).Truncate(time.Second), "drains at the deadline")
		assert.Equal(t, 0, code)
		require.Len(t, p.w.terminated, 1)
		assert.Equal(t, "idle-timeout", p.w.terminated[0].Reason)
		assert.Equal(t, 1, p.w.deleted, "an idle pod deletes itself")
	})
}

// drainAfterOneJob runs a single-use pod (in t's bubble) through one job
// until it has drained; its self-deletion answers goes (the pod is
// going).
func drainAfterOneJob(t *testing.T, goes bool) *pod {
	w := newWorld()
	w.podGoes = goes
	p := startPodIn(t, Config{Grace: time.Second, MaxJobs: 1}, w, nil)
	_, err := p.s.StartJob(spec("a"))
	require.NoError(t, err)
	_, err = p.s.EndJob("a", 0)
	require.NoError(t, err)
	synctest.Wait()
	return p
}

// After deleting its own pod, PID 1 waits for the kubelet's stop signal
// (at most deletedWait) instead of exiting: a container that exits before
// the kubelet sees the deletion is restarted (restartPolicy Always).
func TestSelfDeletedPodWaitsForTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		goes   bool          // DeleteSelf's answer
		send   func(p *pod)  // what reaches PID 1 a second after the drain
		waited time.Duration // from the drain to Run's return
	}{
		{"not in a cluster: exits at once", false, nil, 0},
		{"SIGTERM through os/signal", true, func(p *pod) { p.sigs <- unix.SIGTERM }, time.Second},
		{"SIGTERM through the signal thread", true, func(p *pod) { p.s.Forward(unix.SIGTERM) }, time.Second},
		{"a stop signal of the container's own", true, func(p *pod) { p.sigs <- unix.SIGQUIT }, time.Second},
		{"SIGCHLD and SIGWINCH do not stop it", true, func(p *pod) { p.sigs <- unix.SIGCHLD; p.sigs <- unix.SIGWINCH }, deletedWait},
		{"no stop: exits after deletedWait", true, nil, deletedWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Again and again: a signal lost at random (a select between
			// the notes and the loop's end) is lost in one of these.
			for range 20 {
				synctest.Test(t, func(t *testing.T) {
					p := drainAfterOneJob(t, tc.goes)
					w := p.w
					drained := time.Now()
					if tc.send != nil {
						time.Sleep(time.Second)
						tc.send(p)
					}
					assert.Equal(t, 0, p.exitCode(), "the drain's code, whatever stopped it")
					assert.Equal(t, tc.waited, time.Since(drained))
					assert.Equal(t, 1, w.deleted)
				})
			}
		})
	}
}

// The kubelet's stop signal may come while PID 1 still drains (the
// executor deleted the pod as the job ended): the kubelet sends it once,
// so PID 1 does not wait for another after deleting its pod. Here it
// comes as the drain's shutdown reaches the `warmpod job end` client that
// ended the last job (which survives its TERM until the SIGKILL a second
// later): SIGTERM, or an image's own STOPSIGNAL (nginx's SIGQUIT).
func TestStopSignalWhileDrainingIsTheKubeletsStop(t *testing.T) {
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld()
				w.podGoes = true
				p := startPodIn(t, Config{Grace: 10 * time.Second, MaxJobs: 1}, w, nil)
				_, err := p.s.StartJob(spec("a"))
				require.NoError(t, err)
				client := w.spawn(1, 0, "warmpod")
				w.mu.Lock()
				w.clients[client] = true
				w.mu.Unlock()
				w.trap(client, func(w *world, pid int) { p.sigs <- sig })
				_, err = p.s.EndJob("a", 0)
				require.NoError(t, err)
				drained := time.Now()
				assert.Equal(t, 0, p.exitCode(), "a max-jobs drain, signalled after it began")
				assert.Less(t, time.Since(drained), deletedWait, "no wait for a second stop signal after the deletion")
				require.Len(t, w.terminated, 1)
				assert.Equal(t, "max-jobs", w.terminated[0].Reason)
				assert.Equal(t, 1, w.deleted)
			})
		})
	}
}

// While it waits for the kubelet after deleting its pod, PID 1 stays live
// to the liveness probe: a kubelet slow to see the deletion would
// otherwise restart the container.
func TestLiveWhileAwaitingTheKubelet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := drainAfterOneJob(t, true)
		time.Sleep(deletedWait - time.Second)
		assert.NoError(t, p.s.Live())
		assert.Equal(t, 0, p.exitCode())
	})
}

func TestClaimRacesTheIdleDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before time.Duration // claim this long before the deadline
		ok     bool
	}{
		{"1ns before", time.Nanosecond, true},
		{"at the deadline", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := startPod(t, Config{IdleTimeout: time.Minute, Grace: time.Second})
				synctest.Wait()
				time.Sleep(time.Minute - tc.before)
				_, err := p.s.StartJob(spec("a"))
				if tc.ok {
					require.NoError(t, err)
					assert.Equal(t, "busy", p.state())
					assert.Equal(t, 143, p.stop())
					return
				}
				// Refused as draining, or as exiting when the drain has
				// completed already: 69 either way.
				require.Error(t, err)
				assert.Equal(t, control.ExitUnavailable, ExitCode(err), "%v", err)
				assert.Equal(t, 0, p.exitCode())
			})
		})
	}
}

func TestLeaseTTLExpiryEndsTheJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second, MaxJobs: 0})
		_, err := p.s.StartJob(spec("a", `"lease_ttl":"3s"`))
		require.NoError(t, err)
		child := p.w.spawn(1, 0, "build")
		time.Sleep(2 * time.Second)
		require.NoError(t, p.s.Renew("a"))
		time.Sleep(2 * time.Second)
		require.Equal(t, "busy", p.state(), "the renewal kept the lease")
		time.Sleep(time.Second + 10*time.Millisecond)
		synctest.Wait()
		assert.Equal(t, "idle", p.state(), "3 s without renewal end the job")
		assert.False(t, p.w.alive(child))
		assert.ErrorIs(t, p.s.Renew("a"), lease.ErrNoJob)
		var st lease.Status
		require.NoError(t, json.Unmarshal(p.s.StatusJSON(), &st))
		assert.Equal(t, 1, st.JobsRun)
		assert.Equal(t, 143, p.stop())
	})
}

func TestJobTimeoutEndsTheJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second, MaxJobs: 0})
		_, err := p.s.StartJob(spec("a", `"timeout":"1m"`))
		require.NoError(t, err)
		time.Sleep(time.Minute - time.Millisecond)
		require.Equal(t, "busy", p.state())
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, "idle", p.state())
		assert.Equal(t, 143, p.stop())
	})
}

func TestMaxJobsDrainsAfterTheLastJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second, MaxJobs: 2})
		for _, id := range []string{"a", "b"} {
			_, err := p.s.StartJob(spec(id))
			require.NoError(t, err)
			_, err = p.s.EndJob(id, 0)
			require.NoError(t, err)
		}
		assert.Equal(t, 0, p.exitCode())
		require.Len(t, p.w.terminated, 1)
		assert.Equal(t, "max-jobs", p.w.terminated[0].Reason)
		assert.Equal(t, 2, p.w.terminated[0].JobsRun)
		assert.Equal(t, 1, p.w.deleted)
	})
}

func TestScopeIsPinnedByTheFirstJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second, MaxJobs: 0})
		_, err := p.s.StartJob(spec("a", `"scope":"project-1"`))
		require.NoError(t, err)
		_, err = p.s.EndJob("", 0)
		require.NoError(t, err)
		_, err = p.s.StartJob(spec("b", `"scope":"project-2"`))
		require.ErrorIs(t, err, ErrRefused)
		_, err = p.s.StartJob(spec("c", `"scope":"project-1"`))
		require.NoError(t, err)
		assert.Equal(t, 143, p.stop())
	})
}

func TestReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		r, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		assert.True(t, r.Replay, "a byte-identical start is a replay")
		_, err = p.s.StartJob(spec("a", `"timeout":"5m"`))
		require.ErrorIs(t, err, ErrRefused, "same id and nonce, other bytes")
		_, err = p.s.StartJob([]byte(`{"id":"../x"}`))
		require.ErrorIs(t, err, ErrInvalid)
		assert.Equal(t, control.ExitDataErr, ExitCode(err))
		assert.Equal(t, 143, p.stop())
	})
}

func TestCancelKeepsTheLeaseUntilEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 5 * time.Second})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		st, err := p.s.StartStage("a", "build", []string{"/bin/sh", "-c", "sleep 600"}, "", "")
		require.NoError(t, err)
		require.NotNil(t, st.Status)
		v := *st.Status
		require.True(t, v.Running)
		p.w.ignoreTERM(v.PID)

		start := time.Now()
		r, err := p.s.CancelJob("a", 0, 5*time.Second)
		require.NoError(t, err)
		assert.Equal(t, 5*time.Second, time.Since(start).Truncate(time.Second), "SIGKILL after the grace")
		assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(v.PID))
		require.NotNil(t, r.Status)
		assert.True(t, r.Status.Cancelled)
		assert.Equal(t, "busy", p.state(), "the job keeps the lease")
		_, err = p.s.JobEnv()
		require.ErrorIs(t, err, ErrCancelled)
		_, err = p.s.StartStage("a", "after", []string{"/bin/true"}, "", "")
		require.ErrorIs(t, err, ErrCancelled)
		w, err := p.s.WaitStage("build", time.Second)
		require.NoError(t, err)
		require.NotNil(t, w.Status)
		assert.Equal(t, "SIGKILL", w.Status.Signal)
		_, err = p.s.EndJob("a", 0)
		require.NoError(t, err)
		assert.Equal(t, 143, p.stop())
	})
}

func TestStageOutcomeAndLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second})
		r, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		st, err := p.s.StartStage("a", "build", []string{"/bin/sh"}, "", "")
		require.NoError(t, err)
		require.NotNil(t, st.Status)
		v := *st.Status
		_, err = p.s.StartStage("a", "build", []string{"/bin/sh"}, "", "")
		require.ErrorIs(t, err, ErrInvalid, "a stage name is used once")
		_, err = p.s.WaitStage("build", time.Second)
		require.ErrorIs(t, err, ErrStillRunning)
		p.w.exit(v.PID, 3)
		w, err := p.s.WaitStage("build", time.Hour)
		require.NoError(t, err)
		require.NotNil(t, w.Status)
		v = *w.Status
		require.NotNil(t, v.ExitCode)
		assert.Equal(t, 3, *v.ExitCode)
		log, err := os.ReadFile(r.LogPath)
		require.NoError(t, err)
		assert.Equal(t, "{\"script\":\"build\"}\n{\"command_exit_code\":3,\"script\":\"build\"}\n", string(log))
		_, err = p.s.WaitStage("nope", time.Second)
		require.ErrorIs(t, err, ErrNoStage)
		assert.Equal(t, 143, p.stop())
	})
}

// A job end waits out the grace period of a process that ignores SIGTERM
// in a worker: meanwhile the loop serves renewals, status and probes at
// once, and a job start waits in line, then runs.
func TestNoOperationWaitsOnAGracePeriodItDoesNotNeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 10 * time.Second, MaxJobs: 0})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		stubborn := p.w.spawn(1, 0, "stubborn")
		p.w.ignoreTERM(stubborn)
		ended := make(chan error, 1)
		start := time.Now()
		go func() { _, err := p.s.EndJob("a", 0); ended <- err }()
		started := make(chan time.Duration, 1)
		time.Sleep(time.Second)
		go func() {
			_, err := p.s.StartJob(spec("b"))
			assert.NoError(t, err)
			started <- time.Since(start)
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		// 2 s into the 10 s grace: everything else answers now.
		assert.NoError(t, p.s.Live())
		assert.Equal(t, "busy", p.state())
		_, err = p.s.JobStatus("")
		assert.NoError(t, err, "status is served while the job ends")
		_, err = p.s.JobEnv()
		assert.ErrorIs(t, err, lease.ErrNoJob, "an ending job's secrets are not handed out")
		assert.Empty(t, started, "the next start waits for the end")
		require.NoError(t, <-ended)
		assert.Equal(t, 10*time.Second, time.Since(start).Truncate(time.Second))
		assert.Equal(t, 10*time.Second, (<-started).Truncate(time.Second), "then it runs")
		assert.Equal(t, 143, p.stop())
	})
}

func TestSIGTERMReachesEachProcessOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 10 * time.Second})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		shell := p.w.ShellPID()
		child := p.w.spawn(shell, shell, "make") // in the shell's group
		p.w.ignoreTERM(child)
		daemon := p.w.spawn(1, 0, "daemon") // left the group
		start := time.Now()
		code := p.stop()
		assert.Equal(t, 143, code)
		assert.Equal(t, 10*time.Second, time.Since(start).Truncate(time.Second))
		assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(child), "one TERM (forwarded), KILL after the grace")
		assert.Equal(t, []unix.Signal{unix.SIGTERM}, p.w.signalsTo(daemon), "the shutdown sweep TERMs the rest")
		require.Len(t, p.w.terminated, 1)
		assert.Equal(t, "sigterm", p.w.terminated[0].Reason)
		assert.Equal(t, "a", p.w.terminated[0].Job)
		assert.Zero(t, p.w.deleted, "a SIGTERMed pod is being deleted already")
		_, err = os.Stat(filepath.Join(p.cfg.JobsDir, "a"))
		assert.ErrorIs(t, err, os.ErrNotExist, "the job's files are wiped at shutdown")
		_, err = p.s.StartJob(spec("b"))
		assert.ErrorIs(t, err, ErrExiting)
	})
}

// A SIGTERM during a job end is not forwarded: the sweep has TERMed the
// shell's group already; the shutdown follows the end.
func TestSIGTERMDuringJobEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 10 * time.Second})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		shell := p.w.ShellPID()
		p.w.ignoreTERM(shell)
		go func() { _, _ = p.s.EndJob("a", 0) }()
		time.Sleep(time.Second)
		p.sigs <- unix.SIGTERM
		assert.Equal(t, 143, p.exitCode())
		assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(shell))
	})
}

func TestSignalForwarding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second})
		synctest.Wait()
		shell := p.w.ShellPID()
		rt := unix.Signal(34 + 3) // SIGRTMIN+3 (glibc reserves 32 and 33)
		for _, sig := range []unix.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGUSR1, unix.SIGPWR, unix.SIGXCPU, rt,
			unix.SIGPIPE, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGURG, unix.SIGSEGV, unix.SIGCHLD, unix.SIGWINCH} {
			p.sigs <- sig
		}
		synctest.Wait()
		assert.Equal(t, []unix.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGUSR1, unix.SIGPWR, unix.SIGXCPU, rt, unix.SIGWINCH}, p.w.signalsTo(shell))
		assert.Equal(t, 143, p.stop())
	})
}

// The signal thread's path (Forward) applies the same rules as the
// os/signal path above, and its SIGTERM drains the pod.
func TestSignalThreadForwards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second})
		synctest.Wait()
		shell := p.w.ShellPID()
		for _, sig := range []unix.Signal{unix.SIGHUP, unix.SIGPIPE, unix.SIGURG, unix.SIGCHLD, unix.SIGWINCH, unix.SIGTERM} {
			p.s.Forward(sig)
		}
		assert.Equal(t, 143, p.exitCode())
		assert.Equal(t, []unix.Signal{unix.SIGHUP, unix.SIGWINCH, unix.SIGTERM}, p.w.signalsTo(shell))
	})
}

// A SIGTERM the signal thread takes during a job end is not forwarded,
// as on the loop's path.
func TestSignalThreadSIGTERMDuringJobEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 10 * time.Second})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		shell := p.w.ShellPID()
		p.w.ignoreTERM(shell)
		go func() { _, _ = p.s.EndJob("a", 0) }()
		time.Sleep(time.Second)
		p.s.Forward(unix.SIGTERM)
		assert.Equal(t, 143, p.exitCode())
		assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(shell))
	})
}

// The signal thread forwards a SIGTERM, and a job end starts its sweep
// before the loop has read the thread's note: the sweep must not TERM
// the shell's group a second time (setSweeping records the forward).
func TestSIGTERMForwardedJustBeforeAJobEndSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 10 * time.Second})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		shell := p.w.ShellPID()
		child := p.w.spawn(shell, shell, "make")
		p.w.ignoreTERM(shell)
		p.w.ignoreTERM(child)
		r := p.s.forward(unix.SIGTERM) // the thread's kill(2); its note is held back
		require.True(t, r.forwarded)
		require.ElementsMatch(t, []int{shell, child}, sentPIDs(r.ledger), "the group's members, read after the kill")
		p.w.mu.Lock()
		frozen := p.w.frozen
		p.w.mu.Unlock()
		require.True(t, frozen, "the shell is retired before the loop sees the note")
		go func() { _, _ = p.s.EndJob("a", 0) }()
		time.Sleep(time.Second)
		p.s.notes <- r
		assert.Equal(t, 143, p.exitCode())
		assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(shell))
		assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(child))
	})
}

// The same race with the drain: a SIGTERM forwarded just before an idle
// deadline drains the pod reaches each process once.
func TestSIGTERMForwardedJustBeforeTheIdleDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 10 * time.Second, IdleTimeout: time.Minute})
		synctest.Wait()
		shell := p.w.ShellPID()
		p.w.ignoreTERM(shell)
		time.Sleep(time.Minute - time.Millisecond)
		r := p.s.forward(unix.SIGTERM)
		require.True(t, r.forwarded)
		time.Sleep(time.Second) // the deadline passes: the idle drain runs first
		p.s.notes <- r
		code := p.exitCode()
		assert.Equal(t, 0, code, "the idle drain came first")
		assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(shell))
	})
}

func TestPutWriterDiesWithItsJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second, MaxJobs: 0})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		writer := p.w.spawn(0, 0, "warmpod")
		p.w.clients[writer] = true // an executor's client: job end spares it...
		tmp := filepath.Join(t.TempDir(), ".out.tmp-0123456789abcdef")
		_, err = p.s.StartPut("a", writer, tmp)
		require.NoError(t, err)
		_, err = p.s.StartPut("a", writer, "/tmp/out")
		require.ErrorIs(t, err, ErrInvalid)
		for _, dir := range []string{p.cfg.JobsDir, p.cfg.JobsDir + "/b", p.cfg.LogsDir} {
			_, err = p.s.StartPut("a", writer, dir+"/.x.tmp-0123456789abcdef")
			require.ErrorIs(t, err, ErrInvalid, "a put into %s", dir)
		}
		_, err = p.s.StartPut("a", writer, p.cfg.JobsDir+"/a/.x.tmp-0123456789abcdef")
		require.NoError(t, err, "the job's own directory")
		_, err = p.s.EndJob("a", 0)
		require.NoError(t, err)
		assert.False(t, p.w.alive(writer), "...but not when it writes for the job")
		assert.Equal(t, []unix.Signal{unix.SIGKILL}, p.w.signalsTo(writer))
		_, err = p.s.StartPut("a", writer, tmp)
		require.ErrorIs(t, err, lease.ErrNoJob)
		assert.Equal(t, 143, p.stop())
	})
}

func TestCommandExitDrainsWithItsStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second})
		synctest.Wait()
		p.sigs <- unix.SIGUSR1
		p.w.exited <- shellExit(7)
		assert.Equal(t, 7, p.exitCode(), "command-exited: the command's status")
		assert.Equal(t, "command-exited", p.w.terminated[0].Reason)
	})
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errorf(ErrInvalid, "x"), control.ExitDataErr},
		{errorf(ErrUsage, "x"), control.ExitUsage},
		{lease.ErrBusy, control.ExitTempFail},
		{fmt.Errorf("job %q: %w", "a", lease.ErrWrongJob), control.ExitTempFail},
		{errorf(ErrRefused, "x"), control.ExitTempFail},
		{errorf(ErrStillRunning, "x"), control.ExitTempFail},
		{lease.ErrNoJob, control.ExitUnavailable},
		{lease.ErrDraining, control.ExitUnavailable},
		{errorf(ErrCancelled, "x"), control.ExitUnavailable},
		{errorf(ErrNoStage, "x"), control.ExitUnavailable},
		{errorf(ErrExiting, "x"), control.ExitUnavailable},
		{errors.New("disk on fire"), control.ExitSoftware},
	} {
		assert.Equal(t, tc.want, ExitCode(tc.err), "%v", tc.err)
	}
}

// Once the drain has begun, a client's job operation is refused at once
// (69) instead of waiting through the shutdown's grace period, whether it
// was waiting in line or comes later.
func TestOperationsDuringTheDrainAreRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 10 * time.Second, MaxJobs: 0})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		p.w.ignoreTERM(p.w.spawn(1, 0, "stubborn"))
		go func() { _, _ = p.s.EndJob("a", 0) }()
		time.Sleep(time.Second)
		staged := make(chan error, 1)
		go func() { _, err := p.s.StartStage("a", "late", []string{"/bin/sh"}, "", ""); staged <- err }()
		synctest.Wait()
		require.Empty(t, staged, "waits in line behind the job end")
		start := time.Now()
		p.sigs <- unix.SIGTERM
		err = <-staged
		require.ErrorIs(t, err, lease.ErrDraining)
		_, err = p.s.StartJob(spec("b"))
		require.ErrorIs(t, err, lease.ErrDraining)
		assert.Zero(t, time.Since(start), "answered without waiting")
		assert.Equal(t, 143, p.exitCode())
	})
}

// Handle is the one place where errors become exit codes.
func TestHandleMapsErrorsToExitCodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second})
		synctest.Wait()
		h := p.handle
		assert.Equal(t, control.ExitUsage, h(control.Request{Op: "nope"}).Code)
		assert.Equal(t, control.ExitUsage, h(control.Request{Op: control.OpStall}).Code, "test hooks are off")
		assert.Equal(t, control.ExitDataErr, h(control.Request{Op: control.OpJobStart, Spec: []byte(`{`)}).Code)
		assert.Equal(t, control.ExitUnavailable, h(control.Request{Op: control.OpJobEnd}).Code)
		r := h(control.Request{Op: control.OpJobStart, Spec: spec("a")})
		require.True(t, r.OK, r.Error)
		assert.Equal(t, "busy", r.State)
		r = h(control.Request{Op: control.OpJobEnv, Job: "b"})
		assert.Equal(t, control.ExitTempFail, r.Code, "a call for another job: 75")
		assert.Contains(t, r.Error, `job "b"`)
		assert.Equal(t, control.ExitUsage, h(control.Request{Op: control.OpJobWait, Stage: "x", Duration: "soon"}).Code)
		assert.Equal(t, control.ExitUnavailable, h(control.Request{Op: control.OpJobWait, Stage: "x"}).Code)
		assert.Equal(t, 0, h(control.Request{Op: control.OpProbe, Probe: "live"}).Code)
		assert.Equal(t, 1, h(control.Request{Op: control.OpProbe, Probe: "ready"}).Code, "busy: not ready")
		assert.Equal(t, control.ExitUsage, h(control.Request{Op: control.OpProbe, Probe: "deep"}).Code)
		assert.Equal(t, 143, p.stop())
	})
}

// A refused job start reaches PID 1's log, not only the executor: a bad
// spec as a warning, a busy pod (75, routine in a pool) as info, and never
// the spec's values. (A failed start, 70, is logged where it fails.)
func TestRefusedJobStartIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		p := startPodLog(t, Config{Grace: time.Second}, initlog.New(&out, initlog.LevelInfo, initlog.Text, time.Now))
		synctest.Wait()
		h := p.handle
		require.Equal(t, control.ExitDataErr, h(control.Request{Op: control.OpJobStart, Spec: []byte(`{"id":"a","token":"sekrit-1","timeout":"x"}`)}).Code)
		require.True(t, h(control.Request{Op: control.OpJobStart, Spec: spec("a")}).OK)
		require.Equal(t, control.ExitTempFail, h(control.Request{Op: control.OpJobStart, Spec: spec("b")}).Code)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		var refused []string
		for _, l := range lines {
			if strings.Contains(l, `msg="job start refused"`) {
				refused = append(refused, l)
			}
		}
		require.Len(t, refused, 2, out.String())
		assert.Contains(t, refused[0], "level=WARN")
		assert.Contains(t, refused[0], "code=65")
		assert.Contains(t, refused[1], "level=INFO")
		assert.Contains(t, refused[1], "code=75")
		assert.NotContains(t, out.String(), "sekrit-1")
		assert.Equal(t, 143, p.stop())
	})
}

// syncBuffer is a bytes.Buffer that the loop and the test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sentPIDs lists the PIDs l says had their SIGTERM.
func sentPIDs(l *termLedger) []int {
	var out []int
	for id := range l.sent {
		out = append(out, id.pid)
	}
	return out
}
