// Package kubeclient builds the client-go client of the executors and the
// pool controller: a kubeconfig loaded the way kubectl loads it, or the
// in-cluster configuration. It knows nothing of pools (executor/pool's
// Connect makes a pool.Cluster of it): a library imports no layer above it.
package kubeclient

import (
	"fmt"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client is a clientset, the REST config it was made from (exec needs it)
// and the namespace to work in.
type Client struct {
	CS        *kubernetes.Clientset
	Config    *rest.Config
	Namespace string
}

// New returns a Client for namespace (empty: the kubeconfig context's,
// or the service account's) from kubeconfig (empty: $KUBECONFIG,
// ~/.kube/config, or in-cluster). userAgent names the executor in the API
// server's logs. Errors: no usable configuration, no namespace.
func New(kubeconfig, namespace, userAgent string) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own words ("try setting KUBERNETES_MASTER") name a
		// variable no one sets; say what was tried instead.
		return nil, fmt.Errorf("no Kubernetes configuration: %s, and not in a pod (KUBERNETES_SERVICE_HOST is unset); "+
			"set --kubeconfig or KUBECONFIG, or run in the cluster under a ServiceAccount", tried(rules))
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if namespace == "" {
		if namespace, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("namespace: %w", err)
		}
	}
	rc.UserAgent = userAgent
	// One executor call makes a handful of requests; client-go's default
	// limiter (5 QPS) would only add waits.
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &Client{CS: cs, Config: rc, Namespace: namespace}, nil
}

// tried says which kubeconfig files the loading rules looked for.
func tried(rules *clientcmd.ClientConfigLoadingRules) string {
	if rules.ExplicitPath != "" {
		return "--kubeconfig " + rules.ExplicitPath + " is empty"
	}
	if len(rules.Precedence) == 0 {
		return "no kubeconfig file"
	}
	return "no kubeconfig in " + strings.Join(rules.Precedence, ", ") + " ($KUBECONFIG, else ~/.kube/config)"
}
