// Package fake is the executor side's one fake Kubernetes, for the unit
// tests of the core and of both drivers: warm pods handed out in order,
// cold pods made on demand, the pools, the nodes and in-place resizes
// answered from its fields, and every call recorded. What the pod's
// warmpod answers to an exec is each test's own (OnExec): the GitLab
// driver's tests play job start and stages, the hook's also the _work
// transfer. It implements executor.Cluster (executor/session.Cluster and
// executor.Claims); it imports neither, so that package executor's own
// tests can use it.
package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// Cluster is the fake. Set its answer fields before the calls; read what
// happened through its methods (each takes the lock: a stage's cancel
// runs beside its stream).
type Cluster struct {
	mu sync.Mutex

	// Warm are the Ready idle pods ClaimWarm hands out, first first.
	Warm []poolapi.Pod
	// Starting are the starting pool pods ClaimStarting hands out, first
	// first; StartingErr, when set, is its answer instead (the pod it
	// claimed was not Ready in time, and was deleted).
	Starting    []poolapi.Pod
	StartingErr error
	// Set answers Pools; nil: Kube's, else an error (the test gives a
	// manifest).
	Set *pool.Set
	// Kube, when set, answers Pools and ClaimWarm as the real cluster
	// code does (a pool.Cluster over a fake clientset).
	Kube *pool.Cluster
	// OnExec answers an exec of argv in p, stdin being all the exec's
	// stdin held; nil: exit 0, no output.
	OnExec func(p poolapi.Pod, argv []string, stdin []byte, stdout, stderr io.Writer) (int, error)
	// OnResize answers AwaitResize of a pod whose claim sent want; nil:
	// applied.
	OnResize func(p poolapi.Pod, want corev1.ResourceRequirements) error
	// RefuseResize, when set, is ClaimWarm's answer to a claim with a
	// resize (the API server refused it; nothing is claimed).
	RefuseResize error
	// Nodes and NodesErr answer Nodes.
	NodeList []pool.Node
	NodesErr error
	// OnPodsOfJob answers PodsOfJob; nil: none.
	OnPodsOfJob func(o poolapi.Owner) []poolapi.Pod
	// ColdNamespace is the cold pods' namespace.
	ColdNamespace string

	colds      []pool.Pool
	why        []poolapi.ColdReason
	deleted    []string
	execs      []Exec
	resized    []Resize
	listed     []poolapi.Owner
	poolReads  int
	nodesAsked int
}

// Exec is one exec the fake saw.
type Exec struct {
	// Pod is the pod's name.
	Pod string
	// Argv is the command.
	Argv []string
	// Stdin is all its stdin held (a stage's stdin, which stays open
	// after the script, as far as it was written).
	Stdin string
}

// Resize is one claim with an in-place resize.
type Resize struct {
	Pod  string
	Want corev1.ResourceRequirements
}

// Pools is Set, or Kube's pools ([pool.Cluster.Pools]).
func (f *Cluster) Pools(ctx context.Context) (*pool.Set, error) {
	f.mu.Lock()
	f.poolReads++
	set, kube := f.Set, f.Kube
	f.mu.Unlock()
	switch {
	case set != nil:
		return set, nil
	case kube != nil:
		return kube.Pools(ctx)
	}
	return nil, errors.New("no pools in this fake")
}

// ClaimWarm hands out the next of Warm (nil when none is left), resized
// to fit when fit is set (refused with RefuseResize); with Kube, Kube's
// claim.
func (f *Cluster) ClaimWarm(ctx context.Context, p pool.Pool, o poolapi.Owner, wait time.Duration, fit *corev1.ResourceRequirements) (*poolapi.Pod, error) {
	if f.Kube != nil {
		return f.Kube.ClaimWarm(ctx, p, o, wait, fit)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.Warm) == 0 {
		return nil, nil
	}
	pod := f.Warm[0]
	if fit != nil {
		f.resized = append(f.resized, Resize{Pod: pod.Name, Want: *fit})
		if f.RefuseResize != nil {
			return nil, f.RefuseResize
		}
		pod.Resize = &pool.Resizing{Want: *fit, Sent: time.Now()}
	}
	f.Warm = f.Warm[1:]
	return &pod, nil
}

// AwaitResize is OnResize's answer for a pod the claim resized.
func (f *Cluster) AwaitResize(_ context.Context, p poolapi.Pod, _ time.Duration, _ pool.Execer) error {
	f.mu.Lock()
	fn := f.OnResize
	f.mu.Unlock()
	r, _ := p.Resize.(*pool.Resizing)
	if fn == nil || r == nil {
		return nil
	}
	return fn(p, r.Want)
}

// Nodes is NodeList and NodesErr.
func (f *Cluster) Nodes(context.Context, *corev1.PodTemplateSpec) ([]pool.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodesAsked++
	return f.NodeList, f.NodesErr
}

// ClaimStarting hands out the next of Starting (nil when none is left),
// or StartingErr; with Kube, Kube's claim.
func (f *Cluster) ClaimStarting(ctx context.Context, p pool.Pool, o poolapi.Owner, why pool.Cold, timeout time.Duration) (*poolapi.Pod, error) {
	if f.Kube != nil {
		return f.Kube.ClaimStarting(ctx, p, o, why, timeout)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.StartingErr != nil {
		return nil, f.StartingErr
	}
	if len(f.Starting) == 0 {
		return nil, nil
	}
	pod := f.Starting[0]
	f.Starting = f.Starting[1:]
	f.why = append(f.why, why.Reason)
	return &pod, nil
}

// CreateCold makes pod cold-N (N counting from 1, its UID u-cold-N) of
// p, its warmpod at p.Bin, as the real one does.
func (f *Cluster) CreateCold(_ context.Context, p pool.Pool, _ poolapi.Owner, why pool.Cold, _ time.Duration) (poolapi.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.colds = append(f.colds, p)
	f.why = append(f.why, why.Reason)
	n := len(f.colds)
	return poolapi.Pod{Name: fmt.Sprintf("cold-%d", n), Namespace: f.ColdNamespace, UID: fmt.Sprintf("u-cold-%d", n), Pool: p.Name, Bin: p.Bin, Hash: p.Hash}, nil
}

// Exec records the exec and answers it with OnExec.
func (f *Cluster) Exec(_ context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var in []byte
	if h, ok := stdin.(interface{ Held() []byte }); ok {
		// A stage's stdin stays open after the script: what is there.
		in = h.Held()
	} else if stdin != nil {
		in, _ = io.ReadAll(stdin)
	}
	f.mu.Lock()
	f.execs = append(f.execs, Exec{Pod: p.Name, Argv: argv, Stdin: string(in)})
	fn := f.OnExec
	f.mu.Unlock()
	if fn == nil {
		return 0, nil
	}
	return fn(p, argv, in, stdout, stderr)
}

// Delete records the pod's deletion.
func (f *Cluster) Delete(_ context.Context, p poolapi.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, p.Name)
	return nil
}

// PodsOfJob is OnPodsOfJob's answer.
func (f *Cluster) PodsOfJob(_ context.Context, o poolapi.Owner) ([]poolapi.Pod, error) {
	f.mu.Lock()
	f.listed = append(f.listed, o)
	fn := f.OnPodsOfJob
	f.mu.Unlock()
	if fn == nil {
		return nil, nil
	}
	return fn(o), nil
}

// Colds are the pools CreateCold made pods from, in order.
func (f *Cluster) Colds() []pool.Pool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]pool.Pool(nil), f.colds...)
}

// ColdReasons are the reasons the cold pods were annotated with, in
// order.
func (f *Cluster) ColdReasons() []poolapi.ColdReason {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]poolapi.ColdReason(nil), f.why...)
}

// Deleted are the names of the pods deleted, in order.
func (f *Cluster) Deleted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.deleted...)
}

// Execs are the execs, in order.
func (f *Cluster) Execs() []Exec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Exec(nil), f.execs...)
}

// Resized are the claims that sent a resize, in order.
func (f *Cluster) Resized() []Resize {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Resize(nil), f.resized...)
}

// Listed are the owners PodsOfJob was asked for, in order.
func (f *Cluster) Listed() []poolapi.Owner {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]poolapi.Owner(nil), f.listed...)
}

// PoolReads counts the Pools calls; NodesAsked the Nodes calls.
func (f *Cluster) PoolReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.poolReads
}

// NodesAsked counts the Nodes calls.
func (f *Cluster) NodesAsked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodesAsked
}

// Left is how many of Warm are left unclaimed.
func (f *Cluster) Left() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Warm)
}
