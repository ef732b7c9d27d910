//go:build kube

package kubee2e

// The breakdown of warmpod-github's overhead per `run:` step (issue 30),
// for make bench-github: each step call of the multiplexed runs split at
// the instants the hook's --timings records (WARMPOD_GITHUB_TIMINGS: one
// JSON line per call), PID 1's start and end of the stage, and hookrun's
// own figures (the call's wall time, the script's time in the pod).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hookTiming is one line of the hook's --timings file (executor/github's
// callTrace): Unix nanoseconds, 0 for a part the call did not have.
type hookTiming struct {
	Command     string `json:"command"`
	Main        int64  `json:"main"`
	Input       int64  `json:"input"`
	ClientNS    int64  `json:"client_ns"`
	Stage       int64  `json:"stage"`
	Accept      int64  `json:"accept"`
	Started     int64  `json:"started"`
	Ended       int64  `json:"ended"`
	Final       int64  `json:"final"`
	End         int64  `json:"end"`
	MuxCalls    int64  `json:"mux_calls"`
	DirectCalls int64  `json:"direct_calls"`
}

// stepPart is one row of the breakdown.
type stepPart struct {
	what string
	d    []time.Duration
}

// stepParts is the breakdown of the step calls of several runs.
type stepParts struct {
	parts    []stepPart
	overhead []time.Duration
	steps    int
	skipped  int // steps whose timings did not pair with hookrun's
}

var stepPartNames = []string{
	"the shim, the hook's process start and its exit (hook call − the hook's own run from main)",
	"reading and decoding the hook input",
	"Kubernetes client set-up (kubeconfig, clientset)",
	"the step's files read and its stage script made",
	"to the job's multiplexer (unix socket) until it took the call",
	"into the pod until PID 1 started the stage: frames over the job's exec stream, the `job stage` call in attach's process (a child process before 4ad8eca), its status, script and stage requests to PID 1",
	"the stage script around the step in the pod (PID 1's stage time − the script's): shell, step files, environment, the entry point's start; the file commands back",
	"from the stage's end back to the hook: PID 1's wait answer, the output's tail and status line, attach, the exec stream, the multiplexer",
	"the hook after the stage until its run returns",
}

// add pairs the run_script_step lines of timings (a --timings file) with
// r's `run:` steps, in order.
func (p *stepParts) add(t *testing.T, r *hookResult, timings string) {
	t.Helper()
	if p.parts == nil {
		for _, n := range stepPartNames {
			p.parts = append(p.parts, stepPart{what: n})
		}
	}
	var lines []hookTiming
	f, err := os.Open(timings)
	require.NoError(t, err, "the hook wrote no timings")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var h hookTiming
		require.NoError(t, json.Unmarshal(sc.Bytes(), &h), "%s", sc.Bytes())
		if h.Command == "run_script_step" {
			lines = append(lines, h)
		}
	}
	var steps []int
	for i, s := range r.Steps {
		if !strings.HasPrefix(s.ID, "__") && s.HookMS > 0 {
			steps = append(steps, i)
		}
	}
	if len(steps) != len(lines) {
		p.skipped += len(steps)
		return
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	for k, i := range steps {
		s, h := r.Steps[i], lines[k]
		if h.Accept == 0 || h.Started == 0 || h.Ended == 0 {
			p.skipped++ // went direct, or no stage times
			continue
		}
		p.steps++
		vals := []time.Duration{
			ms(s.HookMS) - time.Duration(h.End-h.Main),
			time.Duration(h.Input - h.Main),
			time.Duration(h.ClientNS),
			time.Duration(h.Stage-h.Input) - time.Duration(h.ClientNS),
			time.Duration(h.Accept - h.Stage),
			time.Duration(h.Started - h.Accept),
			time.Duration(h.Ended-h.Started) - ms(s.ScriptMS),
			time.Duration(h.Final - h.Ended),
			time.Duration(h.End - h.Final),
		}
		for j, v := range vals {
			p.parts[j].d = append(p.parts[j].d, v)
		}
		p.overhead = append(p.overhead, ms(s.OverheadMS))
	}
}

// processAlone is the median wall time of n runs of argv (the hook's
// process start and exit alone: `version`).
func processAlone(t *testing.T, n int, argv ...string) time.Duration {
	t.Helper()
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		ds = append(ds, time.Since(t0))
	}
	return median(ds)
}

// table is the breakdown in Markdown, with the step overhead against the
// bare exec round trip rtt of the same run and issue 30's target (≤ 0.5×).
func (p *stepParts) table(t *testing.T, rtt time.Duration) string {
	t.Helper()
	var b strings.Builder
	if p.steps == 0 {
		fmt.Fprintf(&b, "\nNo step of the multiplexed runs could be broken down (%d without timings that pair).\n", p.skipped)
		return b.String()
	}
	fmt.Fprintf(&b, "\nWhere warmpod-github's overhead per `run:` step goes, with the multiplexer (%d steps of the runs above; the hook's --timings, "+
		"PID 1's stage start and end, hookrun's call and script times; medians of each part, which need not add up to the median of the whole):\n\n", p.steps)
	b.WriteString("| part of the step's overhead | median | share |\n|---|---:|---:|\n")
	whole := median(p.overhead)
	for _, part := range p.parts {
		m := median(part.d)
		fmt.Fprintf(&b, "| %s | %s | %.0f %% |\n", part.what, msSigned(m), 100*float64(m)/float64(whole))
	}
	fmt.Fprintf(&b, "| **overhead per step (hook call − script)** | **%s** | |\n", msSigned(whole))
	dir := hookShim(t)
	bin := processAlone(t, 20, filepath.Join(dir, "warmpod-github"), "version")
	step := processAlone(t, 20, filepath.Join(dir, "warmpod-github-step"), "version")
	shim := processAlone(t, 20, "bash", "-e", filepath.Join(dir, "warmpod-github.sh"), "version")
	floor := processAlone(t, 20, emptyGoProgram(t))
	fmt.Fprintf(&b, "\nThe hook's process alone (`version`, 20 runs each, medians): the full build %s, the per-step build %s (issue 40's target: ≤ 5 ms), "+
		"through the shim (`bash -e warmpod-github.sh`, as the runner starts it, which runs the per-step build) %s; "+
		"an empty Go program (`func main() {}`, the same toolchain, static), the start of any Go binary here: %s.\n",
		msSigned(bin), msSigned(step), msSigned(shim), msSigned(floor))
	ratio := float64(whole) / float64(rtt)
	fmt.Fprintf(&b, "\nStep overhead / one bare exec round trip of the same run (%s): %.2f×; target ≤ 0.50× (issue 30): %s.\n",
		msSigned(rtt), ratio, map[bool]string{true: "met", false: "**not met**"}[ratio <= 0.5])
	if p.skipped > 0 {
		fmt.Fprintf(&b, "\n%d steps left out of the breakdown (timings that did not pair with hookrun's steps, or a step that went direct).\n", p.skipped)
	}
	return b.String()
}

// msSigned is a duration in ms with one decimal (a part may be negative:
// the script's time in the pod is read from /proc/uptime, in steps of
// 10 ms).
func msSigned(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
