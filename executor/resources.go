package executor

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// merged is the container resources have with want's values put over
// them (nil: have).
func merged(have corev1.ResourceRequirements, want *corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *have.DeepCopy()
	if want == nil {
		return out
	}
	for _, pair := range []struct {
		dst *corev1.ResourceList
		src corev1.ResourceList
	}{{&out.Requests, want.Requests}, {&out.Limits, want.Limits}} {
		for n, q := range pair.src {
			if *pair.dst == nil {
				*pair.dst = corev1.ResourceList{}
			}
			(*pair.dst)[n] = q
		}
	}
	return out
}

// capped is r with caps put over it ([Request.Caps]): each cap is the
// limit, and the request too where r requests as much as its limit or
// more than the cap.
func capped(r corev1.ResourceRequirements, caps corev1.ResourceList) corev1.ResourceRequirements {
	if len(caps) == 0 {
		return r
	}
	out := *r.DeepCopy()
	for n, q := range caps {
		req, hasReq := out.Requests[n]
		lim, hasLim := out.Limits[n]
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		out.Limits[n] = q
		if hasReq && (hasLim && req.Cmp(lim) == 0 || req.Cmp(q) > 0) {
			out.Requests[n] = q
		}
	}
	return out
}

// resizeNeeds tells what a warm pod of a template whose build container
// has have must change to get want: in place (cpu, memory) and not in
// place (ephemeral storage: the kubelet cannot resize it, such a job gets
// a cold pod).
func resizeNeeds(have corev1.ResourceRequirements, want *corev1.ResourceRequirements) (inPlace, cold bool) {
	for _, pair := range []struct{ have, want corev1.ResourceList }{{have.Requests, want.Requests}, {have.Limits, want.Limits}} {
		for n, q := range pair.want {
			if h, ok := pair.have[n]; ok && h.Cmp(q) == 0 {
				continue
			}
			if n == corev1.ResourceCPU || n == corev1.ResourceMemory {
				inPlace = true
			} else {
				cold = true
			}
		}
	}
	return inPlace, cold
}

// Describe is a resource requirement for the trace: "requests cpu=500m
// memory=32Mi, limits memory=256Mi".
func Describe(r corev1.ResourceRequirements) string {
	s := ""
	for _, part := range []struct {
		name string
		l    corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		if len(part.l) == 0 {
			continue
		}
		if s != "" {
			s += ", "
		}
		s += part.name
		for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			if q, ok := part.l[n]; ok {
				s += fmt.Sprintf(" %s=%s", n, q.String())
			}
		}
	}
	return s
}

// requestsWithinLimits refuses a request above its limit (the API server
// would refuse the resize and the cold pod alike): a job's request above
// the pool's limit, or a job's limit below the pool's request.
func requestsWithinLimits(r corev1.ResourceRequirements) error {
	for n, req := range r.Requests {
		if lim, ok := r.Limits[n]; ok && req.Cmp(lim) > 0 {
			return fmt.Errorf("the %s request %s is above its limit %s", n, req.String(), lim.String())
		}
	}
	return nil
}

// list is the quantities of l that only names, "cpu=2 memory=4Gi", in
// that order (the figures a node-fit message compares).
func list(l, only corev1.ResourceList) string {
	var parts []string
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if _, ok := only[n]; !ok {
			continue
		}
		if q, ok := l[n]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", n, q.String()))
		}
	}
	return strings.Join(parts, " ")
}
