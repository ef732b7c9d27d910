package sizing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cases reported against GitLab Runner's autoscaler that issue 28 lists:
// each test's input is the reporter's configuration (in the annotation's
// spelling) and its assertion is what the reporter expected.

// poolSim is one pool under Decide, a minute at a time. A pod the decision
// asks for is Ready before the next minute (the pod start is below a
// minute), and a claim takes an idle pod if there is one, else runs cold.
type poolSim struct {
	policy Policy
	idle   int
	claims []time.Time
	colds  []time.Time
	busy   int
}

// claim is a job arriving at now: warm when an idle pod is there.
func (s *poolSim) claim(now time.Time) (warm bool) {
	if s.idle > 0 {
		s.idle--
		s.claims = append(s.claims, now)
		return true
	}
	s.colds = append(s.colds, now)
	return false
}

// step decides at now and applies the decision to the pool's size.
func (s *poolSim) step(now time.Time) Decision {
	d := Decide(s.policy, Observation{Idle: s.idle, Busy: s.busy, Claims: s.claims, ColdStarts: s.colds, PodStart: 20 * time.Second}, now)
	s.idle = d.Idle
	return d
}

// gitlab-runner#37673: idle_count = 1, idle_time = "20m". After a job both
// instances stayed; after idle_time one was destroyed and another created at
// once, and from then on two idle were kept instead of one. Expected: one idle
// pod, and no remove-then-create. A pool here is its replicas: the decision
// is a count, so "destroy one, create another" could only show as the count
// dropping and rising again; it must stay at 1 once it is there. (warmpod
// already trims the second idle pod at the job's end: one claim asks for one
// pod, not two.)
func TestReported37673IdleCountOneKeepsOne(t *testing.T) {
	s := &poolSim{policy: mustParse(t, "- idle_count: 1\n  idle_time: 20m")}
	t0 := at(2, 9, 0)
	assert.Equal(t, 1, s.step(t0).Idle, "the runner starts one idle instance")
	require.True(t, s.claim(t0.Add(time.Minute)), "the job takes the idle pod")
	s.busy = 1
	for m := 2; m < 6; m++ {
		assert.Equal(t, 1, s.step(t0.Add(time.Duration(m)*time.Minute)).Idle, "a spare while the job runs, minute %d", m)
	}
	// The job ends: the reporter had two idle instances here.
	s.busy, s.idle = 0, 2
	var sizes []int
	for m := 6; m <= 90; m++ {
		sizes = append(sizes, s.step(t0.Add(time.Duration(m)*time.Minute)).Idle)
	}
	for i, n := range sizes {
		assert.Equal(t, 1, n, "minute %d after the job: one idle pod, not %d", i, n)
	}
	d := s.step(t0.Add(21 * time.Minute))
	assert.Equal(t, ReasonPeriod, d.Reason, d.Message)
}

// gitlab-runner#37643: a work-hours policy (idle_count 5) and a catch-all with
// idle_count = 0, idle_time = "3m0s"; a 5-job parallel pipeline outside work
// hours. The instance never went away. Expected: "After 3 minutes the
// instance is shutdown", with both policies and with the second alone.
func TestReported37643IdleCountZeroScalesToZero(t *testing.T) {
	both := `
- periods: ["* 7-21 * * MON-FRI"]
  idle_count: 5
  idle_time: 30m0s
  scale_factor: 0.0
  scale_factor_limit: 0
- idle_count: 0
  idle_time: 3m0s
  scale_factor: 0.0
  scale_factor_limit: 0
`
	// The reporter's catch-all comes last, so by GitLab's own rule it wins at
	// any time; written first, the work-hours period applies on weekdays.
	for _, tc := range []struct {
		name, policy string
		t0           time.Time
	}{
		{"both policies, in the reporter's order", both, at(2, 10, 0)},
		{"second policy alone", "- idle_count: 0\n  idle_time: 3m0s\n  scale_factor: 0.0\n  scale_factor_limit: 0", at(2, 10, 0)},
		{"work hours written last, on a Saturday", workHoursLast, at(7, 10, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &poolSim{policy: mustParse(t, tc.policy)}
			assert.Equal(t, 0, s.step(tc.t0.Add(-time.Minute)).Idle)
			for range 5 { // parallel: 5
				s.claim(tc.t0)
			}
			assert.Equal(t, 5, s.step(tc.t0.Add(time.Minute)).Idle, "the burst is met while it is recent")
			d := s.step(tc.t0.Add(3 * time.Minute))
			assert.Equal(t, 0, d.Idle, "3 minutes after the last job: zero; %s", d.Message)
			assert.Equal(t, ReasonIdleTime, d.Reason)
			for m := 4; m < 120; m++ {
				require.Equal(t, 0, s.step(tc.t0.Add(time.Duration(m)*time.Minute)).Idle, "minute %d: stays at zero", m)
			}
		})
	}
	weekday := &poolSim{policy: mustParse(t, workHoursLast)}
	assert.Equal(t, 5, weekday.step(at(2, 10, 0)).Idle, "work hours with the work-hours period last")
}

// workHoursLast is the reporter's two policies with the catch-all first.
const workHoursLast = `
- idle_count: 0
  idle_time: 3m0s
- periods: ["* 7-21 * * MON-FRI"]
  idle_count: 5
  idle_time: 30m0s
`

// gitlab-runner#4863: a pipeline of 30+ parallel jobs waited while machines
// came up 5 a minute: the autoscaler followed IdleCount, not the queue.
// Expected: machines for the jobs in the queue, when there are more jobs than
// IdleCount. Here 30 claims within 20 s (one pod start) ask for 30 pods in
// one decision, and the next such pipeline finds them all warm.
func TestReported4863BurstScalesAtItsRate(t *testing.T) {
	s := &poolSim{policy: mustParse(t, "- idle_count: 5\n  idle_time: 30m")}
	t0 := at(2, 10, 0)
	require.Equal(t, 5, s.step(t0.Add(-time.Minute)).Idle)
	warm := 0
	for i := range 30 {
		if s.claim(t0.Add(time.Duration(i) * 600 * time.Millisecond)) {
			warm++
		}
	}
	assert.Equal(t, 5, warm, "the first pipeline: only IdleCount warm")
	d := s.step(t0.Add(30 * time.Second))
	assert.Equal(t, 30, d.Idle, "one step to the burst's size, not +5: %s", d.Message)
	assert.Equal(t, ReasonDemand, d.Reason)

	t1 := t0.Add(10 * time.Minute)
	s.step(t1.Add(-time.Minute))
	warm = 0
	for i := range 30 {
		if s.claim(t1.Add(time.Duration(i) * 600 * time.Millisecond)) {
			warm++
		}
	}
	assert.Equal(t, 30, warm, "the next pipeline is all warm")

	limited := Decide(mustParse(t, "- idle_count: 5\n  idle_time: 30m\n  max_growth_rate: 10"),
		Observation{Idle: 0, ColdStarts: times(t0, 30, 600*time.Millisecond), PodStart: 20 * time.Second}, t0.Add(30*time.Second))
	assert.Equal(t, 10, limited.Idle, "a growth limit, when one is set, is the only step")
}

// gitlab#552226: a work-hours policy and a weekend policy; a job at 3 AM on
// a weekday (outside both) got an instance that was terminated mid-job. (The
// report's two periods are shown in its shape: work hours on weekdays, the
// weekend with a short idle_time.) Expected: a busy instance is never
// terminated. Decide's figure counts idle pods only; the controller applies
// it as the Deployment's replicas, and a claimed pod has left the ReplicaSet,
// so a scale-down can only remove idle or starting pods. The test checks the
// half that is Decide's: no busy pod is ever in the count it shrinks (the
// decision is the same with and without the busy pod), and busy pods can only
// raise it (scale_factor).
func TestReported552226BusyPodIsNeverCounted(t *testing.T) {
	policy := `
- periods: ["* 7-19 * * mon-fri"]
  idle_count: 1
  idle_time: 30m
- periods: ["* * * * sat,sun"]
  idle_count: 0
  idle_time: 1m
`
	p := mustParse(t, policy)
	for _, t0 := range []time.Time{at(3, 3, 0), at(7, 3, 0)} { // Tuesday and Saturday, 3 AM
		cold := []time.Time{t0}
		for m := 0; m <= 60; m++ {
			now := t0.Add(time.Duration(m) * time.Minute)
			idle := Observation{ColdStarts: cold, PodStart: 20 * time.Second}
			busy := idle
			busy.Busy = 1
			di, db := Decide(p, idle, now), Decide(p, busy, now)
			require.Equal(t, di, db, "%s: the job's pod changes nothing", now)
		}
		d := Decide(p, Observation{Busy: 1, Idle: 1, ColdStarts: cold}, t0.Add(40*time.Minute))
		assert.Equal(t, 0, d.Idle, "the pool scales to zero while the job runs: %s", d.Message)
	}
	scaled := mustParse(t, "- idle_count: 0\n  scale_factor: 0.5")
	prev := 0
	for b := range 20 {
		n := Decide(scaled, Observation{Busy: b}, at(3, 3, 0)).Idle
		require.GreaterOrEqual(t, n, prev, "busy %d: more busy pods never shrink the pool", b)
		prev = n
	}
}

// gitlab-runner#1423: IdleCount = 0, IdleTime = 1800 (seconds), limit 2: the
// machine was torn down right after its job although more jobs were queued.
// Expected: keep it for IdleTime after the job. Here a job asks for a pod;
// the next jobs, 3 and 10 minutes later, find a warm one; 30 minutes after
// the last one the pool is back to zero.
func TestReported1423RecentDemandKeepsAPod(t *testing.T) {
	s := &poolSim{policy: mustParse(t, "- idle_count: 0\n  idle_time: 1800s\n  max: 2")}
	t0 := at(2, 14, 0)
	assert.False(t, s.claim(t0), "the first job of the day is cold")
	for m := 1; m <= 3; m++ {
		assert.Equal(t, 1, s.step(t0.Add(time.Duration(m)*time.Minute)).Idle, "minute %d: a pod is kept", m)
	}
	assert.True(t, s.claim(t0.Add(3*time.Minute+time.Second)), "the queued job finds a warm pod")
	for m := 4; m <= 10; m++ {
		s.step(t0.Add(time.Duration(m) * time.Minute))
	}
	assert.True(t, s.claim(t0.Add(10*time.Minute+time.Second)), "and the next one too")
	last := t0.Add(10*time.Minute + time.Second)
	assert.Equal(t, 1, s.step(last.Add(29*time.Minute)).Idle, "kept within IdleTime")
	d := s.step(last.Add(30 * time.Minute))
	assert.Equal(t, 0, d.Idle, "IdleTime after the last job: %s", d.Message)
	assert.Equal(t, ReasonIdleTime, d.Reason)
}
