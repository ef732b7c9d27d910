package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/warmpod/warmpod/internal/kubeclient"
	"github.com/warmpod/warmpod/poolapi"
)

// SidecarGrace is the termination grace period Delete gives a pod with
// sidecars. warmpod's own container ends as soon as its job has (job end
// gave the job's processes their --grace already), but a service is
// often a program that ignores SIGTERM as its container's PID 1 (an HTTP
// server, a database in a test image): with the template's grace period
// the pod would linger as Terminating for it, 30 s by default.
const SidecarGrace = 5 * time.Second

// Cluster is the driver's view of one namespace of a cluster.
type Cluster struct {
	// CS is the clientset (client-go; a fake one in tests).
	CS kubernetes.Interface
	// Config is the REST config exec needs; nil in tests that do not exec.
	Config *rest.Config
	// Namespace holds the pools and the pods the driver creates.
	Namespace string
	// Offers, when set, is asked for a pod to claim before the pool is
	// listed ([Cluster.ClaimWarm]); nil: the claim lists.
	Offers Offers
	// OfferFailed, when set, is told each error of Offers (the claim
	// lists the pool then): the driver says so in the job's log.
	OfferFailed func(error)
}

// ErrNotReady is returned by [Cluster.CreateCold] when the pod did not become
// Ready in time or failed.
var ErrNotReady = errors.New("pod not ready")

// ClaimWarm claims one Ready idle pod of pool p for owner. With Offers
// set it first claims the pods the pool controller offers, one write each
// (claimOffered), and lists only when that gave no pod (no offer, the
// controller down or slow, offers lost to other claims). Listing, it lists the
// pool's idle pods of p's configuration (p.HashLabel = p.Hash; none while
// p is Pending) a page of claimPage at a time, and patches the labels of
// each Ready one of a page in random order (so concurrent runners spread
// out) with its resourceVersion as the precondition, until one patch
// succeeds (409 Conflict: another runner won that pod, try the next);
// the next page only when none of a page could be claimed, and a wider
// first page after claimStale pods of a partial page went to others
// (claimWiden; the page stays that wide for the claim's later passes).
// When none is claimable it lists again every 100 ms until wait has
// passed. It returns nil when no pod could be claimed within wait (wait
// 0: one pass). wait bounds the passes, not one pass: a pass that began
// within wait is finished, however slow the API server is, so a claim may
// take longer than wait (bench/claims.md). Errors are the API server's,
// other than conflicts, pods gone meanwhile and a continue token expired
// up to three times in a pass (the fourth is returned). A pod
// the pool controller marked poolapi.AnnotationRetiring is never claimed; the claim
// records poolapi.AnnotationClaimedAt and poolapi.AnnotationClaimWait for it.
//
// fit, when set, is the cpu and memory the job's pod must have: each pod
// is resized in place (pods/resize, the pod's resourceVersion as the
// precondition) before its claim, and the returned Pod's Resizing says
// what to wait for ([Cluster.AwaitResize]). The resize goes first
// because the kubelet answers the first change of an idle pod at once,
// but a second change that follows within a few milliseconds waits for
// its next relist of the node's containers, up to a second
// (bench/resize-breakdown.md). A resize the API server refuses (the
// QoS class would change, no pods/resize) is an error wrapping
// [ErrResizeUnsupported] (so is one RBAC, a ResourceQuota or an admission
// webhook forbids), and nothing was claimed. A claim with fit
// tries the pods of a page that have been Ready for a few seconds first
// (resizeSettle).
//
// A pod a claimer has resized (its managedFields hold an entry of
// ResizeFieldManager for pods/resize) is never claimed: that claimer's
// claim is in flight, and the pod no longer has the pool's resources.
// That is what keeps a claim without fit from taking a pod resized for
// another job. A resized pod a claimer gives up on is deleted, so its
// ReplicaSet makes a new one, unless the claimer resized it back to the
// pool's resources (an infeasible resize, [Cluster.AwaitResize]): such a
// pod is claimed again.
func (k *Cluster) ClaimWarm(ctx context.Context, p Pool, owner poolapi.Owner, wait time.Duration, fit *corev1.ResourceRequirements) (*poolapi.Pod, error) {
	if p.Pending {
		return nil, nil
	}
	began := time.Now()
	if k.Offers != nil {
		pod, err := k.claimOffered(ctx, p, owner, began, fit)
		if !errors.Is(err, errOffers) {
			return pod, err
		}
	}
	deadline := began.Add(wait)
	sel := labels.Set{poolapi.LabelPool: p.Name, poolapi.LabelState: poolapi.StateIdle, p.hashKey(): p.Hash}.String()
	page := int64(claimPage)
	for {
		cont, restarts := "", 0
		for {
			list, err := k.CS.CoreV1().Pods(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel, Limit: page, Continue: cont})
			if apierrors.IsResourceExpired(err) && cont != "" && restarts < 3 {
				// The continue token outlived the API server's
				// compaction: start over from the first page.
				cont, restarts = "", restarts+1
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list pods %s: %w", sel, err)
			}
			var ready []corev1.Pod
			for _, pod := range list.Items {
				if p.claimable(&pod) {
					ready = append(ready, pod)
				}
			}
			rand.Shuffle(len(ready), func(i, j int) { ready[i], ready[j] = ready[j], ready[i] })
			if fit != nil {
				settledFirst(ready, time.Now())
			}
			// A page that is not the whole pool is shared with every
			// claimer that read it: once claimStale of its pods were won
			// by others, the rest likely were too.
			partial := cont != "" || list.Continue != ""
			lost := 0
			for i := range ready {
				if partial && lost == claimStale {
					break
				}
				pod, resizing, err := k.claimFit(ctx, &ready[i], p.Container, owner, time.Since(began), fit)
				if err == nil {
					return claimedPod(pod, p, resizing), nil
				}
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					lost++
					continue
				}
				if errors.Is(err, ErrResizeUnsupported) {
					return nil, err
				}
				return nil, fmt.Errorf("claim pod %s: %w", ready[i].Name, err)
			}
			if partial && lost == claimStale {
				// Many claimers at once: read a wider page, fresh, so
				// they spread over more of the pool. Bounded: a page as
				// large as the pool is not partial.
				page, cont = page*claimWiden, ""
				continue
			}
			if cont = list.Continue; cont == "" {
				break
			}
		}
		if !time.Now().Before(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// claimable tells whether a claim of p may take pod: an idle pod of p's
// pool and configuration (the labels the list selects on, checked again
// for an offered pod), Ready and not being deleted (PodReady), not marked
// retiring by the controller, and not resized for another claim (unless
// resized back to p's resources, see ClaimWarm).
func (p Pool) claimable(pod *corev1.Pod) bool {
	return pod.Labels[poolapi.LabelPool] == p.Name && pod.Labels[poolapi.LabelState] == poolapi.StateIdle &&
		pod.Labels[p.hashKey()] == p.Hash && PodReady(pod) && pod.Annotations[poolapi.AnnotationRetiring] == "" &&
		(!resizedByClaimer(pod) || p.hasOwnResources(pod))
}

// claimPage is how many idle pods of the pool one list of ClaimWarm
// returns. A claim needs one Ready pod, not the pool: a list of the
// whole pool costs the API server and the driver in proportion to the
// pool's size, once per claim, and at a thousand idle pods and a hundred
// claims a second that cost is the claim's latency (bench/claims.md). A
// page of 50 leaves a few concurrent claimers enough pods to spread over
// at random (a claimed pod leaves the selection, so the next claimer's
// first page holds other pods; many at once are claimStale's), and the
// next page is read only when a page holds no claimable pod (not Ready
// yet, retiring, resized by another claimer).
const claimPage = 50

// claimStale and claimWiden are how a claim meets many claimers at once
// (a thousand jobs in ten seconds): they all read the same first page,
// so all but one of them lose each of its pods. After claimStale lost
// pods of a partial page, the claim reads a page claimWiden times wider
// from the start, instead of patching the rest of a page that is gone;
// the widening spreads the claimers as the whole-pool list did, and costs
// what it cost only to the claims that met contention (bench/claims.md).
const (
	claimStale = 2
	claimWiden = 4
)

// resizeSettle is how long a pod must have been Ready for a resize of it
// to be applied at once: the kubelet applies a resize of a pod that
// became Ready within about the last two seconds only after its next
// relists, about 2 s later, where one Ready for longer has it in its
// cgroup within ~50 ms (bench/resize-timeline.md). The Ready condition's
// time has whole seconds, hence one more.
const resizeSettle = 3 * time.Second

// Settled tells whether pod has been Ready for resizeSettle at now: a
// resize of it is applied at once. A claim with a fit tries such pods
// first.
func Settled(pod *corev1.Pod, now time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return !c.LastTransitionTime.IsZero() && now.Sub(c.LastTransitionTime.Time) >= resizeSettle
		}
	}
	return false
}

// settledFirst moves the pods that have been Ready for resizeSettle at
// now (Settled) ahead of the others, keeping the order within each group.
func settledFirst(pods []corev1.Pod, now time.Time) {
	slices.SortStableFunc(pods, func(a, b corev1.Pod) int {
		switch sa, sb := Settled(&a, now), Settled(&b, now); {
		case sa && !sb:
			return -1
		case sb && !sa:
			return 1
		}
		return 0
	})
}

// claimTries bounds how often claimFit claims a pod it has resized: each
// conflict is the kubelet's status write (the resize's progress), which
// claimFit reads and claims again after.
const claimTries = 10

// ResizeFieldManager is the field manager of a claimer's in-place resize:
// the entry it leaves in the pod's managedFields marks the pod as resized
// for a claim (resizedByClaimer). Nothing else of the pod says so: the
// pods/resize subresource changes resources only.
const ResizeFieldManager = "warmpod-resize"

// resizedByClaimer tells whether pod's resources were changed by a
// claimer's resize (ResizeFieldManager), rather than being the pool's.
// Another change of the spec (scheduling gates lifted, an ephemeral
// container) does not count: such a pod is still the pool's to claim.
func resizedByClaimer(pod *corev1.Pod) bool {
	for _, m := range pod.ManagedFields {
		if m.Manager == ResizeFieldManager && m.Subresource == "resize" {
			return true
		}
	}
	return false
}

// claimFit claims listed for owner, resized to fit first when fit is set
// (see [Cluster.ClaimWarm]). A conflict or a pod gone is returned as the
// API server's error: the caller tries the next pod.
func (k *Cluster) claimFit(ctx context.Context, listed *corev1.Pod, container string, owner poolapi.Owner, waited time.Duration, fit *corev1.ResourceRequirements) (*corev1.Pod, *Resizing, error) {
	if fit == nil {
		pod, err := k.claim(ctx, listed, owner, waited)
		return pod, nil, err
	}
	r := &Resizing{Want: resizable(*fit), Before: listed, Sent: time.Now()}
	pod, err := k.patchResize(ctx, listed.Name, container, r.Want, listed.ResourceVersion)
	switch {
	case err == nil:
	case apierrors.IsConflict(err) || errors.Is(err, ErrResizeUnsupported) || errors.Is(err, errPodGone):
		// Refused as a whole: the pod is as it was.
		return nil, nil, err
	default:
		// A timeout or a cut connection: the resize may have been
		// applied all the same.
		k.abandon(ctx, listed.Name, listed.UID)
		return nil, nil, err
	}
	for try := 1; ; try++ {
		claimed, err := k.claim(ctx, pod, owner, waited)
		if err == nil {
			return claimed, r, nil
		}
		if !apierrors.IsConflict(err) || try == claimTries {
			k.abandon(ctx, pod.Name, pod.UID)
			return nil, nil, err
		}
		cur, gerr := k.CS.CoreV1().Pods(k.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case gerr != nil:
			k.abandon(ctx, pod.Name, pod.UID)
			return nil, nil, gerr
		case cur.UID != pod.UID || cur.Labels[poolapi.LabelState] != poolapi.StateIdle:
			// Gone, or claimed: not this claimer's pod any more.
			return nil, nil, err
		case cur.DeletionTimestamp != nil || cur.Annotations[poolapi.AnnotationRetiring] != "":
			k.abandon(ctx, pod.Name, pod.UID)
			return nil, nil, err
		}
		pod = cur
	}
}

// abandon deletes pod name (uid) when it is an idle pod a claimer resized
// (resizedByClaimer): no claim would take it, and its ReplicaSet makes a
// new one. The delete carries the resourceVersion it was read at, so a
// pod claimed meanwhile is never deleted (409: read again, up to
// abandonTries). It runs even when ctx has ended, bounded by
// abandonTimeout; a failure leaves the pod to its idle deadline.
func (k *Cluster) abandon(ctx context.Context, name string, uid types.UID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	for range abandonTries {
		cur, err := k.CS.CoreV1().Pods(k.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || cur.UID != uid || cur.Labels[poolapi.LabelState] != poolapi.StateIdle || cur.DeletionTimestamp != nil || !resizedByClaimer(cur) {
			return
		}
		rv := cur.ResourceVersion
		err = k.CS.CoreV1().Pods(k.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		if !apierrors.IsConflict(err) {
			return
		}
	}
}

// abandonTries and abandonTimeout bound abandon.
const (
	abandonTries   = 5
	abandonTimeout = 10 * time.Second
)

// claim patches pod's labels to claimed-for-owner, on the condition that
// the pod is still at the resourceVersion we saw (a JSON merge patch that
// carries metadata.resourceVersion is refused with 409 when it differs).
// waited is how long the driver has looked so far (poolapi.AnnotationClaimWait).
func (k *Cluster) claim(ctx context.Context, pod *corev1.Pod, owner poolapi.Owner, waited time.Duration) (*corev1.Pod, error) {
	ann := poolapi.BusyDisruption()
	ann[poolapi.AnnotationClaimWait] = strconv.FormatInt(waited.Milliseconds(), 10)
	return k.claimAnnotated(ctx, pod, owner, ann)
}

// claimAs is claim for a pod that was not Ready (ClaimStarting): a cold
// start of reason why, which carries the claim wait.
func (k *Cluster) claimAs(ctx context.Context, pod *corev1.Pod, owner poolapi.Owner, why Cold) (*corev1.Pod, error) {
	return k.claimAnnotated(ctx, pod, owner, why.annotations())
}

// claimAnnotated is the claim's patch, with ann and the claim's time
// (poolapi.AnnotationClaimedAt).
func (k *Cluster) claimAnnotated(ctx context.Context, pod *corev1.Pod, owner poolapi.Owner, ann map[string]string) (*corev1.Pod, error) {
	l := owner.Labels()
	l[poolapi.LabelState] = poolapi.StateClaimed
	ann[poolapi.AnnotationClaimedAt] = time.Now().UTC().Format(time.RFC3339Nano)
	meta := map[string]any{
		"resourceVersion": pod.ResourceVersion,
		"labels":          l,
		"annotations":     ann,
	}
	if MadeByController(pod) {
		// The pool controller made this pod above the pool's floor, owned
		// by the pool's Deployment (decision 0010). A claimed pod must
		// outlive its pool: the garbage collector deletes a Deployment's
		// dependents with it (a found pool removed, a helm uninstall).
		// A ReplicaSet releases its own pods when the claim relabels
		// them; nobody releases these, so the claim does.
		meta["ownerReferences"] = nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta})
	return k.CS.CoreV1().Pods(k.Namespace).Patch(ctx, pod.Name, types.MergePatchType, b, metav1.PatchOptions{})
}

// MadeByController tells whether pod's controller reference is a
// Deployment: a pod the pool controller made above its pool's floor, which
// no ReplicaSet counts (decision 0010). A ReplicaSet's pods name their
// ReplicaSet.
func MadeByController(pod *corev1.Pod) bool {
	c := metav1.GetControllerOf(pod)
	return c != nil && c.Kind == "Deployment" && c.APIVersion == "apps/v1"
}

// StateOf is what pod is to the drivers and the pool controller
// ([poolapi.StateOf] on its metadata and status).
func StateOf(pod *corev1.Pod) poolapi.PodState {
	return poolapi.StateOf(poolapi.PodFacts{
		Labels: pod.Labels, Annotations: pod.Annotations,
		Terminating: pod.DeletionTimestamp != nil,
		Finished:    pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
		Scheduled:   pod.Spec.NodeName != "",
		Ready:       PodReady(pod),
	})
}

// PodReady tells whether the pod is Running, Ready and not being deleted.
func PodReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// CreateCold creates a pod for owner from p's template, labelled claimed
// from the start (no ReplicaSet selects it) and annotated with why (the
// pool controller counts it as demand on p, see [Cold]), and waits up to
// timeout for it to be Ready. A pod that fails or is not Ready in time is
// deleted and [ErrNotReady] returned.
func (k *Cluster) CreateCold(ctx context.Context, p Pool, owner poolapi.Owner, why Cold, timeout time.Duration) (poolapi.Pod, error) {
	t := p.Template.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	pod.GenerateName = p.Name + "-cold-"
	pod.Name = ""
	pod.Namespace = k.Namespace
	pod.Labels[poolapi.LabelState] = poolapi.StateClaimed
	for k, v := range owner.Labels() {
		pod.Labels[k] = v
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for k, v := range why.annotations() {
		pod.Annotations[k] = v
	}
	if pod.Spec.RestartPolicy == "" || pod.Spec.RestartPolicy == corev1.RestartPolicyAlways {
		// A Deployment forces Always; a pod of our own must never be
		// restarted after warmpod drained it.
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	created, err := k.CS.CoreV1().Pods(k.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return poolapi.Pod{}, fmt.Errorf("create pod: %w", err)
	}
	out := poolapi.Pod{Name: created.Name, Namespace: created.Namespace, UID: string(created.UID), Pool: p.Name,
		Container: p.Container, Bin: p.Bin, Hash: p.Hash, Sidecars: len(p.Sidecars())}
	if err := k.waitReady(ctx, created, timeout); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = k.Delete(dctx, out)
		return poolapi.Pod{}, err
	}
	return out, nil
}

func (k *Cluster) waitReady(ctx context.Context, pod *corev1.Pod, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := k.CS.CoreV1().Pods(k.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + pod.Name,
		ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		return fmt.Errorf("watch pod %s: %w", pod.Name, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: pod %s after %s", ErrNotReady, pod.Name, timeout)
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The API server ends watches now and then: look, and
				// watch again from where we are.
				cur, err := k.CS.CoreV1().Pods(k.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("%w: pod %s: %v", ErrNotReady, pod.Name, err)
				}
				if PodReady(cur) {
					return nil
				}
				return k.waitReady(ctx, cur, time.Until(deadlineOf(ctx)))
			}
			if ev.Type == watch.Deleted {
				return fmt.Errorf("%w: pod %s was deleted", ErrNotReady, pod.Name)
			}
			cur, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if PodReady(cur) {
				return nil
			}
			if cur.Status.Phase == corev1.PodFailed || cur.Status.Phase == corev1.PodSucceeded {
				return fmt.Errorf("%w: pod %s is %s: %s", ErrNotReady, pod.Name, cur.Status.Phase, cur.Status.Message)
			}
			if why := stuck(cur); why != "" {
				return fmt.Errorf("%w: pod %s: %s", ErrNotReady, pod.Name, why)
			}
		}
	}
}

// stuckReasons are container waiting reasons that do not clear by
// themselves: waiting out the ready timeout would only delay the failure
// (a job image that does not exist, a typo, a missing Secret).
var stuckReasons = map[string]bool{
	"ErrImageNeverPull": true, "InvalidImageName": true, "ImagePullBackOff": true,
	"ErrImagePull": true, "CreateContainerConfigError": true, "CreateContainerError": true,
	// A pool pod's (restartPolicy Always) container that keeps exiting: a
	// cold pod (restartPolicy Never) fails instead.
	"CrashLoopBackOff": true,
}

// stuck names the first container (init containers included) that waits
// for a reason in stuckReasons, with the kubelet's message; "" if none.
func stuck(pod *corev1.Pod) string {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, c := range list {
			if w := c.State.Waiting; w != nil && stuckReasons[w.Reason] {
				return fmt.Sprintf("container %s (image %s): %s: %s", c.Name, c.Image, w.Reason, w.Message)
			}
		}
	}
	return ""
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// Delete deletes the pod, on the condition that it is still the pod we
// had (uid precondition: a newer pod with the same name is never touched),
// with SidecarGrace when it has sidecars, in the background (owned Secrets and ConfigMaps go with it). A pod
// already gone is no error.
func (k *Cluster) Delete(ctx context.Context, p poolapi.Pod) error {
	uid := types.UID(p.UID)
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &bg}
	if p.Sidecars > 0 {
		g := int64(SidecarGrace / time.Second)
		opts.GracePeriodSeconds = &g
	}
	err := k.CS.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// PodsOfJob lists the pods labelled for owner (claimed or cold).
func (k *Cluster) PodsOfJob(ctx context.Context, owner poolapi.Owner) ([]poolapi.Pod, error) {
	list, err := k.CS.CoreV1().Pods(k.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set(owner.Labels()).String()})
	if err != nil {
		return nil, err
	}
	var out []poolapi.Pod
	for _, p := range list.Items {
		out = append(out, poolapi.Pod{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID), Pool: p.Labels[poolapi.LabelPool], Sidecars: max(0, len(p.Spec.Containers)-1)})
	}
	return out, nil
}

// Connect opens the connection to the API server ahead of the first call
// that needs it (GET /version, which every authenticated account may
// read): TLS handshake and client set-up are then done. The job's
// multiplexer calls it while it waits for its pod. Errors: the API
// server's.
func (k *Cluster) Connect(ctx context.Context) error {
	_, err := k.CS.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	return err
}

// Exec runs argv in the pod's warmpod container as `kubectl exec` does:
// a WebSocket stream (the v5 channel protocol) with a fallback to SPDY
// when the API server or a proxy refuses the upgrade. stdin may be nil.
// It returns the command's exit code, or an error when the stream failed
// (then the command's fate is unknown).
func (k *Cluster) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return k.exec(ctx, p, argv, stdin, stdout, stderr, false)
}

// ExecBulk is Exec for a call whose stdin is many bytes (the pieces of
// the GitHub hook's _work): SPDY first, WebSocket when the upgrade is
// refused. An API server of 1.30 or later turns a WebSocket exec into
// SPDY towards the kubelet, re-framing every byte; SPDY is passed
// through as it is, and took 25 % less time for 200 MiB in one stream
// in bench/github-kube.md (1,830 against 2,453 ms). The small calls stay
// on WebSocket, the protocol Kubernetes keeps (SPDY is deprecated, and
// some proxies refuse it: then this falls back). Errors: as Exec's.
func (k *Cluster) ExecBulk(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return k.exec(ctx, p, argv, stdin, stdout, stderr, true)
}

func (k *Cluster) exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer, spdyFirst bool) (int, error) {
	req := k.CS.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: p.Container, Command: argv,
		Stdin: stdin != nil, Stdout: stdout != nil, Stderr: stderr != nil,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(k.Config, http.MethodGet, req.URL().String())
	if err != nil {
		return -1, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(k.Config, http.MethodPost, req.URL())
	if err != nil {
		return -1, err
	}
	// Either falls back to the other only when its upgrade was refused:
	// nothing of stdin has been read then.
	first, second := ws, spdy
	if spdyFirst {
		first, second = spdy, ws
	}
	ex, err := remotecommand.NewFallbackExecutor(first, second, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return -1, err
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// Connect returns a Cluster for namespace (empty: the kubeconfig context's,
// or the service account's) from kubeconfig (empty: $KUBECONFIG,
// ~/.kube/config, or in-cluster); userAgent names the caller in the API
// server's logs. Errors: as [kubeclient.New].
func Connect(kubeconfig, namespace, userAgent string) (*Cluster, error) {
	c, err := kubeclient.New(kubeconfig, namespace, userAgent)
	if err != nil {
		return nil, err
	}
	return &Cluster{CS: c.CS, Config: c.Config, Namespace: c.Namespace}, nil
}
