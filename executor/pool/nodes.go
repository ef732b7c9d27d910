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
// none) and that are not cordoned (spec.unschedulable, as kube-scheduler's
// NodeUnschedulable filter reads it: a node being drained is no room for a
// job), unless the template tolerates node.kubernetes.io/unschedulable.
// Affinity and taints are not read: the API server adds tolerations at
// admission that no template shows (a RuntimeClass's, an extended
// resource's, a webhook's), so a node they rule out still counts, and the
// answer errs towards "it may fit". Sorted by name.
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
		if t.Spec.NodeName == "" && n.Spec.Unschedulable && !toleratesCordon(t.Spec.Tolerations) {
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

// toleratesCordon tells whether tolerations let a pod onto a cordoned
// node (the scheduler's NodeUnschedulable filter: a toleration of the
// node.kubernetes.io/unschedulable NoSchedule taint).
func toleratesCordon(tolerations []corev1.Toleration) bool {
	cordon := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	for i := range tolerations {
		// Comparison operators (Gt, Lt) never match this taint, which has
		// no value.
		if tolerations[i].ToleratesTaint(logr.Discard(), cordon, false) {
			return true
		}
	}
	return false
}
