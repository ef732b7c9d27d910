//go:build kube

package kubee2e

// The GitLab driver with pools as users set them up (issue 27): a pool
// whose pods run jobs as a job user (--job-user) with the shipped
// template's capabilities, and a pool without GitLab Runner's helper.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// editedPool writes deploy/kube-e2e/pool.yaml with edit applied to its
// pod template's spec (the JSON map) to a file of its own.
func editedPool(t *testing.T, edit func(spec map[string]any)) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/kube-e2e/pool.yaml"))
	require.NoError(t, err)
	j, err := utilyaml.ToJSON(raw)
	require.NoError(t, err)
	var d map[string]any
	require.NoError(t, json.Unmarshal(j, &d))
	edit(d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any))
	b, err := json.Marshal(d)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "pool.json")
	require.NoError(t, os.WriteFile(f, b, 0o644))
	return f
}

// A job of a --job-user pool on the shipped template's capabilities
// (KILL, SETUID, SETGID) starts, and may change the artifacts and the
// cache restored into its build directory (GitLab issue 576350 against
// the stock runner, whose helper container extracts them as root): job A,
// as root on the pool as shipped, uploads artifact publish/test.txt; the
// pool then runs its jobs as uid 1000; job B, on a warm pod, gets A's
// artifact and changes it, and archives vendor/; job C, on a warm pod,
// changes both. The job-user pool has a cache volume of its own that uid
// 1000 may write: the runner's helper keeps a local cache private to the
// uid that wrote it (0700 directories, 0600 archives), so pools that run
// jobs as different users cannot share one (the guide says so).
func TestGitLabJobUser(t *testing.T) {
	p := newPool(t, poolOpts{replicas: 1})
	key := "ju-" + randHex(4)
	a := p.runJob(t, jobOpts{id: 2701, script: []string{`mkdir -p publish`, `echo "from A" > publish/test.txt`, `echo "JOB-OUTPUT: A as $(id -u)"`},
		env: extrasEnv(t, map[string]any{"artifacts": []any{map[string]any{"name": "pub", "paths": []string{"publish/"}, "when": "on_success"}}})})
	require.Equal(t, 0, a.exit, a.String())
	require.Contains(t, traceText(a.trace), "JOB-OUTPUT: A as 0")

	// The pool's pods now run their jobs as uid 1000, with a cache volume
	// uid 1000 may write.
	cacheDir := filepath.Join(filepath.Dir(hostCacheDir), "gitlab-cache-"+p.ns)
	require.NoError(t, os.MkdirAll(cacheDir, 0o755))
	require.NoError(t, os.Chown(cacheDir, 1000, 1000))
	t.Cleanup(func() { _ = os.RemoveAll(cacheDir) })
	file := editedPool(t, func(spec map[string]any) {
		c := spec["containers"].([]any)[0].(map[string]any)
		c["args"] = append(c["args"].([]any), "--job-user=1000:1000")
		for _, v := range spec["volumes"].([]any) {
			if v := v.(map[string]any); v["name"] == "cache" {
				v["hostPath"] = map[string]any{"path": cacheDir, "type": "Directory"}
			}
		}
	})
	out, err := exec.Command(kubectl, "apply", "-n", p.ns, "-f", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(kubectl, "scale", "-n", p.ns, "deployment/busybox", "--replicas", "1").CombinedOutput()
	require.NoError(t, err, "%s", out)
	waitFor(t, 3*time.Minute, "one Ready idle pod running --job-user, and no other", func() (bool, string) {
		desc := []string{}
		n, other := 0, 0
		for _, pd := range poolPods(t, p.ns) {
			b, _ := exec.Command(kubectl, "get", "pod", "-n", p.ns, pd.Metadata.Name, "-o", "jsonpath={.spec.containers[0].args}").Output()
			desc = append(desc, pd.Metadata.Name+":"+string(b))
			if strings.Contains(string(b), "--job-user=1000:1000") && pd.Metadata.Labels["warmpod.dev/state"] == "idle" && pd.ready() {
				n++
			} else {
				other++
			}
		}
		return n == 1 && other == 0, strings.Join(desc, " ")
	})

	cache := []any{map[string]any{"key": key, "paths": []string{"vendor/"}, "policy": "pull-push", "when": "on_success"}}
	deps := func(id int) []string {
		return extrasEnv(t, map[string]any{"cache": cache, "dependencies": []any{map[string]any{"id": 2701}}},
			"JOB_TOKEN=glcbt-MOCKJOB"+strconv.Itoa(id), "ARTIFACTS_FROM="+a.runDir)
	}
	b := p.runJob(t, jobOpts{id: 2702, env: deps(2702), script: []string{
		`echo "JOB-OUTPUT: B as $(id -u):$(id -g)"`,
		`touch publish/new && echo x >> publish/test.txt && echo "JOB-OUTPUT: B changed A's artifact: $(cat publish/test.txt | tr '\n' ' ')"`,
		`mkdir -p vendor && echo "from B" > vendor/dep.txt`}})
	require.Equal(t, 0, b.exit, b.String())
	tr := traceText(b.trace)
	kind, _ := podOf(t, tr)
	assert.Equal(t, "warm", kind)
	assert.Contains(t, tr, "Downloading artifacts from coordinator... ok")
	assert.Contains(t, tr, "JOB-OUTPUT: B as 1000:1000")
	assert.Contains(t, tr, "JOB-OUTPUT: B changed A's artifact: from A x")
	assert.Contains(t, tr, "Created cache")
	waitIdle(t, p.ns, 1, 2*time.Minute)

	c := p.runJob(t, jobOpts{id: 2703, env: deps(2703), script: []string{
		`ls -ln publish vendor`,
		`touch publish/new && echo x >> publish/test.txt && touch vendor/y && echo "JOB-OUTPUT: C changed them all"`}})
	require.Equal(t, 0, c.exit, c.String())
	tr = traceText(c.trace)
	kind, _ = podOf(t, tr)
	assert.Equal(t, "warm", kind)
	assert.Contains(t, tr, "Successfully extracted cache")
	assert.Contains(t, tr, "JOB-OUTPUT: C changed them all")
	assert.NotContains(t, tr, "Failed to create cache")
	waitIdle(t, p.ns, 1, 2*time.Minute)
}

// A pool without GitLab Runner's helper refuses, at prepare and before
// it claims a pod, a job that has artifacts or caches, naming the pool
// and what is missing; it still runs a job that has neither.
func TestGitLabPoolWithoutTheHelper(t *testing.T) {
	file := editedPool(t, func(spec map[string]any) {
		var keep []any
		for _, c := range spec["initContainers"].([]any) {
			if c.(map[string]any)["name"] != "install-gitlab-runner-helper" {
				keep = append(keep, c)
			}
		}
		spec["initContainers"] = keep
	})
	p := newPool(t, poolOpts{replicas: 1, poolFile: file})
	before := poolPods(t, p.ns)

	r := p.runJob(t, jobOpts{id: 2711, script: []string{`echo out > out.txt`, `mkdir -p vendor && echo v > vendor/v`},
		env: extrasEnv(t, map[string]any{
			"artifacts": []any{map[string]any{"name": "out", "paths": []string{"out.txt"}, "when": "on_success"}},
			"cache":     []any{map[string]any{"key": "nohelper-" + randHex(4), "paths": []string{"vendor/"}, "policy": "pull-push", "when": "on_success"}}})})
	require.Equal(t, 1, r.exit, r.String())
	assert.Equal(t, "runner_system_failure", r.final["failure_reason"])
	tr := traceText(r.trace)
	assert.Contains(t, tr, "the job has caches and artifacts, which GitLab Runner's helper binary (gitlab-runner on the build container's PATH) handles, but pool busybox's pods have none")
	assert.Zero(t, strings.Count(tr, "Missing gitlab-runner"))
	assert.NoDirExists(t, filepath.Join(r.runDir, "mock", "artifacts", "2711"), "the coordinator received no artifact")
	after := poolPods(t, p.ns)
	require.Len(t, after, len(before), "no pod claimed or created")
	assert.Equal(t, before[0].Metadata.Name, after[0].Metadata.Name)

	r = p.runJob(t, jobOpts{id: 2712, script: []string{`echo "JOB-OUTPUT: no artifacts, no caches"`}})
	require.Equal(t, 0, r.exit, r.String())
	tr = traceText(r.trace)
	assert.Contains(t, tr, "JOB-OUTPUT: no artifacts, no caches")
	assert.Zero(t, strings.Count(tr, "Missing gitlab-runner"))
	waitIdle(t, p.ns, 1, 2*time.Minute)
}
