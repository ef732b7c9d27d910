package supervisor

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/procscan"
)

// The rules of termLedger, without a supervisor.
func TestTermLedger(t *testing.T) {
	a := procscan.Proc{PID: 10, Start: 100, State: 'S'}
	b := procscan.Proc{PID: 11, Start: 101, State: 'T'}
	z := procscan.Proc{PID: 12, Start: 102, State: 'Z'}
	late := procscan.Proc{PID: 13, Start: 200, State: 'S'}
	reused := procscan.Proc{PID: 10, Start: 300, State: 'S'} // a's PID, a later process

	var fresh termLedger
	assert.True(t, fresh.due(late), "before the first SIGTERM every process is due one")

	l := &termLedger{}
	l.begin([]procscan.Proc{a, b, z})
	l.begin([]procscan.Proc{a, b, z, late}) // the first call is the cut
	for _, tc := range []struct {
		name string
		p    procscan.Proc
		due  bool
	}{
		{"running at the cut", a, true},
		{"stopped at the cut", b, true},
		{"a zombie at the cut is not running", z, false},
		{"started after the cut: clean-up", late, false},
		{"a reused PID is another process", reused, false},
	} {
		assert.Equal(t, tc.due, l.due(tc.p), tc.name)
	}
	l.mark(a)
	assert.False(t, l.due(a), "one SIGTERM per process")

	c := l.clone()
	c.mark(b)
	assert.True(t, l.due(b), "a clone's marks stay in the clone")
	assert.False(t, c.due(a), "a clone keeps what was sent")
	assert.False(t, c.due(late), "and who was running")

	assert.Empty(t, (*termLedger)(nil).clone().sent)
}

// A process that a TERM handler starts after the pod's SIGTERM was
// forwarded is that handler's clean-up: the shutdown sweep sends it no
// TERM of its own (one would break the clean-up off), whichever look at
// the process table first sees it, and it gets SIGKILL after the grace
// period like everything still there. The fake process table
// places the clean-up's start at the n-th look after the forward: the
// forward's own, the shutdown's look for clients, the sweep's.
func TestSIGTERMCleanupStartedAfterTheForwardGetsNoTERM(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at      int  // the look at the process table after the TERM at which the clean-up starts
		ownPGID bool // the clean-up is not in the handler's process group (setsid)
	}{
		{"started while the forward lists the group", 1, false},
		{"started between the forward and the sweep", 2, false},
		{"started between the forward and the sweep, in a session of its own", 2, true},
		{"started as the sweep lists", 3, false},
		{"started during the grace period", 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := startPod(t, Config{Grace: 6 * time.Second})
				_, err := p.s.StartJob(spec("a"))
				require.NoError(t, err)
				shell := p.w.ShellPID()
				handler := p.w.spawn(shell, shell, "sh") // traps TERM, cleans up
				daemon := p.w.spawn(1, 0, "daemon")      // outside the group, running before
				p.w.ignoreTERM(daemon)
				cleanup := 0
				p.w.trap(handler, func(w *world, pid int) {
					termAt := w.lists
					w.onList = func(w *world, n int) {
						if cleanup == 0 && n == termAt+tc.at {
							pgid := shell
							if tc.ownPGID {
								pgid = 0
							}
							cleanup = w.spawnLocked(handler, pgid, "date")
						}
					}
				})
				start := time.Now()
				assert.Equal(t, 143, p.stop())
				require.NotZero(t, cleanup, "the clean-up was started")
				assert.Equal(t, 6*time.Second, time.Since(start).Truncate(time.Second), "SIGKILL after the grace")
				assert.Equal(t, []unix.Signal{unix.SIGKILL}, p.w.signalsTo(cleanup), "no TERM of its own")
				assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(handler), "the forwarded TERM, once")
				assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(daemon), "the sweep's TERM to a process running at the forward")
			})
		})
	}
}

// The same rule at a job end, a job cancel and a stage cancel, which keep
// looking at the process table until the grace period is over: a process
// a TERM handler starts during the stop gets no TERM, and SIGKILL at the
// end of the grace period.
func TestJobStopsSendNoTERMToCleanup(t *testing.T) {
	for _, stop := range []string{"job end", "job cancel", "stage cancel"} {
		t.Run(stop, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := startPod(t, Config{Grace: 4 * time.Second, MaxJobs: 0})
				_, err := p.s.StartJob(spec("a"))
				require.NoError(t, err)
				st, err := p.s.StartStage("a", "build", []string{"/bin/sh"}, "", "")
				require.NoError(t, err)
				require.NotNil(t, st.Status)
				v := *st.Status
				cleanup := 0
				p.w.trap(v.PID, func(w *world, pid int) {
					termAt := w.lists
					w.onList = func(w *world, n int) {
						if cleanup == 0 && n == termAt+1 {
							cleanup = w.spawnLocked(v.PID, v.PID, "rm")
						}
					}
				})
				start := time.Now()
				switch stop {
				case "job end":
					_, err = p.s.EndJob("a", 0)
				case "job cancel":
					_, err = p.s.CancelJob("a", 0, 4*time.Second)
				case "stage cancel":
					_, err = p.s.CancelStage("a", "build", 0, 4*time.Second)
				}
				require.NoError(t, err)
				require.NotZero(t, cleanup)
				assert.Equal(t, 4*time.Second, time.Since(start).Truncate(time.Second), "SIGKILL after the grace")
				assert.Equal(t, []unix.Signal{unix.SIGKILL}, p.w.signalsTo(cleanup), "no TERM of its own")
				assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(v.PID))
				assert.Equal(t, 143, p.stop())
			})
		})
	}
}

// A stopped process that traps TERM runs its trap when warmpod stops it:
// every SIGTERM warmpod sends is followed by SIGCONT. Without it the TERM
// stays pending until the SIGKILL at the end of the grace period.
func TestStoppedProcessRunsItsTERMHandler(t *testing.T) {
	exits := func(w *world, pid int) { w.die(pid, w.procs[pid], unix.SIGTERM) }
	for _, tc := range []struct {
		stop    string
		inGroup bool // in the shell's process group (the forwarded SIGTERM reaches it)
	}{
		{"job end", false},
		{"job cancel", false},
		{"stage cancel", false},
		{"pod SIGTERM, in the shell's group", true},
		{"pod SIGTERM, outside the shell's group", false},
	} {
		t.Run(tc.stop, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := startPod(t, Config{Grace: 10 * time.Second, MaxJobs: 0})
				_, err := p.s.StartJob(spec("a"))
				require.NoError(t, err)
				var victim int
				switch {
				case tc.stop == "stage cancel":
					st, err := p.s.StartStage("a", "build", []string{"/bin/sh"}, "", "")
					require.NoError(t, err)
					require.NotNil(t, st.Status)
					v := *st.Status
					victim = v.PID
				case tc.inGroup:
					victim = p.w.spawn(p.w.ShellPID(), p.w.ShellPID(), "sh")
				default:
					victim = p.w.spawn(1, 0, "sh")
				}
				p.w.trap(victim, exits)
				p.w.stop(victim)
				start := time.Now()
				switch tc.stop {
				case "job end":
					_, err = p.s.EndJob("a", 0)
				case "job cancel":
					_, err = p.s.CancelJob("a", 0, 10*time.Second)
				case "stage cancel":
					_, err = p.s.CancelStage("a", "build", 0, 10*time.Second)
				default:
					assert.Equal(t, 143, p.stop())
				}
				require.NoError(t, err)
				assert.Less(t, time.Since(start), time.Second, "the trap ran at once, not the SIGKILL after the grace")
				assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT}, p.w.signalsTo(victim))
				assert.False(t, p.w.alive(victim))
				if tc.stop != "pod SIGTERM, in the shell's group" && tc.stop != "pod SIGTERM, outside the shell's group" {
					assert.Equal(t, 143, p.stop())
				}
			})
		})
	}
}

// A second SIGTERM to PID 1 before the drain has begun is not forwarded
// again: the shell's group had its one TERM.
func TestSecondSIGTERMIsNotForwardedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: time.Second})
		synctest.Wait()
		shell := p.w.ShellPID()
		p.w.ignoreTERM(shell)
		r1 := p.s.forward(unix.SIGTERM)
		r2 := p.s.forward(unix.SIGTERM)
		assert.True(t, r1.forwarded)
		assert.False(t, r2.forwarded)
		p.s.notes <- r1
		p.s.notes <- r2
		assert.Equal(t, 143, p.exitCode())
		assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT, unix.SIGKILL}, p.w.signalsTo(shell))
	})
}

// A cancelled stage ends when the last of its processes is gone, not when
// its leader is: a leader that dies of its TERM at once (an Actions step's
// `sh -e`, no trap) leaves a child whose trap still prints into the
// stage's output for a while; the stage's end (its status, its end marker)
// comes after that, so the trap's output is the stage's and a stage
// reported ended has nothing left running.
func TestCancelledStageEndsWithItsLastProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, Config{Grace: 10 * time.Second, MaxJobs: 0})
		_, err := p.s.StartJob(spec("a"))
		require.NoError(t, err)
		st, err := p.s.StartStage("a", "build", []string{"/bin/sh"}, "", "")
		require.NoError(t, err)
		leader := st.Status.PID
		child := p.w.spawn(leader, leader, "sh")
		var childGone time.Time
		p.w.trap(child, func(w *world, pid int) {
			go func() {
				time.Sleep(2 * time.Second) // the trap's clean-up
				w.mu.Lock()
				defer w.mu.Unlock()
				childGone = time.Now()
				w.die(pid, w.procs[pid], unix.SIGTERM)
			}()
		})
		start := time.Now()
		got, err := p.s.CancelStage("a", "build", 0, 10*time.Second)
		require.NoError(t, err)
		require.NotNil(t, got.Status)
		assert.False(t, got.Status.Running, "the reply tells the stage's end")
		require.NotNil(t, got.Status.Ended)
		assert.False(t, got.Status.Ended.Before(childGone), "the stage ended after its last process (%s), not with its leader (%s)",
			childGone.Sub(start), got.Status.Ended.Sub(start))
		assert.Less(t, time.Since(start), 3*time.Second, "its trap's time, not the grace period")
		assert.Equal(t, []unix.Signal{unix.SIGTERM, unix.SIGCONT}, p.w.signalsTo(child))
		assert.Equal(t, 143, p.stop())
	})
}
