//go:build !percall

package gitlab

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/warmpod/warmpod/executor/pool"
)

// Service is one entry of the job's services, as the Custom executor
// writes them into CUSTOM_ENV_CI_JOB_SERVICES: the image name, the first
// alias, entrypoint and command (null when unset), and the variables
// already expanded against the job's.
type Service struct {
	Name       string            `json:"name"`
	Alias      string            `json:"alias"`
	Entrypoint []string          `json:"entrypoint"`
	Command    []string          `json:"command"`
	Variables  map[string]string `json:"variables"`
}

// ServicesFromEnv reads the job's services. The runner sets the variable
// empty for a job without services. Errors, before anything is claimed:
// not a JSON array of services; a service without a name, or a name over
// 512 bytes or with white space; a variable name Kubernetes refuses for a
// container's environment; an alias that is not a DNS-1123 subdomain (the
// Kubernetes executor refuses it too: it becomes a hosts entry).
func ServicesFromEnv(e Env) ([]Service, error) {
	raw := strings.TrimSpace(e["CUSTOM_ENV_CI_JOB_SERVICES"])
	if raw == "" || raw == "null" {
		return nil, nil
	}
	var svcs []Service
	if err := json.Unmarshal([]byte(raw), &svcs); err != nil {
		return nil, fmt.Errorf("CUSTOM_ENV_CI_JOB_SERVICES: want a JSON array of services: %v", err)
	}
	for i, s := range svcs {
		if strings.TrimSpace(s.Name) == "" {
			return nil, fmt.Errorf("CUSTOM_ENV_CI_JOB_SERVICES: service %d has no name", i)
		}
		if len(s.Name) > maxImageName || strings.ContainsAny(s.Name, " \t\r\n") {
			return nil, fmt.Errorf("CUSTOM_ENV_CI_JOB_SERVICES: service %d: %.64q is not an image name", i, s.Name)
		}
		for k := range s.Variables {
			if errs := validation.IsEnvVarName(k); len(errs) > 0 {
				return nil, fmt.Errorf("CUSTOM_ENV_CI_JOB_SERVICES: service %s: variable %q: %s", s.Name, k, strings.Join(errs, "; "))
			}
		}
		for _, a := range s.aliases() {
			if errs := validation.IsDNS1123Subdomain(a); len(errs) > 0 {
				return nil, fmt.Errorf("CUSTOM_ENV_CI_JOB_SERVICES: service %s: alias %q: %s", s.Name, a, strings.Join(errs, "; "))
			}
		}
	}
	return svcs, nil
}

// aliases are the service's own aliases (the runner passes the first;
// a comma-separated list is split as GitLab splits it).
func (s Service) aliases() []string {
	var out []string
	for _, a := range strings.Split(s.Alias, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// maxImageName bounds a service's image name: a registry host, a path
// and a tag or digest fit in far less, and the name is parsed per pool.
const maxImageName = 512

var imagePort = regexp.MustCompile(`^([^/]*?):[0-9]+(/|$)`)

// hostnames are the names the job reaches service s by: the names the
// Kubernetes executor derives from its image (registry and path without
// tag, digest or port, with "/" as "__" and as "-"; kept only when they
// are DNS-1123 subdomains, as the executor keeps them) and its aliases.
func (s Service) hostnames() []string {
	base, _, _ := strings.Cut(s.Name, "@") // the digest
	if i := strings.LastIndexByte(base, ':'); i > strings.LastIndexByte(base, '/') {
		base = base[:i] // the tag (a colon before the last slash is a port)
	}
	base = imagePort.ReplaceAllString(base, "$1$2")
	var out []string
	for _, n := range []string{strings.ReplaceAll(base, "/", "__"), strings.ReplaceAll(base, "/", "-")} {
		if len(validation.IsDNS1123Subdomain(n)) == 0 && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, a := range s.aliases() {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// container is the service as a container of the job's pod named name:
// entrypoint as command, command as args, variables as its environment in
// name order.
func (s Service) container(name string) corev1.Container {
	c := corev1.Container{Name: name, Image: s.Name, Command: s.Entrypoint, Args: s.Command}
	for _, k := range slices.Sorted(maps.Keys(s.Variables)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: s.Variables[k]})
	}
	return c
}

// matches tells whether container c of a pool serves s as the job asks:
// the same image, entrypoint, command and variables (a literal env var for
// each, and no other literal one). A pool's variables are fixed when its
// pods start, so a job whose service variables differ gets a cold pod.
func (s Service) matches(c corev1.Container) bool {
	if c.Image != s.Name || !slices.Equal(c.Command, s.Entrypoint) || !slices.Equal(c.Args, s.Command) {
		return false
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return maps.Equal(env, s.Variables) || len(env) == 0 && len(s.Variables) == 0
}

// sidecars are svcs as the pool containers that would serve them
// ([pool.Set.Choose]): a service is served by a pool's container with the
// same image, entrypoint, command and variables (Service.matches).
func sidecars(svcs []Service) []pool.Sidecar {
	out := make([]pool.Sidecar, len(svcs))
	for i, s := range svcs {
		out[i] = pool.Sidecar{Container: s.container(""), Hostnames: s.hostnames(), Serves: s.matches}
	}
	return out
}
