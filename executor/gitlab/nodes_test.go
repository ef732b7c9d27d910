package gitlab

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/warmpod/warmpod/executor/pool"
)

func fakeNode(name, cpu, mem string) pool.Node {
	return pool.Node{Name: name, Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
}

// A request no node of the pool can allocate is refused before any pod
// is claimed or created, with the figures; one that fits some node goes
// on; nodes that cannot be read leave the check to the bounds, said once.
func TestPrepareRefusesARequestNoNodeCanHold(t *testing.T) {
	forbidden := apierrors.NewForbidden(corev1.Resource("nodes"), "", nil)
	for name, tc := range map[string]struct {
		nodes    []pool.Node
		nodesErr error
		env      map[string]string
		err      string // "" : prepare goes on to a warm pod
		note     string
	}{
		"exactly a node's allocatable": {nodes: []pool.Node{fakeNode("n1", "2", "4Gi")},
			env: map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "2"}},
		"cpu above every node": {nodes: []pool.Node{fakeNode("n1", "1", "4Gi"), fakeNode("n2", "1500m", "8Gi")},
			env: map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "2"},
			err: "the job's pod would request cpu=2 memory=32Mi, more than any node of pool alpine can allocate (n1: cpu=1 memory=4Gi; n2: cpu=1500m memory=8Gi)"},
		"memory above every node": {nodes: []pool.Node{fakeNode("n1", "4", "512Mi")},
			env: map[string]string{"CUSTOM_ENV_KUBERNETES_MEMORY_LIMIT": "1Gi", "CUSTOM_ENV_KUBERNETES_MEMORY_REQUEST": "1Gi"},
			err: "the job's pod would request cpu=10m memory=1Gi, more than any node of pool alpine can allocate (n1: cpu=4 memory=512Mi)"},
		"one node of several fits": {nodes: []pool.Node{fakeNode("small", "1", "1Gi"), fakeNode("big", "4", "8Gi")},
			env: map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "2"}},
		"nodes forbidden": {nodesErr: forbidden, env: map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "2"},
			note: "the driver's account needs get and list on nodes, the ClusterRole warmpod-gitlab-nodes of deploy/gitlab-rbac.yaml"},
		"no node matches": {nodes: []pool.Node{}, env: map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "2"},
			note: "no node matches pool alpine's nodeName and nodeSelector"},
	} {
		t.Run(name, func(t *testing.T) {
			fc := &fakeCluster{warm: []pool.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}, nodes: tc.nodes, nodesErr: tc.nodesErr}
			d, out := resizeDriver(t, fc, tc.env)
			d.Cfg.Bounds.MemoryRequest = "2Gi"
			err := d.Prepare(context.Background())
			assert.Equal(t, 1, fc.nodesAsked, "the nodes are read once")
			if tc.note != "" {
				assert.Contains(t, out.String(), tc.note)
			}
			if tc.err == "" {
				require.NoError(t, err)
				assert.Contains(t, out.String(), "runs on warm pod w1")
				return
			}
			var se *SystemError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, err.Error(), tc.err)
			assert.Len(t, fc.warm, 1, "no warm pod claimed")
			assert.Zero(t, fc.colds, "no cold pod created")
			assert.Empty(t, fc.resized)
		})
	}

	// A job that asks for nothing is not checked: its pod is the pool's.
	fc := &fakeCluster{warm: []pool.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}, nodes: []pool.Node{fakeNode("n1", "1m", "1Mi")}}
	d, _ := resizeDriver(t, fc, nil)
	require.NoError(t, d.Prepare(context.Background()))
	assert.Zero(t, fc.nodesAsked)
}
