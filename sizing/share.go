package sizing

import (
	"cmp"
	"math"
	"slices"
)

// Budget is one namespace's cap on its pools' idle pods together, in pods and
// optionally in the pods' requests: what the team pays for idle capacity,
// whatever the number of pools (issue 28: 10 per-image pools should cost what
// the jobs need, not 10 × idle_count). Each field 0 = no limit in that
// dimension; a negative field allows nothing.
type Budget struct {
	// Pods is the most idle pods of all pools together.
	Pods int
	// MilliCPU is the most CPU the idle pods may request together, in
	// millicores (1000 = one core), from each pod's requests.
	MilliCPU int64
	// MemoryBytes is the most memory the idle pods may request together, in
	// bytes.
	MemoryBytes int64
}

// Demand is one pool's share request: its Decision and what one of its pods
// costs. Negative figures read as 0.
type Demand struct {
	// Name is the pool's name, unique in the namespace: the last tie-break.
	Name string
	// Desired is the pool's Decision.Idle.
	Desired int
	// Min is the active period's min, given before any pool gets more.
	Min int
	// RecentClaims is the pool's claims, warm and cold, in its recent window
	// (for example Terms.Demand), and Expected the pods its learned profile
	// expects soon (Terms.Profile): pools with claims or a burst coming are
	// served first, the larger of the two first. So the budget goes to
	// what is coming, not only to what came: the 11:00 pipeline's pool is
	// pre-warmed before a pool whose size only a schedule asks for.
	RecentClaims, Expected int
	// MilliCPU and MemoryBytes are one pod's requests (the sum over its
	// containers), in millicores and bytes.
	MilliCPU    int64
	MemoryBytes int64
}

// Share cuts the pools' desired idle counts so that together they fit the
// budget, and returns each pool's idle count, in the order of demands. Never
// more than a pool's Desired, never more than the budget:
//
//  1. every pool's min (up to its Desired), in priority order, while the
//     budget lasts;
//  2. then the pools with recent or expected claims, sharing what is left by water
//     filling: each gets up to the same number of further pods, so a pool
//     that needs 2 gets both before a pool that needs 30 gets its 3rd, and
//     the pods that do not divide evenly go in priority order;
//  3. then, the same way, the pools without them (those whose size only
//     the schedule asks for).
//
// Priority order is the most claims (the larger of RecentClaims and
// Expected) first, then Name, then the position
// in demands, so the answer does not depend on map order or timing. A pool
// whose next pod does not fit the CPU or memory left stops there; cheaper
// pools may go on.
func Share(budget Budget, demands []Demand) []int {
	s := newSharing(budget, demands)
	for _, i := range s.order {
		d := s.ds[i]
		s.give(i, min(int64(min(d.Min, d.Desired)), s.fit(i)))
	}
	var busy, quiet []int
	for _, i := range s.order {
		if s.ds[i].RecentClaims > 0 {
			busy = append(busy, i)
		} else {
			quiet = append(quiet, i)
		}
	}
	s.fill(busy)
	s.fill(quiet)
	return s.alloc
}

// sharing is Share's working state: the sanitised demands, what is left of
// the budget (math.MaxInt64 = no limit), and the allocation so far.
type sharing struct {
	ds                     []Demand
	order                  []int
	pods, milliCPU, memory int64
	alloc                  []int
}

// Limits is the budget in each dimension as a ceiling: math.MaxInt64 for
// a field of 0 (no limit), 0 for a negative one (nothing), else the field.
// Pods in pods, MilliCPU in millicores, MemoryBytes in bytes.
func (b Budget) Limits() (pods, milliCPU, memoryBytes int64) {
	limit := func(v int64) int64 {
		switch {
		case v == 0:
			return math.MaxInt64
		case v < 0:
			return 0
		}
		return v
	}
	return limit(int64(b.Pods)), limit(b.MilliCPU), limit(b.MemoryBytes)
}

func newSharing(b Budget, demands []Demand) *sharing {
	s := &sharing{
		ds:    make([]Demand, len(demands)),
		order: make([]int, len(demands)),
		alloc: make([]int, len(demands)),
	}
	s.pods, s.milliCPU, s.memory = b.Limits()
	for i, d := range demands {
		d.Desired = min(max(d.Desired, 0), MaxCount)
		// From here RecentClaims is the pool's priority: recent or expected.
		d.Min, d.RecentClaims = max(d.Min, 0), max(d.RecentClaims, d.Expected, 0)
		d.MilliCPU, d.MemoryBytes = max(d.MilliCPU, 0), max(d.MemoryBytes, 0)
		s.ds[i], s.order[i] = d, i
	}
	slices.SortFunc(s.order, func(a, b int) int {
		return cmp.Or(
			cmp.Compare(s.ds[b].RecentClaims, s.ds[a].RecentClaims),
			cmp.Compare(s.ds[a].Name, s.ds[b].Name),
			cmp.Compare(a, b))
	})
	return s
}

// fit is how many more pods of pool i the budget left can hold.
func (s *sharing) fit(i int) int64 {
	n := s.pods
	if c := s.ds[i].MilliCPU; c > 0 {
		n = min(n, s.milliCPU/c)
	}
	if m := s.ds[i].MemoryBytes; m > 0 {
		n = min(n, s.memory/m)
	}
	return n
}

// give adds k pods to pool i; k <= fit(i), so nothing goes below zero.
func (s *sharing) give(i int, k int64) {
	if k <= 0 {
		return
	}
	s.alloc[i] += int(k)
	s.pods -= k
	s.milliCPU -= k * s.ds[i].MilliCPU
	s.memory -= k * s.ds[i].MemoryBytes
}

// want is how many more pods pool i asks for.
func (s *sharing) want(i int) int64 { return int64(s.ds[i].Desired - s.alloc[i]) }

// fill water-fills the budget left over the pools of tier (in priority
// order): the highest level L such that every pool still asking gets
// min(want, L) more, then one more pod each in order while it fits. A pool
// whose next pod did not fit never fits again (the budget only shrinks), and
// one that reached its want asks no more, so each round drops a pool and
// the rounds end.
func (s *sharing) fill(tier []int) {
	for {
		var active []int
		var top int64
		for _, i := range tier {
			if s.want(i) > 0 && s.fit(i) >= 1 {
				active = append(active, i)
				top = max(top, s.want(i))
			}
		}
		if len(active) == 0 {
			return
		}
		lo, hi := int64(0), top // lo is feasible, as nothing is
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if s.feasible(active, mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		gave := false
		for _, i := range active {
			k := min(s.want(i), lo)
			s.give(i, k)
			gave = gave || k > 0
		}
		for _, i := range active {
			if s.want(i) > 0 && s.fit(i) >= 1 {
				s.give(i, 1)
				gave = true
			}
		}
		if !gave {
			return
		}
	}
}

// feasible tells whether giving each active pool min(want, level) more pods
// fits the budget left, with sums that saturate instead of overflowing.
func (s *sharing) feasible(active []int, level int64) bool {
	var pods, cpu, mem int64
	for _, i := range active {
		k := min(s.want(i), level)
		pods = addSat(pods, k)
		cpu = addSat(cpu, mulSat(k, s.ds[i].MilliCPU))
		mem = addSat(mem, mulSat(k, s.ds[i].MemoryBytes))
	}
	return pods <= s.pods && cpu <= s.milliCPU && mem <= s.memory
}

// addSat and mulSat add and multiply non-negative int64s, stopping at
// math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func mulSat(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
