package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

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

// A job that found no Ready pod within its warm wait takes one of the
// pool's pods that have been starting the longest (in random order among
// the oldest startingSpread), of those that will start: scheduled, not
// stuck, not retiring or being deleted, of its configuration, not resized
// for another claim, starting for the first time (not draining, not
// crash-looping). It is claimed as a cold start (the job was not warm)
// and waited for until Ready.
func TestClaimStarting(t *testing.T) {
	now := metav1.Now()
	running := func(p *corev1.Pod, startedAgo, readyChangedAgo time.Duration, restarts int32) {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "build", RestartCount: restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-startedAgo))}}}}
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(-readyChangedAgo))
	}
	pods := []k8sruntime.Object{
		readyPod("ready", "1", true), // ClaimWarm's, not this one's
		startingPod("youngest", time.Second, "n1", nil),
		startingPod("oldest-unscheduled", time.Minute, "", nil),
		startingPod("oldest-stuck", time.Minute, "n1", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "build", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
		}),
		startingPod("oldest-crash-looping", time.Minute, "n1", func(p *corev1.Pod) { running(p, 10*time.Second, time.Minute, 1) }),
		// Ready once, then not: past its idle deadline's margin.
		startingPod("oldest-draining", time.Minute, "n1", func(p *corev1.Pod) { running(p, 50*time.Second, time.Second, 0) }),
		startingPod("oldest-retiring", time.Minute, "n1", func(p *corev1.Pod) { p.Annotations = map[string]string{poolapi.AnnotationRetiring: "t"} }),
		startingPod("oldest-deleting", time.Minute, "n1", func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
		startingPod("oldest-other-config", time.Minute, "n1", func(p *corev1.Pod) { p.Labels[poolapi.LabelConfig] = "other" }),
		// Started, not Ready yet: its condition is older than its
		// container.
		startingPod("old-1", 5*time.Second, "n1", func(p *corev1.Pod) { running(p, 2*time.Second, 5*time.Second, 0) }),
		startingPod("old-2", 4*time.Second, "n1", nil),
		startingPod("old-3", 3*time.Second, "n1", nil),
		startingPod("old-4", 2*time.Second, "n1", nil),
	}
	cs, k := fakeAPI(pods...)
	p := Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h", Container: "build"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		// The kubelet: the claimed pod becomes Ready.
		for ctx.Err() == nil {
			l, err := cs.CoreV1().Pods("ci").List(ctx, metav1.ListOptions{LabelSelector: poolapi.LabelState + "=" + poolapi.StateClaimed})
			if err == nil && len(l.Items) > 0 {
				cur := l.Items[0]
				cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				cur.Status.Phase = corev1.PodRunning
				_, _ = cs.CoreV1().Pods("ci").UpdateStatus(ctx, &cur, metav1.UpdateOptions{})
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	got, err := k.ClaimStarting(ctx, p, poolapi.Owner{Job: "7"}, Cold{Reason: poolapi.ColdNoIdle, Waited: time.Second}, 5*time.Second)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Contains(t, []string{"old-1", "old-2", "old-3", "old-4"}, got.Name, "one of the startingSpread oldest that will start")
	assert.False(t, got.Warm, "the job was not warm")
	cur, err := cs.CoreV1().Pods("ci").Get(ctx, got.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, poolapi.StateClaimed, cur.Labels[poolapi.LabelState])
	assert.Equal(t, "7", cur.Labels[poolapi.LabelJob])
	assert.Equal(t, "no-idle", cur.Annotations[poolapi.AnnotationColdReason])
	assert.Equal(t, "1000", cur.Annotations[poolapi.AnnotationClaimWait])
	assert.NotEmpty(t, cur.Annotations[poolapi.AnnotationClaimedAt])
	assert.Equal(t, "false", cur.Annotations[poolapi.AnnotationSafeToEvict], "claimed: not evictable")
	for _, v := range verbs(cs) {
		if strings.HasPrefix(v, "patch") {
			assert.Equal(t, "patch "+got.Name, v, "no other pod claimed")
		}
	}
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

// A starting pod older than the pool's typical start (the pool
// controller's measure, Pool.PodStart, else the median start of the
// pool's Ready pods) is a slow one: passed over, for a younger one or,
// with none, for a cold pod.
func TestClaimStartingPassesOverSlowPods(t *testing.T) {
	readyAfter := func(name string, start time.Duration) *corev1.Pod {
		p := readyPod(name, "1", true)
		created := time.Now().Add(-time.Hour)
		p.CreationTimestamp = metav1.NewTime(created)
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(created.Add(start))
		return p
	}
	for _, tc := range []struct {
		name     string
		podStart time.Duration // Pool.PodStart
		pods     []k8sruntime.Object
		want     []string // the pods it may claim; none: nothing claimed
	}{
		{"overdue and young: the young one", 0, []k8sruntime.Object{readyAfter("r1", 10*time.Second), readyAfter("r2", 8*time.Second), readyAfter("r3", 30*time.Second),
			startingPod("overdue", 20*time.Second, "n1", nil), startingPod("young", 3*time.Second, "n1", nil)}, []string{"young"}},
		{"only overdue: none", 0, []k8sruntime.Object{readyAfter("r1", 10*time.Second), startingPod("overdue", 20*time.Second, "n1", nil)}, nil},
		{"the controller's measure first", 30 * time.Second, []k8sruntime.Object{readyAfter("r1", 10*time.Second), startingPod("overdue", 20*time.Second, "n1", nil)}, []string{"overdue"}},
		{"no measure: any", 0, []k8sruntime.Object{startingPod("overdue", 20*time.Second, "n1", nil), startingPod("young", 3*time.Second, "n1", nil)}, []string{"overdue", "young"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, k := fakeAPI(tc.pods...)
			p := Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h", PodStart: tc.podStart}
			// Not Ready in time: what was claimed is then deleted, which
			// names it.
			_, err := k.ClaimStarting(context.Background(), p, poolapi.Owner{Job: "7"}, Cold{Reason: poolapi.ColdNoIdle}, 10*time.Millisecond)
			if tc.want == nil {
				require.NoError(t, err)
				assert.NotContains(t, strings.Join(verbs(cs), " "), "patch")
				return
			}
			require.ErrorIs(t, err, ErrNotReady)
			var deleted string
			for _, v := range verbs(cs) {
				if n, ok := strings.CutPrefix(v, "delete "); ok {
					deleted = n
				}
			}
			assert.Contains(t, tc.want, deleted)
		})
	}
}

// A claim that conflicts with the kubelet's status write reads the pod
// again and claims it: the pod is still starting.
func TestClaimStartingAfterAStatusWrite(t *testing.T) {
	cs, k := fakeAPI(startingPod("s", 2*time.Second, "n1", nil))
	// The kubelet writes the pod's status after the list: the claim's
	// resourceVersion is stale once.
	cur, err := cs.CoreV1().Pods("ci").Get(context.Background(), "s", metav1.GetOptions{})
	require.NoError(t, err)
	cs.ClearActions()
	listed := false
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if listed {
			return false, nil, nil
		}
		listed = true
		l := &corev1.PodList{Items: []corev1.Pod{*cur.DeepCopy()}}
		c := cur.DeepCopy()
		c.ResourceVersion = "2"
		c.Status.Phase = corev1.PodRunning
		if err := cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, c, "ci"); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	p := Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}
	_, err = k.ClaimStarting(context.Background(), p, poolapi.Owner{Job: "7"}, Cold{Reason: poolapi.ColdNoIdle}, 10*time.Millisecond)
	require.ErrorIs(t, err, ErrNotReady, "claimed, then not Ready in time")
	assert.Equal(t, []string{"list", "patch s", "get s", "patch s", "watch", "delete s"}, verbs(cs))
}

// The pool controller's measured pod start is read from its sizing status;
// anything else is no measure.
func TestControllerPodStart(t *testing.T) {
	for _, tc := range []struct {
		ann  string
		want time.Duration
	}{
		{`{"replicas":2,"podStartSeconds":7.5}`, 7500 * time.Millisecond},
		{`{"replicas":2}`, 0},
		{`{"podStartSeconds":-1}`, 0},
		{`{"podStartSeconds":1e300}`, 0},
		{`not json`, 0},
		{``, 0},
	} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{poolapi.AnnotationSizing: tc.ann}}}
		assert.Equal(t, tc.want, controllerPodStart(d), tc.ann)
	}
}
