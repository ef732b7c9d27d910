//go:build kube

package kubee2e

// Where a warm GitLab job's time goes, call by call and step by step
// (issue 30): each driver call's process start (the runner's exec → the
// driver's first line), its steps as its --timings spans record them
// (client set-up, each API call, each exec through the multiplexer), the
// call's end, and the runner's own work between calls. Skipped unless
// WARMPOD_BREAKDOWN_OUT names the results file. WARMPOD_BREAKDOWN_BINS
// ("name=path,name=path") compares driver binaries on the same pool, job
// by job in turn (a binary without spans gives its calls' totals only);
// WARMPOD_BREAKDOWN_N jobs each (default 10). The job is the anchor's
// `pass` ($GLR_DIR/examples/pass.txt).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// spanTiming is a --timings line with its spans.
type spanTiming struct {
	Call  string `json:"call"`
	Job   string `json:"job"`
	Stage string `json:"stage"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Spans []struct {
		Name       string `json:"name"`
		Start, End int64
	} `json:"spans"`
}

// breakdownVariant is one driver binary and its rows' samples (ms).
type breakdownVariant struct {
	name, bin string
	p         *glrPool
	rows      map[string][]float64
}

func TestGitLabWarmBreakdownBench(t *testing.T) {
	out := os.Getenv("WARMPOD_BREAKDOWN_OUT")
	if out == "" {
		t.Skip("WARMPOD_BREAKDOWN_OUT is not set")
	}
	n := 10
	if s := os.Getenv("WARMPOD_BREAKDOWN_N"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	raw, err := os.ReadFile(filepath.Join(glrDir(t), "examples", "pass.txt"))
	require.NoError(t, err)
	script := strings.Split(strings.TrimSpace(string(raw)), "\n")
	const replicas = 3
	base := newPool(t, poolOpts{replicas: replicas})
	var vs []*breakdownVariant
	for _, nb := range strings.Split(os.Getenv("WARMPOD_BREAKDOWN_BINS"), ",") {
		name, bin, _ := strings.Cut(nb, "=")
		if nb == "" {
			name, bin = "driver", driverBinary(t)
		}
		p := glrPoolIn(t, base.ns, "warmpod-gitlab", poolOpts{driver: bin, stamps: true, flags: []string{"--warm-wait", "0"}})
		vs = append(vs, &breakdownVariant{name: name, bin: bin, p: p, rows: map[string][]float64{}})
	}
	var order []string // rows in their first order
	seen := map[string]bool{}
	for i := range n * len(vs) {
		v := vs[i%len(vs)]
		if (i/len(vs))%2 == 1 { // ABBA: drift hits all alike
			v = vs[len(vs)-1-i%len(vs)]
		}
		id := 3000 + i
		waitIdle(t, base.ns, replicas, 2*time.Minute)
		r := v.p.runJob(t, jobOpts{id: id, script: script})
		require.Equal(t, 0, r.exit, r.String())
		require.Contains(t, traceText(r.trace), "runs on warm pod")
		for _, kv := range breakdownRows(t, v.p, id) {
			if !seen[kv.name] {
				seen[kv.name] = true
				order = append(order, kv.name)
			}
			v.rows[kv.name] = append(v.rows[kv.name], kv.ms)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| step of a warm `pass` job (ms, median of %d jobs) |", n)
	for _, v := range vs {
		fmt.Fprintf(&b, " %s |", v.name)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(vs)) + "\n")
	for _, row := range order {
		fmt.Fprintf(&b, "| %s |", row)
		for _, v := range vs {
			if s := v.rows[row]; len(s) > 0 {
				fmt.Fprintf(&b, " %.1f |", medianF(s))
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nMeasured %s, load average %s.\n", time.Now().UTC().Format(time.RFC3339), loadAvg())
	t.Log("\n" + b.String())
	require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o644))
}

type breakdownRow struct {
	name string
	ms   float64
}

// breakdownRows splits job id of p: per call (in the runner's order), the
// process start (stamp → first span, or → the call's start), each span,
// the call's total from the runner's exec, and the runner's gap before
// the next call; and the whole job (first stamp → cleanup's end).
func breakdownRows(t *testing.T, p *glrPool, id int) []breakdownRow {
	t.Helper()
	rawStamps, err := os.ReadFile(p.stampsFile)
	require.NoError(t, err)
	type stamp struct {
		ns   int64
		call string
	}
	var stamps []stamp
	for _, l := range strings.Split(strings.TrimSpace(string(rawStamps)), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[2] == strconv.Itoa(id) {
			ns, err := strconv.ParseInt(f[0], 10, 64)
			require.NoError(t, err, l)
			stamps = append(stamps, stamp{ns, f[1]})
		}
	}
	rawT, err := os.ReadFile(p.timingsFile)
	require.NoError(t, err)
	byCall := map[string][]spanTiming{}
	for _, l := range strings.Split(strings.TrimSpace(string(rawT)), "\n") {
		var tm spanTiming
		require.NoError(t, json.Unmarshal([]byte(l), &tm), l)
		if tm.Job == strconv.Itoa(id) && tm.Call != "resize" {
			byCall[tm.Call] = append(byCall[tm.Call], tm)
		}
	}
	ms := func(a, b int64) float64 { return float64(b-a) / 1e6 }
	var rows []breakdownRow
	add := func(name string, v float64) { rows = append(rows, breakdownRow{name, v}) }
	var prevEnd int64
	var prevName string
	for _, st := range stamps {
		if prevEnd != 0 {
			add(prevName+" → "+st.call+": the runner's work between the calls", ms(prevEnd, st.ns))
		}
		q := byCall[st.call]
		if len(q) == 0 { // config writes no timing: counted up to the next stamp
			prevEnd, prevName = st.ns, st.call+" (its whole call)"
			continue
		}
		tm := q[0]
		byCall[st.call] = q[1:]
		name := st.call
		if tm.Stage != "" {
			name += " " + tm.Stage
		}
		first := tm.Start
		for _, s := range tm.Spans {
			first = min(first, s.Start)
		}
		add(name+": process start (exec → the driver's first line)", ms(st.ns, first))
		sort.SliceStable(tm.Spans, func(i, j int) bool { return tm.Spans[i].Start < tm.Spans[j].Start })
		for _, s := range tm.Spans {
			add(name+":   "+s.Name, ms(s.Start, s.End))
			add(name+":   "+s.Name+", begins at (ms after the exec)", ms(st.ns, s.Start))
		}
		add(name+": whole call, exec → its end", ms(st.ns, tm.End))
		prevEnd, prevName = tm.End, name
	}
	require.NotEmpty(t, stamps, "no stamps of job %d", id)
	add("whole job: config's exec → cleanup's end", ms(stamps[0].ns, prevEnd))
	return rows
}

func medianF(s []float64) float64 {
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	return c[len(c)/2]
}
