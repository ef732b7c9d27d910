package lease

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// TestMachineProperties runs many random sequences of Claim, Renew, Release,
// Activity and Tick at random, non-decreasing times (with a bias towards
// landing exactly on, or 1 ns before, the idle deadline or the lease expiry)
// and checks the invariants after every call.
func TestMachineProperties(t *testing.T) {
	const sequences, steps = 2000, 200
	var c propertyCounts
	for seq := range sequences {
		seed := uint64(seq)
		rng := rand.New(rand.NewPCG(seed, 0x1d1e))
		if !runPropertySequence(t, rng, steps, &c) {
			t.Fatalf("sequence failed; reproduce with seed %d", seed)
		}
	}
	// The generator must actually reach the edges it is meant to test.
	t.Logf("%+v", c)
	if c.refusedAtDeadline == 0 || c.acceptedJustBefore == 0 || c.replays == 0 || c.expiries == 0 || c.idleDrains == 0 || c.maxJobDrains == 0 {
		t.Fatalf("generator missed a case: %+v", c)
	}
}

// propertyCounts records how often the random sequences hit the edge cases.
type propertyCounts struct {
	refusedAtDeadline, acceptedJustBefore, replays, expiries, idleDrains, maxJobDrains int
}

func runPropertySequence(t *testing.T, rng *rand.Rand, steps int, c *propertyCounts) bool {
	t.Helper()
	cfg := Config{}
	if rng.IntN(4) != 0 {
		cfg.IdleTimeout = time.Duration(1+rng.IntN(10)) * time.Second
	}
	if rng.IntN(3) == 0 {
		cfg.MaxJobs = 1 + rng.IntN(4)
	}
	now := t0
	m := New(cfg, now)

	var (
		heldByAcceptedClaim string // job whose claim returned nil (not a replay), until released
		lastNonce           string
		released            int
		log                 []string
	)
	fail := func(format string, args ...any) bool {
		for _, l := range log {
			t.Log(l)
		}
		t.Errorf("cfg %+v: "+format, append([]any{cfg}, args...)...)
		return false
	}

	for i := range steps {
		// Advance time: usually a random step, sometimes exactly to (or 1 ns
		// before) the next interesting instant, sometimes not at all.
		switch r := rng.IntN(10); {
		case r < 2:
			if next := m.Tick(now).NextWake; !next.IsZero() {
				now = next
				if rng.IntN(2) == 0 {
					now = now.Add(-ns)
				}
			}
		case r < 3:
			// same instant
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
		}

		prev := m.State()
		prevArmed, prevDeadline := m.armed, m.deadline
		prevLease, prevHeld := m.Lease()
		deadlinePassed := prev == Idle && prevArmed && !now.Before(prevDeadline)

		var op string
		switch rng.IntN(6) {
		case 0, 1: // Claim
			job := "job" + strconv.Itoa(rng.IntN(3))
			nonce := ""
			if rng.IntN(3) != 0 {
				nonce = "n" + strconv.Itoa(rng.IntN(2))
			}
			if prevHeld && rng.IntN(2) == 0 { // an exact retry
				job, nonce = prevLease.JobID, lastNonce
			}
			timeout := time.Duration(rng.IntN(20)) * time.Second
			ttl := time.Duration(rng.IntN(6)) * time.Second
			replay, err := m.Claim(job, nonce, timeout, ttl, now)
			op = "claim " + job + "/" + nonce
			after := m.State()
			switch {
			case err != nil:
				if replay {
					return fail("step %d: replay=true with error %v", i, err)
				}
				if after != prev && !(deadlinePassed && after == Draining && m.drainReason == ReasonIdleTimeout) {
					return fail("step %d: refused claim (%v) moved %v → %v (deadline passed: %v)", i, err, prev, after, deadlinePassed)
				}
				if deadlinePassed {
					c.refusedAtDeadline++
				}
				if deadlinePassed && !errors.Is(err, ErrDraining) {
					return fail("step %d: claim after the deadline = %v, want ErrDraining", i, err)
				}
				if l, held := m.Lease(); held != prevHeld || l != prevLease {
					return fail("step %d: refused claim changed the lease", i)
				}
			case replay:
				if prev != Busy || job != prevLease.JobID || nonce == "" || nonce != prevLease.Nonce {
					return fail("step %d: unexpected replay in %v of %+v", i, prev, prevLease)
				}
				c.replays++
				if l, _ := m.Lease(); l != prevLease || after != Busy {
					return fail("step %d: replay changed the machine", i)
				}
			default:
				if prev != Idle || deadlinePassed {
					return fail("step %d: claim accepted in %v (deadline passed: %v)", i, prev, deadlinePassed)
				}
				if after != Busy {
					return fail("step %d: accepted claim left state %v", i, after)
				}
				heldByAcceptedClaim, lastNonce = job, nonce
				if prevArmed && prevDeadline.Sub(now) == ns {
					c.acceptedJustBefore++
				}
			}
		case 2: // Release, sometimes of the wrong job or of "" (whatever is held)
			job := prevLease.JobID
			switch rng.IntN(4) {
			case 0:
				job = ""
			case 1:
				job = "job" + strconv.Itoa(rng.IntN(3))
			}
			err := m.Release(job, now)
			op = "release " + job
			switch {
			case !prevHeld:
				if !errors.Is(err, ErrNoJob) {
					return fail("step %d: release without lease = %v", i, err)
				}
			case job != "" && job != prevLease.JobID:
				if !errors.Is(err, ErrWrongJob) || m.State() != prev {
					return fail("step %d: release of the wrong job = %v, state %v", i, err, m.State())
				}
			case err != nil:
				return fail("step %d: release = %v", i, err)
			default:
				released++
				heldByAcceptedClaim = ""
				maxed := cfg.MaxJobs > 0 && released >= cfg.MaxJobs
				if maxed && prev == Busy {
					c.maxJobDrains++
				}
				switch {
				case maxed && (m.State() != Draining || m.drainReason != ReasonMaxJobs):
					return fail("step %d: release of job %d of %d: state %v reason %q", i, released, cfg.MaxJobs, m.State(), m.drainReason)
				case !maxed && m.State() != Idle:
					return fail("step %d: release left state %v", i, m.State())
				case !maxed && cfg.IdleTimeout > 0 && !m.deadline.Equal(now.Add(cfg.IdleTimeout)):
					return fail("step %d: deadline %v not re-armed from release time %v", i, m.deadline, now)
				}
			}
		case 3: // Renew
			job := prevLease.JobID
			if rng.IntN(4) == 0 {
				job = "job" + strconv.Itoa(rng.IntN(3))
			}
			err := m.Renew(job, now)
			op = "renew " + job
			if !prevHeld && !errors.Is(err, ErrNoJob) {
				return fail("step %d: renew without lease = %v", i, err)
			}
			if m.State() != prev && !deadlinePassed {
				return fail("step %d: renew changed state %v → %v", i, prev, m.State())
			}
		case 4: // Activity
			m.Activity(now)
			op = "activity"
			if m.State() != prev && !(deadlinePassed && m.State() == Draining) {
				return fail("step %d: activity changed state %v → %v", i, prev, m.State())
			}
			if m.State() == Idle && m.armed && m.deadline.Before(now.Add(cfg.IdleTimeout)) {
				return fail("step %d: activity left the deadline at %v", i, m.deadline)
			}
		case 5: // Tick; the caller ends and releases an expired job now and then
			d := m.Tick(now)
			op = "tick"
			if m.State() == Idle && m.armed && d.NextWake != m.deadline {
				return fail("step %d: Idle NextWake %v, deadline %v", i, d.NextWake, m.deadline)
			}
			if d.Drain != (m.State() == Draining) {
				return fail("step %d: Drain=%v in state %v", i, d.Drain, m.State())
			}
			if d.Drain && heldByAcceptedClaim != "" {
				return fail("step %d: drain while %q holds the lease", i, heldByAcceptedClaim)
			}
			if !d.NextWake.IsZero() && !d.NextWake.After(now) {
				return fail("step %d: NextWake %v not after now %v", i, d.NextWake, now)
			}
			if prev != Draining && d.Drain {
				switch d.DrainReason {
				case ReasonIdleTimeout:
					c.idleDrains++
				default:
					return fail("step %d: Tick drained with reason %q", i, d.DrainReason)
				}
			}
			if d.ExpiredJob != "" {
				c.expiries++
				at, why := prevLease.expiry()
				if d.ExpiredJob != prevLease.JobID || at.After(now) || why != d.ExpiryReason {
					return fail("step %d: bogus expiry %+v for %+v", i, d, prevLease)
				}
				if !d.NextWake.IsZero() {
					return fail("step %d: NextWake with an expired job", i)
				}
				if rng.IntN(2) == 0 {
					if err := m.Release(d.ExpiredJob, now); err != nil {
						return fail("step %d: release of expired job = %v", i, err)
					}
					released++
					heldByAcceptedClaim = ""
				}
			}
		}
		log = append(log, "t0+"+now.Sub(t0).String()+" "+op+" → "+m.State().String())

		// Invariants that hold after every call.
		st := m.State()
		_, held := m.Lease()
		switch {
		case st != Idle && st != Busy && st != Draining:
			return fail("step %d: invalid state %v", i, st)
		case prev == Draining && st != Draining:
			return fail("step %d: left Draining for %v", i, st)
		case st == Busy && !held, st == Idle && held:
			return fail("step %d: state %v with lease held=%v", i, st, held)
		case st == Draining && held && heldByAcceptedClaim == "":
			return fail("step %d: Draining holds a lease nobody claimed", i)
		case (st == Idle && cfg.IdleTimeout > 0) != m.armed:
			return fail("step %d: armed=%v in %v", i, m.armed, st)
		case heldByAcceptedClaim != "" && st != Busy:
			return fail("step %d: %q holds the lease but state is %v", i, heldByAcceptedClaim, st)
		case m.jobsRun != released:
			return fail("step %d: JobsRun %d, released %d", i, m.jobsRun, released)
		case m.Ready(now, 0) && (st != Idle || (m.armed && !now.Before(m.deadline))):
			return fail("step %d: Ready in %v past the deadline", i, st)
		}
	}
	return true
}
