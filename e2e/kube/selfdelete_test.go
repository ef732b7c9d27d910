//go:build kube

package kubee2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKubePackageInPod runs package kube (FromEnv, DeleteSelf,
// WriteTerminationMessage) inside a real pod through the small helper
// ./selfdelete, mounted read-only from the host, so the API contract is
// proven against the real API server whatever PID 1 does: the DeleteOptions
// body, preconditions.uid (409 with a wrong uid), RBAC (403 and the logged
// rule), the projected token and CA, Background propagation (the owned
// Secret is collected).
func TestKubePackageInPod(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "selfdelete")
	cmd := exec.Command("go", "build", "-tags", "kube", "-trimpath", "-o", bin, "./selfdelete")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	cases := []struct {
		name       string
		binding    bool
		podUID     string // override POD_UID ("" = the real one from the downward API)
		wantResult string
		wantLog    []string
	}{
		{name: "deleted", binding: true, wantResult: "deleted"},
		{name: "forbidden", binding: false, wantResult: "forbidden",
			wantLog: []string{"missing RBAC rule: `delete` on `pods`", "service account warmpod"}},
		{name: "not-our-pod", binding: true, podUID: "00000000-0000-0000-0000-000000000000", wantResult: "not-our-pod",
			wantLog: []string{"the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t, "pkg-"+tc.name, tc.binding)
			env := []any{
				map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}},
				map[string]any{"name": "POD_NAMESPACE", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.namespace"}}},
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
			}
			if tc.podUID == "" {
				env = append(env, map[string]any{"name": "POD_UID", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.uid"}}})
			} else {
				env = append(env, map[string]any{"name": "POD_UID", "value": tc.podUID})
			}
			p := map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "selfdel", "namespace": ns},
				"spec": map[string]any{
					"hostNetwork": true, "enableServiceLinks": false,
					"restartPolicy": "Never", "terminationGracePeriodSeconds": 10, "serviceAccountName": "warmpod",
					"volumes": []any{map[string]any{"name": "bin", "hostPath": map[string]any{"path": bin, "type": "File"}}},
					"containers": []any{map[string]any{
						"name": container, "image": busyboxImage, "imagePullPolicy": "Never",
						"command": []string{"/selfdelete"}, "env": env,
						"volumeMounts": []any{map[string]any{"name": "bin", "mountPath": "/selfdelete", "readOnly": true}},
					}},
				},
			}
			var created pod
			b := api.must(t, 201, "POST", "/api/v1/namespaces/"+ns+"/pods", p)
			require.NoError(t, json.Unmarshal(b, &created))
			watch := watchPod(t, ns, "selfdel", created.Metadata.ResourceVersion)

			secret := "owned-" + randHex(3)
			api.must(t, 201, "POST", "/api/v1/namespaces/"+ns+"/secrets", map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": secret, "ownerReferences": []any{map[string]any{
					"apiVersion": "v1", "kind": "Pod", "name": "selfdel", "uid": created.Metadata.UID, "blockOwnerDeletion": false,
				}}},
			})

			var logs *logStream
			waitFor(t, 60*time.Second, "container started", func() (bool, string) {
				p := getPod(t, ns, "selfdel")
				if p == nil || len(p.Status.ContainerStatuses) == 0 {
					return false, "no status"
				}
				st := p.Status.ContainerStatuses[0].State
				return st.Running != nil || st.Terminated != nil, p.Status.Phase
			})
			logs = followLog(t, ns, "selfdel")
			logs.waitFor(t, "result=", 30*time.Second)
			line := ""
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.HasPrefix(l, "result=") {
					line = l
				}
			}
			t.Logf("%s", line)
			require.True(t, strings.HasPrefix(line, "result="+tc.wantResult+" "), "log:\n%s", logs.String())
			for _, w := range tc.wantLog {
				require.Contains(t, logs.String(), w)
			}

			if tc.wantResult == "deleted" {
				select {
				case <-watch.deleted:
				case <-time.After(60 * time.Second):
					t.Fatalf("pod not gone 60 s after an accepted DELETE")
				}
				last, _ := watch.lastTerminated()
				require.NotNil(t, last)
				ts := last.terminated()
				require.Equal(t, 143, ts.ExitCode, "SIGTERM from the kubelet after the self-delete")
				require.JSONEq(t, `"selfdelete-deleted"`, `"`+terminationMessage(t, ts).Reason+`"`)
				waitFor(t, 60*time.Second, "owned Secret garbage-collected", func() (bool, string) {
					code, _, _ := api.do("GET", "/api/v1/namespaces/"+ns+"/secrets/"+secret, nil)
					return code == 404, "secret still there"
				})
				return
			}
			waitFor(t, 60*time.Second, "pod Succeeded", func() (bool, string) {
				p := getPod(t, ns, "selfdel")
				require.NotNil(t, p)
				return p.Status.Phase == "Succeeded", p.Status.Phase
			})
			ts := getPod(t, ns, "selfdel").terminated()
			require.Equal(t, "selfdelete-"+tc.wantResult, terminationMessage(t, ts).Reason)
			api.must(t, 200, "GET", "/api/v1/namespaces/"+ns+"/secrets/"+secret, nil) // owner still exists
		})
	}
}
