//go:build kube

package kubee2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/pools"
)

// A scale-down empties a node (issue 42): the controller retires the idle
// pods of the node with the fewest pool pods first, then the youngest, so
// that a node autoscaler finds a node with none left to remove. Three
// hollow nodes (kube-e2e has one real node); the scheduler places the
// pods, and cordoning steers it: 2 older pods on one node, 4 younger ones
// on another, then a policy of 3 idle pods. Retiring the youngest, as
// before, would leave pods on both nodes; emptiest first leaves one node
// with none.
func TestRetireEmptiestNodeOnHollowNodes(t *testing.T) {
	ns := newNamespace(t, "retire", false)
	ctx := context.Background()
	cl := adminCluster(t, ns)
	cs := cl.CS
	h := startHollowNodes(t, cs, ns, 3, 20)
	a, b, c := h.names[0], h.names[1], h.names[2]
	cordon := func(node string, on bool) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
		_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		// The node controller's taint follows the cordon: once it is
		// there, the change has reached the controllers' informers, the
		// scheduler's among them.
		waitFor(t, 30*time.Second, fmt.Sprintf("node %s cordoned %t", node, on), func() (bool, string) {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			tainted := false
			for _, tt := range n.Spec.Taints {
				tainted = tainted || tt.Key == corev1.TaintNodeUnschedulable
			}
			return tainted == on, fmt.Sprint(n.Spec.Taints)
		})
	}
	scale := func(n int32) {
		t.Helper()
		s, err := cs.AppsV1().Deployments(ns).GetScale(ctx, "retire", metav1.GetOptions{})
		require.NoError(t, err)
		s.Spec.Replicas = n
		_, err = cs.AppsV1().Deployments(ns).UpdateScale(ctx, "retire", s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	// byNode counts the pool's pods that stay (not being deleted), by node.
	byNode := func() (map[string]int, int) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: poolapi.LabelPool + "=retire"})
		require.NoError(t, err)
		m, ready := map[string]int{}, 0
		for i := range l.Items {
			p := &l.Items[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			m[p.Spec.NodeName]++
			if pool.PodReady(p) {
				ready++
			}
		}
		return m, ready
	}
	settled := func(want map[string]int) {
		t.Helper()
		waitFor(t, 2*time.Minute, fmt.Sprintf("pods by node %v, all Ready", want), func() (bool, string) {
			m, ready := byNode()
			n := 0
			for _, v := range want {
				n += v
			}
			delete(m, "")
			return ready == n && fmt.Sprint(m) == fmt.Sprint(want), fmt.Sprintf("%v, %d Ready", m, ready)
		})
	}

	cordon(a, true)
	cordon(c, true)
	d := pbPoolDeployment(t, "retire", 2, "")
	h.place(&d.Spec.Template.Spec)
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	settled(map[string]int{b: 2})
	cordon(a, false)
	cordon(b, true)
	scale(6)
	settled(map[string]int{a: 4, b: 2})
	cordon(b, false)
	cordon(c, false)

	policy := "- idle_count: 3\n"
	_, err = cs.AppsV1().Deployments(ns).Patch(ctx, "retire", types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, poolapi.AnnotationPolicy, policy), metav1.PatchOptions{})
	require.NoError(t, err)
	run := &pbRun{ns: ns, logFile: filepath.Join(t.TempDir(), "controller.log")}
	stop := pbStartController(t, cl.Config, pools.Config{Namespace: ns}, clock.RealClock{}, run)
	defer stop()
	waitFor(t, 2*time.Minute, "the pool at 3 replicas, its pods settled", func() (bool, string) {
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "retire", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		m, ready := byNode()
		n := 0
		for _, v := range m {
			n += v
		}
		return *dep.Spec.Replicas == 3 && ready == 3 && n == 3, fmt.Sprintf("replicas %d, %v, %d Ready", *dep.Spec.Replicas, m, ready)
	})
	m, _ := byNode()
	assert.Equal(t, map[string]int{a: 3}, m, "node %s (2 pods, the older) emptied first, then the youngest of %s", b, a)
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Deployment"})
	require.NoError(t, err)
	var reasons []string
	for _, e := range evs.Items {
		reasons = append(reasons, e.Reason)
	}
	t.Logf("Events on the pool: %v", slices.Compact(reasons))
}
