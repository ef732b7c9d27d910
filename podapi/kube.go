// Package podapi is PID 1's own Kubernetes client, on the pod side (the
// executor side uses client-go: executor/pool, built by
// internal/kubeclient): the in-cluster
// configuration (downward-API identity, service-account token and CA), the
// self-deletion of the pod through the API server, and the termination
// message the kubelet shows in the container status.
//
// It uses neither client-go nor net/http: PID 1 stays small and static, and
// makes exactly one API call, which is written by hand as one HTTP/1.1
// request over crypto/tls (http1.go; net/http alone would add about 3.3 MB
// to the binary). The rules it follows come from the Kubernetes sources:
// client-go's InClusterConfig (rest/config.go) for the host, token and CA;
// the DeleteOptions API reference for the request; Preconditions.Check
// (apiserver storage) for the 409 on a UID mismatch; RFC 9112 and RFC 9110
// for the message syntax.
package podapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultServiceAccountDir is where the kubelet mounts the pod's projected
// service-account volume (token, ca.crt, namespace); it is the directory
// client-go's InClusterConfig reads. FromEnv uses it when saDir is empty.
const DefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Identity of the pod, from the downward API env POD_NAME, POD_NAMESPACE,
// POD_UID (fieldRef metadata.name, metadata.namespace, metadata.uid).
//
// UID goes into the DELETE's preconditions.uid so that a newer pod that
// reuses the same name is never deleted by mistake (the API server answers
// 409 Conflict instead).
type Identity struct{ Name, Namespace, UID string }

// Config is what DeleteSelf needs to reach the API server as the pod's
// service account. The zero value is not usable; build it with FromEnv or
// fill every field but Dial and Sleep.
type Config struct {
	// Host is the API server's base URL: "https://" +
	// net.JoinHostPort(KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT), so an
	// IPv6 host is bracketed (as in client-go's InClusterConfig). The port
	// defaults to 443; one trailing slash is tolerated; a path, query,
	// userinfo or any other scheme is refused by DeleteSelf.
	Host string
	// TokenFile is the service-account token, by default
	// DefaultServiceAccountDir + "/token". It is read again before every try,
	// never cached: the kubelet rotates projected tokens (at 80 % of their
	// lifetime, 1 h by default) and the token stops working when the pod is
	// deleted.
	TokenFile string
	// CAFile is the PEM bundle the API server's certificate is verified
	// against, by default DefaultServiceAccountDir + "/ca.crt". Read once per
	// DeleteSelf call, and only when Dial is nil.
	CAFile string
	// Pod is the identity of the pod to delete: ours.
	Pod Identity
	// Dial opens the connection one try's request is written to, ready to
	// carry HTTP/1.1 bytes (TLS already done); DeleteSelf closes it after the
	// answer. ctx carries the try's deadline (5 s for connect, request and
	// answer together) and ends early when DeleteSelf's ctx does. An error
	// counts as a network error and is retried, unless it wraps a
	// certificate verification failure (*tls.CertificateVerificationError or
	// a crypto/x509 error), which ends the call.
	//
	// nil (production): a TCP connection to Host's host:port (net.Dialer,
	// which never goes through HTTPS_PROXY), then a TLS handshake verified
	// against the CA bundle of CAFile only, TLS 1.2 at least, ServerName
	// Host's host (for an IP, crypto/x509 matches the certificate's IP SANs;
	// for a name, its DNS SANs), ALPN "http/1.1" only (never HTTP/2). Tests
	// inject an in-memory connection or one to an httptest server.
	Dial func(ctx context.Context) (net.Conn, error)
	// Sleep waits between tries and returns ctx.Err() if ctx ends first.
	// nil: a real timer. Tests inject a recorder so they never sleep.
	Sleep func(context.Context, time.Duration) error
}

// FromEnv builds a Config the way a pod sees itself: KUBERNETES_SERVICE_HOST
// and KUBERNETES_SERVICE_PORT (injected by the kubelet into every container)
// give Host; POD_NAME, POD_NAMESPACE and POD_UID (downward API, set in the pod
// spec) give Pod; saDir (DefaultServiceAccountDir when empty) holds the token
// and ca.crt. getenv is os.Getenv in production.
//
// When POD_NAMESPACE is unset, the namespace file of saDir is used instead
// (the kubelet writes the pod's namespace there, as client-go relies on).
//
// The error lists every missing piece at once (for example "not configured
// for self-deletion: POD_NAME unset, POD_UID unset, token file
// /var/run/secrets/.../token: no such file or directory"), so one log line
// tells the operator what to add to the pod spec. Missing
// KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT means "not running in a
// cluster"; the error then wraps ErrNotInCluster. Dial and Sleep are left
// nil (the defaults).
func FromEnv(getenv func(string) string, saDir string) (Config, error) {
	if saDir == "" {
		saDir = DefaultServiceAccountDir
	}
	var missing []string
	get := func(key string) string {
		v := strings.TrimSpace(getenv(key))
		if v == "" {
			missing = append(missing, key+" unset")
		}
		return v
	}
	host, port := get("KUBERNETES_SERVICE_HOST"), get("KUBERNETES_SERVICE_PORT")
	notInCluster := host == "" || port == ""
	c := Config{
		TokenFile: filepath.Join(saDir, "token"),
		CAFile:    filepath.Join(saDir, "ca.crt"),
	}
	if !notInCluster {
		c.Host = "https://" + net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	c.Pod.Name = get("POD_NAME")
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		c.Pod.Namespace = ns
	} else if b, err := os.ReadFile(filepath.Join(saDir, "namespace")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		c.Pod.Namespace = strings.TrimSpace(string(b))
	} else {
		missing = append(missing, "POD_NAMESPACE unset (and no "+filepath.Join(saDir, "namespace")+")")
	}
	c.Pod.UID = get("POD_UID")
	for _, f := range []struct{ what, path string }{{"token file", c.TokenFile}, {"CA file", c.CAFile}} {
		if st, err := os.Stat(f.path); err != nil {
			missing = append(missing, fmt.Sprintf("%s %s: %v", f.what, f.path, errors.Unwrap(err)))
		} else if st.IsDir() {
			missing = append(missing, fmt.Sprintf("%s %s: is a directory", f.what, f.path))
		}
	}
	if len(missing) == 0 {
		return c, nil
	}
	err := errors.New("not configured for self-deletion: " + strings.Join(missing, ", "))
	if notInCluster {
		err = fmt.Errorf("%w: %w", ErrNotInCluster, err)
	}
	return c, err
}

// ErrNotInCluster is wrapped by FromEnv's error when KUBERNETES_SERVICE_HOST
// or KUBERNETES_SERVICE_PORT is unset: the process does not run in a
// Kubernetes pod (client-go's rest.ErrNotInCluster has the same meaning), so
// self-deletion is simply off and there is nothing to warn about.
var ErrNotInCluster = errors.New("not running in a Kubernetes cluster (KUBERNETES_SERVICE_HOST/PORT unset)")
