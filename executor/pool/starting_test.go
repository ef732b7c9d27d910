package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/warmpod/warmpod/poolapi"
)

// startingPod is a pool pod, not Ready, created age ago, scheduled unless
// node is "", edited by with.
func startingPod(name string, age time.Duration, node string, with func(*corev1.Pod)) *corev1.Pod {
	p := readyPod(name, "1", false)
	p.CreationTimestamp = metav1.NewTime(time.Now().Add(-age))
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodPending
	if with != nil {
		with(p)
	}
	return p
}

// A job that found no Ready pod takes the pool's pod that has been
// starting the longest, of those that will start: scheduled, not stuck,
// not retiring or being deleted, of its configuration, not resized for
// another claim. It is claimed as a cold start (the job was not warm) and
// waited for until Ready.
func TestClaimStarting(t *testing.T) {
	now := metav1.Now()
	pods := []k8sruntime.Object{
		readyPod("ready", "1", true), // ClaimWarm's, not this one's
		startingPod("young", time.Second, "n1", nil),
		startingPod("oldest-unscheduled", time.Minute, "", nil),
		startingPod("oldest-stuck", time.Minute, "n1", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "build", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
		}),
		startingPod("oldest-retiring", time.Minute, "n1", func(p *corev1.Pod) { p.Annotations = map[string]string{poolapi.AnnotationRetiring: "t"} }),
		startingPod("oldest-deleting", time.Minute, "n1", func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
		startingPod("oldest-other-config", time.Minute, "n1", func(p *corev1.Pod) { p.Labels[poolapi.LabelConfig] = "other" }),
		startingPod("old", 5*time.Second, "n1", nil),
	}
	cs, k := fakeAPI(pods...)
	p := Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h", Container: "build"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		// The kubelet: "old" becomes Ready once claimed.
		for ctx.Err() == nil {
			cur, err := cs.CoreV1().Pods("ci").Get(ctx, "old", metav1.GetOptions{})
			if err == nil && cur.Labels[poolapi.LabelState] == poolapi.StateClaimed {
				cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				cur.Status.Phase = corev1.PodRunning
				_, _ = cs.CoreV1().Pods("ci").UpdateStatus(ctx, cur, metav1.UpdateOptions{})
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	got, err := k.ClaimStarting(ctx, p, poolapi.Owner{Job: "7"}, Cold{Reason: poolapi.ColdNoIdle, Waited: time.Second}, 5*time.Second)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "old", got.Name)
	assert.False(t, got.Warm, "the job was not warm")
	cur, err := cs.CoreV1().Pods("ci").Get(ctx, "old", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, poolapi.StateClaimed, cur.Labels[poolapi.LabelState])
	assert.Equal(t, "7", cur.Labels[poolapi.LabelJob])
	assert.Equal(t, "no-idle", cur.Annotations[poolapi.AnnotationColdReason])
	assert.Equal(t, "1000", cur.Annotations[poolapi.AnnotationClaimWait])
	assert.NotEmpty(t, cur.Annotations[poolapi.AnnotationClaimedAt])
	assert.Equal(t, "false", cur.Annotations[poolapi.AnnotationSafeToEvict], "claimed: not evictable")
}

func TestClaimStartingFindsNone(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods []k8sruntime.Object
		p    Pool
	}{
		{"only Ready pods", []k8sruntime.Object{readyPod("ready", "1", true)}, Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}},
		{"only unscheduled", []k8sruntime.Object{startingPod("u", time.Minute, "", nil)}, Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}},
		{"pool pending", []k8sruntime.Object{startingPod("s", time.Minute, "n1", nil)}, Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h", Pending: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, k := fakeAPI(tc.pods...)
			got, err := k.ClaimStarting(context.Background(), tc.p, poolapi.Owner{Job: "7"}, Cold{Reason: poolapi.ColdNoIdle}, time.Second)
			require.NoError(t, err)
			assert.Nil(t, got)
			for _, v := range verbs(cs) {
				assert.NotContains(t, v, "patch", "nothing claimed")
			}
		})
	}
}

// A starting pod that is not Ready in time is deleted, and the error says
// so: the caller makes a cold pod.
func TestClaimStartingNotReadyInTime(t *testing.T) {
	cs, k := fakeAPI(startingPod("slow", time.Minute, "n1", nil))
	p := Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}
	got, err := k.ClaimStarting(context.Background(), p, poolapi.Owner{Job: "7"}, Cold{Reason: poolapi.ColdNoIdle}, 50*time.Millisecond)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNotReady), "%v", err)
	assert.Nil(t, got)
	assert.Contains(t, verbs(cs), "delete slow")
}

// A starting pod older than the pool's typical start (the median start of
// its Ready pods) is a slow one: passed over, for a younger one or, with
// none, for a cold pod.
func TestClaimStartingPassesOverSlowPods(t *testing.T) {
	readyAfter := func(name string, start time.Duration) *corev1.Pod {
		p := readyPod(name, "1", true)
		created := time.Now().Add(-time.Hour)
		p.CreationTimestamp = metav1.NewTime(created)
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(created.Add(start))
		return p
	}
	for _, tc := range []struct {
		name string
		pods []k8sruntime.Object
		want string // "": none claimed
	}{
		{"overdue and young: the young one", []k8sruntime.Object{readyAfter("r1", 10*time.Second), readyAfter("r2", 8*time.Second), readyAfter("r3", 30*time.Second),
			startingPod("overdue", 20*time.Second, "n1", nil), startingPod("young", 3*time.Second, "n1", nil)}, "young"},
		{"only overdue: none", []k8sruntime.Object{readyAfter("r1", 10*time.Second), startingPod("overdue", 20*time.Second, "n1", nil)}, ""},
		{"no Ready pod to measure by: the oldest", []k8sruntime.Object{startingPod("overdue", 20*time.Second, "n1", nil), startingPod("young", 3*time.Second, "n1", nil)}, "overdue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, k := fakeAPI(tc.pods...)
			p := Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}
			// Not Ready in time: what was claimed is then deleted, which
			// names it.
			_, err := k.ClaimStarting(context.Background(), p, poolapi.Owner{Job: "7"}, Cold{Reason: poolapi.ColdNoIdle}, 10*time.Millisecond)
			if tc.want == "" {
				require.NoError(t, err)
				assert.NotContains(t, strings.Join(verbs(cs), " "), "patch")
				return
			}
			require.ErrorIs(t, err, ErrNotReady)
			assert.Contains(t, verbs(cs), "delete "+tc.want)
		})
	}
}
