package pool

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/warmpod/warmpod/poolapi"
)

// Pools reads the pools of the namespace from the cluster: the
// Deployments labelled [poolapi.PoolSelector], with their live templates. A pool
// whose warmpod reads poolapi.LabelTemplateHash gets the pod-template-hash of the
// Deployment's current ReplicaSet as its Hash, so only pods made from the
// live template are claimed, with no hash written by hand; until the
// controller has made that ReplicaSet (a rollout that has just begun) the
// pool is Pending. A pool whose warmpod reads poolapi.LabelConfig is Pending too
// (with a warning): no hash computed here can tell its pods apart. A
// Deployment that is not a usable pool is left out and
// named in Set.Warnings, so one bad Deployment does not stop every job.
// Errors: the API server's (RBAC: list on deployments and replicasets in
// the apps group), and [ErrManifest] when no usable pool is left.
func (k *Cluster) Pools(ctx context.Context) (*Set, error) {
	// The ReplicaSets are listed beside the Deployments, not after them:
	// a prepare waits for one round trip, not two. Their answer (or
	// error) is used only when a pool reads poolapi.LabelTemplateHash.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type rsList struct {
		list *appsv1.ReplicaSetList
		err  error
	}
	rsc := make(chan rsList, 1)
	go func() {
		// One list for all pools: a pool's ReplicaSets carry its
		// template's labels, poolapi.LabelPool among them.
		l, err := k.CS.AppsV1().ReplicaSets(k.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.Set{poolapi.LabelState: poolapi.StateIdle}.String()})
		rsc <- rsList{l, err}
	}()
	deps, err := k.CS.AppsV1().Deployments(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: poolapi.PoolSelector})
	if err != nil {
		return nil, fmt.Errorf("list pool Deployments (%s): %w", poolapi.PoolSelector, err)
	}
	var rsets *appsv1.ReplicaSetList
	set := &Set{}
	items := deps.Items
	sort.SliceStable(items, func(i, j int) bool {
		di, dj := items[i].Annotations[poolapi.AnnotationDefaultPool] == "true", items[j].Annotations[poolapi.AnnotationDefaultPool] == "true"
		if di != dj {
			return di
		}
		// A pool the controller made for an image (--discover-pools)
		// is never the default: its name ("auto-…") would sort first
		// when no pool is marked default.
		fi, fj := items[i].Annotations[poolapi.AnnotationFoundFrom] != "", items[j].Annotations[poolapi.AnnotationFoundFrom] != ""
		if fi != fj {
			return fj
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
		p.PodStart = controllerPodStart(d)
		if p.HashLabel == poolapi.LabelConfig {
			// A hash computed from the live template (with the API
			// server's defaults filled in) never equals one computed from
			// a file, and a label pasted by hand may name an older
			// template too: no pod of this pool is safe to claim.
			p.Pending = true
			set.Warnings = append(set.Warnings, fmt.Sprintf("Deployment %q: its warmpod reads %s (or no WARMPOD_CONFIG_HASH): a pool read from the cluster tells today's pods by %s; set WARMPOD_CONFIG_HASH from metadata.labels['%s'] (deploy/pool.yaml). Its jobs get cold pods until then", d.Name, poolapi.LabelConfig, poolapi.LabelTemplateHash, poolapi.LabelTemplateHash))
		}
		if p.HashLabel == poolapi.LabelTemplateHash {
			if rsets == nil {
				r := <-rsc
				if r.err != nil {
					return nil, fmt.Errorf("list the pools' ReplicaSets: %w", r.err)
				}
				rsets = r.list
			}
			if h := CurrentHash(d, rsets.Items); h != "" {
				p.Hash = h
				p.Template.Labels[poolapi.LabelTemplateHash] = h
			} else {
				// Nothing is claimable; a cold pod of the live template
				// gets its own hash.
				p.Pending = true
				p.rehash()
			}
		}
		set.Pools = append(set.Pools, p)
	}
	if len(set.Pools) == 0 {
		return nil, fmt.Errorf("%w: no usable pool Deployment (labelled %s) in namespace %s %v", ErrManifest, poolapi.PoolSelector, k.Namespace, set.Warnings)
	}
	return set, nil
}

// CurrentHash is the pod-template-hash of d's current ReplicaSet: the one
// d controls whose pod template is d's live template, apart from the
// pod-template-hash label (how the Deployment controller itself finds its
// new ReplicaSet). Comparing templates, not the revision annotation, keeps
// a paused Deployment's or a half-seen edit's old pods from being claimed:
// the controller updates a paused Deployment's revision bookkeeping but
// makes no ReplicaSet for its new template. "" when there is none yet.
func CurrentHash(d *appsv1.Deployment, rsets []appsv1.ReplicaSet) string {
	for _, rs := range rsets {
		owned := false
		for _, o := range rs.OwnerReferences {
			owned = owned || o.UID == d.UID && o.Controller != nil && *o.Controller
		}
		if !owned || rs.Labels[poolapi.LabelTemplateHash] == "" {
			continue
		}
		t := rs.Spec.Template.DeepCopy()
		delete(t.Labels, poolapi.LabelTemplateHash)
		if apiequality.Semantic.DeepEqual(*t, d.Spec.Template) {
			return rs.Labels[poolapi.LabelTemplateHash]
		}
	}
	return ""
}

// controllerPodStart is the pod start the pool controller measured for
// d's pods and wrote in its sizing status (poolapi.AnnotationSizing,
// field podStartSeconds, seconds); 0 when there is none or it does not
// parse: advice, never a reason to fail.
func controllerPodStart(d *appsv1.Deployment) time.Duration {
	s := poolapi.ReadSizingStatus(d.Annotations).PodStart
	if !(s > 0 && s < 3600) {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}
