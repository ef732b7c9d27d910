//go:build kube

// Package kubee2e runs warmpod in a real Kubernetes: the single-node loopback
// cluster of ../shared/kube-e2e (kube-apiserver, kube-controller-manager with
// its garbage collector, kubelet, containerd). `make e2e-kube` builds and
// imports the image localhost/warmpod:dev, starts the cluster when KUBECONFIG
// is unset, and runs:
//
//	go test -tags kube -count=1 -v -timeout 40m ./e2e/kube/
//
// Every test works in its own namespace (wpk-<test>-<random>), deleted at the
// end; on failure the pods, events and logs of that namespace are logged first.
// Pods start from deploy/kube-e2e/pod.yaml (converted to JSON by kubectl) and
// change only the name, the arguments, a few env variables and the probe port:
// the pods share the node's network namespace (hostNetwork), so each gets its
// own probe port.
//
// Environment: KUBECONFIG (default /var/lib/kube-e2e/state/admin.kubeconfig),
// KUBECTL (default /var/cache/kube-e2e/bin-*/kubectl, else kubectl on PATH),
// WARMPOD_KUBE_RESULTS (file for the cold/warm table of TestColdStartVersusWarmHandover).
package kubee2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	warmImage    = "localhost/warmpod:dev"
	busyboxImage = "localhost/kube-e2e/busybox:v1"
	container    = "helper"
	keepFinalzr  = "warmpod.e2e/keep" // holds a pod object after its deletion so its status can be read
)

var (
	kubectl  string
	api      *apiClient
	repoRoot string
	warmTmpl map[string]any // deploy/kube-e2e/pod.yaml as JSON
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/kube:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setup() error {
	if os.Getenv("KUBECONFIG") == "" {
		def := "/var/lib/kube-e2e/state/admin.kubeconfig"
		if _, err := os.Stat(def); err != nil {
			return fmt.Errorf("KUBECONFIG unset and %s missing: run ../shared/kube-e2e/up.sh (make e2e-kube does)", def)
		}
		os.Setenv("KUBECONFIG", def)
	}
	kubectl = os.Getenv("KUBECTL")
	if kubectl == "" {
		if m, _ := filepath.Glob("/var/cache/kube-e2e/bin-*/kubectl"); len(m) > 0 {
			kubectl = m[len(m)-1]
		} else if p, err := exec.LookPath("kubectl"); err == nil {
			kubectl = p
		} else {
			return fmt.Errorf("kubectl not found (set KUBECTL)")
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("repository root not found from %s", root)
	}
	repoRoot = root
	raw, err := exec.Command(kubectl, "config", "view", "--raw", "--minify", "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("kubectl config view: %w", err)
	}
	if api, err = newAPIClient(raw); err != nil {
		return err
	}
	if code, body, err := api.do("GET", "/readyz", nil); err != nil || code != 200 {
		return fmt.Errorf("API server not ready (%d %s %v): run ../shared/kube-e2e/up.sh", code, body, err)
	}
	out, err := exec.Command(kubectl, "create", "--dry-run=client", "-o", "json", "-f", filepath.Join(repoRoot, "deploy/kube-e2e/pod.yaml")).Output()
	if err != nil {
		return fmt.Errorf("kubectl create --dry-run=client deploy/kube-e2e/pod.yaml: %w", err)
	}
	return json.Unmarshal(out, &warmTmpl)
}

// ---------------------------------------------------------------- API client

// apiClient talks to the API server directly (10x cheaper than a kubectl
// process per poll, so polling does not distort the timings).
type apiClient struct {
	server    string
	hc        *http.Client // requests with a timeout
	stream    *http.Client // watches and log streams
	token     string
	tokenFile string
}

func newAPIClient(kubeconfigJSON []byte) (*apiClient, error) {
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server   string `json:"server"`
				CA       string `json:"certificate-authority"`
				CAData   string `json:"certificate-authority-data"`
				Insecure bool   `json:"insecure-skip-tls-verify"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				Token     string `json:"token"`
				TokenFile string `json:"tokenFile"`
				Cert      string `json:"client-certificate"`
				CertData  string `json:"client-certificate-data"`
				Key       string `json:"client-key"`
				KeyData   string `json:"client-key-data"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := json.Unmarshal(kubeconfigJSON, &kc); err != nil {
		return nil, err
	}
	if len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		return nil, fmt.Errorf("kubeconfig: want one cluster and one user in the current context")
	}
	cl, u := kc.Clusters[0].Cluster, kc.Users[0].User
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cl.Insecure}
	var caPEM []byte
	var err error
	switch {
	case cl.CAData != "":
		caPEM, err = base64.StdEncoding.DecodeString(cl.CAData)
	case cl.CA != "":
		caPEM, err = os.ReadFile(cl.CA)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig CA: %w", err)
	}
	if caPEM != nil {
		tc.RootCAs = x509.NewCertPool()
		tc.RootCAs.AppendCertsFromPEM(caPEM)
	}
	certPEM, keyPEM := []byte(nil), []byte(nil)
	if u.CertData != "" {
		certPEM, _ = base64.StdEncoding.DecodeString(u.CertData)
	} else if u.Cert != "" {
		certPEM, _ = os.ReadFile(u.Cert)
	}
	if u.KeyData != "" {
		keyPEM, _ = base64.StdEncoding.DecodeString(u.KeyData)
	} else if u.Key != "" {
		keyPEM, _ = os.ReadFile(u.Key)
	}
	if certPEM != nil && keyPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 8}
	return &apiClient{
		server: strings.TrimRight(cl.Server, "/"), token: u.Token, tokenFile: u.TokenFile,
		hc: &http.Client{Transport: tr, Timeout: 15 * time.Second}, stream: &http.Client{Transport: tr},
	}, nil
}

func (a *apiClient) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var r io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
		ctype = "application/merge-patch+json"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.server+path, r)
	if err != nil {
		return nil, err
	}
	if r != nil {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	tok := a.token
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return nil, err
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// do sends one request; a []byte body is a JSON merge patch, anything else is
// marshalled as JSON.
func (a *apiClient) do(method, path string, body any) (int, []byte, error) {
	req, err := a.request(context.Background(), method, path, body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (a *apiClient) must(t testing.TB, want int, method, path string, body any) []byte {
	t.Helper()
	code, b, err := a.do(method, path, body)
	require.NoError(t, err, "%s %s", method, path)
	require.Equal(t, want, code, "%s %s: %s", method, path, b)
	return b
}

// ---------------------------------------------------------------- objects

type containerState struct {
	Waiting *struct {
		Reason, Message string
	} `json:"waiting"`
	Running *struct {
		StartedAt time.Time `json:"startedAt"`
	} `json:"running"`
	Terminated *terminatedState `json:"terminated"`
}

type terminatedState struct {
	ExitCode   int       `json:"exitCode"`
	Signal     int       `json:"signal"`
	Reason     string    `json:"reason"`
	Message    string    `json:"message"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
}

type pod struct {
	Metadata struct {
		Name              string            `json:"name"`
		UID               string            `json:"uid"`
		ResourceVersion   string            `json:"resourceVersion"`
		DeletionTimestamp *time.Time        `json:"deletionTimestamp"`
		Finalizers        []string          `json:"finalizers"`
		Labels            map[string]string `json:"labels"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type, Status string
		} `json:"conditions"`
		ContainerStatuses []struct {
			Name         string         `json:"name"`
			Ready        bool           `json:"ready"`
			RestartCount int            `json:"restartCount"`
			ContainerID  string         `json:"containerID"`
			State        containerState `json:"state"`
			LastState    containerState `json:"lastState"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

func (p *pod) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// terminated is the terminated state of the first container, or nil.
func (p *pod) terminated() *terminatedState {
	if len(p.Status.ContainerStatuses) == 0 {
		return nil
	}
	return p.Status.ContainerStatuses[0].State.Terminated
}

func podPath(ns, name string) string {
	return "/api/v1/namespaces/" + ns + "/pods/" + name
}

// getPod returns the pod, or nil when it does not exist (404).
func getPod(t testing.TB, ns, name string) *pod {
	t.Helper()
	code, b, err := api.do("GET", podPath(ns, name), nil)
	require.NoError(t, err)
	if code == http.StatusNotFound {
		return nil
	}
	require.Equal(t, http.StatusOK, code, "%s", b)
	var p pod
	require.NoError(t, json.Unmarshal(b, &p))
	return &p
}

type event struct {
	Type, Reason, Message string
	Count                 int
}

func podEvents(t testing.TB, ns, name string) []event {
	t.Helper()
	b := api.must(t, 200, "GET", "/api/v1/namespaces/"+ns+"/events?fieldSelector="+url.QueryEscape("involvedObject.name="+name), nil)
	var l struct{ Items []event }
	require.NoError(t, json.Unmarshal(b, &l))
	return l.Items
}

func podLog(t testing.TB, ns, name string) string {
	t.Helper()
	code, b, err := api.do("GET", podPath(ns, name)+"/log?container="+container, nil)
	require.NoError(t, err)
	if code != 200 {
		return ""
	}
	return string(b)
}

// ---------------------------------------------------------------- waiting

// waitFor polls cond every 100 ms until it returns true, or fails the test
// after timeout with what cond last reported.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		last = why
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitReady(t testing.TB, ns, name string, want bool, timeout time.Duration) time.Duration {
	t.Helper()
	return waitFor(t, timeout, fmt.Sprintf("pod %s Ready=%v", name, want), func() (bool, string) {
		p := getPod(t, ns, name)
		if p == nil {
			return false, "pod gone"
		}
		if tm := p.terminated(); tm != nil {
			t.Fatalf("container terminated while waiting for Ready=%v: exit %d %s %q", want, tm.ExitCode, tm.Reason, tm.Message)
		}
		return p.ready() == want, fmt.Sprintf("phase=%s conditions=%v", p.Status.Phase, p.Status.Conditions)
	})
}

// ---------------------------------------------------------------- namespaces

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newNamespace creates wpk-<prefix>-<random> with the ServiceAccount, Role and
// RoleBinding of deploy/rbac.yaml (withBinding false: no RoleBinding), waits
// for what pods of a fresh namespace need (the default ServiceAccount and the
// kube-root-ca.crt ConfigMap), and deletes the namespace when the test ends.
func newNamespace(t *testing.T, prefix string, withBinding bool) string {
	t.Helper()
	ns := "wpk-" + prefix + "-" + randHex(3)
	api.must(t, 201, "POST", "/api/v1/namespaces", map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": map[string]string{"warmpod.e2e/test": labelValue(t.Name())}},
	})
	t.Cleanup(func() { deleteNamespace(t, ns) })
	out, err := exec.Command(kubectl, "apply", "-n", ns, "-f", filepath.Join(repoRoot, "deploy/rbac.yaml")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	if !withBinding {
		api.must(t, 200, "DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/rolebindings/warmpod-self-delete", nil)
	}
	waitFor(t, 30*time.Second, "default ServiceAccount and kube-root-ca.crt", func() (bool, string) {
		c1, _, _ := api.do("GET", "/api/v1/namespaces/"+ns+"/serviceaccounts/default", nil)
		c2, _, _ := api.do("GET", "/api/v1/namespaces/"+ns+"/configmaps/kube-root-ca.crt", nil)
		return c1 == 200 && c2 == 200, fmt.Sprintf("sa %d configmap %d", c1, c2)
	})
	return ns
}

// labelValue makes s a valid label value: [A-Za-z0-9._-], at most 63, alphanumeric at both ends.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b[:min(len(b), 63)]), "-_.")
}

func deleteNamespace(t *testing.T, ns string) {
	if t.Failed() {
		for _, args := range [][]string{
			{"get", "pods", "-o", "wide"},
			{"get", "events", "--sort-by=.lastTimestamp"},
			{"logs", "--all-containers", "--prefix", "--tail=200", "-l", "app.kubernetes.io/name=warmpod"},
			{"get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name}: {.status.containerStatuses[0].state}{\"\\n\"}{end}"},
		} {
			out, _ := exec.Command(kubectl, append([]string{"-n", ns}, args...)...).CombinedOutput()
			t.Logf("diagnostics: kubectl -n %s %s\n%s", ns, strings.Join(args, " "), out)
		}
	}
	// Pods held by the test finalizer would keep the namespace Terminating.
	if code, b, err := api.do("GET", "/api/v1/namespaces/"+ns+"/pods", nil); err == nil && code == 200 {
		var l struct{ Items []pod }
		if json.Unmarshal(b, &l) == nil {
			for _, p := range l.Items {
				if len(p.Metadata.Finalizers) > 0 {
					_, _, _ = api.do("PATCH", podPath(ns, p.Metadata.Name), []byte(`{"metadata":{"finalizers":null}}`))
				}
			}
		}
	}
	out, err := exec.Command(kubectl, "delete", "namespace", ns, "--wait=true", "--timeout=120s").CombinedOutput()
	if err != nil {
		t.Errorf("cleanup: kubectl delete namespace %s: %v: %s", ns, err, out)
	}
}

// ---------------------------------------------------------------- warm pods

type warmOpts struct {
	args      []string          // replace the manifest's args (--probe-addr is added)
	env       map[string]string // added to the container's env
	grace     int               // terminationGracePeriodSeconds; 0 = the manifest's
	finalizer bool              // add keepFinalzr so the object outlives deletion
}

type warmPod struct {
	ns, name, uid, rv string
	port              int
}

// freePort picks a TCP port free on the host, outside the ephemeral range:
// warm pods use the node's network namespace, so each needs its own.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		n, _ := rand.Int(rand.Reader, big.NewInt(10000))
		port := 20000 + int(n.Int64())
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err == nil {
			l.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var c map[string]any
	_ = json.Unmarshal(b, &c)
	return c
}

// createWarmPod creates a pod from deploy/kube-e2e/pod.yaml.
func createWarmPod(t *testing.T, ns, name string, o warmOpts) *warmPod {
	t.Helper()
	port := freePort(t)
	p := deepCopy(warmTmpl)
	md := p["metadata"].(map[string]any)
	delete(md, "generateName")
	md["name"] = name
	md["namespace"] = ns
	if o.finalizer {
		md["finalizers"] = []any{keepFinalzr}
	}
	spec := p["spec"].(map[string]any)
	if o.grace > 0 {
		spec["terminationGracePeriodSeconds"] = o.grace
	}
	c := spec["containers"].([]any)[0].(map[string]any)
	require.Equal(t, container, c["name"])
	args := []any{}
	if o.args != nil {
		for _, a := range o.args {
			args = append(args, a)
		}
	} else {
		args = c["args"].([]any)
	}
	c["args"] = append(args, fmt.Sprintf("--probe-addr=:%d", port))
	env := c["env"].([]any)
	for k, v := range o.env {
		env = append(env, map[string]any{"name": k, "value": v})
	}
	c["env"] = env
	c["ports"].([]any)[0].(map[string]any)["containerPort"] = port
	for _, pr := range []string{"readinessProbe", "livenessProbe"} {
		c[pr].(map[string]any)["httpGet"].(map[string]any)["port"] = port
	}
	b := api.must(t, 201, "POST", "/api/v1/namespaces/"+ns+"/pods", p)
	var created pod
	require.NoError(t, json.Unmarshal(b, &created))
	return &warmPod{ns: ns, name: name, uid: created.Metadata.UID, rv: created.Metadata.ResourceVersion, port: port}
}

// ---------------------------------------------------------------- kubectl

// kexec runs `kubectl exec [-i] POD -c helper -- args...`, feeding stdin when
// non-nil, and returns stdout, stderr and the exit code (kubectl passes the
// remote command's status through).
func kexec(t testing.TB, w *warmPod, stdin string, timeout time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	kargs := []string{"exec", "-n", w.ns, w.name, "-c", container}
	if stdin != "" {
		kargs = append(kargs, "-i")
	}
	cmd := exec.CommandContext(ctx, kubectl, append(append(kargs, "--"), args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "kubectl exec %v: %v (%s)", args, err, se.String())
		code = ee.ExitCode()
	}
	return so.String(), se.String(), code
}

// kattach writes input to the container's stdin (PID 1's stdin, which warmpod
// forwards to the current shell) with `kubectl attach -i`.
func kattach(t testing.TB, w *warmPod, input string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "attach", "-i", "-n", w.ns, w.name, "-c", container)
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl attach: %s", out)
}

// ---------------------------------------------------------------- streams

// podWatch records every watch event of one pod from a resourceVersion on,
// until the pod is DELETED or the test ends: it sees the final status (the
// container's terminated state and termination message) of a pod whose object
// disappears right after.
type podWatch struct {
	mu      sync.Mutex
	events  []watchEvent
	deleted chan struct{}
}

type watchEvent struct {
	Type string
	At   time.Time
	Pod  pod
}

func watchPod(t *testing.T, ns, name, rv string) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &podWatch{deleted: make(chan struct{})}
	path := "/api/v1/namespaces/" + ns + "/pods?watch=1&allowWatchBookmarks=false&resourceVersion=" + rv +
		"&fieldSelector=" + url.QueryEscape("metadata.name="+name)
	go func() {
		for ctx.Err() == nil {
			req, err := api.request(ctx, "GET", path, nil)
			if err != nil {
				return
			}
			resp, err := api.stream.Do(req)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			dec := json.NewDecoder(resp.Body)
			for {
				var ev struct {
					Type   string
					Object json.RawMessage
				}
				if dec.Decode(&ev) != nil {
					break
				}
				var p pod
				if ev.Type == "ERROR" || json.Unmarshal(ev.Object, &p) != nil {
					continue
				}
				w.mu.Lock()
				w.events = append(w.events, watchEvent{Type: ev.Type, At: time.Now(), Pod: p})
				w.mu.Unlock()
				if p.Metadata.ResourceVersion != "" {
					path = strings.Replace(path, "resourceVersion="+rv, "resourceVersion="+p.Metadata.ResourceVersion, 1)
					rv = p.Metadata.ResourceVersion
				}
				if ev.Type == "DELETED" {
					resp.Body.Close()
					close(w.deleted)
					return
				}
			}
			resp.Body.Close()
		}
	}()
	return w
}

// lastTerminated is the last terminated container state seen, and when.
func (w *podWatch) lastTerminated() (*pod, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.events) - 1; i >= 0; i-- {
		if w.events[i].Pod.terminated() != nil {
			p := w.events[i].Pod
			return &p, w.events[i].At
		}
	}
	return nil, time.Time{}
}

// logStream follows the container's log from its start (GET .../log?follow)
// so that the output survives the pod object's deletion.
type logStream struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

func followLog(t *testing.T, ns, name string) *logStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l := &logStream{done: make(chan struct{})}
	req, err := api.request(ctx, "GET", podPath(ns, name)+"/log?follow=true&container="+container, nil)
	require.NoError(t, err)
	resp, err := api.stream.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, "log stream of %s (container not started?)", name)
	go func() {
		defer close(l.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l.mu.Lock()
			l.buf.WriteString(sc.Text() + "\n")
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *logStream) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logStream) waitFor(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("log line %q", s), func() (bool, string) {
		out := l.String()
		return strings.Contains(out, s), lastLines(out, 5)
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// httpGet fetches a probe path from the warm pod's port on the node.
func httpGet(port int, path string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
