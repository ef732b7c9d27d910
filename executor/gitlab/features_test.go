package gitlab

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

func TestServicesFromEnv(t *testing.T) {
	for name, tc := range map[string]struct {
		raw  string
		want []Service
		err  string
	}{
		"unset": {raw: ""},
		"null":  {raw: "null"},
		"empty": {raw: "[]", want: []Service{}},
		"as the runner writes them": {raw: `[{"name":"postgres:16","alias":"db","entrypoint":null,"command":null,"variables":{"POSTGRES_DB":"db_1001"}},{"name":"redis:7","alias":"cache","entrypoint":["redis-server"],"command":["--port","6380"]}]`,
			want: []Service{{Name: "postgres:16", Alias: "db", Variables: map[string]string{"POSTGRES_DB": "db_1001"}},
				{Name: "redis:7", Alias: "cache", Entrypoint: []string{"redis-server"}, Command: []string{"--port", "6380"}}}},
		"not json":             {raw: `[{"name":`, err: "want a JSON array"},
		"an object":            {raw: `{"name":"x"}`, err: "want a JSON array"},
		"no name":              {raw: `[{"alias":"db"}]`, err: "service 0 has no name"},
		"alias not a host":     {raw: `[{"name":"x","alias":"Db_1"}]`, err: `alias "Db_1"`},
		"variable name with =": {raw: `[{"name":"x","variables":{"A=B":"1"}}]`, err: `variable "A=B"`},
		"empty variable name":  {raw: `[{"name":"x","variables":{"":"1"}}]`, err: `variable ""`},
		"space in the image":   {raw: `[{"name":" redis:7 "}]`, err: "is not an image name"},
		// Parsed per pool: a long name must not cost more than it is worth.
		"a huge image name": {raw: `[{"name":"a` + strings.Repeat(":", 40000) + `"}]`, err: "is not an image name"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ServicesFromEnv(Env{"CUSTOM_ENV_CI_JOB_SERVICES": tc.raw})
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestServiceHostnames(t *testing.T) {
	for _, tc := range []struct {
		svc  Service
		want []string
	}{
		{Service{Name: "postgres:16"}, []string{"postgres"}},
		{Service{Name: "redis:7", Alias: "cache"}, []string{"redis", "cache"}},
		{Service{Name: "redis", Alias: "cache,kv"}, []string{"redis", "cache", "kv"}},
		// "__" is no DNS name: the executor keeps only the "-" form.
		{Service{Name: "tutum/wordpress:latest"}, []string{"tutum-wordpress"}},
		{Service{Name: "localhost/kube-e2e/busybox:v1", Alias: "web"}, []string{"localhost-kube-e2e-busybox", "web"}},
		{Service{Name: "registry.example.com:5000/group/img@sha256:0123"}, []string{"registry.example.com-group-img"}},
		{Service{Name: "Mixed/Case"}, nil},
		{Service{Name: "a" + strings.Repeat(":", 500)}, nil}, // no DNS name, and fast
	} {
		assert.Equal(t, tc.want, tc.svc.hostnames(), tc.svc.Name)
	}
}

const servicePools = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: alpine}
spec:
  selector: {matchLabels: {warmpod.dev/pool: alpine, warmpod.dev/state: idle}}
  template:
    metadata: {labels: {warmpod.dev/pool: alpine, warmpod.dev/state: idle}}
    spec:
      containers:
      - {name: build, image: alpine:3.20, command: [/wp/warmpod], imagePullPolicy: Never, resources: {requests: {cpu: 10m, memory: 32Mi}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: alpine-web}
spec:
  selector: {matchLabels: {warmpod.dev/pool: alpine-web, warmpod.dev/state: idle}}
  template:
    metadata: {labels: {warmpod.dev/pool: alpine-web, warmpod.dev/state: idle}}
    spec:
      hostAliases: [{ip: 127.0.0.1, hostnames: [nginx, web]}]
      containers:
      - {name: build, image: alpine:3.20, command: [/wp/warmpod]}
      - {name: svc-0, image: "nginx:1", env: [{name: GREETING, value: hi}, {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]}
`

func TestPickPoolByServices(t *testing.T) {
	set, err := pool.Parse(strings.NewReader(servicePools))
	require.NoError(t, err)
	web := Service{Name: "nginx:1", Alias: "web", Variables: map[string]string{"GREETING": "hi"}}
	for _, tc := range []struct {
		name  string
		image string
		svcs  []Service
		pool  string
		warm  bool
	}{
		{"no services: the plain pool", "alpine:3.20", nil, "alpine", true},
		{"no image, no services: the default pool", "", nil, "alpine", true},
		{"the pool's service", "alpine:3.20", []Service{web}, "alpine-web", true},
		{"another variable value", "alpine:3.20", []Service{{Name: "nginx:1", Alias: "web", Variables: map[string]string{"GREETING": "hello"}}}, "alpine", false},
		{"another alias", "alpine:3.20", []Service{{Name: "nginx:1", Alias: "www", Variables: map[string]string{"GREETING": "hi"}}}, "alpine", false},
		{"another command", "alpine:3.20", []Service{{Name: "nginx:1", Alias: "web", Command: []string{"-g", "daemon off;"}, Variables: map[string]string{"GREETING": "hi"}}}, "alpine", false},
		{"two services", "alpine:3.20", []Service{web, {Name: "redis:7"}}, "alpine", false},
		{"another image", "golang:1.26", []Service{web}, "alpine", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, warm := set.Choose(tc.image, sidecars(tc.svcs))
			assert.Equal(t, tc.pool, p.Name)
			assert.Equal(t, tc.warm, warm)
			if warm {
				return
			}
			// The cold template runs the job's services and resolves their names.
			var side []corev1.Container
			for _, c := range p.Template.Spec.Containers {
				if c.Name != p.Container {
					side = append(side, c)
				}
			}
			require.Len(t, side, len(tc.svcs))
			_, served := (&pool.Set{Pools: []pool.Pool{p}}).Choose(tc.image, sidecars(tc.svcs))
			assert.True(t, served, "the cold template serves what the job asks")
			for i, s := range tc.svcs {
				assert.Equal(t, "svc-"+string(rune('0'+i)), side[i].Name)
				assert.Equal(t, s.Name, side[i].Image)
				assert.Equal(t, corev1.PullNever, side[i].ImagePullPolicy, "the build container's pull policy")
			}
			if len(tc.svcs) > 0 {
				require.NotEmpty(t, p.Template.Spec.HostAliases)
				assert.Equal(t, "127.0.0.1", p.Template.Spec.HostAliases[0].IP)
				assert.Contains(t, p.Template.Spec.HostAliases[0].Hostnames, "nginx")
			}
			assert.Equal(t, pool.Hash(&p.Template), p.Hash, "the cold template's hash is its own")
		})
	}
}

func TestOverwrites(t *testing.T) {
	bounds := Bounds{CPURequest: "1", MemoryLimit: "1Gi", EphemeralStorageRequest: "2Gi"}
	for _, tc := range []struct {
		name  string
		env   Env
		want  string // executor.Describe() of the result, "" for none
		notes int
		err   string
	}{
		{"nothing asked", Env{}, "", 0, ""},
		{"no bound, no overwrite, one note each", Env{"CUSTOM_ENV_KUBERNETES_CPU_LIMIT": "2", "CUSTOM_ENV_KUBERNETES_MEMORY_REQUEST": "1Gi"}, "", 2, ""},
		{"within the bounds", Env{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "500m", "CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT": "256Mi"}, "requests cpu=500m, limits memory=256Mi", 2, ""},
		{"at the bound", Env{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "1000m"}, "requests cpu=1", 1, ""},
		{"ephemeral storage", Env{"CUSTOM_ENV_KUBERNETES_EPHEMERAL_STORAGE_REQUEST": "1Gi"}, "requests ephemeral-storage=1Gi", 1, ""},
		{"above the bound", Env{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "1500m"}, "", 0, `the resource "CPURequest" requested "1500m" is higher than limit allowed "1"`},
		{"not a quantity", Env{"CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT": "lots"}, "", 0, `KUBERNETES_MEMORY_LIMIT="lots": not a Kubernetes quantity`},
		{"negative", Env{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "-1"}, "", 0, `KUBERNETES_CPU_REQUEST="-1": a resource cannot be negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, notes, err := Overwrites(tc.env, bounds)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Len(t, notes, tc.notes)
			if tc.want == "" {
				assert.Nil(t, res)
				return
			}
			require.NotNil(t, res)
			assert.Equal(t, tc.want, executor.Describe(*res))
		})
	}
	assert.Error(t, Bounds{CPULimit: "two"}.Validate())
	assert.NoError(t, bounds.Validate())
}

// A variable its flag does not allow is ignored, as the Kubernetes
// executor ignores it, and the trace says so, naming the flag.
func TestOverwritesIgnoredSayWhichFlag(t *testing.T) {
	env := Env{}
	for _, o := range overwrites {
		env["CUSTOM_ENV_"+o.variable] = "1"
	}
	res, notes, err := Overwrites(env, Bounds{CPURequest: "2"})
	require.NoError(t, err)
	require.NotNil(t, res)
	assert.Equal(t, []string{
		`"CPURequest" overwritten with "1"`,
		`KUBERNETES_MEMORY_REQUEST="1" ignored: warmpod-gitlab prepare runs without --memory-request-overwrite-max-allowed, which would allow it`,
		`KUBERNETES_EPHEMERAL_STORAGE_REQUEST="1" ignored: warmpod-gitlab prepare runs without --ephemeral-storage-request-overwrite-max-allowed, which would allow it`,
		`KUBERNETES_CPU_LIMIT="1" ignored: warmpod-gitlab prepare runs without --cpu-limit-overwrite-max-allowed, which would allow it`,
		`KUBERNETES_MEMORY_LIMIT="1" ignored: warmpod-gitlab prepare runs without --memory-limit-overwrite-max-allowed, which would allow it`,
		`KUBERNETES_EPHEMERAL_STORAGE_LIMIT="1" ignored: warmpod-gitlab prepare runs without --ephemeral-storage-limit-overwrite-max-allowed, which would allow it`,
	}, notes)

	d, out := resizeDriver(t, &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Pool: "alpine", Bin: "/wp/warmpod"}}},
		map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_LIMIT": "2"})
	require.NoError(t, d.Prepare(context.Background()))
	assert.Contains(t, out.String(), "warmpod: KUBERNETES_CPU_LIMIT=\"2\" ignored: warmpod-gitlab prepare runs without --cpu-limit-overwrite-max-allowed")
}

func resizeDriver(t *testing.T, fc *fakeCluster, env map[string]string) (*Driver, *bytes.Buffer) {
	t.Helper()
	set, err := pool.Parse(strings.NewReader(servicePools))
	require.NoError(t, err)
	d, out, _ := newDriver(t, fc, env)
	kube(d).Pools = set
	kube(d).Bounds = Bounds{CPURequest: "2", MemoryLimit: "1Gi", EphemeralStorageLimit: "4Gi"}
	return d, out
}

func TestPrepareResizesAWarmPodInPlace(t *testing.T) {
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}}
	d, out := resizeDriver(t, fc, map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "500m", "CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT": "256Mi"})
	require.NoError(t, d.Prepare(context.Background()))
	assert.Equal(t, []string{"w1 requests cpu=500m memory=32Mi, limits memory=256Mi"}, resized(fc), "the template's request kept, the job's put over it")
	assert.Contains(t, out.String(), "warm pod w1 resized in place to requests cpu=500m memory=32Mi, limits memory=256Mi")
	assert.Contains(t, out.String(), "runs on warm pod w1")
	assert.Zero(t, len(fc.Colds()))
	assert.Empty(t, fc.Deleted())
}

func TestPrepareFallsBackColdWhenTheResizeFails(t *testing.T) {
	for _, rerr := range []error{pool.ErrResizeInfeasible, pool.ErrResizeNotApplied} {
		t.Run(rerr.Error(), func(t *testing.T) {
			// A node that fits: an infeasible answer is this node's only
			// (TestPrepareInfeasibleResizeSpendsNoPod has the rest).
			fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}},
				OnResize: func(poolapi.Pod, corev1.ResourceRequirements) error { return rerr },
				NodeList: []pool.Node{fakeNode("big", "4", "8Gi")}}
			d, out := resizeDriver(t, fc, map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "2"})
			require.NoError(t, d.Prepare(context.Background()))
			assert.Equal(t, []string{"w1"}, fc.Deleted(), "the claim is released (not given back: deleted)")
			require.Len(t, fc.Colds(), 1)
			c := fc.Colds()[0].BuildContainer(&fc.Colds()[0].Template)
			assert.Equal(t, "2", c.Resources.Requests.Cpu().String(), "the cold pod gets the job's resources")
			assert.Equal(t, "32Mi", c.Resources.Requests.Memory().String())
			assert.Contains(t, out.String(), "warm pod w1 released: resize to requests cpu=2 memory=32Mi")
			assert.Contains(t, out.String(), "runs on cold pod cold-1")
		})
	}
}

// A resize the API server refuses is refused before the claim: no pod is
// claimed or deleted.
func TestPrepareGoesColdWhenNoPodCanBeResized(t *testing.T) {
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}},
		RefuseResize: fmt.Errorf("%w: the QoS class would change", pool.ErrResizeUnsupported)}
	d, out := resizeDriver(t, fc, map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "2"})
	require.NoError(t, d.Prepare(context.Background()))
	assert.Empty(t, fc.Deleted(), "nothing claimed, nothing released")
	require.Len(t, fc.Colds(), 1)
	c := fc.Colds()[0].BuildContainer(&fc.Colds()[0].Template)
	assert.Equal(t, "2", c.Resources.Requests.Cpu().String(), "the cold pod gets the job's resources")
	assert.Contains(t, out.String(), "warm pods of pool alpine cannot be resized in place: in-place resize not possible: the QoS class would change: creating a cold pod")
	assert.Contains(t, out.String(), "runs on cold pod cold-1")
}

func TestPrepareEphemeralStorageGoesCold(t *testing.T) {
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}}
	d, out := resizeDriver(t, fc, map[string]string{"CUSTOM_ENV_KUBERNETES_EPHEMERAL_STORAGE_LIMIT": "4Gi"})
	require.NoError(t, d.Prepare(context.Background()))
	assert.Empty(t, resized(fc))
	assert.Len(t, fc.Warm, 1, "no warm pod claimed")
	require.Len(t, fc.Colds(), 1)
	assert.Contains(t, out.String(), "ephemeral storage cannot change on a running pod")
}

func TestServiceContainerNamesDoNotCollide(t *testing.T) {
	set, err := pool.Parse(strings.NewReader(strings.ReplaceAll(servicePools, "name: build,", "name: svc-0,")))
	require.NoError(t, err)
	p, warm := set.Choose("alpine:3.20", sidecars([]Service{{Name: "redis:7"}, {Name: "nginx:1"}}))
	require.False(t, warm)
	var names []string
	for _, c := range p.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"svc-0", "svc-0-1", "svc-1"}, names)
}

func TestPrepareRefusesARequestAboveItsLimit(t *testing.T) {
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}}
	// The pool requests 32Mi; a 16Mi limit is below it.
	d, _ := resizeDriver(t, fc, map[string]string{"CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT": "16Mi"})
	err := d.Prepare(context.Background())
	var se *SystemError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "the memory request 32Mi is above its limit 16Mi")
	assert.Len(t, fc.Warm, 1, "nothing claimed")
	assert.Zero(t, len(fc.Colds()))
}

func TestPrepareRefusesAnOverwriteAboveItsBound(t *testing.T) {
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}}
	d, _ := resizeDriver(t, fc, map[string]string{"CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT": "2Gi"})
	err := d.Prepare(context.Background())
	var se *SystemError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), `the resource "MemoryLimit" requested "2Gi" is higher than limit allowed "1Gi"`)
	assert.Len(t, fc.Warm, 1)
	assert.Zero(t, len(fc.Colds()))
	assert.Empty(t, execs(fc))
}

func TestPrepareReadsThePoolsFromTheCluster(t *testing.T) {
	set, err := pool.Parse(strings.NewReader(servicePools))
	require.NoError(t, err)
	set.Warnings = []string{`Deployment "broken": no container runs warmpod`}
	fc := &fakeCluster{Set: set, Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine-web"}}}
	d, out, _ := newDriver(t, fc, map[string]string{"CUSTOM_ENV_CI_JOB_SERVICES": `[{"name":"nginx:1","alias":"web","entrypoint":null,"command":null,"variables":{"GREETING":"hi"}}]`})
	kube(d).Pools = nil
	require.NoError(t, d.Prepare(context.Background()))
	assert.Contains(t, out.String(), "runs on warm pod w1 (pool alpine-web)")
	assert.Contains(t, out.String(), `WARNING: not a usable pool: Deployment "broken"`)

	fc = &fakeCluster{}
	d, _, _ = newDriver(t, fc, nil)
	kube(d).Pools = nil
	err = d.Prepare(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read the pools from the cluster: no pools in this fake")
	assert.NotContains(t, err.Error(), "deployments and replicasets", "the RBAC hint is for a 403 only (executor.Hint)")
	assert.Zero(t, len(fc.Colds()))
}

func TestPrepareRefusesMalformedServices(t *testing.T) {
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true}}}
	d, _, _ := newDriver(t, fc, map[string]string{"CUSTOM_ENV_CI_JOB_SERVICES": `{"oops"`})
	err := d.Prepare(context.Background())
	var se *SystemError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "CUSTOM_ENV_CI_JOB_SERVICES")
	assert.Len(t, fc.Warm, 1, "nothing claimed")
}
