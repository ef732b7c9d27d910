package github

import (
	"context"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// lazyCluster is a Cluster whose client is set up at its first use. A
// step whose execs all go through the job's multiplexer never uses it:
// the multiplexer set up its own client at prepare_job and keeps it for
// the job, so a step that set up another would only repeat that work
// (reading the kubeconfig, building the clientset). A set-up that fails
// is a *SystemError of every call: an exec that never began, which
// RunStage does not retry.
type lazyCluster struct {
	connect func() (Cluster, error)
	trace   *callTrace

	once sync.Once
	cl   Cluster
	err  error
}

func (l *lazyCluster) get() (Cluster, error) {
	l.once.Do(func() {
		t0 := time.Now()
		l.cl, l.err = l.connect()
		l.trace.client(time.Since(t0))
		if l.err != nil {
			l.err = &session.SystemError{Err: l.err}
		}
	})
	return l.cl, l.err
}

func (l *lazyCluster) ClaimWarm(ctx context.Context, p pool.Pool, owner poolapi.Owner, wait time.Duration, fit *corev1.ResourceRequirements) (*poolapi.Pod, error) {
	cl, err := l.get()
	if err != nil {
		return nil, err
	}
	return cl.ClaimWarm(ctx, p, owner, wait, fit)
}

func (l *lazyCluster) CreateCold(ctx context.Context, p pool.Pool, owner poolapi.Owner, why pool.Cold, timeout time.Duration) (poolapi.Pod, error) {
	cl, err := l.get()
	if err != nil {
		return poolapi.Pod{}, err
	}
	return cl.CreateCold(ctx, p, owner, why, timeout)
}

func (l *lazyCluster) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cl, err := l.get()
	if err != nil {
		return -1, err
	}
	return cl.Exec(ctx, p, argv, stdin, stdout, stderr)
}

// ExecBulk is the Cluster's ExecBulk when it has one, else its Exec
// (session.BulkExec).
func (l *lazyCluster) ExecBulk(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cl, err := l.get()
	if err != nil {
		return -1, err
	}
	return session.BulkExec(cl)(ctx, p, argv, stdin, stdout, stderr)
}

func (l *lazyCluster) Delete(ctx context.Context, p poolapi.Pod) error {
	cl, err := l.get()
	if err != nil {
		return err
	}
	return cl.Delete(ctx, p)
}

func (l *lazyCluster) PodsOfJob(ctx context.Context, owner poolapi.Owner) ([]poolapi.Pod, error) {
	cl, err := l.get()
	if err != nil {
		return nil, err
	}
	return cl.PodsOfJob(ctx, owner)
}

func (l *lazyCluster) Pools(ctx context.Context) (*pool.Set, error) {
	cl, err := l.get()
	if err != nil {
		return nil, err
	}
	return cl.Pools(ctx)
}
