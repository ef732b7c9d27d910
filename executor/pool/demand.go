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
func (c Cold) annotations() map[string]string {
	return map[string]string{
		poolapi.AnnotationColdReason: string(c.Reason),
		poolapi.AnnotationClaimWait:  strconv.FormatInt(c.Waited.Milliseconds(), 10),
	}
}
