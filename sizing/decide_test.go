package sizing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// times returns n times, the first at t, each step after the previous.
func times(t time.Time, n int, step time.Duration) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = t.Add(time.Duration(i) * step)
	}
	return out
}

// TestDecide: one row per rule of Decide.
func TestDecide(t *testing.T) {
	now := at(2, 10, 0)
	for _, tc := range []struct {
		name   string
		policy string
		obs    Observation
		idle   int
		reason Reason
		terms  Terms
	}{
		{
			name: "idle_count alone", policy: "- idle_count: 3",
			obs: Observation{Idle: 1}, idle: 3, reason: ReasonPeriod, terms: Terms{IdleCount: 3},
		},
		{
			name: "no period matches: default idle_count 0", policy: `- periods: ["* 20-21 * * *"]` + "\n  idle_count: 4",
			obs: Observation{}, idle: 0, reason: ReasonPeriod,
		},
		{
			name: "scale_factor over busy pods, rounded up", policy: "- idle_count: 1\n  scale_factor: 0.5",
			obs: Observation{Busy: 5}, idle: 3, reason: ReasonScaleFactor, terms: Terms{IdleCount: 1, Scale: 3},
		},
		{
			name: "scale_factor_limit caps the scale term", policy: "- idle_count: 1\n  scale_factor: 2\n  scale_factor_limit: 4",
			obs: Observation{Busy: 10}, idle: 4, reason: ReasonScaleFactor, terms: Terms{IdleCount: 1, Scale: 4},
		},
		{
			name: "scale_factor_limit below idle_count: idle_count wins", policy: "- idle_count: 5\n  scale_factor: 2\n  scale_factor_limit: 4",
			obs: Observation{Busy: 10}, idle: 5, reason: ReasonPeriod, terms: Terms{IdleCount: 5, Scale: 4},
		},
		{
			name: "demand: claims within one pod start", policy: "- idle_count: 1\n  idle_time: 10m",
			obs:  Observation{PodStart: 20 * time.Second, Claims: times(now.Add(-15*time.Second), 6, 2*time.Second)},
			idle: 6, reason: ReasonDemand, terms: Terms{IdleCount: 1, Demand: 6},
		},
		{
			name: "demand counts cold fallbacks with warm claims", policy: "- idle_count: 0\n  idle_time: 10m",
			obs: Observation{
				PodStart: 20 * time.Second, Claims: times(now.Add(-10*time.Second), 2, time.Second),
				ColdStarts: times(now.Add(-5*time.Second), 3, time.Second),
			},
			idle: 5, reason: ReasonDemand, terms: Terms{Demand: 5},
		},
		{
			name: "demand: claims spread wider than a pod start count apart", policy: "- idle_count: 0\n  idle_time: 10m",
			obs:  Observation{PodStart: 10 * time.Second, Claims: times(now.Add(-5*time.Minute), 10, 30*time.Second)},
			idle: 1, reason: ReasonDemand, terms: Terms{Demand: 1},
		},
		{
			name: "demand: the peak of the last idle_time is held", policy: "- idle_count: 0\n  idle_time: 10m",
			obs:  Observation{PodStart: 10 * time.Second, Claims: times(now.Add(-9*time.Minute), 7, time.Second)},
			idle: 7, reason: ReasonDemand, terms: Terms{Demand: 7},
		},
		{
			name: "demand: claims idle_time old are forgotten", policy: "- idle_count: 0\n  idle_time: 10m",
			obs:  Observation{PodStart: 10 * time.Second, Claims: times(now.Add(-10*time.Minute-2*time.Second), 4, time.Second)},
			idle: 1, reason: ReasonDemand, terms: Terms{Demand: 1},
		},
		{
			name: "demand: same-instant claims all count", policy: "- idle_count: 0\n  idle_time: 1m",
			obs:  Observation{PodStart: 10 * time.Second, Claims: times(now.Add(-time.Second), 4, 0)},
			idle: 4, reason: ReasonDemand, terms: Terms{Demand: 4},
		},
		{
			name: "demand: a claim from a clock ahead counts as now", policy: "- idle_count: 0\n  idle_time: 1m",
			obs:  Observation{PodStart: 10 * time.Second, Claims: []time.Time{now.Add(3 * time.Second)}},
			idle: 1, reason: ReasonDemand, terms: Terms{Demand: 1},
		},
		{
			name: "after idle_time without a claim: back to idle_count", policy: "- idle_count: 1\n  idle_time: 10m",
			obs:  Observation{Idle: 6, PodStart: 10 * time.Second, Claims: times(now.Add(-11*time.Minute), 6, time.Second)},
			idle: 1, reason: ReasonIdleTime, terms: Terms{IdleCount: 1},
		},
		{
			name: "unmeasured pod start: DefaultPodStart", policy: "- idle_count: 0\n  idle_time: 1m",
			obs:  Observation{Claims: times(now.Add(-DefaultPodStart+time.Second), 3, 0)},
			idle: 3, reason: ReasonDemand, terms: Terms{Demand: 3},
		},
		{
			name: "idle_time 0: demand keeps nothing", policy: "- idle_count: 1\n  idle_time: 0s",
			obs:  Observation{PodStart: 10 * time.Second, Claims: times(now.Add(-time.Second), 5, 0)},
			idle: 1, reason: ReasonPeriod, terms: Terms{IdleCount: 1},
		},
		{
			name: "min raises", policy: "- idle_count: 0\n  min: 2",
			obs: Observation{}, idle: 2, reason: ReasonMin,
		},
		{
			name: "max cuts demand", policy: "- idle_count: 1\n  max: 3\n  idle_time: 5m",
			obs:  Observation{PodStart: time.Minute, Claims: times(now.Add(-30*time.Second), 10, time.Second)},
			idle: 3, reason: ReasonMax, terms: Terms{IdleCount: 1, Demand: 10},
		},
		{
			name: "max 0 keeps the pool empty", policy: "- idle_count: 0\n  max: 0\n  scale_factor: 1",
			obs: Observation{Busy: 4}, idle: 0, reason: ReasonMax, terms: Terms{Scale: 4},
		},
		{
			name: "growth limit from the current size", policy: "- idle_count: 20\n  max_growth_rate: 5",
			obs: Observation{Idle: 2, Starting: 1}, idle: 8, reason: ReasonGrowthLimit, terms: Terms{IdleCount: 20},
		},
		{
			name: "growth limit counts what the last minute added", policy: "- idle_count: 20\n  max_growth_rate: 5",
			obs: Observation{Idle: 2, Starting: 6, ScaledUpLastMinute: 3}, idle: 10, reason: ReasonGrowthLimit, terms: Terms{IdleCount: 20},
		},
		{
			name: "growth limit spent: stay", policy: "- idle_count: 20\n  max_growth_rate: 5",
			obs: Observation{Idle: 4, ScaledUpLastMinute: 9}, idle: 4, reason: ReasonGrowthLimit, terms: Terms{IdleCount: 20},
		},
		{
			name: "growth limit does not slow a shrink", policy: "- idle_count: 2\n  max_growth_rate: 1",
			obs: Observation{Idle: 9}, idle: 2, reason: ReasonPeriod, terms: Terms{IdleCount: 2},
		},
		{
			name: "demand: a slow node's pod start is capped", policy: "- idle_count: 0\n  idle_time: 30m",
			obs:  Observation{PodStart: 20 * time.Minute, Claims: times(now.Add(-10*time.Minute), 10, time.Minute)},
			idle: 2, reason: ReasonDemand, terms: Terms{Demand: 2},
		},
		{
			name: "profile: a recurring burst ahead", policy: "- idle_count: 1\n  idle_time: 5m",
			obs:  Observation{Forecast: Forecast{Pods: 30, Why: "pre-warming 30 for Mon 11:00 UTC"}},
			idle: 30, reason: ReasonProfile, terms: Terms{IdleCount: 1, Profile: 30},
		},
		{
			name: "profile below the demand: demand", policy: "- idle_count: 0\n  idle_time: 10m",
			obs: Observation{PodStart: 20 * time.Second, Claims: times(now.Add(-15*time.Second), 6, 2*time.Second),
				Forecast: Forecast{Pods: 4}},
			idle: 6, reason: ReasonDemand, terms: Terms{Demand: 6, Profile: 4},
		},
		{
			name: "a period's max overrides the profile", policy: "- idle_count: 0\n  idle_time: 5m\n  max: 5",
			obs: Observation{Forecast: Forecast{Pods: 30}}, idle: 5, reason: ReasonMax, terms: Terms{Profile: 30},
		},
		{
			name: "idle_time 0: neither the profile nor a keep-alive keeps a pod", policy: "- idle_count: 0\n  idle_time: 0s",
			obs:  Observation{PodStart: 3 * time.Second, Claims: times(now.Add(-70*time.Minute), 5, 15*time.Minute), Forecast: Forecast{Pods: 30}},
			idle: 0, reason: ReasonPeriod,
		},
		{
			name: "keep-alive: a trickle keeps one pod between its jobs", policy: "- idle_count: 0\n  idle_time: 5m",
			obs:  Observation{PodStart: 3 * time.Second, Claims: times(now.Add(-70*time.Minute), 5, 15*time.Minute)},
			idle: 1, reason: ReasonKeepAlive, terms: Terms{KeepAlive: 1},
		},
		{
			name: "keep-alive ends after the 95th percentile gap", policy: "- idle_count: 0\n  idle_time: 5m",
			obs:  Observation{PodStart: 3 * time.Second, Claims: times(now.Add(-95*time.Minute), 5, 15*time.Minute)},
			idle: 0, reason: ReasonPeriod,
		},
		{
			name: "keep-alive needs three gaps longer than a pod start", policy: "- idle_count: 0\n  idle_time: 5m",
			obs:  Observation{PodStart: 3 * time.Second, Claims: append(times(now.Add(-20*time.Minute), 2, 10*time.Minute), times(now.Add(-time.Minute), 5, time.Second)...)},
			idle: 3, reason: ReasonDemand, terms: Terms{Demand: 3},
		},
		{
			name: "keep-alive is capped at an hour", policy: "- idle_count: 0\n  idle_time: 5m",
			obs:  Observation{PodStart: 3 * time.Second, Claims: times(now.Add(-8*time.Hour-61*time.Minute), 5, 2*time.Hour)},
			idle: 0, reason: ReasonPeriod,
		},
		{
			name: "negative observations read as zero", policy: "- idle_count: 1\n  scale_factor: 1",
			obs: Observation{Idle: -3, Starting: -1, Busy: -7, Forecast: Forecast{Pods: -2}}, idle: 1, reason: ReasonPeriod, terms: Terms{IdleCount: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(mustParse(t, tc.policy), tc.obs, now)
			assert.Equal(t, tc.idle, d.Idle, d.Message)
			assert.Equal(t, tc.reason, d.Reason, d.Message)
			assert.Equal(t, tc.terms, d.Terms, d.Message)
			assert.Contains(t, d.Message, string(tc.reason))
		})
	}
}

// TestDecideNamesThePeriod: the decision says which period applied, for the
// Event and the status.
func TestDecideNamesThePeriod(t *testing.T) {
	p := mustParse(t, "- idle_count: 1\n- periods: [\"* 8-15 * * mon-fri\"]\n  idle_count: 2")
	d := Decide(p, Observation{}, at(2, 9, 0))
	assert.Equal(t, 1, d.Period)
	assert.Contains(t, d.Message, "period 1")
	d = Decide(mustParse(t, `- periods: ["* 8-15 * * mon-fri"]`), Observation{}, at(2, 20, 0))
	assert.Equal(t, -1, d.Period)
	assert.Contains(t, d.Message, "no period matches")
}

// Pending pods (on no node yet) count toward the pool as starting ones
// do: a growth limit holds the pool where it is, and the message says
// how many wait for a node.
func TestDecidePendingCountsTowardThePool(t *testing.T) {
	p := mustParse(t, "- idle_count: 6\n  max_growth_rate: 1")
	now := at(2, 10, 0)
	d := Decide(p, Observation{Idle: 1, Pending: 4}, now)
	assert.Equal(t, 6, d.Idle, "the idle count asks 6: 5 are there or coming, growth 1 a minute")
	assert.Contains(t, d.Message, "4 Pending (on no node yet)")
	d = Decide(p, Observation{Idle: 1}, now)
	assert.Equal(t, 2, d.Idle, "without the Pending pods, one more a minute")
	assert.NotContains(t, d.Message, "Pending")
	assert.Equal(t, 2, Decide(p, Observation{Idle: 1, Pending: -3}, now).Idle, "a negative count reads as 0")
}
