//go:build kube

package kubee2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// Hollow nodes: Node objects with no machine behind them, and a hollow
// kubelet in the test that does for their pods what kubemark's hollow
// kubelet does: it reports every pod bound to them Running and Ready at
// once and finishes their deletions. The pods need no containers, so
// kube-e2e's one real node (2 CPUs, 110 pods) holds a thousand of them;
// the API server, etcd, the scheduler and the ReplicaSet controller are
// the real ones. Everything the claim path reads and writes (the pod's
// labels, its Ready condition, resourceVersions) is as a real kubelet
// leaves it; nothing in the claim path knows a node is hollow.

// hollowLabel marks hollow nodes (a label, for the pools' nodeSelector)
// and taints them, so that no pod of another test lands on them.
const hollowLabel = "warmpod.e2e/hollow"

// hollowNodes are n hollow nodes and their kubelet, for pods of one
// namespace.
type hollowNodes struct {
	// prefix names the nodes and is their hollowLabel's value: each
	// test's pods go to its own nodes.
	prefix string
	names  []string
	cs     kubernetes.Interface
	ns     string

	mu      sync.Mutex
	running map[types.UID]bool // pods reported Running and Ready
}

// startHollowNodes registers n nodes of podsPerNode pods each (64 CPUs,
// 256 GiB) and runs their kubelet for namespace ns until the test ends;
// then it deletes the namespace's Deployments, ReplicaSets and pods (the
// pods at once: no kubelet is left to finish a graceful deletion) and
// the nodes.
func startHollowNodes(t *testing.T, cs kubernetes.Interface, ns string, n, podsPerNode int) *hollowNodes {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	prefix := "hollow-" + randHex(3)
	h := &hollowNodes{prefix: prefix, cs: cs, ns: ns, running: map[types.UID]bool{}}
	var wg sync.WaitGroup
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	t.Cleanup(func() {
		// The ReplicaSets go first, or they would make new pods that no
		// kubelet is left to finish (a thousand pods on a deleted node
		// wait for the pod garbage collector, minutes at the controller
		// manager's 20 writes a second).
		bg := context.Background()
		orphan := metav1.DeletePropagationOrphan
		_ = cs.AppsV1().Deployments(ns).DeleteCollection(bg, metav1.DeleteOptions{PropagationPolicy: &orphan}, metav1.ListOptions{})
		_ = cs.AppsV1().ReplicaSets(ns).DeleteCollection(bg, metav1.DeleteOptions{PropagationPolicy: &orphan}, metav1.ListOptions{})
		zero := int64(0)
		_ = cs.CoreV1().Pods(ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		cancel()
		wg.Wait()
		f.Shutdown()
		for _, name := range h.names {
			_ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = cs.CoordinationV1().Leases("kube-node-lease").Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		_, err := cs.CoreV1().Nodes().Create(ctx, hollowNode(name, prefix, podsPerNode), metav1.CreateOptions{})
		require.NoError(t, err)
		h.names = append(h.names, name)
		// The create keeps no status of a node; the kubelet posts it. The
		// node controllers write the new node too: read it again on a
		// conflict.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node.Status = hollowNode(name, prefix, podsPerNode).Status
			_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			return err
		})
		require.NoError(t, err)
	}
	// The node lifecycle controller takes a node whose Lease is not
	// renewed within its grace period (40 s) for unreachable and taints
	// it: renew every 10 s, as the kubelet does.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, name := range h.names {
				h.renewLease(ctx, name)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
		}
	}()

	work := make(chan *corev1.Pod, 4096)
	inf := f.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && h.owns(p.Spec.NodeName) {
			select {
			case work <- p:
			case <-ctx.Done():
			}
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	require.NoError(t, err)
	f.Start(ctx.Done())
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-work:
					h.sync(ctx, p, 0)
				}
			}
		}()
	}
	return h
}

func (h *hollowNodes) owns(node string) bool {
	for _, n := range h.names {
		if n == node {
			return true
		}
	}
	return false
}

// sync does what a kubelet does for pod p: a pod being deleted is
// removed (its containers would be gone at once), a new one is reported
// Running and Ready. A conflict means the informer brings a newer p.
func (h *hollowNodes) sync(ctx context.Context, p *corev1.Pod, tries int) {
	if p.DeletionTimestamp != nil {
		zero := int64(0)
		uid := p.UID
		_ = h.cs.CoreV1().Pods(h.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
		return
	}
	h.mu.Lock()
	done := h.running[p.UID]
	h.mu.Unlock()
	if done || p.Status.Phase == corev1.PodRunning {
		return
	}
	p = p.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.PodIP = "127.0.0.1", "127.0.0.1"
	p.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
	p.Status.StartTime = &now
	p.Status.Conditions = nil
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodScheduled, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.InitContainerStatuses = nil
	for _, c := range p.Spec.InitContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	p.Status.ContainerStatuses = nil
	started := true
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if _, err := h.cs.CoreV1().Pods(h.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err == nil {
		h.mu.Lock()
		h.running[p.UID] = true
		h.mu.Unlock()
	} else if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil && tries < 5 {
		// Not a newer version on its way (a timeout, a 429): read it
		// again, a few times, a little later.
		time.Sleep(time.Duration(tries+1) * 200 * time.Millisecond)
		if cur, gerr := h.cs.CoreV1().Pods(h.ns).Get(ctx, p.Name, metav1.GetOptions{}); gerr == nil && cur.UID == p.UID {
			h.sync(ctx, cur, tries+1)
		}
	}
}

// renewLease creates or renews node name's Lease in kube-node-lease.
func (h *hollowNodes) renewLease(ctx context.Context, name string) {
	now := metav1.NewMicroTime(time.Now())
	leases := h.cs.CoordinationV1().Leases("kube-node-lease")
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		holder, dur := name, int32(40)
		_, _ = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{})
		return
	}
	if err != nil {
		return
	}
	l.Spec.RenewTime = &now
	_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
}

// hollowNode is node name as a kubelet registers it, Ready, tainted and
// labelled hollow.
func hollowNode(name, label string, pods int) *corev1.Node {
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", hollowLabel: label,
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: hollowLabel, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.34.4", OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "hollow://0"},
		},
	}
}

// place makes a pod template's pods go to h's nodes (by the scheduler:
// no nodeName).
func (h *hollowNodes) place(spec *corev1.PodSpec) {
	spec.NodeName = ""
	spec.NodeSelector = map[string]string{hollowLabel: h.prefix}
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: hollowLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
}
