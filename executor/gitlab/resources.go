//go:build !percall

package gitlab

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
