package pools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// replicaSetRemoves returns the n pods a ReplicaSet removes first when it
// scales down (ActivePodsWithRanks in Kubernetes' pkg/controller, with
// pod-deletion-cost on): not scheduled first, then Pending before Running,
// not Ready before Ready, then the lowest deletion cost, then the
// youngest (by name when created in the same second).
func replicaSetRemoves(pods []*corev1.Pod, n int) []*corev1.Pod {
	rank := func(p *corev1.Pod) int {
		r := 0
		if p.Spec.NodeName != "" {
			r += 4
		}
		if p.Status.Phase == corev1.PodRunning {
			r += 2
		}
		if pool.PodReady(p) {
			r++
		}
		return r
	}
	cost := func(p *corev1.Pod) int64 {
		c, _ := strconv.ParseInt(p.Annotations[poolapi.AnnotationDeletionCost], 10, 32)
		return c
	}
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		if ca, cb := cost(a), cost(b); ca != cb {
			return int(ca - cb)
		}
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	return pods[:min(n, len(pods))]
}

// A mark refused twice (the pod kept changing under it) leaves that pod
// unmarked, and the scale-down must not count on the ReplicaSet to spare
// it: a ReplicaSet removes a pod that is not Ready before any Ready one,
// whatever their deletion costs, so marking Ready pods beyond a kept
// starting pod made the ReplicaSet remove the unmarked starting pod (which
// may be claimed by then: the removal the marks exist to prevent) and
// keep a marked Ready pod, unclaimable until the retire grace. Found by
// TestSimulation (3 pods removed unmarked in an hour).
func TestKeptMarkStopsTheScaleDown(t *testing.T) {
	now := monday9
	starting := idlePod("alpine", "starting", false, now.Add(-time.Second))
	starting.Status.Phase = corev1.PodPending
	h := newHarness(t, now, sizing.Budget{},
		poolDeployment("alpine", "- idle_count: 1\n  idle_time: 10m", 3),
		starting,
		idlePod("alpine", "old", true, now.Add(-time.Hour)),
		idlePod("alpine", "young", true, now.Add(-time.Minute)),
	)
	// The kubelet updates "starting" before each of the controller's
	// marks of it, so both are refused.
	h.api.before = func(a k8stesting.Action) error {
		pa, ok := a.(k8stesting.PatchAction)
		if !ok || pa.GetName() != "starting" || !strings.Contains(string(pa.GetPatch()), poolapi.AnnotationRetiring) {
			return nil
		}
		obj, err := h.api.Tracker().Get(podsGVR, ns, "starting")
		require.NoError(t, err)
		p := obj.(*corev1.Pod).DeepCopy()
		p.ResourceVersion = h.api.nextRV()
		require.NoError(t, h.api.Tracker().Update(podsGVR, p, ns))
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "starting", errors.New("modified"))
	}
	require.NoError(t, h.c.Reconcile(context.Background()))
	h.api.before = nil

	list, err := h.api.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var pods []*corev1.Pod
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	replicas := h.api.size(t, "alpine")
	var removes, marked []string
	for _, p := range replicaSetRemoves(pods, len(pods)-replicas) {
		removes = append(removes, p.Name)
	}
	for _, p := range pods {
		if p.Annotations[poolapi.AnnotationRetiring] != "" {
			marked = append(marked, p.Name)
		}
	}
	slices.Sort(removes)
	slices.Sort(marked)
	assert.Equal(t, marked, removes, "at %d replicas the pods the ReplicaSet removes are the marked ones", replicas)
}

// A scale-down retires the idle pods of the node with the fewest pool pods
// first (issue 42: a node left empty is one an autoscaler can remove), then
// the youngest; a pod not Ready still goes before any Ready one, as the
// ReplicaSet would remove it first whatever the marks.
func TestRetireEmptiestNodeFirst(t *testing.T) {
	now := monday9
	on := func(p *corev1.Pod, node string) *corev1.Pod { p.Spec.NodeName = node; return p }
	old := now.Add(-2 * time.Hour)
	cases := []struct {
		name string
		pods []*corev1.Pod
		keep int
		want []string
	}{
		{"the lone pod's node empties first, though it is the oldest", []*corev1.Pod{
			on(idlePod("alpine", "a1", true, now.Add(-time.Minute)), "a"), on(idlePod("alpine", "a2", true, now.Add(-2*time.Minute)), "a"),
			on(claimedPod("alpine", "a-busy", now.Add(-time.Minute)), "a"),
			on(idlePod("alpine", "b1", true, old), "b"),
		}, 1, []string{"b1", "a1"}},
		{"busy pods count: the node with one idle and two busy stays", []*corev1.Pod{
			on(idlePod("alpine", "a1", true, old), "a"), on(claimedPod("alpine", "a-busy1", now.Add(-time.Minute)), "a"), on(claimedPod("alpine", "a-busy2", now.Add(-time.Minute)), "a"),
			on(idlePod("alpine", "b1", true, old), "b"), on(idlePod("alpine", "b2", true, old.Add(time.Second)), "b"),
		}, 1, []string{"b1", "b2"}},
		{"not Ready first, wherever it is", []*corev1.Pod{
			on(idlePod("alpine", "a1", false, now.Add(-time.Second)), "a"), on(idlePod("alpine", "a2", true, now.Add(-time.Hour)), "a"), on(idlePod("alpine", "a3", true, now.Add(-time.Hour)), "a"),
			on(idlePod("alpine", "b1", true, old), "b"),
		}, 2, []string{"a1", "b1"}},
		{"a Pending pod (on no node yet) goes before any on a node", []*corev1.Pod{
			on(idlePod("alpine", "a1", false, now.Add(-time.Second)), "a"), on(idlePod("alpine", "a2", true, now.Add(-time.Hour)), "a"),
			idlePod("alpine", "p1", false, old),
		}, 2, []string{"p1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []k8sruntime.Object
			idle := 0
			for _, p := range tc.pods {
				objs = append(objs, p)
				if p.Labels[poolapi.LabelState] == poolapi.StateIdle {
					idle++
				}
			}
			objs = append(objs, poolDeployment("alpine", fmt.Sprintf("- idle_count: %d\n  idle_time: 0s", tc.keep), idle))
			h := newHarness(t, now, sizing.Budget{}, objs...)
			require.NoError(t, h.c.Reconcile(context.Background()))
			pods, err := h.api.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			var got []string
			for _, p := range pods.Items {
				if p.Annotations[poolapi.AnnotationRetiring] != "" {
					got = append(got, p.Name)
				}
			}
			assert.ElementsMatch(t, tc.want, got)
		})
	}
}
