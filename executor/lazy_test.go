package executor

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
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

// A Lazy reads its kubeconfig at its first call, not before: a missing
// file is an error of each call, a valid one gives the client.
func TestLazy(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "kubeconfig")
	for _, tc := range []struct {
		name, file, wantNS, wantErr string
		write                       bool
	}{
		{name: "valid kubeconfig, written after NewLazy", file: good, write: true, wantNS: "ci"},
		{name: "no such file", file: filepath.Join(dir, "missing"), wantErr: "kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLazy(tc.file, "", "test")
			if tc.write {
				require.NoError(t, os.WriteFile(tc.file, []byte(testKubeconfig), 0o600))
			}
			c, err := l.Cluster()
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.wantNS, c.Namespace)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			var se *session.SystemError
			assert.ErrorAs(t, err, &se, "an exec that never began: not retried")
			ctx := context.Background()
			code, err := l.Exec(ctx, poolapi.Pod{}, []string{"true"}, nil, io.Discard, io.Discard)
			assert.Equal(t, -1, code)
			assert.ErrorContains(t, err, tc.wantErr)
			_, err = l.ClaimWarm(ctx, pool.Pool{}, poolapi.Owner{}, 0, nil)
			assert.ErrorContains(t, err, tc.wantErr)
			_, err = l.CreateCold(ctx, pool.Pool{}, poolapi.Owner{}, pool.Cold{}, 0)
			assert.ErrorContains(t, err, tc.wantErr)
			assert.ErrorContains(t, l.Delete(ctx, poolapi.Pod{}), tc.wantErr)
			_, err = l.PodsOfJob(ctx, poolapi.Owner{})
			assert.ErrorContains(t, err, tc.wantErr)
			_, err = l.Pools(ctx)
			assert.ErrorContains(t, err, tc.wantErr)
			assert.ErrorContains(t, l.AwaitResize(ctx, poolapi.Pod{}, 0, nil), tc.wantErr)
			_, err = l.Nodes(ctx, &corev1.PodTemplateSpec{})
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}
