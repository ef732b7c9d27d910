//go:build kube

package kubee2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// Pods that let nodes drain (issue 42), through the Eviction API that
// kubectl drain and the autoscalers' scale-in use: an idle pool pod is
// evicted and its pool makes another; a claimed pod, whose job runs, is
// refused with 429 (deploy/claimed-pdb.yaml), as is a cold one. The
// autoscalers' annotations ride on the claim's patch and the cold pod's
// create (the unclaim patch's are unit-tested: executor/pool's
// TestInfeasibleResizeGivesThePodBack).
func TestEvictionSparesClaimedPods(t *testing.T) {
	ns := newNamespace(t, "evict", true)
	ctx := context.Background()
	cl := adminCluster(t, ns)
	out, err := exec.Command(kubectl, "apply", "-n", ns, "-f", filepath.Join(repoRoot, "deploy/claimed-pdb.yaml")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// kube-e2e's pool without GitLab Runner's helper (no job runs here),
	// as make bench-pools makes it: the template's annotations are kept.
	_, err = cl.CS.AppsV1().Deployments(ns).Create(ctx, pbPoolDeployment(t, "busybox", 2, ""), metav1.CreateOptions{})
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/claimed-pdb.yaml"))
	require.NoError(t, err)
	var pdb policyv1.PodDisruptionBudget
	require.NoError(t, yaml.Unmarshal(raw, &pdb))

	idle := func() []corev1.Pod {
		l, err := cl.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: poolapi.LabelState + "=" + poolapi.StateIdle})
		require.NoError(t, err)
		var out []corev1.Pod
		for _, p := range l.Items {
			if pool.PodReady(&p) {
				out = append(out, p)
			}
		}
		return out
	}
	waitFor(t, 2*time.Minute, "the pool's pods Ready", func() (bool, string) {
		return len(idle()) >= 1, ""
	})
	evict := func(name string) error {
		return cl.CS.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}

	// An idle pod goes, and the pool makes another.
	waitFor(t, 2*time.Minute, "both pods Ready", func() (bool, string) {
		return len(idle()) == 2, ""
	})
	before := map[string]bool{}
	for _, p := range idle() {
		before[p.Name] = true
	}
	first := idle()[0]
	assert.Equal(t, "true", first.Annotations[poolapi.AnnotationSafeToEvict], "the template's")
	require.NoError(t, evict(first.Name), "an idle pod is evictable")
	waitFor(t, 2*time.Minute, "the pool's new pod Ready in the evicted one's place", func() (bool, string) {
		for _, p := range idle() {
			if !before[p.Name] {
				return true, ""
			}
		}
		return false, ""
	})

	// The disruption controller has seen the budget before a claim is
	// tested against it (a budget it has not observed refuses every
	// eviction, which would prove nothing).
	waitFor(t, time.Minute, "the budget observed", func() (bool, string) {
		b, err := cl.CS.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return b.Status.ObservedGeneration == b.Generation, ""
	})
	set, err := cl.Pools(ctx)
	require.NoError(t, err)
	require.Len(t, set.Pools, 1)
	p := set.Pools[0]
	claimed, err := cl.ClaimWarm(ctx, p, poolapi.Owner{Job: "evict-1", Server: "e2e"}, 30*time.Second, nil)
	require.NoError(t, err)
	require.NotNil(t, claimed)
	got, err := cl.CS.CoreV1().Pods(ns).Get(ctx, claimed.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "false", got.Annotations[poolapi.AnnotationSafeToEvict], "set by the claim's patch")
	assert.Equal(t, "true", got.Annotations[poolapi.AnnotationDoNotDisrupt])
	err = evict(claimed.Name)
	require.Error(t, err, "a claimed pod is not evicted while its job runs")
	assert.True(t, apierrors.IsTooManyRequests(err), "429, as kubectl drain retries: %v", err)
	_, err = cl.CS.CoreV1().Pods(ns).Get(ctx, claimed.Name, metav1.GetOptions{})
	require.NoError(t, err, "still there")

	// A cold pod is busy from its creation.
	cold, err := cl.CreateCold(ctx, p, poolapi.Owner{Job: "evict-2", Server: "e2e"}, pool.Cold{Reason: poolapi.ColdNoIdle}, 3*time.Minute)
	require.NoError(t, err)
	err = evict(cold.Name)
	assert.True(t, apierrors.IsTooManyRequests(err), "a cold pod is not evicted while its job runs: %v", err)

	require.NoError(t, cl.Delete(ctx, *claimed), "the job's end deletes its pod: no budget stands in the way")
	require.NoError(t, cl.Delete(ctx, cold))
}
