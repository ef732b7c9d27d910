package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// acquireCluster hands out one warm pod and cold pods, and records what
// happened through it.
type acquireCluster struct {
	Cluster
	name string // "direct", or the multiplexer's pod
	mu   *sync.Mutex
	log  *[]string
}

func (a *acquireCluster) note(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	*a.log = append(*a.log, s)
}

func (a *acquireCluster) ClaimWarm(context.Context, pool.Pool, poolapi.Owner, time.Duration, *corev1.ResourceRequirements) (*poolapi.Pod, error) {
	return &poolapi.Pod{Name: "warm-1"}, nil
}

func (a *acquireCluster) CreateCold(context.Context, pool.Pool, poolapi.Owner, pool.Cold, time.Duration) (poolapi.Pod, error) {
	a.note("create cold")
	return poolapi.Pod{Name: "cold-1"}, nil
}

func (a *acquireCluster) Delete(_ context.Context, p poolapi.Pod) error {
	a.note("delete " + p.Name)
	return nil
}

func (a *acquireCluster) Exec(_ context.Context, p poolapi.Pod, argv []string, _ io.Reader, _, _ io.Writer) (int, error) {
	a.note(fmt.Sprintf("%s via %s: %s", strings.Join(argv[1:], " "), a.name, p.Name))
	return 0, nil
}

// TestAcquireAttachesBeforeFit: the job's multiplexer is attached to a
// claimed warm pod before Fit, which reaches the pod through it; a pod
// that cannot be fitted has its multiplexer stopped, and the cold pod
// gets one of its own.
func TestAcquireAttachesBeforeFit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fitErr error
		want   []string
	}{
		{"fitted", nil, []string{"attach warm-1", "job limits via mux warm-1: warm-1", "job start via mux warm-1: warm-1", "release warm-1 true"}},
		{"released for a cold pod", errors.New("infeasible"), []string{"attach warm-1", "job limits via mux warm-1: warm-1", "release warm-1 false",
			"delete warm-1", "create cold", "attach cold-1", "job start via mux cold-1: cold-1", "release cold-1 true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var log []string
			direct := &acquireCluster{name: "direct", mu: &mu, log: &log}
			var out strings.Builder
			c := &Core{Session: session.Session{Cluster: direct, Log: &out}, Claims: direct, Attach: func(pod poolapi.Pod) (session.Cluster, func(bool)) {
				direct.note("attach " + pod.Name)
				return &acquireCluster{name: "mux " + pod.Name, mu: &mu, log: &log},
					func(ok bool) { direct.note(fmt.Sprintf("release %s %v", pod.Name, ok)) }
			}}
			job := Job{ID: "1", Fit: func(ctx context.Context, cl session.Cluster, pod poolapi.Pod) error {
				_, err := cl.Exec(ctx, pod, []string{"/warmpod/warmpod", "job", "limits"}, nil, nil, nil)
				require.NoError(t, err)
				return tc.fitErr
			}}
			pod, err := c.Acquire(context.Background(), pool.Pool{Name: "p"}, true, job)
			require.NoError(t, err)
			assert.Equal(t, tc.want[len(tc.want)-1][len("release "):len("release ")+6], pod.Name)
			assert.Equal(t, tc.want, log)
		})
	}
}
