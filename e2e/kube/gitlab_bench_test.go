//go:build kube

package kubee2e

// The executor's overhead for a whole GitLab job, warm pool pod with the
// job's multiplexer, warm without it, and the cold fallback, 20 jobs each,
// through the real GitLab Runner
// (`make bench-kube`; skipped unless WARMPOD_KUBE_BENCH names the results
// file). Overhead of a job: from the runner calling prepare to the last
// stage's exit code, minus the time the stage scripts ran in the pod (each
// stage's start and end as PID 1 recorded them). Overhead of a stage: the
// run call's wall time minus its script's time. Both are compared with one
// bare exec round trip (`true`) of the same client library (client-go, a
// new client and connection each time, as each driver call makes).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

func TestGitLabOverheadBench(t *testing.T) {
	out := os.Getenv("WARMPOD_KUBE_BENCH")
	if out == "" {
		t.Skip("WARMPOD_KUBE_BENCH is not set (make bench-kube sets it)")
	}
	const n, replicas = 20, 3
	p := newPool(t, poolOpts{replicas: replicas, flags: []string{"--warm-wait", "0"}, stamps: true})

	// Three variants, interleaved so load drifts hit all alike: a warm pod
	// with the job's multiplexer (the default), a warm pod with one exec
	// per call (--mux=false, through its environment twin), a cold pod.
	type variant struct {
		name      string
		warm      bool
		env       []string
		job, prep []time.Duration
		stage     []time.Duration
		split     []jobSplit
	}
	vs := []*variant{
		{name: "warm, multiplexer", warm: true},
		{name: "warm, one exec per call", warm: true, env: []string{"WARMPOD_GITLAB_MUX=false"}},
		{name: "cold, multiplexer"},
	}
	for i := range len(vs) * n {
		v := vs[i%len(vs)]
		id := 500 + i
		o := jobOpts{id: id, script: []string{"true"}, env: v.env}
		if !v.warm {
			o.extraVars = []map[string]any{{"key": "CI_JOB_IMAGE", "value": warmImage, "public": true}}
		} else {
			waitIdle(t, p.ns, replicas, 2*time.Minute) // the steady state: a full pool
		}
		r := p.runJob(t, o)
		require.Equal(t, 0, r.exit, r.String())
		kind := "cold"
		if v.warm {
			kind = "warm"
		}
		require.Contains(t, traceText(r.trace), "runs on "+kind+" pod")
		tms := p.timings(t, id)
		for _, tm := range tms {
			if tm.Call == "run" && v.env == nil {
				require.Positive(t, tm.MuxCalls, "%s: job %d's %s went through the multiplexer", v.name, id, tm.Stage)
			} else if tm.Call == "run" {
				require.Zero(t, tm.MuxCalls, "%s: job %d's %s", v.name, id, tm.Stage)
			}
		}
		job, stage, prep := overheads(t, tms)
		v.job, v.stage, v.prep = append(v.job, job), append(v.stage, stage...), append(v.prep, prep)
		v.split = append(v.split, splitJob(t, p, id))
	}
	rtt := bareExecRTT(t, p.kubeconfig, p.ns, "build", replicas, n)

	med := func(d []time.Duration) time.Duration {
		c := append([]time.Duration(nil), d...)
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
		return c[len(c)/2]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	var b strings.Builder
	fmt.Fprintf(&b, "| GitLab job through the real runner (%d jobs each, medians) | %s | %s | %s |\n|---|---|---|---|\n", n, vs[0].name, vs[1].name, vs[2].name)
	row := func(name string, f func(v *variant) string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, f(vs[0]), f(vs[1]), f(vs[2]))
	}
	row("executor overhead per job (prepare → last stage's exit code, minus script time)", func(v *variant) string { return ms(med(v.job)) })
	row("prepare (claim or create + Ready + job start + multiplexer start)", func(v *variant) string { return ms(med(v.prep)) })
	row("overhead per stage (run call minus script time)", func(v *variant) string { return ms(med(v.stage)) })
	row("stage overhead / one bare exec round trip", func(v *variant) string {
		return fmt.Sprintf("%.2f×", float64(med(v.stage))/float64(rtt))
	})
	fmt.Fprintf(&b, "\nOne bare exec round trip of client-go (`true`, new client each time, as one call without the multiplexer makes): %s.\n", ms(rtt))
	fmt.Fprintf(&b, "\nMeasured %s, load average %s, %d stages per job.\n", time.Now().UTC().Format(time.RFC3339), loadAvg(), len(vs[0].stage)/n)
	fmt.Fprintf(&b, "\nWhere a warm job's time goes (medians over %d jobs each; each row's median is taken on its own, so the rows need not add up):\n\n", n)
	fmt.Fprintf(&b, "| part of a warm job | %s | %s |\n|---|---|---|\n", vs[0].name, vs[1].name)
	for _, r := range []struct {
		name string
		f    func(jobSplit) time.Duration
	}{
		{"whole job: runner calls config → cleanup returns", func(s jobSplit) time.Duration { return s.wall }},
		{"the driver's process start and client set-up, all calls (runner's exec → the call's first line of work)", func(s jobSplit) time.Duration { return s.startup }},
		{"prepare's own work (claim, job start in the pod, multiplexer start)", func(s jobSplit) time.Duration { return s.prepare }},
		{"stages: exec and in-pod overhead (run's work minus the scripts' time)", func(s jobSplit) time.Duration { return s.stageOverhead }},
		{"stages: the scripts' own time in the pod", func(s jobSplit) time.Duration { return s.scripts }},
		{"cleanup's own work (job end, delete)", func(s jobSplit) time.Duration { return s.cleanup }},
		{"the runner's own work between calls (config included)", func(s jobSplit) time.Duration { return s.runner }},
	} {
		cell := func(v *variant) string {
			ds := make([]time.Duration, 0, len(v.split))
			for _, s := range v.split {
				ds = append(ds, r.f(s))
			}
			return ms(med(ds))
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.name, cell(vs[0]), cell(vs[1]))
	}
	t.Log("\n" + b.String())
	require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o644))
}

// overheads computes, from one job's driver timings, the job's overhead,
// each stage's, and prepare's wall time.
func overheads(t *testing.T, tms []timing) (job time.Duration, stages []time.Duration, prep time.Duration) {
	t.Helper()
	var start, end, script int64
	for _, tm := range tms {
		switch tm.Call {
		case "prepare":
			start = tm.Start
			prep = time.Duration(tm.End - tm.Start)
		case "run":
			end = max(end, tm.End)
			script += tm.StageNS
			stages = append(stages, time.Duration(tm.End-tm.Start-tm.StageNS))
		}
	}
	require.NotZero(t, start, "no prepare timing: %v", tms)
	return time.Duration(end - start - script), stages, prep
}

// bareExecRTT is the median of n execs of `true` into a pool pod of ns
// (once replicas are idle), each
// with a new client (config load, TLS handshake, stream upgrade), as one
// driver call does.
func bareExecRTT(t *testing.T, kubeconfig, ns, container string, replicas, n int) time.Duration {
	t.Helper()
	pods := waitIdle(t, ns, replicas, 2*time.Minute)
	target := poolapi.Pod{Name: pods[0].Metadata.Name, Namespace: ns, Container: container}
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		require.NoError(t, err)
		rc.QPS, rc.Burst = 50, 100
		cs, err := kubernetes.NewForConfig(rc)
		require.NoError(t, err)
		k := &pool.Cluster{CS: cs, Config: rc, Namespace: ns}
		var errb bytes.Buffer
		code, err := k.Exec(context.Background(), target, []string{"true"}, nil, io.Discard, &errb)
		require.NoError(t, err)
		require.Equal(t, 0, code, errb.String())
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// jobSplit is where one job's wall time went, from the driver scripts'
// stamps (when the runner started each call) and the driver's timings.
type jobSplit struct {
	wall, startup, prepare, stageOverhead, scripts, cleanup, runner time.Duration
}

// splitJob pairs the k-th stamp of each call with the k-th timing of it
// (config has a stamp, no timing).
func splitJob(t *testing.T, p *glrPool, id int) jobSplit {
	t.Helper()
	raw, err := os.ReadFile(p.stampsFile)
	require.NoError(t, err)
	type stamp struct {
		ns   int64
		call string
	}
	var stamps []stamp
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[2] == fmt.Sprint(id) {
			var ns int64
			_, err := fmt.Sscan(f[0], &ns)
			require.NoError(t, err, l)
			stamps = append(stamps, stamp{ns, f[1]})
		}
	}
	require.NotEmpty(t, stamps, "no stamps of job %d", id)
	tms := p.timings(t, id)
	byCall := map[string][]timing{}
	for _, tm := range tms {
		if tm.Call != "resize" {
			byCall[tm.Call] = append(byCall[tm.Call], tm)
		}
	}
	var s jobSplit
	first, lastEnd := stamps[0].ns, stamps[0].ns
	for _, st := range stamps {
		s.runner += time.Duration(st.ns - lastEnd) // from the last call's end (or the first stamp)
		q := byCall[st.call]
		if len(q) == 0 { // config: no timing; the call is short, count it as the runner's
			lastEnd = st.ns
			continue
		}
		tm := q[0]
		byCall[st.call] = q[1:]
		s.startup += time.Duration(tm.Start - st.ns)
		work := time.Duration(tm.End - tm.Start)
		switch st.call {
		case "prepare":
			s.prepare += work
		case "run":
			s.scripts += time.Duration(tm.StageNS)
			s.stageOverhead += work - time.Duration(tm.StageNS)
		case "cleanup":
			s.cleanup += work
		}
		lastEnd = tm.End
	}
	s.wall = time.Duration(lastEnd - first)
	return s
}
