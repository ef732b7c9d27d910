package pools

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/pools/poolsim"
	"github.com/warmpod/warmpod/sizing"
)

// basePool is a default pool, as the chart renders one: a pool template
// and selector.
func basePool(name, image string) *appsv1.Deployment {
	d := poolDeployment(name, "", 1)
	d.UID = k8stypes.UID("uid-" + name)
	d.Annotations[poolapi.AnnotationDefaultPool] = "true"
	labels := map[string]string{poolapi.LabelPool: name, poolapi.LabelState: poolapi.StateIdle}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{poolapi.LabelPool: name, poolapi.LabelState: poolapi.StateIdle}}
	d.Spec.Template.Labels = labels
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "build", Image: image, Command: []string{"/warmpod/warmpod"}}}
	return d
}

// noPoolPod is a cold pod made from the default pool's template for a job
// of image, which no pool runs.
func noPoolPod(base, name, image string, at time.Time) *corev1.Pod {
	p := claimedPod(base, name, at)
	p.CreationTimestamp = metav1.NewTime(at)
	p.Annotations = map[string]string{poolapi.AnnotationColdReason: string(poolapi.ColdNoPool)}
	p.Spec.Containers = []corev1.Container{{Name: "build", Image: image, Command: []string{"/warmpod/warmpod"}}}
	return p
}

// An image that keeps going cold without a pool gets one, made from the
// default pool, with an Event; another one, seen twice, does not; a week
// later without a claim the pool made is removed, and a pool a person
// wrote stays however long it is unused.
func TestPoolsFoundFromTheJobs(t *testing.T) {
	ctx := context.Background()
	now := monday9
	objs := []k8sruntime.Object{basePool("alpine", "alpine:3.20"), poolDeployment("manual", "- idle_count: 0", 0)}
	for i := range 3 {
		objs = append(objs, noPoolPod("alpine", fmt.Sprintf("py-%d", i), "docker.io/library/python:3.12", now.Add(-time.Duration(i)*time.Hour)))
	}
	for i := range 2 {
		objs = append(objs, noPoolPod("alpine", fmt.Sprintf("rb-%d", i), "ruby:3", now.Add(-time.Duration(i)*time.Hour)))
	}
	h := newHarnessConfig(t, now, Config{Namespace: ns, Discovery: sizing.DefaultDiscovery()}, objs...)
	require.NoError(t, h.c.Reconcile(ctx))

	name := foundName("docker.io/library/python:3.12")
	assert.Regexp(t, `^auto-python-3-12-[0-9a-f]{8}$`, name)
	d, err := h.api.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "python went cold three times within a day: it has a pool")
	assert.Equal(t, "docker.io/library/python:3.12", d.Annotations[poolapi.AnnotationFoundFrom])
	assert.Equal(t, FoundPolicy, d.Annotations[poolapi.AnnotationPolicy])
	assert.Equal(t, poolsim.LearnedPolicy, FoundPolicy, "the simulator plays found pools with the controller's policy")
	assert.NotContains(t, d.Annotations, poolapi.AnnotationDefaultPool)
	assert.EqualValues(t, 0, *d.Spec.Replicas)
	assert.Equal(t, "alpine", d.OwnerReferences[0].Name)
	assert.Equal(t, name, d.Spec.Template.Labels[poolapi.LabelPool])
	assert.Equal(t, name, d.Spec.Selector.MatchLabels[poolapi.LabelPool])
	assert.Equal(t, "docker.io/library/python:3.12", pool.JobImage(&d.Spec.Template.Spec))
	assert.Equal(t, pool.Hash(&d.Spec.Template), d.Spec.Template.Labels[poolapi.LabelConfig])
	_, err = h.api.AppsV1().Deployments(ns).Get(ctx, foundName("ruby:3"), metav1.GetOptions{})
	assert.Error(t, err, "ruby went cold twice only")
	ev := strings.Join(h.events(), "\n")
	assert.Contains(t, ev, "Normal PoolFound made from alpine for docker.io/library/python:3.12: 3 jobs of it went cold without a pool within 24h0m0s")

	// Deciding again makes nothing more.
	h.settle(t)
	require.NoError(t, h.c.Reconcile(ctx))
	deps, err := h.api.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, deps.Items, 3)

	// A week on, no job claimed from it.
	h.clock.Step(7*24*time.Hour + time.Minute)
	require.NoError(t, h.c.Reconcile(ctx))
	_, err = h.api.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	assert.Error(t, err, "removed")
	_, err = h.api.AppsV1().Deployments(ns).Get(ctx, "manual", metav1.GetOptions{})
	assert.NoError(t, err, "a pool a person wrote is never removed")
	assert.Contains(t, strings.Join(h.events(), "\n"), "Normal PoolRemoved removed: no job of docker.io/library/python:3.12 claimed from it for 168h0m0s")
}

// Off by default: the same cold jobs make no pool.
func TestPoolsFoundOffByDefault(t *testing.T) {
	ctx := context.Background()
	objs := []k8sruntime.Object{basePool("alpine", "alpine:3.20")}
	for i := range 5 {
		objs = append(objs, noPoolPod("alpine", fmt.Sprintf("py-%d", i), "python:3.12", monday9.Add(-time.Duration(i)*time.Minute)))
	}
	h := newHarness(t, monday9, sizing.Budget{}, objs...)
	require.NoError(t, h.c.Reconcile(ctx))
	deps, err := h.api.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, deps.Items, 1)
}

func TestFoundName(t *testing.T) {
	for image, want := range map[string]string{
		"python:3.12":                         "auto-python-3-12-",
		"registry.example.com:5000/team/rust": "auto-rust-",
		"golang@sha256:abcdef":                "auto-golang-",
		"___":                                 "auto-image-",
		strings.Repeat("x", 100):              "auto-" + strings.Repeat("x", 45) + "-",
	} {
		got := foundName(image)
		assert.True(t, strings.HasPrefix(got, want), "%s → %s", image, got)
		assert.LessOrEqual(t, len(got), 63)
		assert.Regexp(t, `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, got)
	}
	assert.NotEqual(t, foundName("a/python:3"), foundName("b/python:3"))
}

// A found pool goes once a person writes a pool for its image: that pool
// is the one its jobs should use.
func TestAFoundPoolGivesWayToAWrittenOne(t *testing.T) {
	ctx := context.Background()
	now := monday9
	objs := []k8sruntime.Object{basePool("alpine", "alpine:3.20")}
	for i := range 3 {
		objs = append(objs, noPoolPod("alpine", fmt.Sprintf("py-%d", i), "python:3.12", now.Add(-time.Duration(i)*time.Minute)))
	}
	h := newHarnessConfig(t, now, Config{Namespace: ns, Discovery: sizing.DefaultDiscovery()}, objs...)
	require.NoError(t, h.c.Reconcile(ctx))
	name := foundName("python:3.12")
	found, err := h.api.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	// A job's pod of it that a driver older than decision 0010 claimed
	// without dropping its owner: released before the pool goes, or the
	// garbage collector would take it with the pool.
	job := ownPod(found, "old-claim", "h", true, now)
	job.Labels[poolapi.LabelState] = poolapi.StateClaimed
	_, err = h.api.CoreV1().Pods(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.api.AppsV1().Deployments(ns).Create(ctx, basePoolNotDefault("python", "python:3.12"), metav1.CreateOptions{})
	require.NoError(t, err)
	h.settle(t)
	require.NoError(t, h.c.Reconcile(ctx))
	_, err = h.api.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	assert.Error(t, err, "removed")
	got, err := h.api.CoreV1().Pods(ns).Get(ctx, "old-claim", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, got.OwnerReferences, "released before its pool was removed")
	assert.Contains(t, strings.Join(h.events(), "\n"), "PoolRemoved removed: a pool written for python:3.12 runs its jobs now")
}

func basePoolNotDefault(name, image string) *appsv1.Deployment {
	d := basePool(name, image)
	delete(d.Annotations, poolapi.AnnotationDefaultPool)
	return d
}

// A saved profile folded past now (a clock ahead, an edited annotation)
// is refused: it would never fold again.
func TestSeedProfileRefusesTheFuture(t *testing.T) {
	var p sizing.Profile
	p.Fold(nil, time.Second, monday9, monday9.Add(48*time.Hour))
	tr := NewTracker()
	require.Error(t, tr.SeedProfile("ns/a", p.Marshal(), monday9))
	require.NoError(t, tr.SeedProfile("ns/b", p.Marshal(), monday9.Add(49*time.Hour)))
}
