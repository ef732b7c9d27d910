// Package poolapi is the pool contract: every label, annotation and state
// by which warmpod's parts (the drivers, the pool controller, the chart and
// deploy/) tell each other about pool pods, defined once, as ARC keeps its
// in one constants.go; and the Pod and Owner a driver holds for a job. It is a leaf: the standard library only, so that
// whatever reads a pod (a driver's per-call path, the controller, a test)
// can import it without pulling in client-go.
//
// A key added here is added to Keys as well; a test fails otherwise, and
// the chart's tests refuse a warmpod.dev/ key rendered that is not one of
// Keys.
package poolapi

import "time"

// Prefix is the prefix of warmpod's own label and annotation keys.
const Prefix = "warmpod.dev/"

// Label keys of pool pods and pool Deployments.
const (
	// LabelPool names the pool (the Deployment) a pod was made for.
	LabelPool = "warmpod.dev/pool"
	// LabelState is StateIdle on a pod the ReplicaSet owns and a runner
	// may claim, StateClaimed once a runner has it (a claimed pod leaves
	// the ReplicaSet's selector, which selects StateIdle).
	LabelState = "warmpod.dev/state"
	// LabelConfig is the pod template's hash written into a manifest by
	// hand (`warmpod-gitlab pool-hash`), for pools read from a file
	// (--pools): a pod made from an older template is never claimed.
	// warmpod reads its pod's hash label through the downward API
	// (WARMPOD_CONFIG_HASH), so its own lease refuses a job of another
	// configuration too (exit 75).
	LabelConfig = "warmpod.dev/config"
	// LabelTemplateHash is the label the Deployment controller puts on
	// every pod of a ReplicaSet (Kubernetes' own key): the hash of the
	// template it was made from. A pool read from the cluster whose
	// WARMPOD_CONFIG_HASH reads it needs no hash by hand: the driver
	// claims only pods of the Deployment's current ReplicaSet.
	LabelTemplateHash = "pod-template-hash"
	// LabelJob is the CI job a claimed or cold pod runs.
	LabelJob = "warmpod.dev/job"
	// LabelServer tells which GitLab instance the job is of (a hash of
	// its URL): job ids are unique per instance only, and one runner can
	// serve several.
	LabelServer = "warmpod.dev/server"
	// LabelRunner names the CI runner a claimed or cold pod works for
	// (GitHub Actions: the runner pod's name): its clean-up deletes every
	// pod labelled for it, also those of an earlier job it lost track of.
	LabelRunner = "warmpod.dev/runner"
)

// PoolSelector selects the pool Deployments of a namespace: the labels
// every shipped pool manifest puts on its Deployment (not on its pods,
// whose component is "ci-helper").
const PoolSelector = "app.kubernetes.io/name=warmpod,app.kubernetes.io/component=pool"

// Label values of LabelState.
const (
	StateIdle    = "idle"
	StateClaimed = "claimed"
)

// Annotations of a pool's pod template, read by the drivers.
const (
	// AnnotationBin is the warmpod binary's path in the container, when
	// the container's command[0] does not say (default: "warmpod" on
	// PATH).
	AnnotationBin = "warmpod.dev/bin"
	// AnnotationAlpine, "true" or "false", tells a container hook whether
	// the pool's image is Alpine (musl), so it can answer the Actions
	// runner (isAlpine) without looking into the pod.
	AnnotationAlpine = "warmpod.dev/alpine"
	// AnnotationRunnerHelper, "true" or "false", says whether the pool's
	// build container has GitLab Runner's helper binary on PATH as
	// `gitlab-runner` (the artifact and cache stages call it). It wins
	// over what the GitLab driver reads from the template: set it to
	// "true" for an image that has gitlab-runner built in.
	AnnotationRunnerHelper = "warmpod.dev/gitlab-runner-helper"
)

// Annotations of a pool's Deployment.
const (
	// AnnotationDefaultPool, "true" on one pool Deployment, makes it the
	// default pool: its template makes the cold pods of images that have
	// no pool. Without it the default is the first pool by name.
	AnnotationDefaultPool = "warmpod.dev/default-pool"
	// AnnotationPolicy holds the pool's sizing policy, the text the pool
	// controller parses (docs/decisions/0005-pool-policy-in-annotations.md).
	AnnotationPolicy = "warmpod.dev/policy"
	// AnnotationSizing is where the pool controller writes why the pool
	// has its size (a JSON status), with each change of size and when the
	// policy is found invalid, so that `kubectl get deploy -o
	// custom-columns=…warmpod\.dev/sizing` shows it.
	AnnotationSizing = "warmpod.dev/sizing"
	// AnnotationProfile is where the pool controller saves the pool's
	// learned demand (sizing.Profile.Marshal), so that a new leader or a
	// restarted controller goes on from it. Written by the controller
	// only; deleting it makes the pool learn anew.
	AnnotationProfile = "warmpod.dev/demand-profile"
	// AnnotationFoundFrom is on a pool the pool controller made itself for
	// an image that kept going cold without a pool (sizing.Discovery): the
	// image. The controller removes such a pool once it is no longer used,
	// and never touches a pool without it.
	AnnotationFoundFrom = "warmpod.dev/found-from-jobs"
)

// Annotations by which the drivers tell the pool controller what a pool's
// jobs asked for. They ride on writes the drivers make anyway (the claim's
// label patch, the cold pod's create), so demand costs the API server no
// extra request, and they stay on the pod, so a controller that starts (or
// takes over as leader) rebuilds the recent claims from the pods still
// there. AnnotationRetiring goes the other way: the controller to the
// drivers.
const (
	// AnnotationClaimedAt is the time a claim won its pod (RFC 3339 with
	// nanoseconds, UTC): the claim patch sets it with the labels.
	AnnotationClaimedAt = "warmpod.dev/claimed-at"
	// AnnotationClaimWait is how long the driver looked for a pod before
	// the claim won, or before it gave up and created a cold pod, in
	// milliseconds (a decimal integer). The controller adds a cold pod's
	// creation-to-Ready time to it for the claim-wait histogram.
	AnnotationClaimWait = "warmpod.dev/claim-wait-ms"
	// AnnotationColdReason is on every cold pod: why the job did not get
	// a warm one (a ColdReason). Only ColdNoIdle and ColdPending are
	// demand on the pod's pool: the job wanted a pod of it.
	AnnotationColdReason = "warmpod.dev/cold-reason"
	// AnnotationRetiring marks an idle pod the pool controller is about
	// to scale away: a claim skips it. The controller sets it with the
	// pod's resourceVersion as precondition, as a claim does, so a claim
	// and a removal never both win the same pod.
	AnnotationRetiring = "warmpod.dev/retiring"
	// AnnotationDeletionCost is Kubernetes' ReplicaSet hint (beta and on
	// since 1.22): when a ReplicaSet scales down it removes, among pods
	// of equal rank, those with the lowest cost first. The controller
	// sets it on the pods it retires.
	AnnotationDeletionCost = "controller.kubernetes.io/pod-deletion-cost"
)

// Annotations by which node autoscalers tell a pod they may move from one
// they must not. An idle pool pod is a cache: evicting it costs a pod
// start, and its ReplicaSet makes another where there is room, so it must
// never keep a node up (gitlab-runner#39615's pause pods, ARC runners
// blocking scale-in, actions-runner-controller#3704). A busy one runs a
// job that eviction would lose. The claim's own patch sets Busy's values
// and the unclaim patch Idle's, so they cost no write of their own; a cold
// pod is created with Busy's. Kubernetes' Eviction API (kubectl drain)
// reads neither: the PodDisruptionBudget over claimed pods guards that
// (docs/decisions/0008-claimed-pods-disruption-budget.md).
const (
	// AnnotationSafeToEvict is Cluster Autoscaler's: "true" lets it
	// remove a pod it would otherwise keep (one with an emptyDir, as a
	// pool pod has), "false" keeps the pod's node up.
	AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// AnnotationDoNotDisrupt is Karpenter's: "true" keeps it from
	// voluntarily disrupting the pod's node (consolidation, drift).
	AnnotationDoNotDisrupt = "karpenter.sh/do-not-disrupt"
)

// BusyDisruption are the autoscalers' annotations of a claimed pod: not to
// be moved while its job runs.
func BusyDisruption() map[string]string {
	return map[string]string{AnnotationSafeToEvict: "false", AnnotationDoNotDisrupt: "true"}
}

// IdleDisruption are those of an idle pool pod (the pool templates carry
// the same), as a JSON merge patch: safe to evict, and Karpenter's key
// removed (nil). A pod given back to its pool gets these, not what its
// template said, should a template say otherwise.
func IdleDisruption() map[string]any {
	return map[string]any{AnnotationSafeToEvict: "true", AnnotationDoNotDisrupt: nil}
}

// Keys returns every label and annotation key of the contract, warmpod's
// own and the Kubernetes keys it writes or reads.
func Keys() []string {
	return []string{
		LabelPool, LabelState, LabelConfig, LabelTemplateHash, LabelJob, LabelServer, LabelRunner,
		AnnotationBin, AnnotationAlpine, AnnotationRunnerHelper,
		AnnotationDefaultPool, AnnotationPolicy, AnnotationSizing, AnnotationProfile, AnnotationFoundFrom,
		AnnotationClaimedAt, AnnotationClaimWait, AnnotationColdReason, AnnotationRetiring, AnnotationDeletionCost,
		AnnotationSafeToEvict, AnnotationDoNotDisrupt,
	}
}

// ColdReason says why a job got a cold pod (AnnotationColdReason).
type ColdReason string

// The reasons a job runs cold.
const (
	// ColdNoIdle: the job's image has a pool, but no idle pod of it was
	// Ready within the driver's warm wait. Demand on that pool.
	ColdNoIdle ColdReason = "no-idle"
	// ColdPending: the pool is rolling out a new template and has no pod
	// of it yet. Demand on that pool.
	ColdPending ColdReason = "pending"
	// ColdNoPool: no pool runs the job's image; the pod is made from the
	// default pool's template with the job's image. Not demand on the
	// default pool: its pods would not have served the job.
	ColdNoPool ColdReason = "no-pool"
	// ColdReleased: the job's pool's warm pods could not have what it
	// asks: one was claimed (and counted) but released, since its resize
	// failed, or none was claimed, since the pool's pods cannot be
	// resized in place or the job changes what cannot change in place
	// (ephemeral storage). Not demand: a warm pod would not have served
	// the job.
	ColdReleased ColdReason = "released"
)

// Demand reports whether a cold pod of this reason is demand on its pool
// (the job wanted a pod of that pool and found none).
func (r ColdReason) Demand() bool { return r == ColdNoIdle || r == ColdPending }

// PodState is what a pool pod is to the drivers and the pool controller,
// read from its labels, annotations and status by StateOf.
type PodState string

// The states of a pool pod.
const (
	// PodIdle: Ready and unclaimed; a claim may take it.
	PodIdle PodState = "idle"
	// PodStarting: on a node, not yet Ready (its image pulling, its
	// containers starting, its readiness probe not yet passed).
	PodStarting PodState = "starting"
	// PodPending: on no node yet: the scheduler has not placed it, or no
	// node can hold it. It may stay so for good, unlike a starting pod.
	PodPending PodState = "pending"
	// PodRetiring: marked AnnotationRetiring by the controller, which is
	// about to scale it away; never claimed.
	PodRetiring PodState = "retiring"
	// PodBusy: claimed (warm) or made for a job (cold): runs a job.
	PodBusy PodState = "busy"
	// PodGone: terminating or finished, or not a pool pod at all (its
	// LabelState is neither value): nobody's to count.
	PodGone PodState = "gone"
)

// PodFacts are what StateOf reads of a pod: its metadata and what its
// status says.
type PodFacts struct {
	Labels, Annotations map[string]string
	// Terminating: it has a deletion timestamp. Finished: its phase is
	// Succeeded or Failed. Scheduled: it has a node. Ready: its Ready
	// condition is true (and it runs).
	Terminating, Finished, Scheduled, Ready bool
}

// StateOf returns the state of a pod with facts f. The order of the cases
// is the rule: a pod on its way out is gone whatever its labels; a claimed
// pod is busy (a claim may win a pod the controller marked retiring a
// moment later: the claim's label wins); an idle one is retiring before it
// is anything else, then idle, starting or pending by its status.
func StateOf(f PodFacts) PodState {
	switch {
	case f.Terminating || f.Finished:
		return PodGone
	case f.Labels[LabelState] == StateClaimed:
		return PodBusy
	case f.Labels[LabelState] != StateIdle:
		return PodGone
	case f.Annotations[AnnotationRetiring] != "":
		return PodRetiring
	case f.Ready:
		return PodIdle
	case f.Scheduled:
		return PodStarting
	default:
		return PodPending
	}
}

// Pod is a pod a driver holds for one job, as the executor addresses it
// (the state between a CI system's calls keeps it as JSON).
type Pod struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// UID is the precondition of every delete: a newer pod that reuses
	// the name is never touched.
	UID string `json:"uid"`
	// Pool is the pool's name (LabelPool).
	Pool string `json:"pool"`
	// Container runs warmpod; execs go there.
	Container string `json:"container"`
	// Bin is the warmpod binary's path in Container.
	Bin string `json:"bin"`
	// Hash is the pod's hash label (Pool.HashLabel), sent as the job's
	// config_hash.
	Hash string `json:"config_hash"`
	// Warm is true for a claimed pool pod, false for a cold one.
	Warm bool `json:"warm"`
	// Sidecars counts the pod's containers other than warmpod's (a job's
	// services): Delete gives them SidecarGrace.
	Sidecars int `json:"sidecars,omitempty"`
	// Resize is the in-place resize the claim sent (executor/pool's
	// *Resizing); nil: none. It lives only in the call that claimed the
	// pod.
	Resize Resize `json:"-"`
}

// Resize is an in-place resize a claim sent to a warm pod: what a driver
// needs of it without the Kubernetes types (its timeline's start).
type Resize interface {
	// SentAt is when the resize was sent.
	SentAt() time.Time
}

// Owner is the job a claimed or cold pod is labelled for.
type Owner struct {
	// Job is the CI system's job id (GitLab: CI_JOB_ID).
	Job string
	// Server is the hash of the CI server's URL (16 hex digits).
	Server string
	// Runner is the runner's name (GitHub Actions); empty for GitLab.
	Runner string
}

// Labels are the pod labels that name the owner; an empty field has none
// (so an Owner with only Runner set selects every pod of that runner).
func (o Owner) Labels() map[string]string {
	l := map[string]string{}
	for k, v := range map[string]string{LabelJob: o.Job, LabelServer: o.Server, LabelRunner: o.Runner} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}
