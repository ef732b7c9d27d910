package pool

import (
	"context"
	"fmt"
	"sort"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Node is a node a pool's pods may run on and what it can allocate to
// pods (status.allocatable: capacity less what the kubelet reserves).
type Node struct {
	Name        string
	Allocatable corev1.ResourceList
}

// Nodes lists the nodes t's pods may run on: the one its nodeName names,
// else those whose labels match its nodeSelector (every node when it has
// none) and whose NoSchedule and NoExecute taints its tolerations
// tolerate, as kube-scheduler's TaintToleration filter does (a cordoned
// node has the node.kubernetes.io/unschedulable taint): a node the
// scheduler would never place the pod on must not make a job look as if
// it fits. Affinity is not read: a node it rules out still counts, so
// the answer errs towards "it may fit". Sorted by name.
// Errors: the API server's (RBAC: get and list on nodes, which are
// cluster-scoped: a ClusterRole, deploy/gitlab-rbac.yaml).
func (k *Cluster) Nodes(ctx context.Context, t *corev1.PodTemplateSpec) ([]Node, error) {
	var items []corev1.Node
	if n := t.Spec.NodeName; n != "" {
		node, err := k.CS.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get node %s: %w", n, err)
		}
		items = []corev1.Node{*node}
	} else {
		l, err := k.CS.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set(t.Spec.NodeSelector).String()})
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		items = l.Items
	}
	out := make([]Node, 0, len(items))
	for _, n := range items {
		if t.Spec.NodeName == "" && !tolerated(n.Spec.Taints, t.Spec.Tolerations) {
			continue
		}
		out = append(out, Node{Name: n.Name, Allocatable: n.Status.Allocatable})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// PodRequests is what a pod of spec requests of the scheduler, per
// resource, as Kubernetes computes it: the sum of its containers and of
// its sidecars (init containers with restartPolicy Always), or, when
// larger, an init container's request plus the sidecars started before
// it; a container's limit is its request where it sets none
// (EffectiveRequests). Pod overhead (a RuntimeClass's) is not in a template and not
// counted.
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	add := func(dst corev1.ResourceList, r corev1.ResourceRequirements) {
		for n, q := range EffectiveRequests(r) {
			sum := dst[n]
			sum.Add(q)
			dst[n] = sum
		}
	}
	addList := func(dst, src corev1.ResourceList) {
		for n, q := range src {
			sum := dst[n]
			sum.Add(q)
			dst[n] = sum
		}
	}
	for _, c := range spec.Containers {
		add(out, c.Resources)
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sidecars, c.Resources)
			continue
		}
		each := corev1.ResourceList{}
		addList(each, sidecars)
		add(each, c.Resources)
		for n, q := range each {
			if cur, ok := initMax[n]; !ok || q.Cmp(cur) > 0 {
				initMax[n] = q
			}
		}
	}
	addList(out, sidecars)
	for n, q := range initMax {
		if cur, ok := out[n]; !ok || q.Cmp(cur) > 0 {
			out[n] = q
		}
	}
	return out
}

// EffectiveRequests are r's requests as the API server stores them: a
// resource with a limit and no request is requested at its limit
// (Kubernetes' defaulting of a container's resources).
func EffectiveRequests(r corev1.ResourceRequirements) corev1.ResourceList {
	out := corev1.ResourceList{}
	for n, q := range r.Limits {
		out[n] = q
	}
	for n, q := range r.Requests {
		out[n] = q
	}
	return out
}

// Fits tells whether a pod requesting req fits the node's allocatable:
// every resource req names that the node reports (a resource the node
// does not report, say an extended one, is not judged here).
func (n Node) Fits(req corev1.ResourceList) bool {
	for name, q := range req {
		if a, ok := n.Allocatable[name]; ok && q.Cmp(a) > 0 {
			return false
		}
	}
	return true
}

// tolerated tells whether tolerations tolerate every NoSchedule and
// NoExecute taint (PreferNoSchedule only steers the scheduler). A pod
// with nodeName skips the scheduler, and its node's taints with it.
func tolerated(taints []corev1.Taint, tolerations []corev1.Toleration) bool {
	for i := range taints {
		tt := &taints[i]
		if tt.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range tolerations {
			// Comparison operators (Gt, Lt) are a feature gate of 1.35:
			// off, as on the clusters warmpod is tested on.
			if tolerations[j].ToleratesTaint(logr.Discard(), tt, false) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
