package pool

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Sidecar is a container a job wants beside its own (a CI service), as
// each driver reads it from its CI system's input.
type Sidecar struct {
	// Container is the service as a container of a cold pod; Choose
	// names it (svc-0, svc-1, … as GitLab's Kubernetes executor does).
	Container corev1.Container
	// Hostnames are the names the job reaches the service by: the pod's
	// hostAliases map them to 127.0.0.1 (containers of a pod share its
	// network).
	Hostnames []string
	// Serves tells whether a pool's container serves this service as the
	// job asks (the CI system's rule); nil: the same image.
	Serves func(c corev1.Container) bool
}

func (s Sidecar) serves(c corev1.Container) bool {
	if s.Serves != nil {
		return s.Serves(c)
	}
	return c.Image == s.Container.Image
}

// Choose is the one pool choice of a job with image (empty: the first
// pool's) and sidecars. A pool whose warmpod container runs image, whose
// other containers serve the sidecars one for one, in order, and whose
// template maps every sidecar's hostnames to 127.0.0.1 is claimed warm
// (warm=true). Otherwise the job gets a cold pod from the template of its
// image's pool, or the default pool's with the image swapped in
// ([Set.ForImage]), the sidecars put in and their names in its
// hostAliases.
func (s *Set) Choose(image string, sidecars []Sidecar) (p Pool, warm bool) {
	if image == "" {
		image = s.Pools[0].Image
	}
	for _, p := range s.Pools {
		if p.Image == image && p.serves(sidecars) {
			return p, true
		}
	}
	p, _ = s.ForImage(image)
	if p.serves(sidecars) {
		return p, false
	}
	return p.withSidecarsOf(sidecars), false
}

// serves tells whether p's pods run exactly sidecars, their names
// resolving locally.
func (p Pool) serves(sidecars []Sidecar) bool {
	var side []corev1.Container
	for _, c := range p.Template.Spec.Containers {
		if c.Name != p.Container {
			side = append(side, c)
		}
	}
	if len(side) != len(sidecars) {
		return false
	}
	local := map[string]bool{}
	for _, h := range p.Template.Spec.HostAliases {
		if h.IP == "127.0.0.1" {
			for _, n := range h.Hostnames {
				local[n] = true
			}
		}
	}
	for i, s := range sidecars {
		if !s.serves(side[i]) {
			return false
		}
		for _, n := range s.Hostnames {
			if !local[n] {
				return false
			}
		}
	}
	return true
}

// withSidecarsOf is p with its containers other than warmpod's replaced by
// sidecars and one hostAliases entry first that maps their names to
// 127.0.0.1, the hash recomputed. Containers are named as the Kubernetes
// executor names them (svc-0, svc-1, …), unless the template already has
// a container of that name.
func (p Pool) withSidecarsOf(sidecars []Sidecar) Pool {
	taken := map[string]bool{p.Container: true}
	for _, c := range p.Template.Spec.InitContainers {
		taken[c.Name] = true
	}
	var cs []corev1.Container
	var names []string
	for i, s := range sidecars {
		name := "svc-" + strconv.Itoa(i)
		for n := 1; taken[name]; n++ {
			name = fmt.Sprintf("svc-%d-%d", i, n)
		}
		taken[name] = true
		c := s.Container
		c.Name = name
		cs = append(cs, c)
		for _, n := range s.Hostnames {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	p = p.WithSidecars(cs)
	if len(names) == 0 {
		return p
	}
	return p.Modified(func(t *corev1.PodTemplateSpec) {
		t.Spec.HostAliases = append([]corev1.HostAlias{{IP: "127.0.0.1", Hostnames: names}}, t.Spec.HostAliases...)
	})
}
