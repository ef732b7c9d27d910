//go:build kube

package kubee2e

// Where an in-place resize's wait goes (skipped unless
// WARMPOD_RESIZE_TIMELINE names the results file): an idle pool pod is
// claimed with a resize through the driver's own Cluster.ClaimWarm and
// AwaitResize, eight times (a fresh pod each), while the test watches, from the node, the container's cgroup files (the
// kubelet's writes through the runtime) and, read every 10 ms, the pod's
// status (the kubelet's reports), each with the time it first showed the
// new value. The node is this machine (kube-e2e is one node): the test
// skips when it cannot find the container's cgroup here.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// hostCgroup finds the directory of container cid of pod uid under root
// (a cgroup hierarchy of this node), in the cgroupfs or the systemd
// driver's naming.
func hostCgroup(root, uid, cid string) string {
	found := ""
	under := strings.ReplaceAll(uid, "-", "_")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // a file (fs.SkipDir there would skip its directory)
		}
		parent := filepath.Base(filepath.Dir(p))
		if strings.Contains(d.Name(), cid) && (strings.Contains(parent, uid) || strings.Contains(parent, under)) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	return found
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// resizeMarks are the times after the patch was sent at which each
// signal first showed the resize.
type resizeMarks struct {
	claimed, accepted, memory, cpu, status, driver time.Duration
}

func TestResizeTimeline(t *testing.T) {
	out := os.Getenv("WARMPOD_RESIZE_TIMELINE")
	if out == "" {
		t.Skip("WARMPOD_RESIZE_TIMELINE is not set")
	}
	const n = 8
	ns := newNamespace(t, "rsz", true)
	o, err := exec.Command(kubectl, "apply", "-n", ns, "-f", filepath.Join(repoRoot, "deploy/kube-e2e/pool.yaml")).CombinedOutput()
	require.NoError(t, err, "%s", o)
	o, err = exec.Command(kubectl, "scale", "-n", ns, "deployment/busybox", "--replicas", "1").CombinedOutput()
	require.NoError(t, err, "%s", o)
	k := adminCluster(t, ns)
	ctx := context.Background()
	set, err := k.Pools(ctx)
	require.NoError(t, err)
	require.Len(t, set.Pools, 1)
	p := set.Pools[0]
	q := resource.MustParse
	sizes := []corev1.ResourceRequirements{
		{Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("32Mi")}, Limits: corev1.ResourceList{"memory": q("256Mi")}},
		{Requests: corev1.ResourceList{"cpu": q("10m"), "memory": q("32Mi")}, Limits: corev1.ResourceList{"memory": q("192Mi")}},
	}
	var marks []resizeMarks
	v2 := false
	for i := range n {
		// Each round claims the one idle pod with a resize, as a
		// resized job's prepare does, and deletes it after.
		name := waitIdle(t, ns, 1, 2*time.Minute)[0].Metadata.Name
		if i%2 == 1 {
			// Every other claim takes a pod that has been Ready for a
			// while, as a pool's idle pods mostly are; the others take
			// it the moment it is Ready (the kubelet synced it then).
			time.Sleep(settle)
		}
		cur, err := k.CS.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		cid := cur.Status.ContainerStatuses[0].ContainerID
		cid = cid[strings.Index(cid, "://")+3:]
		memDir := hostCgroup("/sys/fs/cgroup/memory", string(cur.UID), cid)
		cpuDir := hostCgroup("/sys/fs/cgroup/cpu", string(cur.UID), cid)
		memFile, cpuFile := "memory.limit_in_bytes", "cpu.shares"
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			v2, memFile, cpuFile = true, "memory.max", "cpu.weight"
			memDir = hostCgroup("/sys/fs/cgroup", string(cur.UID), cid)
			cpuDir = memDir
		}
		if memDir == "" || cpuDir == "" {
			t.Skipf("the container's cgroup is not on this machine (pod %s, container %s)", cur.UID, cid)
		}
		owner := poolapi.Owner{Job: fmt.Sprint(i + 1), Server: "e2e"}
		marks = append(marks, resizeOnce(t, k, p, owner, name, sizes[(i/2)%2], filepath.Join(memDir, memFile), filepath.Join(cpuDir, cpuFile), v2))
	}
	writeTimeline(t, out, marks, v2)
}

// settle is how long every other claim of TestResizeTimeline waits after
// its pod became Ready: longer than the kubelet's relist period (1 s).
const settle = 2 * time.Second

// resizeOnce claims the idle pod name of p for owner with a resize to
// want (Cluster.ClaimWarm, then Cluster.AwaitResize), records when each
// signal first showed it, and deletes the pod.
func resizeOnce(t *testing.T, k *pool.Cluster, p pool.Pool, owner poolapi.Owner, name string, want corev1.ResourceRequirements, memPath, cpuPath string, v2 bool) resizeMarks {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wantMem := fmt.Sprint(want.Limits.Memory().Value())
	shares := want.Requests.Cpu().MilliValue() * 1024 / 1000
	wantCPU := fmt.Sprint(shares)
	if v2 {
		wantCPU = fmt.Sprint(1 + ((shares-2)*9999)/262142)
	}
	var mu sync.Mutex
	var m resizeMarks
	set := func(d *time.Duration, at time.Duration) {
		mu.Lock()
		if *d == 0 {
			*d = at
		}
		mu.Unlock()
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the node's cgroup files, every 2 ms
		defer wg.Done()
		for ctx.Err() == nil {
			if readTrim(memPath) == wantMem {
				set(&m.memory, time.Since(t0))
			}
			if readTrim(cpuPath) == wantCPU {
				set(&m.cpu, time.Since(t0))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	go func() { // the pod's status, as the kubelet reports it, every 10 ms
		// (read, not watched: a watch started right after a write can be
		// refused by a lagging watch cache, "Too large resource version")
		defer wg.Done()
		for ; ctx.Err() == nil; time.Sleep(10 * time.Millisecond) {
			pod, err := k.CS.CoreV1().Pods(k.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			at := time.Since(t0)
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodResizeInProgress && c.ObservedGeneration >= pod.Generation && pod.Generation > 1 {
					set(&m.accepted, at)
				}
			}
			if done, _, _ := pool.ResizeApplied(pod, p.Container, want); done {
				set(&m.accepted, at)
				set(&m.status, at)
			}
		}
	}()
	claimed, err := k.ClaimWarm(ctx, p, owner, 0, &want)
	require.NoError(t, err)
	require.NotNil(t, claimed, "the idle pod %s claimed", name)
	require.Equal(t, name, claimed.Name)
	require.NotNil(t, claimed.Resize)
	m.claimed = time.Since(t0)
	require.NoError(t, k.AwaitResize(ctx, *claimed, 30*time.Second, nil))
	m.driver = time.Since(t0)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return m.status != 0 && m.memory != 0 && m.cpu != 0 },
		30*time.Second, 10*time.Millisecond, "every signal showed the resize: %+v (want %s in %s, %s in %s)", &m, wantMem, memPath, wantCPU, cpuPath)
	cancel()
	wg.Wait()
	require.NoError(t, k.Delete(context.Background(), *claimed))
	return m
}

func writeTimeline(t *testing.T, out string, marks []resizeMarks, v2 bool) {
	t.Helper()
	group := func(settled int) []resizeMarks {
		var g []resizeMarks
		for i := settled; i < len(marks); i += 2 {
			g = append(g, marks[i])
		}
		return g
	}
	fresh, settled := group(0), group(1)
	med := func(f func(resizeMarks) time.Duration) string {
		var cols []string
		for _, g := range [][]resizeMarks{fresh, settled} {
			ds := make([]time.Duration, len(g))
			for i, m := range g {
				ds[i] = f(m)
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			cols = append(cols, fmt.Sprintf("%d ms", ds[len(ds)/2].Milliseconds()))
		}
		return strings.Join(cols, " | ")
	}
	cpuName, version := "cpu.shares", "v1"
	if v2 {
		cpuName, version = "cpu.weight", "v2"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| a warm pod claimed with an in-place resize (resize, then claim), %d claims each (medians, from the claim's start) | claimed as it became Ready | claimed %s after |\n|---|---|---|\n", len(fresh), settle)
	fmt.Fprintf(&b, "| ClaimWarm returned (list, pods/resize patch, claim patch) | %s |\n", med(func(m resizeMarks) time.Duration { return m.claimed }))
	fmt.Fprintf(&b, "| the kubelet accepted it (PodResizeInProgress in the status, or done) | %s |\n", med(func(m resizeMarks) time.Duration { return m.accepted }))
	fmt.Fprintf(&b, "| the container's memory limit in its cgroup (node's file) | %s |\n", med(func(m resizeMarks) time.Duration { return m.memory }))
	fmt.Fprintf(&b, "| the container's %s in its cgroup (node's file; 0: the value it had) | %s |\n", cpuName, med(func(m resizeMarks) time.Duration { return m.cpu }))
	fmt.Fprintf(&b, "| the status shows it applied (resources, no resize condition) | %s |\n", med(func(m resizeMarks) time.Duration { return m.status }))
	fmt.Fprintf(&b, "| Cluster.AwaitResize returned (cgroup via `warmpod job limits`, or status) | %s |\n", med(func(m resizeMarks) time.Duration { return m.driver }))
	fmt.Fprintf(&b, "\nEach claim, in order, alternately as Ready and %s after (ms after its start: claimed, accepted, memory, cpu, status, driver):", settle)
	for _, m := range marks {
		fmt.Fprintf(&b, " %d/%d/%d/%d/%d/%d;", m.claimed.Milliseconds(), m.accepted.Milliseconds(), m.memory.Milliseconds(), m.cpu.Milliseconds(), m.status.Milliseconds(), m.driver.Milliseconds())
	}
	fmt.Fprintf(&b, "\n\nMeasured %s on cgroup %s, load average %s.\n", time.Now().UTC().Format(time.RFC3339), version, loadAvg())
	require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o644))
	t.Log("\n" + b.String())
}
