package executor

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// Lazy is a *pool.Cluster set up at its first call, not before: a driver
// call whose work all goes through the job's multiplexer (GitLab's run
// and cleanup) then loads no kubeconfig and builds no client. Its calls
// on a pod are its embedded session.Lazy's, the others pool.Cluster's;
// each returns the set-up's error when there is no client ("kubeconfig:
// …", as [pool.Connect]), as a *session.SystemError: an exec that never
// began, which RunStage does not retry.
type Lazy struct {
	session.Lazy
	kubeconfig, namespace, userAgent string

	once sync.Once
	c    *pool.Cluster
	err  error
}

// NewLazy returns a Lazy for [pool.Connect]'s arguments.
func NewLazy(kubeconfig, namespace, userAgent string) *Lazy {
	l := &Lazy{kubeconfig: kubeconfig, namespace: namespace, userAgent: userAgent}
	l.Lazy.Connect = func() (session.Cluster, error) { return l.Cluster() }
	return l
}

// Cluster sets up the client (once) and returns it.
func (l *Lazy) Cluster() (*pool.Cluster, error) {
	l.once.Do(func() {
		if l.c, l.err = pool.Connect(l.kubeconfig, l.namespace, l.userAgent); l.err != nil {
			l.err = &session.SystemError{Err: l.err}
		}
	})
	return l.c, l.err
}

// ClaimWarm is [pool.Cluster.ClaimWarm].
func (l *Lazy) ClaimWarm(ctx context.Context, p pool.Pool, owner poolapi.Owner, wait time.Duration, fit *corev1.ResourceRequirements) (*poolapi.Pod, error) {
	c, err := l.Cluster()
	if err != nil {
		return nil, err
	}
	return c.ClaimWarm(ctx, p, owner, wait, fit)
}

// ClaimStarting is [pool.Cluster.ClaimStarting].
func (l *Lazy) ClaimStarting(ctx context.Context, p pool.Pool, owner poolapi.Owner, why pool.Cold, timeout time.Duration) (*poolapi.Pod, error) {
	c, err := l.Cluster()
	if err != nil {
		return nil, err
	}
	return c.ClaimStarting(ctx, p, owner, why, timeout)
}

// CreateCold is [pool.Cluster.CreateCold].
func (l *Lazy) CreateCold(ctx context.Context, p pool.Pool, owner poolapi.Owner, why pool.Cold, timeout time.Duration) (poolapi.Pod, error) {
	c, err := l.Cluster()
	if err != nil {
		return poolapi.Pod{}, err
	}
	return c.CreateCold(ctx, p, owner, why, timeout)
}

// Pools is [pool.Cluster.Pools].
func (l *Lazy) Pools(ctx context.Context) (*pool.Set, error) {
	c, err := l.Cluster()
	if err != nil {
		return nil, err
	}
	return c.Pools(ctx)
}

// AwaitResize is [pool.Cluster.AwaitResize].
func (l *Lazy) AwaitResize(ctx context.Context, p poolapi.Pod, timeout time.Duration, via pool.Execer) error {
	c, err := l.Cluster()
	if err != nil {
		return err
	}
	return c.AwaitResize(ctx, p, timeout, via)
}

// Nodes is [pool.Cluster.Nodes].
func (l *Lazy) Nodes(ctx context.Context, t *corev1.PodTemplateSpec) ([]pool.Node, error) {
	c, err := l.Cluster()
	if err != nil {
		return nil, err
	}
	return c.Nodes(ctx, t)
}
