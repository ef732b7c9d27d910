//go:build kube

package kubee2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/pools"
)

// controllerManifests writes deploy/pools-controller.yaml as kube-e2e runs
// it (no pod network, no kube-proxy, nothing pulled): the Deployment's pods
// on the host's network, the API server's address in their env, metrics on
// a port of their own each (two replicas share the host's network), and the
// given extra args. An arg --metrics-addr=ADDR instead gives one replica
// that port, in its env (WARMPOD_POOLS_METRICS_ADDR), as the chart does, so
// that `kubectl exec … status` asks the leader there.
func controllerManifests(t *testing.T, args ...string) string {
	t.Helper()
	metricsAddr := "127.0.0.1:0"
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		v, ok := strings.CutPrefix(a, "--metrics-addr=")
		if ok {
			metricsAddr = v
		}
		return ok
	})
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/pools-controller.yaml"))
	require.NoError(t, err)
	var docs []string
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		j, err := utilyaml.ToJSON([]byte(doc))
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(j, &m))
		if m["kind"] == "Role" && slices.Contains(args, "--discover-pools") {
			// What the manifest's comment says --discover-pools needs.
			rule := m["rules"].([]any)[0].(map[string]any)
			rule["verbs"] = append(rule["verbs"].([]any), "create", "delete")
		}
		if m["kind"] == "Deployment" {
			spec := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			spec["hostNetwork"], spec["enableServiceLinks"] = true, false
			delete(spec, "affinity")
			c := spec["containers"].([]any)[0].(map[string]any)
			c["imagePullPolicy"] = "Never"
			// Two replicas on the host's network: a fixed port would be a
			// host port both want.
			delete(c, "livenessProbe")
			delete(c, "ports")
			c["args"] = append([]any{}, toAny(args)...)
			c["env"] = append(c["env"].([]any),
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
				map[string]any{"name": "WARMPOD_POOLS_METRICS_ADDR", "value": metricsAddr})
			if metricsAddr != "127.0.0.1:0" {
				m["spec"].(map[string]any)["replicas"] = 1
			}
		}
		b, err := json.Marshal(m)
		require.NoError(t, err)
		docs = append(docs, string(b))
	}
	f := filepath.Join(t.TempDir(), "pools-controller.json")
	require.NoError(t, os.WriteFile(f, []byte(strings.Join(docs, "\n")), 0o644))
	return f
}

// ctrSock is kube-e2e's containerd, whose tasks the test freezes.
const ctrSock = "/var/lib/kube-e2e/state/containerd/containerd.sock"

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// adminCluster is a pool.Cluster with the admin kubeconfig: the drivers'
// claim path (ClaimWarm, CreateCold, Delete) run from the test.
func adminCluster(t *testing.T, ns string) *pool.Cluster {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	require.NoError(t, err)
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return &pool.Cluster{CS: cs, Config: rc, Namespace: ns}
}

// busyGuard watches the namespace's pods and records every claimed pod
// that was marked retiring or deleted while the test still held it.
type busyGuard struct {
	mu       sync.Mutex
	held     map[string]bool // claimed pods the test holds (jobs running)
	breaches []string
}

func (g *busyGuard) hold(name string, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held[name] = on
}

func (g *busyGuard) check(p *corev1.Pod, deleted bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held[p.Name] {
		return
	}
	switch {
	case deleted:
		g.breaches = append(g.breaches, p.Name+" deleted while its job ran")
	case p.DeletionTimestamp != nil:
		g.breaches = append(g.breaches, p.Name+" terminating while its job ran")
	case p.Annotations[poolapi.AnnotationRetiring] != "":
		g.breaches = append(g.breaches, p.Name+" marked retiring while its job ran")
	}
}

func watchBusy(t *testing.T, cs kubernetes.Interface, ns string) *busyGuard {
	g := &busyGuard{held: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, n any) { g.check(n.(*corev1.Pod), false) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				g.check(p, true)
			}
		},
	})
	require.NoError(t, err)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	return g
}

// leaseHolder is the Lease warmpod-pools' holder ("" when none).
func leaseHolder(t testing.TB, cs kubernetes.Interface, ns string) string {
	l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), "warmpod-pools", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestPoolControllerSizesAndSurvivesItsLeader runs warmpod-pools as the
// manifest ships it (two replicas, a Lease) and sizes a pool through a
// burst of jobs on the drivers' claim path: half the burst, the leader
// frozen (so its Lease is neither renewed nor released), the other half. The other replica takes over once the Lease lapses; the pool
// grows for the demand; when the jobs are gone it goes back to idle_count
// after idle_time, removing only idle pods: no pod is deleted or marked
// retiring while its job runs (two jobs still run through the scale-down).
// A policy that does not parse then gets an Event and the pool keeps its
// size.
func TestPoolControllerSizesAndSurvivesItsLeader(t *testing.T) {
	ns := newNamespace(t, "pools", true)
	t.Cleanup(func() {
		if t.Failed() {
			// What a restarted controller's previous run said.
			out, _ := exec.Command(kubectl, "logs", "-n", ns, "--previous", "--prefix", "--tail=100",
				"-l", "app.kubernetes.io/component=pools-controller").CombinedOutput()
			t.Logf("previous controller logs:\n%s", out)
		}
	})
	cl := adminCluster(t, ns)
	ctx := context.Background()
	for _, f := range []string{filepath.Join(repoRoot, "deploy/kube-e2e/pool.yaml"), controllerManifests(t)} {
		out, err := exec.Command(kubectl, "apply", "-n", ns, "-f", f).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	policy := "- idle_count: 1\n  idle_time: 40s\n  max: 6\n"
	out, err := exec.Command(kubectl, "annotate", "-n", ns, "deployment/busybox", poolapi.AnnotationPolicy+"="+policy).CombinedOutput()
	require.NoError(t, err, "%s", out)
	guard := watchBusy(t, cl.CS, ns)

	var leader string
	waitFor(t, 90*time.Second, "a leader, and the pool at idle_count 1", func() (bool, string) {
		leader = leaseHolder(t, cl.CS, ns)
		d, err := cl.CS.AppsV1().Deployments(ns).Get(ctx, "busybox", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return leader != "" && *d.Spec.Replicas == 1, fmt.Sprintf("leader %q replicas %d", leader, *d.Spec.Replicas)
	})
	idleIs := func(n int) func() (bool, string) {
		return func() (bool, string) {
			idle := 0
			for _, p := range poolPods(t, ns) {
				if p.Metadata.Labels[poolapi.LabelState] == poolapi.StateIdle && p.Metadata.DeletionTimestamp == nil && p.ready() {
					idle++
				}
			}
			return idle == n, fmt.Sprintf("%d Ready idle pods", idle)
		}
	}
	waitFor(t, 2*time.Minute, "one Ready idle pod", idleIs(1))
	set, err := cl.Pools(ctx)
	require.NoError(t, err)
	p, _ := set.ForImage("")

	var mu sync.Mutex
	var held []poolapi.Pod
	burst := func(n int, from int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := poolapi.Owner{Job: fmt.Sprint(from + i), Server: "e2e"}
				began := time.Now()
				pod, err := cl.ClaimWarm(ctx, p, owner, 0, nil)
				assert.NoError(t, err)
				if pod == nil {
					got, err := cl.CreateCold(ctx, p, owner, pool.Cold{Reason: poolapi.ColdNoIdle, Waited: time.Since(began)}, 3*time.Minute)
					if !assert.NoError(t, err) {
						return
					}
					pod = &got
				}
				guard.hold(pod.Name, true)
				mu.Lock()
				held = append(held, *pod)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	burst(3, 100)
	// The leader hangs (its container frozen by the runtime, as a node
	// partitioned away or a stopped process would be): it neither renews nor
	// releases its Lease, so the other replica takes over when the Lease
	// lapses. Thawed at the end, it finds the Lease gone and exits.
	lp := getPod(t, ns, leader)
	require.NotEmpty(t, lp.Status.ContainerStatuses)
	cid := strings.TrimPrefix(lp.Status.ContainerStatuses[0].ContainerID, "containerd://")
	ctrCmd := func(verb string) {
		out, err := exec.Command("ctr", "--address", ctrSock, "-n", "k8s.io", "tasks", verb, cid).CombinedOutput()
		require.NoError(t, err, "ctr tasks %s: %s", verb, out)
	}
	ctrCmd("pause")
	killed := time.Now()
	t.Cleanup(func() { _ = exec.Command("ctr", "--address", ctrSock, "-n", "k8s.io", "tasks", "resume", cid).Run() })
	burst(3, 200)
	var next string
	waitFor(t, 60*time.Second, "another replica holding the Lease", func() (bool, string) {
		next = leaseHolder(t, cl.CS, ns)
		return next != "" && next != leader, "holder " + next
	})
	took := time.Since(killed)
	t.Logf("leader %s frozen; %s leads %.1f s later (Lease duration 15 s)", leader, next, took.Seconds())
	// What client-go's leaderelection promises: the replica sees the
	// Lease's last renewal up to one retry period after it was made, and
	// takes over at its first try after the Lease duration from then.
	// Each wait between tries is the retry period (2 s) jittered by up to
	// 1.2 times more (wait.JitterUntil with leaderelection's JitterFactor),
	// so two of them are up to 8.8 s; 2 s more for this test's polls and
	// the API server's answers. (A bound of one plain retry period, 20 s
	// in all, failed once at 20.1 s.)
	const leaseDuration, retryMax = 15 * time.Second, 2 * time.Second * 22 / 10
	assert.LessOrEqual(t, took, leaseDuration+2*retryMax+2*time.Second, "takeover within the Lease duration and two jittered retry periods")

	waitFor(t, 2*time.Minute, "the pool grown for the burst", func() (bool, string) {
		evs := podEvents(t, ns, "busybox")
		for _, e := range evs {
			if e.Reason == "ScaledByDemand" {
				return true, e.Message
			}
		}
		return false, fmt.Sprint(evs)
	})

	// All but two jobs end; the pool shrinks to idle_count after idle_time.
	mu.Lock()
	require.Len(t, held, 6)
	for _, h := range held[2:] {
		guard.hold(h.Name, false)
		require.NoError(t, cl.Delete(ctx, h))
	}
	mu.Unlock()
	waitFor(t, 3*time.Minute, "the pool back at idle_count 1 after idle_time", func() (bool, string) {
		d, err := cl.CS.AppsV1().Deployments(ns).Get(ctx, "busybox", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Annotations[poolapi.AnnotationSizing]
		return *d.Spec.Replicas == 1 && strings.Contains(st, `"reason":"idle_time"`), fmt.Sprintf("replicas %d status %s", *d.Spec.Replicas, st)
	})
	// The pods the burst grew the pool by are the controller's (decision
	// 0010): the Deployment's replicas are the floor, 1, and each pod above
	// it waits for a later claim (up to sizing.MaxKeepAlive) instead of
	// being removed and made again for the next job.
	var kept []string
	waitFor(t, time.Minute, "the Ready idle pods above the floor the controller's", func() (bool, string) {
		d, err := cl.CS.AppsV1().Deployments(ns).Get(ctx, "busybox", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		list, err := cl.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: poolapi.LabelState + "=" + poolapi.StateIdle})
		if err != nil {
			return false, err.Error()
		}
		kept = kept[:0]
		rs := 0
		for _, p := range list.Items {
			switch {
			case !pool.PodReady(&p):
			case pool.MadeByController(&p) && metav1.IsControlledBy(&p, d):
				kept = append(kept, p.Name)
			default:
				rs++
			}
		}
		return rs == 1 && len(kept) >= 1, fmt.Sprintf("%d of the ReplicaSet, %d of the controller", rs, len(kept))
	})
	t.Logf("%d pods above the floor kept for a later claim", len(kept))
	// Claims of every idle pod: each of the controller's leaves the
	// Deployment's ownership with its claim (the pool's removal must not
	// take a running job's pod with it).
	before := len(held)
	burst(len(kept)+1, 300)
	mu.Lock()
	for _, h := range held[before:] {
		cur, err := cl.CS.CoreV1().Pods(ns).Get(ctx, h.Name, metav1.GetOptions{})
		require.NoError(t, err)
		if slices.Contains(kept, h.Name) {
			assert.Empty(t, cur.OwnerReferences, "a claimed pod of the controller's is released")
		}
		guard.hold(h.Name, false)
		require.NoError(t, cl.Delete(ctx, h))
	}
	mu.Unlock()
	for _, h := range held[:2] {
		cur, err := cl.CS.CoreV1().Pods(ns).Get(ctx, h.Name, metav1.GetOptions{})
		require.NoError(t, err, "a busy pod survives the scale-down")
		assert.Nil(t, cur.DeletionTimestamp)
		guard.hold(h.Name, false)
		require.NoError(t, cl.Delete(ctx, h))
	}
	guard.mu.Lock()
	assert.Empty(t, guard.breaches, "no busy pod removed or marked")
	guard.mu.Unlock()

	// The old leader, thawed, finds the Lease another's and stops: its
	// container exits (and is restarted as a follower).
	ctrCmd("resume")
	waitFor(t, 60*time.Second, "the thawed leader restarted as a follower", func() (bool, string) {
		p := getPod(t, ns, leader)
		n := 0
		if len(p.Status.ContainerStatuses) > 0 {
			n = p.Status.ContainerStatuses[0].RestartCount
		}
		return n > 0 && leaseHolder(t, cl.CS, ns) == next, fmt.Sprintf("restarts %d, holder %s", n, leaseHolder(t, cl.CS, ns))
	})

	// A policy that does not parse: an Event naming the field, size kept.
	out, err = exec.Command(kubectl, "annotate", "--overwrite", "-n", ns, "deployment/busybox", poolapi.AnnotationPolicy+"=- idle_count: 9\n  max: 2\n").CombinedOutput()
	require.NoError(t, err, "%s", out)
	waitFor(t, 60*time.Second, "an InvalidPolicy Event", func() (bool, string) {
		for _, e := range podEvents(t, ns, "busybox") {
			if e.Reason == pools.EventInvalidPolicy {
				return strings.Contains(e.Message, "idle_count"), e.Message
			}
		}
		return false, "none yet"
	})
	d, err := cl.CS.AppsV1().Deployments(ns).Get(ctx, "busybox", metav1.GetOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, *d.Spec.Replicas)
}
