//go:build kube

package kubee2e

// What the GitLab features cost (`make bench-kube`; skipped unless
// WARMPOD_KUBE_FEATURES_BENCH names the results file): a job with an
// artifact and a cache (the stages GitLab really runs: restore_cache,
// archive_cache, upload_artifacts_on_success, all calling the pod's
// gitlab-runner-helper), and a job that asks for more cpu and memory,
// each warm against cold, interleaved, through the real runner; and the
// in-place resize's own cost (the pods/resize patch until the resources
// are in force: in the container's cgroup, or in the pod's status), from
// the driver's timings.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGitLabFeaturesBench(t *testing.T) {
	out := os.Getenv("WARMPOD_KUBE_FEATURES_BENCH")
	if out == "" {
		t.Skip("WARMPOD_KUBE_FEATURES_BENCH is not set (make bench-kube sets it)")
	}
	const n, replicas = 8, 3
	p := newPool(t, poolOpts{replicas: replicas, flags: []string{"--warm-wait", "0",
		"--cpu-request-overwrite-max-allowed=1", "--memory-limit-overwrite-max-allowed=1Gi"}})
	key := "bench-" + randHex(4)
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(hostCacheDir, "group", "proj", key)) })
	extras := map[string]any{
		"artifacts": []any{map[string]any{"name": "build-out", "paths": []string{"out/"}, "when": "on_success"}},
		"cache":     []any{map[string]any{"key": key, "paths": []string{"vendor/"}, "policy": "pull-push", "when": "on_success"}},
	}
	artScript := []string{`mkdir -p out vendor`, `echo "job $CI_JOB_ID" > out/a.txt`, `date > vendor/stamp`}
	resources := []map[string]any{{"key": "KUBERNETES_CPU_REQUEST", "value": "500m", "public": true}, {"key": "KUBERNETES_MEMORY_LIMIT", "value": "256Mi", "public": true}}
	cold := map[string]any{"key": "CI_JOB_IMAGE", "value": warmImage, "public": true}

	type sample struct{ wall, overhead, prep time.Duration }
	res := map[string][]sample{}
	id := 900
	for i := range 2 * n {
		for _, kind := range []string{"artifacts+cache", "resized"} {
			warm := i%2 == 0
			id++
			o := jobOpts{id: id, script: []string{"true"}}
			if kind == "artifacts+cache" {
				o.script, o.env = artScript, extrasEnv(t, extras)
			} else {
				o.extraVars = append(o.extraVars, resources...)
			}
			if warm {
				waitIdle(t, p.ns, replicas, 2*time.Minute)
			} else {
				o.extraVars = append(o.extraVars, cold)
			}
			r := p.runJob(t, o)
			require.Equal(t, 0, r.exit, r.String())
			tr := traceText(r.trace)
			name := kind + " cold"
			if warm {
				name = kind + " warm"
				require.Contains(t, tr, "runs on warm pod")
				if kind == "resized" {
					require.Contains(t, tr, "resized in place")
				}
			} else {
				require.Contains(t, tr, "runs on cold pod")
			}
			tms := p.timings(t, id)
			job, _, prep := overheads(t, tms)
			var first, last int64
			for _, tm := range tms {
				if first == 0 || tm.Start < first {
					first = tm.Start
				}
				last = max(last, tm.End)
				if tm.Call == "resize" {
					res["resize"] = append(res["resize"], sample{wall: time.Duration(tm.End - tm.Start)})
				}
			}
			res[name] = append(res[name], sample{wall: time.Duration(last - first), overhead: job, prep: prep})
		}
	}
	med := func(s []sample, f func(sample) time.Duration) time.Duration {
		ds := make([]time.Duration, 0, len(s))
		for _, x := range s {
			ds = append(ds, f(x))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	wall := func(s sample) time.Duration { return s.wall }
	over := func(s sample) time.Duration { return s.overhead }
	prep := func(s sample) time.Duration { return s.prep }
	var b strings.Builder
	fmt.Fprintf(&b, "| GitLab job through the real runner (%d jobs each, medians) | warm | cold | warm / cold |\n|---|---|---|---|\n", n)
	for _, kind := range []string{"artifacts+cache", "resized"} {
		w, c := res[kind+" warm"], res[kind+" cold"]
		fmt.Fprintf(&b, "| %s: job wall time (prepare start → cleanup end) | %s | %s | %.2f× |\n", kind, ms(med(w, wall)), ms(med(c, wall)), float64(med(w, wall))/float64(med(c, wall)))
		fmt.Fprintf(&b, "| %s: executor overhead (minus the stages' own time) | %s | %s | %.2f× |\n", kind, ms(med(w, over)), ms(med(c, over)), float64(med(w, over))/float64(med(c, over)))
		fmt.Fprintf(&b, "| %s: prepare | %s | %s | %.2f× |\n", kind, ms(med(w, prep)), ms(med(c, prep)), float64(med(w, prep))/float64(med(c, prep)))
	}
	fmt.Fprintf(&b, "| in-place resize (pods/resize patch → in force: the pod's cgroup or status), %d resizes | %s | | |\n", len(res["resize"]), ms(med(res["resize"], wall)))
	fmt.Fprintf(&b, "\nMeasured %s, load average %s. Artifacts+cache: restore_cache, archive_cache and upload_artifacts_on_success run the pod's gitlab-runner-helper; resized: KUBERNETES_CPU_REQUEST=500m, KUBERNETES_MEMORY_LIMIT=256Mi (warm: resized in place; cold: a pod created with them).\n", time.Now().UTC().Format(time.RFC3339), loadAvg())
	t.Log("\n" + b.String())
	require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o644))
}
