package sizing

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShare: one row per rule of Share.
func TestShare(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  Budget
		demands []Demand
		want    []int
	}{
		{
			name:    "no budget: every pool gets its desired count",
			demands: []Demand{{Name: "a", Desired: 7}, {Name: "b", Desired: 0}, {Name: "c", Desired: 3}},
			want:    []int{7, 0, 3},
		},
		{
			name:   "fits: nothing is cut",
			budget: Budget{Pods: 10},
			demands: []Demand{
				{Name: "a", Desired: 4, RecentClaims: 1}, {Name: "b", Desired: 6},
			},
			want: []int{4, 6},
		},
		{
			name:   "a burst the profile expects is served before a schedule's size",
			budget: Budget{Pods: 10},
			demands: []Demand{
				{Name: "a-scheduled", Desired: 5}, {Name: "b-pipeline", Desired: 8, Expected: 8},
			},
			want: []int{2, 8},
		},
		{
			name:   "pools with claims first, water-filled: the small need is met whole",
			budget: Budget{Pods: 8},
			demands: []Demand{
				{Name: "big", Desired: 10, RecentClaims: 5}, {Name: "small", Desired: 2, RecentClaims: 1},
				{Name: "quiet", Desired: 3},
			},
			want: []int{6, 2, 0},
		},
		{
			name:   "min is given first, even to a pool without claims",
			budget: Budget{Pods: 5},
			demands: []Demand{
				{Name: "busy", Desired: 10, RecentClaims: 5}, {Name: "quiet", Desired: 3, Min: 2},
			},
			want: []int{3, 2},
		},
		{
			name:   "mins beyond the budget: in priority order",
			budget: Budget{Pods: 3},
			demands: []Demand{
				{Name: "c", Desired: 2, Min: 2}, {Name: "b", Desired: 2, Min: 2}, {Name: "a", Desired: 2, Min: 2, RecentClaims: 1},
			},
			want: []int{0, 1, 2},
		},
		{
			name:   "a min above desired gives desired (the growth limit held it back)",
			budget: Budget{Pods: 10},
			demands: []Demand{
				{Name: "a", Desired: 1, Min: 4},
			},
			want: []int{1},
		},
		{
			name:   "ties: by name, not by position",
			budget: Budget{Pods: 5},
			demands: []Demand{
				{Name: "b", Desired: 3, RecentClaims: 2}, {Name: "a", Desired: 3, RecentClaims: 2},
			},
			want: []int{2, 3},
		},
		{
			name:   "more claims come first among the leftovers",
			budget: Budget{Pods: 5},
			demands: []Demand{
				{Name: "a", Desired: 3, RecentClaims: 1}, {Name: "b", Desired: 3, RecentClaims: 9},
			},
			want: []int{2, 3},
		},
		{
			name:   "CPU budget: the cheap pool goes on when the dear one no longer fits",
			budget: Budget{MilliCPU: 2500},
			demands: []Demand{
				{Name: "a", Desired: 5, RecentClaims: 1, MilliCPU: 1000}, {Name: "b", Desired: 5, RecentClaims: 1, MilliCPU: 100},
			},
			want: []int{2, 5},
		},
		{
			name:   "memory budget",
			budget: Budget{MemoryBytes: 3 << 30},
			demands: []Demand{
				{Name: "a", Desired: 4, RecentClaims: 1, MemoryBytes: 1 << 30}, {Name: "b", Desired: 4, MemoryBytes: 512 << 20},
			},
			want: []int{3, 0},
		},
		{
			name:   "every dimension at once: the tightest wins",
			budget: Budget{Pods: 100, MilliCPU: 1000, MemoryBytes: 1 << 40},
			demands: []Demand{
				{Name: "a", Desired: 50, RecentClaims: 1, MilliCPU: 250, MemoryBytes: 1 << 20},
			},
			want: []int{4},
		},
		{
			name:   "a negative budget allows nothing",
			budget: Budget{Pods: -1},
			demands: []Demand{
				{Name: "a", Desired: 3, Min: 1, RecentClaims: 1},
			},
			want: []int{0},
		},
		{
			name:   "huge requests do not overflow",
			budget: Budget{MilliCPU: 1 << 62},
			demands: []Demand{
				{Name: "a", Desired: MaxCount, RecentClaims: 1, MilliCPU: 1 << 61}, {Name: "b", Desired: 3, MilliCPU: 1 << 62},
			},
			want: []int{2, 0},
		},
		{
			name:    "no pools",
			budget:  Budget{Pods: 3},
			demands: nil,
			want:    []int{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Share(tc.budget, tc.demands))
		})
	}
}

// TestShareProperties: on random namespaces, Share never exceeds the budget
// or a pool's desired count, wastes nothing (a pool left short could not take
// one more pod), gives every min when the mins fit, and answers the same
// whatever the order of the pools.
func TestShareProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 16))
	for n := range 300 {
		pools := rng.IntN(30)
		ds := make([]Demand, pools)
		for i := range ds {
			ds[i] = Demand{
				Name: "pool-" + strconv.Itoa(i), Desired: rng.IntN(40), Min: rng.IntN(4),
				RecentClaims: max(0, rng.IntN(10)-4), MilliCPU: int64(rng.IntN(4)) * 250, MemoryBytes: int64(rng.IntN(3)) << 28,
			}
		}
		b := Budget{Pods: rng.IntN(200), MilliCPU: int64(rng.IntN(3)) * 10000, MemoryBytes: int64(rng.IntN(3)) << 32}
		got := Share(b, ds)
		require.Len(t, got, pools)
		var pods, cpu, mem int64
		minsFit := true
		var minPods, minCPU, minMem int64
		for i, d := range ds {
			require.GreaterOrEqual(t, got[i], 0)
			require.LessOrEqual(t, got[i], d.Desired, "case %d pool %d", n, i)
			pods += int64(got[i])
			cpu += int64(got[i]) * d.MilliCPU
			mem += int64(got[i]) * d.MemoryBytes
			m := int64(min(d.Min, d.Desired))
			minPods, minCPU, minMem = minPods+m, minCPU+m*d.MilliCPU, minMem+m*d.MemoryBytes
		}
		minsFit = within(b, minPods, minCPU, minMem)
		require.True(t, within(b, pods, cpu, mem), "case %d: %d pods, %d mCPU, %d bytes over %+v", n, pods, cpu, mem, b)
		for i, d := range ds {
			if got[i] < d.Desired {
				require.False(t, within(b, pods+1, cpu+d.MilliCPU, mem+d.MemoryBytes), "case %d pool %d short while a pod still fits", n, i)
			}
			if minsFit {
				require.GreaterOrEqual(t, got[i], min(d.Min, d.Desired), "case %d pool %d: min", n, i)
			}
		}
		perm := rng.Perm(pools)
		shuffled := make([]Demand, pools)
		for i, j := range perm {
			shuffled[i] = ds[j]
		}
		again := Share(b, shuffled)
		for i, j := range perm {
			require.Equal(t, got[j], again[i], "case %d: order changed pool %s", n, ds[j].Name)
		}
	}
}

// within tells whether the sums fit budget b (0 = no limit).
func within(b Budget, pods, cpu, mem int64) bool {
	return (b.Pods == 0 || pods <= int64(b.Pods)) && (b.MilliCPU == 0 || cpu <= b.MilliCPU) &&
		(b.MemoryBytes == 0 || mem <= b.MemoryBytes)
}
