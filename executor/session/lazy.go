package session

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/warmpod/warmpod/poolapi"
)

// Lazy is a Cluster set up at its first call, not before: a call whose
// execs all go through the job's multiplexer (which set up its own client
// for the whole job) never sets one up. A set-up that fails is a
// *SystemError of every call: an exec that never began, which RunStage
// does not retry.
type Lazy struct {
	// Connect sets the Cluster up.
	Connect func() (Cluster, error)
	// Took, when set, gets how long Connect took (a call's timings).
	Took func(time.Duration)

	once sync.Once
	cl   Cluster
	err  error
}

// Cluster sets the Cluster up (once) and returns it.
func (l *Lazy) Cluster() (Cluster, error) {
	l.once.Do(func() {
		t0 := time.Now()
		l.cl, l.err = l.Connect()
		if l.Took != nil {
			l.Took(time.Since(t0))
		}
		if l.err != nil {
			l.err = &SystemError{Err: l.err}
		}
	})
	return l.cl, l.err
}

// Exec is the Cluster's Exec; -1 with the set-up's error.
func (l *Lazy) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cl, err := l.Cluster()
	if err != nil {
		return -1, err
	}
	return cl.Exec(ctx, p, argv, stdin, stdout, stderr)
}

// ExecBulk is the Cluster's ExecBulk when it has one, else its Exec
// ([BulkExec]).
func (l *Lazy) ExecBulk(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cl, err := l.Cluster()
	if err != nil {
		return -1, err
	}
	return BulkExec(cl)(ctx, p, argv, stdin, stdout, stderr)
}

// Delete is the Cluster's Delete.
func (l *Lazy) Delete(ctx context.Context, p poolapi.Pod) error {
	cl, err := l.Cluster()
	if err != nil {
		return err
	}
	return cl.Delete(ctx, p)
}

// PodsOfJob is the Cluster's PodsOfJob.
func (l *Lazy) PodsOfJob(ctx context.Context, owner poolapi.Owner) ([]poolapi.Pod, error) {
	cl, err := l.Cluster()
	if err != nil {
		return nil, err
	}
	return cl.PodsOfJob(ctx, owner)
}
