package pool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/warmpod/warmpod/poolapi"
)

func TestLimitsArgv(t *testing.T) {
	q := resource.MustParse
	p := poolapi.Pod{Name: "w1", Container: "build", Bin: "/warmpod/warmpod"}
	withStatus := func(res *corev1.ResourceRequirements) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "sidecar"}, {Name: "build", Resources: res}}}}
	}
	pool := &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("32Mi")}, Limits: corev1.ResourceList{"memory": q("128Mi")}}
	for _, tc := range []struct {
		name   string
		before *corev1.Pod
		want   corev1.ResourceRequirements
		argv   []string
	}{
		{"cpu request and memory limit", withStatus(pool),
			corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("32Mi")}, Limits: corev1.ResourceList{"memory": q("256Mi")}},
			[]string{"/warmpod/warmpod", "job", "limits", "--within", "10s", "--cpu-shares", "512", "--cpu-weight", "20", "--cpu-weight", "59", "--memory-limit", "268435456"}},
		{"a new cpu limit", withStatus(pool),
			corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("2"), "memory": q("128Mi")}},
			[]string{"/warmpod/warmpod", "job", "limits", "--within", "10s", "--cpu-quota", "200000"}},
		{"a memory request only: nothing in the cgroup", withStatus(pool),
			corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("64Mi")}, Limits: corev1.ResourceList{"memory": q("128Mi")}}, nil},
		{"cpu requests with the same shares", withStatus(&corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("1m")}}),
			corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("2m")}}, nil},
		{"memory within one page", withStatus(pool),
			corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("134221824")}}, nil},
		{"no status.resources (before 1.33)", withStatus(nil),
			corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m")}}, nil},
		{"no such container", &corev1.Pod{}, corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m")}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.argv, LimitsArgv(p, tc.before, tc.want, 10*time.Second))
		})
	}
	t.Run("the bound is at most job limits' 10m", func(t *testing.T) {
		argv := LimitsArgv(p, withStatus(pool), corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("1")}}, time.Hour)
		assert.Equal(t, []string{"--within", "10m0s"}, argv[3:5])
	})
}

func TestConversions(t *testing.T) {
	// The kubelet's MilliCPUToShares and MilliCPUToQuota, and runc's weights.
	for _, tc := range []struct {
		milli  int64
		shares uint64
		quota  int64
	}{
		{0, 2, 1000}, {1, 2, 1000}, {10, 10, 1000}, {100, 102, 10000}, {500, 512, 50000},
		{1000, 1024, 100000}, {2500, 2560, 250000}, {256000, 262144, 25600000}, {1 << 60, 262144, 1<<63 - 1},
	} {
		assert.Equal(t, tc.shares, CPUShares(tc.milli), "shares of %dm", tc.milli)
		if tc.milli > 0 {
			assert.Equal(t, tc.quota, CPUQuota(tc.milli), "quota of %dm", tc.milli)
		}
	}
	for _, tc := range []struct {
		shares uint64
		want   [2]uint64
	}{
		{2, [2]uint64{1, 1}}, {512, [2]uint64{20, 59}}, {1024, [2]uint64{39, 100}}, {262144, [2]uint64{10000, 10000}}, {1 << 30, [2]uint64{10000, 10000}},
	} {
		assert.Equal(t, tc.want, CPUWeights(tc.shares), "weights of %d shares", tc.shares)
	}
}

// TestAwaitResize: the cgroup's word ends the wait before the status
// says so, and the status still tells a refusal or a deferral as before.
func TestAwaitResize(t *testing.T) {
	q := resource.MustParse
	want := corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m")}, Limits: corev1.ResourceList{"memory": q("256Mi")}}
	target := poolapi.Pod{Name: "w1", Namespace: "ci", Container: "build"}
	inProgress := func() *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "ci", Generation: 2}}
		p.Status.ObservedGeneration = 2
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "build", Resources: &corev1.ResourceRequirements{}}}
		return p
	}
	cond := func(typ corev1.PodConditionType, reason, msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg}}
		}
	}
	applied := func(p *corev1.Pod) {
		p.Status.Conditions = nil
		p.Status.ContainerStatuses[0].Resources = want.DeepCopy()
	}
	for _, tc := range []struct {
		name    string
		inForce []bool              // what job limits says, in order, at once
		status  func(p *corev1.Pod) // the status from the second look on; nil: in progress
		err     error
		msg     string
	}{
		{"in force in the cgroup, the status not yet", []bool{true}, nil, nil, ""},
		{"the pod cannot tell: the status decides", []bool{false}, applied, nil, ""},
		{"infeasible, the pod silent", nil, cond(corev1.PodResizePending, corev1.PodReasonInfeasible, "node too small"), ErrResizeInfeasible, "node too small"},
		{"infeasible, the pod cannot tell", []bool{false}, cond(corev1.PodResizePending, corev1.PodReasonInfeasible, "node too small"), ErrResizeInfeasible, "node too small"},
		{"the kubelet failed", nil, cond(corev1.PodResizeInProgress, corev1.PodReasonError, "runtime said no"), ErrResizeUnsupported, "runtime said no"},
		{"deferred past the bound", []bool{false}, cond(corev1.PodResizePending, corev1.PodReasonDeferred, "node is full for now"), ErrResizeNotApplied, "node is full for now"},
		{"nothing within the bound", nil, nil, ErrResizeNotApplied, "resize in progress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cs := fake.NewClientset()
				gets := 0
				cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
					gets++
					p := inProgress()
					if gets > 1 && tc.status != nil {
						tc.status(p)
					}
					return true, p, nil
				})
				var inForce chan bool
				if tc.inForce != nil {
					inForce = make(chan bool, len(tc.inForce))
					for _, ok := range tc.inForce {
						inForce <- ok
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				err := (&Cluster{CS: cs, Namespace: "ci"}).awaitResize(ctx, target, want, time.Minute, inForce)
				if tc.err == nil {
					require.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, tc.err)
				assert.Contains(t, err.Error(), tc.msg)
			})
		})
	}
}

// A resize the kubelet calls Infeasible spends no pod (issue 39, item 5):
// AwaitResize resizes it back to what it had (what the resize added is
// removed) and gives it back to its pool, idle, where the next claim takes
// it. A resize the kubelet defers may still be applied: it is left to the
// caller, which deletes the pod.
func TestInfeasibleResizeGivesThePodBack(t *testing.T) {
	q := resource.MustParse
	fit := &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("64")}, Limits: corev1.ResourceList{"memory": q("256Mi")}}
	yes := true
	byController := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "alpine", UID: "d-uid", Controller: &yes}}
	for _, tc := range []struct {
		name, reason string
		err          error
		// owners: the pod's before the claim; a pod the pool controller
		// made (decision 0010) loses them at the claim and gets them back
		// with the pod: idle without a controller, the ReplicaSet would
		// adopt it and delete a pod of its choosing.
		owners []metav1.OwnerReference
	}{
		{corev1.PodReasonInfeasible, corev1.PodReasonInfeasible, ErrResizeInfeasible, nil},
		{"Infeasible, made by the pool controller", corev1.PodReasonInfeasible, ErrResizeInfeasible, byController},
		{corev1.PodReasonDeferred, corev1.PodReasonDeferred, ErrResizeNotApplied, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				a := resizablePod("a")
				a.OwnerReferences = tc.owners
				p := Pool{Name: "alpine", Hash: "h", Container: "build", Bin: "/wp/warmpod",
					Template: corev1.PodTemplateSpec{Spec: *a.Spec.DeepCopy()}}
				cs, k := fakeAPI(a)
				// The kubelet of a 4-core node, as a get sees it.
				cs.PrependReactor("get", "pods", func(act k8stesting.Action) (bool, k8sruntime.Object, error) {
					pod := trackedPod(t, cs, act.(k8stesting.GetAction).GetName())
					pod.Status.ObservedGeneration = pod.Generation
					if pod.Spec.Containers[0].Resources.Requests.Cpu().Cmp(q("4")) > 0 {
						pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending,
							Status: corev1.ConditionTrue, Reason: tc.reason, Message: "Node didn't have enough capacity: cpu, requested: 64000, capacity: 4000"})
					}
					return true, pod, nil
				})
				pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1", Runner: "r"}, 0, fit)
				require.NoError(t, err)
				require.NotNil(t, pod)
				claimed := trackedPod(t, cs, "a")
				assert.Equal(t, "false", claimed.Annotations[poolapi.AnnotationSafeToEvict], "the claim's own patch keeps the node up")
				assert.Equal(t, "true", claimed.Annotations[poolapi.AnnotationDoNotDisrupt])
				err = k.AwaitResize(ctx, *pod, 10*time.Second, nil)
				require.ErrorIs(t, err, tc.err)
				assert.Contains(t, err.Error(), "requested: 64000")
				got := trackedPod(t, cs, "a")
				if tc.err != ErrResizeInfeasible {
					assert.NotErrorIs(t, err, ErrGivenBack)
					assert.Equal(t, poolapi.StateClaimed, got.Labels[poolapi.LabelState], "left to the caller")
					return
				}
				require.ErrorIs(t, err, ErrGivenBack)
				res := got.Spec.Containers[0].Resources
				assert.Equal(t, corev1.ResourceList{"cpu": q("100m")}, res.Requests, "the cpu it had")
				assert.Empty(t, res.Limits, "the memory limit the resize added removed")
				assert.Equal(t, map[string]string{poolapi.LabelPool: "alpine", poolapi.LabelState: poolapi.StateIdle, poolapi.LabelConfig: "h"}, got.Labels, "idle, no job")
				// The fake's merge patch keeps a field the patch sets to null
				// (it decodes into the stored object): the patches tell.
				claimPatch, unclaim := mergePatches(cs)[0], mergePatches(cs)[1]
				assert.Equal(t, tc.owners != nil, strings.Contains(claimPatch, `"ownerReferences":null`), "claimed: no owner; %s", claimPatch)
				var back struct {
					Metadata struct {
						OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
					} `json:"metadata"`
				}
				require.NoError(t, json.Unmarshal([]byte(unclaim), &back))
				assert.Equal(t, tc.owners, back.Metadata.OwnerReferences, "given back: the owner it had before the claim; %s", unclaim)
				assert.Empty(t, got.Annotations[poolapi.AnnotationClaimedAt])
				assert.Equal(t, "true", got.Annotations[poolapi.AnnotationSafeToEvict], "idle again: evictable")
				assert.NotContains(t, got.Annotations, poolapi.AnnotationDoNotDisrupt)
				assert.NotContains(t, verbs(cs), "delete a")
				again, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "2"}, 0, nil)
				require.NoError(t, err)
				require.NotNil(t, again, "the pool's to claim again")
				assert.Equal(t, "a", again.Name)
			})
		})
	}
}

// mergePatches are the fake API server's merge patches of pods (not of a
// subresource), in order.
func mergePatches(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetSubresource() == "" && pa.GetPatchType() == types.MergePatchType {
			out = append(out, string(pa.GetPatch()))
		}
	}
	return out
}
