//go:build kube

package kubee2e

// warmpod's container hook against the upstream k8s-novolume hook
// (`make bench-github`; skipped unless WARMPOD_GITHUB_BENCH names the
// results file). The same jobs through both hooks on the same cluster,
// interleaved run by run so load drifts hit both alike, through hookrun,
// which reports each hook call's wall time and, for run: steps, the
// script's own time in the pod (overhead = the call minus the script).
// The upstream hook runs as ../shared/actions-hooks/run-upstream.sh runs
// it: its bundled index.js with the runner's node, the Role of its README,
// the pod template extension kube-e2e needs.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// resOptions are the bench's job's own resources: 1 CPU, 300 MiB.
const resOptions = "--cpus 1 --memory 300m"

type hookFigures struct {
	prepare, step, cleanup, total []time.Duration
	runs, ok                      int
}

func (f *hookFigures) add(r *hookResult) {
	f.runs++
	if r.Result != r.Expect {
		return
	}
	f.ok++
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	f.prepare = append(f.prepare, ms(r.PrepareJobMS))
	f.cleanup = append(f.cleanup, ms(r.CleanupJobMS))
	f.total = append(f.total, ms(r.TotalMS))
	for _, s := range r.Steps {
		if !strings.HasPrefix(s.ID, "__") && s.HookMS > 0 {
			f.step = append(f.step, ms(s.OverheadMS))
		}
	}
}

func TestGitHubHookBench(t *testing.T) {
	out := os.Getenv("WARMPOD_GITHUB_BENCH")
	if out == "" {
		t.Skip("WARMPOD_GITHUB_BENCH is not set (make bench-github sets it)")
	}
	n, nBig := benchRuns(t, 10, 3)
	wpEnv := strings.Fields(os.Getenv("WARMPOD_GITHUB_BENCH_ENV")) // e.g. WARMPOD_GITHUB_STREAMS=1, to try a setting
	g := newGHPool(t, 3, false)
	hooks := hooksDir(t)
	build := os.Getenv("HOOKS_BUILD_DIR")
	if build == "" {
		build = "/var/tmp/actions-hooks-build"
	}
	upstream := filepath.Join(build, "k8s-novolume", "index.js")
	require.FileExists(t, upstream, "make actions-hooks builds it")
	kc, err := exec.Command(filepath.Join(hooks, "cluster-setup.sh"), "hooks-bench").Output()
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Command(kubectl, "delete", "namespace", "hooks-bench", "--wait=false").Run() })
	upstreamRun := func(example string) *hookResult {
		res := filepath.Join(t.TempDir(), "result.json")
		cmd := exec.Command(filepath.Join(hooks, "hookrun"), "--hook", upstream, "--out", res, filepath.Join(hooks, "examples", example))
		cmd.Env = append(os.Environ(), "KUBECONFIG="+strings.TrimSpace(string(kc)), "ACTIONS_RUNNER_POD_NAME=hooks-bench-0",
			"ACTIONS_RUNNER_IMAGE=localhost/hooks/runner:v1", "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE="+filepath.Join(hooks, "hooks", "upstream-template.yaml"),
			"ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true", "HOOKRUN_TMP="+t.TempDir())
		log, _ := cmd.CombinedOutput()
		r, _ := readResult(t, res, log)
		return r
	}
	// warmpod with the job's multiplexer (the default) and with one exec
	// per call (--mux=false, through its environment twin), interleaved
	// with the upstream hook.
	var up, wp, wd, upBig, wpBig hookFigures
	var tr transferFigures // the 200 MiB runs' transfer and its bare exec anchor
	var parts stepParts    // where the multiplexed runs' step overhead goes
	for i := range n {
		waitIdle(t, g.ns, 3, 2*time.Minute) // the steady state: a full pool
		timings := filepath.Join(t.TempDir(), "timings.jsonl")
		r, log := g.run(t, "pass.json", "gh-bench", "WARMPOD_GITHUB_TIMINGS="+timings)
		require.Equal(t, "success", r.Result, "warmpod run %d:\n%s", i, log)
		require.False(t, r.stepsSaid("direct exec"), "warmpod run %d went through its multiplexer", i)
		wp.add(r)
		parts.add(t, r, timings)
		waitIdle(t, g.ns, 3, 2*time.Minute)
		r, log = g.run(t, "pass.json", "gh-bench", "WARMPOD_GITHUB_MUX=false")
		require.Equal(t, "success", r.Result, "warmpod (one exec per call) run %d:\n%s", i, log)
		wd.add(r)
		up.add(upstreamRun("pass.json"))
	}
	rtt := bareExecRTT(t, g.kubeconfig, g.ns, "job", 3, max(n, 3))
	for i := range nBig {
		waitIdle(t, g.ns, 3, 2*time.Minute)
		r, log := g.run(t, "bigfile.json", "gh-bench", wpEnv...)
		wpBig.add(r)
		tr.add(t, r, i, log)
		upBig.add(upstreamRun("bigfile.json"))
		tr.bareExec(t, g, "sha256sum", 1, false)
		tr.bareExec(t, g, "sha256sum", tr.streams, false)
		tr.bareExec(t, g, "sha256sum", 1, true)
		tr.bareExec(t, g, "wc -c", 1, false)
	}
	// A job with its own cpu and memory (container.options): a warm pod
	// resized in place against a cold pod with the same resources, from
	// the same template in a namespace whose pool has no pod (one look
	// for an idle pod: --warm-wait 0), interleaved.
	var resWarm, resCold hookFigures
	coldNS := newGHPool(t, 0, false)
	resJob := writeExample(t, map[string]any{"name": "resources", "repository": "hookrun/hello", "expect": "success",
		"container": map[string]any{"image": "localhost/hooks/job:v1", "options": resOptions},
		"steps":     []map[string]any{{"id": "limit", "run": `echo "memory limit $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)"`}}})
	nRes := max(n/2, 3)
	for i := range nRes {
		idle := waitIdle(t, g.ns, 3, 2*time.Minute)
		r, log := g.run(t, resJob, "gh-bench-res")
		require.Equal(t, "success", r.Result, "warmpod run %d with resources:\n%s", i, log)
		require.True(t, slices.ContainsFunc(idle, func(p pod) bool { return p.Metadata.Name == r.Container.ID }), "run %d with resources ran on a warm pod", i)
		_, _, lines := r.step(t, "limit")
		require.Contains(t, strings.Join(lines, "\n"), "memory limit 314572800", "run %d: the warm pod was resized", i)
		resWarm.add(r)
		waitIdle(t, coldNS.ns, 0, 2*time.Minute)
		r, log = coldNS.run(t, resJob, "gh-bench-res-cold", "WARMPOD_GITHUB_WARM_WAIT=0")
		require.Equal(t, "success", r.Result, "cold run %d with resources:\n%s", i, log)
		_, _, lines = r.step(t, "limit")
		require.Contains(t, strings.Join(lines, "\n"), "memory limit 314572800", "cold run %d has the job's resources", i)
		resCold.add(r)
	}
	row := func(what string, w, d, u []time.Duration, target float64) string {
		if len(w) == 0 {
			return fmt.Sprintf("| %s | no successful run | %s | %s | – | |\n", what, msStr(medianOf(d)), msStr(medianOf(u)))
		}
		mw, mu := median(w), medianOf(u)
		if mu == 0 {
			return fmt.Sprintf("| %s | %s | %s | no successful run | – | |\n", what, msStr(mw), msStr(medianOf(d)))
		}
		ratio := float64(mw) / float64(mu)
		verdict := ""
		if target > 0 {
			verdict = fmt.Sprintf("≤ %.2f× upstream: %s", target, map[bool]string{true: "met", false: "**not met**"}[ratio <= target])
		}
		return fmt.Sprintf("| %s | %s | %s | %s | %.3f× | %s |\n", what, msStr(mw), msStr(medianOf(d)), msStr(mu), ratio, verdict)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d runs of examples/pass.json (4 `run:` steps) and %d of examples/bigfile.json (200 MiB workspace) per hook, interleaved, medians; warmpod: a pool of 3 warm pods, the runner's steady state.\n\n",
		time.Now().UTC().Format(time.RFC3339), n, nBig)
	b.WriteString(machineLine(t) + "\n\n")
	fmt.Fprintf(&b, "| | warmpod-github | warmpod-github, one exec per call | upstream k8s-novolume hook | warmpod / upstream | target |\n|---|---:|---:|---:|---:|---|\n")
	b.WriteString(row("prepare_job", wp.prepare, wd.prepare, up.prepare, 0.1))
	b.WriteString(row("overhead per `run:` step (hook call − script)", wp.step, wd.step, up.step, 0.1))
	b.WriteString(row("cleanup_job", wp.cleanup, wd.cleanup, up.cleanup, 0))
	b.WriteString(row("whole job", wp.total, wd.total, up.total, 0.15))
	b.WriteString(row("prepare_job, 200 MiB workspace", wpBig.prepare, nil, upBig.prepare, 0.4))
	if len(wp.step) > 0 && len(wd.step) > 0 {
		fmt.Fprintf(&b, "\nOne bare exec round trip of client-go (`true` into a pool pod, new client each time): %s. Step overhead / that round trip: %.2f× with the multiplexer, %.2f× with one exec per call.\n",
			msStr(rtt), float64(median(wp.step))/float64(rtt), float64(median(wd.step))/float64(rtt))
	}
	if len(resWarm.prepare) > 0 && len(resCold.prepare) > 0 {
		ratio := float64(median(resWarm.prepare)) / float64(median(resCold.prepare))
		fmt.Fprintf(&b, "\nA job with its own cpu and memory (`container.options: %s`), %d runs each, interleaved, medians: prepare_job on a warm pod resized in place (the resize waited for until the container's cgroup has it) against a cold pod with the same resources, made from the same template in a namespace whose pool has no pod (`--warm-wait 0`).\n\n", resOptions, nRes)
		b.WriteString("| | warm pod, resized in place | cold pod, same resources | warm / cold | target |\n|---|---:|---:|---:|---|\n")
		fmt.Fprintf(&b, "| prepare_job | %s | %s | %.3f× | ≤ 0.20× cold: %s |\n", msStr(median(resWarm.prepare)), msStr(median(resCold.prepare)), ratio, map[bool]string{true: "met", false: "**not met**"}[ratio <= 0.2])
		fmt.Fprintf(&b, "| whole job | %s | %s | %.3f× | |\n", msStr(median(resWarm.total)), msStr(median(resCold.total)), float64(median(resWarm.total))/float64(median(resCold.total)))
	}
	b.WriteString(parts.table(t, rtt))
	tr.write(&b, wpBig.prepare, upBig.prepare, rtt)
	fmt.Fprintf(&b, "\nSuccessful runs: warmpod %d/%d and %d/%d, warmpod with one exec per call %d/%d, upstream %d/%d and %d/%d; with resources, warm %d/%d and cold %d/%d.\n", wp.ok, wp.runs, wpBig.ok, wpBig.runs, wd.ok, wd.runs, up.ok, up.runs, upBig.ok, upBig.runs, resWarm.ok, resWarm.runs, resCold.ok, resCold.runs)
	t.Log("\n" + b.String())
	require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o644))
}

// medianOf is median, 0 for no values.
func medianOf(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return median(d)
}

func msStr(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}
