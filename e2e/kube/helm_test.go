//go:build kube

package kubee2e

import (
	"context"
	"encoding/json"
	"fmt"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary is $HELM, or helm built from tools/helm (the repository's
// pinned Helm, a Go tool dependency).
func helmBinary(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		if p := os.Getenv("HELM"); p != "" {
			helmPath = p
			return
		}
		dir, err := os.MkdirTemp("", "helm-")
		if err != nil {
			helmErr = err
			return
		}
		helmPath = filepath.Join(dir, "helm")
		if out, err := exec.Command("go", "build", "-C", filepath.Join(repoRoot, "tools/helm"), "-o", helmPath, "helm.sh/helm/v4/cmd/helm").CombinedOutput(); err != nil {
			helmErr = fmt.Errorf("go build helm: %v: %s", err, out)
		}
	})
	require.NoError(t, helmErr)
	return helmPath
}

func runHelm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// kubeE2EValues are the chart's values as kube-e2e needs them (no pod
// network, no kube-proxy, nothing pulled: the host's network, exec probes,
// the API server's address in env, local images),
// with one GitLab pool of image busyboxImage, and a second pool that the
// upgrade must not touch.
func kubeE2EValues(t *testing.T, busyboxImage string) string {
	t.Helper()
	kube := map[string]any{"hostNetwork": true, "enableServiceLinks": false}
	apiEnv := []any{
		map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
		map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
	}
	v := map[string]any{
		"image":         map[string]any{"repository": "localhost/warmpod", "tag": "dev", "pullPolicy": "Never", "path": "/usr/local/bin/warmpod"},
		"executorImage": map[string]any{"repository": "localhost/warmpod-executor", "tag": "dev", "pullPolicy": "Never"},
		"gitlab":        map[string]any{"helperImage": "localhost/warmpod-gitlab-helper:dev", "helperPullPolicy": "Never"},
		"github":        map[string]any{"runnerImage": "localhost/hooks/runner:v1", "runnerPullPolicy": "Never"},
		"poolDefaults": map[string]any{
			"args":         []any{"--max-jobs=1", "--idle-timeout=30m", "--grace=10s", "--probe-addr="},
			"probes":       "exec",
			"env":          apiEnv,
			"extraPodSpec": kube,
		},
		"pools": []any{
			map[string]any{"name": "busybox", "image": busyboxImage, "default": true, "replicas": 1},
			map[string]any{"name": "other", "image": "localhost/kube-e2e/busybox:v1", "replicas": 1,
				"podLabels": map[string]any{"e2e": "other"}},
			map[string]any{"name": "hooks-job", "for": "github", "image": "localhost/hooks/job:v1", "replicas": 1,
				"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}}},
		},
		"controller": map[string]any{
			"replicaCount": 1,
			"env":          apiEnv,
			"extraPodSpec": kube,
			"metrics":      map[string]any{"port": freePort(t)},
		},
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "values.json")
	require.NoError(t, os.WriteFile(f, b, 0o644))
	return f
}

// currentHash is the pod-template-hash of the pool's ReplicaSet that has
// pods (after a rollout, the new one).
func currentHash(t *testing.T, ns, pool string) string {
	t.Helper()
	var hash string
	waitFor(t, 2*time.Minute, "one ReplicaSet of pool "+pool+" with pods", func() (bool, string) {
		cl := adminCluster(t, ns)
		rs, err := cl.CS.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "warmpod.dev/pool=" + pool})
		if err != nil {
			return false, err.Error()
		}
		var live []string
		for _, r := range rs.Items {
			if r.Status.Replicas > 0 || (r.Spec.Replicas != nil && *r.Spec.Replicas > 0) {
				live = append(live, r.Labels["pod-template-hash"])
			}
		}
		if len(live) == 1 {
			hash = live[0]
		}
		return len(live) == 1, fmt.Sprint(live)
	})
	return hash
}

// standInRunnerPod runs a pod like a runner pod of the gitlab-runner or the
// gha-runner-scale-set chart with NOTES.txt's values: init containers of the
// executor image copy the driver and the hook into a volume. The volume is a
// host directory here, so that the GitLab Runner of ../shared/gitlab-runner
// and hookrun of ../shared/actions-hooks, which run on this host, run the
// very binaries the chart's image delivered. It returns that directory.
func standInRunnerPod(t *testing.T, ns, sa string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	api.must(t, 201, "POST", "/api/v1/namespaces/"+ns+"/pods", map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "runner"},
		"spec": map[string]any{
			"hostNetwork": true, "enableServiceLinks": false, "serviceAccountName": sa,
			"initContainers": []any{map[string]any{
				"name": "warmpod-gitlab", "image": "localhost/warmpod-executor:dev", "imagePullPolicy": "Never",
				"command":      []any{"/warmpod-gitlab", "install", "/opt/warmpod"},
				"volumeMounts": []any{map[string]any{"name": "warmpod", "mountPath": "/opt/warmpod"}},
			}, map[string]any{
				"name": "warmpod-github", "image": "localhost/warmpod-executor:dev", "imagePullPolicy": "Never",
				"command":      []any{"/warmpod-github", "install", "/opt/warmpod"},
				"volumeMounts": []any{map[string]any{"name": "warmpod", "mountPath": "/opt/warmpod"}},
			}},
			"containers": []any{map[string]any{
				"name": "runner", "image": "localhost/kube-e2e/busybox:v1", "imagePullPolicy": "Never",
				"command":      []any{"sleep", "3600"},
				"volumeMounts": []any{map[string]any{"name": "warmpod", "mountPath": "/opt/warmpod", "readOnly": true}},
			}},
			"volumes": []any{map[string]any{"name": "warmpod", "hostPath": map[string]any{"path": dir, "type": "Directory"}}},
		},
	})
	waitReady(t, ns, "runner", true, 2*time.Minute)
	for _, bin := range []string{"warmpod-gitlab", "warmpod-github"} {
		out, err := exec.Command(filepath.Join(dir, bin), "version").CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	return dir
}

// TestHelmInstallUpgradeUninstall installs the chart into a fresh
// namespace, runs a real GitLab Runner job on its pool through the driver
// that an init container copied out of the chart's executor image, upgrades
// the release with another image for one pool (the next job runs the new
// template, no pod of the old one is claimed, the other pool is not rolled),
// and uninstalls it: nothing of the release is left in the namespace.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	ns := newNamespace(t, "helm", true)
	// Named as the chart, the release's objects are named warmpod-…
	// (warmpod-gitlab, warmpod-pools), as in deploy/.
	const rel = "warmpod"
	chart := filepath.Join(repoRoot, "charts/warmpod")
	out := runHelm(t, "install", rel, chart, "-n", ns, "-f", kubeE2EValues(t, "localhost/kube-e2e/busybox:v1"), "--wait", "--timeout", "3m")
	assert.Contains(t, out, "STATUS: deployed")
	assert.Contains(t, out, "name: "+rel+"-gitlab", "NOTES.txt names the driver's ServiceAccount")
	assert.Contains(t, out, "--namespace="+ns, "NOTES.txt fills in the namespace")
	assert.Contains(t, out, "WARNING: this cluster is Kubernetes v1.34", "NOTES.txt warns that the image volume it prints needs a gate kube-e2e does not turn on")

	bins := standInRunnerPod(t, ns, rel+"-gitlab")
	p := glrPoolIn(t, ns, rel+"-gitlab", poolOpts{driver: filepath.Join(bins, "warmpod-gitlab")})
	hash1, other1 := currentHash(t, ns, "busybox"), currentHash(t, ns, "other")
	r := p.runJob(t, jobOpts{id: 1, script: []string{`echo "JOB-OUTPUT: $((6*7))"`}})
	require.Equal(t, 0, r.exit, r.String())
	tr := traceText(r.trace)
	assert.Contains(t, tr, "JOB-OUTPUT: 42")
	assert.Regexp(t, `runs on warm pod busybox-`+hash1+`-\S+ \(pool busybox\)`, tr)

	// An Actions job through hookrun, on the chart's GitHub pool, with the
	// hook the init container installed (its shim beside it) under the
	// hook's ServiceAccount; the hook reads the pools from the cluster.
	kc, err := json.Marshal(saKubeconfig(t, ns, rel+"-github"))
	require.NoError(t, err)
	g := &ghPool{ns: ns, dir: t.TempDir(), hookDir: bins}
	g.kubeconfig = filepath.Join(g.dir, "kubeconfig")
	require.NoError(t, os.WriteFile(g.kubeconfig, kc, 0o600))
	gr, log := g.run(t, "pass.json", "helm-runner")
	require.Equal(t, gr.Expect, gr.Result, "hookrun:\n%s", log)
	assert.Regexp(t, `^hooks-job-[0-9a-f]+-`, gr.Container.ID, "a warm pod of the chart's GitHub pool")

	// One pool's image changes: that pool rolls, the others do not.
	runHelm(t, "upgrade", rel, chart, "-n", ns, "-f", kubeE2EValues(t, "localhost/warmpod:dev"), "--wait", "--timeout", "3m")
	hash2 := currentHash(t, ns, "busybox")
	require.NotEqual(t, hash1, hash2, "the changed pool rolled")
	assert.Equal(t, other1, currentHash(t, ns, "other"), "the other pool did not roll")
	r = p.runJob(t, jobOpts{id: 2, script: []string{`echo "JOB-OUTPUT: $(ls /usr/local/bin)"`}})
	require.Equal(t, 0, r.exit, r.String())
	tr = traceText(r.trace)
	assert.Regexp(t, `runs on warm pod busybox-`+hash2+`-\S+ \(pool busybox\)`, tr, "the next job runs the new template")
	assert.Contains(t, tr, "JOB-OUTPUT: warmpod", "the new image")
	old := regexp.MustCompile(`busybox-` + hash1 + `-`)
	assert.False(t, old.MatchString(tr), "no pod of the old template claimed")

	// Uninstall: nothing of the release is left.
	api.must(t, 200, "DELETE", "/api/v1/namespaces/"+ns+"/pods/runner", nil)
	runHelm(t, "uninstall", rel, "-n", ns, "--wait", "--timeout", "3m")
	waitFor(t, 2*time.Minute, "nothing of the release left", func() (bool, string) {
		var left []string
		for _, kind := range []string{"deployments", "replicasets", "pods", "serviceaccounts", "roles", "rolebindings", "services", "networkpolicies", "leases", "configmaps", "secrets"} {
			args := []string{"get", kind, "-n", ns, "-o", "name", "-l", "app.kubernetes.io/instance=" + rel}
			if kind == "pods" || kind == "replicasets" {
				args[len(args)-1] = "warmpod.dev/pool"
			}
			b, err := exec.Command(kubectl, args...).CombinedOutput()
			if err != nil {
				return false, string(b)
			}
			for _, l := range strings.Fields(string(b)) {
				left = append(left, l)
			}
		}
		return len(left) == 0, strings.Join(left, " ")
	})
}
