package pool

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func choosePool(name, image string, aliases []string, side ...corev1.Container) Pool {
	t := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: append([]corev1.Container{{Name: "build", Image: image}}, side...)}}
	if aliases != nil {
		t.Spec.HostAliases = []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: aliases}}
	}
	return Pool{Name: name, Image: image, Container: "build", Template: t}
}

// The one pool choice of both drivers: warm only when a pool runs the
// image and serves every sidecar, reached by its names; else cold, from
// the image's pool or the default, with the sidecars put in.
func TestChoose(t *testing.T) {
	redis := corev1.Container{Name: "redis", Image: "redis:7"}
	set := &Set{Pools: []Pool{
		choosePool("plain", "alpine:3.20", nil),
		choosePool("with-redis", "alpine:3.20", []string{"redis"}, redis),
		choosePool("go", "golang:1.26", nil),
	}}
	wantRedis := Sidecar{Container: corev1.Container{Image: "redis:7"}, Hostnames: []string{"redis"}}
	for _, tc := range []struct {
		name, image string
		sidecars    []Sidecar
		pool        string
		warm        bool
		side        []string // the chosen template's other containers
		aliases     []string
	}{
		{"no services, the image's first pool", "alpine:3.20", nil, "plain", true, nil, nil},
		{"no image: the first pool's", "", nil, "plain", true, nil, nil},
		{"the pool that runs the service", "alpine:3.20", []Sidecar{wantRedis}, "with-redis", true, []string{"redis"}, []string{"redis"}},
		{"a name the pool does not map: cold", "alpine:3.20", []Sidecar{{Container: redis, Hostnames: []string{"cache"}}}, "plain", false, []string{"svc-0"}, []string{"cache"}},
		{"the CI's own rule refuses the pool's container: cold", "alpine:3.20",
			[]Sidecar{{Container: redis, Hostnames: []string{"redis"}, Serves: func(c corev1.Container) bool { return len(c.Env) > 0 }}},
			"plain", false, []string{"svc-0"}, []string{"redis"}},
		{"a service on an image without a pool of its own", "golang:1.26", []Sidecar{wantRedis}, "go", false, []string{"svc-0"}, []string{"redis"}},
		{"an image no pool runs: the default's template", "debian:12", nil, "plain", false, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, warm := set.Choose(tc.image, tc.sidecars)
			assert.Equal(t, tc.pool, p.Name)
			assert.Equal(t, tc.warm, warm)
			var side []string
			for _, c := range p.Template.Spec.Containers[1:] {
				side = append(side, c.Name)
			}
			assert.Equal(t, tc.side, side)
			var aliases []string
			for _, h := range p.Template.Spec.HostAliases {
				aliases = append(aliases, h.Hostnames...)
			}
			assert.Equal(t, tc.aliases, aliases)
			if tc.image != "" {
				assert.Equal(t, tc.image, p.Template.Spec.Containers[0].Image)
			}
		})
	}
}

// A cold pod's service containers never take a name the template uses.
func TestChooseNamesAroundTakenNames(t *testing.T) {
	p := choosePool("p", "alpine:3.20", nil)
	p.Template.Spec.InitContainers = []corev1.Container{{Name: "svc-0"}}
	set := &Set{Pools: []Pool{p}}
	got, warm := set.Choose("alpine:3.20", []Sidecar{{Container: corev1.Container{Image: "a"}}, {Container: corev1.Container{Image: "b"}}})
	assert.False(t, warm)
	assert.Equal(t, "svc-0-1", got.Template.Spec.Containers[1].Name)
	assert.Equal(t, "svc-1", got.Template.Spec.Containers[2].Name)
}
