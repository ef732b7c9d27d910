// Package offer serves the pool controller's offers (poolapi.OfferPath):
// a driver asks for an idle pod of a pool and gets one name, from an
// informer's cache of the namespace's idle pool pods, instead of listing
// the pool itself. The claim stays the driver's own read and write of
// that pod (executor/pool's claimOffered checks it is claimable itself):
// an offer only spreads claimers over the pool without a list.
//
// Every replica of the controller serves offers, leader or not: two
// replicas may offer the same pod to two claims, and one of them loses
// it with a 409 and asks again. The pick is at random among the pods
// offered to no one within Hold, which keeps that rare.
package offer

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// Hold is how long an offered pod is not offered again: the time a driver
// takes from the offer to its claim's patch answered (milliseconds; a
// second under a burst), with room. A pod whose claim failed (409: the
// cache was behind) is offered again after it, at its new version.
const Hold = 5 * time.Second

// Server offers the idle pool pods of one namespace. Make it with New,
// start its informer with Start, and mount it at poolapi.OfferPath.
type Server struct {
	ns    string
	clock clock.PassiveClock

	factory informers.SharedInformerFactory
	pods    corelisters.PodLister
	synced  cache.InformerSynced
	offers  *prometheus.CounterVec

	mu sync.Mutex
	// held are the pods offered within Hold, with the time of the offer;
	// swept at most once per Hold.
	held  map[types.UID]time.Time
	swept time.Time
}

// Results of an offer, the label of warmpod_pools_offers_total.
const (
	ResultOffered = "offered" // a pod was offered
	ResultNone    = "none"    // no pod of the pool is claimable now
	ResultRefused = "refused" // a malformed query, another namespace, a cache not synced
)

// New makes a Server for namespace ns over cs. reg, when set, gets the
// counter warmpod_pools_offers_total{result}. clk is the clock of Hold and
// of which pods have settled (clock.RealClock{} outside tests). Errors:
// the counter's registration, the informer handler's.
func New(cs kubernetes.Interface, ns string, clk clock.PassiveClock, reg prometheus.Registerer) (*Server, error) {
	s := &Server{ns: ns, clock: clk, held: map[types.UID]time.Time{},
		offers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warmpod_pools_offers_total",
			Help: "Offers of an idle pod to a driver's claim (" + poolapi.OfferPath + "), by result: offered, none (no pod claimable), refused (bad query, other namespace, cache not synced).",
		}, []string{"result"})}
	if reg != nil {
		if err := reg.Register(s.offers); err != nil {
			return nil, err
		}
	}
	// Only idle pool pods: a claimed pod leaves the cache with its claim,
	// so the cache is the pools' idle pods, however many jobs run.
	sel := labels.Set{poolapi.LabelState: poolapi.StateIdle}.String() + "," + poolapi.LabelPool
	s.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }),
		informers.WithTransform(slim))
	pi := s.factory.Core().V1().Pods()
	s.pods, s.synced = pi.Lister(), pi.Informer().HasSynced
	if _, err := pi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: s.forget}); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts the informer and waits for its cache until ctx ends; the
// Server answers 503 until then. Errors: the cache did not sync.
func (s *Server) Start(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		s.factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), s.synced) {
		return errors.New("offers: the idle pods' cache did not sync")
	}
	return nil
}

// slim keeps of a pod what an offer reads (metadata, phase, conditions,
// and managedFields of a claimer's resize only): a cache of a thousand
// idle pods stays a few MiB.
func slim(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp,
	}, Status: corev1.PodStatus{Phase: p.Status.Phase, Conditions: p.Status.Conditions}}
	if r := p.Annotations[poolapi.AnnotationRetiring]; r != "" {
		out.Annotations = map[string]string{poolapi.AnnotationRetiring: r}
	}
	for _, m := range p.ManagedFields {
		if m.Manager == pool.ResizeFieldManager && m.Subresource == "resize" {
			out.ManagedFields = append(out.ManagedFields, metav1.ManagedFieldsEntry{Manager: m.Manager, Subresource: m.Subresource})
		}
	}
	return out, nil
}

func (s *Server) forget(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	if p, ok := o.(*corev1.Pod); ok {
		s.mu.Lock()
		delete(s.held, p.UID)
		s.mu.Unlock()
	}
}

// Offer picks an idle pod of pool whose label key is hash: Ready, not
// being deleted, not retiring, not resized by a claimer, not offered
// within Hold; of those, one Ready for a few seconds (pool.Settled: a
// claim's resize is applied at once) when there is one, at random. It is
// held for Hold. false: none.
func (s *Server) Offer(poolName, key, hash string) (poolapi.Offer, bool) {
	sel := labels.SelectorFromSet(labels.Set{poolapi.LabelPool: poolName, poolapi.LabelState: poolapi.StateIdle, key: hash})
	pods, err := s.pods.Pods(s.ns).List(sel)
	if err != nil {
		return poolapi.Offer{}, false
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.swept) >= Hold {
		for uid, at := range s.held {
			if now.Sub(at) >= Hold {
				delete(s.held, uid)
			}
		}
		s.swept = now
	}
	var settled, fresh []*corev1.Pod
	for _, p := range pods {
		if at, ok := s.held[p.UID]; ok && now.Sub(at) < Hold {
			continue
		}
		if !pool.PodReady(p) || p.Annotations[poolapi.AnnotationRetiring] != "" || len(p.ManagedFields) > 0 {
			// slim kept managedFields only of a claimer's resize.
			continue
		}
		if pool.Settled(p, now) {
			settled = append(settled, p)
		} else {
			fresh = append(fresh, p)
		}
	}
	from := settled
	if len(from) == 0 {
		from = fresh
	}
	if len(from) == 0 {
		return poolapi.Offer{}, false
	}
	p := from[rand.IntN(len(from))]
	s.held[p.UID] = now
	return poolapi.Offer{Name: p.Name, UID: string(p.UID)}, true
}

// ServeHTTP answers poolapi.OfferPath (see there for the codes).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.refuse(w, http.StatusMethodNotAllowed, "offers are read with GET")
		return
	}
	q := r.URL.Query()
	ns, name, key, hash := q.Get(poolapi.OfferNamespace), q.Get(poolapi.OfferPool), q.Get(poolapi.OfferLabel), q.Get(poolapi.OfferHash)
	switch {
	case ns != s.ns:
		s.refuse(w, http.StatusNotFound, "this controller offers the pods of namespace "+s.ns+", not "+ns)
		return
	case key != poolapi.LabelConfig && key != poolapi.LabelTemplateHash:
		s.refuse(w, http.StatusBadRequest, "label: want "+poolapi.LabelConfig+" or "+poolapi.LabelTemplateHash)
		return
	case len(validation.IsValidLabelValue(name)) > 0 || name == "" || len(validation.IsValidLabelValue(hash)) > 0 || hash == "":
		s.refuse(w, http.StatusBadRequest, "pool and hash: want label values")
		return
	case !s.synced():
		s.refuse(w, http.StatusServiceUnavailable, "the idle pods' cache has not synced yet")
		return
	}
	o, ok := s.Offer(name, key, hash)
	if !ok {
		s.offers.WithLabelValues(ResultNone).Inc()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.offers.WithLabelValues(ResultOffered).Inc()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(o)
}

func (s *Server) refuse(w http.ResponseWriter, code int, msg string) {
	s.offers.WithLabelValues(ResultRefused).Inc()
	http.Error(w, msg, code)
}
