// Package pool is the Kubernetes side of both executors (client-go): warm
// pools read from a Deployment manifest, the claim of one Ready idle pod
// with the API server's optimistic concurrency as the only arbiter, the
// cold fallback from the same template, and exec into a pod the way
// kubectl does it (WebSocket, SPDY fallback), all with client-go.
//
// A pool is a Deployment whose pod template carries the labels
// warmpod.dev/pool=NAME and warmpod.dev/state=idle (its selector) and
// warmpod.dev/config=HASH. A claim changes state to "claimed" with the
// pod's resourceVersion as a precondition: of many runners patching the
// same pod, the API server lets exactly one win (409 Conflict for the
// others, which try the next pod). The changed label takes the pod out of
// the ReplicaSet's selector, so the ReplicaSet releases it and starts a
// replacement at once: the pool refills itself, and `kubectl scale` or an
// HPA sets how many warm pods there are.
package pool

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/warmpod/warmpod/poolapi"
)

// Pool is one warm pool: a Deployment of the manifest.
type Pool struct {
	// Name is the Deployment's name and the pods' poolapi.LabelPool value.
	Name string
	// Image is the image of the container that runs warmpod: jobs whose
	// image: is this one run on this pool.
	Image string
	// Container is the name of that container.
	Container string
	// Bin is the warmpod binary's path in that container.
	Bin string
	// Hash is the configuration hash of the pods the driver may claim:
	// their HashLabel value and the job's config_hash. For a poolapi.LabelConfig
	// pool it is [Hash] of the template; for a poolapi.LabelTemplateHash pool the
	// current ReplicaSet's pod-template-hash.
	Hash string
	// HashLabel is the pod label that carries the hash: the one the
	// warmpod container's WARMPOD_CONFIG_HASH reads through the downward
	// API (poolapi.LabelConfig when it reads none).
	HashLabel string
	// FileHash is the poolapi.LabelConfig value written in the template: when it
	// differs from Hash the manifest was edited without its new hash, and
	// the pods applied from it are never claimed (see [Pool.Stale]).
	FileHash string
	// Pending is true for a pool read from the cluster whose Deployment
	// has no ReplicaSet of its live template yet (a rollout has just
	// begun): none of its pods may be claimed, jobs get cold pods.
	Pending bool
	// Template is the pod template, labels included.
	Template corev1.PodTemplateSpec
	// PodStart is the pool controller's measured start of the pool's pods
	// (creation to Ready: podStartSeconds of poolapi.AnnotationSizing),
	// 0 when unknown (no controller, a pool from a manifest). Read by
	// ClaimStarting.
	PodStart time.Duration
}

// Set is the pools of a manifest; the first is the default, whose
// template makes cold pods for images that have no pool.
type Set struct {
	Pools []Pool
	// Warnings name the Deployments a read from the cluster left out
	// (not usable as a pool), for the job's log.
	Warnings []string
}

// ErrManifest is returned for a manifest that holds no usable pool.
var ErrManifest = errors.New("pool manifest")

// Load reads the pools from a YAML or JSON file holding one or more
// Deployments (other kinds, such as a ServiceAccount or Role applied from
// the same file, are skipped). Errors wrap [ErrManifest]: no Deployment, a
// Deployment without the pool labels in its template, or no container
// that runs warmpod.
func Load(file string) (*Set, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse is [Load] on a reader.
func Parse(r io.Reader) (*Set, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 64<<10)
	set := &Set{}
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%w: %v", ErrManifest, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrManifest, err)
		}
		if meta.Kind != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("%w: Deployment: %v", ErrManifest, err)
		}
		p, err := fromDeployment(&d, false)
		if err != nil {
			return nil, err
		}
		set.Pools = append(set.Pools, p)
	}
	if len(set.Pools) == 0 {
		return nil, fmt.Errorf("%w: no Deployment", ErrManifest)
	}
	return set, nil
}

// fromDeployment reads the pool of a Deployment. live is false for a
// manifest file: its pods can only be told apart by poolapi.LabelConfig, since
// the pod-template-hash of a ReplicaSet is known only to the cluster.
func fromDeployment(d *appsv1.Deployment, live bool) (Pool, error) {
	t := d.Spec.Template
	name := t.Labels[poolapi.LabelPool]
	if name == "" || t.Labels[poolapi.LabelState] != poolapi.StateIdle {
		return Pool{}, fmt.Errorf("%w: Deployment %q: its pod template needs the labels %s=NAME and %s=%s", ErrManifest, d.Name, poolapi.LabelPool, poolapi.LabelState, poolapi.StateIdle)
	}
	sel := d.Spec.Selector
	if sel == nil || sel.MatchLabels[poolapi.LabelPool] != name || sel.MatchLabels[poolapi.LabelState] != poolapi.StateIdle {
		return Pool{}, fmt.Errorf("%w: Deployment %q: its selector must match %s=%s and %s=%s, so that a claimed pod leaves the ReplicaSet", ErrManifest, d.Name, poolapi.LabelPool, name, poolapi.LabelState, poolapi.StateIdle)
	}
	c := warmpodContainer(&t.Spec)
	if c == nil {
		return Pool{}, fmt.Errorf("%w: Deployment %q: no container runs warmpod (command[0] named warmpod, or the %s annotation)", ErrManifest, d.Name, poolapi.AnnotationBin)
	}
	p := Pool{Name: name, Image: c.Image, Container: c.Name, Bin: binOf(&t, c), Template: *t.DeepCopy(),
		FileHash: t.Labels[poolapi.LabelConfig], HashLabel: hashLabel(c)}
	switch p.HashLabel {
	case poolapi.LabelConfig:
		p.rehash()
	case poolapi.LabelTemplateHash:
		if !live {
			return Pool{}, fmt.Errorf("%w: Deployment %q: WARMPOD_CONFIG_HASH reads %s, which only the cluster knows: let the driver read the pools from the cluster (no --pools), or label the template with %s", ErrManifest, d.Name, poolapi.LabelTemplateHash, poolapi.LabelConfig)
		}
		// The caller sets Hash from the current ReplicaSet.
	default:
		return Pool{}, fmt.Errorf("%w: Deployment %q: WARMPOD_CONFIG_HASH reads the label %q: want %s or %s", ErrManifest, d.Name, p.HashLabel, poolapi.LabelTemplateHash, poolapi.LabelConfig)
	}
	return p, nil
}

// hashLabel is the label c's WARMPOD_CONFIG_HASH reads through the
// downward API (metadata.labels['KEY']), poolapi.LabelConfig when it reads none:
// the hash the driver sends must be the one warmpod compares it with.
func hashLabel(c *corev1.Container) string {
	for _, e := range c.Env {
		if e.Name != "WARMPOD_CONFIG_HASH" || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			continue
		}
		f := e.ValueFrom.FieldRef.FieldPath
		if k, ok := strings.CutPrefix(f, "metadata.labels['"); ok && strings.HasSuffix(k, "']") {
			return strings.TrimSuffix(k, "']")
		}
		return f
	}
	return poolapi.LabelConfig
}

// rehash sets Hash to [Hash] of the template and writes it into the
// template's HashLabel: the template of a cold pod, or of a file's pool.
func (p *Pool) rehash() {
	p.Hash = Hash(&p.Template)
	if p.Template.Labels == nil {
		p.Template.Labels = map[string]string{}
	}
	p.Template.Labels[p.hashKey()] = p.Hash
}

// hashKey is HashLabel, poolapi.LabelConfig when unset (a Pool built by hand).
func (p Pool) hashKey() string {
	if p.HashLabel == "" {
		return poolapi.LabelConfig
	}
	return p.HashLabel
}

// Stale tells that the manifest's poolapi.LabelConfig is not the hash of its
// template (edited without `pool-hash`): pods applied from it are never
// claimed warm, and the driver says so in the job's log.
func (p Pool) Stale() bool {
	return p.hashKey() == poolapi.LabelConfig && p.FileHash != p.Hash && !p.Pending
}

// Modified returns a copy of p whose template edit has changed, with the
// hash recomputed: the template of a cold pod (another image, services,
// resources). edit gets a deep copy.
func (p Pool) Modified(edit func(t *corev1.PodTemplateSpec)) Pool {
	p.Template = *p.Template.DeepCopy()
	edit(&p.Template)
	p.rehash()
	return p
}

// BuildContainer is p's warmpod container in t (nil if t has none).
func (p Pool) BuildContainer(t *corev1.PodTemplateSpec) *corev1.Container {
	for i := range t.Spec.Containers {
		if t.Spec.Containers[i].Name == p.Container {
			return &t.Spec.Containers[i]
		}
	}
	return nil
}

// warmpodContainer is the container whose command[0] is a warmpod binary,
// else the first container.
func warmpodContainer(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if len(c.Command) > 0 && path.Base(c.Command[0]) == "warmpod" {
			return c
		}
	}
	if len(spec.Containers) > 0 {
		return &spec.Containers[0]
	}
	return nil
}

func binOf(t *corev1.PodTemplateSpec, c *corev1.Container) string {
	if b := t.Annotations[poolapi.AnnotationBin]; b != "" {
		return b
	}
	if len(c.Command) > 0 && path.Base(c.Command[0]) == "warmpod" {
		return c.Command[0]
	}
	return "warmpod"
}

// Hash is the configuration hash of a pod template: the first 32 hex
// digits of the SHA-256 of its JSON form without the hash labels
// (poolapi.LabelConfig, poolapi.LabelTemplateHash)
// (encoding/json writes struct fields in order and map keys sorted, so
// equal templates hash equally). Put it in the template as poolapi.LabelConfig
// (`warmpod-gitlab pool-hash FILE` prints it): the driver claims only pods
// that carry the hash of the template it would use for a cold pod.
func Hash(t *corev1.PodTemplateSpec) string {
	c := t.DeepCopy()
	delete(c.Labels, poolapi.LabelConfig)
	delete(c.Labels, poolapi.LabelTemplateHash)
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// ForImage picks the pool for a job's image: the pool whose warmpod
// container runs that image (the default pool, the first, when image is
// empty). With no such pool it returns the default pool with the image
// swapped into a copy of its template (and the hash recomputed) and
// warm=false: that job gets a cold pod of its own image, which works
// because the template installs warmpod from an init container.
func (s *Set) ForImage(image string) (p Pool, warm bool) {
	if image == "" {
		return s.Pools[0], true
	}
	for _, p := range s.Pools {
		if p.Image == image {
			return p, true
		}
	}
	p = s.Pools[0].Modified(func(t *corev1.PodTemplateSpec) {
		if c := s.Pools[0].BuildContainer(t); c != nil {
			c.Image = image
		}
	})
	p.Image = image
	return p, false
}

// Sidecars returns the images of p's containers other than the one that
// runs warmpod, in template order: the services a job on p gets.
func (p Pool) Sidecars() []string {
	var out []string
	for _, c := range p.Template.Spec.Containers {
		if c.Name != p.Container {
			out = append(out, c.Image)
		}
	}
	return out
}

// WithSidecars returns p with its containers other than warmpod's
// replaced by sidecars (each gets the warmpod container's image pull
// policy when it sets none) and the hash recomputed: the template of a
// cold pod for a job whose services no pool has.
func (p Pool) WithSidecars(sidecars []corev1.Container) Pool {
	return p.Modified(func(t *corev1.PodTemplateSpec) {
		spec := &t.Spec
		var keep []corev1.Container
		var policy corev1.PullPolicy
		for _, c := range spec.Containers {
			if c.Name == p.Container {
				keep = append(keep, c)
				policy = c.ImagePullPolicy
			}
		}
		for _, c := range sidecars {
			if c.ImagePullPolicy == "" {
				c.ImagePullPolicy = policy
			}
			keep = append(keep, c)
		}
		spec.Containers = keep
	})
}
