// Package charts tests the Helm chart of charts/warmpod with the helm
// command itself (tools/helm: a Go tool dependency, so nothing is
// downloaded from outside the module proxy): lint, the rendered manifests
// against golden files, and the values schema refusing bad values by name.
package charts

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// errSkip: no helm in the -short tier.
var errSkip = errors.New("skip")

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the helm command: $HELM, or one built from tools/helm.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p := os.Getenv("HELM"); p != "" {
			helmPath = p
			return
		}
		if testing.Short() {
			// Building helm takes minutes; the short tier stays quick.
			helmErr = errSkip
			return
		}
		dir, err := os.MkdirTemp("", "helm-")
		if err != nil {
			helmErr = err
			return
		}
		helmPath = filepath.Join(dir, "helm")
		out, err := exec.Command("go", "build", "-C", "../tools/helm", "-o", helmPath, "helm.sh/helm/v4/cmd/helm").CombinedOutput()
		if err != nil {
			helmErr = err
			helmPath = string(out)
		}
	})
	if helmErr == errSkip {
		t.Skip("-short without $HELM: make chart-test builds helm")
	}
	require.NoError(t, helmErr, "building helm: %s", helmPath)
	return helmPath
}

// run runs helm with args (no kubeconfig: nothing here talks to a cluster).
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/dev/null", "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestLint(t *testing.T) {
	for _, values := range []string{"", "testdata/two-pools.yaml"} {
		args := []string{"lint", "--strict", "warmpod"}
		if values != "" {
			args = append(args, "-f", values)
		}
		out, err := run(t, args...)
		require.NoError(t, err, "%s", out)
		assert.Contains(t, out, "0 chart(s) failed")
	}
}

// The rendered manifests, byte for byte: the default values, a values
// file with two pools (GitLab and GitHub), services and a policy, and a
// GitLab pool whose helper image also holds warmpod (one init container). Each
// rendered document is also valid YAML of a Kubernetes object.
func TestTemplateGolden(t *testing.T) {
	for _, tc := range []struct{ name, values string }{
		{"default", ""},
		{"two-pools", "testdata/two-pools.yaml"},
		{"one-init", "testdata/one-init.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "ci", "warmpod", "--namespace", "ci"}
			if tc.values != "" {
				args = append(args, "-f", tc.values)
			}
			out, err := run(t, args...)
			require.NoError(t, err, "%s", out)
			golden := filepath.Join("testdata", tc.name+".golden.yaml")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), out, "helm template differs from %s (go test ./charts -update rewrites it)", golden)
			for _, doc := range strings.Split(out, "\n---\n") {
				var m map[string]any
				require.NoError(t, utilyaml.Unmarshal([]byte(doc), &m), "%s", doc)
				if len(m) > 0 {
					assert.NotEmpty(t, m["kind"], "%s", doc)
				}
			}
		})
	}
}

// A typo or a wrong type in values fails helm before anything reaches the
// cluster, naming the key.
func TestSchemaRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ file, key string }{
		{"testdata/bad-typo.yaml", "replicaCout"},
		{"testdata/bad-pool-name.yaml", "name"},
		{"testdata/bad-budget.yaml", "cpu"},
		{"testdata/bad-pool-missing-image.yaml", "image"},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			out, err := run(t, "template", "ci", "warmpod", "-f", tc.file)
			require.Error(t, err, "%s", out)
			assert.Contains(t, out, "values don't meet the specifications of the schema")
			assert.Contains(t, out, tc.key)
		})
	}
}
