package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/warmpod/warmpod/poolapi"
)

// liveDeployment is a pool Deployment as the API server holds it, whose
// warmpod reads hashLabel and runs image tag tag.
func liveDeployment(name, hashLabel string, tag string) *appsv1.Deployment {
	sel := map[string]string{poolapi.LabelPool: name, poolapi.LabelState: poolapi.StateIdle}
	labels := map[string]string{poolapi.LabelPool: name, poolapi.LabelState: poolapi.StateIdle}
	env := []corev1.EnvVar{{Name: "WARMPOD_CONFIG_HASH", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + hashLabel + "']"}}}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci", UID: types.UID("uid-" + name),
			Labels:      map[string]string{"app.kubernetes.io/name": "warmpod", "app.kubernetes.io/component": "pool"},
			Annotations: map[string]string{}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "build", Image: name + ":" + tag, Command: []string{"/wp/warmpod"}, Env: env}}}}},
	}
}

// replicaSet is a ReplicaSet of d made from d's template as it was when
// its image tag was tag.
func replicaSet(d *appsv1.Deployment, tag, hash string) *appsv1.ReplicaSet {
	yes := true
	t := d.Spec.Template.DeepCopy()
	t.Labels[poolapi.LabelTemplateHash] = hash
	t.Spec.Containers[0].Image = d.Name + ":" + tag
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-" + hash, Namespace: "ci", Labels: t.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Template: *t}}
}

func TestPoolsFromTheCluster(t *testing.T) {
	cur := liveDeployment("busybox", poolapi.LabelTemplateHash, "2")
	// Edited to tag 3 but paused, or not yet seen by the controller: it
	// has no ReplicaSet of tag 3.
	rolling := liveDeployment("alpine", poolapi.LabelTemplateHash, "3")
	rolling.Annotations[poolapi.AnnotationDefaultPool] = "true"
	rolling.Spec.Paused = true
	byHand := liveDeployment("golang", poolapi.LabelConfig, "1")
	byHand.Spec.Template.Labels[poolapi.LabelConfig] = "pasted"
	broken := liveDeployment("broken", poolapi.LabelTemplateHash, "1")
	broken.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{poolapi.LabelPool: "broken"}}
	other := liveDeployment("not-a-pool", poolapi.LabelTemplateHash, "1")
	other.Labels = nil
	k := &Cluster{Namespace: "ci", CS: fake.NewClientset(cur, rolling, byHand, broken, other,
		replicaSet(cur, "1", "old111"), replicaSet(cur, "2", "new222"), replicaSet(rolling, "2", "alp222"), replicaSet(byHand, "1", "gol111"))}

	set, err := k.Pools(context.Background())
	require.NoError(t, err)
	var names []string
	for _, p := range set.Pools {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"alpine", "busybox", "golang"}, names, "the annotated default first, then by name; the broken one and the unlabelled one left out")
	require.Len(t, set.Warnings, 2)
	assert.Contains(t, set.Warnings[0], `Deployment "broken"`)
	assert.Contains(t, set.Warnings[1], `Deployment "golang": its warmpod reads warmpod.dev/config`)

	alpine, busybox, golang := set.Pools[0], set.Pools[1], set.Pools[2]
	assert.True(t, alpine.Pending, "no ReplicaSet of the live template (tag 3) yet: the old pods are never claimed")
	assert.Equal(t, Hash(&alpine.Template), alpine.Hash, "a cold pod of a pending pool gets its template's own hash")
	assert.Equal(t, alpine.Hash, alpine.Template.Labels[poolapi.LabelTemplateHash])

	assert.False(t, busybox.Pending)
	assert.Equal(t, "new222", busybox.Hash, "the current ReplicaSet's hash, not the old one's")
	assert.Equal(t, poolapi.LabelTemplateHash, busybox.HashLabel)
	assert.Equal(t, "new222", busybox.Template.Labels[poolapi.LabelTemplateHash], "a cold pod of the live template carries the hash warmpod compares")
	assert.False(t, busybox.Stale())

	assert.Equal(t, poolapi.LabelConfig, golang.HashLabel)
	assert.True(t, golang.Pending, "a hand-pasted hash cannot tell a live pool's pods apart")
	assert.False(t, golang.Stale(), "the warning says what to do instead")

	// A pending pool claims nothing.
	pod, err := k.ClaimWarm(context.Background(), alpine, poolapi.Owner{Job: "1"}, 0, nil)
	require.NoError(t, err)
	assert.Nil(t, pod)
}

func TestPoolsFromAnEmptyNamespace(t *testing.T) {
	k := &Cluster{Namespace: "ci", CS: fake.NewClientset()}
	_, err := k.Pools(context.Background())
	assert.ErrorIs(t, err, ErrManifest)
}

func TestAFileCannotUseTheTemplateHash(t *testing.T) {
	d := liveDeployment("busybox", poolapi.LabelTemplateHash, "1")
	_, err := fromDeployment(d, false)
	assert.ErrorIs(t, err, ErrManifest)
	assert.Contains(t, err.Error(), "only the cluster knows")
	d = liveDeployment("busybox", "app", "1")
	_, err = fromDeployment(d, true)
	assert.ErrorContains(t, err, `reads the label "app"`)
}

func TestResizeApplied(t *testing.T) {
	q := resource.MustParse
	want := corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m")}, Limits: corev1.ResourceList{"memory": q("256Mi")}}
	status := func(gen, observed int64, res *corev1.ResourceRequirements, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Status: corev1.PodStatus{ObservedGeneration: observed,
			Conditions: conds, ContainerStatuses: []corev1.ContainerStatus{{Name: "build", Resources: res}}}}
	}
	applied := &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("0.5"), "memory": q("32Mi")}, Limits: corev1.ResourceList{"memory": q("256Mi")}}
	old := &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("10m"), "memory": q("32Mi")}}
	cond := func(typ corev1.PodConditionType, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: "node says " + reason}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		done bool
		err  error
	}{
		{"applied", status(2, 2, applied), true, nil},
		{"not yet", status(2, 2, old), false, nil},
		{"status of the spec before the patch", status(2, 1, applied), false, nil},
		{"no observed generation (before 1.34)", status(2, 0, applied), true, nil},
		{"deferred", status(2, 2, old, cond(corev1.PodResizePending, corev1.PodReasonDeferred)), false, nil},
		{"infeasible", status(2, 2, old, cond(corev1.PodResizePending, corev1.PodReasonInfeasible)), false, ErrResizeInfeasible},
		{"in progress", status(2, 2, applied, cond(corev1.PodResizeInProgress, "")), false, nil},
		{"failed", status(2, 2, old, cond(corev1.PodResizeInProgress, corev1.PodReasonError)), false, ErrResizeUnsupported},
		{"another container", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "svc-0", Resources: applied}}}}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, state, err := ResizeApplied(tc.pod, "build", want)
			assert.Equal(t, tc.done, done)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				assert.Contains(t, err.Error(), "node says")
				return
			}
			require.NoError(t, err)
			if !done {
				assert.NotEmpty(t, state)
			}
		})
	}
}

// AwaitResize reads the pod's status until the kubelet reports the claim's
// resize (no pod to ask here: the status alone decides).
func TestAwaitResizeAgainstTheAPI(t *testing.T) {
	q := resource.MustParse
	want := corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m")}, Limits: corev1.ResourceList{"memory": q("256Mi")}}
	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "ci", Generation: 2},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "build"}}}}
	}
	target := poolapi.Pod{Name: "w1", Namespace: "ci", Container: "build", Resize: &Resizing{Want: want, Before: pod(), Sent: time.Now()}}

	t.Run("nothing to wait for", func(t *testing.T) {
		cs := fake.NewClientset()
		require.NoError(t, (&Cluster{CS: cs, Namespace: "ci"}).AwaitResize(context.Background(), poolapi.Pod{Name: "w1"}, time.Second, nil))
		assert.Empty(t, cs.Actions())
	})

	t.Run("applied by the kubelet after a while", func(t *testing.T) {
		cs := fake.NewClientset(pod())
		gets := 0
		cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			gets++
			p := pod()
			p.Status.ObservedGeneration = 2
			res := &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("10m")}}
			if gets >= 3 { // the kubelet's report arrives on the third look
				res = want.DeepCopy()
			} else {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}}
			}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "build", Resources: res}}
			return true, p, nil
		})
		err := (&Cluster{CS: cs, Namespace: "ci"}).AwaitResize(context.Background(), target, 5*time.Second, nil)
		require.NoError(t, err)
		assert.Equal(t, 3, gets)
	})

	t.Run("deferred past the bound", func(t *testing.T) {
		cs := fake.NewClientset(pod())
		cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			p := pod()
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, Message: "node is full for now"}}
			return true, p, nil
		})
		err := (&Cluster{CS: cs, Namespace: "ci"}).AwaitResize(context.Background(), target, 200*time.Millisecond, nil)
		assert.ErrorIs(t, err, ErrResizeNotApplied)
		assert.Contains(t, err.Error(), "node is full for now")
	})
}

// gatedClientset holds a Deployment list until a ReplicaSet list has
// begun: Pools that lists them one after the other never gets its
// Deployments.
type gatedClientset struct {
	kubernetes.Interface
	rsListed chan struct{}
}

func (g gatedClientset) AppsV1() appsv1client.AppsV1Interface {
	return gatedApps{g.Interface.AppsV1(), g.rsListed}
}

type gatedApps struct {
	appsv1client.AppsV1Interface
	rsListed chan struct{}
}

func (a gatedApps) Deployments(ns string) appsv1client.DeploymentInterface {
	return gatedDeployments{a.AppsV1Interface.Deployments(ns), a.rsListed}
}

func (a gatedApps) ReplicaSets(ns string) appsv1client.ReplicaSetInterface {
	close(a.rsListed)
	return a.AppsV1Interface.ReplicaSets(ns)
}

type gatedDeployments struct {
	appsv1client.DeploymentInterface
	rsListed chan struct{}
}

func (d gatedDeployments) List(ctx context.Context, o metav1.ListOptions) (*appsv1.DeploymentList, error) {
	select {
	case <-d.rsListed:
	case <-time.After(5 * time.Second):
		return nil, errors.New("the ReplicaSets were not listed beside the Deployments within 5 s")
	}
	return d.DeploymentInterface.List(ctx, o)
}

// Pools lists the ReplicaSets beside the Deployments (a prepare waits
// for one round trip, not two), with the same answer.
func TestPoolsListsBothAtOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	cur := liveDeployment("busybox", poolapi.LabelTemplateHash, "2")
	cs := fake.NewClientset(cur, replicaSet(cur, "2", "new222"))
	k := &Cluster{Namespace: "ci", CS: gatedClientset{Interface: cs, rsListed: make(chan struct{})}}
	set, err := k.Pools(context.Background())
	require.NoError(t, err)
	require.Len(t, set.Pools, 1)
	assert.Equal(t, "new222", set.Pools[0].Hash)
}
