package executor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/warmpod/warmpod/executor/fake"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// TestPrepareFitsAsTheAPIServerStoresIt: a job's resources are put over
// the pool container's as the API server stores them (a limit without a
// request is requested at the limit), so a template of limits only stays
// Guaranteed when capped, a cap without a request is checked against the
// nodes at the request it will get, and a change that cannot be made in
// place sends the job to a cold pod with the reason "released".
func TestPrepareFitsAsTheAPIServerStoresIt(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	node := pool.Node{Name: "n1", Allocatable: rl("cpu", "4", "memory", "8Gi", "ephemeral-storage", "100Gi")}
	for _, tc := range []struct {
		name    string
		pool    corev1.ResourceRequirements
		res     *corev1.ResourceRequirements
		caps    corev1.ResourceList
		resized string // the resize the claim sent ("": none)
		cold    string // the cold pod's resources ("": no cold pod)
		why     poolapi.ColdReason
		err     string
	}{
		{name: "limits only: Guaranteed, and stays so", pool: corev1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "1Gi")}, caps: rl("cpu", "2"),
			resized: "requests cpu=2 memory=1Gi, limits cpu=2 memory=1Gi"},
		{name: "limits only, a job's limit raised: its request with it", pool: corev1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "1Gi")},
			res: &corev1.ResourceRequirements{Limits: rl("memory", "2Gi")}, resized: "requests cpu=1 memory=2Gi, limits cpu=1 memory=2Gi"},
		{name: "no resources: a cap is requested at the cap, and no node has it", caps: rl("memory", "64Gi"),
			err: "the job's pod would request memory=64Gi, more than any node of pool p can allocate (n1: memory=8Gi)"},
		{name: "no resources: a cap a node has", caps: rl("memory", "1Gi"), resized: "requests memory=1Gi, limits memory=1Gi"},
		{name: "ephemeral storage: a cold pod, released", pool: corev1.ResourceRequirements{Requests: rl("cpu", "100m")},
			res: &corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "10Gi")}, cold: "requests cpu=100m ephemeral-storage=10Gi", why: poolapi.ColdReleased},
		{name: "a request above its limit", pool: corev1.ResourceRequirements{Limits: rl("memory", "1Gi")},
			res: &corev1.ResourceRequirements{Requests: rl("memory", "2Gi")}, err: "the memory request 2Gi is above its limit 1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake.Cluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true, Pool: "p"}}, NodeList: []pool.Node{node}}
			var log strings.Builder
			c := &Core{Session: session.Session{Cluster: f, Log: &log}, Claims: f}
			set := &pool.Set{Pools: []pool.Pool{{Name: "p", Image: "alpine", Container: "build",
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "build", Image: "alpine", Resources: tc.pool}}}}}}}
			prep, err := c.Prepare(context.Background(), Request{Pools: set, Image: "alpine", Resources: tc.res, Caps: tc.caps, Job: Job{ID: "1"}})
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.Equal(t, 1, f.Left(), "nothing claimed")
				assert.Empty(t, f.Colds(), "nothing created")
				return
			}
			require.NoError(t, err, log.String())
			var resized []string
			for _, r := range f.Resized() {
				resized = append(resized, Describe(r.Want))
			}
			if tc.resized == "" {
				assert.Empty(t, resized)
			} else {
				assert.Equal(t, []string{tc.resized}, resized)
				assert.Equal(t, "w1", prep.Pod.Name)
				assert.False(t, prep.ResizeSent.IsZero())
			}
			if tc.cold == "" {
				assert.Empty(t, f.Colds())
				return
			}
			require.Len(t, f.Colds(), 1)
			cp := f.Colds()[0]
			assert.Equal(t, tc.cold, Describe(cp.BuildContainer(&cp.Template).Resources))
			assert.Equal(t, []poolapi.ColdReason{tc.why}, f.ColdReasons())
			assert.NotContains(t, log.String(), "no pool runs image")
		})
	}
}

// TestPrepareTakesAStartingPod: with no Ready pod after the warm wait, a
// job takes the pool's pod that is starting rather than a cold pod of its
// own, unless the job's pod must differ from the pool's (a resize, a cold
// template); a starting pod not Ready in time leaves a cold pod.
// podRes is requests of cpu and memory.
func podRes(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}
}

func ptr[T any](v T) *T { return &v }

func TestPrepareTakesAStartingPod(t *testing.T) {
	notReady := errors.New("pod s1 after 5m0s: not Ready")
	for _, tc := range []struct {
		name     string
		starting []poolapi.Pod
		err      error
		caps     corev1.ResourceList
		res      *corev1.ResourceRequirements // the job's
		tmpl     corev1.ResourceRequirements  // the pool's
		want     string                       // the job's pod
		log      string
	}{
		{name: "a starting pod", starting: []poolapi.Pod{{Name: "s1", Pool: "p"}}, want: "s1",
			log: "no warm pod of pool p (config h) is Ready: took pod s1, which was starting, Ready after"},
		{name: "none starting: cold", want: "cold-1", log: "is Ready: creating a cold pod"},
		{name: "not Ready in time: cold", starting: []poolapi.Pod{{Name: "s1", Pool: "p"}}, err: notReady, want: "cold-1",
			log: "a starting pod of pool p: pod s1 after 5m0s: not Ready\n"},
		{name: "a resize: cold, the starting pod left", starting: []poolapi.Pod{{Name: "s1", Pool: "p"}}, caps: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}, want: "cold-1"},
		// A job whose resources come out as the pool's own (a GitLab
		// job's KUBERNETES_* variables set to the pool's figures): its
		// pod is the pool's, so it takes the starting one.
		{name: "the pool's own resources", starting: []poolapi.Pod{{Name: "s1", Pool: "p"}}, tmpl: podRes("500m", "256Mi"), res: ptr(podRes("500m", "256Mi")), want: "s1",
			log: "took pod s1, which was starting"},
		{name: "more memory than the pool's: cold", starting: []poolapi.Pod{{Name: "s1", Pool: "p"}}, tmpl: podRes("500m", "256Mi"), res: ptr(podRes("500m", "512Mi")), want: "cold-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake.Cluster{Starting: tc.starting, StartingErr: tc.err,
				NodeList: []pool.Node{{Name: "n1", Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}}}
			var log strings.Builder
			c := &Core{Session: session.Session{Cluster: f, Log: &log}, Claims: f}
			set := &pool.Set{Pools: []pool.Pool{{Name: "p", Image: "alpine", Container: "build", Hash: "h",
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "build", Image: "alpine", Resources: tc.tmpl}}}}}}}
			prep, err := c.Prepare(context.Background(), Request{Pools: set, Image: "alpine", Resources: tc.res, Caps: tc.caps, Job: Job{ID: "1"}})
			require.NoError(t, err, log.String())
			assert.Equal(t, tc.want, prep.Pod.Name)
			assert.Contains(t, log.String(), tc.log)
			if tc.want == "s1" {
				assert.Empty(t, f.Colds(), "no pod made for the job")
				assert.Equal(t, []poolapi.ColdReason{poolapi.ColdNoIdle}, f.ColdReasons(), "claimed as a cold start")
				assert.Contains(t, log.String(), "job 1 runs on cold pod s1 (pool p)")
			} else {
				assert.Len(t, f.Colds(), 1)
			}
		})
	}
}
