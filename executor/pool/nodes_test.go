package pool

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func node(name, cpu, mem string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}
}

func TestNodesOfATemplate(t *testing.T) {
	// Taints do not rule a node out (admission adds tolerations no template
	// shows); a cordon does.
	gpu := node("c", "64", "256Gi", map[string]string{"pool": "gpu"})
	gpu.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	cordoned := node("d", "8", "16Gi", map[string]string{"pool": "ci"})
	cordoned.Spec.Unschedulable = true
	cordoned.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	cs := fake.NewClientset(node("b", "2", "4Gi", map[string]string{"pool": "ci"}),
		node("a", "8", "16Gi", map[string]string{"pool": "ci", "zone": "z1"}), gpu, cordoned)
	k := &Cluster{Namespace: "ci", CS: cs}
	for name, tc := range map[string]struct {
		spec corev1.PodSpec
		want []string
	}{
		"no selector: every node but the cordoned one, tainted or not": {want: []string{"a", "b", "c"}},
		"a toleration of the cordon lets it in": {
			spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists}}}, want: []string{"a", "b", "c", "d"}},
		"tolerate everything: cordoned nodes too": {
			spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, want: []string{"a", "b", "c", "d"}},
		"a toleration of NoExecute only does not": {
			spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}}, want: []string{"a", "b", "c"}},
		"nodeSelector":        {spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "ci"}}, want: []string{"a", "b"}},
		"nodeSelector of two": {spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "ci", "zone": "z1"}}, want: []string{"a"}},
		"nodeName wins, cordoned or not (no scheduler)": {spec: corev1.PodSpec{NodeName: "d", NodeSelector: map[string]string{"pool": "gpu"}}, want: []string{"d"}},
		"a selector no node matches":                    {spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "none"}}, want: []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := k.Nodes(context.Background(), &corev1.PodTemplateSpec{Spec: tc.spec})
			require.NoError(t, err)
			names := []string{}
			for _, n := range got {
				names = append(names, n.Name)
				assert.NotEmpty(t, n.Allocatable)
			}
			assert.Equal(t, tc.want, names)
		})
	}
}

func TestNodesForbidden(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "", nil)
	})
	_, err := (&Cluster{CS: cs}).Nodes(context.Background(), &corev1.PodTemplateSpec{})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "the API server's error is kept: %v", err)
}

func TestPodRequestsAndFits(t *testing.T) {
	q := resource.MustParse
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q(cpu)}}
	}
	for name, tc := range map[string]struct {
		spec corev1.PodSpec
		cpu  string
	}{
		"containers add up": {spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: req("1")}, {Resources: req("500m")}}}, cpu: "1500m"},
		"an init container larger than the containers": {spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("3")}}, Containers: []corev1.Container{{Resources: req("1")}}}, cpu: "3"},
		"a sidecar adds to both": {spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("1"), RestartPolicy: &always}, {Resources: req("2")}},
			Containers:     []corev1.Container{{Resources: req("1")}}}, cpu: "3"},
		"nothing requested": {spec: corev1.PodSpec{Containers: []corev1.Container{{}}}, cpu: "0"},
	} {
		t.Run(name, func(t *testing.T) {
			got := PodRequests(&tc.spec)
			c := got[corev1.ResourceCPU]
			assert.Equal(t, 0, c.Cmp(q(tc.cpu)), "cpu %s, want %s", c.String(), tc.cpu)
		})
	}
	n := Node{Name: "n", Allocatable: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("4Gi")}}
	assert.True(t, n.Fits(corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("1Gi")}), "equal to allocatable fits")
	assert.False(t, n.Fits(corev1.ResourceList{corev1.ResourceCPU: q("64")}))
	assert.False(t, n.Fits(corev1.ResourceList{corev1.ResourceMemory: q("5Gi")}))
	assert.True(t, n.Fits(corev1.ResourceList{"example.com/gpu": q("1")}), "a resource the node does not report is not judged")
}
