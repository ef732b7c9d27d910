//go:build kube

package kubee2e

// The executor's overhead for a whole GitLab job, warm pool pod against
// the cold fallback, 20 jobs each, through the real GitLab Runner
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
	"github.com/warmpod/warmpod/executor/pool"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestGitLabOverheadBench(t *testing.T) {
	out := os.Getenv("WARMPOD_KUBE_BENCH")
	if out == "" {
		t.Skip("WARMPOD_KUBE_BENCH is not set (make bench-kube sets it)")
	}
	const n, replicas = 20, 3
	p := newPool(t, poolOpts{replicas: replicas, flags: []string{"--warm-wait", "0"}, stamps: true})

	var warmJob, coldJob, warmStage, coldStage []time.Duration
	var warmPrep, coldPrep []time.Duration
	var split []jobSplit
	for i := range 2 * n {
		warm := i%2 == 0 // interleaved, so load drifts hit both alike
		id := 500 + i
		o := jobOpts{id: id, script: []string{"true"}}
		if !warm {
			o.extraVars = []map[string]any{{"key": "CI_JOB_IMAGE", "value": warmImage, "public": true}}
		} else {
			waitIdle(t, p.ns, replicas, 2*time.Minute) // the steady state: a full pool
		}
		r := p.runJob(t, o)
		require.Equal(t, 0, r.exit, r.String())
		kind := "cold"
		if warm {
			kind = "warm"
		}
		require.Contains(t, traceText(r.trace), "runs on "+kind+" pod")
		job, stage, prep := overheads(t, p.timings(t, id))
		if warm {
			split = append(split, splitJob(t, p, id))
			warmJob, warmStage, warmPrep = append(warmJob, job), append(warmStage, stage...), append(warmPrep, prep)
		} else {
			coldJob, coldStage, coldPrep = append(coldJob, job), append(coldStage, stage...), append(coldPrep, prep)
		}
	}
	rtt := bareExecRTT(t, p, n)

	med := func(d []time.Duration) time.Duration {
		c := append([]time.Duration(nil), d...)
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
		return c[len(c)/2]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	var b strings.Builder
	fmt.Fprintf(&b, "| GitLab job through the real runner (%d jobs each, medians) | warm pool pod | cold fallback | warm / cold |\n|---|---|---|---|\n", n)
	fmt.Fprintf(&b, "| executor overhead per job (prepare → last stage's exit code, minus script time) | %s | %s | %.2f× |\n",
		ms(med(warmJob)), ms(med(coldJob)), float64(med(warmJob))/float64(med(coldJob)))
	fmt.Fprintf(&b, "| prepare (claim or create + Ready + job start) | %s | %s | %.2f× |\n",
		ms(med(warmPrep)), ms(med(coldPrep)), float64(med(warmPrep))/float64(med(coldPrep)))
	fmt.Fprintf(&b, "| overhead per stage (run call minus script time) | %s | %s | — |\n", ms(med(warmStage)), ms(med(coldStage)))
	fmt.Fprintf(&b, "| one bare exec round trip of client-go (`true`, new client each time) | %s | | |\n", ms(rtt))
	fmt.Fprintf(&b, "| stage overhead / bare exec round trip | %.2f× | %.2f× | |\n",
		float64(med(warmStage))/float64(rtt), float64(med(coldStage))/float64(rtt))
	fmt.Fprintf(&b, "\nMeasured %s, load average %s, %d stages per job.\n", time.Now().UTC().Format(time.RFC3339), loadAvg(), len(warmStage)/n)
	fmt.Fprintf(&b, "\nWhere a warm job's time goes (medians over its %d jobs; each row's median is taken on its own, so the rows need not add up):\n\n", len(split))
	fmt.Fprintf(&b, "| part of a warm job | median |\n|---|---|\n")
	for _, row := range []struct {
		name string
		f    func(jobSplit) time.Duration
	}{
		{"whole job: runner calls config → cleanup returns", func(s jobSplit) time.Duration { return s.wall }},
		{"the driver's process start and client set-up, all calls (runner's exec → the call's first line of work)", func(s jobSplit) time.Duration { return s.startup }},
		{"prepare's own work (claim, job start in the pod)", func(s jobSplit) time.Duration { return s.prepare }},
		{"stages: exec and in-pod overhead (run's work minus the scripts' time)", func(s jobSplit) time.Duration { return s.stageOverhead }},
		{"stages: the scripts' own time in the pod", func(s jobSplit) time.Duration { return s.scripts }},
		{"cleanup's own work (job end, delete)", func(s jobSplit) time.Duration { return s.cleanup }},
		{"the runner's own work between calls (config included)", func(s jobSplit) time.Duration { return s.runner }},
	} {
		ds := make([]time.Duration, 0, len(split))
		for _, s := range split {
			ds = append(ds, row.f(s))
		}
		fmt.Fprintf(&b, "| %s | %s |\n", row.name, ms(med(ds)))
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

// bareExecRTT is the median of n execs of `true` into a pool pod, each
// with a new client (config load, TLS handshake, stream upgrade), as one
// driver call does.
func bareExecRTT(t *testing.T, p *glrPool, n int) time.Duration {
	t.Helper()
	pods := waitIdle(t, p.ns, 3, 2*time.Minute)
	target := pool.Pod{Name: pods[0].Metadata.Name, Namespace: p.ns, Container: "build"}
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		rc, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
		require.NoError(t, err)
		rc.QPS, rc.Burst = 50, 100
		cs, err := kubernetes.NewForConfig(rc)
		require.NoError(t, err)
		k := &pool.Kube{CS: cs, Config: rc, Namespace: p.ns}
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
