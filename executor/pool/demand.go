package pool

import (
	"strconv"
	"time"
)

// Annotations by which the drivers tell the pool controller (warmpod-pools)
// what a pool's jobs asked for. They ride on writes the drivers make anyway
// (the claim's label patch, the cold pod's create), so demand costs the API
// server no extra request, and they stay on the pod, so a controller that
// starts (or takes over as leader) rebuilds the recent claims from the pods
// still there.
const (
	// AnnotationClaimedAt is the time a claim won its pod (RFC 3339 with
	// nanoseconds, UTC): the claim patch sets it with the labels.
	AnnotationClaimedAt = "warmpod.dev/claimed-at"
	// AnnotationClaimWait is how long the driver looked for a pod before
	// the claim won, or before it gave up and created a cold pod, in
	// milliseconds (a decimal integer). The controller adds a cold pod's
	// creation-to-Ready time to it for the claim-wait histogram.
	AnnotationClaimWait = "warmpod.dev/claim-wait-ms"
	// AnnotationColdReason is on every cold pod: why the job did not get
	// a warm one (one of the ColdReason values). Only ColdNoIdle and
	// ColdPending are demand on the pod's pool: the job wanted a pod of it.
	AnnotationColdReason = "warmpod.dev/cold-reason"
	// AnnotationRetiring marks an idle pod the pool controller is about to
	// scale away: ClaimWarm skips it. The controller sets it with the
	// pod's resourceVersion as precondition, as a claim does, so a claim
	// and a removal never both win the same pod.
	AnnotationRetiring = "warmpod.dev/retiring"
)

// ColdReason says why a job got a cold pod (AnnotationColdReason).
type ColdReason string

// The reasons a job runs cold.
const (
	// ColdNoIdle: the job's image has a pool, but no idle pod of it was
	// Ready within the driver's warm wait. Demand on that pool.
	ColdNoIdle ColdReason = "no-idle"
	// ColdPending: the pool is rolling out a new template and has no pod
	// of it yet. Demand on that pool.
	ColdPending ColdReason = "pending"
	// ColdNoPool: no pool runs the job's image; the pod is made from the
	// default pool's template with the job's image. Not demand on the
	// default pool: its pods would not have served the job.
	ColdNoPool ColdReason = "no-pool"
	// ColdReleased: a warm pod was claimed (and counted) but released,
	// since the job's requests did not fit it. Not counted again.
	ColdReleased ColdReason = "released"
)

// Cold is why a cold pod is made and how long the driver had looked for a
// warm one first.
type Cold struct {
	Reason ColdReason
	// Waited is the time spent looking for a warm pod before the cold pod
	// was created (0 when the job's image has no pool).
	Waited time.Duration
}

// annotations are the pod annotations that record c.
func (c Cold) annotations() map[string]string {
	return map[string]string{
		AnnotationColdReason: string(c.Reason),
		AnnotationClaimWait:  strconv.FormatInt(c.Waited.Milliseconds(), 10),
	}
}

// Demand reports whether a cold pod of reason r is a job that wanted a pod
// of the pool it is labelled with.
func (r ColdReason) Demand() bool { return r == ColdNoIdle || r == ColdPending }
