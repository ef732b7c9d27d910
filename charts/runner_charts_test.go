package charts

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/warmpod/warmpod/internal/helmnotes"
)

// The runner charts users already run, exactly as published
// (../shared/runner-charts): warmpod's NOTES.txt prints values for them,
// and what it prints must reach the runner pod. Neither chart has a values
// schema, so a key it does not know is dropped without a word; only a
// render shows it.
const (
	gitlabRunnerChart = "gitlab-runner-0.86.0.tgz"
	arcChart          = "gha-runner-scale-set-0.14.2.tgz"
)

// runnerCharts is the directory of the published runner charts: $RUNNER_CHARTS,
// or ../shared/runner-charts beside the repository (CI has it there).
func runnerCharts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("RUNNER_CHARTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "runner-charts")
	}
	if _, err := os.Stat(filepath.Join(dir, gitlabRunnerChart)); err != nil {
		t.Skipf("the published runner charts are not at %s (set RUNNER_CHARTS): %v", dir, err)
	}
	return dir
}

// notes runs `helm install --dry-run=client` of warmpod's chart (no
// cluster: nothing is sent) and returns what NOTES.txt prints.
func notes(t *testing.T, set ...string) string {
	t.Helper()
	args := []string{"install", "ci", "warmpod", "-n", "ci", "--dry-run=client", "--hide-notes=false"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := run(t, args...)
	require.NoError(t, err, "%s", out)
	i := strings.Index(out, "NOTES:\n")
	require.GreaterOrEqual(t, i, 0, "no NOTES in %s", out)
	return out[i+len("NOTES:\n"):]
}

// valuesBlock is the values block after heading in the notes
// (helmnotes.ValuesBlock), as a user copies it.
func valuesBlock(t *testing.T, text, heading string) string {
	t.Helper()
	b, err := helmnotes.ValuesBlock(text, heading)
	require.NoError(t, err, "%s", text)
	return b
}

// renderWith renders a runner chart with the values file text and the
// extra --set flags its own required values need, and returns the
// rendered objects by kind.
func renderWith(t *testing.T, chart, values string, set ...string) map[string][]map[string]any {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values-from-notes.yaml")
	require.NoError(t, os.WriteFile(f, []byte(values), 0o644))
	args := []string{"template", "runner", chart, "-n", "ci", "-f", f}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := run(t, args...)
	require.NoError(t, err, "%s\nvalues:\n%s", out, values)
	return objects(t, out)
}

// objects splits rendered manifests into objects, by kind.
func objects(t *testing.T, out string) map[string][]map[string]any {
	t.Helper()
	byKind := map[string][]map[string]any{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var m map[string]any
		require.NoError(t, utilyaml.Unmarshal([]byte(doc), &m), "%s", doc)
		if kind, _ := m["kind"].(string); kind != "" {
			byKind[kind] = append(byKind[kind], m)
		}
	}
	return byKind
}

// dig walks maps and lists: a string key for a map, an int for a list.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "not a map at %q: %v", k, v)
			v = m[k]
		case int:
			l, ok := v.([]any)
			require.True(t, ok && k < len(l), "not a list of %d at %v", k+1, v)
			v = l[k]
		}
	}
	return v
}

// named finds the element of a list of maps whose name is name.
func named(t *testing.T, list any, name string) map[string]any {
	t.Helper()
	l, _ := list.([]any)
	for _, e := range l {
		if m, ok := e.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	require.Failf(t, "not found", "no element named %q in %v", name, list)
	return nil
}

// gitlabRunnerTOML is the [[runners]] template of the rendered
// gitlab-runner ConfigMap, decoded as the runner decodes config.toml.
type gitlabRunnerTOML struct {
	Runners []struct {
		Executor    string   `toml:"executor"`
		Environment []string `toml:"environment"`
		BuildsDir   string   `toml:"builds_dir"`
		Custom      struct {
			ConfigExec  string   `toml:"config_exec"`
			ConfigArgs  []string `toml:"config_args"`
			PrepareExec string   `toml:"prepare_exec"`
			PrepareArgs []string `toml:"prepare_args"`
			RunExec     string   `toml:"run_exec"`
			RunArgs     []string `toml:"run_args"`
			CleanupExec string   `toml:"cleanup_exec"`
			CleanupArgs []string `toml:"cleanup_args"`
		} `toml:"custom"`
	} `toml:"runners"`
}

// recipePath is where Dockerfile.gitlab-runner puts the driver: the
// destination directory of its COPY of /warmpod-gitlab and
// /warmpod-gitlab-run, with the driver's name.
func recipePath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile.gitlab-runner"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^COPY --from=\S+ /warmpod-gitlab /warmpod-gitlab-run (\S+/)$`).FindStringSubmatch(string(b))
	require.NotNil(t, m, "Dockerfile.gitlab-runner copies no /warmpod-gitlab and /warmpod-gitlab-run into a directory")
	return filepath.Join(m[1], "warmpod-gitlab")
}

// The values NOTES.txt prints for GitLab's gitlab-runner chart, pasted as
// they are, give a runner pod that runs the Custom executor with the
// driver: the driver where the config names it (an image volume mounted
// there, or the runner image built by the recipe), the executor custom
// (that chart's RUNNER_EXECUTOR wins over the config), the
// [runners.custom] executables, and the ServiceAccount warmpod's Role is
// bound to. Nothing of warmpod's leaks into the jobs' environment.
func TestGitLabRunnerChartTakesTheNotes(t *testing.T) {
	dir := runnerCharts(t)
	rendered := objects(t, mustRun(t, "template", "ci", "warmpod", "-n", "ci"))
	sa := roleBindingSubject(t, rendered, "ci-warmpod-gitlab")
	for _, tc := range []struct {
		name        string
		set         []string
		image       string // the runner container's image; "" = the chart's own
		imageVolume string // the image volume's reference; "" = none
	}{
		{name: "image volume", imageVolume: "ghcr.io/warmpod/warmpod-executor:dev"},
		{name: "runner image", set: []string{"gitlab.runnerImage.repository=registry.example.com/ci/gitlab-runner-warmpod", "gitlab.runnerImage.tag=v1.2.3"},
			image: "registry.example.com/ci/gitlab-runner-warmpod:v1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := valuesBlock(t, notes(t, tc.set...), "GitLab Runner")
			objs := renderWith(t, filepath.Join(dir, gitlabRunnerChart), values,
				"gitlabUrl=https://gitlab.example.com", "runnerToken=glrt-x")
			require.Len(t, objs["Deployment"], 1)
			pod := dig(t, objs["Deployment"][0], "spec", "template", "spec")
			assert.Equal(t, sa, dig(t, pod, "serviceAccountName"), "the runner pod runs as the account warmpod's RoleBinding names")
			assert.Empty(t, objs["ServiceAccount"], "the runner chart makes no account of its own")
			assert.Empty(t, objs["Role"], "the runner chart makes no Role of its own")
			ctr := dig(t, pod, "containers", 0)
			env := named(t, dig(t, ctr, "env"), "RUNNER_EXECUTOR")
			assert.Equal(t, "custom", env["value"], "RUNNER_EXECUTOR wins over the config's executor at registration")

			var conf gitlabRunnerTOML
			cm := objs["ConfigMap"][0]
			text, _ := dig(t, cm, "data", "config.template.toml").(string)
			_, err := toml.Decode(text, &conf)
			require.NoError(t, err, "%s", text)
			require.Len(t, conf.Runners, 1, "%s", text)
			r := conf.Runners[0]
			for _, kv := range r.Environment {
				assert.NotContains(t, kv, "WARMPOD_", "[[runners]] environment reaches the jobs (CUSTOM_ENV_*), never the driver")
			}
			exec := r.Custom.ConfigExec
			require.NotEmpty(t, exec, "no [runners.custom] in %s", text)
			for stage, e := range map[string]string{"prepare": r.Custom.PrepareExec, "cleanup": r.Custom.CleanupExec} {
				assert.Equal(t, exec, e, "%s_exec", stage)
			}
			// run_exec is the per-stage build, beside the driver (in the
			// executor image and the recipe's runner image alike).
			assert.Equal(t, exec+"-run", r.Custom.RunExec, "run_exec")
			for stage, args := range map[string][]string{"config": r.Custom.ConfigArgs, "prepare": r.Custom.PrepareArgs, "run": r.Custom.RunArgs, "cleanup": r.Custom.CleanupArgs} {
				require.NotEmpty(t, args, "%s_args", stage)
				assert.Equal(t, stage, args[len(args)-1], "%s_args ends with the driver's command", stage)
				assert.Contains(t, args, "--namespace=ci", "%s_args: the pools' namespace", stage)
			}
			assert.Contains(t, r.Custom.PrepareArgs, "--offers="+offersURL(t, rendered), "prepare_args: the controller's offers, by its Service")

			if tc.imageVolume != "" {
				assert.Equal(t, "registry.gitlab.com/gitlab-org/gitlab-runner:alpine-v18.9.0", dig(t, ctr, "image"), "the chart's own runner image")
				vol := named(t, dig(t, pod, "volumes"), "warmpod")
				assert.Equal(t, tc.imageVolume, dig(t, vol, "image", "reference"))
				mount := named(t, dig(t, ctr, "volumeMounts"), "warmpod")
				mp, _ := mount["mountPath"].(string)
				assert.Equal(t, filepath.Join(mp, "warmpod-gitlab"), exec, "the config's driver is in the image volume (the executor image has /warmpod-gitlab)")
			} else {
				assert.Equal(t, tc.image, dig(t, ctr, "image"))
				assert.Equal(t, recipePath(t), exec, "the config's driver is where Dockerfile.gitlab-runner puts it")
				for _, v := range dig(t, pod, "volumes").([]any) {
					assert.NotEqual(t, "warmpod", v.(map[string]any)["name"], "no image volume with a runner image")
				}
			}
		})
	}
}

// The values NOTES.txt prints for the gha-runner-scale-set chart give a
// runner pod that runs warmpod's hook (not the chart's own
// ACTIONS_RUNNER_CONTAINER_HOOKS), copied in by an init container, under
// the hook's account, and the chart makes no kube-mode account of its own.
func TestARCChartTakesTheNotes(t *testing.T) {
	dir := runnerCharts(t)
	rendered := objects(t, mustRun(t, "template", "ci", "warmpod", "-n", "ci"))
	sa := roleBindingSubject(t, rendered, "ci-warmpod-github")
	values := valuesBlock(t, notes(t), "GitHub Actions")
	objs := renderWith(t, untar(t, filepath.Join(dir, arcChart), "charts/gha-runner-scale-set"), values,
		"githubConfigUrl=https://github.com/o/r", "githubConfigSecret=s",
		"controllerServiceAccount.name=c", "controllerServiceAccount.namespace=ci")
	require.Len(t, objs["AutoscalingRunnerSet"], 1)
	pod := dig(t, objs["AutoscalingRunnerSet"][0], "spec", "template", "spec")
	assert.Equal(t, sa, dig(t, pod, "serviceAccountName"))
	for _, sa := range objs["ServiceAccount"] {
		assert.NotContains(t, dig(t, sa, "metadata", "name"), "kube-mode", "the chart makes no kube-mode account when one is named")
	}
	runner := named(t, dig(t, pod, "containers"), "runner")
	hooks := 0
	for _, e := range dig(t, runner, "env").([]any) {
		if e.(map[string]any)["name"] == "ACTIONS_RUNNER_CONTAINER_HOOKS" {
			hooks++
			assert.Equal(t, "/hooks/warmpod-github.sh", e.(map[string]any)["value"])
		}
	}
	assert.Equal(t, 1, hooks, "one ACTIONS_RUNNER_CONTAINER_HOOKS, warmpod's")
	assert.Equal(t, offersURL(t, rendered), named(t, dig(t, runner, "env"), "WARMPOD_GITHUB_OFFERS")["value"], "the controller's offers, by its Service")
	mount := named(t, dig(t, runner, "volumeMounts"), "hooks")
	assert.Equal(t, "/hooks", mount["mountPath"])
	init := named(t, dig(t, pod, "initContainers"), "warmpod-github")
	assert.Equal(t, "ghcr.io/warmpod/warmpod-executor:dev", init["image"])
	assert.Equal(t, []any{"/warmpod-github", "install", "/hooks"}, init["command"])
	named(t, dig(t, pod, "volumes"), "hooks")
}

// offersURL is the URL of the offers Service of the warmpod chart's
// rendered objects (release ci, namespace ci), from its name and port: the
// URL the drivers' --offers must name.
func offersURL(t *testing.T, rendered map[string][]map[string]any) string {
	t.Helper()
	for _, svc := range rendered["Service"] {
		name, _ := dig(t, svc, "metadata", "name").(string)
		if !strings.HasSuffix(name, "-pools-offers") {
			continue
		}
		port := dig(t, svc, "spec", "ports", 0, "port")
		return fmt.Sprintf("http://%s.ci:%v", name, port)
	}
	require.Fail(t, "the chart renders no offers Service")
	return ""
}

// untar unpacks a chart archive whose chart sits under sub (the ARC
// charts are packed with their repository's charts/ prefix, which helm
// does not take as a chart) and returns the chart's directory.
func untar(t *testing.T, archive, sub string) string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	dir := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		require.True(t, strings.HasPrefix(dst, dir+string(filepath.Separator)), "%s leaves the directory", h.Name)
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(dst, b, 0o644))
	}
	return filepath.Join(dir, sub)
}

// mustRun runs helm and returns its output, failing the test on an error.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	require.NoError(t, err, "%s", out)
	return out
}

// roleBindingSubject is the ServiceAccount of warmpod's RoleBinding name:
// the account NOTES.txt must run the runner pod as.
func roleBindingSubject(t *testing.T, objs map[string][]map[string]any, name string) string {
	t.Helper()
	for _, rb := range objs["RoleBinding"] {
		if dig(t, rb, "metadata", "name") == name {
			return dig(t, rb, "subjects", 0, "name").(string)
		}
	}
	require.Failf(t, "no RoleBinding", "%s", name)
	return ""
}
