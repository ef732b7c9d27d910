package pool

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PoolSelector selects the Deployments that are warmpod pools: the
// labels every shipped pool manifest puts on its Deployment (not on its
// pods, which are "ci-helper").
const PoolSelector = "app.kubernetes.io/name=warmpod,app.kubernetes.io/component=pool"

// AnnotationDefault, "true" on one pool Deployment read from the cluster,
// makes it the default pool: its template makes the cold pods of images
// that have no pool. Without it the default is the first pool by name.
const AnnotationDefault = "warmpod.dev/default-pool"

// annotationRevision is the Deployment controller's revision number, on
// a Deployment and on each of its ReplicaSets: the ReplicaSet whose
// revision is the Deployment's holds its live template.
const annotationRevision = "deployment.kubernetes.io/revision"

// Pools reads the pools of the namespace from the cluster: the
// Deployments labelled [PoolSelector], with their live templates. A pool
// whose warmpod reads LabelTemplateHash gets the pod-template-hash of the
// Deployment's current ReplicaSet as its Hash, so only pods made from the
// live template are claimed, with no hash written by hand; until the
// controller has made that ReplicaSet (a rollout that has just begun) the
// pool is Pending. A Deployment that is not a usable pool is left out and
// named in Set.Warnings, so one bad Deployment does not stop every job.
// Errors: the API server's (RBAC: list on deployments and replicasets in
// the apps group), and [ErrManifest] when no usable pool is left.
func (k *Kube) Pools(ctx context.Context) (*Set, error) {
	deps, err := k.CS.AppsV1().Deployments(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: PoolSelector})
	if err != nil {
		return nil, fmt.Errorf("list pool Deployments (%s): %w", PoolSelector, err)
	}
	var rsets *appsv1.ReplicaSetList
	set := &Set{}
	items := deps.Items
	sort.SliceStable(items, func(i, j int) bool {
		di, dj := items[i].Annotations[AnnotationDefault] == "true", items[j].Annotations[AnnotationDefault] == "true"
		if di != dj {
			return di
		}
		return items[i].Name < items[j].Name
	})
	for i := range items {
		d := &items[i]
		p, err := fromDeployment(d, true)
		if err != nil {
			set.Warnings = append(set.Warnings, err.Error())
			continue
		}
		if p.HashLabel == LabelTemplateHash {
			if rsets == nil {
				// One list for all pools: a pool's ReplicaSets carry its
				// template's labels, LabelPool among them.
				if rsets, err = k.CS.AppsV1().ReplicaSets(k.Namespace).List(ctx, metav1.ListOptions{
					LabelSelector: labels.Set{LabelState: StateIdle}.String()}); err != nil {
					return nil, fmt.Errorf("list the pools' ReplicaSets: %w", err)
				}
			}
			p.Hash, p.Pending = currentHash(d, rsets.Items), false
			if p.Hash == "" {
				// Nothing is claimable; a cold pod of the live template
				// gets its own hash.
				p.Pending = true
				p.rehash()
			} else {
				p.Template.Labels[LabelTemplateHash] = p.Hash
			}
		}
		set.Pools = append(set.Pools, p)
	}
	if len(set.Pools) == 0 {
		return nil, fmt.Errorf("%w: no usable pool Deployment (labelled %s) in namespace %s %v", ErrManifest, PoolSelector, k.Namespace, set.Warnings)
	}
	return set, nil
}

// currentHash is the pod-template-hash of d's current ReplicaSet: the one
// d owns whose revision is d's, once the controller has seen d's latest
// generation (before that, the newest ReplicaSet may still be of the old
// template). "" when there is none yet.
func currentHash(d *appsv1.Deployment, rsets []appsv1.ReplicaSet) string {
	if d.Status.ObservedGeneration < d.Generation {
		return ""
	}
	rev := d.Annotations[annotationRevision]
	if rev == "" {
		return ""
	}
	for _, rs := range rsets {
		if rs.Annotations[annotationRevision] != rev {
			continue
		}
		for _, o := range rs.OwnerReferences {
			if o.UID == d.UID && o.Controller != nil && *o.Controller {
				return rs.Labels[LabelTemplateHash]
			}
		}
	}
	return ""
}
