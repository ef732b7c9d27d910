package poolsim

import "time"

// A ClaimSample is one cold job's claim in a cluster: Due is the job's
// arrival plus the drivers' warm wait (nominal: the driver's own time
// before and after its warm wait is part of the lag, as the simulator,
// which claims at arrival, plays it), Claimed when the driver claimed a
// starting pool pod for it or made its cold pod
// (poolapi.AnnotationClaimedAt, the driver's clock).
type ClaimSample struct {
	Due, Claimed time.Time
}

// ClaimModel is Config's model of a driver's cold claim after its warm
// wait: Lag, plus PerPending for each other cold claim due before it and
// not made yet. A driver's ClaimStarting lists the pool's starting pods
// and patches one; drivers whose warm waits end together (a pipeline that
// emptied its pool) patch the same few oldest pods, and each conflict
// costs a read and another patch, so on a busy API server their claims
// come one after another instead of at once.
type ClaimModel struct {
	Lag, PerPending time.Duration
	// Claims is how many claims the model was fitted to.
	Claims int
}

// Apply sets cfg's claim model to m.
func (m ClaimModel) Apply(cfg *Config) {
	cfg.ColdClaimLag, cfg.ColdClaimPerPending = m.Lag, m.PerPending
}

// FitClaims fits a ClaimModel to a cluster's cold claims by least squares
// of each claim's delay (Due to Claimed) on the number of other claims
// pending at its Due (due before it, or at once and earlier in the
// samples' order, as the simulator takes claims due together one by one;
// and claimed after its Due), PerPending and Lag never below zero. A
// sample claimed before it was due (clocks apart) is left out.
func FitClaims(samples []ClaimSample) ClaimModel {
	var n, d []float64
	for i, s := range samples {
		if s.Claimed.Before(s.Due) {
			continue
		}
		pending := 0
		for j, o := range samples {
			ahead := o.Due.Before(s.Due) || (o.Due.Equal(s.Due) && j < i)
			if ahead && o.Claimed.After(s.Due) {
				pending++
			}
		}
		n = append(n, float64(pending))
		d = append(d, s.Claimed.Sub(s.Due).Seconds())
	}
	m := ClaimModel{Claims: len(d)}
	if len(d) == 0 {
		return m
	}
	per, base := fitLine(n, d)
	m.Lag, m.PerPending = time.Duration(base*float64(time.Second)), time.Duration(per*float64(time.Second))
	return m
}
