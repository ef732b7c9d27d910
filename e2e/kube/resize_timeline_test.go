//go:build kube

package kubee2e

// Where an in-place resize's wait goes (skipped unless
// WARMPOD_RESIZE_TIMELINE names the results file): an idle pool pod is
// resized through the driver's own Cluster.Resize, back and forth, while
// the test watches, from the node, the container's cgroup files (the
// kubelet's writes through the runtime) and, through a watch, the pod's
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
	accepted, memory, cpu, status, driver time.Duration
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
	name := waitIdle(t, ns, 1, 2*time.Minute)[0].Metadata.Name
	k := adminCluster(t, ns)
	ctx := context.Background()
	cur, err := k.CS.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	cid := cur.Status.ContainerStatuses[0].ContainerID
	cid = cid[strings.Index(cid, "://")+3:]
	v2 := false
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
	target := pool.Pod{Name: name, Namespace: ns, Container: "build", Bin: "/warmpod/warmpod"}
	q := resource.MustParse
	sizes := []corev1.ResourceRequirements{
		{Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("32Mi")}, Limits: corev1.ResourceList{"memory": q("256Mi")}},
		{Requests: corev1.ResourceList{"cpu": q("10m"), "memory": q("32Mi")}, Limits: corev1.ResourceList{"memory": q("192Mi")}},
	}
	var marks []resizeMarks
	for i := range n {
		want := sizes[i%2]
		marks = append(marks, resizeOnce(t, k, target, want, filepath.Join(memDir, memFile), filepath.Join(cpuDir, cpuFile), v2))
		time.Sleep(2 * time.Second) // let the kubelet settle between resizes
	}
	writeTimeline(t, out, marks, v2)
}

// resizeOnce resizes target to want with Cluster.Resize and records when
// each signal first showed it.
func resizeOnce(t *testing.T, k *pool.Cluster, target pool.Pod, want corev1.ResourceRequirements, memPath, cpuPath string, v2 bool) resizeMarks {
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
	w, err := k.CS.CoreV1().Pods(target.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + target.Name})
	require.NoError(t, err)
	defer w.Stop()
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
	go func() { // the pod's status, as the kubelet reports it
		defer wg.Done()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			at := time.Since(t0)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodResizeInProgress && c.ObservedGeneration >= p.Generation && p.Generation > 1 {
					set(&m.accepted, at)
				}
			}
			if done, _, _ := pool.ResizeApplied(p, target.Container, want); done {
				set(&m.accepted, at)
				set(&m.status, at)
			}
		}
	}()
	require.NoError(t, k.Resize(ctx, target, want, 30*time.Second, nil))
	m.driver = time.Since(t0)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return m.status != 0 && m.memory != 0 && m.cpu != 0 },
		30*time.Second, 10*time.Millisecond, "every signal showed the resize: %+v (want %s in %s, %s in %s)", &m, wantMem, memPath, wantCPU, cpuPath)
	cancel()
	w.Stop()
	wg.Wait()
	return m
}

func writeTimeline(t *testing.T, out string, marks []resizeMarks, v2 bool) {
	t.Helper()
	med := func(f func(resizeMarks) time.Duration) string {
		ds := make([]time.Duration, len(marks))
		for i, m := range marks {
			ds[i] = f(m)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return fmt.Sprintf("%d ms", ds[len(ds)/2].Milliseconds())
	}
	cpuName, version := "cpu.shares", "v1"
	if v2 {
		cpuName, version = "cpu.weight", "v2"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| an idle pool pod's in-place resize, %d resizes (medians, from the pods/resize patch) | after |\n|---|---|\n", len(marks))
	fmt.Fprintf(&b, "| the kubelet accepted it (PodResizeInProgress in the status, or done) | %s |\n", med(func(m resizeMarks) time.Duration { return m.accepted }))
	fmt.Fprintf(&b, "| the container's memory limit in its cgroup (node's file) | %s |\n", med(func(m resizeMarks) time.Duration { return m.memory }))
	fmt.Fprintf(&b, "| the container's %s in its cgroup (node's file) | %s |\n", cpuName, med(func(m resizeMarks) time.Duration { return m.cpu }))
	fmt.Fprintf(&b, "| the status shows it applied (resources, no resize condition): the wait before | %s |\n", med(func(m resizeMarks) time.Duration { return m.status }))
	fmt.Fprintf(&b, "| Cluster.Resize returned (cgroup via `warmpod job limits`, or status) | %s |\n", med(func(m resizeMarks) time.Duration { return m.driver }))
	fmt.Fprintf(&b, "\nEach resize (ms after the patch: accepted, memory, cpu, status, driver):")
	for _, m := range marks {
		fmt.Fprintf(&b, " %d/%d/%d/%d/%d;", m.accepted.Milliseconds(), m.memory.Milliseconds(), m.cpu.Milliseconds(), m.status.Milliseconds(), m.driver.Milliseconds())
	}
	fmt.Fprintf(&b, "\n\nMeasured %s on cgroup %s, load average %s.\n", time.Now().UTC().Format(time.RFC3339), version, loadAvg())
	require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o644))
	t.Log("\n" + b.String())
}
