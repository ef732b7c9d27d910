package pool

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/podcmd"
	"github.com/warmpod/warmpod/poolapi"
)

// The kubelet's constants (pkg/kubelet/cm/helpers_linux.go).
const (
	minShares      = 2
	maxShares      = 262144
	sharesPerCPU   = 1024
	quotaPeriod    = 100000 // µs: the kubelet's CFS period (CPUCFSQuotaPeriod off, the default)
	minQuotaPeriod = 1000   // µs: the smallest quota the kubelet sets
)

// CPUShares is the kubelet's MilliCPUToShares: the cgroup v1 cpu.shares
// of a cpu request of milli millicores.
func CPUShares(milli int64) uint64 {
	if milli > maxShares*1000/sharesPerCPU {
		return maxShares
	}
	return uint64(max(milli*sharesPerCPU/1000, minShares))
}

// CPUQuota is the kubelet's MilliCPUToQuota: the CFS quota in µs per
// 100 ms of a cpu limit of milli millicores.
func CPUQuota(milli int64) int64 {
	if milli > math.MaxInt64/quotaPeriod {
		return math.MaxInt64
	}
	return max(milli*quotaPeriod/1000, minQuotaPeriod)
}

// CPUWeights are the cgroup v2 cpu.weight values runc may write for
// shares: runc before 1.4 maps shares linearly onto [1, 10000]; runc 1.4
// and crun 1.23 use a curve that keeps the default 1024 shares at 100.
// Either means the kubelet's value is in force.
func CPUWeights(shares uint64) [2]uint64 {
	shares = min(max(shares, minShares), maxShares)
	linear := 1 + ((shares-minShares)*9999)/(maxShares-minShares)
	l := math.Log2(float64(shares))
	curve := uint64(math.Ceil(math.Pow(10, (l*l+125*l)/612.0-7.0/34.0)))
	return [2]uint64{linear, min(max(curve, 1), 10000)}
}

// limitsPage is the memory granularity LimitsArgv counts a change in: the
// kernel keeps a memory limit in whole pages, and a node's pages may be
// up to 64 KiB (arm64).
const limitsPage = 64 << 10

// LimitsArgv is the `warmpod job limits` command that waits in p until
// its cgroup holds what the kubelet writes for want, given the pod as it
// was before the resize (before: its container's status.resources, the
// kubelet's last report), bounded by timeout (at most 10 minutes). It
// names only what the resize changes in the cgroup (cpu.shares or
// cpu.weight, the CFS quota, the memory limit): a value the cgroup
// already held would be met before the kubelet acts. Nil when the resize
// changes nothing there (a memory request only) or before has no
// status.resources to compare with: the pod's status alone tells then.
func LimitsArgv(p poolapi.Pod, before *corev1.Pod, want corev1.ResourceRequirements, timeout time.Duration) []string {
	var had *corev1.ResourceRequirements
	for _, cs := range before.Status.ContainerStatuses {
		if cs.Name == p.Container {
			had = cs.Resources
		}
	}
	if had == nil {
		return nil
	}
	c := podcmd.JobLimits{Bin: p.Bin, Within: min(timeout, 10*time.Minute)}
	if q, ok := want.Requests[corev1.ResourceCPU]; ok {
		old := had.Requests[corev1.ResourceCPU]
		if s := CPUShares(q.MilliValue()); s != CPUShares(old.MilliValue()) {
			w := CPUWeights(s)
			c.Shares, c.Weights = s, w[:]
		}
	}
	if q, ok := want.Limits[corev1.ResourceCPU]; ok {
		old, set := had.Limits[corev1.ResourceCPU]
		if quota := CPUQuota(q.MilliValue()); !set || quota != CPUQuota(old.MilliValue()) {
			c.Quota = quota
		}
	}
	if q, ok := want.Limits[corev1.ResourceMemory]; ok {
		old, set := had.Limits[corev1.ResourceMemory]
		if !set || old.Value()/limitsPage != q.Value()/limitsPage {
			c.Memory = q.Value()
		}
	}
	// Nil when nothing is set: nothing in the cgroup to wait for.
	return c.Argv()
}
