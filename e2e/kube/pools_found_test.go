//go:build kube

package kubee2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/pools"
)

// TestPoolsFoundFromTheJobs runs warmpod-pools with --discover-pools (and
// the Role's two more verbs, as deploy/pools-controller.yaml says) against
// a namespace whose only pool is busybox. Jobs of an image no pool runs
// take the drivers' cold path (pool.Set.ForImage, CreateCold with the
// no-pool reason); after the third, the controller makes a pool for that
// image from busybox's Deployment, with a PoolFound Event, sizes it, and
// the next job of that image claims one of its pods warm. `warmpod-pools
// status`, run in the controller's pod as the chart's NOTES say, shows it.
// The pool then removed while that job runs leaves the job's pod alone.
func TestPoolsFoundFromTheJobs(t *testing.T) {
	ns := newNamespace(t, "found", true)
	ctx := context.Background()
	// A second image on the node: the busybox image under another name.
	const image = "localhost/kube-e2e/busybox:found"
	out, err := exec.Command("ctr", "--address", ctrSock, "-n", "k8s.io", "images", "tag", "--force", "localhost/kube-e2e/busybox:v1", image).CombinedOutput()
	require.NoError(t, err, "%s", out)
	cl := adminCluster(t, ns)
	for _, f := range []string{filepath.Join(repoRoot, "deploy/kube-e2e/pool.yaml"), controllerManifests(t, "--discover-pools", "--metrics-addr=127.0.0.1:19390")} {
		out, err := exec.Command(kubectl, "apply", "-n", ns, "-f", f).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	out, err = exec.Command(kubectl, "annotate", "-n", ns, "deployment/busybox", poolapi.AnnotationPolicy+"=- idle_count: 0\n  idle_time: 30s\n").CombinedOutput()
	require.NoError(t, err, "%s", out)
	waitFor(t, 90*time.Second, "a leader", func() (bool, string) {
		h := leaseHolder(t, cl.CS, ns)
		return h != "", h
	})

	for i := range 3 {
		set, err := cl.Pools(ctx)
		require.NoError(t, err)
		p, warm := set.ForImage(image)
		require.False(t, warm, "no pool runs %s yet", image)
		began := time.Now()
		got, err := cl.CreateCold(ctx, p, poolapi.Owner{Job: fmt.Sprint("cold-", i), Server: "e2e"}, pool.Cold{Reason: poolapi.ColdNoPool}, 3*time.Minute)
		require.NoError(t, err)
		t.Logf("cold job %d of %s: a pod of its own Ready in %.1f s", i+1, image, time.Since(began).Seconds())
		require.NoError(t, cl.Delete(ctx, got))
	}

	var found string
	waitFor(t, 90*time.Second, "a pool made for "+image, func() (bool, string) {
		deps, err := cl.CS.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, d := range deps.Items {
			names = append(names, d.Name)
			if d.Annotations[poolapi.AnnotationFoundFrom] == image {
				found = d.Name
			}
		}
		return found != "", strings.Join(names, " ")
	})
	assert.True(t, strings.HasPrefix(found, "auto-busybox-found-"), found)
	var msg string
	for _, e := range podEvents(t, ns, found) {
		if e.Reason == pools.EventPoolFound {
			msg = e.Message
		}
	}
	assert.Contains(t, msg, "made from busybox for "+image+": 3 jobs of it went cold without a pool")

	// The controller sizes the new pool from the jobs that found it; the
	// next job of the image claims warm.
	var claimed *poolapi.Pod
	waitFor(t, 3*time.Minute, "a warm claim from "+found, func() (bool, string) {
		set, err := cl.Pools(ctx)
		if err != nil {
			return false, err.Error()
		}
		p, warm := set.ForImage(image)
		if !warm || p.Pending {
			return false, fmt.Sprintf("pool %s warm %v pending %v", p.Name, warm, p.Pending)
		}
		pod, err := cl.ClaimWarm(ctx, p, poolapi.Owner{Job: "warm-1", Server: "e2e"}, 0, nil)
		if err != nil {
			return false, err.Error()
		}
		claimed = pod
		return pod != nil, "no Ready idle pod of " + p.Name + " yet"
	})
	assert.Equal(t, found, claimed.Pool)
	// The found pool's floor is 0: every pod of it is one the controller
	// made (decision 0010), owned by the Deployment until a claim drops
	// the owner; the running job's pod is no longer the pool's to take.
	job, err := cl.CS.CoreV1().Pods(ns).Get(ctx, claimed.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, job.OwnerReferences, "a claimed pod the controller made keeps no owner")

	// What the chart's NOTES tell a person to run: the view, from inside
	// the controller's pod with its account.
	out, err = exec.Command(kubectl, "exec", "-n", ns, "deploy/warmpod-pools", "--", "/warmpod-pools", "status").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("warmpod-pools status:\n%s", out)
	assert.Contains(t, string(out), "made by the controller for "+image)
	assert.Regexp(t, `(?m)^busybox\s+localhost/kube-e2e/busybox:v1\s+`, string(out))
	// The leader's count of the found pool's claims, asked from its pod
	// (the proxy is not the controller's to use: from the pod's IP).
	assert.NotContains(t, string(out), "not known")
	assert.Regexp(t, `(?m)^  claims, last hour: 1 of 1 warm \(100 %\), wait p50 \d+\.\d\d s, p95 \d+\.\d\d s; last day: 1 of 1 warm`, string(out))

	// The pool removed while its job runs (as the controller removes a
	// found pool after IdleFor, or a person deletes it): the garbage
	// collector takes the pool's idle pods and its ReplicaSet, not the
	// job's pod. The controller's pods carry no blockOwnerDeletion, so the
	// Deployment may go before them: the check waits for every other pod
	// of the pool to be gone (deleted, not only terminating).
	require.NoError(t, cl.CS.AppsV1().Deployments(ns).Delete(ctx, found, metav1.DeleteOptions{}))
	waitFor(t, 3*time.Minute, "the found pool's Deployment and its other pods gone", func() (bool, string) {
		if _, err := cl.CS.AppsV1().Deployments(ns).Get(ctx, found, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprint("the Deployment: ", err)
		}
		pods, err := cl.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: poolapi.LabelPool + "=" + found})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, p := range pods.Items {
			if p.Name != claimed.Name {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, fmt.Sprint("pods left: ", left)
	})
	job, err = cl.CS.CoreV1().Pods(ns).Get(ctx, claimed.Name, metav1.GetOptions{})
	require.NoError(t, err, "the running job's pod outlives its pool")
	assert.Nil(t, job.DeletionTimestamp, "the running job's pod is not being deleted")
	require.NoError(t, cl.Delete(ctx, *claimed))
}
