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
	"k8s.io/apimachinery/pkg/api/resource"

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
	// resizeErr is AwaitResize's answer.
	resizeErr error
}

func (a *acquireCluster) note(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	*a.log = append(*a.log, s)
}

func (a *acquireCluster) ClaimWarm(_ context.Context, _ pool.Pool, _ poolapi.Owner, _ time.Duration, fit *corev1.ResourceRequirements) (*poolapi.Pod, error) {
	pod := &poolapi.Pod{Name: "warm-1"}
	if fit != nil {
		a.note("claim warm-1, resize to " + Describe(*fit))
		pod.Resize = &pool.Resizing{Want: *fit, Sent: time.Now()}
	}
	return pod, nil
}

func (a *acquireCluster) Pools(context.Context) (*pool.Set, error) {
	return nil, errors.New("no pools here: the test gives a manifest")
}

func (a *acquireCluster) Nodes(context.Context, *corev1.PodTemplateSpec) ([]pool.Node, error) {
	return []pool.Node{{Name: "n1", Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}, nil
}

// AwaitResize asks the pod through via, as the real one does (`job
// limits`), and answers a.resizeErr.
func (a *acquireCluster) AwaitResize(ctx context.Context, p poolapi.Pod, _ time.Duration, via pool.Execer) error {
	if _, err := via.Exec(ctx, p, []string{"/warmpod/warmpod", "job", "limits"}, nil, nil, nil); err != nil {
		return err
	}
	return a.resizeErr
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

// TestPrepareAttachesBeforeResize: the job's multiplexer is attached to
// a claimed warm pod before the wait for its resize, which reaches the
// pod through it; a pod whose resize fails has its multiplexer stopped,
// and the cold pod gets one of its own.
func TestPrepareAttachesBeforeResize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fitErr error
		want   []string
	}{
		{"fitted", nil, []string{"claim warm-1, resize to requests cpu=2", "attach warm-1", "job limits via mux warm-1: warm-1", "job start via mux warm-1: warm-1", "release warm-1 true"}},
		{"released for a cold pod", errors.New("infeasible"), []string{"claim warm-1, resize to requests cpu=2", "attach warm-1", "job limits via mux warm-1: warm-1", "release warm-1 false",
			"delete warm-1", "create cold", "attach cold-1", "job start via mux cold-1: cold-1", "release cold-1 true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var log []string
			direct := &acquireCluster{name: "direct", mu: &mu, log: &log, resizeErr: tc.fitErr}
			var out strings.Builder
			c := &Core{Session: session.Session{Cluster: direct, Log: &out}, Claims: direct, Attach: func(pod poolapi.Pod) (session.Cluster, func(bool)) {
				direct.note("attach " + pod.Name)
				return &acquireCluster{name: "mux " + pod.Name, mu: &mu, log: &log},
					func(ok bool) { direct.note(fmt.Sprintf("release %s %v", pod.Name, ok)) }
			}}
			set := &pool.Set{Pools: []pool.Pool{{Name: "p", Image: "alpine", Container: "build",
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "build", Image: "alpine"}}}}}}}
			res := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
			prep, err := c.Prepare(context.Background(), Request{Pools: set, Image: "alpine", Resources: res, Job: Job{ID: "1"}})
			require.NoError(t, err)
			pod := prep.Pod
			assert.Equal(t, tc.want[len(tc.want)-1][len("release "):len("release ")+6], pod.Name)
			assert.Equal(t, tc.want, log)
		})
	}
}
