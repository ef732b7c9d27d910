package pools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

const ns = "ci"

var (
	podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	depsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// apiServer is a fake clientset that behaves as the API server does where
// the controller relies on it: a pod merge patch carrying
// metadata.resourceVersion is refused (409) when it differs, and a scale
// update carrying one likewise; every write bumps the resourceVersion.
// It counts the writes.
type apiServer struct {
	*fake.Clientset
	mu     sync.Mutex
	rv     int
	writes map[string]int // verb/resource[/subresource]
	made   int            // pods created, for their names
	// before, when set, runs before each write and may refuse it.
	before func(a k8stesting.Action) error
	// after, when set, runs after each pod patch and scale update that
	// landed, under the same lock: what a watch sees next.
	after func(a k8stesting.Action)
}

func newAPIServer(t *testing.T, objs ...k8sruntime.Object) *apiServer {
	t.Helper()
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			objs = append(objs, currentReplicaSet(d))
		}
	}
	s := &apiServer{Clientset: fake.NewClientset(objs...), rv: 100, writes: map[string]int{}}
	s.PrependReactor("*", "*", s.react)
	return s
}

func (s *apiServer) nextRV() string {
	s.rv++
	return strconv.Itoa(s.rv)
}

// Writes returns the number of writes of kind verb/resource[/subresource].
func (s *apiServer) Writes(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes[kind]
}

func (s *apiServer) react(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	verb := a.GetVerb()
	if verb == "get" || verb == "list" || verb == "watch" {
		return false, nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := verb + "/" + a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		kind += "/" + sub
	}
	if s.before != nil {
		if err := s.before(a); err != nil {
			return true, nil, err
		}
	}
	s.writes[kind]++
	var obj k8sruntime.Object
	var err error
	switch {
	case kind == "patch/pods":
		_, obj, err = s.patchPod(a.(k8stesting.PatchAction))
	case kind == "update/deployments/scale":
		_, obj, err = s.scale(a.(k8stesting.UpdateAction))
	case kind == "create/pods":
		// The tracker does not generate names; the API server does.
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		s.made++
		if p.Name == "" {
			p.Name = p.GenerateName + strconv.Itoa(s.made)
		}
		p.UID = k8stypes.UID("uid-" + p.Name)
		p.ResourceVersion = s.nextRV()
		obj, err = p, s.Tracker().Create(podsGVR, p, p.Namespace)
	case kind == "delete/pods":
		_, obj, err = s.deletePod(a.(k8stesting.DeleteAction))
	default:
		return false, nil, nil
	}
	if err == nil && s.after != nil {
		s.after(a)
	}
	return true, obj, err
}

func (s *apiServer) patchPod(pa k8stesting.PatchAction) (bool, k8sruntime.Object, error) {
	obj, err := s.Tracker().Get(podsGVR, pa.GetNamespace(), pa.GetName())
	if err != nil {
		return true, nil, err
	}
	cur := obj.(*corev1.Pod)
	var patch struct {
		Metadata struct {
			ResourceVersion string             `json:"resourceVersion"`
			Labels          map[string]*string `json:"labels"`
			Annotations     map[string]*string `json:"annotations"`
			// OwnerReferences: null removes them (the drivers' claim of a
			// pod the controller made).
			OwnerReferences *json.RawMessage `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
		return true, nil, err
	}
	if patch.Metadata.ResourceVersion != "" && patch.Metadata.ResourceVersion != cur.ResourceVersion {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, cur.Name, fmt.Errorf("the object has been modified"))
	}
	next := cur.DeepCopy()
	apply := func(m *map[string]string, p map[string]*string) {
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
	apply(&next.Labels, patch.Metadata.Labels)
	apply(&next.Annotations, patch.Metadata.Annotations)
	if bytes.Contains(pa.GetPatch(), []byte(`"ownerReferences":null`)) {
		next.OwnerReferences = nil
	}
	next.ResourceVersion = s.nextRV()
	return true, next, s.Tracker().Update(podsGVR, next, next.Namespace)
}

// deletePod deletes as the API server does under preconditions: a UID or
// resourceVersion that differs is refused (409).
func (s *apiServer) deletePod(da k8stesting.DeleteAction) (bool, k8sruntime.Object, error) {
	obj, err := s.Tracker().Get(podsGVR, da.GetNamespace(), da.GetName())
	if err != nil {
		return true, nil, err
	}
	cur := obj.(*corev1.Pod)
	if pre := da.GetDeleteOptions().Preconditions; pre != nil {
		if pre.UID != nil && *pre.UID != cur.UID || pre.ResourceVersion != nil && *pre.ResourceVersion != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, cur.Name, fmt.Errorf("precondition failed"))
		}
	}
	return true, nil, s.Tracker().Delete(podsGVR, cur.Namespace, cur.Name)
}

// currentReplicaSet is d's ReplicaSet for its live template, as the
// Deployment controller makes it (hash "h-" and d's name).
func currentReplicaSet(d *appsv1.Deployment) *appsv1.ReplicaSet {
	return replicaSetOf(d, "h-"+d.Name)
}

// replicaSetOf is d's ReplicaSet for its live template with hash.
func replicaSetOf(d *appsv1.Deployment, hash string) *appsv1.ReplicaSet {
	t := d.Spec.Template.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[poolapi.LabelTemplateHash] = hash
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: t.Labels,
			Annotations:     map[string]string{revisionAnnotation: d.Annotations[revisionAnnotation]},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Template: *t},
	}
}

// size reads a pool's size from the fake API server: its replicas and
// the idle, starting and pending pods the controller made.
func (s *apiServer) size(t *testing.T, name string) int {
	t.Helper()
	d, err := s.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return replicasOf(d) + len(s.own(t, d))
}

// own are the standing pods the controller made for d.
func (s *apiServer) own(t *testing.T, d *appsv1.Deployment) []corev1.Pod {
	t.Helper()
	pods, err := s.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range pods.Items {
		switch pool.StateOf(&p) {
		case poolapi.PodIdle, poolapi.PodStarting, poolapi.PodPending:
			if ownedBy(&p, d) {
				out = append(out, p)
			}
		}
	}
	return out
}

func (s *apiServer) scale(ua k8stesting.UpdateAction) (bool, k8sruntime.Object, error) {
	sc := ua.GetObject().(*autoscalingv1.Scale)
	obj, err := s.Tracker().Get(depsGVR, sc.Namespace, sc.Name)
	if err != nil {
		return true, nil, err
	}
	d := obj.(*appsv1.Deployment).DeepCopy()
	if sc.ResourceVersion != "" && sc.ResourceVersion != d.ResourceVersion {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, d.Name, fmt.Errorf("the object has been modified"))
	}
	d.Spec.Replicas = ptr.To(sc.Spec.Replicas)
	d.ResourceVersion = s.nextRV()
	return true, sc, s.Tracker().Update(depsGVR, d, d.Namespace)
}

// replicas reads a pool's replicas from the fake API server.
func (s *apiServer) replicas(t *testing.T, name string) int {
	t.Helper()
	d, err := s.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return replicasOf(d)
}

// poolDeployment is a pool Deployment with the given policy ("" = none)
// and replicas.
func poolDeployment(name, policy string, replicas int) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: k8stypes.UID("uid-" + name), ResourceVersion: "1",
			Annotations: map[string]string{revisionAnnotation: "1"},
			Labels:      map[string]string{"app.kubernetes.io/name": "warmpod", "app.kubernetes.io/component": "pool"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(replicas)),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{poolapi.LabelPool: name, poolapi.LabelState: poolapi.StateIdle}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "build", Image: name}}}}},
	}
	if policy != "" {
		d.Annotations[poolapi.AnnotationPolicy] = policy
	}
	return d
}

// idlePod is a pool pod, Ready when ready, created at created.
func idlePod(pool_, name string, ready bool, created time.Time) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: k8stypes.UID("uid-" + name), ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{poolapi.LabelPool: pool_, poolapi.LabelState: poolapi.StateIdle}},
		Spec: corev1.PodSpec{NodeName: "node"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(created.Add(4 * time.Second))}}},
	}
}

// claimedPod is a pod claimed at at (warm).
func claimedPod(pool_, name string, at time.Time) *corev1.Pod {
	p := idlePod(pool_, name, true, at.Add(-time.Minute))
	p.Labels[poolapi.LabelState] = poolapi.StateClaimed
	p.Labels[poolapi.LabelJob] = name
	p.Annotations = map[string]string{poolapi.AnnotationClaimedAt: at.UTC().Format(time.RFC3339Nano), poolapi.AnnotationClaimWait: "3"}
	return p
}

// harness is a controller over an apiServer with a fake clock, started.
type harness struct {
	api   *apiServer
	c     *Controller
	clock *clocktesting.FakeClock
	rec   *record.FakeRecorder
	reg   *prometheus.Registry
}

func newHarness(t *testing.T, now time.Time, budget sizing.Budget, objs ...k8sruntime.Object) *harness {
	t.Helper()
	return newHarnessConfig(t, now, Config{Namespace: ns, Budget: budget}, objs...)
}

// newHarnessConfig is newHarness with the controller's whole Config.
func newHarnessConfig(t *testing.T, now time.Time, cfg Config, objs ...k8sruntime.Object) *harness {
	t.Helper()
	h := &harness{api: newAPIServer(t, objs...), clock: clocktesting.NewFakeClock(now), rec: record.NewFakeRecorder(100), reg: prometheus.NewRegistry()}
	m, err := NewMetrics(h.reg)
	require.NoError(t, err)
	h.c = New(h.api, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), h.clock, h.rec, m)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		h.c.factory.Shutdown()
		h.c.podFactory.Shutdown()
		h.c.queue.ShutDown()
	})
	require.NoError(t, h.c.Start(ctx))
	return h
}

// settle waits until the informers' cache holds what the fake API server
// holds (the resourceVersions of every pod and Deployment agree), so that a
// Reconcile sees the writes before it.
func (h *harness) settle(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		pods, _ := h.api.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		for _, p := range pods.Items {
			c, err := h.c.pods.Pods(ns).Get(p.Name)
			if err != nil || c.ResourceVersion != p.ResourceVersion {
				return false
			}
		}
		cached, _ := h.c.pods.Pods(ns).List(labels.Everything())
		if len(cached) != len(pods.Items) {
			return false
		}
		deps, _ := h.api.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
		for _, d := range deps.Items {
			c, err := h.c.deps.Deployments(ns).Get(d.Name)
			if err != nil || c.ResourceVersion != d.ResourceVersion || len(c.Annotations) != len(d.Annotations) {
				return false
			}
		}
		return true
	}, 10*time.Second, 2*time.Millisecond)
}

// events drains the recorded Events.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// replicasOf reads a pool's replicas (its ReplicaSet's part of its size)
// from the fake API server.
func (s *apiServer) replicasOf(t *testing.T, name string) int {
	t.Helper()
	d, err := s.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return replicasOf(d)
}
