package gitlab

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/warmpod/warmpod/executor/pool"
)

// Bounds are the highest values a job may ask for its build container
// through the Kubernetes executor's overwrite variables, one per
// variable, as the executor's *_overwrite_max_allowed settings
// (cpu_request_overwrite_max_allowed and friends): an empty bound means
// the variable is ignored ("no flag, no overwrite"), as the executor
// ignores it.
type Bounds struct {
	CPURequest, CPULimit                           string
	MemoryRequest, MemoryLimit                     string
	EphemeralStorageRequest, EphemeralStorageLimit string
}

// overwrite is one overwrite variable and what it sets.
type overwrite struct {
	variable string // without CUSTOM_ENV_
	field    string // the executor's name for it, in its messages
	resource corev1.ResourceName
	limit    bool
	bound    func(Bounds) string
}

// overwrites are the Kubernetes executor's build-container variables
// (executors/kubernetes/overwrites.go), in its order.
var overwrites = []overwrite{
	{"KUBERNETES_CPU_REQUEST", "CPURequest", corev1.ResourceCPU, false, func(b Bounds) string { return b.CPURequest }},
	{"KUBERNETES_MEMORY_REQUEST", "MemoryRequest", corev1.ResourceMemory, false, func(b Bounds) string { return b.MemoryRequest }},
	{"KUBERNETES_EPHEMERAL_STORAGE_REQUEST", "EphemeralStorageRequest", corev1.ResourceEphemeralStorage, false, func(b Bounds) string { return b.EphemeralStorageRequest }},
	{"KUBERNETES_CPU_LIMIT", "CPULimit", corev1.ResourceCPU, true, func(b Bounds) string { return b.CPULimit }},
	{"KUBERNETES_MEMORY_LIMIT", "MemoryLimit", corev1.ResourceMemory, true, func(b Bounds) string { return b.MemoryLimit }},
	{"KUBERNETES_EPHEMERAL_STORAGE_LIMIT", "EphemeralStorageLimit", corev1.ResourceEphemeralStorage, true, func(b Bounds) string { return b.EphemeralStorageLimit }},
}

// Validate checks that every bound is a quantity (a flag error, reported
// before any job runs).
func (b Bounds) Validate() error {
	for _, o := range overwrites {
		if v := o.bound(b); v != "" {
			if _, err := resource.ParseQuantity(v); err != nil {
				return fmt.Errorf("bound of %s %q: %v", o.variable, v, err)
			}
		}
	}
	return nil
}

// flag is the warmpod-gitlab flag that bounds o's variable, and so
// allows it: KUBERNETES_CPU_LIMIT → --cpu-limit-overwrite-max-allowed.
func (o overwrite) flag() string {
	v := strings.ToLower(strings.TrimPrefix(o.variable, "KUBERNETES_"))
	return "--" + strings.ReplaceAll(v, "_", "-") + "-overwrite-max-allowed"
}

// Overwrites reads the job's overwrite variables under bounds: the
// requests and limits the job asks for (nil when it asks for none that a
// bound allows), and one trace line per value taken and per value ignored
// (a variable set without its bound's flag: the job would otherwise not
// know that its KUBERNETES_CPU_LIMIT did nothing). Errors, as the
// Kubernetes executor's: a value that is not a quantity; a value above its
// bound ("the resource "CPURequest" requested "4" is higher than limit
// allowed "2"").
func Overwrites(e Env, b Bounds) (*corev1.ResourceRequirements, []string, error) {
	var out *corev1.ResourceRequirements
	var notes []string
	for _, o := range overwrites {
		bound, v := o.bound(b), e["CUSTOM_ENV_"+o.variable]
		if v == "" {
			continue
		}
		if bound == "" {
			notes = append(notes, fmt.Sprintf("%s=%q ignored: warmpod-gitlab prepare runs without %s, which would allow it", o.variable, v, o.flag()))
			continue
		}
		max, err := resource.ParseQuantity(bound)
		if err != nil {
			return nil, nil, fmt.Errorf("bound of %s %q: %v", o.variable, bound, err)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%s=%q: not a Kubernetes quantity: %v", o.variable, v, err)
		}
		if q.Sign() < 0 {
			// Under any bound, and refused only later by the API server.
			return nil, nil, fmt.Errorf("%s=%q: a resource cannot be negative", o.variable, v)
		}
		if q.Cmp(max) > 0 {
			return nil, nil, fmt.Errorf("%s: the resource %q requested %q is higher than limit allowed %q", o.variable, o.field, v, bound)
		}
		if out == nil {
			out = &corev1.ResourceRequirements{}
		}
		list := &out.Requests
		if o.limit {
			list = &out.Limits
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[o.resource] = q
		notes = append(notes, fmt.Sprintf("%q overwritten with %q", o.field, v))
	}
	return out, notes, nil
}

// merged is the container resources have with want's values put over
// them.
func merged(have corev1.ResourceRequirements, want *corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *have.DeepCopy()
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

// describe is a resource requirement for the trace: "requests cpu=500m
// memory=32Mi, limits memory=256Mi".
func describe(r corev1.ResourceRequirements) string {
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

// nodesFit refuses, before anything is claimed, a job whose pod (c's
// template, the job's resources in its build container) requests more
// than any node of the pool can allocate: the kubelet would call the
// resize of every warm pod Infeasible and no cold pod would ever be
// scheduled, so claiming one only burns the pool. When the nodes cannot
// be read (nodes are cluster-scoped: the driver's account needs the
// ClusterRole of deploy/gitlab-rbac.yaml) it says so once in the trace
// (prepare's stdout) and leaves the check to the
// --*-overwrite-max-allowed bounds; unchecked then says why, for a later
// refusal ("" when a node was found that fits).
func (d *Driver) nodesFit(ctx context.Context, c pool.Pool) (unchecked string, err error) {
	req := pool.PodRequests(&c.Template.Spec)
	nodes, err := d.Cluster.Nodes(ctx, &c.Template)
	if err != nil {
		hint := ""
		if apierrors.IsForbidden(err) {
			hint = ": the driver's account needs get and list on nodes, the ClusterRole warmpod-gitlab-nodes of deploy/gitlab-rbac.yaml, bound to it in its namespace (the binding names the namespace: docs/guides/gitlab-runner.md#rbac-of-the-driver)"
		}
		unchecked = fmt.Sprintf("cannot read the nodes of pool %s (%v)%s", c.Name, err, hint)
		fmt.Fprintf(d.Stdout, "warmpod: %s; the job's resources are checked against the --*-overwrite-max-allowed bounds only\n", unchecked)
		return unchecked, nil
	}
	if len(nodes) == 0 {
		unchecked = fmt.Sprintf("no node matches pool %s's nodeName and nodeSelector", c.Name)
		fmt.Fprintf(d.Stdout, "warmpod: %s; the job's resources are checked against the --*-overwrite-max-allowed bounds only\n", unchecked)
		return unchecked, nil
	}
	for _, n := range nodes {
		if n.Fits(req) {
			return "", nil
		}
	}
	var have []string
	for i, n := range nodes {
		if i == 3 {
			have = append(have, fmt.Sprintf("and %d more", len(nodes)-i))
			break
		}
		have = append(have, n.Name+": "+list(n.Allocatable, req))
	}
	return "", &SystemError{Err: fmt.Errorf("the job's pod would request %s, more than any node of pool %s can allocate (%s): no pod of the pool can run it; ask for less",
		list(req, req), c.Name, strings.Join(have, "; "))}
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
