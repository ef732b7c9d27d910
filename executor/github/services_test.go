package github

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor/pool"
)

// A service is reachable by the name the upstream hook gives its
// container (from the image), and by its label when the runner sends one.
func TestServiceHostnames(t *testing.T) {
	for _, tc := range []struct {
		name           string
		services       []Container
		names, dropped []string
	}{
		{"none", nil, nil, nil},
		{"the image's name", []Container{{Image: "localhost/hooks/svc:v1"}}, []string{"svc"}, nil},
		{"a registry port, a path, a tag and a digest cut off", []Container{{Image: "registry.example.com:5000/team/postgres:16@sha256:0123"}}, []string{"postgres"}, nil},
		{"an image without tag", []Container{{Image: "redis"}}, []string{"redis"}, nil},
		{"the label first, when the runner sends it", []Container{{Image: "localhost/hooks/svc:v1", ContextName: "websvc"}}, []string{"websvc", "svc"}, nil},
		{"a label lower-cased", []Container{{Image: "postgres:16", ContextName: "DB"}}, []string{"db", "postgres"}, nil},
		{"each name once", []Container{{Image: "postgres:16", ContextName: "postgres"}, {Image: "postgres:15", ContextName: "old"}}, []string{"postgres", "old"}, nil},
		{"a label that is no DNS name is dropped", []Container{{Image: "mysql:8", ContextName: "my_db"}}, []string{"mysql"}, []string{"my_db"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, dropped := serviceHostnames(tc.services)
			assert.Equal(t, tc.names, names)
			assert.Equal(t, tc.dropped, dropped)
		})
	}
}

// svcPools is testPools with a second pool whose pods run the job image
// and the svc service, its names mapped as hostAliases says.
func svcPools(hostAliases string) string {
	return testPools + `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: job-svc}
spec:
  selector: {matchLabels: {warmpod.dev/pool: job-svc, warmpod.dev/state: idle}}
  template:
    metadata:
      labels: {warmpod.dev/pool: job-svc, warmpod.dev/state: idle}
    spec:
` + hostAliases + `
      containers:
      - {name: job, image: localhost/hooks/job:v1, command: [/warmpod/warmpod], imagePullPolicy: Never}
      - {name: svc, image: localhost/hooks/svc:v1, imagePullPolicy: Never}
`
}

// A warm pool serves a job's services only when its template maps their
// names to 127.0.0.1: its pods were made before the job. Any other job
// gets a cold pod whose hostAliases map them.
func TestPickPoolServiceNames(t *testing.T) {
	const withSvc = "      hostAliases: [{ip: 127.0.0.1, hostnames: [svc]}]"
	svc := []Container{{Image: "localhost/hooks/svc:v1"}}
	for _, tc := range []struct {
		name, aliases string
		services      []Container
		warm          bool
		pool          string
		hosts         []corev1.HostAlias
	}{
		{"the pool maps the service's name: warm", withSvc, svc, true, "job-svc",
			[]corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"svc"}}}},
		{"the pool does not map it: cold from the image's pool, mapped", "", svc, false, "job",
			[]corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"svc"}}}},
		{"a label the pool does not map: cold, both mapped", withSvc, []Container{{Image: "localhost/hooks/svc:v1", ContextName: "websvc"}}, false, "job",
			[]corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"websvc", "svc"}}}},
		{"no services: the pool without them, warm, no names", withSvc, nil, true, "job", nil},
		{"services no pool runs: cold from the image's pool", withSvc, []Container{{Image: "postgres:16"}}, false, "job",
			[]corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"postgres"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := pool.Parse(strings.NewReader(svcPools(tc.aliases)))
			require.NoError(t, err)
			sidecars, err := pickSidecars(tc.services)
			require.NoError(t, err)
			p, warm := set.Choose("localhost/hooks/job:v1", sidecars)
			assert.Equal(t, tc.warm, warm)
			assert.Equal(t, tc.pool, p.Name)
			assert.Equal(t, tc.hosts, p.Template.Spec.HostAliases)
			if !warm {
				assert.Equal(t, pool.Hash(&p.Template), p.Hash, "a cold pod's hash is its template's, hostAliases included")
			}
		})
	}
}

// prepare_job through a fake cluster: the cold pod made for a job's
// service maps its name, and a label that is no DNS name is warned of.
func TestPrepareJobServiceNamesInTheColdPod(t *testing.T) {
	r := newRunner(t)
	f := &fakeCluster{}
	h, _, errb := r.hook(f)
	code, _ := r.call(h, CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: "localhost/hooks/job:v1"},
		Services: []Container{{Image: "localhost/hooks/svc:v1", ContextName: "web_svc"}}}, nil, nil)
	require.Equal(t, 0, code)
	require.Len(t, f.Colds(), 1)
	assert.Equal(t, []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"svc"}}}, f.Colds()[0].Template.Spec.HostAliases)
	assert.Contains(t, errb.String(), `::warning::warmpod: service names ["web_svc"] are not DNS names`)
}
