package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/warmpod/warmpod/poolapi"
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
	assert.Equal(t, p.Hash, p.Template.Labels[poolapi.LabelConfig], "the template carries the computed hash, not the file's")

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
		assert.NotContains(t, string(raw), poolapi.LabelConfig+":", f)
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
			assert.Equal(t, poolapi.LabelTemplateHash, p.HashLabel, f)
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
	assert.Equal(t, q.Hash, q.Template.Labels[poolapi.LabelConfig])
	assert.Equal(t, "alpine:3.20", set.Pools[0].Template.Spec.Containers[1].Image, "the pool itself is unchanged")
}

func readyPod(name, rv string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci", ResourceVersion: rv, UID: types.UID("uid-" + name),
			Labels: map[string]string{poolapi.LabelPool: "alpine", poolapi.LabelState: poolapi.StateIdle, poolapi.LabelConfig: "h"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

// conflictOnStaleRV makes the fake API server refuse a patch whose
// metadata.resourceVersion is not the object's, as the real one does (a
// patch without one is applied as it is). A patch of pods/resize sets the
// named containers' resources, raises the pod's generation and records
// its field manager in managedFields; any other patch sets labels and
// annotations.
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
				ResourceVersion string             `json:"resourceVersion"`
				Labels          map[string]*string `json:"labels"`
				Annotations     map[string]*string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
			return true, nil, err
		}
		if rv := patch.Metadata.ResourceVersion; rv != "" && rv != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, cur.Name, fmt.Errorf("the object has been modified"))
		}
		next := cur.DeepCopy()
		if pa.GetSubresource() == "resize" {
			// The API server's own strategic merge: containers by name,
			// a null removes a quantity.
			cur, err := json.Marshal(next)
			if err != nil {
				return true, nil, err
			}
			merged, err := strategicpatch.StrategicMergePatch(cur, pa.GetPatch(), corev1.Pod{})
			if err != nil {
				return true, nil, err
			}
			next = &corev1.Pod{}
			if err := json.Unmarshal(merged, next); err != nil {
				return true, nil, err
			}
			next.Generation++
			next.ManagedFields = append(next.ManagedFields, metav1.ManagedFieldsEntry{
				Manager: a.(k8stesting.PatchActionImpl).GetPatchOptions().FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "resize"})
		} else {
			set := func(m *map[string]string, p map[string]*string) {
				if *m == nil {
					*m = map[string]string{}
				}
				for k, v := range p {
					if v == nil {
						delete(*m, k)
					} else {
						(*m)[k] = *v
					}
				}
			}
			set(&next.Labels, patch.Metadata.Labels)
			set(&next.Annotations, patch.Metadata.Annotations)
		}
		next.ResourceVersion = cur.ResourceVersion + "1"
		if err := cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, next, cur.Namespace); err != nil {
			return true, nil, err
		}
		return true, next, nil
	})
}

// resizablePod is a Ready idle pod of pool alpine with a build
// container, never changed since it was created.
func resizablePod(name string) *corev1.Pod {
	p := readyPod(name, "1", true)
	p.Generation = 1
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}}
	p.Spec.Containers = []corev1.Container{{Name: "build", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "build", Resources: p.Spec.Containers[0].Resources.DeepCopy()}}
	return p
}

// fakeAPI is a fake API server holding pods that refuses stale
// resourceVersions (conflictOnStaleRV), and a Cluster of namespace ci on it.
// It keeps objects as they are stored: NewClientset's field-managed
// tracker would rewrite the managedFields these tests set as a real API
// server's pods/resize does (ResizeFieldManager), so it is
// NewSimpleClientset's plain one, deprecated as that is.
func fakeAPI(pods ...k8sruntime.Object) (*fake.Clientset, *Cluster) {
	cs := fake.NewSimpleClientset(pods...) //nolint:staticcheck // see above
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
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		require.NotNil(t, pod)
		assert.Equal(t, []string{"list", "patch/resize a", "patch a"}, verbs(cs))
		patch := cs.Actions()[1].(k8stesting.PatchAction).GetPatch()
		assert.JSONEq(t, `{"metadata":{"resourceVersion":"1"},"spec":{"containers":[{"name":"build","resources":{"requests":{"cpu":"500m"},"limits":{"memory":"256Mi"}}}]}}`,
			string(patch), "only the warmpod container's cpu and memory, on the condition of the listed pod")
		require.NotNil(t, pod.Resize)
		assert.Equal(t, want, pod.Resize.(*Resizing).Want)
		assert.Equal(t, "100m", pod.Resize.(*Resizing).Before.Status.ContainerStatuses[0].Resources.Requests.Cpu().String(), "the status before the resize: what the cgroup held")
		got, err := cs.CoreV1().Pods("ci").Get(ctx, "a", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, poolapi.StateClaimed, got.Labels[poolapi.LabelState])
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
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		require.NotNil(t, pod, "claimed after reading the pod again")
		assert.Equal(t, []string{"list", "patch/resize a", "patch a", "get a", "patch a"}, verbs(cs))
	})

	t.Run("a claim without fit never takes a pod resized for another", func(t *testing.T) {
		resized := resizablePod("a")
		resized.Generation = 2
		resized.ManagedFields = append(resized.ManagedFields, metav1.ManagedFieldsEntry{Manager: ResizeFieldManager, Subresource: "resize"})
		cs, k := fakeAPI(resized)
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "2"}, 0, nil)
		require.NoError(t, err)
		assert.Nil(t, pod)
		pod, err = k.ClaimWarm(ctx, p, poolapi.Owner{Job: "2"}, 0, fit)
		require.NoError(t, err)
		assert.Nil(t, pod, "nor one with fit")
		assert.Equal(t, []string{"list", "list"}, verbs(cs))
	})

	t.Run("a pod whose spec something else changed is claimed", func(t *testing.T) {
		// Scheduling gates lifted, an ephemeral container: generation 2,
		// and still the pool's resources.
		changed := resizablePod("a")
		changed.Generation = 2
		changed.ManagedFields = append(changed.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kueue", Operation: metav1.ManagedFieldsOperationUpdate})
		_, k := fakeAPI(changed)
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "2"}, 0, nil)
		require.NoError(t, err)
		assert.NotNil(t, pod)
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
				other.ManagedFields = append(other.ManagedFields, metav1.ManagedFieldsEntry{Manager: ResizeFieldManager, Subresource: "resize"})
				require.NoError(t, cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, other, "ci"))
				return true, list, nil
			}
			return false, nil, nil
		})
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
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
				if cur.Annotations[poolapi.AnnotationRetiring] == "" {
					cur.Annotations = map[string]string{poolapi.AnnotationRetiring: "true"}
					cur.ResourceVersion += "r"
					require.NoError(t, cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, cur, "ci"))
				}
			}
			return false, nil, nil
		})
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		assert.Nil(t, pod)
		assert.Equal(t, []string{"list", "patch/resize a", "patch a", "get a", "get a", "delete a"}, verbs(cs),
			"the resized pod no claim would take is deleted (its ReplicaSet makes another)")
	})

	t.Run("refused by the API server: nothing claimed", func(t *testing.T) {
		for name, refusal := range map[string]error{
			"no pods/resize (before 1.33)": apierrors.NewNotFound(schema.GroupResource{Resource: "pods/resize"}, "a"),
			"a QoS change":                 apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "a", nil),
			"forbidden (RBAC, a quota)":    apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "a", errors.New("exceeded quota: compute")),
		} {
			t.Run(name, func(t *testing.T) {
				cs, k := fakeAPI(resizablePod("a"))
				cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
					if a.GetSubresource() == "resize" {
						return true, nil, refusal
					}
					return false, nil, nil
				})
				pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
				require.ErrorIs(t, err, ErrResizeUnsupported)
				assert.Nil(t, pod)
				got, gerr := cs.CoreV1().Pods("ci").Get(ctx, "a", metav1.GetOptions{})
				require.NoError(t, gerr)
				assert.Equal(t, poolapi.StateIdle, got.Labels[poolapi.LabelState], "still idle, for a claim that needs no resize")
			})
		}
	})

	t.Run("claimed by another between resize and claim: left alone", func(t *testing.T) {
		// A claimer that does not look at managedFields (a driver of an
		// older release, during an upgrade) takes the pod first.
		cs, k := fakeAPI(resizablePod("a"))
		stolen := false
		cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			if a.GetSubresource() == "" && !stolen {
				stolen = true
				cur := trackedPod(t, cs, "a")
				for k, v := range (poolapi.Owner{Job: "99"}).Labels() {
					cur.Labels[k] = v
				}
				cur.Labels[poolapi.LabelState] = poolapi.StateClaimed
				cur.ResourceVersion += "x"
				require.NoError(t, cs.Tracker().Update(podsGVR, cur, "ci"))
			}
			return false, nil, nil
		})
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		assert.Nil(t, pod)
		assert.Equal(t, []string{"list", "patch/resize a", "patch a", "get a"}, verbs(cs), "job 99's pod is not deleted")
	})

	t.Run("a resize whose outcome is unknown: the pod is deleted when it was applied", func(t *testing.T) {
		cs, k := fakeAPI(resizablePod("a"))
		cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			if a.GetSubresource() != "resize" {
				return false, nil, nil
			}
			cur := trackedPod(t, cs, "a")
			cur.Generation++
			cur.ResourceVersion += "1"
			cur.ManagedFields = append(cur.ManagedFields, metav1.ManagedFieldsEntry{Manager: ResizeFieldManager, Subresource: "resize"})
			require.NoError(t, cs.Tracker().Update(podsGVR, cur, "ci"))
			return true, nil, apierrors.NewTimeoutError("the server may still be processing the request", 0)
		})
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
		require.Error(t, err)
		assert.Nil(t, pod)
		assert.Equal(t, []string{"list", "patch/resize a", "get a", "delete a"}, verbs(cs), "no idle pod is left resized")
	})

	t.Run("the kubelet writes the status on and on: given up, the pod deleted", func(t *testing.T) {
		cs, k := fakeAPI(resizablePod("a"))
		cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			if a.GetSubresource() == "" {
				cur := trackedPod(t, cs, "a")
				cur.ResourceVersion += "s"
				require.NoError(t, cs.Tracker().Update(podsGVR, cur, "ci"))
			}
			return false, nil, nil
		})
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
		require.NoError(t, err)
		assert.Nil(t, pod)
		got := verbs(cs)
		assert.Equal(t, claimTries, strings.Count(strings.Join(got, ","), "patch a"), "claimTries claims")
		assert.Equal(t, "delete a", got[len(got)-1])
	})

	t.Run("a pod gone under the resize: the next one is tried", func(t *testing.T) {
		cs, k := fakeAPI(resizablePod("a"))
		cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			if a.GetSubresource() == "resize" {
				require.NoError(t, cs.Tracker().Delete(podsGVR, "ci", "a"))
				return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a")
			}
			return false, nil, nil
		})
		pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
		require.NoError(t, err, "not a failure of the claim: no pod")
		assert.Nil(t, pod)
	})

	t.Run("a settled pod first", func(t *testing.T) {
		for range 10 {
			fresh, settled := resizablePod("fresh"), resizablePod("settled")
			fresh.Status.Conditions[0].LastTransitionTime = metav1.Now()
			settled.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Minute))
			_, k := fakeAPI(fresh, settled)
			pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: "1"}, 0, fit)
			require.NoError(t, err)
			require.NotNil(t, pod)
			assert.Equal(t, "settled", pod.Name)
		}
	})
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// trackedPod is a copy of the fake API server's pod name in namespace ci.
func trackedPod(t *testing.T, cs *fake.Clientset, name string) *corev1.Pod {
	t.Helper()
	obj, err := cs.Tracker().Get(podsGVR, "ci", name)
	require.NoError(t, err)
	return obj.(*corev1.Pod).DeepCopy()
}

// Claimers with and without resources, at once, over few pods: no pod is
// claimed twice, each claimed pod has what its claimer asked for (the
// pool's resources when it asked for none), and no idle pod is left
// resized.
func TestClaimWarmConcurrentFits(t *testing.T) {
	q := resource.MustParse
	p := Pool{Name: "alpine", Hash: "h", Container: "build", Bin: "/wp/warmpod"}
	fits := []*corev1.ResourceRequirements{nil, {Requests: corev1.ResourceList{"cpu": q("500m")}}, {Requests: corev1.ResourceList{"cpu": q("2")}}}
	for round := range 20 {
		cs, k := fakeAPI(resizablePod("a"), resizablePod("b"), resizablePod("c"), resizablePod("d"))
		var mu sync.Mutex
		got := map[string]string{} // pod → the cpu its claimer asked for
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fit := fits[i%len(fits)]
				pod, err := k.ClaimWarm(context.Background(), p, poolapi.Owner{Job: fmt.Sprint(round*10 + i)}, 0, fit)
				assert.NoError(t, err)
				if pod == nil {
					return
				}
				want := "100m"
				if fit != nil {
					want = fit.Requests.Cpu().String()
				}
				mu.Lock()
				defer mu.Unlock()
				_, twice := got[pod.Name]
				assert.False(t, twice, "pod %s claimed twice", pod.Name)
				got[pod.Name] = want
			}()
		}
		wg.Wait()
		list, err := cs.CoreV1().Pods("ci").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		for _, pod := range list.Items {
			cpu := pod.Spec.Containers[0].Resources.Requests.Cpu().String()
			if want, ok := got[pod.Name]; ok {
				assert.Equal(t, want, cpu, "pod %s", pod.Name)
				continue
			}
			assert.Equal(t, poolapi.StateIdle, pod.Labels[poolapi.LabelState])
			assert.Equal(t, "100m", cpu, "idle pod %s left resized", pod.Name)
		}
	}
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

// A cold pod is busy from its creation: the autoscalers' keys say not to
// move it, over the template's idle "true", beside why it is cold.
func TestColdAnnotations(t *testing.T) {
	got := Cold{Reason: poolapi.ColdNoIdle, Waited: 1500 * time.Millisecond}.annotations()
	assert.Equal(t, map[string]string{
		poolapi.AnnotationColdReason:   "no-idle",
		poolapi.AnnotationClaimWait:    "1500",
		poolapi.AnnotationSafeToEvict:  "false",
		poolapi.AnnotationDoNotDisrupt: "true",
	}, got)
}

// A claim reads the pool a page at a time (claimPage), and the next page
// only when none of a page could be claimed: here the first page holds
// pods not Ready yet, and its continue token has expired (410) the first
// time it is used, so the claim starts over and finds the Ready pod on
// the second page.
func TestClaimWarmPages(t *testing.T) {
	const page = 2
	cs, k := fakeAPI(readyPod("a1", "1", false), readyPod("a2", "1", false), readyPod("b1", "1", true), readyPod("b2", "1", false))
	var limits []int64
	var conts []string
	expired := false
	pagedList(cs, func(o metav1.ListOptions) (int, error) {
		limits, conts = append(limits, o.Limit), append(conts, o.Continue)
		if o.Continue != "" && !expired {
			expired = true
			return 0, apierrors.NewResourceExpired("continue token too old")
		}
		// The test's page is smaller than claimPage: what matters is that
		// the claim follows the token.
		return page, nil
	})
	p := Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}
	pod, err := k.ClaimWarm(context.Background(), p, poolapi.Owner{Job: "1"}, 0, nil)
	require.NoError(t, err)
	require.NotNil(t, pod)
	assert.Equal(t, "b1", pod.Name)
	assert.Equal(t, []string{"", "2", "", "2"}, conts, "first page, its token (expired), first page again, its token")
	for _, l := range limits {
		assert.Equal(t, int64(claimPage), l)
	}
}

// pagedList makes the fake API server answer pod lists a page at a time
// in name order, as the real one does with limit and continue: size says
// how many pods a list with o returns (or its error).
func pagedList(cs *fake.Clientset, size func(o metav1.ListOptions) (int, error)) {
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		o := a.(k8stesting.ListActionImpl).ListOptions
		n, err := size(o)
		if err != nil {
			return true, nil, err
		}
		obj, err := cs.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "ci")
		if err != nil {
			return true, nil, err
		}
		all := obj.(*corev1.PodList)
		slices.SortFunc(all.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		from := 0
		if o.Continue != "" {
			from, _ = strconv.Atoi(o.Continue)
		}
		out := &corev1.PodList{}
		to := min(from+n, len(all.Items))
		out.Items = all.Items[from:to]
		if to < len(all.Items) {
			out.Continue = strconv.Itoa(to)
		}
		return true, out, nil
	})
}

// Many claimers at once read the same first page and lose its pods to
// each other: after claimStale lost pods of a partial page the claim
// reads a page claimWiden times wider from the start, not the rest of the
// stale one; a page as large as the pool is tried to its end.
func TestClaimWarmWidensAStalePage(t *testing.T) {
	var pods []k8sruntime.Object
	for i := range claimPage + 10 {
		pods = append(pods, readyPod(fmt.Sprintf("p%02d", i), "1", true))
	}
	cs, k := fakeAPI(pods...)
	var limits []int64
	pagedList(cs, func(o metav1.ListOptions) (int, error) {
		limits = append(limits, o.Limit)
		return int(o.Limit), nil
	})
	// Other claimers win the first claimStale+3 pods this claim patches.
	lost := 0
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if lost < claimStale+3 {
			lost++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, a.(k8stesting.PatchAction).GetName(), errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	p := Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}
	pod, err := k.ClaimWarm(context.Background(), p, poolapi.Owner{Job: "1"}, 0, nil)
	require.NoError(t, err)
	require.NotNil(t, pod, "one pass: the wide page, the whole pool, is tried to its end")
	assert.Equal(t, []int64{claimPage, claimPage * claimWiden}, limits, "a page of claimPage, then a wider one")
	patches := 0
	for _, v := range verbs(cs) {
		if strings.HasPrefix(v, "patch ") {
			patches++
		}
	}
	assert.Equal(t, claimStale+3+1, patches, "claimStale on the stale page, then 3 lost and one won on the wide one")
}

// The claim of a pod the pool controller made (controlled by the pool's
// Deployment, decision 0010) takes it out of the Deployment's ownership,
// so that the pool's removal does not delete a running job's pod with it;
// a ReplicaSet's pod is left to its ReplicaSet, which releases it.
func TestClaimReleasesTheControllersPod(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		kind    string
		release bool
	}{{"Deployment", true}, {"ReplicaSet", false}} {
		t.Run(tc.kind, func(t *testing.T) {
			pod := readyPod("p", "1", true)
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: tc.kind, Name: "alpine", UID: "u", Controller: &yes}}
			assert.Equal(t, tc.release, MadeByController(pod))
			cs, k := fakeAPI(pod)
			_, err := k.claim(context.Background(), pod, poolapi.Owner{Job: "1", Server: "s"}, 0)
			require.NoError(t, err)
			ps := mergePatches(cs)
			require.NotEmpty(t, ps)
			patch := ps[len(ps)-1]
			assert.Equal(t, tc.release, strings.Contains(patch, `"ownerReferences":null`), patch)
		})
	}
}
