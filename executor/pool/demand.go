package pool

import (
	"strconv"
	"time"

	"github.com/warmpod/warmpod/poolapi"
)

// Cold is why a cold pod is made and how long the driver had looked for a
// warm one first.
type Cold struct {
	Reason poolapi.ColdReason
	// Waited is the time spent looking for a warm pod before the cold pod
	// was created (0 when the job's image has no pool).
	Waited time.Duration
}

// annotations are the pod annotations that record c.
// A cold pod is busy from its creation: the autoscalers' keys say so
// (poolapi.BusyDisruption), over the template's idle ones.
func (c Cold) annotations() map[string]string {
	ann := poolapi.BusyDisruption()
	ann[poolapi.AnnotationColdReason] = string(c.Reason)
	ann[poolapi.AnnotationClaimWait] = strconv.FormatInt(c.Waited.Milliseconds(), 10)
	return ann
}
