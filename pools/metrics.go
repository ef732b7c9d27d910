package pools

import (
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the controller's Prometheus metrics, all labelled with the
// pool's namespace and name. Names follow Prometheus' conventions (base
// units, _total for counters).
type Metrics struct {
	idle, starting, busy, replicas, desired *prometheus.GaugeVec
	claimsPerMinute, podStart, policyValid  *prometheus.GaugeVec
	claims, scaleChanges, errors            *prometheus.CounterVec
	claimWait                               *prometheus.HistogramVec
	leader                                  prometheus.Gauge
}

// NewMetrics makes the metrics and registers them with reg (a
// prometheus.NewRegistry in tests; the process's registry in
// warmpod-pools). Errors: reg's, for a name registered twice.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	pool := []string{"namespace", "pool"}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "warmpod_pool_" + name, Help: help}, pool)
	}
	m := &Metrics{
		idle:            g("idle_pods", "Ready unclaimed pods of the pool."),
		starting:        g("starting_pods", "Pods of the pool that are not Ready yet, Pending ones (on no node yet) included."),
		busy:            g("busy_pods", "Claimed pods of the pool (warm and cold) still running a job."),
		replicas:        g("replicas", "The pool's size: its ReplicaSet's replicas and the idle pods the controller made above them (decision 0010)."),
		desired:         g("desired_idle_pods", "The idle count the pool's policy asks for, before the namespace's budget."),
		claimsPerMinute: g("claims_per_minute", "Jobs (warm claims and cold starts) of the pool in the last minute."),
		podStart:        g("pod_start_seconds", "The measured start time of the pool's pods (median of the last 9), creation to Ready."),
		policyValid:     g("policy_valid", "1 when the pool's warmpod.dev/policy parses and its pod template's warmpod.dev/pool label is its name, 0 when not (the pool keeps its size)."),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warmpod_pool_claims_total",
			Help: "Jobs that wanted a pod of the pool, by kind: warm (claimed an idle pod) or cold (no idle pod was Ready)."}, append(pool, "kind")),
		scaleChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warmpod_pool_scale_changes_total",
			Help: "Changes of the pool's decided size by the controller, by direction (up, down) and reason."}, append(pool, "direction", "reason")),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warmpod_pools_api_errors_total",
			Help: "Failed writes to the API server, by operation (scale, retire, create, delete, release, status, profile, discover)."}, []string{"operation"}),
		claimWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "warmpod_pool_claim_wait_seconds",
			Help:    "From a driver's first look for a pod to a Ready pod it holds, by kind (warm, cold).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}}, append(pool, "kind")),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "warmpod_pools_leader",
			Help: "1 while this replica holds the leader Lease and sizes pools."}),
	}
	for _, c := range []prometheus.Collector{m.idle, m.starting, m.busy, m.replicas, m.desired, m.claimsPerMinute,
		m.podStart, m.policyValid, m.claims, m.scaleChanges, m.errors, m.claimWait, m.leader} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SetLeader sets warmpod_pools_leader.
func (m *Metrics) SetLeader(on bool) {
	if on {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// forget drops every series of a pool that is gone (or no longer sized).
func (m *Metrics) forget(ns, name string) {
	l := prometheus.Labels{"namespace": ns, "pool": name}
	for _, v := range []*prometheus.MetricVec{m.idle.MetricVec, m.starting.MetricVec, m.busy.MetricVec, m.replicas.MetricVec,
		m.desired.MetricVec, m.claimsPerMinute.MetricVec, m.podStart.MetricVec, m.policyValid.MetricVec,
		m.claims.MetricVec, m.scaleChanges.MetricVec, m.claimWait.MetricVec} {
		v.DeletePartialMatch(l)
	}
}

// kind is the kind label of a claim.
func kind(warm bool) string {
	if warm {
		return "warm"
	}
	return "cold"
}

// Names returns the names of the metrics m exports, sorted: what a
// dashboard's queries may name (a histogram's as registered, without the
// _bucket, _sum and _count suffixes of its series).
func (m *Metrics) Names() []string {
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	ch := make(chan *prometheus.Desc, 32)
	go func() {
		for _, c := range []prometheus.Collector{m.idle, m.starting, m.busy, m.replicas, m.desired, m.claimsPerMinute,
			m.podStart, m.policyValid, m.claims, m.scaleChanges, m.errors, m.claimWait, m.leader} {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		if g := fq.FindStringSubmatch(d.String()); g != nil {
			names = append(names, g[1])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
