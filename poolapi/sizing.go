package poolapi

import (
	"encoding/json"
	"time"
)

// SizingStatus is the JSON the pool controller writes in AnnotationSizing
// of each pool it sizes: the size it set, why, and what the decision read.
// The controller writes it; `warmpod-pools status` and the drivers read it
// (a driver's warm wait uses PodStart).
type SizingStatus struct {
	// Replicas is the size the controller set.
	Replicas int `json:"replicas"`
	// Reason is the rule that set it: a sizing reason (package sizing), or "budget" when the
	// namespace's budget cut the pool's own figure, or "invalid" when the
	// policy could not be read (the size is then left alone).
	Reason string `json:"reason"`
	// Message says the same for a human (for "invalid": the field and why).
	Message string `json:"message"`
	// Desired is the pool's own figure before the budget.
	Desired int `json:"desired"`
	// Demand is the most claims within one pod start of the last idle_time,
	// and DemandAt the time of the last of them; LastClaim the pool's last
	// claim. A new leader seeds its history from them.
	Demand    int       `json:"demand"`
	DemandAt  time.Time `json:"demandAt,omitzero"`
	LastClaim time.Time `json:"lastClaim,omitzero"`
	// PodStart is the measured pod start time used, in seconds.
	PodStart float64 `json:"podStartSeconds"`
	// DecidedAt is when this was decided.
	DecidedAt time.Time `json:"decidedAt"`
}

// ReadSizingStatus parses annotations[AnnotationSizing]: the zero
// SizingStatus when there is none or it does not parse (a status is
// advice, never a reason to fail).
func ReadSizingStatus(annotations map[string]string) SizingStatus {
	var s SizingStatus
	if json.Unmarshal([]byte(annotations[AnnotationSizing]), &s) != nil {
		return SizingStatus{}
	}
	return s
}
