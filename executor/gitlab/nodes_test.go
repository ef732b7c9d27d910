package gitlab

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
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
			fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}, NodeList: tc.nodes, NodesErr: tc.nodesErr}
			d, out := resizeDriver(t, fc, tc.env)
			kube(d).Bounds.MemoryRequest = "2Gi"
			err := d.Prepare(context.Background())
			assert.Equal(t, 1, fc.NodesAsked(), "the nodes are read once")
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
			assert.Len(t, fc.Warm, 1, "no warm pod claimed")
			assert.Zero(t, len(fc.Colds()), "no cold pod created")
			assert.Empty(t, resized(fc))
		})
	}

	// A job that asks for nothing is not checked: its pod is the pool's.
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}}, NodeList: []pool.Node{fakeNode("n1", "1m", "1Mi")}}
	d, _ := resizeDriver(t, fc, nil)
	require.NoError(t, d.Prepare(context.Background()))
	assert.Zero(t, fc.NodesAsked())
}

// A warm pod whose resize the kubelet calls Infeasible is not spent (issue
// 39, item 5): it went back to its pool (pool.ErrGivenBack). When the
// driver could not read the nodes, nothing shows a larger node: the job is
// refused at once, with the kubelet's word and why the nodes were not
// checked, both in the trace, and no second warm pod or cold pod is
// tried. When a node was seen that fits, the job gets a cold pod.
func TestPrepareInfeasibleResizeSpendsNoPod(t *testing.T) {
	infeasible := func(poolapi.Pod, corev1.ResourceRequirements) error {
		return fmt.Errorf("%w: Node didn't have enough capacity: cpu, requested: 2000, capacity: 1000; %w", pool.ErrResizeInfeasible, pool.ErrGivenBack)
	}
	env := map[string]string{"CUSTOM_ENV_KUBERNETES_CPU_REQUEST": "2"}
	warm := []poolapi.Pod{{Name: "w1", Warm: true, Pool: "alpine"}, {Name: "w2", Warm: true, Pool: "alpine"}}

	t.Run("nodes unreadable: refused", func(t *testing.T) {
		fc := &fakeCluster{Warm: slices.Clone(warm), OnResize: infeasible,
			NodesErr: apierrors.NewForbidden(corev1.Resource("nodes"), "", nil)}
		d, out := resizeDriver(t, fc, env)
		err := d.Prepare(context.Background())
		var se *SystemError
		require.ErrorAs(t, err, &se)
		assert.Contains(t, err.Error(), "no pod of the pool can have the job's resources: resize to requests cpu=2 memory=32Mi")
		assert.Contains(t, err.Error(), "requested: 2000, capacity: 1000")
		assert.Contains(t, err.Error(), "cannot read the nodes of pool alpine")
		assert.Contains(t, out.String(), "warmpod: cannot read the nodes of pool alpine")
		assert.Contains(t, out.String(), "warm pod w1 went back to pool alpine")
		assert.Contains(t, out.String(), "refusing the job")
		assert.Empty(t, fc.Deleted(), "w1 went back to the pool")
		assert.Equal(t, []string{"w1 requests cpu=2 memory=32Mi"}, resized(fc), "no second warm pod")
		assert.Zero(t, len(fc.Colds()))
	})
	t.Run("a node fits: a cold pod", func(t *testing.T) {
		fc := &fakeCluster{Warm: slices.Clone(warm), OnResize: infeasible, NodeList: []pool.Node{fakeNode("small", "1", "4Gi"), fakeNode("big", "4", "8Gi")}}
		d, out := resizeDriver(t, fc, env)
		require.NoError(t, d.Prepare(context.Background()))
		assert.Empty(t, fc.Deleted(), "w1 went back to the pool")
		assert.Contains(t, out.String(), "warm pod w1 went back to pool alpine")
		assert.Contains(t, out.String(), "runs on cold pod cold-1")
	})
}
