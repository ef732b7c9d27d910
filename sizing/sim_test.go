package sizing

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// simPool is one pool of the simulation: its policy, its idle pods, its
// running jobs' end times and its recent claims.
type simPool struct {
	name   string
	policy Policy
	weight float64
	idle   int
	ends   []time.Time
	claims []time.Time
	colds  []time.Time
}

// TestSimulationStaysWithinBudget drives Decide and Share with a synthetic
// trace past one cluster: 1,000 pools in 10 namespaces of 100, about 10,000
// claims an hour spread over the pools by a skewed (1/rank) popularity, jobs
// of 1 to 10 minutes, a decision for every pool every minute, and one budget
// per namespace. Every minute each namespace's idle pods stay within its
// budget and no pool gets more than it asked for; the budget binds at some
// minute (the cut is exercised) and the pools still serve most claims warm.
func TestSimulationStaysWithinBudget(t *testing.T) {
	const namespaces, perNS, claimsPerHour, minutes = 10, 100, 10_000, 60
	budget := Budget{Pods: 150, MilliCPU: 150 * 500}
	policies := []Policy{
		mustParse(t, "- idle_count: 1\n  idle_time: 10m\n  max: 20"),
		mustParse(t, "- idle_count: 0\n  idle_time: 5m\n- periods: [\"* 8-17 * * mon-fri\"]\n  idle_count: 2\n  idle_time: 15m\n  max_growth_rate: 10"),
		mustParse(t, "- idle_count: 0\n  idle_time: 20m\n  min: 1\n  scale_factor: 0.5\n  scale_factor_limit: 5"),
	}
	rng := rand.New(rand.NewPCG(1, 1000))
	pools := make([]*simPool, namespaces*perNS)
	var total float64
	for i := range pools {
		pools[i] = &simPool{name: "pool-" + strconv.Itoa(i%perNS), policy: policies[i%len(policies)], weight: 1 / float64(i%perNS+1)}
		total += pools[i].weight
	}
	start := at(2, 9, 0)
	var claims, warm int
	bound := false
	for m := range minutes {
		now := start.Add(time.Duration(m) * time.Minute)
		// This minute's claims, at random seconds, to random pools by weight.
		for range (m+1)*claimsPerHour/minutes - m*claimsPerHour/minutes {
			p := pick(rng, pools, total)
			at := now.Add(time.Duration(rng.IntN(60)) * time.Second)
			claims++
			if p.idle > 0 {
				p.idle--
				warm++
				p.claims = append(p.claims, at)
			} else {
				p.colds = append(p.colds, at)
			}
			p.ends = append(p.ends, at.Add(time.Duration(1+rng.IntN(10))*time.Minute))
		}
		decideAt := now.Add(time.Minute)
		for ns := range namespaces {
			group := pools[ns*perNS : (ns+1)*perNS]
			demands := make([]Demand, len(group))
			for i, p := range group {
				p.prune(decideAt)
				d := Decide(p.policy, Observation{Idle: p.idle, Busy: len(p.ends), Claims: p.claims, ColdStarts: p.colds, PodStart: 20 * time.Second}, decideAt)
				_, per := p.policy.Active(decideAt)
				demands[i] = Demand{Name: p.name, Desired: d.Idle, Min: per.Min, RecentClaims: d.Terms.Demand, MilliCPU: 500}
			}
			got := Share(budget, demands)
			sum := 0
			for i, p := range group {
				require.LessOrEqual(t, got[i], demands[i].Desired)
				sum += got[i]
				p.idle = got[i] // new pods are Ready within the minute
			}
			require.LessOrEqual(t, sum, budget.Pods, "minute %d namespace %d", m, ns)
			bound = bound || sum == budget.Pods
		}
	}
	t.Logf("%d claims, %d warm (%.0f%%)", claims, warm, 100*float64(warm)/float64(claims))
	require.Equal(t, claimsPerHour, claims)
	require.True(t, bound, "the budget never bound: the simulation does not exercise Share's cut")
	require.Greater(t, warm, claims/2, "most claims should find a warm pod")
}

// pick draws a pool with probability proportional to its weight.
func pick(rng *rand.Rand, pools []*simPool, total float64) *simPool {
	x := rng.Float64() * total
	for _, p := range pools {
		x -= p.weight
		if x < 0 {
			return p
		}
	}
	return pools[len(pools)-1]
}

// prune forgets ended jobs and claims older than any policy here looks back
// (the longest idle_time, 20 minutes, plus a pod start), as the controller
// would.
func (p *simPool) prune(now time.Time) {
	keep := func(ts []time.Time, after time.Time) []time.Time {
		out := ts[:0]
		for _, t := range ts {
			if t.After(after) {
				out = append(out, t)
			}
		}
		return out
	}
	p.ends = keep(p.ends, now)
	p.claims = keep(p.claims, now.Add(-21*time.Minute))
	p.colds = keep(p.colds, now.Add(-21*time.Minute))
}
