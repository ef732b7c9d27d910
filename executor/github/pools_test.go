package github

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/fake"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// The pool Deployment "job" of the tests, as the API server holds it:
// its warmpod reads pod-template-hash (deploy/github-pool.yaml), and its
// live template runs jobImage.
const (
	jobImage = "localhost/hooks/job:v1"
	oldHash  = "old111" // the ReplicaSet of the template before an edit
	curHash  = "new222" // the ReplicaSet of the live template
)

func jobDeployment() *appsv1.Deployment {
	l := map[string]string{poolapi.LabelPool: "job", poolapi.LabelState: poolapi.StateIdle}
	env := []corev1.EnvVar{{Name: "WARMPOD_CONFIG_HASH", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + poolapi.LabelTemplateHash + "']"}}}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ci", UID: types.UID("uid-job"),
			Labels:      map[string]string{"app.kubernetes.io/name": "warmpod", "app.kubernetes.io/component": "pool"},
			Annotations: map[string]string{poolapi.AnnotationAlpine: "false"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "job", Image: jobImage, Command: []string{"/warmpod/warmpod"}, Env: env}}}}},
	}
}

// templateAt is d's template as it was when its job container ran image,
// labelled with the ReplicaSet's hash.
func templateAt(d *appsv1.Deployment, image, hash string) corev1.PodTemplateSpec {
	t := d.Spec.Template.DeepCopy()
	t.Labels[poolapi.LabelTemplateHash] = hash
	t.Spec.Containers[0].Image = image
	return *t
}

func replicaSetOf(d *appsv1.Deployment, image, hash string) *appsv1.ReplicaSet {
	yes := true
	t := templateAt(d, image, hash)
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-" + hash, Namespace: "ci", Labels: t.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Template: t}}
}

// readyPod is a Ready idle pod of d's ReplicaSet hash (its template when
// the job container ran image).
func readyPod(d *appsv1.Deployment, name, image, hash string) *corev1.Pod {
	t := templateAt(d, image, hash)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci", UID: types.UID("u-" + name), Labels: t.Labels},
		Spec: t.Spec, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

// clusterPools is a namespace with the pool "job" after an edit of its
// template (v0 → v1): a ReplicaSet of each, a Ready idle pod of the old
// one ("old-pod") and, with current, of the current one ("new-pod"), and
// a Deployment labelled as a pool that is not one (its selector keeps
// claimed pods).
func clusterPools(current bool) *pool.Cluster {
	d := jobDeployment()
	broken := jobDeployment()
	broken.Name, broken.UID = "broken", "uid-broken"
	broken.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{poolapi.LabelPool: "job"}}
	objs := []runtime.Object{d, broken, replicaSetOf(d, "localhost/hooks/job:v0", oldHash), replicaSetOf(d, jobImage, curHash),
		readyPod(d, "old-pod", "localhost/hooks/job:v0", oldHash)}
	if current {
		objs = append(objs, readyPod(d, "new-pod", jobImage, curHash))
	}
	return &pool.Cluster{Namespace: "ci", CS: kfake.NewClientset(objs...)}
}

// podState is the warmpod.dev/state label of pod name in k.
func podState(t *testing.T, k *pool.Cluster, name string) string {
	t.Helper()
	p, err := k.CS.CoreV1().Pods("ci").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p.Labels[poolapi.LabelState]
}

// Without --pools, prepare_job reads the pool Deployments once and claims
// only a pod of the pool's current ReplicaSet: the pod of the template
// before the edit stays idle, also when it is the only Ready one (the job
// then gets a cold pod of the live template, labelled with the current
// hash that warmpod compares). A Deployment that is not a usable pool is
// a ::warning:: line.
func TestPrepareJobReadsThePoolsFromTheCluster(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name     string
		current  bool // a Ready pod of the current ReplicaSet
		wantPod  string
		wantWarm bool
	}{
		{"a pod of the live template is claimed", true, "new-pod", true},
		{"an old template's pod is never claimed", false, "cold-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t)
			k := clusterPools(tc.current)
			f := &fakeCluster{Cluster: fake.Cluster{Kube: k}}
			h, out, errb := r.hook(f)
			h.Pods.(*KubePods).Pools = nil
			code, resp := r.call(h, CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: jobImage}}, nil, nil)
			require.Equal(t, 0, code, "stdout %s stderr %s", out, errb)
			assert.Equal(t, 1, f.PoolReads(), "one read of the pools per prepare_job")
			assert.Equal(t, tc.wantPod, resp.State.Pod.Name)
			assert.Equal(t, tc.wantWarm, resp.State.Pod.Warm)
			assert.Equal(t, poolapi.StateIdle, podState(t, k, "old-pod"), "the pod of the template before the edit is left alone")
			if tc.wantWarm {
				assert.Equal(t, poolapi.StateClaimed, podState(t, k, "new-pod"))
				assert.Equal(t, curHash, resp.State.Pod.Hash, "the job's config hash is the current ReplicaSet's: warmpod compares it with its pod-template-hash")
				assert.Empty(t, f.Colds())
			} else {
				require.Len(t, f.Colds(), 1)
				assert.Equal(t, jobImage, f.Colds()[0].Template.Spec.Containers[0].Image, "the live template")
				assert.Equal(t, curHash, f.Colds()[0].Template.Labels[poolapi.LabelTemplateHash], "the label the cold pod's warmpod reads")
			}
			require.Len(t, f.starts, 1)
			assert.Equal(t, resp.State.Pod.Hash, f.starts[0].ConfigHash)
			var warnings []string
			for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
				if strings.HasPrefix(l, "::warning::") {
					warnings = append(warnings, l)
				}
			}
			require.Len(t, warnings, 1, "stderr: %s", errb)
			assert.Contains(t, warnings[0], `::warning::warmpod: not a usable pool: pool manifest: Deployment "broken"`)
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				assert.True(t, strings.HasPrefix(l, "::debug::"), "only ::debug:: lines on stdout: %q", l)
			}
		})
	}
}

// The pools are read by the commands that get a pod (prepare_job,
// run_container_step), once each, and by no other; with --pools never.
func TestWhichCommandsReadThePools(t *testing.T) {
	defer goleak.VerifyNone(t)
	state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", UID: "u1", Bin: "/warmpod/warmpod"}, Runner: "runner-0", Server: "s"})
	sh := "sh"
	for _, tc := range []struct {
		name      string
		cmd       string
		args      any
		state     json.RawMessage
		file      bool // --pools
		wantReads int
	}{
		{"prepare_job", CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: jobImage}}, nil, false, 1},
		{"prepare_job with --pools", CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: jobImage}}, nil, true, 0},
		{"run_container_step", CmdRunContainerStep, Container{Image: jobImage, EntryPoint: &sh, EntryPointArgs: []string{"-c", "true"}}, nil, false, 1},
		{"run_container_step in a job", CmdRunContainerStep, Container{Image: jobImage, EntryPoint: &sh, EntryPointArgs: []string{"-c", "true"}}, state, false, 1},
		{"run_container_step with --pools", CmdRunContainerStep, Container{Image: jobImage, EntryPoint: &sh, EntryPointArgs: []string{"-c", "true"}}, nil, true, 0},
		{"run_script_step", CmdRunScriptStep, ScriptStepArgs{EntryPoint: "sh", EntryPointArgs: []string{"-c", "true"}}, state, false, 0},
		{"cleanup_job", CmdCleanupJob, struct{}{}, state, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t)
			k := clusterPools(true)
			f := &fakeCluster{Cluster: fake.Cluster{Kube: k}}
			h, out, errb := r.hook(f)
			// As warmpod-github wires it: KubePods connects its own
			// client, once, for the commands that get a pod.
			kp := h.Pods.(*KubePods)
			kp.Cluster = nil
			connects := 0
			kp.Connect = func() (executor.Cluster, error) { connects++; return f, nil }
			if !tc.file {
				kp.Pools = nil
			}
			code, _ := r.call(h, tc.cmd, tc.args, tc.state, nil)
			require.Equal(t, 0, code, "stdout %s stderr %s", out, errb)
			assert.Equal(t, tc.wantReads, f.PoolReads())
			assert.Equal(t, map[bool]int{true: 1, false: 0}[tc.cmd == CmdPrepareJob || tc.cmd == CmdRunContainerStep], connects)
			if tc.cmd == CmdRunContainerStep {
				// The file's pool hashes its own template: no pod of
				// the cluster's carries that, so only a read from the
				// cluster claims one.
				assert.Equal(t, map[bool]string{true: poolapi.StateIdle, false: poolapi.StateClaimed}[tc.file], podState(t, k, "new-pod"))
				assert.Equal(t, poolapi.StateIdle, podState(t, k, "old-pod"))
			}
		})
	}
}

// A read that fails (no rights, no pool Deployment) fails prepare_job
// with what to do, before anything is claimed or created.
func TestPrepareJobWhenThePoolsCannotBeRead(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name string
		kube *pool.Cluster
		want string
		rbac bool // the RBAC hint follows: a 403 only
	}{
		{"no pool Deployment", &pool.Cluster{Namespace: "ci", CS: kfake.NewClientset()}, "no usable pool Deployment", false},
		{"the API server fails", nil, "no pools in this fake", false},
		{"the API server forbids", &pool.Cluster{Namespace: "ci", CS: forbidsDeployments()}, "is forbidden", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t)
			f := &fakeCluster{Cluster: fake.Cluster{Kube: tc.kube}}
			h, _, errb := r.hook(f)
			h.Pods.(*KubePods).Pools = nil
			code, resp := r.call(h, CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: jobImage}}, nil, nil)
			assert.Equal(t, 1, code)
			assert.Nil(t, resp)
			assert.True(t, strings.HasPrefix(errb.String(), "::error::warmpod-github: read the pools from the cluster: "), errb.String())
			assert.Contains(t, errb.String(), tc.want)
			if tc.rbac {
				assert.Contains(t, errb.String(), "get and list on deployments and replicasets: deploy/github-rbac.yaml")
			} else {
				assert.NotContains(t, errb.String(), "deploy/github-rbac.yaml", "the RBAC hint is for a 403 only")
			}
			assert.Empty(t, f.Colds())
			assert.Empty(t, argvs(f))
		})
	}
}

// forbidsDeployments is a fake API server that answers 403 to a list of
// Deployments, as RBAC does.
func forbidsDeployments() *kfake.Clientset {
	cs := kfake.NewClientset()
	cs.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", errors.New("RBAC"))
	})
	return cs
}
