package pools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/warmpod/warmpod/sizing"
)

// The budget at every instant (issue 39): sizing.Share keeps the decided
// sizes within the budget, but the writes land one by one, and a
// scale-down removes idle pods only when its ReplicaSet acts, after the
// write. So a pool grows now only into the room the budget leaves free of
// what every pool holds at this moment (held): the larger of its
// replicas and its idle pods standing. A pool that shrinks keeps holding
// its pods until the informer sees them go; the growth that needs them is
// held, and the decision that the pods' removal triggers (their events
// enqueue one, Config.Batch later) writes it. Hence, at any write and at
// any instant between:
//
//	Σ spec.replicas ≤ budget and Σ idle pods ≤ budget
//
// in pods, in CPU and in memory, whenever they were within it before. An
// idle pod here is one labelled warmpod.dev/state=idle and not being
// deleted (idle, starting or retiring): a pod whose deletion has begun can
// no longer be claimed and its ReplicaSet no longer counts it, and waiting
// for it to be gone would hold a waiting job's pool for the pod's grace
// period (up to 30 s for a service that ignores SIGTERM). A claim that
// leaves a pool's ReplicaSet does not change the sums: the replacement
// takes the claimed pod's place within the same replicas.

// room is what the budget leaves, per dimension (math.MaxInt64: no limit).
type room struct {
	pods, milliCPU, memory int64
}

// newRoom is the whole of b (sizing.Budget.Limits).
func newRoom(b sizing.Budget) room {
	var r room
	r.pods, r.milliCPU, r.memory = b.Limits()
	return r
}

// take removes n pods of cpu millicores and mem bytes each; the room may go
// below zero (the namespace is over its budget: nothing grows).
func (r *room) take(n int, cpu, mem int64) {
	sub := func(left *int64, v int64) {
		if *left != math.MaxInt64 {
			*left -= v
		}
	}
	sub(&r.pods, int64(n))
	sub(&r.milliCPU, int64(n)*cpu)
	sub(&r.memory, int64(n)*mem)
}

// fit is how many more pods of cpu millicores and mem bytes each fit.
func (r room) fit(cpu, mem int64) int {
	n := r.pods
	if cpu > 0 {
		n = min(n, r.milliCPU/cpu)
	}
	if mem > 0 {
		n = min(n, r.memory/mem)
	}
	return int(min(max(n, 0), int64(sizing.MaxCount)))
}

// grown is a scale-up the controller wrote and its informer may not have
// seen yet: replicas, written on the Deployment at resourceVersion base.
type grown struct {
	replicas int
	base     string
}

// held is what pool x holds of the budget now, in pods: the larger of its
// replicas and its idle pods standing. The replicas are the controller's
// own last scale-up while the cache still shows the Deployment it was
// written on: a cache that lags behind a grow must not free its room
// for another pool. Once the cache shows any newer version of the
// Deployment, that version includes the write (it was made on base).
func (c *Controller) held(x decided) int {
	rs := x.rsPods
	n := max(replicasOf(x.d), len(rs.idle)+len(rs.starting)+len(rs.pending)+len(rs.retiring))
	if g, ok := c.grown[x.key]; ok {
		if g.base != x.d.ResourceVersion {
			delete(c.grown, x.key)
		} else {
			n = max(n, g.replicas)
		}
	}
	return n + len(x.own.standing) + len(x.own.stale) + x.exp
}

// applyAll writes the decided sizes (shares, in the order of ds) under the
// rule above: first the pools that grow, each by what the room allows,
// most recent claims first (a pool jobs wait for is not held behind the
// marks and scale writes of pools that shrink); then the pools that shrink
// or keep their size. A grow the room cannot hold now is cut to it (to no
// write at all when there is none) and left for a later decision. Errors:
// apply's, joined, after every pool was tried.
func (c *Controller) applyAll(ctx context.Context, ds []decided, shares []int, now time.Time) error {
	free := newRoom(c.cfg.Budget)
	holds := make([]int, len(ds))
	for i, x := range ds {
		holds[i] = c.held(x)
		free.take(holds[i], x.cpu, x.mem)
	}
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(ds[b].dec.Terms.Demand, ds[a].dec.Terms.Demand)
	})
	clear(c.waiting)
	var errs []error
	need := 0
	for _, up := range []bool{true, false} {
		if !up {
			// A pool's own pods above its decision stay for a later
			// claim only in room no pool's growth waits for, and while
			// the namespace is within its budget (own.go): need is how
			// many of them go.
			need = c.shedNeed(free)
		}
		for _, i := range order {
			x, cur, target := ds[i], ds[i].size(), shares[i]
			if (target > cur) != up {
				continue
			}
			if up {
				// holds[i] ≥ cur: growing from cur to next adds
				// max(next, holds[i]) - holds[i] to what the pool holds.
				next := max(cur, min(target, holds[i]+free.fit(x.cpu, x.mem)))
				free.take(max(next, holds[i])-holds[i], x.cpu, x.mem)
				if next < target {
					c.waiting[x.key] = target - next
					c.log.Info("pool growth held until the budget's give-backs land", "namespace", x.d.Namespace,
						"pool", x.d.Name, "replicas", cur, "now", next, "decided", target)
				}
				target = next
			}
			if err := c.apply(ctx, x, target, &need, now); err != nil {
				errs = append(errs, fmt.Errorf("pool %s: %w", x.d.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// shedNeed is how many pods kept above their pools' decisions must go
// after the growths of a decision (free is the room they left): the pods
// growths wait for, and those by which the namespace is over its budget
// (all of them when it is over in CPU or memory, which a pod count does
// not measure).
func (c *Controller) shedNeed(free room) int {
	if free.milliCPU < 0 || free.memory < 0 {
		return math.MaxInt
	}
	n := int(max(-free.pods, 0))
	for _, w := range c.waiting {
		n += w
	}
	return n
}
