//go:build !percall

package github

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
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
