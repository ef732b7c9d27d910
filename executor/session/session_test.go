package session

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/warmpod/warmpod/poolapi"
)

// renewCluster counts the execs it is asked for.
type renewCluster struct {
	Cluster
	mu    sync.Mutex
	execs []string
}

func (r *renewCluster) Exec(_ context.Context, _ poolapi.Pod, argv []string, _ io.Reader, _, _ io.Writer) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execs = append(r.execs, strings.Join(argv, " "))
	return 0, nil
}

func (r *renewCluster) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.execs)
}

// KeepAlive renews the job's lease every third of its TTL until stopped,
// and does nothing without a TTL.
func TestKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &renewCluster{}
		c := &Session{Cluster: rc, Log: io.Discard, LeaseTTL: 3 * time.Second}
		stop := c.KeepAlive(context.Background(), poolapi.Pod{Name: "p", Bin: "/w/warmpod"}, "j1")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Equal(t, 10, rc.count(), "one renewal a second (TTL 3 s / 3) for 10 s")
		assert.Equal(t, "/w/warmpod job status --job j1", rc.execs[0])
		stop()
		time.Sleep(10 * time.Second)
		assert.Equal(t, 10, rc.count(), "none after stop")

		none := &Session{Cluster: rc, Log: io.Discard}
		none.KeepAlive(context.Background(), poolapi.Pod{}, "j1")()
		assert.Equal(t, 10, rc.count(), "no TTL, nothing to renew")
	})
}

// endCluster records deletions and lists no other pod.
type endCluster struct {
	renewCluster
	deleted []string
}

func (e *endCluster) Delete(_ context.Context, p poolapi.Pod) error {
	e.deleted = append(e.deleted, p.Name)
	return nil
}

func (e *endCluster) PodsOfJob(context.Context, poolapi.Owner) ([]poolapi.Pod, error) {
	return nil, nil
}

// End runs job end in the pod and deletes it; a pod with sidecars is
// deleted at once (its services' short grace), its job ended by warmpod's
// own SIGTERM path.
func TestEnd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sidecars int
		execs    []string
	}{
		{"no sidecars: job end, then the delete", 0, []string{"/w/warmpod job end --job j1"}},
		{"sidecars: the delete alone", 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec := &endCluster{}
			c := &Session{Cluster: ec, Log: io.Discard}
			c.End(context.Background(), &poolapi.Pod{Name: "p", Bin: "/w/warmpod", Sidecars: tc.sidecars}, "j1", poolapi.Owner{Job: "j1"})
			assert.Equal(t, tc.execs, ec.execs)
			assert.Equal(t, []string{"p"}, ec.deleted)
		})
	}
}

// gatedEndCluster holds job end until the job's pods are being listed:
// an End that lists them only after the job ended never ends it.
type gatedEndCluster struct {
	endCluster
	listing chan struct{}
}

func (g *gatedEndCluster) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	select {
	case <-g.listing:
	case <-time.After(5 * time.Second):
		return -1, errors.New("the job's pods were not listed beside job end within 5 s")
	}
	return g.endCluster.Exec(ctx, p, argv, stdin, stdout, stderr)
}

func (g *gatedEndCluster) PodsOfJob(context.Context, poolapi.Owner) ([]poolapi.Pod, error) {
	close(g.listing)
	return []poolapi.Pod{{Name: "p", UID: "u1"}, {Name: "lost", UID: "u2"}}, nil
}

// End lists the job's pods while the job ends (one round trip less for
// the CI system's clean-up), and still deletes the pod and every other
// pod of the job.
func TestEndListsWhileTheJobEnds(t *testing.T) {
	defer goleak.VerifyNone(t)
	var log strings.Builder
	gc := &gatedEndCluster{listing: make(chan struct{})}
	c := &Session{Cluster: gc, Log: &log}
	c.End(context.Background(), &poolapi.Pod{Name: "p", UID: "u1", Bin: "/w/warmpod"}, "j1", poolapi.Owner{Job: "j1"})
	assert.Empty(t, log.String())
	assert.Equal(t, []string{"/w/warmpod job end --job j1"}, gc.execs)
	assert.Equal(t, []string{"p", "lost"}, gc.deleted)
}
