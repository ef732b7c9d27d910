//go:build kube

package kubee2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every manifest in deploy/ is accepted by the real API server
// (server-side dry run: admission, schema and defaulting, nothing stored).
func TestManifestsServerDryRun(t *testing.T) {
	ns := newNamespace(t, "manifests", true)
	for _, f := range []string{"rbac.yaml", "pod.yaml", "owned-secret.yaml", "networkpolicy.yaml", "kube-e2e/pod.yaml", "gitlab-rbac.yaml", "pool.yaml", "kube-e2e/pool.yaml", "github-rbac.yaml", "kube-e2e/github-pool.yaml", "github-pool.yaml", "pools-controller.yaml", "claimed-pdb.yaml"} {
		t.Run(f, func(t *testing.T) {
			verb := "apply" // as the README tells users to
			if filepath.Base(f) == "pod.yaml" {
				verb = "create" // the pods use generateName, which apply cannot take
			}
			out, err := exec.Command(kubectl, verb, "--dry-run=server", "-n", ns, "-f", filepath.Join(repoRoot, "deploy", f)).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "(server dry run)")
		})
	}
}

// What the chart renders, for its default values and for two pools with
// services and a policy, is accepted by the real API server (server-side
// dry run: every field of every object known to it).
func TestChartServerDryRun(t *testing.T) {
	ns := newNamespace(t, "chart", true)
	for _, values := range []string{"", "charts/testdata/two-pools.yaml"} {
		t.Run(filepath.Base(values), func(t *testing.T) {
			args := []string{"template", "warmpod", filepath.Join(repoRoot, "charts/warmpod"), "-n", ns}
			if values != "" {
				args = append(args, "-f", filepath.Join(repoRoot, values))
			}
			rendered := runHelm(t, args...)
			f := filepath.Join(t.TempDir(), "rendered.yaml")
			require.NoError(t, os.WriteFile(f, []byte(rendered), 0o644))
			out, err := exec.Command(kubectl, "apply", "--dry-run=server", "-n", ns, "-f", f).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "(server dry run)")
		})
	}
}
