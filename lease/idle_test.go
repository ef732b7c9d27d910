package lease

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// t0 is the synthetic start time of every test; steps are offsets from it.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const ns = time.Nanosecond

func at(d time.Duration) time.Time { return t0.Add(d) }

func wake(d time.Duration) *time.Duration { return &d }

// step is one call on the Machine at t0+at, with what it must return.
type step struct {
	at time.Duration
	op string // claim, renew, release, activity, tick, drain

	job, nonce   string
	timeout, ttl time.Duration
	reason       Reason

	wantErr    error // claim, renew, release
	wantReplay bool  // claim

	// tick
	wantExpired, wantWhy string
	wantDrain            bool
	wantReason           Reason
	wantWake             *time.Duration // nil: zero NextWake

	wantState State // checked after every step
}

func runSteps(t *testing.T, cfg Config, steps []step) *Machine {
	t.Helper()
	m := New(cfg, t0)
	for i, s := range steps {
		now := at(s.at)
		switch s.op {
		case "claim":
			replay, err := m.Claim(s.job, s.nonce, s.timeout, s.ttl, now)
			if !errors.Is(err, s.wantErr) || (err == nil) != (s.wantErr == nil) {
				t.Fatalf("step %d: Claim(%q,%q) err = %v, want %v", i, s.job, s.nonce, err, s.wantErr)
			}
			if replay != s.wantReplay {
				t.Fatalf("step %d: Claim replay = %v, want %v", i, replay, s.wantReplay)
			}
		case "renew":
			if err := m.Renew(s.job, now); !errors.Is(err, s.wantErr) || (err == nil) != (s.wantErr == nil) {
				t.Fatalf("step %d: Renew(%q) err = %v, want %v", i, s.job, err, s.wantErr)
			}
		case "release":
			if err := m.Release(s.job, now); !errors.Is(err, s.wantErr) || (err == nil) != (s.wantErr == nil) {
				t.Fatalf("step %d: Release(%q) err = %v, want %v", i, s.job, err, s.wantErr)
			}
		case "activity":
			m.Activity(now)
		case "drain":
			m.Drain(s.reason, now)
		case "tick":
			d := m.Tick(now)
			want := Decision{ExpiredJob: s.wantExpired, ExpiryReason: s.wantWhy, Drain: s.wantDrain, DrainReason: s.wantReason}
			if s.wantWake != nil {
				want.NextWake = at(*s.wantWake)
			}
			if d != want {
				t.Fatalf("step %d: Tick(t0+%v) = %+v\nwant %+v", i, s.at, d, want)
			}
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
		if got := m.State(); got != s.wantState {
			t.Fatalf("step %d (%s at t0+%v): state = %v, want %v", i, s.op, s.at, got, s.wantState)
		}
	}
	return m
}

func TestMachineSequences(t *testing.T) {
	const idle = 10 * time.Second
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{
			name: "deadline 1ns before does not drain, exactly at drains",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: 0, op: "tick", wantWake: wake(idle), wantState: Idle},
				{at: idle - ns, op: "tick", wantWake: wake(idle), wantState: Idle},
				{at: idle, op: "tick", wantDrain: true, wantReason: "idle-timeout", wantState: Draining},
				{at: idle + time.Hour, op: "tick", wantDrain: true, wantReason: "idle-timeout", wantState: Draining},
			},
		},
		{
			name: "activity pushes the deadline",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: 5 * time.Second, op: "activity", wantState: Idle},
				{at: idle, op: "tick", wantWake: wake(15 * time.Second), wantState: Idle},
				{at: 15*time.Second - ns, op: "tick", wantWake: wake(15 * time.Second), wantState: Idle},
				{at: 15 * time.Second, op: "tick", wantDrain: true, wantReason: "idle-timeout", wantState: Draining},
			},
		},
		{
			name: "activity never pulls the deadline earlier",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: 5 * time.Second, op: "activity", wantState: Idle},
				{at: 3 * time.Second, op: "activity", wantState: Idle},
				{at: 6 * time.Second, op: "tick", wantWake: wake(15 * time.Second), wantState: Idle},
			},
		},
		{
			name: "activity at the deadline does not revive the pod",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: idle, op: "activity", wantState: Draining},
				{at: idle + ns, op: "tick", wantDrain: true, wantReason: "idle-timeout", wantState: Draining},
			},
		},
		{
			name: "idle timeout 0 never drains",
			cfg:  Config{},
			steps: []step{
				{at: 0, op: "tick", wantState: Idle},
				{at: 1000 * time.Hour, op: "tick", wantState: Idle},
				{at: 1000 * time.Hour, op: "claim", job: "a", wantState: Busy},
				{at: 2000 * time.Hour, op: "release", job: "a", wantState: Idle},
				{at: 9000 * time.Hour, op: "tick", wantState: Idle},
			},
		},
		{
			name: "negative idle timeout behaves like 0",
			cfg:  Config{IdleTimeout: -time.Second, MaxJobs: -1},
			steps: []step{
				{at: time.Hour, op: "tick", wantState: Idle},
				{at: time.Hour, op: "claim", job: "a", wantState: Busy},
				{at: time.Hour, op: "release", job: "a", wantState: Idle},
			},
		},
		{
			name: "claim replay with the same id and nonce",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: time.Second, op: "claim", job: "a", nonce: "n1", timeout: time.Minute, wantState: Busy},
				{at: 2 * time.Second, op: "claim", job: "a", nonce: "n1", timeout: time.Hour, wantReplay: true, wantState: Busy},
				// The replay did not change the lease: the hard timeout is still t0+1s+1m.
				{at: 61 * time.Second, op: "tick", wantExpired: "a", wantWhy: "timeout", wantState: Busy},
			},
		},
		{
			name: "claim conflicts leave the state unchanged",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: time.Second, op: "claim", job: "a", nonce: "n1", wantState: Busy},
				{at: 2 * time.Second, op: "claim", job: "b", nonce: "n1", wantErr: ErrBusy, wantState: Busy},
				{at: 3 * time.Second, op: "claim", job: "a", nonce: "n2", wantErr: ErrBusy, wantState: Busy},
				{at: 4 * time.Second, op: "claim", job: "a", nonce: "", wantErr: ErrBusy, wantState: Busy},
				{at: time.Hour, op: "tick", wantState: Busy},
			},
		},
		{
			name: "replay needs a non-empty nonce",
			cfg:  Config{},
			steps: []step{
				{op: "claim", job: "a", wantState: Busy},
				{op: "claim", job: "a", wantErr: ErrBusy, wantState: Busy},
			},
		},
		{
			name: "claim with an empty job id",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: time.Second, op: "claim", job: "", nonce: "n", wantErr: ErrEmptyJobID, wantState: Idle},
				{at: 2 * time.Second, op: "tick", wantWake: wake(idle), wantState: Idle},
			},
		},
		{
			name: "claim exactly at the deadline is refused and drains",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: idle, op: "claim", job: "a", nonce: "n", wantErr: ErrDraining, wantState: Draining},
				{at: idle, op: "tick", wantDrain: true, wantReason: "idle-timeout", wantState: Draining},
				{at: idle, op: "release", job: "a", wantErr: ErrNoJob, wantState: Draining},
			},
		},
		{
			name: "claim 1ns before the deadline is accepted and the old deadline does not drain",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: idle - ns, op: "claim", job: "a", nonce: "n", wantState: Busy},
				{at: idle, op: "tick", wantState: Busy},
				{at: idle + time.Hour, op: "tick", wantState: Busy},
				{at: idle + time.Hour, op: "release", job: "a", wantState: Idle},
				{at: idle + time.Hour, op: "tick", wantWake: wake(2*idle + time.Hour), wantState: Idle},
			},
		},
		{
			name: "lease hard timeout",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: time.Second, op: "claim", job: "a", timeout: 30 * time.Second, wantState: Busy},
				{at: 2 * time.Second, op: "tick", wantWake: wake(31 * time.Second), wantState: Busy},
				{at: 31*time.Second - ns, op: "tick", wantWake: wake(31 * time.Second), wantState: Busy},
				{at: 31 * time.Second, op: "tick", wantExpired: "a", wantWhy: "timeout", wantState: Busy},
				{at: 32 * time.Second, op: "tick", wantExpired: "a", wantWhy: "timeout", wantState: Busy},
				{at: 32 * time.Second, op: "renew", job: "a", wantErr: ErrNoJob, wantState: Busy},
				{at: 33 * time.Second, op: "release", job: "a", wantState: Idle},
				{at: 33 * time.Second, op: "tick", wantWake: wake(43 * time.Second), wantState: Idle},
			},
		},
		{
			name: "lease ttl expiry, renew extends it",
			cfg:  Config{},
			steps: []step{
				{at: 0, op: "claim", job: "a", timeout: time.Minute, ttl: 5 * time.Second, wantState: Busy},
				{at: 4 * time.Second, op: "tick", wantWake: wake(5 * time.Second), wantState: Busy},
				{at: 4 * time.Second, op: "renew", job: "a", wantState: Busy},
				{at: 5 * time.Second, op: "tick", wantWake: wake(9 * time.Second), wantState: Busy},
				{at: 9*time.Second - ns, op: "tick", wantWake: wake(9 * time.Second), wantState: Busy},
				{at: 9 * time.Second, op: "tick", wantExpired: "a", wantWhy: "lease_ttl", wantState: Busy},
				{at: 9 * time.Second, op: "renew", job: "a", wantErr: ErrNoJob, wantState: Busy},
				{at: 10 * time.Second, op: "release", job: "a", wantState: Idle},
			},
		},
		{
			name: "renew never extends the hard timeout",
			cfg:  Config{},
			steps: []step{
				{at: 0, op: "claim", job: "a", timeout: 10 * time.Second, ttl: 5 * time.Second, wantState: Busy},
				{at: 4 * time.Second, op: "renew", job: "a", wantState: Busy},
				{at: 8 * time.Second, op: "renew", job: "a", wantState: Busy},
				{at: 8 * time.Second, op: "tick", wantWake: wake(10 * time.Second), wantState: Busy},
				{at: 10 * time.Second, op: "tick", wantExpired: "a", wantWhy: "timeout", wantState: Busy},
			},
		},
		{
			name: "no timeout and no ttl never expires",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: 0, op: "claim", job: "a", wantState: Busy},
				{at: 1000 * time.Hour, op: "tick", wantState: Busy},
				{at: 1000 * time.Hour, op: "renew", job: "a", wantState: Busy},
			},
		},
		{
			name: "renew and release errors",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: time.Second, op: "renew", job: "a", wantErr: ErrNoJob, wantState: Idle},
				{at: time.Second, op: "release", job: "a", wantErr: ErrNoJob, wantState: Idle},
				{at: time.Second, op: "release", job: "", wantErr: ErrNoJob, wantState: Idle},
				{at: 2 * time.Second, op: "claim", job: "a", wantState: Busy},
				{at: 3 * time.Second, op: "renew", job: "b", wantErr: ErrWrongJob, wantState: Busy},
				{at: 3 * time.Second, op: "renew", job: "", wantErr: ErrWrongJob, wantState: Busy},
				{at: 3 * time.Second, op: "release", job: "b", wantErr: ErrWrongJob, wantState: Busy},
				{at: 4 * time.Second, op: "release", job: "", wantState: Idle},
			},
		},
		{
			name: "release re-arms the deadline from the release time",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: 5 * time.Second, op: "claim", job: "a", wantState: Busy},
				{at: 100 * time.Second, op: "release", job: "a", wantState: Idle},
				{at: 110*time.Second - ns, op: "tick", wantWake: wake(110 * time.Second), wantState: Idle},
				{at: 110 * time.Second, op: "tick", wantDrain: true, wantReason: "idle-timeout", wantState: Draining},
			},
		},
		{
			name: "activity while busy does not arm anything",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: 1 * time.Second, op: "claim", job: "a", wantState: Busy},
				{at: 50 * time.Second, op: "activity", wantState: Busy},
				{at: 60 * time.Second, op: "release", job: "a", wantState: Idle},
				{at: 60 * time.Second, op: "tick", wantWake: wake(70 * time.Second), wantState: Idle},
			},
		},
		{
			name: "max jobs 1 drains on release",
			cfg:  Config{IdleTimeout: idle, MaxJobs: 1},
			steps: []step{
				{at: time.Second, op: "claim", job: "a", wantState: Busy},
				{at: 2 * time.Second, op: "release", job: "a", wantState: Draining},
				{at: 2 * time.Second, op: "tick", wantDrain: true, wantReason: "max-jobs", wantState: Draining},
				{at: 3 * time.Second, op: "claim", job: "b", wantErr: ErrDraining, wantState: Draining},
			},
		},
		{
			name: "max jobs 2",
			cfg:  Config{MaxJobs: 2},
			steps: []step{
				{op: "claim", job: "a", wantState: Busy},
				{op: "release", job: "a", wantState: Idle},
				{op: "claim", job: "b", wantState: Busy},
				{op: "release", job: "b", wantState: Draining},
				{op: "tick", wantDrain: true, wantReason: "max-jobs", wantState: Draining},
			},
		},
		{
			name: "drain is idempotent and keeps the first reason",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: time.Second, op: "drain", reason: "sigterm", wantState: Draining},
				{at: 2 * time.Second, op: "drain", reason: "other", wantState: Draining},
				{at: idle, op: "tick", wantDrain: true, wantReason: "sigterm", wantState: Draining},
				{at: idle, op: "claim", job: "a", wantErr: ErrDraining, wantState: Draining},
			},
		},
		{
			name: "drain with empty reason",
			cfg:  Config{},
			steps: []step{
				{op: "drain", wantState: Draining},
				{op: "tick", wantDrain: true, wantReason: "requested", wantState: Draining},
			},
		},
		{
			name: "drain after the deadline reports idle-timeout",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: idle, op: "drain", reason: "sigterm", wantState: Draining},
				{at: idle, op: "tick", wantDrain: true, wantReason: "idle-timeout", wantState: Draining},
			},
		},
		{
			name: "drain while busy keeps the lease until release",
			cfg:  Config{IdleTimeout: idle},
			steps: []step{
				{at: 0, op: "claim", job: "a", nonce: "n", timeout: time.Minute, wantState: Busy},
				{at: time.Second, op: "drain", reason: "sigterm", wantState: Draining},
				{at: 2 * time.Second, op: "tick", wantDrain: true, wantReason: "sigterm", wantWake: wake(time.Minute), wantState: Draining},
				{at: 2 * time.Second, op: "claim", job: "a", nonce: "n", wantErr: ErrDraining, wantState: Draining},
				{at: 3 * time.Second, op: "renew", job: "a", wantState: Draining},
				{at: time.Minute, op: "tick", wantExpired: "a", wantWhy: "timeout", wantDrain: true, wantReason: "sigterm", wantState: Draining},
				{at: time.Minute, op: "release", job: "a", wantState: Draining},
				{at: time.Minute, op: "tick", wantDrain: true, wantReason: "sigterm", wantState: Draining},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.cfg, tt.steps) })
	}
}

func TestReady(t *testing.T) {
	const idle, margin = 10 * time.Second, 2 * time.Second
	busy := func(m *Machine) { _, _ = m.Claim("a", "", 0, 0, t0) }
	drained := func(m *Machine) { m.Drain("sigterm", t0) }
	tests := []struct {
		name   string
		cfg    Config
		setup  func(*Machine)
		now    time.Duration
		margin time.Duration
		want   bool
	}{
		{name: "fresh", cfg: Config{IdleTimeout: idle}, now: 0, margin: margin, want: true},
		{name: "1ns before deadline-margin", cfg: Config{IdleTimeout: idle}, now: idle - margin - ns, margin: margin, want: true},
		{name: "at deadline-margin", cfg: Config{IdleTimeout: idle}, now: idle - margin, margin: margin, want: false},
		{name: "at deadline without margin", cfg: Config{IdleTimeout: idle}, now: idle, margin: 0, want: false},
		{name: "1ns before deadline without margin", cfg: Config{IdleTimeout: idle}, now: idle - ns, margin: 0, want: true},
		{name: "negative margin acts as 0", cfg: Config{IdleTimeout: idle}, now: idle, margin: -time.Hour, want: false},
		{name: "no idle timeout", cfg: Config{}, now: 1000 * time.Hour, margin: margin, want: true},
		{name: "busy", cfg: Config{IdleTimeout: idle}, setup: busy, now: time.Second, margin: margin, want: false},
		{name: "draining", cfg: Config{}, setup: drained, now: time.Second, margin: margin, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(tt.cfg, t0)
			if tt.setup != nil {
				tt.setup(m)
			}
			if got := m.Ready(at(tt.now), tt.margin); got != tt.want {
				t.Fatalf("Ready(t0+%v, %v) = %v, want %v", tt.now, tt.margin, got, tt.want)
			}
		})
	}
}

func TestReadyWithActivity(t *testing.T) {
	m := New(Config{IdleTimeout: 10 * time.Second}, t0)
	m.Activity(at(5 * time.Second))
	if !m.Ready(at(12*time.Second), 2*time.Second) {
		t.Fatal("Ready false after activity moved the deadline to t0+15s")
	}
	if m.Ready(at(13*time.Second), 2*time.Second) {
		t.Fatal("Ready true within the margin")
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Idle: "idle", Busy: "busy", Draining: "draining", State(7): "State(7)", State(-1): "State(-1)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestLease(t *testing.T) {
	m := New(Config{IdleTimeout: time.Minute}, t0)
	if l, ok := m.Lease(); ok || l != (Lease{}) {
		t.Fatalf("Lease() on a fresh machine = %+v, %v", l, ok)
	}
	if _, err := m.Claim("job-1", "nonce", time.Hour, 30*time.Second, at(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := m.Renew("job-1", at(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	// A renew with an earlier time (reordered heartbeat) does not move LastRenew back.
	if err := m.Renew("job-1", at(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := Lease{
		JobID: "job-1", Nonce: "nonce", Since: at(time.Second), Expires: at(time.Hour + time.Second),
		TTL: 30 * time.Second, LastRenew: at(20 * time.Second),
	}
	if l, ok := m.Lease(); !ok || l != want {
		t.Fatalf("Lease() = %+v, %v\nwant %+v", l, ok, want)
	}
	if replay, err := m.Claim("job-1", "nonce", time.Minute, 0, at(21*time.Second)); !replay || err != nil {
		t.Fatalf("replay = %v, %v", replay, err)
	}
	if l, _ := m.Lease(); l != want {
		t.Fatalf("replay changed the lease: %+v", l)
	}
	if err := m.Release("job-1", at(22*time.Second)); err != nil {
		t.Fatal(err)
	}
	if l, ok := m.Lease(); ok || l != (Lease{}) {
		t.Fatalf("Lease() after release = %+v, %v", l, ok)
	}
}

func TestRenewExpiredError(t *testing.T) {
	m := New(Config{}, t0)
	if _, err := m.Claim("a", "", 0, time.Second, t0); err != nil {
		t.Fatal(err)
	}
	err := m.Renew("a", at(time.Second))
	if !errors.Is(err, ErrNoJob) {
		t.Fatalf("Renew after ttl = %v, want ErrNoJob", err)
	}
	if got, want := err.Error(), "no job holds the lease: lease expired (lease_ttl)"; got != want {
		t.Fatalf("error text = %q, want %q", got, want)
	}
}

func TestSnapshot(t *testing.T) {
	const idle = 10 * time.Second
	m := New(Config{IdleTimeout: idle, MaxJobs: 2}, t0)

	s := m.Snapshot(at(time.Second))
	dl := at(idle)
	want := Status{State: "idle", IdleSince: t0, IdleDeadline: &dl}
	checkStatus(t, "fresh", s, want)

	m.Activity(at(3 * time.Second))
	dl = at(13 * time.Second)
	want = Status{State: "idle", IdleSince: at(3 * time.Second), IdleDeadline: &dl}
	checkStatus(t, "after activity", m.Snapshot(at(4*time.Second)), want)

	if _, err := m.Claim("a", "", 0, 0, at(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	want = Status{State: "busy", JobID: "a"} // no stale idle_since

	checkStatus(t, "busy", m.Snapshot(at(100*time.Second)), want)

	if err := m.Release("a", at(100*time.Second)); err != nil {
		t.Fatal(err)
	}
	dl = at(110 * time.Second)
	want = Status{State: "idle", JobsRun: 1, IdleSince: at(100 * time.Second), IdleDeadline: &dl}
	checkStatus(t, "released", m.Snapshot(at(100*time.Second)), want)

	// Snapshot applies a passed deadline.
	want = Status{State: "draining", JobsRun: 1, DrainReason: "idle-timeout"}
	checkStatus(t, "past deadline", m.Snapshot(at(110*time.Second)), want)
	if m.State() != Draining {
		t.Fatalf("state after Snapshot past the deadline = %v", m.State())
	}

	b, err := json.Marshal(m.Snapshot(at(111 * time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"state":"draining","jobs_run":1,"drain_reason":"idle-timeout"}`; got != want {
		t.Fatalf("JSON = %s\nwant %s", got, want)
	}

	m2 := New(Config{}, t0)
	b, err = json.Marshal(m2.Snapshot(t0))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"state":"idle","jobs_run":0,"idle_since":"2030-01-02T03:04:05Z"}`; got != want {
		t.Fatalf("JSON without idle timeout = %s\nwant %s", got, want)
	}
}

func checkStatus(t *testing.T, name string, got, want Status) {
	t.Helper()
	gd, wd := got.IdleDeadline, want.IdleDeadline
	got.IdleDeadline, want.IdleDeadline = nil, nil
	if got != want || (gd == nil) != (wd == nil) || (gd != nil && !gd.Equal(*wd)) {
		t.Fatalf("%s: Snapshot = %+v (deadline %v)\nwant %+v (deadline %v)", name, got, gd, want, wd)
	}
}

func TestAbortDoesNotCountOrDrain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := New(Config{IdleTimeout: time.Minute, MaxJobs: 1}, t0)
	if _, err := m.Claim("j1", "", time.Hour, 0, t0); err != nil {
		t.Fatal(err)
	}
	if err := m.Abort("other", t0); err != ErrWrongJob {
		t.Fatalf("abort of another job: %v", err)
	}
	if err := m.Abort("j1", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if m.State() != Idle || m.Snapshot(t0.Add(time.Second)).JobsRun != 0 {
		t.Fatalf("after abort: state %v, snapshot %+v", m.State(), m.Snapshot(t0.Add(time.Second)))
	}
	if err := m.Abort("j1", t0); err != ErrNoJob {
		t.Fatalf("second abort: %v", err)
	}
}
