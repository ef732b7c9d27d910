package pools

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// countingPodLister counts the lists of the pods' cache: each one scans
// every pool pod of the namespace, whatever its selector.
type countingPodLister struct {
	corelisters.PodLister
	lists *int
}

func (l countingPodLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return countingPodNamespaceLister{l.PodLister.Pods(namespace), l.lists}
}

type countingPodNamespaceLister struct {
	corelisters.PodNamespaceLister
	lists *int
}

func (l countingPodNamespaceLister) List(s labels.Selector) ([]*corev1.Pod, error) {
	*l.lists++
	return l.PodNamespaceLister.List(s)
}

// A decision reads the pool pods' cache once, not once per pool: a list
// by selector scans every pool pod of the namespace, so one per pool made
// each decision cost pools × pods (at 1,000 pools and up to 2,400 pods,
// half a second of CPU per decision in TestSimulation, and decisions
// follow every burst of pod events). Each pool still sees its own pods.
func TestDecisionListsPodsOnce(t *testing.T) {
	const pools = 50
	var objs []k8sruntime.Object
	for i := range pools {
		name := fmt.Sprintf("pool-%02d", i)
		objs = append(objs, poolDeployment(name, "- idle_count: 1", 1))
		// Pool i has i%3 idle pods: its size goes to 1 from what it sees.
		for j := range i % 3 {
			objs = append(objs, idlePod(name, fmt.Sprintf("%s-%d", name, j), true, monday9.Add(-time.Hour)))
		}
	}
	h := newHarness(t, monday9, sizing.Budget{}, objs...)
	lists := 0
	h.c.pods = countingPodLister{h.c.pods, &lists}
	require.NoError(t, h.c.Reconcile(context.Background()))
	assert.Equal(t, 1, lists, "lists of the pods' cache in one decision of %d pools", pools)
	for i := range pools {
		name := fmt.Sprintf("pool-%02d", i)
		assert.Equal(t, 1, h.api.size(t, name), name)
		assert.Equal(t, float64(i%3), testutil.ToFloat64(h.c.m.idle.WithLabelValues(ns, name)), "%s's own idle pods", name)
	}
}

// A decision parses a pool's policy only when its text changed: a YAML
// parse per pool per decision was most of a decision's CPU at 1,000 pools
// (TestSimulation's profile). Measured by allocations, not time: a decision
// over 50 unchanged pools allocated about 214 times per pool with a parse
// each, 15 without. A changed text is read at the next decision, an
// invalid one reported as before.
func TestDecisionParsesAPolicyOnce(t *testing.T) {
	const pools = 50
	policy := "- idle_count: 1\n  idle_time: 10m\n- periods: [\"* 8-17 * * mon-fri\"]\n  idle_count: 1\n  scale_factor: 0.5"
	var objs []k8sruntime.Object
	for i := range pools {
		name := fmt.Sprintf("pool-%02d", i)
		objs = append(objs, poolDeployment(name, policy, 1), idlePod(name, name+"-a", true, monday9.Add(-time.Hour)))
	}
	h := newHarness(t, monday9, sizing.Budget{}, objs...)
	ctx := context.Background()
	require.NoError(t, h.c.Reconcile(ctx))
	allocs := testing.AllocsPerRun(5, func() { require.NoError(t, h.c.Reconcile(ctx)) })
	assert.Less(t, allocs/pools, 50.0, "allocations per pool of a decision that changes nothing")

	for _, step := range []struct{ policy, want string }{
		{"- idle_count: 3", "pods 1 → 3"},
		{"- idle_count: -1", "InvalidPolicy"},
		{"- idle_count: 2", "pods 3 → 2"},
	} {
		d, err := h.api.AppsV1().Deployments(ns).Get(ctx, "pool-07", metav1.GetOptions{})
		require.NoError(t, err)
		d.Annotations[poolapi.AnnotationPolicy] = step.policy
		d.ResourceVersion = h.api.nextRV()
		_, err = h.api.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		require.NoError(t, err)
		h.settle(t)
		require.NoError(t, h.c.Reconcile(ctx))
		assert.Contains(t, strings.Join(h.events(), "\n"), step.want, "policy %q", step.policy)
	}
}
