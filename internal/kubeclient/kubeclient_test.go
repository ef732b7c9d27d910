package kubeclient

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u, namespace: ci}
current-context: x
`

// With no kubeconfig and not in a pod, the error names the flag, the
// variable and the files tried, not client-go's KUBERNETES_MASTER.
func TestNoConfigurationSaysWhatWasTried(t *testing.T) {
	// client-go reads $HOME once, at init: ~/.kube/config must not exist
	// for this test to mean anything.
	if _, err := os.Stat(clientcmdHome()); err == nil {
		t.Skipf("%s exists", clientcmdHome())
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := New("", "", "test")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "KUBERNETES_MASTER")
	for _, w := range []string{"--kubeconfig", "KUBECONFIG", clientcmdHome(), "KUBERNETES_SERVICE_HOST"} {
		assert.Contains(t, err.Error(), w)
	}
}

func clientcmdHome() string { return clientcmd.RecommendedHomeFile }
