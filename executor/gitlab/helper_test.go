package gitlab

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// payloadFile writes a job payload as the runner writes $JOB_RESPONSE_FILE.
func payloadFile(t *testing.T, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "response.json")
	require.NoError(t, os.WriteFile(f, []byte(body), 0o600))
	return f
}

func TestHelperNeeds(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		want []string
		err  string
	}{
		"nothing":                        {body: `{"id":1,"token":"x","artifacts":null,"cache":null,"dependencies":null}`},
		"a cache key without paths":      {body: `{"cache":[{"key":"k","paths":[],"untracked":false}]}`},
		"artifacts":                      {body: `{"artifacts":[{"name":"a","paths":["out.txt"],"when":"on_success"}]}`, want: []string{"artifacts"}},
		"untracked":                      {body: `{"artifacts":[{"untracked":true}]}`, want: []string{"artifacts"}},
		"cache and artifacts":            {body: `{"artifacts":[{"paths":["out.txt"]}],"cache":[{"key":"k","paths":["vendor/"]}]}`, want: []string{"caches", "artifacts"}},
		"a dependency's artifacts":       {body: `{"dependencies":[{"id":7,"name":"build","artifacts_file":{"filename":"artifacts.zip","size":10}}]}`, want: []string{"artifacts of dependencies"}},
		"a dependency without artifacts": {body: `{"dependencies":[{"id":7,"name":"build","artifacts_file":{"filename":"","size":0}}]}`},
		"not json":                       {body: `{"artifacts":`, err: "JOB_RESPONSE_FILE"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := HelperNeeds(Env{"JOB_RESPONSE_FILE": payloadFile(t, tc.body)})
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	got, err := HelperNeeds(Env{})
	require.NoError(t, err)
	assert.Nil(t, got, "no $JOB_RESPONSE_FILE (a driver called by hand): nothing known")
	_, err = HelperNeeds(Env{"JOB_RESPONSE_FILE": "/nonexistent/response.json"})
	assert.Error(t, err)
}

// helperPool is a pool whose template has initContainers and annotations
// as given (YAML flow).
func helperPool(t *testing.T, image, inits, annotations string) pool.Pool {
	t.Helper()
	m := `
apiVersion: apps/v1
kind: Deployment
metadata: {name: alpine}
spec:
  selector: {matchLabels: {warmpod.dev/pool: alpine, warmpod.dev/state: idle}}
  template:
    metadata: {labels: {warmpod.dev/pool: alpine, warmpod.dev/state: idle}, annotations: ` + annotations + `}
    spec:
      initContainers: ` + inits + `
      containers:
      - {name: build, image: ` + image + `, command: [/wp/warmpod]}
`
	set, err := pool.Parse(strings.NewReader(m))
	require.NoError(t, err)
	return set.Pools[0]
}

func TestHasRunnerHelper(t *testing.T) {
	const copyIn = `[{name: install-gitlab-runner-helper, image: registry.gitlab.com/gitlab-org/gitlab-runner/gitlab-runner-helper:x86_64-latest, command: [cp, /usr/bin/gitlab-runner-helper, /opt/warmpod/gitlab-runner]}]`
	for name, tc := range map[string]struct {
		image, inits, annotations string
		want                      bool
	}{
		"deploy/pool.yaml's init container": {"alpine:3.20", copyIn, "{}", true},
		"kube-e2e's, named by its command":  {"busybox", `[{name: h, image: localhost/warmpod-gitlab-helper:dev, command: [cp, /usr/bin/gitlab-runner-helper, /gitlab-helper/gitlab-runner]}]`, "{}", true},
		"a shell that copies it":            {"busybox", `[{name: h, image: example.com/tools:1, command: [sh, -c, "cp /usr/bin/gitlab-runner-helper /t/gitlab-runner"]}]`, "{}", true},
		"only warmpod's init container":     {"alpine:3.20", `[{name: install-warmpod, image: example.com/warmpod:v1, command: [/warmpod, install, /opt/warmpod]}]`, "{}", false},
		"no init container":                 {"alpine:3.20", "[]", "{}", false},
		"the runner's own image":            {"registry.gitlab.com/gitlab-org/gitlab-runner:v18.0.0", "[]", "{}", true},
		"an image that only looks like it":  {"example.com/gitlab-runner-tools:1", "[]", "{}", false},
		"annotated true":                    {"example.com/ci-with-runner:1", "[]", `{warmpod.dev/gitlab-runner-helper: "true"}`, true},
		"annotated false wins":              {"alpine:3.20", copyIn, `{warmpod.dev/gitlab-runner-helper: "false"}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, why := HasRunnerHelper(helperPool(t, tc.image, tc.inits, tc.annotations))
			assert.Equal(t, tc.want, got, why)
			assert.NotEmpty(t, why)
		})
	}
}

// A job with artifacts or caches on a pool without the helper fails at
// prepare, naming the pool and what is missing, before anything is
// claimed; the same job on a pool with it, or a job without them, runs.
func TestPrepareRefusesArtifactsWithoutTheHelper(t *testing.T) {
	withArtifacts := `{"artifacts":[{"name":"a","paths":["out.txt"]}],"cache":[{"key":"k","paths":["vendor/"]}]}`
	for name, tc := range map[string]struct {
		inits, payload string
		err            string
	}{
		"no helper, artifacts and caches": {inits: "[]", payload: withArtifacts,
			err: "the job has caches and artifacts, which GitLab Runner's helper binary (gitlab-runner on the build container's PATH) handles, but pool alpine's pods have none"},
		"no helper, nothing asked": {inits: "[]", payload: `{"artifacts":null}`},
		"the helper":               {inits: `[{name: h, image: x/gitlab-runner-helper:v1, command: [cp, /usr/bin/gitlab-runner-helper, /t/gitlab-runner]}]`, payload: withArtifacts},
	} {
		t.Run(name, func(t *testing.T) {
			fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}}
			d, out, _ := newDriver(t, fc, map[string]string{"JOB_RESPONSE_FILE": payloadFile(t, tc.payload)})
			kube(d).Pools = &pool.Set{Pools: []pool.Pool{helperPool(t, "alpine:3.20", tc.inits, "{}")}}
			err := d.Prepare(context.Background())
			if tc.err == "" {
				require.NoError(t, err)
				assert.Contains(t, out.String(), "runs on warm pod w1")
				return
			}
			var se *SystemError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, err.Error(), tc.err)
			assert.Contains(t, err.Error(), "install-gitlab-runner-helper")
			assert.Len(t, fc.Warm, 1, "nothing claimed")
			assert.Zero(t, len(fc.Colds()), "nothing created")
			assert.Empty(t, execs(fc))
		})
	}
}

// A job that calls the helper gets ARCHIVER_STAGING_DIR, the builds
// volume, in job start's spec: the helper stages archives there, not in
// $TMPDIR on the pod's memory-backed run volume, where 100 MiB failed
// with "no space left on device". A job without artifacts or caches gets
// nothing more.
func TestPrepareStagesTheHelperOnTheBuildsVolume(t *testing.T) {
	helper := `[{name: h, image: x/gitlab-runner-helper:v1, command: [cp, /usr/bin/gitlab-runner-helper, /t/gitlab-runner]}]`
	for name, tc := range map[string]struct {
		payload string
		want    []any
	}{
		"artifacts": {payload: `{"artifacts":[{"name":"a","paths":["out/"]}]}`,
			want: []any{map[string]any{"key": "ARCHIVER_STAGING_DIR", "value": "/builds"}}},
		"a cache": {payload: `{"cache":[{"key":"k","paths":["vendor/"]}]}`,
			want: []any{map[string]any{"key": "ARCHIVER_STAGING_DIR", "value": "/builds"}}},
		"a dependency's artifacts": {payload: `{"dependencies":[{"id":7,"artifacts_file":{"filename":"artifacts.zip","size":10}}]}`,
			want: []any{map[string]any{"key": "ARCHIVER_STAGING_DIR", "value": "/builds"}}},
		"nothing for the helper": {payload: `{"artifacts":null}`, want: []any{}},
	} {
		t.Run(name, func(t *testing.T) {
			fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}}
			d, _, _ := newDriver(t, fc, map[string]string{"JOB_RESPONSE_FILE": payloadFile(t, tc.payload)})
			kube(d).Pools = &pool.Set{Pools: []pool.Pool{helperPool(t, "alpine:3.20", helper, "{}")}}
			require.NoError(t, d.Prepare(context.Background()))
			require.NotEmpty(t, stdins(fc))
			var spec map[string]any
			require.NoError(t, json.Unmarshal([]byte(stdins(fc)[0]), &spec))
			assert.Equal(t, tc.want, spec["variables"])
		})
	}
}
