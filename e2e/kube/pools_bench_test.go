//go:build kube

package kubee2e

// make bench-pools: the job-arrival trace bench/pools-trace.csv (a working
// day compressed 150×, bench/cmd/poolstrace) replayed on the cluster three
// ways in one run, each in a fresh namespace, one after the other:
//
//   - no pools: the pools' Deployments at 0 replicas, no controller: every
//     job gets a cold pod (after the driver's warm wait, as an empty pool
//     makes it wait);
//   - fixed pools: 2 replicas per pool (GitLab's idle_count 2 per image),
//     no controller;
//   - warmpod-pools: the controller (package pools) running in this
//     process on the admin clientset, without leader election, with a
//     policy per pool (pbDayPolicies, replayed by pbSchedule) and the
//     namespace's budget (pbBudget);
//   - warmpod-pools with nothing written (pools_bench_learned_test.go):
//     no period, the controller on the compressed day's clock, seeded with
//     the profile the simulator learned from the week before; the
//     simulator's own figures for the day are set beside it.
//
// Each job goes through the drivers' claim path (executor/pool, as
// executor.Core.Acquire calls it): read the pools from the cluster,
// ClaimWarm with the drivers' default warm wait, else ClaimStarting (the
// pool's pod that is starting), else CreateCold with the reason the driver
// gives, then holds its pod for the job's duration and
// deletes it. A pod watch integrates the Ready idle pool pods over the
// replay. Skipped unless WARMPOD_POOLS_BENCH names the results file.
//
// For development: WARMPOD_POOLS_BENCH_MODES=none,fixed,pools,learned picks modes,
// WARMPOD_POOLS_BENCH_WINDOW=FROM-TO replays the trace's jobs arriving in
// [FROM, TO) replay seconds only; the results then say "partial run".

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/pools"
	"github.com/warmpod/warmpod/pools/poolsim"
)

// pbWarmWait is the drivers' default --warm-wait (warmpod-gitlab and
// warmpod-github): how long a job looks for a Ready idle pod before it
// creates a cold one.
const pbWarmWait = time.Second

// pbReadyTimeout bounds a cold pod's start (the drivers' --ready-timeout
// is 5 min; a cold pod that slow is a failed job here either way).
const pbReadyTimeout = 3 * time.Minute

// pbFixedReplicas is the fixed pools' size: GitLab's idle_count 2 per image.
const pbFixedReplicas = 2

// pbCompression is the trace's: one second of replay is 150 s of the day.
const pbCompression = 150

// pbResync is the controller's --resync: its default 10 s is 25 minutes
// of the compressed day, as long as a pool's whole idle_time; 1 s keeps
// the lag behind an idle_time's end small against the idle_times above.
const pbResync = time.Second

// pbServer is the owner label's server hash of the jobs (16 hex digits).
const pbServer = "be4c4b0015000000"

type pbJob struct {
	id         int
	at, hold   time.Duration
	day, pool  string
	kind       string
	inPipeline bool
}

type pbSegment struct {
	from, to time.Duration
	name     string
}

type pbTrace struct {
	jobs     []pbJob
	segments []pbSegment
	header   []string
	horizon  time.Duration
	partial  string
}

func pbSeconds(t *testing.T, s string) time.Duration {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, s)
	return time.Duration(f * float64(time.Second))
}

// pbLoadTrace reads bench/pools-trace.csv.
func pbLoadTrace(t *testing.T, file string) pbTrace {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	var tr pbTrace
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#segment,"):
			p := strings.SplitN(line, ",", 4)
			require.Len(t, p, 4, line)
			s := pbSegment{from: pbSeconds(t, p[1]), to: pbSeconds(t, p[2]), name: p[3]}
			tr.segments = append(tr.segments, s)
			tr.horizon = max(tr.horizon, s.to)
		case strings.HasPrefix(line, "#"):
			tr.header = append(tr.header, strings.TrimSpace(strings.TrimPrefix(line, "#")))
		case strings.HasPrefix(line, "id,"):
		default:
			p := strings.Split(line, ",")
			require.Len(t, p, 6, line)
			id, err := strconv.Atoi(p[0])
			require.NoError(t, err, line)
			tr.jobs = append(tr.jobs, pbJob{id: id, at: pbSeconds(t, p[1]), day: p[2], pool: p[3], hold: pbSeconds(t, p[4]),
				kind: p[5], inPipeline: p[5] == "pipeline"})
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, tr.jobs)
	require.NotZero(t, tr.horizon)
	return tr
}

// window keeps the jobs arriving in [from, to), shifted to start at 0.
func (tr pbTrace) window(t *testing.T, spec string) pbTrace {
	t.Helper()
	a, b, ok := strings.Cut(spec, "-")
	require.True(t, ok, "WARMPOD_POOLS_BENCH_WINDOW=%q: want FROM-TO in replay seconds", spec)
	from, to := pbSeconds(t, a), pbSeconds(t, b)
	out := tr
	out.jobs = nil
	for _, j := range tr.jobs {
		if j.at >= from && j.at < to {
			j.at -= from
			out.jobs = append(out.jobs, j)
		}
	}
	out.segments = nil
	for _, s := range tr.segments {
		if s.to > from && s.from < to {
			s.from, s.to = max(s.from, from)-from, min(s.to, to)-from
			out.segments = append(out.segments, s)
		}
	}
	out.horizon = to - from
	out.partial = fmt.Sprintf("replay seconds %s to %s of the trace only", a, b)
	return out
}

// pools are the pools of the whole trace (also those a window has no job of).
func (tr pbTrace) pools() []string { return pbPoolNames() }

// pbPoolNames are the pools, sorted: those pbDayPolicies has a policy for.
func pbPoolNames() []string {
	var out []string
	for n := range pbDayPolicies {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type pbMode struct {
	key, name  string
	replicas   int32
	controller bool
	learned    bool // nothing written: pools_bench_learned_test.go
}

var pbModes = []pbMode{
	{key: "none", name: "no pools"},
	{key: "fixed", name: fmt.Sprintf("fixed pools (%d per pool)", pbFixedReplicas), replicas: pbFixedReplicas},
	{key: "pools", name: "warmpod-pools", controller: true},
	{key: "learned", name: "warmpod-pools, nothing written", controller: true, learned: true},
}

// pbResult is one job's fate.
type pbResult struct {
	job        pbJob
	warm       bool
	err        error
	wait       time.Duration // arrival → the claim path returned a Ready pod
	coldStart  time.Duration // ClaimStarting's or CreateCold's own time (cold jobs)
	starting   bool          // a cold job that took a starting pool pod (ClaimStarting)
	late       time.Duration // the replay's own lateness starting the job
	idleOnTime int           // Ready idle pods of the job's pool at its arrival
	// coldClaim is when a cold job's driver claimed (its starting pool
	// pod's AnnotationClaimedAt, or just before it made its cold pod).
	coldClaim time.Time
	// claimedStarting: ClaimStarting failed and the job then made a cold
	// pod. Its claim is the starting pod's it claimed, if it claimed one
	// that was not Ready in time (the watch saw its claimed-at); none
	// after an API error before any claim.
	claimedStarting bool
}

func TestPoolsBench(t *testing.T) {
	out := os.Getenv("WARMPOD_POOLS_BENCH")
	if out == "" {
		t.Skip("WARMPOD_POOLS_BENCH is not set (make bench-pools sets it)")
	}
	tr := pbLoadTrace(t, filepath.Join(repoRoot, "bench/pools-trace.csv"))
	if w := os.Getenv("WARMPOD_POOLS_BENCH_WINDOW"); w != "" {
		tr = tr.window(t, w)
	}
	modes := pbModes
	if m := os.Getenv("WARMPOD_POOLS_BENCH_MODES"); m != "" {
		modes = nil
		for _, md := range pbModes {
			if strings.Contains(","+m+",", ","+md.key+",") {
				modes = append(modes, md)
			}
		}
		require.NotEmpty(t, modes, "WARMPOD_POOLS_BENCH_MODES=%q: want some of none,fixed,pools,learned", m)
		if len(modes) < len(pbModes) {
			tr.partial = strings.TrimPrefix(tr.partial+"; modes "+m, "; ")
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	require.NoError(t, err)
	began := time.Now()
	var profiles map[string]string // the learned mode's start
	for _, md := range modes {
		if md.learned {
			profiles = pbSimHistory(t)
			t.Logf("profiles learned by the simulator from the history: %s", pbProfileNote(profiles))
		}
	}
	var runs []*pbRun
	for _, md := range modes {
		t.Run(md.key, func(t *testing.T) {
			r := pbReplay(t, rc, md, tr, profiles)
			runs = append(runs, r)
			t.Logf("%s: %s", md.name, r.summary())
		})
	}
	require.Len(t, runs, len(modes), "a mode failed")
	md := pbReport(t, rc, tr, runs, profiles, time.Since(began))
	t.Log("\n" + md)
	require.NoError(t, os.WriteFile(out, []byte(md), 0o644))
	t.Logf("written to %s", out)
}

// pbRun is what one mode's replay measured.
type pbRun struct {
	mode     pbMode
	ns       string
	results  []pbResult
	meter    *pbMeter
	load     *pbLoad
	took     time.Duration
	scale    map[string]map[string]float64 // pool → "up demand" → changes
	apiErrs  map[string]float64            // operation → failed writes
	statuses map[string]pools.Status
	logFile  string
	podLog   string // the meter's "pod gone" lines (pbMeter.log)
	t0       time.Time
	// sched is the policy changes the harness wrote (warmpod-pools), and
	// schedLate how late each was written.
	sched     []pbPolicyChange
	schedLate []time.Duration
}

func (r *pbRun) summary() string {
	w, n := 0, 0
	for _, x := range r.results {
		n++
		if x.warm {
			w++
		}
	}
	return fmt.Sprintf("%d/%d warm, idle %.0f pod-s, took %s", w, n, r.meter.total(), r.took.Round(time.Second))
}

// pbPoolDeployment is deploy/kube-e2e/pool.yaml as pool name: without
// GitLab Runner's helper (no job runs in the pods: the claim path is what
// is measured) and its cache volume, and without its probes. kube-e2e's
// pods share the node's network, so its template probes by exec, and an
// exec probe is a runc exec per pod per second: 40 idle pods of that
// template kept both cores of the kube-e2e machine busy (load average
// 59, no idle CPU), so pod starts took a minute and the figures measured
// the probes. deploy/pool.yaml probes over HTTP, which costs the node
// next to nothing; without a probe a pod is Ready as soon as warmpod's
// container runs, where an HTTP probe every second says so within a
// second.
func pbPoolDeployment(t *testing.T, name string, replicas int32, policy string) *appsv1.Deployment {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/kube-e2e/pool.yaml"))
	require.NoError(t, err)
	var d appsv1.Deployment
	require.NoError(t, yaml.Unmarshal(raw, &d))
	d.Name = name
	d.Spec.Replicas = &replicas
	d.Spec.Selector.MatchLabels[poolapi.LabelPool] = name
	d.Spec.Template.Labels[poolapi.LabelPool] = name
	if policy != "" {
		d.Annotations = map[string]string{poolapi.AnnotationPolicy: policy}
	}
	spec := &d.Spec.Template.Spec
	drop := map[string]bool{"gitlab-helper": true, "cache": true}
	var inits []corev1.Container
	for _, c := range spec.InitContainers {
		if c.Name != "install-gitlab-runner-helper" {
			inits = append(inits, c)
		}
	}
	spec.InitContainers = inits
	var vols []corev1.Volume
	for _, v := range spec.Volumes {
		if !drop[v.Name] {
			vols = append(vols, v)
		}
	}
	spec.Volumes = vols
	c := &spec.Containers[0]
	var mounts []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if !drop[m.Name] {
			mounts = append(mounts, m)
		}
	}
	c.VolumeMounts = mounts
	c.ReadinessProbe, c.LivenessProbe = nil, nil
	// The simulator's check plays the pods' idle deadline (pbSimConfig).
	var deadline time.Duration
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--idle-timeout="); ok {
			deadline, err = time.ParseDuration(v)
			require.NoError(t, err, a)
		}
	}
	require.Equal(t, pbPodIdleTimeout, deadline, "deploy/kube-e2e/pool.yaml's --idle-timeout, which pbPodIdleTimeout gives the simulator")
	return &d
}

// pbReplay runs the trace in a fresh namespace in one mode.
func pbReplay(t *testing.T, rc *rest.Config, md pbMode, tr pbTrace, profiles map[string]string) *pbRun {
	ns := newNamespace(t, "pb-"+md.key, true)
	run := &pbRun{mode: md, ns: ns}
	cs := pbClientset(t, rc, 50, 100)
	ctx, cancel := context.WithTimeout(context.Background(), tr.horizon+10*time.Minute)
	defer cancel()
	sched := pbSchedule(t, tr.horizon)
	for _, name := range tr.pools() {
		policy := ""
		if md.controller {
			policy = pbInitialPolicy(sched, name)
		}
		d := pbPoolDeployment(t, name, md.replicas, policy)
		if md.learned {
			d.Annotations = map[string]string{poolapi.AnnotationPolicy: poolsim.LearnedPolicy, poolapi.AnnotationProfile: profiles[name]}
		}
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	k := &pool.Cluster{CS: cs, Config: rc, Namespace: ns}
	waitFor(t, 2*time.Minute, "every pool's ReplicaSet, and its replicas Ready and idle", func() (bool, string) {
		set, err := k.Pools(ctx)
		if err != nil {
			return false, err.Error()
		}
		var why []string
		for _, p := range set.Pools {
			if p.Pending {
				why = append(why, p.Name+" pending")
			}
		}
		ready := map[string]int{}
		for _, pd := range poolPods(t, ns) {
			if pd.ready() {
				ready[pd.Metadata.Labels[poolapi.LabelPool]]++
			}
		}
		for _, name := range tr.pools() {
			if ready[name] != int(md.replicas) {
				why = append(why, fmt.Sprintf("%s has %d Ready", name, ready[name]))
			}
		}
		return len(why) == 0, strings.Join(why, ", ")
	})

	// The previous mode's pods are gone with its namespace; let the node
	// settle too (its 1-minute load average below 4, for at most 3
	// minutes), so that one mode's tail does not slow the next one's start.
	settle := time.Now()
	for pbLoad1() >= 4 && time.Since(settle) < 3*time.Minute {
		time.Sleep(5 * time.Second)
	}
	// The replay starts at t0; the watch and the controller before it.
	t0 := time.Now().Add(5 * time.Second)
	run.t0 = t0
	run.podLog = filepath.Join(os.TempDir(), "warmpod-pools-bench-"+ns+"-pods.log")
	pf, err := os.Create(run.podLog)
	require.NoError(t, err)
	defer pf.Close()
	t.Logf("pool pods' log: %s", run.podLog)
	run.meter = pbWatch(t, ctx, cs, ns, t0, tr, slog.New(slog.NewTextHandler(pf, nil)))
	run.load = pbWatchLoad(ctx, cs, ns)
	var stopController func()
	if md.controller {
		run.logFile = filepath.Join(os.TempDir(), "warmpod-pools-bench-"+ns+".log")
		if md.learned {
			// The day's clock: resync, batch and the retire grace are
			// given on it, so that each lasts its wall-clock time (a
			// grace of 30 s of the day, 0.2 s, would take a retiring
			// mark off before the ReplicaSet removed the pod).
			cfg := pools.Config{Namespace: ns, Budget: pbBudget, Resync: pbResync * pbCompression, Batch: pools.DefaultBatch * pbCompression,
				RetireGrace: pools.DefaultRetireGrace * pbCompression}
			stopController = pbStartController(t, rc, cfg, pbDayClock{t0: t0}, run)
		} else {
			stopController = pbStartController(t, rc, pools.Config{Namespace: ns, Budget: pbBudget, Resync: pbResync}, clock.RealClock{}, run)
			sctx, stop := context.WithCancel(ctx)
			late, wait := pbApplySchedule(sctx, t, cs, ns, t0, sched)
			defer func() { stop(); wait(); run.sched, run.schedLate = sched, late }()
		}
	}

	results := make([]pbResult, len(tr.jobs))
	var wg sync.WaitGroup
	for i, j := range tr.jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(t0.Add(j.at)))
			results[i] = pbClaimPath(ctx, rc, ns, j, t0, run.meter)
		}()
	}
	wg.Wait()
	time.Sleep(time.Until(t0.Add(tr.horizon)))
	run.meter.stop()
	run.load.stop()
	run.took = time.Since(t0)
	for i, r := range results {
		if r.starting || r.claimedStarting {
			results[i].coldClaim = run.meter.coldClaimOf(strconv.Itoa(r.job.id))
		}
	}
	run.results = results
	if stopController != nil {
		stopController()
		run.statuses = map[string]pools.Status{}
		for _, name := range tr.pools() {
			d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
			require.NoError(t, err)
			var st pools.Status
			_ = json.Unmarshal([]byte(d.Annotations[poolapi.AnnotationSizing]), &st)
			run.statuses[name] = st
		}
	}
	// Leave nothing running for the next mode: the namespace's deletion
	// (newNamespace's clean-up) then has only Terminating pods to wait for.
	for _, name := range tr.pools() {
		_ = cs.AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	for _, r := range results {
		if r.err != nil {
			t.Logf("job %d (%s, %s): %v", r.job.id, r.job.pool, r.job.day, r.err)
		}
	}
	return run
}

// pbLoad1 is the 1-minute load average (0 when unreadable).
func pbLoad1() float64 {
	var one float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		_, _ = fmt.Sscan(string(b), &one)
	}
	return one
}

func pbClientset(t *testing.T, rc *rest.Config, qps float32, burst int) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(rc)
	c.QPS, c.Burst = qps, burst
	cs, err := kubernetes.NewForConfig(c)
	require.NoError(t, err)
	return cs
}

// pbClaimPath is one job as a driver's prepare and cleanup run it: the
// pools read from the cluster (a driver process does it at each prepare),
// a warm claim within the warm wait, else a cold pod with the reason
// executor.Core.Acquire gives; the pod is held for the job's duration,
// then deleted. The client is the job's own, with the drivers' limits
// (internal/kubeclient), as each driver process has its own.
func pbClaimPath(ctx context.Context, rc *rest.Config, ns string, j pbJob, t0 time.Time, m *pbMeter) pbResult {
	arrival := t0.Add(j.at)
	r := pbResult{job: j, late: time.Since(arrival), idleOnTime: m.idleOf(j.pool)}
	c := rest.CopyConfig(rc)
	c.QPS, c.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		r.err = err
		return r
	}
	k := &pool.Cluster{CS: cs, Config: c, Namespace: ns}
	set, err := k.Pools(ctx)
	if err != nil {
		r.err = err
		return r
	}
	var p *pool.Pool
	for i := range set.Pools {
		if set.Pools[i].Name == j.pool {
			p = &set.Pools[i]
		}
	}
	if p == nil {
		r.err = fmt.Errorf("no pool %s", j.pool)
		return r
	}
	owner := poolapi.Owner{Job: strconv.Itoa(j.id), Server: pbServer}
	began := time.Now()
	pod, err := k.ClaimWarm(ctx, *p, owner, pbWarmWait, nil)
	if err != nil {
		r.err = fmt.Errorf("claim: %w", err)
		return r
	}
	if pod != nil {
		r.warm = true
	} else {
		why := pool.Cold{Reason: poolapi.ColdNoIdle, Waited: time.Since(began)}
		if p.Pending {
			why.Reason = poolapi.ColdPending
		}
		coldAt := time.Now()
		timeout := pbReadyTimeout
		if !p.Pending {
			// As executor.Core.notWarm: the pool's pod that is starting,
			// then a cold pod with what is left of the timeout.
			sp, err := k.ClaimStarting(ctx, *p, owner, why, pbReadyTimeout)
			if sp != nil && err == nil {
				r.starting, pod = true, sp
			}
			r.claimedStarting = err != nil
			timeout = max(pbReadyTimeout-time.Since(coldAt), pbReadyTimeout/4)
		}
		if pod == nil && !r.claimedStarting {
			r.coldClaim = time.Now()
		}
		if pod == nil {
			cold, err := k.CreateCold(ctx, *p, owner, why, timeout)
			if err != nil {
				r.err = fmt.Errorf("cold pod: %w", err)
				return r
			}
			pod = &cold
		}
		r.coldStart = time.Since(coldAt)
	}
	r.wait = time.Since(arrival)
	time.Sleep(j.hold)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := k.Delete(dctx, *pod); err != nil {
		r.err = fmt.Errorf("delete: %w", err)
	}
	return r
}

// pbStartController runs the pool controller in this process, as
// warmpod-pools runs it once it leads, on the admin kubeconfig with
// warmpod-pools' default client limits, its Events recorded in the
// namespace and its log in run.logFile. The returned func stops it and
// fills run.scale from its metrics.
func pbStartController(t *testing.T, rc *rest.Config, cfg pools.Config, clk clock.WithTicker, run *pbRun) func() {
	ns := cfg.Namespace
	t.Helper()
	cs := pbClientset(t, rc, 20, 40)
	lf, err := os.Create(run.logFile)
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(lf, nil))
	reg := prometheus.NewRegistry()
	m, err := pools.NewMetrics(reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	bc := record.NewBroadcaster(record.WithContext(ctx))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(ns)})
	rec := bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "warmpod-pools"})
	c := pools.New(cs, cfg, log, clk, rec, m)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Logf("controller log: %s", run.logFile)
	return func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("the controller did not stop within 30 s")
		}
		bc.Shutdown()
		lf.Close()
		run.scale, run.apiErrs = pbControllerMetrics(t, reg)
	}
}

// pbControllerMetrics reads warmpod_pool_scale_changes_total (pool →
// "up demand" → count) and warmpod_pools_api_errors_total (operation →
// count).
func pbControllerMetrics(t *testing.T, reg *prometheus.Registry) (map[string]map[string]float64, map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	scale, errs := map[string]map[string]float64{}, map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetName() {
			case "warmpod_pool_scale_changes_total":
				if scale[l["pool"]] == nil {
					scale[l["pool"]] = map[string]float64{}
				}
				scale[l["pool"]][l["direction"]+" "+l["reason"]] += m.GetCounter().GetValue()
			case "warmpod_pools_api_errors_total":
				errs[l["operation"]] += m.GetCounter().GetValue()
			}
		}
	}
	return scale, errs
}

// ---------------------------------------------------------------- the pod watch

// pbMeter integrates, from a pod watch (an informer), the Ready idle pool
// pods (warmpod.dev/state=idle, Ready, not terminating; retiring ones
// included: they still hold their requests) and the starting ones over
// [from, to], per pool and per segment of the trace.
type pbMeter struct {
	mu       sync.Mutex
	from, to time.Time
	segs     []pbSegment
	last     time.Time
	state    map[types.UID]pbPodState
	idleSec  map[string][]float64 // pool → per segment
	startSec map[string][]float64
	maxIdle  int
	maxPods  int
	created  int
	started  []time.Duration // creation → Ready of pods created in the window
	// samples are the same pods' times as the watch saw them (made, Ready,
	// deleted; millisecond resolution), for the simulator's start model.
	samples map[types.UID]*poolsim.StartSample
	halt    chan struct{}
	// log gets a "pod gone" line when a pool pod leaves its pool, in
	// the simulator's words (poolsim.Config.Log), on the day's clock.
	log *slog.Logger
	// coldClaims are the cold claims of starting pool pods
	// (ClaimStarting) by job: when the driver claimed (its
	// AnnotationClaimedAt), for the simulator's claim model.
	coldClaims map[string]time.Time
}

type pbPodState struct {
	pool                    string
	idle, starting          bool
	live, readySeen, inside bool
}

func pbWatch(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string, t0 time.Time, tr pbTrace, log *slog.Logger) *pbMeter {
	t.Helper()
	m := &pbMeter{from: t0, to: t0.Add(tr.horizon), segs: tr.segments, last: time.Now(), state: map[types.UID]pbPodState{},
		idleSec: map[string][]float64{}, startSec: map[string][]float64{}, halt: make(chan struct{}),
		samples: map[types.UID]*poolsim.StartSample{}, coldClaims: map[string]time.Time{}, log: log}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.observe(o, false) },
		UpdateFunc: func(_, o any) { m.observe(o, false) },
		DeleteFunc: func(o any) { m.observe(o, true) },
	})
	require.NoError(t, err)
	f.Start(m.halt)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	return m
}

func (m *pbMeter) observe(o any, deleted bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok || p.Labels[poolapi.LabelPool] == "" {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(now)
	prev, known := m.state[p.UID]
	st := pbPodState{pool: p.Labels[poolapi.LabelPool], readySeen: prev.readySeen, inside: prev.inside}
	terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if !deleted && p.DeletionTimestamp == nil && !terminal {
		st.live = true
		idle := p.Labels[poolapi.LabelState] == poolapi.StateIdle
		st.idle = idle && pool.PodReady(p)
		st.starting = idle && !pool.PodReady(p)
	}
	if !known {
		created := p.CreationTimestamp.Time
		// Second resolution: a pod made in t0's second counts as the
		// replay's; so do those of the jobs still running after its end.
		st.inside = !created.Before(m.from.Truncate(time.Second))
		if st.inside {
			m.created++
			m.samples[p.UID] = &poolsim.StartSample{Made: now}
		}
	}
	sample := m.samples[p.UID]
	if ready, at := pbReadyAt(p); ready && !st.readySeen {
		st.readySeen = true
		if st.inside {
			m.started = append(m.started, at.Sub(p.CreationTimestamp.Time))
			if sample != nil {
				sample.Ready = now
			}
		}
	}
	if sample != nil && sample.Gone.IsZero() && (deleted || p.DeletionTimestamp != nil || terminal) {
		sample.Gone = now
	}
	if (prev.idle || prev.starting) && !st.idle && !st.starting {
		m.gone(p, prev.idle, deleted || p.DeletionTimestamp != nil || terminal, now)
	}
	if at, err := time.Parse(time.RFC3339Nano, p.Annotations[poolapi.AnnotationClaimedAt]); err == nil && p.Annotations[poolapi.AnnotationColdReason] != "" {
		m.coldClaims[p.Labels[poolapi.LabelJob]] = at
	}
	m.state[p.UID] = st
	if deleted {
		delete(m.state, p.UID)
	}
	idle, live := 0, 0
	for _, s := range m.state {
		if s.idle {
			idle++
		}
		if s.live {
			live++
		}
	}
	if now.After(m.from) && now.Before(m.to) {
		m.maxIdle, m.maxPods = max(m.maxIdle, idle), max(m.maxPods, live)
	}
}

// coldClaimOf is when job's driver claimed a starting pool pod (zero:
// not seen).
func (m *pbMeter) coldClaimOf(job string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.coldClaims[job]
}

// gone logs pool pod p's leaving its pool now: claimed (Ready or
// starting) or deleted, in poolsim.PodGone's words, its times on the
// day's clock (pbDayTime). A pod at its idle deadline is "removed" here
// (the pods' deadline is past any replay), and so is a claimed pod whose
// claim the watch missed, seeing only its deletion. Called with mu held.
func (m *pbMeter) gone(p *corev1.Pod, wasIdle, deleted bool, now time.Time) {
	day := func(t time.Time) time.Time { return pbDayTime(t.Sub(m.from)) }
	how, ready := poolsim.GoneClaimed, "-"
	switch {
	case deleted:
		how = poolsim.GoneRemoved
	case !wasIdle:
		how = poolsim.GoneClaimedStarting
	}
	if ok, at := pbReadyAt(p); ok && wasIdle {
		ready = day(at).Format(time.RFC3339)
	}
	m.log.Info("pod gone", "at", day(now), "pool", p.Labels[poolapi.LabelPool], "made", day(p.CreationTimestamp.Time).Format(time.RFC3339), "ready", ready, "how", string(how))
}

// startSamples are the watched pods' times, for poolsim.FitStarts.
func (m *pbMeter) startSamples() []poolsim.StartSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]poolsim.StartSample, 0, len(m.samples))
	for _, s := range m.samples {
		out = append(out, *s)
	}
	return out
}

// pbReadyAt tells whether pod is Ready and since when (its condition's
// transition time, second resolution).
func pbReadyAt(p *corev1.Pod) (bool, time.Time) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// advance adds the current counts × the time since the last event, split
// over the segments, within [from, to]. Called with mu held.
func (m *pbMeter) advance(now time.Time) {
	a, b := m.last, now
	m.last = now
	if a.Before(m.from) {
		a = m.from
	}
	if b.After(m.to) {
		b = m.to
	}
	if !b.After(a) {
		return
	}
	for _, s := range m.state {
		if !s.idle && !s.starting {
			continue
		}
		acc := m.startSec
		if s.idle {
			acc = m.idleSec
		}
		if acc[s.pool] == nil {
			acc[s.pool] = make([]float64, len(m.segs))
		}
		for i, seg := range m.segs {
			lo, hi := m.from.Add(seg.from), m.from.Add(seg.to)
			if lo.Before(a) {
				lo = a
			}
			if hi.After(b) {
				hi = b
			}
			if hi.After(lo) {
				acc[s.pool][i] += hi.Sub(lo).Seconds()
			}
		}
	}
}

func (m *pbMeter) stop() {
	m.mu.Lock()
	m.advance(time.Now())
	m.mu.Unlock()
	close(m.halt)
}

// idleOf is the Ready idle pods of pool name now.
func (m *pbMeter) idleOf(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.state {
		if s.idle && s.pool == name {
			n++
		}
	}
	return n
}

// pbSum adds acc's figures of segment seg (-1: all segments).
func pbSum(acc map[string][]float64, seg int) float64 {
	v := 0.0
	for _, per := range acc {
		for i, x := range per {
			if seg < 0 || i == seg {
				v += x
			}
		}
	}
	return v
}

func (m *pbMeter) total() float64 { return pbSum(m.idleSec, -1) }

// ---------------------------------------------------------------- other load

// pbLoad samples, every 15 s, the load average and the pods of other
// namespaces: what else ran on the node during the replay.
type pbLoad struct {
	mu       sync.Mutex
	loads    []float64
	maxOther int
	otherNS  map[string]bool
	halt     chan struct{}
	haltOnce sync.Once
}

func pbWatchLoad(ctx context.Context, cs kubernetes.Interface, ns string) *pbLoad {
	l := &pbLoad{otherNS: map[string]bool{}, halt: make(chan struct{})}
	sample := func() {
		one := pbLoad1()
		n := 0
		var seen []string
		if list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range list.Items {
				if p.Namespace == ns || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				n++
				seen = append(seen, p.Namespace)
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, s := range seen {
			l.otherNS[s] = true
		}
		l.loads = append(l.loads, one)
		l.maxOther = max(l.maxOther, n)
	}
	go func() {
		tk := time.NewTicker(15 * time.Second)
		defer tk.Stop()
		sample()
		for {
			select {
			case <-l.halt:
				return
			case <-ctx.Done():
				return
			case <-tk.C:
				sample()
			}
		}
	}()
	return l
}

func (l *pbLoad) stop() { l.haltOnce.Do(func() { close(l.halt) }) }

func (l *pbLoad) describe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.loads) == 0 {
		return "not sampled"
	}
	sum, hi := 0.0, 0.0
	for _, v := range l.loads {
		sum += v
		hi = max(hi, v)
	}
	var other []string
	for ns := range l.otherNS {
		other = append(other, ns)
	}
	sort.Strings(other)
	s := fmt.Sprintf("load average (1 min) mean %.2f, max %.2f", sum/float64(len(l.loads)), hi)
	if l.maxOther > 0 {
		s += fmt.Sprintf("; up to %d pods of other namespaces (%s)", l.maxOther, strings.Join(other, ", "))
	} else {
		s += "; no pod of another namespace"
	}
	return s
}

// ---------------------------------------------------------------- the report

func pbPercentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func pbSec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// pbStats are a set of jobs' figures.
type pbStats struct {
	n, warm, failed int
	waits           []time.Duration
	warmWaits       []time.Duration
	coldWaits       []time.Duration
	coldStarts      []time.Duration
	late            time.Duration
}

func pbStatsOf(rs []pbResult, keep func(pbResult) bool) pbStats {
	var s pbStats
	for _, r := range rs {
		if !keep(r) {
			continue
		}
		s.n++
		s.late = max(s.late, r.late)
		switch {
		case r.err != nil:
			s.failed++
		case r.warm:
			s.warm++
			s.waits = append(s.waits, r.wait)
			s.warmWaits = append(s.warmWaits, r.wait)
		default:
			s.waits = append(s.waits, r.wait)
			s.coldWaits = append(s.coldWaits, r.wait)
			s.coldStarts = append(s.coldStarts, r.coldStart)
		}
	}
	return s
}

func (s pbStats) rate() float64 {
	if s.n == 0 {
		return 0
	}
	return float64(s.warm) / float64(s.n)
}

func (s pbStats) warmCell() string {
	c := fmt.Sprintf("%d/%d (%.0f %%)", s.warm, s.n, 100*s.rate())
	if s.failed > 0 {
		c += fmt.Sprintf(", %d failed", s.failed)
	}
	return c
}

func pbWaitCell(d []time.Duration) string {
	if len(d) == 0 {
		return "–"
	}
	return pbSec(pbPercentile(d, 0.5)) + " / " + pbSec(pbPercentile(d, 0.95))
}

func pbMachine(cs kubernetes.Interface) string {
	model := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	kv := "?"
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		kv = v.GitVersion
	}
	return fmt.Sprintf("%d CPUs (%s), %s memory, Linux %s; the single-node kube-e2e cluster (Kubernetes %s: API server, controller manager, kubelet and containerd on this machine)",
		runtime.NumCPU(), model, mem, strings.TrimSpace(string(kernel)), kv)
}

// pbReport writes bench/pools.md.
func pbReport(t *testing.T, rc *rest.Config, tr pbTrace, runs []*pbRun, profiles map[string]string, took time.Duration) string {
	t.Helper()
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# Pools that size themselves: a compressed working day (make bench-pools)\n\n")
	w("Measured %s by `make bench-pools` ([e2e/kube/pools_bench_test.go](../e2e/kube/pools_bench_test.go)): %d modes in %s, one after the other. Machine: %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), len(runs), took.Round(time.Second), pbMachine(pbClientset(t, rc, 5, 10)))
	if tr.partial != "" {
		w("**Partial run: %s.** The targets below are only meaningful for a full run.\n\n", tr.partial)
	}
	pbWriteTrace(w, tr)
	pbWriteTable(w, runs)
	pbWriteTargets(w, runs)
	pbWriteSimCheck(w, t, tr, runs, profiles)
	pbWriteSegments(w, tr, runs)
	pbWriteController(w, runs)
	pbWriteTimeline(w, tr, runs)
	pbWriteMethod(w, tr)
	if notes, err := os.ReadFile(filepath.Join(repoRoot, "bench/pools-notes.md")); err == nil {
		w("\n## Notes (hand-maintained: bench/pools-notes.md)\n\n%s", notes)
	}
	return b.String()
}

func pbWriteTrace(w func(string, ...any), tr pbTrace) {
	per := map[string]int{}
	pipe := 0
	for _, j := range tr.jobs {
		per[j.pool]++
		if j.inPipeline {
			pipe++
		}
	}
	w("## The trace\n\n[`bench/pools-trace.csv`](pools-trace.csv), generated once by [`bench/cmd/poolstrace`](cmd/poolstrace/main.go): %d jobs (", len(tr.jobs))
	for i, p := range tr.pools() {
		if i > 0 {
			w(", ")
		}
		w("%s %d", p, per[p])
	}
	w("), %d of them the pipeline, over %s of replay.\n\n", pipe, tr.horizon)
	for _, h := range tr.header {
		if !strings.HasPrefix(h, "Job arrivals") && !strings.HasPrefix(h, "Columns") {
			w("- %s\n", h)
		}
	}
	w("- Compression factor **%d**: one second of replay is %d s of the day. Job durations and pod start times are not compressed: they are what the cluster does.\n\n", pbCompression, pbCompression)
}

func pbWriteTable(w func(string, ...any), runs []*pbRun) {
	w("## Results\n\n|  |")
	for _, r := range runs {
		w(" %s |", r.mode.name)
	}
	w("\n|---|")
	for range runs {
		w("---:|")
	}
	w("\n")
	row := func(name string, f func(r *pbRun) string) {
		w("| %s |", name)
		for _, r := range runs {
			w(" %s |", f(r))
		}
		w("\n")
	}
	all := func(pbResult) bool { return true }
	pipe := func(x pbResult) bool { return x.job.inPipeline }
	row("**warm claims**, all jobs", func(r *pbRun) string { return "**" + pbStatsOf(r.results, all).warmCell() + "**" })
	row("**warm claims, the 30-job pipeline**", func(r *pbRun) string { return "**" + pbStatsOf(r.results, pipe).warmCell() + "**" })
	row("**wait p50 / p95**, all jobs (arrival → a Ready pod held)", func(r *pbRun) string { return pbWaitCell(pbStatsOf(r.results, all).waits) })
	row("wait p50 / p95, the pipeline", func(r *pbRun) string { return pbWaitCell(pbStatsOf(r.results, pipe).waits) })
	row("wait p50 / p95, warm jobs", func(r *pbRun) string { return pbWaitCell(pbStatsOf(r.results, all).warmWaits) })
	row("wait p50 / p95, cold jobs", func(r *pbRun) string { return pbWaitCell(pbStatsOf(r.results, all).coldWaits) })
	row("cold pod → Ready p50 / p95 (ClaimStarting or CreateCold)", func(r *pbRun) string { return pbWaitCell(pbStatsOf(r.results, all).coldStarts) })
	row("cold jobs that took a starting pool pod (ClaimStarting)", func(r *pbRun) string {
		n, cold := 0, 0
		for _, x := range r.results {
			if x.err == nil && !x.warm {
				cold++
				if x.starting {
					n++
				}
			}
		}
		return fmt.Sprintf("%d/%d", n, cold)
	})
	row("**idle pod-seconds** (Ready idle pool pods, integrated)", func(r *pbRun) string { return fmt.Sprintf("**%.0f**", r.meter.total()) })
	fixed := pbFind(runs, "fixed")
	row("idle pod-seconds / the fixed pools'", func(r *pbRun) string {
		if fixed == nil || fixed.meter.total() == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", r.meter.total()/fixed.meter.total())
	})
	row("starting pod-seconds (pool pods not Ready yet)", func(r *pbRun) string { return fmt.Sprintf("%.0f", pbSum(r.meter.startSec, -1)) })
	row("most Ready idle pool pods at once", func(r *pbRun) string { return strconv.Itoa(r.meter.maxIdle) })
	row("pods created during the replay / most pods at once", func(r *pbRun) string {
		return fmt.Sprintf("%d / %d", r.meter.created, r.meter.maxPods)
	})
	row("pod create → Ready p50 / p95 (every pod of the replay, from the watch; 1 s resolution)", func(r *pbRun) string { return pbWaitCell(r.meter.started) })
	row("the replay's own lateness starting a job (max)", func(r *pbRun) string { return pbSec(pbStatsOf(r.results, all).late) })
	row("other load during the mode", func(r *pbRun) string { return r.load.describe() })
	w("\n")
}

func pbFind(runs []*pbRun, key string) *pbRun {
	for _, r := range runs {
		if r.mode.key == key {
			return r
		}
	}
	return nil
}

func pbWriteTargets(w func(string, ...any), runs []*pbRun) {
	fixed, ctl := pbFind(runs, "fixed"), pbFind(runs, "pools")
	w("## Targets (issue 28)\n\n")
	if fixed == nil || ctl == nil {
		w("Not judged: the run lacks the fixed pools or warmpod-pools.\n\n")
		return
	}
	all := func(pbResult) bool { return true }
	pipe := func(x pbResult) bool { return x.job.inPipeline }
	fs, cs := pbStatsOf(fixed.results, all), pbStatsOf(ctl.results, all)
	ratio := ctl.meter.total() / max(fixed.meter.total(), 1)
	cp := pbStatsOf(ctl.results, pipe)
	met := func(ok bool) string {
		if ok {
			return "**met**"
		}
		return "**not met**"
	}
	w("| target | measured | |\n|---|---|---|\n")
	w("| warmpod-pools' warm-claim rate ≥ the fixed pools' | %.1f %% vs %.1f %% | %s |\n", 100*cs.rate(), 100*fs.rate(), met(cs.rate() >= fs.rate()))
	w("| … at ≤ 0.5× their idle pod-seconds | %.0f vs %.0f pod-s: %.2f× | %s |\n", ctl.meter.total(), fixed.meter.total(), ratio, met(ratio <= 0.5))
	w("| the 30-job pipeline ≥ 0.8 warm with warmpod-pools | %d/%d = %.2f (fixed pools: %.2f) | %s |\n\n", cp.warm, cp.n, cp.rate(), pbStatsOf(fixed.results, pipe).rate(), met(cp.rate() >= 0.8))
}

func pbWriteSegments(w func(string, ...any), tr pbTrace, runs []*pbRun) {
	w("## Where the day went\n\nPer part of the day: cold jobs / jobs, and idle pod-seconds.\n\n| part of the day (replay s) |")
	for _, r := range runs {
		w(" %s |", r.mode.name)
	}
	w("\n|---|")
	for range runs {
		w("---:|")
	}
	w("\n")
	for i, s := range tr.segments {
		w("| %s (%.0f–%.0f) |", s.name, s.from.Seconds(), s.to.Seconds())
		for _, r := range runs {
			st := pbStatsOf(r.results, func(x pbResult) bool { return x.job.at >= s.from && x.job.at < s.to })
			w(" %d/%d cold, %.0f pod-s |", st.n-st.warm, st.n, pbSum(r.meter.idleSec, i))
		}
		w("\n")
	}
	w("\nIdle pod-seconds per pool:")
	for i, r := range runs {
		if i > 0 {
			w(";")
		}
		w(" %s:", r.mode.name)
		for _, p := range tr.pools() {
			v := 0.0
			for _, x := range r.meter.idleSec[p] {
				v += x
			}
			w(" %s %.0f", p, v)
		}
	}
	w(".\n\nReady idle pods of the golang pool when the pipeline's first job arrived:")
	for i, r := range runs {
		first := pbResult{idleOnTime: -1}
		for _, x := range r.results {
			if x.job.inPipeline && (first.idleOnTime < 0 || x.job.at < first.job.at) {
				first = x
			}
		}
		if i > 0 {
			w(";")
		}
		w(" %s %d", r.mode.name, first.idleOnTime)
	}
	w(".\n\n")
}

func pbWriteController(w func(string, ...any), runs []*pbRun) {
	ctl := pbFind(runs, "pools")
	if ctl == nil {
		return
	}
	w("## warmpod-pools: the policy and what it did\n\n")
	w("The controller ran in the test process (`pools.New` on the admin kubeconfig at warmpod-pools' default client limits, 20 QPS, burst 40, then `Run`), **without leader election** (one replica), its Events recorded in the namespace as the command records them. ")
	w("Budget: %d idle pods for the namespace (`--budget-pods %d`: what the policies' largest moment needs, golang's pipeline period and the other pools' day, and one more). ", pbBudget.Pods, pbBudget.Pods)
	w("`--resync %s` (the default 10 s is 25 minutes of the compressed day, as long as a pool's idle_time).\n\n", pbResync)
	w("The policies, as written for the real day (`warmpod.dev/policy`, UTC; the trace's Monday is %s):\n\n", pbMonday.Format("2006-01-02"))
	for _, n := range pbPoolNames() {
		w("- %s: `%s`\n", n, strings.ReplaceAll(strings.TrimSpace(pbDayPolicies[n]), "\n", " "))
	}
	w("\nA cron period's resolution, one minute, is 2.5 hours of this compressed day, and the controller reads its policy on the wall clock, so the harness plays the schedule: it evaluates each policy (`sizing.Policy.Active`) at the day time of each 100 ms of replay and, when a pool's active period changes, writes that period alone, its durations divided by %d, as the pool's policy; the controller sees the change and decides again. The writes of this run:\n\n", pbCompression)
	w("| replay s | day | pool | period | policy written | written late by |\n|---|---|---|---|---|---|\n")
	for i, c := range ctl.sched {
		late := "(initial)"
		if c.at > 0 && i < len(ctl.schedLate) {
			late = fmt.Sprintf("%.0f ms", float64(ctl.schedLate[i])/float64(time.Millisecond))
		}
		w("| %.1f | %s | %s | %d | `%s` | %s |\n", c.at.Seconds(), pbDayTime(c.at).Format("Mon 15:04"), c.pool, c.period, strings.ReplaceAll(strings.TrimSpace(c.text), "\n", " "), late)
	}
	w("\n| pool | scale changes (direction reason: count) | last status: reason, measured pod start |\n|---|---|---|\n")
	for _, n := range pbPoolNames() {
		var ch []string
		for k, v := range ctl.scale[n] {
			ch = append(ch, fmt.Sprintf("%s: %.0f", k, v))
		}
		sort.Strings(ch)
		st := ctl.statuses[n]
		w("| %s | %s | %s, %.1f s |\n", n, strings.Join(ch, ", "), st.Reason, st.PodStart)
	}
	w("\n")
}

// pbSized is one "pool sized" line of the controller's log.
type pbSized struct {
	at           time.Duration // replay time
	pool, reason string
	from, to     int
}

// pbSizings reads the controller's log: every change of a pool's size, at
// its replay time, and the number of failed decisions (retried with
// back-off).
func pbSizings(r *pbRun) ([]pbSized, int) {
	raw, err := os.ReadFile(r.logFile)
	if err != nil {
		return nil, 0
	}
	var out []pbSized
	failed := 0
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, `msg="sizing pools failed`) {
			failed++
		}
		if !strings.Contains(l, `msg="pool sized"`) {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Fields(l) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		at, err := time.Parse(time.RFC3339Nano, f["time"])
		if err != nil {
			continue
		}
		from, _ := strconv.Atoi(f["from"])
		to, _ := strconv.Atoi(f["to"])
		out = append(out, pbSized{at: at.Sub(r.t0), pool: f["pool"], reason: f["reason"], from: from, to: to})
	}
	return out, failed
}

// pbWriteTimeline says how the controller sized the pipeline's pool around
// the pipeline, and how long each pool kept idle pods after its evening's
// last job.
func pbWriteTimeline(w func(string, ...any), tr pbTrace, runs []*pbRun) {
	ctl := pbFind(runs, "pools")
	if ctl == nil {
		return
	}
	sized, failed := pbSizings(ctl)
	w("Failed decisions, retried with back-off: %d", failed)
	var ops []string
	for op, n := range ctl.apiErrs {
		ops = append(ops, fmt.Sprintf("%s %.0f", op, n))
	}
	sort.Strings(ops)
	if len(ops) > 0 {
		w(" (failed writes by operation: %s; a scale refused with 409 Conflict: the Deployment had changed since the controller's cache saw it, by the controller's own last write or the Deployment controller's status, and the decision is retried)", strings.Join(ops, ", "))
	}
	w(".\n\n")
	var first, last time.Duration = -1, 0
	for _, j := range tr.jobs {
		if j.inPipeline {
			if first < 0 {
				first = j.at
			}
			last = j.at
		}
	}
	if first >= 0 {
		w("The golang pool's size around the pipeline (its jobs arrived from %.1f to %.1f s of replay), seconds from the first arrival:", first.Seconds(), last.Seconds())
		for _, z := range sized {
			if z.pool == "golang" && z.at >= first-2*time.Second && z.at <= first+90*time.Second {
				w(" %+.1f s %d→%d (%s);", (z.at - first).Seconds(), z.from, z.to, z.reason)
			}
		}
		w("\n\n")
	}
	pbWriteColdCauses(w, ctl, sized)
	w("Scale to zero in the evening: ")
	for i, name := range tr.pools() {
		var lastJob time.Duration = -1
		for _, j := range tr.jobs {
			if j.pool == name && j.kind == "day" {
				lastJob = max(lastJob, j.at)
			}
		}
		zero := time.Duration(-1)
		for _, z := range sized {
			if z.pool == name && z.to == 0 && z.at > lastJob && zero < 0 {
				zero = z.at
			}
		}
		if i > 0 {
			w("; ")
		}
		switch {
		case lastJob < 0:
			w("%s had no day job", name)
		case zero < 0:
			w("%s: last day job at %.1f s, not at zero by the end", name, lastJob.Seconds())
		default:
			w("%s: last day job at %.1f s, at zero %.1f s later", name, lastJob.Seconds(), (zero - lastJob).Seconds())
		}
	}
	w(" (each job holds its pod for its duration first; idle_time counts from the job's claim).\n\n")
}

// pbWriteColdCauses sorts warmpod-pools' cold jobs by the size the
// controller had given their pool when they arrived (from its log): a
// pool at zero (its idle_time had passed, or it had never been sized up),
// or a pool above zero with no Ready idle pod within the warm wait (its
// pods claimed, the replacements or the new pods still starting).
func pbWriteColdCauses(w func(string, ...any), ctl *pbRun, sized []pbSized) {
	replicasAt := func(name string, at time.Duration) int {
		n := 0 // the pools start at 0 replicas
		for _, z := range sized {
			if z.pool == name && z.at <= at {
				n = z.to
			}
		}
		return n
	}
	var zero, above, abovePipe int
	for _, r := range ctl.results {
		if r.warm || r.err != nil {
			continue
		}
		switch {
		case replicasAt(r.job.pool, r.job.at) == 0:
			zero++
		case r.job.inPipeline:
			abovePipe++
		default:
			above++
		}
	}
	w("warmpod-pools' cold jobs (failed ones left out), by their pool's size when they arrived: %d found their pool at zero replicas; %d (and %d of the pipeline) found it above zero but no Ready idle pod within the warm wait.\n\n", zero, above, abovePipe)
}

func pbWriteMethod(w func(string, ...any), tr pbTrace) {
	w("## How it was measured\n\n")
	w("- Each mode in a fresh namespace with the pools %s: [`deploy/kube-e2e/pool.yaml`](../deploy/kube-e2e/pool.yaml) renamed, without GitLab Runner's helper and its cache volume (no job runs in the pods), requests 10m CPU and 32Mi each, and without probes: kube-e2e's template probes by exec (its pods share the node's network, so they cannot each serve HTTP on the probe port), a runc exec per pod per second, and 40 idle pods of it kept both cores busy (load average 59, no idle CPU) before any job ran; deploy/pool.yaml probes over HTTP, nearly free. A pod is then Ready when warmpod's container runs, where an HTTP probe every second says so within a second. ", strings.Join(tr.pools(), ", "))
	w("All run the one busybox image the cluster has, so a job picks its pool by name, not by image. ")
	w("No pools: 0 replicas, no controller; fixed pools: %d replicas each, Ready before the replay starts, no controller; warmpod-pools: 0 replicas at the start (the night before), the controller running from 5 s before the replay.\n", pbFixedReplicas)
	w("- Each job, at its arrival time, runs the drivers' claim path in the test process with a client of its own (50 QPS, burst 100, as internal/kubeclient): `Cluster.Pools` (the pools read from the cluster, as a driver's prepare does), `ClaimWarm` with the drivers' default warm wait (%s), else (as `executor.Core.notWarm`) `ClaimStarting`, the pool's pod that is starting, else `CreateCold` with the reason the drivers give (`no-idle`, or `pending` during a rollout, which takes no starting pod), Ready within %s. ", pbWarmWait, pbReadyTimeout)
	w("It holds the pod for the job's duration, then `Delete`s it. The job's start in the pod (`warmpod job start` over exec) is not part of it: the claim path is what is measured. An empty pool makes every job pay the warm wait: the no-pools mode's waits include it.\n")
	w("- Wait: from the job's arrival in the trace to the claim path's return with a Ready pod held. Idle pod-seconds: the count of Ready idle pool pods (`warmpod.dev/state=idle`, Ready, not terminating; retiring ones included), integrated over the replay's %s from a pod watch (an informer in the test process), at each event.\n", tr.horizon)
	w("- The modes ran one after the other, each for the trace's whole length; load drifts between them are not cancelled out (the other load of each mode is in the table).\n")
}
