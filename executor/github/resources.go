//go:build !percall

package github

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// TemplateEnv names the hook's pod template extension: the runner's
// environment variable the upstream k8s hook reads
// (ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE, its ENV_HOOK_TEMPLATE_PATH), a
// YAML file of a pod template whose container "$job" is merged into the
// job container and into a container action's.
const TemplateEnv = "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE"

// jobContainerExtension is the extension's container for the job
// container (the upstream hook's JOB_CONTAINER_EXTENSION_NAME).
const jobContainerExtension = "$job"

// maxExtension bounds the extension file, in bytes: a pod template is a
// few KiB; a larger file is a wrong path, not a template.
const maxExtension = 1 << 20

// readExtension reads the pod template extension at path (YAML or
// JSON). A field the pod template types do not have (a misspelt
// "resources", or a field of a newer Kubernetes) is left out with a
// note, since warmpod uses the "$job" container's resources only and
// the upstream hook's file may hold more. Errors name the file:
// unreadable, larger than 1 MiB, or not a pod template.
func readExtension(path string) (*corev1.PodTemplateSpec, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrInput, TemplateEnv, err)
	}
	defer f.Close()
	b := make([]byte, maxExtension+1)
	n, _ := io.ReadFull(f, b)
	if n > maxExtension {
		return nil, nil, fmt.Errorf("%w: %s=%s: larger than %d bytes: not a pod template", ErrInput, TemplateEnv, path, maxExtension)
	}
	var t corev1.PodTemplateSpec
	if err := yaml.Unmarshal(b[:n], &t); err != nil {
		return nil, nil, fmt.Errorf("%w: %s=%s: not a pod template: %v", ErrInput, TemplateEnv, path, err)
	}
	var notes []string
	if err := yaml.UnmarshalStrict(b[:n], &corev1.PodTemplateSpec{}); err != nil {
		// The strict decoder names the first such field only.
		notes = append(notes, fmt.Sprintf("the pod template extension %s=%s: %v (the first field warmpod does not know; such fields are left out)", TemplateEnv, path, err))
	}
	return &t, notes, nil
}

// extensionResources are the resources the extension gives the job
// container ("$job"), and one note per part of the extension warmpod
// leaves out: a warm pod is made before the job, from its pool's
// template, so what the extension adds to a pod (labels, volumes,
// tolerations, a service container, the container's env or mounts)
// belongs in the pool's Deployment.
func extensionResources(t *corev1.PodTemplateSpec) (*corev1.ResourceRequirements, []string) {
	if t == nil {
		return nil, nil
	}
	var res *corev1.ResourceRequirements
	var ignored []string
	if len(t.Labels)+len(t.Annotations) > 0 {
		ignored = append(ignored, "metadata")
	}
	spec := t.Spec
	for _, c := range spec.Containers {
		if c.Name != jobContainerExtension {
			ignored = append(ignored, "container "+strconv.Quote(c.Name))
			continue
		}
		if len(c.Resources.Requests)+len(c.Resources.Limits) > 0 {
			r := c.Resources
			res = &corev1.ResourceRequirements{Requests: r.Requests, Limits: r.Limits}
		}
		c.Name, c.Resources = "", corev1.ResourceRequirements{}
		if !isZero(c) {
			ignored = append(ignored, `container "$job" fields other than resources`)
		}
	}
	spec.Containers = nil
	if !isZero(spec) {
		ignored = append(ignored, "spec fields other than containers")
	}
	var notes []string
	if len(ignored) > 0 {
		notes = append(notes, fmt.Sprintf("the pod template extension (%s) sets %s, which warmpod leaves out: a warm pod is made from its pool's template before the job; put them in the pool's Deployment", TemplateEnv, strings.Join(ignored, ", ")))
	}
	return res, notes
}

// isZero: v is its type's zero value, by its JSON form (PodSpec and
// Container hold maps and slices, so == does not compile).
func isZero[T any](v T) bool {
	var zero T
	a, _ := yaml.Marshal(v)
	b, _ := yaml.Marshal(zero)
	return string(a) == string(b)
}

// jobResources are the resources a job container asks for: the pod
// template extension's "$job" container's (the file env names in
// TemplateEnv), with container.options' --memory-reservation over its
// memory request, and the caps of its --cpus and --memory
// ([executor.Request.Caps]); one note per part of either that warmpod
// leaves out. Errors (ErrInput): an extension that cannot be read, an
// option value Docker would refuse.
func jobResources(env map[string]string, options *string) (*corev1.ResourceRequirements, corev1.ResourceList, []string, error) {
	var res *corev1.ResourceRequirements
	var notes []string
	if path := env[TemplateEnv]; path != "" {
		t, unknown, err := readExtension(path)
		if err != nil {
			return nil, nil, nil, err
		}
		res, notes = extensionResources(t)
		notes = append(unknown, notes...)
	}
	if options == nil || strings.TrimSpace(*options) == "" {
		return res, nil, notes, nil
	}
	requests, caps, more, err := optionsResources(*options)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(requests) > 0 {
		if res == nil {
			res = &corev1.ResourceRequirements{}
		} else {
			res = res.DeepCopy()
		}
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		for n, q := range requests {
			res.Requests[n] = q
		}
	}
	return res, caps, append(notes, more...), nil
}

// optionsResources reads the resources a workflow asks for in
// container.options (createOptions: `docker create` flags, one string):
// --cpus N and --memory/-m M are caps (Docker's are a CFS quota and a
// hard limit: [executor.Request.Caps]), --memory-reservation a memory
// request; every other flag is left out, with a note. Errors (ErrInput):
// a value Docker would refuse (not a number, not a size, zero or less,
// memory under 6 MiB, Docker's minimum), a flag without its value, an
// unterminated quote.
func optionsResources(options string) (requests, caps corev1.ResourceList, notes []string, err error) {
	args, err := splitOptions(options)
	if err != nil {
		// Not the options themselves: they may hold an -e VALUE.
		return nil, nil, nil, fmt.Errorf("%w: container.options: %v", ErrInput, err)
	}
	var ignored []string
	for i := 0; i < len(args); i++ {
		name, val, inline := strings.Cut(args[i], "=")
		if !inline && strings.HasPrefix(name, "-m") && len(name) > 2 && !strings.HasPrefix(name, "--") {
			name, val, inline = "-m", name[2:], true // -m512m
		}
		switch name {
		case "--cpus", "--memory", "-m", "--memory-reservation":
		default:
			if strings.HasPrefix(args[i], "-") {
				ignored = append(ignored, name)
			}
			continue
		}
		if !inline {
			if i+1 == len(args) {
				return nil, nil, nil, fmt.Errorf("%w: container.options: %s needs a value", ErrInput, name)
			}
			i++
			val = args[i]
		}
		var q resource.Quantity
		var err error
		if name == "--cpus" {
			q, err = dockerCPUs(val)
		} else {
			q, err = dockerBytes(val)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: container.options: %s %q: %v", ErrInput, name, val, err)
		}
		switch name {
		case "--cpus":
			caps = put(caps, corev1.ResourceCPU, q)
		case "--memory", "-m":
			caps = put(caps, corev1.ResourceMemory, q)
		case "--memory-reservation":
			requests = put(requests, corev1.ResourceMemory, q)
		}
	}
	if r, ok := requests[corev1.ResourceMemory]; ok {
		if m, ok := caps[corev1.ResourceMemory]; ok && r.Cmp(m) > 0 {
			// Docker refuses it too ("Minimum memory limit can not be
			// less than memory reservation limit").
			return nil, nil, nil, fmt.Errorf("%w: container.options: --memory-reservation %s is above --memory %s", ErrInput, r.String(), m.String())
		}
	}
	if len(ignored) > 0 {
		slices.Sort(ignored)
		notes = append(notes, fmt.Sprintf("container.options %s left out: warmpod takes only --cpus, --memory (-m) and --memory-reservation from them; the rest of a pod is its pool's template", strings.Join(slices.Compact(ignored), " ")))
	}
	return requests, caps, notes, nil
}

// put sets l[n] = q, making l when it is nil.
func put(l corev1.ResourceList, n corev1.ResourceName, q resource.Quantity) corev1.ResourceList {
	if l == nil {
		l = corev1.ResourceList{}
	}
	l[n] = q
	return l
}

// dockerCPUs is --cpus's value as a cpu quantity, to the millicore
// (Docker's is a decimal number of CPUs, applied as a CFS quota: 1.5 →
// 1500m). Errors: not a number, zero or less, more than a million.
func dockerCPUs(v string) (resource.Quantity, error) {
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || math.IsNaN(f):
		return resource.Quantity{}, fmt.Errorf("not a number of CPUs")
	case f <= 0:
		return resource.Quantity{}, fmt.Errorf("must be above 0")
	case f > 1e6:
		return resource.Quantity{}, fmt.Errorf("more CPUs than any node has")
	}
	m := int64(math.Round(f * 1000))
	if m < 1 {
		return resource.Quantity{}, fmt.Errorf("below a millicore, the least Kubernetes takes")
	}
	return *resource.NewMilliQuantity(m, resource.DecimalSI), nil
}

// dockerBytes is a Docker memory size as a quantity, as Docker's
// RAMInBytes reads it: a decimal number, an optional blank, and an
// optional unit k, m, g, t or p (either case, each 1024 times the last),
// which may be followed by i and b ("512m", "2Gi", "1GiB", "100b").
// Errors: not a size; under 6 MiB (Docker's least --memory); more than
// 1 PiB.
func dockerBytes(v string) (resource.Quantity, error) {
	s := strings.ToLower(v)
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimPrefix(s[i:], " ")
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || math.IsNaN(f) {
		return resource.Quantity{}, fmt.Errorf("not a size (a number with k, m, g or t)")
	}
	unit = strings.TrimSuffix(unit, "b")
	unit = strings.TrimSuffix(unit, "i")
	shift := map[string]uint{"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}
	sh, ok := shift[unit]
	if !ok {
		return resource.Quantity{}, fmt.Errorf("unit %q: not k, m, g, t or p", strings.TrimPrefix(s[i:], " "))
	}
	bytes := f * float64(uint64(1)<<sh)
	switch {
	case bytes > float64(uint64(1)<<50):
		return resource.Quantity{}, fmt.Errorf("more memory than any node has")
	case bytes < 6<<20:
		return resource.Quantity{}, fmt.Errorf("below 6m, the least memory Docker gives a container")
	}
	return *resource.NewQuantity(int64(bytes), resource.BinarySI), nil
}

// splitOptions splits container.options as a shell would (the runner
// hands it to `docker create` in one command line): words separated by
// blanks, single and double quotes, backslash escapes.
func splitOptions(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated '")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, fmt.Errorf("unterminated \"")
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}
