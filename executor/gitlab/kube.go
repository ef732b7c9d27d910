//go:build !percall

package gitlab

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// KubePods carries out config and prepare on client-go: Driver.Pods of
// the full warmpod-gitlab.
type KubePods struct {
	// Cluster claims, creates and reaches pods.
	Cluster executor.Cluster
	// Pools is the pool manifest of --pools; nil: prepare reads the pools
	// from the cluster (Cluster.Pools), their live templates and hashes.
	Pools *pool.Set
	// Bounds are the highest resources a job may ask for through the
	// Kubernetes executor's overwrite variables (none: ignored).
	Bounds Bounds
}

// core is the CI-neutral executor of prepare: its claims and its execs
// are Cluster's (the job's multiplexer attaches to the pod it gets).
func (k *KubePods) core(d *Driver) *executor.Core {
	return &executor.Core{
		Session: session.Session{Cluster: d.timed(k.Cluster), Log: d.Stdout, LeaseTTL: d.Cfg.LeaseTTL, MaxStreamRetries: d.Cfg.MaxStreamRetries},
		Claims:  d.timedClaims(k.Cluster), WarmWait: d.Cfg.WarmWait, ReadyTimeout: d.Cfg.ReadyTimeout, ResizeTimeout: d.Cfg.ResizeTimeout,
		RBAC:      "deploy/gitlab-rbac.yaml",
		NodesRBAC: "the driver's account needs get and list on nodes, the ClusterRole warmpod-gitlab-nodes of deploy/gitlab-rbac.yaml, bound to it in its namespace (the binding names the namespace: docs/guides/gitlab-runner.md#rbac-of-the-driver)",
		Warn:      func(msg string) { fmt.Fprintf(d.Stdout, "warmpod: WARNING: %s\n", msg) }}
}

// Config prints config_exec's JSON ([Driver.Config]): builds and cache directories in the
// pod (not shared: every job has a pod of its own), the pool's name as the
// hostname, and the driver's name and version.
func (k *KubePods) Config(d *Driver) error {
	out := configOutput{BuildsDir: d.Cfg.BuildsDir, CacheDir: d.Cfg.CacheDir,
		Driver: map[string]string{"name": "warmpod", "version": d.Cfg.Version}}
	if k.Pools != nil {
		p, warm := k.Pools.ForImage(strings.TrimSpace(d.Env["CUSTOM_ENV_CI_JOB_IMAGE"]))
		out.Hostname = "warmpod-" + p.Name
		if !warm {
			out.Hostname += "-cold"
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(d.Stdout, "%s\n", b)
	return err
}

// Prepare ([Driver.Prepare]) gets a pod for the job and hands the job to it: a warm pod of
// the job image's pool when one is Ready within WarmWait, else a cold pod
// from the same template (or, for an image without a pool, from the
// default pool's template with the job's image). It then runs `warmpod
// job start` in the pod with the token on stdin (executor.Core.Prepare).
// Errors are SystemErrors; any pod this call claimed or created is
// deleted on failure.
func (k *KubePods) Prepare(ctx context.Context, d *Driver) error {
	t0 := d.Now()
	job, err := JobFromEnv(d.Env)
	if err != nil {
		return &SystemError{Err: err}
	}
	svcs, err := ServicesFromEnv(d.Env)
	if err != nil {
		return &SystemError{Err: err}
	}
	res, notes, err := Overwrites(d.Env, k.Bounds)
	if err != nil {
		return &SystemError{Err: err}
	}
	// The job's multiplexer starts now and sets up while the pool is read
	// and a pod claimed; it gets the pod when there is one.
	early := d.Mux.Early(d.muxKey(job))
	defer early.Close()
	for _, n := range notes {
		fmt.Fprintf(d.Stdout, "warmpod: %s\n", n)
	}
	vars, err := stagingVariables(d.Env, d.Cfg.BuildsDir)
	if err != nil {
		return &SystemError{Err: err}
	}
	c := k.core(d)
	c.Attach = d.timedAttach(early.Attacher(k.Cluster, job.ID, d.Stdout, d.Stdout))
	prep, err := c.Prepare(ctx, executor.Request{Pools: k.Pools, Image: job.Image, Sidecars: sidecars(svcs), Resources: res,
		Check: func(p pool.Pool) error { return checkHelper(d.Env, p) },
		Job:   executor.Job{ID: job.ID, Token: job.Token, Timeout: job.Timeout, Owner: d.owner(job), Variables: vars}})
	if err != nil {
		return err
	}
	pod := prep.Pod
	if !prep.ResizeSent.IsZero() {
		d.timing("resize", "", prep.ResizeSent, nil, prep.ResizeApplied)
	}
	if err := d.saveState(job, &state{Job: job.ID, Pod: pod}); err != nil {
		c.DeletePod(ctx, pod)
		d.Mux.Stop(d.muxKey(job), job.ID, pod, d.Stdout)
		return sysErr("state file: %v", err)
	}
	d.timing("prepare", "", t0, nil, time.Time{})
	return nil
}

// timedClaims is c with each claim a Span of d's timings.
func (d *Driver) timedClaims(c executor.Claims) executor.Claims {
	if d.Cfg.Timings == "" || c == nil {
		return c
	}
	return &timedClaims{Claims: c, d: d}
}

// timedClaims records each claim as a Span of its driver.
type timedClaims struct {
	executor.Claims
	d *Driver
}

func (t *timedClaims) ClaimWarm(ctx context.Context, p pool.Pool, owner poolapi.Owner, wait time.Duration, fit *corev1.ResourceRequirements) (*poolapi.Pod, error) {
	defer t.d.Span("claim warm (list idle pods, patch)", t.d.Now())
	return t.Claims.ClaimWarm(ctx, p, owner, wait, fit)
}

func (t *timedClaims) ClaimStarting(ctx context.Context, p pool.Pool, owner poolapi.Owner, why pool.Cold, timeout time.Duration) (*poolapi.Pod, error) {
	defer t.d.Span("claim a starting pod, wait Ready", t.d.Now())
	return t.Claims.ClaimStarting(ctx, p, owner, why, timeout)
}

func (t *timedClaims) CreateCold(ctx context.Context, p pool.Pool, owner poolapi.Owner, why pool.Cold, timeout time.Duration) (poolapi.Pod, error) {
	defer t.d.Span("create cold pod, wait Ready", t.d.Now())
	return t.Claims.CreateCold(ctx, p, owner, why, timeout)
}

func (t *timedClaims) Pools(ctx context.Context) (*pool.Set, error) {
	defer t.d.Span("read pools", t.d.Now())
	return t.Claims.Pools(ctx)
}
