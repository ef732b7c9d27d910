//go:build kube

package kubee2e

// GitLab jobs as real projects write them (issue "Step 12"): artifacts,
// dependencies, caches, services and per-job resources, each run by the
// real GitLab Runner of ../shared/gitlab-runner (JOB_EXTRAS hands out the
// job in the runner's own types; the stages call the real
// gitlab-runner-helper, copied into the pod by the pool's init container)
// against pools the driver reads from the cluster.

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// hostCacheDir is the kube-e2e pool's cache volume on the node (a hostPath).
const hostCacheDir = "/var/lib/warmpod-e2e/gitlab-cache"

// writeJSON writes v as a JSON file in a fresh temp dir and returns its path.
func writeJSON(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(f, b, 0o644))
	return f
}

// extrasEnv is run-job.sh's environment for a job with JOB_EXTRAS: the
// helper is not put on the runner's PATH (HELPER_ON_PATH=0), so the stages
// can only work with the pod's own.
func extrasEnv(t *testing.T, extras any, more ...string) []string {
	return append([]string{"JOB_EXTRAS=" + writeJSON(t, "extras.json", extras), "HELPER_ON_PATH=0"}, more...)
}

var warmPodRe = regexp.MustCompile(`runs on (warm|cold) pod (\S+)`)

// podOf is the kind ("warm" or "cold") and name of the pod the trace says the job ran on.
func podOf(t *testing.T, tr string) (string, string) {
	t.Helper()
	m := warmPodRe.FindStringSubmatch(tr)
	require.NotNil(t, m, "the trace names the job's pod:\n%s", tr)
	return m[1], m[2]
}

// zipFile reads one file of a zip archive.
func zipFile(t *testing.T, archive, name string) string {
	t.Helper()
	zr, err := zip.OpenReader(archive)
	require.NoError(t, err)
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name == name {
			rc, err := f.Open()
			require.NoError(t, err)
			defer rc.Close()
			b, err := io.ReadAll(rc)
			require.NoError(t, err)
			return string(b)
		}
	}
	t.Fatalf("%s has no %s", archive, name)
	return ""
}

func TestGitLabArtifactsAndCaches(t *testing.T) {
	p := newPool(t, poolOpts{replicas: 2})
	artifacts := map[string]any{"artifacts": []any{map[string]any{"name": "build-out", "paths": []string{"out/"}, "when": "on_success", "expire_in": "1 week"}}}
	make1 := []string{`mkdir -p out`, `echo "hello artifact from job $CI_JOB_ID" > out/a.txt`, `echo "JOB-OUTPUT: gitlab-runner is $(command -v gitlab-runner)"`}

	var first jobResult
	keep := t.TempDir() // the first run's directory outlives its subtest: the next job downloads from it
	t.Run("artifact upload", func(t *testing.T) {
		first = p.runJob(t, jobOpts{id: 1201, script: make1, env: extrasEnv(t, artifacts)})
		require.Equal(t, 0, first.exit, first.String())
		tr := traceText(first.trace)
		kind, _ := podOf(t, tr)
		assert.Equal(t, "warm", kind)
		assert.Contains(t, tr, "JOB-OUTPUT: gitlab-runner is /gitlab-helper/gitlab-runner", "the pod's helper, from the init container")
		assert.Contains(t, tr, `Uploading artifacts as "archive" to coordinator... 201 Created`)
		assert.Contains(t, stagesOf(p.timings(t, 1201)), "upload_artifacts_on_success")
		assert.Equal(t, "hello artifact from job 1201\n", zipFile(t, filepath.Join(first.runDir, "mock", "artifacts", "1201", "build-out.zip"), "out/a.txt"))
		out, err := exec.Command("cp", "-a", first.runDir, keep).CombinedOutput()
		require.NoError(t, err, "%s", out)
		first.runDir = filepath.Join(keep, filepath.Base(first.runDir))
	})

	t.Run("a dependent job gets the artifact before its script", func(t *testing.T) {
		require.NotEmpty(t, first.runDir)
		r := p.runJob(t, jobOpts{id: 1202, script: []string{`echo "JOB-OUTPUT: dependency says: $(cat out/a.txt)"`},
			env: extrasEnv(t, map[string]any{"dependencies": []any{map[string]any{"id": 1201}}},
				"JOB_TOKEN=glcbt-MOCKJOB1202", "ARTIFACTS_FROM="+first.runDir)})
		require.Equal(t, 0, r.exit, r.String())
		tr := traceText(r.trace)
		assert.Contains(t, tr, "Downloading artifacts from coordinator... ok")
		assert.Contains(t, tr, "JOB-OUTPUT: dependency says: hello artifact from job 1201")
		st := stagesOf(p.timings(t, 1202))
		require.Contains(t, st, "download_artifacts")
		assert.Less(t, indexOf(st, "download_artifacts"), indexOf(st, "build_script"))
	})

	t.Run("on_failure artifacts of a failing job are uploaded", func(t *testing.T) {
		onFail := map[string]any{"artifacts": []any{map[string]any{"name": "failure-logs", "paths": []string{"out/"}, "when": "on_failure"}}}
		r := p.runJob(t, jobOpts{id: 1203, script: append(make1, "exit 3"), env: extrasEnv(t, onFail)})
		require.Equal(t, 1, r.exit, r.String())
		assert.Equal(t, "script_failure", r.final["failure_reason"])
		assert.Equal(t, float64(3), r.final["exit_code"])
		assert.Contains(t, stagesOf(p.timings(t, 1203)), "upload_artifacts_on_failure")
		assert.Equal(t, "hello artifact from job 1203\n", zipFile(t, filepath.Join(r.runDir, "mock", "artifacts", "1203", "failure-logs.zip"), "out/a.txt"))
	})

	t.Run("a cache archived by one job is restored by the next, on another pod", func(t *testing.T) {
		key := "deps-" + randHex(4)
		t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(hostCacheDir, "group", "proj", key)) })
		t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(hostCacheDir, "group", "proj", key+"-v2")) })
		cache := func(k string) map[string]any {
			return map[string]any{"cache": []any{map[string]any{"key": k, "paths": []string{"vendor/"}, "policy": "pull-push", "when": "on_success"}}}
		}
		script := []string{`if [ -f vendor/dep.txt ]; then echo "JOB-OUTPUT: cache hit: $(cat vendor/dep.txt)"; else echo "JOB-OUTPUT: cache miss"; mkdir -p vendor; echo "fetched by job $CI_JOB_ID" > vendor/dep.txt; fi`}
		r1 := p.runJob(t, jobOpts{id: 1204, script: script, env: extrasEnv(t, cache(key))})
		require.Equal(t, 0, r1.exit, r1.String())
		tr1 := traceText(r1.trace)
		assert.Contains(t, tr1, "JOB-OUTPUT: cache miss")
		assert.Contains(t, tr1, "Created cache")
		_, pod1 := podOf(t, tr1)
		assert.FileExists(t, filepath.Join(hostCacheDir, "group", "proj", key, "cache.zip"), "the archive is on the shared volume")

		r2 := p.runJob(t, jobOpts{id: 1205, script: script, env: extrasEnv(t, cache(key))})
		require.Equal(t, 0, r2.exit, r2.String())
		tr2 := traceText(r2.trace)
		_, pod2 := podOf(t, tr2)
		assert.NotEqual(t, pod1, pod2, "single-use pods: the second job ran on another pod")
		assert.Contains(t, tr2, "Successfully extracted cache")
		assert.Contains(t, tr2, "JOB-OUTPUT: cache hit: fetched by job 1204")

		r3 := p.runJob(t, jobOpts{id: 1206, script: script, env: extrasEnv(t, cache(key+"-v2"))})
		require.Equal(t, 0, r3.exit, r3.String())
		assert.Contains(t, traceText(r3.trace), "JOB-OUTPUT: cache miss", "another key, another cache")
	})

	t.Run("an artifact larger than the pod's memory-backed run volume", func(t *testing.T) {
		// 80 MiB of random bytes: the helper stages its archive in
		// ARCHIVER_STAGING_DIR (the builds volume), not in TMPDIR on the
		// 64Mi run volume, where it failed with "no space left on device".
		r := p.runJob(t, jobOpts{id: 1207, script: []string{`mkdir -p out`, `head -c 83886080 /dev/urandom > out/big`, `sha256sum out/big`},
			env: extrasEnv(t, artifacts)})
		require.Equal(t, 0, r.exit, r.String())
		tr := traceText(r.trace)
		assert.Contains(t, tr, `Uploading artifacts as "archive" to coordinator... 201 Created`)
		m := regexp.MustCompile(`(?m)^([0-9a-f]{64})  out/big\s*$`).FindStringSubmatch(tr)
		require.NotNil(t, m, "the job printed the sum:\n%s", tr)
		zr, err := zip.OpenReader(filepath.Join(r.runDir, "mock", "artifacts", "1207", "build-out.zip"))
		require.NoError(t, err)
		defer zr.Close()
		f, err := zr.Open("out/big")
		require.NoError(t, err)
		defer f.Close()
		h := sha256.New()
		_, err = io.Copy(h, f)
		require.NoError(t, err)
		assert.Equal(t, m[1], hex.EncodeToString(h.Sum(nil)), "the coordinator holds the job's bytes")
	})
	waitIdle(t, p.ns, 2, 2*time.Minute)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// webScript is the service's command: an HTTP server (busybox httpd) on
// port that answers $GREETING. It retries the bind: on kube-e2e pods share
// the node's network, so a pool's next pod waits for its predecessor's port.
func webScript(port int) string {
	return fmt.Sprintf(`mkdir -p /tmp/www && echo "$GREETING" > /tmp/www/index.html && until httpd -f -p %d -h /tmp/www; do sleep 1; done`, port)
}

// applyWebPool applies a second pool, busybox-web: the busybox pool's
// template with a service container (svc-0, the web server on 18080 with
// GREETING=hello-warm) and its names in hostAliases, as a platform
// engineer would write it for jobs with that service.
func applyWebPool(t *testing.T, ns string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/kube-e2e/pool.yaml"))
	require.NoError(t, err)
	j, err := utilyaml.ToJSON(raw)
	require.NoError(t, err)
	var d map[string]any
	require.NoError(t, json.Unmarshal(j, &d))
	s := strings.ReplaceAll(string(j), `"warmpod.dev/pool":"busybox"`, `"warmpod.dev/pool":"busybox-web"`)
	require.NoError(t, json.Unmarshal([]byte(s), &d))
	d["metadata"].(map[string]any)["name"] = "busybox-web"
	d["spec"].(map[string]any)["replicas"] = 1
	spec := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["hostAliases"] = []any{map[string]any{"ip": "127.0.0.1", "hostnames": []string{"localhost-kube-e2e-busybox", "web"}}}
	spec["containers"] = append(spec["containers"].([]any), map[string]any{
		"name": "svc-0", "image": busyboxImage, "imagePullPolicy": "Never",
		"command": []string{"sh", "-c"}, "args": []string{webScript(18080)},
		"env": []any{map[string]any{"name": "GREETING", "value": "hello-warm"}},
		// Ready when it serves: a warm pod is claimable only then.
		"readinessProbe": map[string]any{"exec": map[string]any{"command": []string{"wget", "-q", "-O", "/dev/null", "http://127.0.0.1:18080/"}}, "periodSeconds": 1},
	})
	b, _ := json.Marshal(d)
	cmd := exec.Command(kubectl, "apply", "-n", ns, "-f", "-")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func webService(alias, greeting string, port int) map[string]any {
	return map[string]any{"name": busyboxImage, "alias": alias, "entrypoint": []string{"sh", "-c"}, "command": []string{webScript(port)},
		"variables": []any{map[string]any{"key": "GREETING", "value": greeting}}}
}

func TestGitLabServices(t *testing.T) {
	p := newPool(t, poolOpts{replicas: 0})
	applyWebPool(t, p.ns)
	waitIdle(t, p.ns, 1, 2*time.Minute)
	fetch := func(host string, port int) string {
		return fmt.Sprintf(`for i in $(seq 1 100); do out=$(wget -q -O - http://%s:%d/) && break; sleep 0.1; done; echo "JOB-OUTPUT: %s says: $out"`, host, port, host)
	}

	t.Run("a job with the pool's service runs warm and reaches it by its alias", func(t *testing.T) {
		r := p.runJob(t, jobOpts{id: 1301, script: []string{fetch("web", 18080), fetch("localhost-kube-e2e-busybox", 18080)},
			env: extrasEnv(t, map[string]any{"services": []any{webService("web", "hello-warm", 18080)}})})
		require.Equal(t, 0, r.exit, r.String())
		tr := traceText(r.trace)
		kind, pod := podOf(t, tr)
		assert.Equal(t, "warm", kind)
		assert.Contains(t, pod, "busybox-web-")
		assert.Contains(t, tr, "JOB-OUTPUT: web says: hello-warm")
		assert.Contains(t, tr, "JOB-OUTPUT: localhost-kube-e2e-busybox says: hello-warm", "the name derived from the image, as the Kubernetes executor adds it")
	})

	t.Run("a job with another service gets a cold pod running it", func(t *testing.T) {
		r := p.runJob(t, jobOpts{id: 1302, script: []string{fetch("web2", 18081)},
			env: extrasEnv(t, map[string]any{"services": []any{webService("web2", "hello-cold", 18081)}})})
		require.Equal(t, 0, r.exit, r.String())
		tr := traceText(r.trace)
		kind, pod := podOf(t, tr)
		assert.Equal(t, "cold", kind)
		assert.Contains(t, pod, "busybox-cold-", "from the default pool's template")
		assert.Contains(t, tr, "JOB-OUTPUT: web2 says: hello-cold", "the job's own service variables")
	})

	t.Run("the same service with other variables is not the pool's", func(t *testing.T) {
		r := p.runJob(t, jobOpts{id: 1303, script: []string{fetch("web", 18082)},
			env: extrasEnv(t, map[string]any{"services": []any{webService("web", "hello-other", 18082)}})})
		require.Equal(t, 0, r.exit, r.String())
		tr := traceText(r.trace)
		kind, _ := podOf(t, tr)
		assert.Equal(t, "cold", kind)
		assert.Contains(t, tr, "JOB-OUTPUT: web says: hello-other")
	})

	// Nothing leaks: the pool's one pod, idle, and no cold pod.
	waitIdle(t, p.ns, 1, 3*time.Minute)
}

// restartWatch polls the namespace's pods and keeps the highest restart
// count each pod showed.
type restartWatch struct {
	mu   sync.Mutex
	max  map[string]int
	stop chan struct{}
	done chan struct{}
}

func watchRestarts(t *testing.T, ns string) *restartWatch {
	w := &restartWatch{max: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			code, b, err := api.do("GET", "/api/v1/namespaces/"+ns+"/pods", nil)
			if err == nil && code == 200 {
				var l struct {
					Items []struct {
						Metadata struct{ Name string }
						Status   struct {
							ContainerStatuses []struct{ RestartCount int } `json:"containerStatuses"`
						}
					}
				}
				if json.Unmarshal(b, &l) == nil {
					w.mu.Lock()
					for _, p := range l.Items {
						n, seen := w.max[p.Metadata.Name]
						for _, c := range p.Status.ContainerStatuses {
							n = max(n, c.RestartCount)
							seen = true
						}
						if seen {
							w.max[p.Metadata.Name] = n
						}
					}
					w.mu.Unlock()
				}
			}
			select {
			case <-w.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *restartWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *restartWatch) restarts(pod string) (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, ok := w.max[pod]
	return n, ok
}

func TestGitLabPerJobResources(t *testing.T) {
	p := newPool(t, poolOpts{replicas: 2, flags: []string{"--cpu-request-overwrite-max-allowed=100", "--memory-limit-overwrite-max-allowed=1Gi"}})
	cgroup := []string{
		`echo "JOB-OUTPUT: memory limit $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)"`,
		`echo "JOB-OUTPUT: cpu shares $(cat /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu.weight)"`,
	}
	vars := func(kv ...string) []map[string]any {
		var out []map[string]any
		for i := 0; i < len(kv); i += 2 {
			out = append(out, map[string]any{"key": kv[i], "value": kv[i+1], "public": true})
		}
		return out
	}

	t.Run("a warm pod is resized in place", func(t *testing.T) {
		w := watchRestarts(t, p.ns)
		r := p.runJob(t, jobOpts{id: 1401, script: cgroup, extraVars: vars("KUBERNETES_CPU_REQUEST", "500m", "KUBERNETES_MEMORY_LIMIT", "256Mi", "KUBERNETES_CPU_LIMIT", "1")})
		w.end()
		require.Equal(t, 0, r.exit, r.String())
		tr := traceText(r.trace)
		kind, pod := podOf(t, tr)
		assert.Equal(t, "warm", kind)
		assert.Regexp(t, `warm pod \S+ resized in place to requests cpu=500m memory=32Mi, limits memory=256Mi in \d+ ms`, tr)
		assert.Contains(t, tr, "JOB-OUTPUT: memory limit 268435456", "256Mi, in bytes (v1 and v2 alike)")
		// cgroup v1: shares = millicores * 1024 / 1000; v2: the kubelet's
		// weight for those shares, 1 + (512-2)*9999/262142.
		assert.Regexp(t, `JOB-OUTPUT: cpu shares (512|20)\n`, tr)
		n, seen := w.restarts(pod)
		assert.True(t, seen, "the watch saw pod %s", pod)
		assert.Equal(t, 0, n, "no container restarted")
		// No --cpu-limit-overwrite-max-allowed: ignored, and said.
		assert.Equal(t, 1, strings.Count(tr, `warmpod: KUBERNETES_CPU_LIMIT="1" ignored: warmpod-gitlab prepare runs without --cpu-limit-overwrite-max-allowed, which would allow it`), tr)
		// This namespace's driver may not read nodes (yet): it says so,
		// once, and keeps to the bounds.
		assert.Equal(t, 1, strings.Count(tr, "cannot read the nodes of pool busybox"), tr)
		assert.Contains(t, tr, "the ClusterRole warmpod-gitlab-nodes of deploy/gitlab-rbac.yaml")
	})

	t.Run("a request above the bound is refused as the executor refuses it", func(t *testing.T) {
		before := waitIdle(t, p.ns, 2, 2*time.Minute) // the last job's pod has gone
		r := p.runJob(t, jobOpts{id: 1402, script: []string{`echo SHOULD-NOT-RUN`}, extraVars: vars("KUBERNETES_MEMORY_LIMIT", "2Gi")})
		require.Equal(t, 1, r.exit, r.String())
		assert.Equal(t, "runner_system_failure", r.final["failure_reason"])
		tr := traceText(r.trace)
		assert.Contains(t, tr, `the resource "MemoryLimit" requested "2Gi" is higher than limit allowed "1Gi"`)
		assert.NotContains(t, tr, "SHOULD-NOT-RUN\n")
		after := poolPods(t, p.ns)
		assert.Equal(t, len(before), len(after), "no pod claimed or created")
	})

	t.Run("a request no node can hold is refused before any pod is claimed", func(t *testing.T) {
		// Nodes are cluster-scoped: the ClusterRole of deploy/gitlab-rbac.yaml,
		// bound to this namespace's driver account.
		crb := "warmpod-gitlab-nodes-" + p.ns
		out, err := exec.Command(kubectl, "create", "clusterrolebinding", crb, "--clusterrole=warmpod-gitlab-nodes",
			"--serviceaccount="+p.ns+":warmpod-gitlab").CombinedOutput()
		require.NoError(t, err, "%s", out)
		t.Cleanup(func() { _ = exec.Command(kubectl, "delete", "clusterrolebinding", crb, "--ignore-not-found").Run() })
		before := waitIdle(t, p.ns, 2, 2*time.Minute)
		start := time.Now()
		r := p.runJob(t, jobOpts{id: 1403, script: []string{`echo SHOULD-NOT-RUN`}, extraVars: vars("KUBERNETES_CPU_REQUEST", "64")})
		require.Equal(t, 1, r.exit, r.String())
		assert.Equal(t, "runner_system_failure", r.final["failure_reason"])
		tr := traceText(r.trace)
		assert.Regexp(t, `the job's pod would request cpu=64 memory=32Mi, more than any node of pool busybox can allocate \(127\.0\.0\.1: cpu=\d+ memory=\d+\w*\)`, tr)
		assert.NotContains(t, tr, "released", "no warm pod claimed and released")
		assert.NotContains(t, tr, "creating a cold pod")
		assert.NotContains(t, tr, "cannot read the nodes")
		after := poolPods(t, p.ns)
		require.Len(t, after, len(before), "no pod claimed or created")
		for i := range before {
			assert.Equal(t, before[i].Metadata.Name, after[i].Metadata.Name)
			assert.Equal(t, "idle", after[i].Metadata.Labels["warmpod.dev/state"])
		}
		assert.Less(t, time.Since(start), time.Minute, "three prepares refused at once")
	})
	waitIdle(t, p.ns, 2, 3*time.Minute)
}

func TestGitLabPoolEditedInTheCluster(t *testing.T) {
	p := newPool(t, poolOpts{replicas: 2})
	old := map[string]bool{}
	for _, pd := range poolPods(t, p.ns) {
		old[pd.Metadata.Name] = true
	}
	out, err := exec.Command(kubectl, "set", "env", "-n", p.ns, "deployment/busybox", "E2E_EDIT=edited").CombinedOutput()
	require.NoError(t, err, "%s", out)

	// At once, mid-rollout: an old pod is never claimed.
	r := p.runJob(t, jobOpts{id: 1501, script: []string{`echo "JOB-OUTPUT: edit=$E2E_EDIT"`}})
	require.Equal(t, 0, r.exit, r.String())
	tr := traceText(r.trace)
	_, pod := podOf(t, tr)
	assert.False(t, old[pod], "job ran on %s, a pod of the old template", pod)
	assert.Contains(t, tr, "JOB-OUTPUT: edit=edited")

	// Once the rollout is done, jobs run warm on the new pods.
	waitFor(t, 3*time.Minute, "the rollout to finish with 2 new idle pods", func() (bool, string) {
		n, desc := 0, []string{}
		for _, pd := range poolPods(t, p.ns) {
			desc = append(desc, pd.Metadata.Name)
			if !old[pd.Metadata.Name] && pd.Metadata.Labels["warmpod.dev/state"] == "idle" && pd.ready() {
				n++
			}
			if old[pd.Metadata.Name] {
				n = -100
			}
		}
		return n == 2, strings.Join(desc, " ")
	})
	r = p.runJob(t, jobOpts{id: 1502, script: []string{`echo "JOB-OUTPUT: edit=$E2E_EDIT"`}})
	require.Equal(t, 0, r.exit, r.String())
	tr = traceText(r.trace)
	kind, pod := podOf(t, tr)
	assert.Equal(t, "warm", kind, "no step by hand: the new template's pods are claimed")
	assert.False(t, old[pod])
	assert.Contains(t, tr, "JOB-OUTPUT: edit=edited")
	waitIdle(t, p.ns, 2, 2*time.Minute)
}

// --pools FILE stays an option: a pool whose warmpod reads the hand-set
// warmpod.dev/config label, its value printed by `pool-hash`, read from
// the same file the test applies; the driver reads no Deployment.
func TestGitLabPoolsFromAFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/kube-e2e/pool.yaml"))
	require.NoError(t, err)
	j, err := utilyaml.ToJSON(raw)
	require.NoError(t, err)
	s := strings.Replace(string(j), `metadata.labels['pod-template-hash']`, `metadata.labels['warmpod.dev/config']`, 1)
	require.NotEqual(t, string(j), s)
	file := filepath.Join(t.TempDir(), "pool.json")
	require.NoError(t, os.WriteFile(file, []byte(s), 0o644))
	out, err := exec.Command(driverBinary(t), "--pools", file, "pool-hash").Output()
	require.NoError(t, err)
	m := regexp.MustCompile(`busybox\twarmpod.dev/config=([0-9a-f]{32})`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "pool-hash printed %q", out)
	var d map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &d))
	d["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)["warmpod.dev/config"] = m[1]
	b, _ := json.Marshal(d)
	require.NoError(t, os.WriteFile(file, b, 0o644))

	p := newPool(t, poolOpts{replicas: 1, poolFile: file, flags: []string{"--pools", file}})
	r := p.runJob(t, jobOpts{id: 1601, script: []string{`echo "JOB-OUTPUT: from a file"`}})
	require.Equal(t, 0, r.exit, r.String())
	tr := traceText(r.trace)
	kind, _ := podOf(t, tr)
	assert.Equal(t, "warm", kind)
	assert.NotContains(t, tr, "warmpod: WARNING", "the file's hash is its template's")
	assert.Contains(t, tr, "JOB-OUTPUT: from a file")
	waitIdle(t, p.ns, 1, 2*time.Minute)
}

// TestGitLabTakesAStartingPod: a job that finds no Ready pod within its
// warm wait takes the pool's pod that is starting (claimed as a cold
// start, waited for until Ready) rather than a cold pod of its own (issue
// 41). The pool's pods take about 15 s to be Ready (a readiness probe's
// initial delay, as a slow image pull would); another job's claim of the
// one Ready pod (a label, as a claim writes it) makes the ReplicaSet
// start its replacement, and the job arrives while that one starts.
func TestGitLabTakesAStartingPod(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/kube-e2e/pool.yaml"))
	require.NoError(t, err)
	probe := "exec: {command: [\"/warmpod/warmpod\", \"probe\", \"ready\"]}\n          periodSeconds: 1\n"
	require.Contains(t, string(b), probe)
	slow := strings.Replace(string(b), probe, probe+"          initialDelaySeconds: 15\n", 1)
	file := filepath.Join(t.TempDir(), "slow-pool.yaml")
	require.NoError(t, os.WriteFile(file, []byte(slow), 0o644))
	p := newPool(t, poolOpts{replicas: 1, poolFile: file})

	ready := waitIdle(t, p.ns, 1, time.Minute)
	out, err := exec.Command(kubectl, "label", "-n", p.ns, "pod", ready[0].Metadata.Name, "--overwrite",
		"warmpod.dev/state=claimed", "warmpod.dev/job=another-job").CombinedOutput()
	require.NoError(t, err, "%s", out)
	began := time.Now()
	r := p.runJob(t, jobOpts{id: 1501, script: []string{`echo "JOB-OUTPUT: ran"`}})
	require.Equal(t, 0, r.exit, r.String())
	tr := traceText(r.trace)
	kind, pod := podOf(t, tr)
	assert.Equal(t, "cold", kind, "a starting pod is a cold start")
	assert.NotEqual(t, ready[0].Metadata.Name, pod)
	assert.NotContains(t, pod, "-cold-", "no pod made for the job")
	took := regexp.MustCompile(`no warm pod of pool busybox \(config \S+\) is Ready: took pod ` + regexp.QuoteMeta(pod) + `, which was starting, Ready after \d+ ms`).FindString(tr)
	assert.NotEmpty(t, took, tr)
	t.Logf("the trace: %s", took)
	assert.NotContains(t, tr, "creating a cold pod")
	assert.Contains(t, tr, "JOB-OUTPUT: ran")
	t.Logf("job with a starting pod: %s from the claim of the Ready pod to the job's end", time.Since(began).Round(time.Millisecond))
}
