package gitlab

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
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

// servesServices tells whether pool p's pods run exactly svcs: its
// containers other than warmpod's match them one for one, in order, and
// each service's hostnames resolve to 127.0.0.1 through the template's
// hostAliases.
func servesServices(p pool.Pool, svcs []Service) bool {
	var side []corev1.Container
	for _, c := range p.Template.Spec.Containers {
		if c.Name != p.Container {
			side = append(side, c)
		}
	}
	if len(side) != len(svcs) {
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
	for i, s := range svcs {
		if !s.matches(side[i]) {
			return false
		}
		for _, n := range s.hostnames() {
			if !local[n] {
				return false
			}
		}
	}
	return true
}

// withServices is p's template for a cold pod that runs svcs: p's other
// containers replaced by the services' (each with the warmpod container's
// pull policy when it sets none) and one hostAliases entry that maps every
// service hostname to 127.0.0.1, first, as the Kubernetes executor puts
// it: a pod's containers share its network namespace.
func withServices(p pool.Pool, svcs []Service) pool.Pool {
	// Containers are named as the Kubernetes executor names them (svc-0,
	// svc-1, …), unless the template already has a container of that name.
	taken := map[string]bool{p.Container: true}
	for _, c := range p.Template.Spec.InitContainers {
		taken[c.Name] = true
	}
	var cs []corev1.Container
	var names []string
	for i, s := range svcs {
		name := "svc-" + strconv.Itoa(i)
		for n := 1; taken[name]; n++ {
			name = fmt.Sprintf("svc-%d-%d", i, n)
		}
		taken[name] = true
		cs = append(cs, s.container(name))
		for _, n := range s.hostnames() {
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

// pickPool chooses the pool of a job with image and svcs: a pool that runs
// the image and exactly those services is claimed warm; otherwise the job
// gets a cold pod from the template of its image's pool (or the default
// pool's, the image swapped in) with the services put in.
func pickPool(set *pool.Set, image string, svcs []Service) (pool.Pool, bool) {
	if image == "" {
		image = set.Pools[0].Image
	}
	for _, p := range set.Pools {
		if p.Image == image && servesServices(p, svcs) {
			return p, true
		}
	}
	p, _ := set.ForImage(image)
	if servesServices(p, svcs) {
		return p, false
	}
	return withServices(p, svcs), false
}
