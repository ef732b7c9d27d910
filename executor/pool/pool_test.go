package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const manifest = `
apiVersion: v1
kind: ServiceAccount
metadata: {name: skipped}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: alpine}
spec:
  replicas: 3
  selector: {matchLabels: {warmpod.dev/pool: alpine, warmpod.dev/state: idle}}
  template:
    metadata:
      labels: {warmpod.dev/pool: alpine, warmpod.dev/state: idle, warmpod.dev/config: "%s"}
    spec:
      initContainers:
      - {name: install, image: warmpod:1, command: [/warmpod, install, /wp]}
      containers:
      - {name: sidecar, image: busybox}
      - {name: build, image: alpine:3.20, command: [/wp/warmpod], args: [--max-jobs=1]}
`

func TestParse(t *testing.T) {
	set, err := Parse(strings.NewReader(fmt.Sprintf(manifest, "stale")))
	require.NoError(t, err)
	require.Len(t, set.Pools, 1)
	p := set.Pools[0]
	assert.Equal(t, "alpine", p.Name)
	assert.Equal(t, "alpine:3.20", p.Image)
	assert.Equal(t, "build", p.Container)
	assert.Equal(t, "/wp/warmpod", p.Bin)
	assert.Len(t, p.Hash, 32)
	assert.Equal(t, p.Hash, p.Template.Labels[LabelConfig], "the template carries the computed hash, not the file's")

	// The hash ignores the label's own value and changes with the template.
	again, err := Parse(strings.NewReader(fmt.Sprintf(manifest, p.Hash)))
	require.NoError(t, err)
	assert.Equal(t, p.Hash, again.Pools[0].Hash)
	other, err := Parse(strings.NewReader(strings.Replace(fmt.Sprintf(manifest, p.Hash), "--max-jobs=1", "--max-jobs=2", 1)))
	require.NoError(t, err)
	assert.NotEqual(t, p.Hash, other.Pools[0].Hash)
}

func TestParseRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"no deployment":  "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: x}\n",
		"no pool labels": strings.Replace(fmt.Sprintf(manifest, "h"), "warmpod.dev/pool: alpine, warmpod.dev/state: idle, ", "", 1),
		"selector keeps claimed pods": strings.Replace(fmt.Sprintf(manifest, "h"),
			"selector: {matchLabels: {warmpod.dev/pool: alpine, warmpod.dev/state: idle}}", "selector: {matchLabels: {warmpod.dev/pool: alpine}}", 1),
		"not yaml": "kind: [",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(doc))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrManifest)
		})
	}
}

// The pool manifests in deploy/, GitLab's and GitHub's, and the bench's
// one-init-container variant of kube-e2e's, are pools the
// drivers read from the cluster: warmpod reads pod-template-hash, and no
// hash is written by hand.
func TestDeployPoolsNeedNoHash(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	for _, tc := range []struct {
		file   string
		pools  int
		resize bool // GitLab's build container resizes in place for a job's overwrite variables
	}{
		{"deploy/pool.yaml", 1, true},
		{"deploy/kube-e2e/pool.yaml", 1, true},
		{"bench/cold-one-init-pool.yaml", 1, true}, // make bench-k8s-anchor-cold's one-init layout
		{"deploy/github-pool.yaml", 2, false},
		{"deploy/kube-e2e/github-pool.yaml", 2, false},
	} {
		f := tc.file
		raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", f))
		require.NoError(t, err)
		assert.NotContains(t, string(raw), LabelConfig+":", f)
		_, err = Parse(strings.NewReader(string(raw)))
		assert.ErrorContains(t, err, "only the cluster knows", "%s: a file cannot tell its pods apart", f)
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 64<<10)
		n := 0
		for {
			var d appsv1.Deployment
			if err := dec.Decode(&d); err != nil {
				break
			}
			if d.Kind != "Deployment" {
				continue
			}
			n++
			assert.Equal(t, "warmpod", d.Labels["app.kubernetes.io/name"], f)
			assert.Equal(t, "pool", d.Labels["app.kubernetes.io/component"], f)
			p, err := fromDeployment(&d, true)
			require.NoError(t, err, f)
			assert.Equal(t, LabelTemplateHash, p.HashLabel, f)
			if tc.resize {
				c := p.BuildContainer(&p.Template)
				assert.Len(t, c.ResizePolicy, 2, "%s: cpu and memory resize in place", f)
			}
		}
		assert.Equal(t, tc.pools, n, f)
	}
}

func TestForImage(t *testing.T) {
	set, err := Parse(strings.NewReader(fmt.Sprintf(manifest, "h")))
	require.NoError(t, err)
	p, warm := set.ForImage("")
	assert.True(t, warm)
	assert.Equal(t, "alpine", p.Name)
	_, warm = set.ForImage("alpine:3.20")
	assert.True(t, warm)
	q, warm := set.ForImage("golang:1.26")
	assert.False(t, warm)
	assert.Equal(t, "golang:1.26", q.Template.Spec.Containers[1].Image)
	assert.Equal(t, "busybox", q.Template.Spec.Containers[0].Image, "only warmpod's container changes")
	assert.NotEqual(t, p.Hash, q.Hash)
	assert.Equal(t, q.Hash, q.Template.Labels[LabelConfig])
	assert.Equal(t, "alpine:3.20", set.Pools[0].Template.Spec.Containers[1].Image, "the pool itself is unchanged")
}

func readyPod(name, rv string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci", ResourceVersion: rv, UID: types.UID("uid-" + name),
			Labels: map[string]string{LabelPool: "alpine", LabelState: StateIdle, LabelConfig: "h"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

// conflictOnStaleRV makes the fake API server refuse a patch whose
// metadata.resourceVersion is not the object's, as the real one does (a
// patch without one is applied as it is). A patch of pods/resize sets the
// named containers' resources and raises the pod's generation; any other
// patch sets labels and annotations.
func conflictOnStaleRV(cs *fake.Clientset) {
	var mu sync.Mutex
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		mu.Lock()
		defer mu.Unlock()
		obj, err := cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*corev1.Pod)
		var patch struct {
			Metadata struct {
				ResourceVersion string            `json:"resourceVersion"`
				Labels          map[string]string `json:"labels"`
				Annotations     map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Containers []corev1.Container `json:"containers"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
			return true, nil, err
		}
		if rv := patch.Metadata.ResourceVersion; rv != "" && rv != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, cur.Name, fmt.Errorf("the object has been modified"))
		}
		next := cur.DeepCopy()
		if pa.GetSubresource() == "resize" {
			for _, pc := range patch.Spec.Containers {
				for i := range next.Spec.Containers {
					if next.Spec.Containers[i].Name == pc.Name {
						next.Spec.Containers[i].Resources = pc.Resources
					}
				}
			}
			next.Generation++
		} else {
			for k, v := range patch.Metadata.Labels {
				next.Labels[k] = v
			}
			for k, v := range patch.Metadata.Annotations {
				if next.Annotations == nil {
					next.Annotations = map[string]string{}
				}
				next.Annotations[k] = v
			}
		}
		next.ResourceVersion = cur.ResourceVersion + "1"
		if err := cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, next, cur.Namespace); err != nil {
			return true, nil, err
		}
		return true, next, nil
	})
}

// resizablePod is a Ready idle pod of pool alpine as the API server
// reports it since 1.33 (generation 1: never changed) with a build
// container.
func resizablePod(name string) *corev1.Pod {
	p := readyPod(name, "1", true)
	p.Generation = 1
	p.Spec.Containers = []corev1.Container{{Name: "build", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "build", Resources: p.Spec.Containers[0].Resources.DeepCopy()}}
	return p
}

// fakeAPI is a fake API server holding pods that refuses stale
// resourceVersions (conflictOnStaleRV), and a Cluster of namespace ci on it.
func fakeAPI(pods ...k8sruntime.Object) (*fake.Clientset, *Cluster) {
	cs := fake.NewClientset(pods...)
	conflictOnStaleRV(cs)
	return cs, &Cluster{CS: cs, Namespace: "ci"}
}

// verbs lists the fake API server's actions as "verb[/subresource] name".
func verbs(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		v := a.GetVerb()
		if a.GetSubresource() != "" {
			v += "/" + a.GetSubresource()
		}
		if n, ok := a.(interface{ GetName() string }); ok && n.GetName() != "" {
			v += " " + n.GetName()
		}
		out = append(out, v)
	}
	return out
}

// A claim with fit resizes the pod before it claims it (bench/resize-
// breakdown.md: the kubelet acts on the first change at once, on a second
// one only after its next relist), each step conditional on the pod's
// resourceVersion.
func TestClaimWarmResizesBeforeTheClaim(t *testing.T) {
	q := resource.MustParse
	fit := &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m"), "ephemeral-storage": q("1Gi")},
		Limits: corev1.ResourceList{"memory": q("256Mi")}}
	want := corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m")}, Limits: corev1.ResourceList{"memory": q("256Mi")}}
	p := Pool{Name: "alpine", Hash: "h", Container: "build", Bin: "/wp/warmpod"}
	ctx := context.Background()

	t.Run("resized, then claimed", func(t *testing.T) {
		cs, k := fakeAPI(resizablePod("a"))
		pod, err := k.ClaimWarm(ctx, p, Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		require.NotNil(t, pod)
		assert.Equal(t, []string{"list", "patch/resize a", "patch a"}, verbs(cs))
		patch := cs.Actions()[1].(k8stesting.PatchAction).GetPatch()
		assert.JSONEq(t, `{"metadata":{"resourceVersion":"1"},"spec":{"containers":[{"name":"build","resources":{"requests":{"cpu":"500m"},"limits":{"memory":"256Mi"}}}]}}`,
			string(patch), "only the warmpod container's cpu and memory, on the condition of the listed pod")
		require.NotNil(t, pod.Resizing)
		assert.Equal(t, want, pod.Resizing.Want)
		assert.Equal(t, "100m", pod.Resizing.Before.Status.ContainerStatuses[0].Resources.Requests.Cpu().String(), "the status before the resize: what the cgroup held")
		got, err := cs.CoreV1().Pods("ci").Get(ctx, "a", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, StateClaimed, got.Labels[LabelState])
		assert.Equal(t, want, got.Spec.Containers[0].Resources)
	})

	t.Run("the kubelet's status write between resize and claim", func(t *testing.T) {
		cs, k := fakeAPI(resizablePod("a"))
		statusWritten := false
		cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			if a.GetSubresource() == "" && !statusWritten {
				// The kubelet reports the resize in progress: a new
				// resourceVersion, the same generation.
				statusWritten = true
				obj, err := cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "ci", "a")
				require.NoError(t, err)
				cur := obj.(*corev1.Pod).DeepCopy()
				cur.ResourceVersion += "s"
				require.NoError(t, cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, cur, "ci"))
			}
			return false, nil, nil
		})
		pod, err := k.ClaimWarm(ctx, p, Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		require.NotNil(t, pod, "claimed after reading the pod again")
		assert.Equal(t, []string{"list", "patch/resize a", "patch a", "get a", "patch a"}, verbs(cs))
	})

	t.Run("a claim without fit never takes a pod resized for another", func(t *testing.T) {
		resized := resizablePod("a")
		resized.Generation = 2
		cs, k := fakeAPI(resized)
		pod, err := k.ClaimWarm(ctx, p, Owner{Job: "2"}, 0, nil)
		require.NoError(t, err)
		assert.Nil(t, pod)
		pod, err = k.ClaimWarm(ctx, p, Owner{Job: "2"}, 0, fit)
		require.NoError(t, err)
		assert.Nil(t, pod, "nor one with fit")
		assert.Equal(t, []string{"list", "list"}, verbs(cs))
	})

	t.Run("another claimer's resize came first", func(t *testing.T) {
		cs, k := fakeAPI(resizablePod("a"))
		first := true
		cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			if first {
				// What this claimer lists is the pod before the other
				// claimer's resize.
				first = false
				list := &corev1.PodList{Items: []corev1.Pod{*resizablePod("a")}}
				obj, err := cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "ci", "a")
				require.NoError(t, err)
				other := obj.(*corev1.Pod).DeepCopy()
				other.Generation, other.ResourceVersion = 2, "2"
				require.NoError(t, cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, other, "ci"))
				return true, list, nil
			}
			return false, nil, nil
		})
		pod, err := k.ClaimWarm(ctx, p, Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		assert.Nil(t, pod)
		assert.Equal(t, []string{"list", "patch/resize a"}, verbs(cs), "the conflict leaves the pod to the other claimer")
	})

	t.Run("retired between resize and claim: abandoned", func(t *testing.T) {
		cs, k := fakeAPI(resizablePod("a"))
		cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			if a.GetSubresource() == "" {
				obj, err := cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "ci", "a")
				require.NoError(t, err)
				cur := obj.(*corev1.Pod).DeepCopy()
				if cur.Annotations[AnnotationRetiring] == "" {
					cur.Annotations = map[string]string{AnnotationRetiring: "true"}
					cur.ResourceVersion += "r"
					require.NoError(t, cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, cur, "ci"))
				}
			}
			return false, nil, nil
		})
		pod, err := k.ClaimWarm(ctx, p, Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		assert.Nil(t, pod)
		assert.Equal(t, []string{"list", "patch/resize a", "patch a", "get a", "delete a"}, verbs(cs),
			"the resized pod no claim would take is deleted (its ReplicaSet makes another)")
	})

	t.Run("refused by the API server: nothing claimed", func(t *testing.T) {
		for name, refusal := range map[string]error{
			"no pods/resize (before 1.33)": apierrors.NewNotFound(schema.GroupResource{Resource: "pods/resize"}, "a"),
			"a QoS change":                 apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "a", nil),
		} {
			t.Run(name, func(t *testing.T) {
				cs, k := fakeAPI(resizablePod("a"))
				cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
					if a.GetSubresource() == "resize" {
						return true, nil, refusal
					}
					return false, nil, nil
				})
				pod, err := k.ClaimWarm(ctx, p, Owner{Job: "1"}, 0, fit)
				require.ErrorIs(t, err, ErrResizeUnsupported)
				assert.Nil(t, pod)
				got, gerr := cs.CoreV1().Pods("ci").Get(ctx, "a", metav1.GetOptions{})
				require.NoError(t, gerr)
				assert.Equal(t, StateIdle, got.Labels[LabelState], "still idle, for a claim that needs no resize")
			})
		}
	})

	t.Run("an API server without pod generations: claimed, then resized", func(t *testing.T) {
		old := resizablePod("a")
		old.Generation = 0
		cs, k := fakeAPI(old)
		pod, err := k.ClaimWarm(ctx, p, Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		require.NotNil(t, pod)
		require.NotNil(t, pod.Resizing)
		assert.Equal(t, []string{"list", "patch a", "patch/resize a"}, verbs(cs))
	})

	t.Run("an API server without pod generations refuses: the claimed pod is deleted", func(t *testing.T) {
		old := resizablePod("a")
		old.Generation = 0
		cs, k := fakeAPI(old)
		cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			if a.GetSubresource() == "resize" {
				return true, nil, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/resize"}, "patch")
			}
			return false, nil, nil
		})
		pod, err := k.ClaimWarm(ctx, p, Owner{Job: "1"}, 0, fit)
		require.ErrorIs(t, err, ErrResizeUnsupported)
		assert.Nil(t, pod)
		assert.Equal(t, []string{"list", "patch a", "patch/resize a", "delete a"}, verbs(cs))
	})
}

func TestClaimWarmEachPodOnce(t *testing.T) {
	cs, k := fakeAPI(readyPod("a", "1", true), readyPod("b", "1", true), readyPod("c", "1", false))
	p := Pool{Name: "alpine", Hash: "h", Container: "build", Bin: "/wp/warmpod"}

	var mu sync.Mutex
	got := map[string]int{}
	none := 0
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod, err := k.ClaimWarm(context.Background(), p, Owner{Job: fmt.Sprint(100 + i), Server: "s"}, 0, nil)
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			if pod == nil {
				none++
				return
			}
			got[pod.Name]++
			assert.True(t, pod.Warm)
			assert.Equal(t, "/wp/warmpod", pod.Bin)
		}()
	}
	wg.Wait()
	assert.Equal(t, map[string]int{"a": 1, "b": 1}, got, "each Ready pod claimed exactly once; the unready one never")
	assert.Equal(t, 8, none)
	a, err := cs.CoreV1().Pods("ci").Get(context.Background(), "a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, StateClaimed, a.Labels[LabelState])
	assert.NotEmpty(t, a.Labels[LabelJob])
	assert.Equal(t, "s", a.Labels[LabelServer])
}

func TestPodReady(t *testing.T) {
	p := readyPod("a", "1", true)
	assert.True(t, PodReady(p))
	p.DeletionTimestamp = &metav1.Time{}
	assert.False(t, PodReady(p), "a pod being deleted is not claimable")
	assert.False(t, PodReady(readyPod("b", "1", false)))
}

func TestStuck(t *testing.T) {
	p := readyPod("a", "1", false)
	assert.Empty(t, stuck(p))
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "build", Image: "alpin:3.20",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
	assert.Equal(t, "container build (image alpin:3.20): ErrImagePull: not found", stuck(p))
	p.Status.ContainerStatuses[0].State.Waiting.Reason = "ContainerCreating"
	assert.Empty(t, stuck(p), "still starting")
}

// The pool controller's demand rides on the claim and the cold pod's create,
// and a pod it is retiring is never claimed.
func TestClaimAndColdRecordDemand(t *testing.T) {
	retiring := readyPod("r", "1", true)
	retiring.Annotations = map[string]string{AnnotationRetiring: "true"}
	cs, k := fakeAPI(retiring, readyPod("a", "1", true))
	p := Pool{Name: "alpine", Hash: "h", Container: "build", Bin: "/wp/warmpod"}

	before := time.Now().UTC()
	pod, err := k.ClaimWarm(context.Background(), p, Owner{Job: "1"}, 0, nil)
	require.NoError(t, err)
	require.NotNil(t, pod)
	assert.Equal(t, "a", pod.Name, "the retiring pod is skipped")
	pod, err = k.ClaimWarm(context.Background(), p, Owner{Job: "2"}, 0, nil)
	require.NoError(t, err)
	assert.Nil(t, pod, "a retiring pod is never claimed, even as the last one")

	a, err := cs.CoreV1().Pods("ci").Get(context.Background(), "a", metav1.GetOptions{})
	require.NoError(t, err)
	at, err := time.Parse(time.RFC3339Nano, a.Annotations[AnnotationClaimedAt])
	require.NoError(t, err)
	assert.False(t, at.Before(before.Truncate(time.Nanosecond)))
	_, err = strconv.Atoi(a.Annotations[AnnotationClaimWait])
	assert.NoError(t, err)

	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelPool: "alpine"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "build", Image: "alpine"}}}}
	// The fake API server's pod never gets Ready; only the create matters.
	_, _ = k.CreateCold(context.Background(), Pool{Name: "alpine", Template: tmpl}, Owner{Job: "3"},
		Cold{Reason: ColdNoIdle, Waited: 1500 * time.Millisecond}, 10*time.Millisecond)
	var created *corev1.Pod
	for _, act := range cs.Actions() {
		if c, ok := act.(k8stesting.CreateAction); ok {
			created = c.GetObject().(*corev1.Pod)
		}
	}
	require.NotNil(t, created)
	assert.Equal(t, "no-idle", created.Annotations[AnnotationColdReason])
	assert.Equal(t, "1500", created.Annotations[AnnotationClaimWait])
	assert.Empty(t, tmpl.Annotations, "the pool's template is not written to")
	assert.True(t, ColdNoIdle.Demand())
	assert.True(t, ColdPending.Demand())
	assert.False(t, ColdNoPool.Demand())
	assert.False(t, ColdReleased.Demand())
}

func TestSettledFirst(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	pod := func(name string, readyFor time.Duration) corev1.Pod {
		p := readyPod(name, "1", true)
		if readyFor >= 0 {
			p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-readyFor))
		}
		return *p
	}
	for _, tc := range []struct {
		name string
		in   []corev1.Pod
		want []string
	}{
		{"settled ones first, each group in its order",
			[]corev1.Pod{pod("fresh", time.Second), pod("old", time.Minute), pod("no-time", -1), pod("edge", resizeSettle)},
			[]string{"old", "edge", "fresh", "no-time"}},
		{"none settled: unchanged", []corev1.Pod{pod("b", 0), pod("a", 2*time.Second)}, []string{"b", "a"}},
		{"empty", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settledFirst(tc.in, now)
			var got []string
			for _, p := range tc.in {
				got = append(got, p.Name)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
