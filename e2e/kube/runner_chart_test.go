//go:build kube

package kubee2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/warmpod/warmpod/internal/helmnotes"
)

// TestGitLabRunnerChartValues runs a GitLab job the way a user who pasted
// NOTES.txt's values into GitLab's published gitlab-runner chart does:
// warmpod's chart installed, its NOTES (with gitlab.runnerImage, the
// runner image built from Dockerfile.gitlab-runner) rendered through the
// gitlab-runner chart of ../shared/runner-charts, and a runner pod made of
// what that render says: its image, account, security contexts, and the
// registered config.toml (the chart's config.template.toml with what
// `register` adds: name, URL, token, and the executor of RUNNER_EXECUTOR).
//
// What stands in, because kube-e2e cannot pull: the published runner image
// is replaced by the cut-down runner of ../shared/gitlab-runner (run-single
// with the runner's own config loading) in a busybox rootfs, with the
// driver put where the recipe's COPY puts it (mkimage.sh packs it, nothing
// is pulled); the chart's entrypoint script (it runs `register` against
// GitLab, which the mock does not serve) is replaced by the register's
// result. The image volume way cannot run here (Kubernetes 1.34 with
// containerd 1.6: image volumes need the gate and containerd 2.1), so the
// charts' tests check it by render only. A second release in the namespace
// is refused at install.
func TestGitLabRunnerChartValues(t *testing.T) {
	charts := runnerChartsDir(t)
	ns := newNamespace(t, "glrchart", true)
	const image = "localhost/warmpod-gitlab-runner:e2e"
	notes := runHelm(t, "install", "ci", filepath.Join(repoRoot, "charts/warmpod"), "-n", ns,
		"-f", chartValuesOnePool(t), "--set", "gitlab.runnerImage.repository=localhost/warmpod-gitlab-runner",
		"--set", "gitlab.runnerImage.tag=e2e", "--wait", "--timeout", "3m")
	// One release per namespace: the drivers and the controller read every
	// pool of it, so a second release would share them (lookup at install).
	out, err := exec.Command(helmBinary(t), "install", "ci2", filepath.Join(repoRoot, "charts/warmpod"), "-n", ns,
		"-f", chartValuesOnePool(t)).CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), `namespace `+ns+` already has warmpod release "ci"`)

	values, err := helmnotes.ValuesBlock(notes, "GitLab Runner")
	require.NoError(t, err, "%s", notes)
	vf := filepath.Join(t.TempDir(), "values-from-notes.yaml")
	require.NoError(t, os.WriteFile(vf, []byte(values), 0o644))
	rendered := runHelm(t, "template", "runner", filepath.Join(charts, "gitlab-runner-0.86.0.tgz"), "-n", ns,
		"--set", "gitlabUrl=https://gitlab.example.com", "--set", "runnerToken=glrt-x", "-f", vf)
	dep, tmpl := renderedRunner(t, rendered)
	podSpec := dep["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	ctr := podSpec["containers"].([]any)[0].(map[string]any)
	require.Equal(t, image, ctr["image"], "the runner pod runs the image NOTES names")

	buildRunnerImage(t, image)
	mock := startMock(t, []string{`echo "JOB-OUTPUT: $((6*7))"`, `test -z "$WARMPOD_GITLAB_NAMESPACE" && echo "NO-LEAK"`})
	conf := registered(t, tmpl, envValue(t, ctr, "RUNNER_EXECUTOR"), mock.url)
	api.must(t, 201, "POST", "/api/v1/namespaces/"+ns+"/configmaps", map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "runner-config"},
		"data": map[string]any{"config.toml": conf},
	})
	api.must(t, 201, "POST", "/api/v1/namespaces/"+ns+"/pods", map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "runner"},
		"spec": map[string]any{
			// kube-e2e: the host's network (the mock listens on 127.0.0.1) and the API server's address.
			"hostNetwork": true, "enableServiceLinks": false, "restartPolicy": "Never",
			"serviceAccountName": podSpec["serviceAccountName"],
			"securityContext":    podSpec["securityContext"],
			"containers": []any{map[string]any{
				"name": "runner", "image": image, "imagePullPolicy": "Never",
				"securityContext": ctr["securityContext"],
				// As the chart's entrypoint, the config in a writable directory of the
				// runner's own (the runner keeps .runner_system_id beside it).
				"command": []any{"/bin/sh", "-c", "cp /configmaps/config.toml /home/gitlab-runner/.gitlab-runner/ && " +
					"exec /usr/bin/gitlab-runner --log-format text run-single -c /home/gitlab-runner/.gitlab-runner/config.toml " +
					"--runner warm --max-builds 1 --wait-timeout 60"},
				"env": []any{
					map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
					map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
				},
				"volumeMounts": []any{
					map[string]any{"name": "config", "mountPath": "/configmaps", "readOnly": true},
					map[string]any{"name": "etc-gitlab-runner", "mountPath": "/home/gitlab-runner/.gitlab-runner"},
				},
			}},
			"volumes": []any{
				map[string]any{"name": "config", "configMap": map[string]any{"name": "runner-config"}},
				map[string]any{"name": "etc-gitlab-runner", "emptyDir": map[string]any{"medium": "Memory"}},
			},
		},
	})
	waitFor(t, 4*time.Minute, "the runner pod to end", func() (bool, string) {
		p := getPod(t, ns, "runner")
		return p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed", p.Status.Phase
	})
	log := podLog(t, ns, "runner")
	final := mock.final(t, log)
	tr := traceText(mock.trace(t))
	require.Equal(t, "success", final["state"], "final %v\ntrace:\n%s\nrunner log:\n%s", final, lastLines(tr, 40), lastLines(log, 40))
	assert.Contains(t, tr, "Using Custom executor with driver warmpod ")
	assert.Contains(t, tr, "JOB-OUTPUT: 42")
	assert.Contains(t, tr, "NO-LEAK", "nothing of the driver's configuration reaches the job's environment")
	assert.Regexp(t, `runs on warm pod busybox-\S+ \(pool busybox\)`, tr)
}

// runnerChartsDir is ../shared/runner-charts (RUNNER_CHARTS overrides).
func runnerChartsDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("RUNNER_CHARTS")
	if d == "" {
		d = filepath.Join(repoRoot, "..", "shared", "runner-charts")
	}
	_, err := os.Stat(filepath.Join(d, "gitlab-runner-0.86.0.tgz"))
	require.NoError(t, err, "the published runner charts (set RUNNER_CHARTS)")
	return d
}

// chartValuesOnePool is kubeE2EValues with its first pool only (image
// busybox) and neither the hook nor the controller: what this test needs.
func chartValuesOnePool(t *testing.T) string {
	t.Helper()
	f := kubeE2EValues(t, "localhost/kube-e2e/busybox:v1")
	var v map[string]any
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &v))
	v["pools"] = v["pools"].([]any)[:1]
	v["github"].(map[string]any)["enabled"] = false
	v["controller"] = map[string]any{"enabled": false}
	b, err = json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(f, b, 0o644))
	return f
}

// renderedRunner is the Deployment and the config.template.toml of a
// gitlab-runner chart render.
func renderedRunner(t *testing.T, out string) (map[string]any, string) {
	t.Helper()
	var dep map[string]any
	var tmpl string
	for _, doc := range strings.Split(out, "\n---\n") {
		var m map[string]any
		require.NoError(t, utilyaml.Unmarshal([]byte(doc), &m), "%s", doc)
		switch m["kind"] {
		case "Deployment":
			dep = m
		case "ConfigMap":
			tmpl, _ = m["data"].(map[string]any)["config.template.toml"].(string)
		}
	}
	require.NotNil(t, dep, "no Deployment in the render")
	require.NotEmpty(t, tmpl, "no config.template.toml in the render")
	return dep, tmpl
}

func envValue(t *testing.T, ctr map[string]any, name string) string {
	t.Helper()
	for _, e := range ctr["env"].([]any) {
		if m := e.(map[string]any); m["name"] == name {
			return m["value"].(string)
		}
	}
	require.Failf(t, "no env", "%s", name)
	return ""
}

// registered is config.toml as the chart's `register` leaves it: the
// template's [[runners]] with the runner's name, GitLab's URL, the
// runner's token and the executor RUNNER_EXECUTOR names (which wins over
// the template's).
func registered(t *testing.T, tmpl, executor, url string) string {
	t.Helper()
	var c map[string]any
	_, err := toml.Decode(tmpl, &c)
	require.NoError(t, err, "%s", tmpl)
	runners, _ := c["runners"].([]map[string]any)
	require.Len(t, runners, 1, "%s", tmpl)
	r := runners[0]
	r["name"], r["url"], r["token"], r["executor"] = "warm", url, "glrt-MOCKRUNNERTOKEN", executor
	var b bytes.Buffer
	require.NoError(t, toml.NewEncoder(&b).Encode(c))
	return b.String()
}

// buildRunnerImage builds image by Dockerfile.gitlab-runner's recipe, the
// cut-down runner standing in for GitLab's runner image, and imports it
// into kube-e2e's containerd.
func buildRunnerImage(t *testing.T, image string) {
	t.Helper()
	recipe, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile.gitlab-runner"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^COPY --from=\S+ /warmpod-gitlab /warmpod-gitlab-run (\S+/)$`).FindStringSubmatch(string(recipe))
	require.NotNil(t, m, "Dockerfile.gitlab-runner copies no /warmpod-gitlab and /warmpod-gitlab-run")
	root := t.TempDir()
	put := func(src, dst string, mode os.FileMode) {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		p := filepath.Join(root, dst)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, b, mode))
	}
	put("/bin/busybox", "bin/busybox", 0o755)
	applets, err := exec.Command("/bin/busybox", "--list").Output()
	require.NoError(t, err)
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			require.NoError(t, os.Symlink("busybox", filepath.Join(root, "bin", a)))
		}
	}
	runner := filepath.Join(glrBin(), "gitlab-runner")
	put(runner, "usr/bin/gitlab-runner", 0o755)
	// The fixture's runner is built with cgo (GitLab's image has its libc):
	// its shared libraries and loader come along, as ldd lists them.
	libs, err := exec.Command("ldd", runner).Output()
	require.NoError(t, err)
	for _, lib := range regexp.MustCompile(`(?m)(/\S+) \(0x`).FindAllStringSubmatch(string(libs), -1) {
		put(lib[1], strings.TrimPrefix(lib[1], "/"), 0o755)
	}
	put(driverBinary(t), m[1]+"warmpod-gitlab", 0o755)
	put(driverBinary(t)+"-run", m[1]+"warmpod-gitlab-run", 0o755)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "tmp"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(root, "tmp"), 0o1777))
	tar := filepath.Join(t.TempDir(), "runner.tar")
	mk := filepath.Join(repoRoot, "..", "shared", "kube-e2e", "images", "mkimage.sh")
	if s := os.Getenv("SHARED"); s != "" {
		mk = filepath.Join(s, "kube-e2e", "images", "mkimage.sh")
	}
	out, err := exec.Command(mk, root, image, tar, `["/usr/bin/gitlab-runner"]`).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("ctr", "--address", ctrSock, "-n", "k8s.io", "images", "import", tar).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// glrBin holds the runner and the mock of ../shared/gitlab-runner (make
// gitlab-runner builds them there).
func glrBin() string {
	if d := os.Getenv("GLR_BIN"); d != "" {
		return d
	}
	return "/var/tmp/glr/bin"
}

// glrMock is the mock coordinator of ../shared/gitlab-runner, on
// 127.0.0.1, with one job.
type glrMock struct {
	url, dir string
}

func startMock(t *testing.T, script []string) *glrMock {
	t.Helper()
	dir := t.TempDir()
	sf := filepath.Join(dir, "script.txt")
	require.NoError(t, os.WriteFile(sf, []byte(strings.Join(script, "\n")+"\n"), 0o644))
	m := &glrMock{dir: filepath.Join(dir, "mock")}
	cmd := exec.Command(filepath.Join(glrBin(), "mockgl"), "-out", m.dir, "-script", sf, "-job-id", "1", "-listen", "127.0.0.1:0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, 10*time.Second, "the mock's address", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(m.dir, "addr"))
		m.url = strings.TrimSpace(string(b))
		return err == nil && m.url != "", out.String()
	})
	return m
}

func (m *glrMock) final(t *testing.T, runnerLog string) map[string]any {
	t.Helper()
	var f map[string]any
	b, err := os.ReadFile(filepath.Join(m.dir, "final-1.json"))
	require.NoError(t, err, "no final update from the runner; its log:\n%s", lastLines(runnerLog, 40))
	require.NoError(t, json.Unmarshal(b, &f))
	return f
}

func (m *glrMock) trace(t *testing.T) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(m.dir, "trace-1.log"))
	return string(b)
}
