package idle

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestSupervisorLoop shows how the supervisor drives a Machine: one goroutine
// owns a time.Timer armed for Decision.NextWake, every other event (activity, a
// claim from the control socket) happens under the same mutex and kicks the
// loop so it re-arms the timer. synctest's fake clock makes the drain instant
// exact.
func TestSupervisorLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var (
			mu     sync.Mutex
			m      = New(Config{IdleTimeout: 10 * time.Second}, start)
			events []string // "t+offset what", under mu
		)
		record := func(now time.Time, what string) {
			events = append(events, now.Sub(start).String()+" "+what)
		}
		kick := make(chan struct{}, 1)
		drained := make(chan Decision)

		// The supervisor loop.
		go func() {
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for {
				mu.Lock()
				now := time.Now()
				d := m.Tick(now)
				if d.ExpiredJob != "" {
					record(now, "end "+d.ExpiredJob+" ("+d.ExpiryReason+")") // kill the job here
					if err := m.Release(d.ExpiredJob, now); err != nil {
						t.Error(err)
					}
					d = m.Tick(now)
				}
				if d.Drain {
					record(now, "drain ("+d.DrainReason+")")
				}
				mu.Unlock()
				if d.Drain {
					drained <- d
					return
				}
				var wake <-chan time.Time
				if !d.NextWake.IsZero() {
					timer.Reset(d.NextWake.Sub(now))
					wake = timer.C
				}
				select {
				case <-wake:
				case <-kick:
				}
			}
		}()
		event := func(f func(now time.Time)) {
			mu.Lock()
			f(time.Now())
			mu.Unlock()
			select {
			case kick <- struct{}{}:
			default:
			}
		}

		time.Sleep(4 * time.Second)
		event(func(now time.Time) { m.Activity(now); record(now, "activity") }) // deadline → 14s
		time.Sleep(5 * time.Second)
		event(func(now time.Time) {
			if _, err := m.Claim("a", "n", 20*time.Second, 0, now); err != nil { // expires at 29s
				t.Error(err)
			}
			record(now, "claim a")
		})

		d := <-drained // after the release at 29s, the deadline is 39s
		if got := time.Since(start); got != 39*time.Second {
			t.Errorf("drained after %v, want 39s", got)
		}
		if d.DrainReason != ReasonIdleTimeout {
			t.Errorf("drain reason %q", d.DrainReason)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []string{"4s activity", "9s claim a", "29s end a (timeout)", "39s drain (idle-timeout)"}
		if !slices.Equal(events, want) {
			t.Fatalf("events %q, want %q", events, want)
		}
		if s := m.Snapshot(time.Now()); s.JobsRun != 1 || s.State != "draining" {
			t.Errorf("final status %+v", s)
		}
	})
}
