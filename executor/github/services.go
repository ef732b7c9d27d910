package github

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/warmpod/warmpod/executor/pool"
)

// serviceHostnames are the names the job's steps reach its services by,
// each mapped to 127.0.0.1 in the pod (a pod's containers share its
// network namespace), in the order of the services, without repeats:
//   - the service's label (`services: LABEL:`), which GitHub's Docker path
//     makes the container's network alias, when the runner sends it as
//     contextName (hooklib's ServiceContainerInfo declares the field;
//     actions/runner's HookContainer, as of 258d6c857db3, does not send
//     it: actions/runner#2783);
//   - the name the upstream k8s hook gives the service's container
//     (generateContainerName: the image's last path element without tag
//     or digest), which is the label of most workflows (`postgres:` with
//     `image: postgres:16`) and the only name the runner's input carries.
//
// Names are lower-cased (DNS names are not case-sensitive); one that is
// still not a DNS-1123 subdomain, which the API server refuses in
// hostAliases, is returned in dropped instead, for a warning.
func serviceHostnames(services []Container) (names, dropped []string) {
	for _, s := range services {
		for _, n := range []string{s.ContextName, imageName(s.Image)} {
			n = strings.ToLower(n)
			switch {
			case n == "" || slices.Contains(names, n) || slices.Contains(dropped, n):
			case len(validation.IsDNS1123Subdomain(n)) > 0:
				dropped = append(dropped, n)
			default:
				names = append(names, n)
			}
		}
	}
	return names, dropped
}

// imageName is the upstream k8s hook's container name of a service
// (generateContainerName): the image's last path element, its tag and
// digest cut off ("registry:5000/team/postgres:16@sha256:…" → "postgres").
func imageName(image string) string {
	image, _, _ = strings.Cut(image, "@")
	image = image[strings.LastIndexByte(image, '/')+1:]
	image, _, _ = strings.Cut(image, ":")
	return image
}

// resolvesLocally tells whether p's template maps every one of names to
// 127.0.0.1 (hostAliases): a warm pool's pods were made before the job,
// so a pool serves a job's services only when its template already has
// their names.
func resolvesLocally(p pool.Pool, names []string) bool {
	local := map[string]bool{}
	for _, h := range p.Template.Spec.HostAliases {
		if h.IP == "127.0.0.1" {
			for _, n := range h.Hostnames {
				local[n] = true
			}
		}
	}
	for _, n := range names {
		if !local[n] {
			return false
		}
	}
	return true
}

// withHostnames is p with one hostAliases entry first that maps names to
// 127.0.0.1, the hash recomputed: the template of a cold pod with the
// job's services (nothing changes without names).
func withHostnames(p pool.Pool, names []string) pool.Pool {
	if len(names) == 0 {
		return p
	}
	return p.Modified(func(t *corev1.PodTemplateSpec) {
		t.Spec.HostAliases = append([]corev1.HostAlias{{IP: "127.0.0.1", Hostnames: slices.Clone(names)}}, t.Spec.HostAliases...)
	})
}
