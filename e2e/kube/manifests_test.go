//go:build kube

package kubee2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every manifest in deploy/ is accepted by the real API server
// (server-side dry run: admission, schema and defaulting, nothing stored).
func TestManifestsServerDryRun(t *testing.T) {
	ns := newNamespace(t, "manifests", true)
	for _, f := range []string{"rbac.yaml", "pod.yaml", "owned-secret.yaml", "networkpolicy.yaml", "kube-e2e/pod.yaml", "gitlab-rbac.yaml", "pool.yaml", "kube-e2e/pool.yaml", "github-rbac.yaml", "kube-e2e/github-pool.yaml", "github-pool.yaml", "pools-controller.yaml"} {
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
