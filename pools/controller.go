// Package pools is warmpod-pools, the pool controller: it sizes the warm
// pools (Deployments labelled as pools, poolapi.PoolSelector) of one
// namespace by their warmpod.dev/policy annotation (package sizing) and the
// demand it sees on their pods, within one idle budget for the namespace.
//
// It follows Kubernetes' sample-controller: shared informers on the pools'
// Deployments and pods (no polling of the API server), one work queue whose
// single key is the namespace (the budget makes every pool's size depend on
// every other's), a rate-limited retry when the API server fails, and Events
// with reasons on each pool. It writes only the pools' replicas (through the
// deployments/scale subresource: the floor a person wrote), the pods above
// that floor (it creates and deletes them, own.go, decision 0010), their
// poolapi.AnnotationSizing, and the retiring mark of the idle pods it scales
// away. Without it pools keep their floor and the pods they have: nothing it
// does is needed for a job to run.
package pools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// Config is the controller's configuration (warmpod-pools' flags).
type Config struct {
	// Namespace holds the pools the controller sizes.
	Namespace string
	// Budget caps the namespace's idle pods together (sizing.Share).
	Budget sizing.Budget
	// Resync is the longest time between two decisions without any event:
	// what bounds the lag behind a period's start or an idle_time's end.
	// Decisions read the informers' cache, never the API server. Default
	// DefaultResync.
	Resync time.Duration
	// Batch is how long a pod or Deployment event waits for others before
	// the decision it triggers, so a burst of claims is one decision and one
	// write per pool, not one per claim. Default DefaultBatch.
	Batch time.Duration
	// RetireGrace is how long a pod marked retiring may stay before the
	// mark is taken off again (the ReplicaSet removed another pod instead,
	// or the pool grew meanwhile). Default DefaultRetireGrace.
	RetireGrace time.Duration
	// Discovery finds pools from the jobs (discover.go); the zero value is
	// off, sizing.DefaultDiscovery what --discover-pools turns on.
	Discovery sizing.Discovery
}

// Defaults of Config.
const (
	DefaultResync      = 10 * time.Second
	DefaultBatch       = 200 * time.Millisecond
	DefaultRetireGrace = 30 * time.Second
)

// Event reasons of the controller, on a pool's Deployment.
const (
	// EventInvalidPolicy: the pool's warmpod.dev/policy does not parse; the
	// message names the field. The pool keeps its size.
	EventInvalidPolicy = "InvalidPolicy"
	// EventPolicyValid: a pool whose policy was invalid has a valid one
	// again and kept its size (a change of size says so in its own Event).
	EventPolicyValid = "PolicyValid"
	// EventScaleFailed: a write to change the pool's size failed; it is
	// retried with back-off.
	EventScaleFailed = "ScaleFailed"
)

// Controller sizes the pools of one namespace. Make it with New and run it
// with Run, only while holding the leader Lease (cmd/warmpod-pools).
type Controller struct {
	cs      kubernetes.Interface
	cfg     Config
	log     *slog.Logger
	clock   clock.WithTicker
	rec     record.EventRecorder
	m       *Metrics
	tracker *Tracker
	started time.Time

	// factory informs on the pool Deployments, podFactory on the pods of
	// pools (labelled warmpod.dev/pool): a namespace's other pods, however
	// many, are never listed or held in memory.
	factory, podFactory informers.SharedInformerFactory
	deps                appslisters.DeploymentLister
	pods                corelisters.PodLister
	rsets               appslisters.ReplicaSetLister
	depsOK              cache.InformerSynced
	podsOK, rsetsOK     cache.InformerSynced
	queue               workqueue.TypedRateLimitingInterface[string]

	// Owned by the worker goroutine.
	invalid map[string]string // pool → the error reported (reportInvalid)
	// revalidated: pool → the Deployment's resourceVersion on which its
	// "valid again" status was written, while the cache may still show the
	// "invalid" one (reported once, as the invalid text is).
	revalidated map[string]string
	// policies are the pools' parsed policies, parsed again only when the
	// text changes: a YAML parse per pool per decision was most of a
	// decision's CPU at 1,000 pools.
	policies map[string]parsedPolicy
	sized    map[string]bool // pools sized at least once (for metrics clean-up)
	// grown are the scale-ups written that the cache may not show yet;
	// waiting the pods each pool's growth waits for, of the last decision
	// (budget.go).
	grown   map[string]grown
	waiting map[string]int
	// expect are the pods each pool's decisions created that the
	// informer may not show yet, by name, with when (own.go).
	expect map[string]map[string]time.Time
	// refused is each pool's back-off after a refused create (own.go).
	refused map[string]refusal
	// reported is each pool's decided size as its last Event and status
	// said (apply.go): a refill after a claim changes no size.
	reported map[string]int

	// dampers keep each pool's size from flapping (sizing.Damper).
	dampers map[string]*damped
	// finder counts the cold jobs without a pool (Config.Discovery): the
	// informer's handler writes, the worker reads.
	finderMu sync.Mutex
	finder   *sizing.Finder
}

// WallClock is a clock that is not the wall clock: it says where a time
// the API server or a driver wrote (a pod's creation, its claim, its
// Ready transition) falls on it. make bench-pools replays a working day
// compressed 150× on such a clock (e2e/kube's pbDayClock), so the profile
// learns day slots and the pod start is counted in day seconds. The real
// clock needs no Of: it is the wall clock.
type WallClock interface {
	clock.WithTicker
	// Of is wall time t on this clock.
	Of(t time.Time) time.Time
}

// New makes a Controller over cs. rec reports Events on the pools'
// Deployments; clk is the clock (clock.RealClock{} outside tests).
func New(cs kubernetes.Interface, cfg Config, log *slog.Logger, clk clock.WithTicker, rec record.EventRecorder, m *Metrics) *Controller {
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.RetireGrace <= 0 {
		cfg.RetireGrace = DefaultRetireGrace
	}
	// managedFields are most of a real object's bytes and nothing here
	// reads them.
	strip := informers.WithTransform(stripManagedFields)
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(cfg.Namespace), strip,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = poolapi.PoolSelector }))
	pf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(cfg.Namespace), strip,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = poolapi.LabelPool }))
	c := &Controller{cs: cs, cfg: cfg, log: log, clock: clk, rec: rec, m: m, tracker: NewTracker(), factory: f, podFactory: pf,
		invalid: map[string]string{}, revalidated: map[string]string{}, sized: map[string]bool{}, policies: map[string]parsedPolicy{},
		grown: map[string]grown{}, waiting: map[string]int{}, expect: map[string]map[string]time.Time{}, refused: map[string]refusal{}, reported: map[string]int{}, finder: sizing.NewFinder(cfg.Discovery), dampers: map[string]*damped{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 2*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pools", Clock: clk}),
	}
	if w, ok := clk.(WallClock); ok {
		c.tracker.of = w.Of
	}
	return c
}

// Run starts the informers (Start) and sizes pools until ctx ends. Errors:
// Start's.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if err := c.Start(ctx); err != nil {
		return err
	}
	c.log.Info("sizing pools", "namespace", c.cfg.Namespace, "budget", fmt.Sprintf("%+v", c.cfg.Budget))
	c.queue.Add(c.cfg.Namespace)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.next(ctx) {
	}
	c.factory.Shutdown()
	c.podFactory.Shutdown()
	return nil
}

// Start starts the informers and waits for their caches, seeding each
// pool's demand from its status (what the previous leader knew) before the
// pods are seen. Reconcile may be called once it returns (tests call it
// directly instead of Run). Errors: a cache did not sync before ctx ended.
func (c *Controller) Start(ctx context.Context) error {
	c.started = c.clock.Now()
	c.tracker.Began(c.started)
	di := c.factory.Apps().V1().Deployments()
	c.deps, c.depsOK = di.Lister(), di.Informer().HasSynced
	enqueue := func(any) { c.queue.AddAfter(c.cfg.Namespace, c.cfg.Batch) }
	if _, err := di.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}); err != nil {
		return err
	}
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.depsOK) {
		return errors.New("pools: the Deployments' cache did not sync")
	}
	// Seed before the pods are seen: their claims up to the status's time
	// are in the seeded figure already.
	if deps, err := c.deps.Deployments(c.cfg.Namespace).List(poolSelector()); err == nil {
		for _, d := range deps {
			key := d.Namespace + "/" + d.Name
			if s := readStatus(d); !s.DecidedAt.IsZero() {
				if err := c.tracker.Seed(key, s, c.started); err != nil {
					// Advice: the pool's demand is learned from its pods.
					c.log.Warn("the pool's saved status is not seeded", "pool", d.Name, "err", err)
				}
			}
			if text, ok := d.Annotations[poolapi.AnnotationProfile]; ok {
				if err := c.tracker.SeedProfile(key, text, c.clock.Now()); err != nil {
					// Advice, like the status: the pool learns anew.
					c.log.Warn("the pool's saved demand profile does not read; learning anew", "pool", d.Name, "err", err)
				}
			}
		}
	}
	pi := c.podFactory.Core().V1().Pods()
	c.pods, c.podsOK = pi.Lister(), pi.Informer().HasSynced
	if _, err := pi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.podEvent(o) },
		UpdateFunc: func(_, n any) { c.podEvent(n) },
		DeleteFunc: func(o any) {
			if p, ok := podOf(o); ok {
				c.tracker.Forget(p.UID)
			}
			enqueue(o)
		},
	}); err != nil {
		return err
	}
	// The pools' ReplicaSets carry their template's labels, the pool's
	// among them: the pods' selector finds them, and no other.
	ri := c.podFactory.Apps().V1().ReplicaSets()
	c.rsets, c.rsetsOK = ri.Lister(), ri.Informer().HasSynced
	if _, err := ri.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}); err != nil {
		return err
	}
	c.podFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.podsOK, c.rsetsOK) {
		return errors.New("pools: the pods' or ReplicaSets' cache did not sync")
	}
	return nil
}

// stripManagedFields drops an object's managedFields before the informer
// caches it, and a ReplicaSet's pod template (own.go's currentRS reads its
// revision and hash; a template is kilobytes, times a thousand pools).
func stripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	if rs, ok := obj.(*appsv1.ReplicaSet); ok {
		// The Deployment controller copies the Deployment's annotations
		// onto its ReplicaSets, the demand profile (kilobytes) and the
		// status among them: only the revision is read.
		rs.Spec.Template = corev1.PodTemplateSpec{}
		rs.Annotations = map[string]string{revisionAnnotation: rs.Annotations[revisionAnnotation]}
	}
	return obj, nil
}

// podOf is the pod of an informer's delete notification, tombstone or not.
func podOf(o any) (*corev1.Pod, bool) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	p, ok := o.(*corev1.Pod)
	return p, ok
}

// podEvent counts a pod's claim, wait and start time once, and asks for a
// decision.
func (c *Controller) podEvent(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Labels[poolapi.LabelPool] == "" {
		return
	}
	ob := c.tracker.Observe(p, c.clock.Now())
	name := p.Labels[poolapi.LabelPool]
	if ob.NoPool != "" {
		c.noPool(ob.NoPool, ob.NoPoolAt)
	}
	// Claims made before this process started were counted by the one
	// before it: the counters start at zero, the demand history does not.
	if ob.Claim != nil && ob.Claim.At.After(c.started) {
		c.m.claims.WithLabelValues(p.Namespace, name, kind(ob.Claim.Warm)).Inc()
	}
	if ob.Wait >= 0 && !c.tracker.of(p.CreationTimestamp.Time).Before(c.started.Add(-time.Hour)) {
		c.m.claimWait.WithLabelValues(p.Namespace, name, kind(ob.WaitWarm)).Observe(ob.Wait.Seconds())
	}
	c.queue.AddAfter(p.Namespace, c.cfg.Batch)
}

// next takes one key from the queue and decides; false when the queue is
// shut down.
func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.Reconcile(ctx); err != nil {
		c.log.Warn("sizing pools failed; retrying with back-off", "namespace", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	c.queue.AddAfter(key, c.cfg.Resync)
	return true
}

// survey is pool d (key) as its pods (pods) and ReplicaSets (rsets) show it
// under the active period per: the decided fields are left to the caller.
func (c *Controller) survey(d *appsv1.Deployment, key string, pods []*corev1.Pod, rsets []*appsv1.ReplicaSet, per sizing.Period, now time.Time) decided {
	x := decided{d: d, key: key, pods: sortPods(pods), per: per,
		floor: min(max(per.IdleCount, per.Min), per.Max), rs: currentRS(d, rsets)}
	var hash string
	if x.rs != nil {
		hash = x.rs.Labels[poolapi.LabelTemplateHash]
	}
	rsList, own := splitOwn(pods, d, hash)
	x.rsPods, x.own = sortPods(rsList), own
	if len(c.expect[key]) > 0 {
		x.exp = c.expected(key, podNames(pods), now)
	}
	return x
}

// podNames is the set of pods' names.
func podNames(pods []*corev1.Pod) map[string]bool {
	m := make(map[string]bool, len(pods))
	for _, p := range pods {
		m[p.Name] = true
	}
	return m
}

// poolSelector selects the pools' Deployments.
func poolSelector() labels.Selector {
	s, _ := labels.Parse(poolapi.PoolSelector)
	return s
}

// decided is one pool's decision before the budget.
type decided struct {
	d        *appsv1.Deployment
	key      string
	pods     poolPods
	dec      sizing.Decision
	per      sizing.Period
	claims   []time.Time
	lastDem  time.Time
	start    time.Duration
	cpu, mem int64
	perNode  map[string]int // the namespace's pool pods by node (retireOrder)
	// rsPods are the pods of the pool's ReplicaSets, own those the
	// controller made above its floor (own.go), exp those it made that
	// the cache does not show yet; rs is the current ReplicaSet (nil:
	// none yet), floor the idle count the active period writes
	// (max(idle_count, min), within max).
	rsPods poolPods
	own    ownPods
	exp    int
	rs     *appsv1.ReplicaSet
	floor  int
}

// size is the pool's size as the controller set it: its ReplicaSet's
// replicas and the pods it made above them (those the cache does not show
// yet among them).
func (x decided) size() int {
	return replicasOf(x.d) + len(x.own.standing) + x.exp
}

// Reconcile decides every pool of the namespace once, from the cache, and
// writes the sizes that changed. A pool with an invalid policy is reported
// and left alone; the other pools go on. Errors: the API server's, after
// every pool was tried (the caller retries with back-off).
func (c *Controller) Reconcile(ctx context.Context) error {
	now := c.clock.Now()
	deps, err := c.deps.Deployments(c.cfg.Namespace).List(poolSelector())
	if err != nil {
		return err
	}
	slices.SortFunc(deps, func(a, b *appsv1.Deployment) int { return strings.Compare(a.Name, b.Name) })
	// One pass over the pods' cache: a list by selector scans every pool
	// pod of the namespace, so one per pool cost pools × pods per decision.
	all, err := c.pods.Pods(c.cfg.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	byPool := map[string][]*corev1.Pod{}
	for _, p := range all {
		byPool[p.Labels[poolapi.LabelPool]] = append(byPool[p.Labels[poolapi.LabelPool]], p)
	}
	releaseErr := c.releaseClaimed(ctx, deps, byPool)
	var discoverErr error
	if c.cfg.Discovery.After > 0 {
		// A pool made now is sized from the next decision on, once the
		// informer shows it; one removed now is sized no more.
		var removed map[string]bool
		removed, discoverErr = c.discover(ctx, deps, now)
		deps = slices.DeleteFunc(deps, func(d *appsv1.Deployment) bool { return removed[d.Name] })
		if discoverErr != nil {
			// Logged and counted, not retried with back-off: a Role
			// without create or delete would otherwise slow every
			// decision to the back-off's pace. The next decision tries
			// again.
			c.log.Warn("finding pools from the jobs failed", "err", discoverErr)
			discoverErr = nil
		}
	}
	perNode := podsPerNode(all)
	rsets := c.rsetsByOwner(c.cfg.Namespace)
	var ds []decided
	present := map[string]bool{}
	for _, d := range deps {
		key := d.Namespace + "/" + d.Name
		text, has := d.Annotations[poolapi.AnnotationPolicy]
		if !has || d.DeletionTimestamp != nil {
			continue
		}
		present[key] = true
		if err := namedAsItsPods(d); err != nil {
			c.reportInvalid(ctx, d, key, err)
			continue
		}
		pol, err := c.policy(key, text)
		if err != nil {
			c.reportInvalid(ctx, d, key, fmt.Errorf("%s is invalid: %w", poolapi.AnnotationPolicy, err))
			continue
		}
		delete(c.invalid, key)
		c.m.policyValid.WithLabelValues(d.Namespace, d.Name).Set(1)
		_, per := pol.Active(now)
		x := c.survey(d, key, byPool[d.Name], rsets[d.UID], per, now)
		x.perNode = perNode
		obs := x.pods.observation(c.tracker, key, c.started, now)
		obs.Size = c.reportedSize(x)
		x.start = obs.PodStart
		dec := sizing.Decide(pol, obs, now)
		dm := c.dampers[key]
		if dm == nil {
			dm = &damped{}
			c.dampers[key] = dm
		}
		if dm.text != text || dm.period != dec.Period || dec.Reason == sizing.ReasonMax {
			dm.Reset()
			dm.text, dm.period = text, dec.Period
		}
		if n, held := dm.Damp(now, dec.Idle, obs.Size, len(x.pods.idle), append(slices.Clone(obs.Claims), obs.ColdStarts...)); held {
			dec.Idle = n
			dec.Message += fmt.Sprintf("; held at %d: no shrink while a burst outruns the idle pods (panic, until %s after it)", n, sizing.StableWindow)
		}
		x.dec = dec
		x.claims = append(obs.Claims, obs.ColdStarts...)
		x.lastDem = obs.LastClaim
		x.cpu, x.mem = podRequests(&d.Spec.Template)
		ds = append(ds, x)
	}
	c.forgetGone(present)
	demands := make([]sizing.Demand, len(ds))
	for i, x := range ds {
		demands[i] = sizing.Demand{Name: x.d.Name, Desired: x.dec.Idle, Min: x.per.Min, RecentClaims: x.dec.Terms.Demand, Expected: x.dec.Terms.Profile,
			MilliCPU: x.cpu, MemoryBytes: x.mem}
	}
	err = c.applyAll(ctx, ds, sizing.Share(c.cfg.Budget, demands), now)
	if perr := c.saveProfiles(ctx, ds, now); perr != nil {
		// Advice, like the status: saved at a later decision.
		c.log.Warn("saving learned profiles failed", "err", perr)
	}
	return errors.Join(releaseErr, discoverErr, err)
}

// releaseClaimed releases the pods of the controller's that a driver older
// than decision 0010 claimed without dropping their owner, in every pool
// deps holds, before anything else of the decision: a pool about to be
// removed (discover), being deleted, or not sized (no policy, an invalid
// one) would take the running job's pod with it. A release that lands
// before the garbage collector's delete wins it: that delete carries the
// resourceVersion the collector read. Errors: release's, joined.
func (c *Controller) releaseClaimed(ctx context.Context, deps []*appsv1.Deployment, byPool map[string][]*corev1.Pod) error {
	var errs []error
	for _, d := range deps {
		if _, own := splitOwn(byPool[d.Name], d, ""); len(own.claimed) > 0 {
			errs = append(errs, c.release(ctx, own.claimed))
		}
	}
	return errors.Join(errs...)
}

// saveProfiles persists the learned profiles that changed, each
// ProfileSaveEvery after its first change, into the pool's poolapi.AnnotationProfile (a
// merge patch of that one annotation). Errors: the API server's, joined;
// the profile is saved at the next decision.
func (c *Controller) saveProfiles(ctx context.Context, ds []decided, now time.Time) error {
	var errs []error
	for _, x := range ds {
		text, ok := c.tracker.ProfileToSave(x.key, now)
		if !ok {
			continue
		}
		if err := c.patchAnnotation(ctx, x.d, poolapi.AnnotationProfile, text); err != nil {
			c.m.errors.WithLabelValues("profile").Inc()
			errs = append(errs, fmt.Errorf("pool %s: saving its demand profile: %w", x.d.Name, err))
			continue
		}
		c.tracker.ProfileSaved(x.key)
	}
	return errors.Join(errs...)
}

// damped is a pool's Damper, with the policy text and the period of its
// last decision: a change of either resets it.
type damped struct {
	sizing.Damper
	text   string
	period int
}

// parsedPolicy is a policy's text and what it parsed to.
type parsedPolicy struct {
	text string
	pol  sizing.Policy
}

// policy is pool key's policy from its annotation's text, parsed only when
// the text is not the one parsed last. Errors: sizing.Parse's.
func (c *Controller) policy(key, text string) (sizing.Policy, error) {
	if p, ok := c.policies[key]; ok && p.text == text {
		return p.pol, nil
	}
	delete(c.policies, key)
	pol, err := sizing.Parse(text)
	if err == nil {
		c.policies[key] = parsedPolicy{text: text, pol: pol}
	}
	return pol, err
}

// forgetGone drops the history and metrics of pools no longer sized.
func (c *Controller) forgetGone(present map[string]bool) {
	for key := range c.sized {
		if !present[key] {
			delete(c.sized, key)
			delete(c.policies, key)
			delete(c.grown, key)
			delete(c.expect, key)
			delete(c.refused, key)
			delete(c.reported, key)
			delete(c.dampers, key)
			delete(c.revalidated, key)
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			c.tracker.Remove(key)
			c.m.forget(ns, name)
		}
	}
	for key := range c.invalid {
		if !present[key] {
			delete(c.invalid, key)
		}
	}
	for key := range present {
		c.sized[key] = true
	}
}

// namedAsItsPods refuses a pool whose pod template's poolapi.LabelPool is
// not its Deployment's name. The controller finds a pool's pods, claims and
// cold starts by that label under the Deployment's name: the pods it made
// for such a pool would never be seen, so every decision would make them
// again (decision 0010), and its claims would never be counted.
func namedAsItsPods(d *appsv1.Deployment) error {
	if l := d.Spec.Template.Labels[poolapi.LabelPool]; l != d.Name {
		return fmt.Errorf("its pod template's label %s=%q is not the Deployment's name %q: name the Deployment %q or set the label (and the selector's) to %q", poolapi.LabelPool, l, d.Name, l, d.Name)
	}
	return nil
}

// reportInvalid reports a pool the controller cannot size (a policy that
// does not parse, a template not named as its pool), once per error: an
// Event and a log line that name the pool and the field, and the status.
// The pool's size is not touched.
func (c *Controller) reportInvalid(ctx context.Context, d *appsv1.Deployment, key string, err error) {
	c.m.policyValid.WithLabelValues(d.Namespace, d.Name).Set(0)
	if c.invalid[key] == err.Error() {
		return
	}
	c.invalid[key] = err.Error()
	msg := fmt.Sprintf("%v; the pool keeps its %d replicas", err, replicasOf(d))
	c.log.Error("invalid pool policy", "namespace", d.Namespace, "pool", d.Name, "err", err)
	c.rec.Event(d, corev1.EventTypeWarning, EventInvalidPolicy, msg)
	st := Status{Replicas: replicasOf(d), Reason: "invalid", Message: msg, DecidedAt: c.clock.Now().UTC()}
	if err := c.writeStatus(ctx, d, st); err != nil {
		c.log.Warn("writing the pool's status failed", "pool", d.Name, "err", err)
	}
}
