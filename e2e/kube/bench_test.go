//go:build kube

package kubee2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const benchRounds = 20

// 6. Cold start versus warm hand-over, side by side, benchRounds times each in
// one run (alternating, so load on the node hits both alike):
//
//   - cold: POST a fresh busybox pod whose one-line stage is `echo first`,
//     then poll its log (API, every 20 ms) until the line is there: what a
//     pod-per-job executor waits for before the first script line's output
//     (scheduling included: the scheduler places it, as it would a job pod).
//   - warm: on an already-Ready warm pod, `kubectl exec -i … warmpod job start`
//     (token + variables on stdin) then `kubectl exec … warmpod job run -- echo
//     first`, until its output is back: what a warm-pool executor waits for.
//
// The cold side goes through the API directly (no process start); the warm
// side pays two kubectl process starts (~0.16 s each here), so the ratio is
// conservative for warm pods. Medians and the ratio go to t.Log as a markdown
// table, and to $WARMPOD_KUBE_RESULTS when set.
func TestColdStartVersusWarmHandover(t *testing.T) {
	ns := newNamespace(t, "bench", true)
	w := createWarmPod(t, ns, "warm", warmOpts{args: []string{"--idle-timeout=30m", "--grace=5s", "--max-jobs=0"}})
	waitReady(t, ns, w.name, true, 60*time.Second)

	// Warm-up (not measured): first exec and first cold pod pay one-time costs.
	warmHandover(t, w, "warmup")
	coldStart(t, ns, "cold-warmup")

	var cold, warm, execRTT []time.Duration
	for i := range benchRounds {
		if i%2 == 0 {
			cold = append(cold, coldStart(t, ns, fmt.Sprintf("cold-%02d", i)))
			warm = append(warm, warmHandover(t, w, fmt.Sprintf("bench-%02d", i)))
		} else {
			warm = append(warm, warmHandover(t, w, fmt.Sprintf("bench-%02d", i)))
			cold = append(cold, coldStart(t, ns, fmt.Sprintf("cold-%02d", i)))
		}
		t0 := time.Now()
		_, _, rc := kexec(t, w, "", 30*time.Second, "true")
		require.Equal(t, 0, rc)
		execRTT = append(execRTT, time.Since(t0))
	}

	mc, mw := median(cold), median(warm)
	var b strings.Builder
	fmt.Fprintf(&b, "| path (%d runs each, one run, %s) | median | min | p90 | max |\n|---|---|---|---|---|\n", benchRounds, time.Now().UTC().Format("2006-01-02"))
	row := func(name string, d []time.Duration) {
		s := sorted(d)
		fmt.Fprintf(&b, "| %s | %.3f s | %.3f s | %.3f s | %.3f s |\n", name, median(d).Seconds(), s[0].Seconds(), s[(len(s)*9+9)/10-1].Seconds(), s[len(s)-1].Seconds())
	}
	row("cold: create busybox pod → first output line in its log", cold)
	row("warm: `job start` + `job run -- echo first` (2× kubectl exec)", warm)
	row("reference: one `kubectl exec POD -- true`", execRTT)
	fmt.Fprintf(&b, "\n**cold / warm (medians): %.1f×** — load average %s\n", float64(mc)/float64(mw), loadAvg())
	t.Logf("\n%s", b.String())
	if f := os.Getenv("WARMPOD_KUBE_RESULTS"); f != "" {
		require.NoError(t, os.WriteFile(f, []byte(b.String()), 0o644))
		t.Logf("written to %s", f)
	}
	require.Less(t, mw, mc, "a warm hand-over must beat a cold start")
}

func sorted(d []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

func median(d []time.Duration) time.Duration {
	s := sorted(d)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

// machineLine says what machine a bench file's figures come from, so that
// runs on different machines of one kind can be read side by side (a
// client-go binary started in 4.9 ms on one and 31 ms on another): its
// CPU, the process start of /bin/true (20 runs, median) and the load.
func machineLine(t *testing.T) string {
	model := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("Machine: %d cores of %s; a process start (`/bin/true`, 20 runs, median) %.2f ms; load average %s.",
		runtime.NumCPU(), model, float64(processAlone(t, 20, "/bin/true"))/float64(time.Millisecond), loadAvg())
}

// coldStart creates a one-stage busybox pod and returns the time from the POST
// to the stage's first output line being readable through the API.
func coldStart(t *testing.T, ns, name string) time.Duration {
	t.Helper()
	p := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"hostNetwork": true, "enableServiceLinks": false,
			"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
			"containers": []any{map[string]any{
				"name": "build", "image": busyboxImage, "imagePullPolicy": "Never",
				"command": []string{"sh", "-c", "echo first"},
			}},
		},
	}
	t0 := time.Now()
	api.must(t, 201, "POST", "/api/v1/namespaces/"+ns+"/pods", p)
	var took time.Duration
	for {
		code, body, err := api.do("GET", podPath(ns, name)+"/log?container=build", nil)
		require.NoError(t, err)
		if code == 200 && strings.HasPrefix(string(body), "first") {
			took = time.Since(t0)
			break
		}
		require.Less(t, time.Since(t0), 120*time.Second, "cold pod %s produced no output: %d %s", name, code, body)
		time.Sleep(20 * time.Millisecond)
	}
	// Clean up without waiting (and without disturbing the next measurement much).
	_, _, _ = api.do("DELETE", podPath(ns, name), map[string]any{"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
	return took
}

// warmHandover runs one job's start and first command on the warm pod and
// returns the time until that command's output is back; the job is ended
// afterwards (not timed).
func warmHandover(t *testing.T, w *warmPod, id string) time.Duration {
	t.Helper()
	spec := `{"id":"` + id + `","token":"glcbt-bench-` + id + `","variables":[{"key":"CI_PROJECT_PATH","value":"group/project"},{"key":"CI_COMMIT_SHA","value":"0123456789abcdef"}]}` + "\n"
	t0 := time.Now()
	out, stderr, rc := kexec(t, w, spec, 30*time.Second, "warmpod", "job", "start")
	require.Equal(t, 0, rc, "job start %s: %s %s", id, out, stderr)
	out, stderr, rc = kexec(t, w, "", 30*time.Second, "warmpod", "job", "run", "--", "echo", "first")
	took := time.Since(t0)
	require.Equal(t, 0, rc, "job run %s: %s", id, stderr)
	require.Equal(t, "first\n", out)
	out, stderr, rc = kexec(t, w, "", 60*time.Second, "warmpod", "job", "end")
	require.Equal(t, 0, rc, "job end %s: %s %s", id, out, stderr)
	require.Contains(t, out, `"state":"idle"`, "the warm pod must stay in service (--max-jobs=0)")
	return took
}

// emptyGoProgram builds `func main() {}` with this test's Go toolchain,
// static as the product's binaries are, and returns its path: what a
// process start of any Go binary costs on this machine, beside the
// product's own.
func emptyGoProgram(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module empty\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644))
	cmd := exec.Command("go", "build", "-o", "empty", ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return filepath.Join(dir, "empty")
}
