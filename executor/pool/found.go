package pool

import (
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmpod/warmpod/poolapi"
)

// JobImage is the image of a pod's job container, the one that runs
// warmpod: for a cold pod made from the default pool's template
// (poolapi.ColdNoPool), the image the job asked for and no pool runs.
// Empty for a pod without containers.
func JobImage(spec *corev1.PodSpec) string {
	if c := warmpodContainer(spec); c != nil {
		return c.Image
	}
	return ""
}

// FromBase makes the Deployment of a new pool named name for image from
// base, the default pool's Deployment: base's pod template with image on
// its job container, the pool label and the selector renamed, the
// configuration hash recomputed (poolapi.LabelConfig pools), replicas 0
// (the pool controller sizes it), base's annotations but the controller's
// own and the default mark, with annotations added, and owned by base
// without blocking its deletion, so that removing the default pool (helm
// uninstall) removes the pools made from it. Errors: base is not a pool
// (the reason names what is missing).
func FromBase(base *appsv1.Deployment, name, image string, annotations map[string]string) (*appsv1.Deployment, error) {
	p, err := fromDeployment(base, true)
	if err != nil {
		return nil, err
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: base.Namespace,
			Labels:      maps.Clone(base.Labels),
			Annotations: maps.Clone(base.Annotations),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: base.Name, UID: base.UID,
				BlockOwnerDeletion: new(false)}},
		},
		Spec: *base.Spec.DeepCopy(),
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	for _, k := range []string{poolapi.AnnotationDefaultPool, poolapi.AnnotationSizing, poolapi.AnnotationProfile,
		"deployment.kubernetes.io/revision", "kubectl.kubernetes.io/last-applied-configuration", "meta.helm.sh/release-name", "meta.helm.sh/release-namespace"} {
		delete(d.Annotations, k)
	}
	maps.Copy(d.Annotations, annotations)
	if d.Labels != nil {
		// Helm's: the release does not own this pool.
		delete(d.Labels, "app.kubernetes.io/managed-by")
	}
	d.Spec.Replicas = new(int32(0))
	d.Spec.Selector = d.Spec.Selector.DeepCopy()
	d.Spec.Selector.MatchLabels[poolapi.LabelPool] = name
	t := &d.Spec.Template
	t.Labels[poolapi.LabelPool] = name
	c := warmpodContainer(&t.Spec)
	if c == nil {
		return nil, fmt.Errorf("%w: Deployment %q: no container runs warmpod", ErrManifest, base.Name)
	}
	c.Image = image
	if p.HashLabel == poolapi.LabelConfig {
		t.Labels[poolapi.LabelConfig] = Hash(t)
	}
	return d, nil
}
