package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Row is one metric. Section "inits": Values holds warmpod and the three
// anchors; "warmpod": Values holds warmpod and optionally a reference
// (RefName) the ratio is taken against.
type Row struct {
	ID      string               `json:"id"`
	Section string               `json:"section"`
	Metric  string               `json:"metric"`
	Unit    string               `json:"unit"`
	Lower   bool                 `json:"lower_is_better"`
	Values  map[string]float64   `json:"values"`
	Cells   map[string]string    `json:"cells,omitempty"`
	RefName string               `json:"reference,omitempty"`
	Ratio   *float64             `json:"ratio,omitempty"`
	RatioOf string               `json:"ratio_of,omitempty"`
	Runs    string               `json:"runs"`
	Target  string               `json:"target,omitempty"`
	Met     *bool                `json:"target_met,omitempty"`
	Note    string               `json:"note,omitempty"`
	Raw     map[string][]float64 `json:"raw,omitempty"`

	// TargetRatio is warmpod / TargetRef's value when the target is
	// relative (targetVs), e.g. "≤ 1.2× tini".
	TargetRatio *float64 `json:"target_ratio,omitempty"`
	TargetRef   string   `json:"target_ref,omitempty"`
}

func newRow(id, section, metric, unit string, lower bool, runs string) *Row {
	return &Row{ID: id, Section: section, Metric: metric, Unit: unit, Lower: lower, Runs: runs,
		Values: map[string]float64{}, Raw: map[string][]float64{}}
}

func (r *Row) set(name string, v float64) {
	if !math.IsNaN(v) && !math.IsInf(v, 0) {
		r.Values[name] = v
	}
}

// best is the best anchor value (min or max over tini, dumb-init, catatonit).
func (r *Row) best() (string, float64, bool) {
	bn, bv, ok := "", 0.0, false
	for _, n := range anchorNames {
		v, has := r.Values[n]
		if !has {
			continue
		}
		if !ok || (r.Lower && v < bv) || (!r.Lower && v > bv) {
			bn, bv, ok = n, v, true
		}
	}
	return bn, bv, ok
}

// computeRatio fills Ratio: warmpod / best anchor, or warmpod / reference.
func (r *Row) computeRatio() {
	if r.Ratio != nil {
		return
	}
	w, ok := r.Values["warmpod"]
	if !ok {
		return
	}
	var ref float64
	switch {
	case r.Section == "inits":
		n, v, ok := r.best()
		if !ok || v == 0 {
			return
		}
		ref = v
		if r.RatioOf == "" {
			r.RatioOf = "warmpod / " + n
		}
	case r.RefName != "":
		v, ok := r.Values[r.RefName]
		if !ok || v == 0 {
			return
		}
		ref = v
		if r.RatioOf == "" {
			r.RatioOf = "warmpod / " + r.RefName
		}
	default:
		return
	}
	q := w / ref
	r.Ratio = &q
}

func (r *Row) check(ok bool) {
	r.Met = &ok
}

// targetVs sets a target relative to another value of the row: warmpod ≤
// k× ref's value (lower is better) or ≥ k× (higher is better). ref "" is
// the best anchor. Nothing is set when either value is missing.
func (r *Row) targetVs(ref string, k float64) {
	w, ok := r.Values["warmpod"]
	if !ok {
		return
	}
	label, name, v := ref, ref, 0.0
	if ref == "" {
		label = "best anchor"
		name, v, ok = r.best()
	} else {
		v, ok = r.Values[ref]
	}
	if !ok || v == 0 {
		return
	}
	op := "≤"
	if !r.Lower {
		op = "≥"
	}
	q := w / v
	r.Target = fmt.Sprintf("%s %s× %s", op, strconv.FormatFloat(k, 'f', -1, 64), label)
	r.TargetRatio, r.TargetRef = &q, name
	r.check((r.Lower && q <= k) || (!r.Lower && q >= k))
}

func fmtVal(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case unit == "bytes" || unit == "KiB" || unit == "count":
		return commas(int64(math.Round(v)))
	case unit == "%":
		return strconv.FormatFloat(v, 'f', 3, 64)
	case math.Abs(v) >= 100:
		return commas(int64(math.Round(v)))
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func (r *Row) cell(name string) string {
	if c, ok := r.Cells[name]; ok {
		return c
	}
	v, ok := r.Values[name]
	if !ok {
		return "—"
	}
	return fmtVal(v, r.Unit)
}

func (r *Row) ratioCell() string { return fmtRatio(r.Ratio) }

func fmtRatio(q *float64) string {
	if q == nil {
		return "—"
	}
	prec := 2
	if math.Abs(*q) < 0.1 {
		prec = 4
	}
	return strconv.FormatFloat(*q, 'f', prec, 64) + "×"
}

// targetVsCell is the measured ratio a relative target is checked on,
// e.g. "2.00× tini"; "—" for absolute targets.
func (r *Row) targetVsCell() string {
	if r.TargetRatio == nil {
		return "—"
	}
	return fmtRatio(r.TargetRatio) + " " + r.TargetRef
}

func (r *Row) targetCell() string {
	if r.Target == "" {
		return ""
	}
	t := r.Target
	if r.TargetRatio != nil {
		t += " (" + r.targetVsCell() + ")"
	}
	return t + " " + metMark(r.Met)
}

func metMark(met *bool) string {
	switch {
	case met == nil:
		return ""
	case *met:
		return "✅ met"
	default:
		return "❌ **not met**"
	}
}

func (res *Results) write(c *cfg) error {
	for _, r := range res.Rows {
		r.computeRatio()
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.out, "results.md"), []byte(res.markdown(c)), 0o644)
}

func (res *Results) markdown(c *cfg) string {
	var b strings.Builder
	m := res.Machine
	fmt.Fprintf(&b, "# warmpod benchmark results\n\n")
	fmt.Fprintf(&b, "Written by `make bench` (bench/cmd/benchrun) on %s; the whole benchrun took %.0f s",
		res.Started.UTC().Format(time.RFC3339), res.Seconds)
	fmt.Fprintf(&b, " (steps: ")
	for i, s := range res.StepSeconds {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.0f s", s.Step, s.Seconds)
	}
	b.WriteString(")")
	if res.MakeSeconds > 0 {
		fmt.Fprintf(&b, "; `make bench` as a whole (install check, build, all metrics, micro-benchmarks) took %.0f s (%.1f min)", res.MakeSeconds, res.MakeSeconds/60)
	}
	b.WriteString(".\n\n")
	fmt.Fprintf(&b, "**Machine:** %d CPUs (`nproc`), %s, kernel %s, %.1f GiB RAM; load average (1/5/15 min, running/total, last pid) at `make bench` start: `%s`, at benchrun start: `%s`. %s.\n\n",
		m.NProc, m.CPUModel, m.Kernel, m.MemTotalKiB/1024/1024, orDash(m.LoadAtMakeStart), m.LoadAtStart, m.GoVersion)
	var vs []string
	for _, k := range []string{"warmpod", "tini", "dumb-init", "catatonit", "hyperfine", "runc", "unshare"} {
		vs = append(vs, fmt.Sprintf("%s: `%s`", k, strings.ReplaceAll(m.Versions[k], "\n", " ")))
	}
	fmt.Fprintf(&b, "**Versions:** %s.\n\n", strings.Join(vs, "; "))
	fmt.Fprintf(&b, "**warmpod's GOMAXPROCS:** %s.\n\n", gomaxprocsLine(m))
	b.WriteString("The VM is shared with other sessions' test runs, so absolute numbers are noisy; compare within a row (all inits measured in the same run, interleaved where runs are repeated).\n\n")

	b.WriteString("## warmpod against the anchor inits\n\n")
	b.WriteString("Every init runs as PID 1 of a fresh PID namespace (`unshare --pid --fork --mount-proc`). Figures are medians unless the metric says otherwise. *warmpod/best* is warmpod divided by the best anchor (lowest, or highest for throughput), so < 1 is better for times and sizes and > 1 is better for throughput.\n\n")
	b.WriteString("| metric | " + strings.Join(c.initNames, " | ") + " | warmpod/best | runs | target |\n|---|" + strings.Repeat("---:|", len(c.initNames)) + "---:|---|---|\n")
	for _, r := range res.Rows {
		if r.Section != "inits" {
			continue
		}
		fmt.Fprintf(&b, "| %s (%s) |", r.Metric, r.Unit)
		for _, n := range c.initNames {
			fmt.Fprintf(&b, " %s |", r.cell(n))
		}
		fmt.Fprintf(&b, " %s | %s | %s |\n", r.ratioCell(), r.Runs, r.targetCell())
	}
	b.WriteString("\n## warmpod only (probes, job hand-over, warm vs cold)\n\n")
	b.WriteString("warmpod as PID 1 of a runc container (busybox-static rootfs, host network, `--max-jobs 0`), driven through `runc exec` as an executor drives it through `kubectl exec`.\n\n")
	b.WriteString("| metric | warmpod | reference | ratio | runs | target |\n|---|---:|---:|---:|---|---|\n")
	for _, r := range res.Rows {
		if r.Section != "warmpod" {
			continue
		}
		ref := "—"
		if r.RefName != "" {
			ref = r.cell(r.RefName) + " (" + r.RefName + ")"
		}
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | %s | %s | %s |\n", r.Metric, r.Unit, r.cell("warmpod"), ref, r.ratioCell(), r.Runs, r.targetCell())
	}
	b.WriteString("\n## Targets\n\n")
	b.WriteString("Every row of this run that has a target, checked on the measured figures above; *measured vs reference* is warmpod's value divided by the value the target names (tini, the best anchor, the cold container). Rows not measured in this run are not listed.\n\n")
	b.WriteString("| target | metric | warmpod | measured vs reference | result |\n|---|---|---:|---:|---|\n")
	met, all := 0, 0
	for _, r := range res.Rows {
		if r.Met == nil {
			continue
		}
		all++
		if *r.Met {
			met++
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %s |\n", r.Target, r.Metric, r.cell("warmpod"), r.Unit, r.targetVsCell(), metMark(r.Met))
	}
	fmt.Fprintf(&b, "\n%d of %d targets met.\n", met, all)
	b.WriteString("\n## How each figure was measured\n\n")
	for _, r := range res.Rows {
		if r.Note != "" {
			fmt.Fprintf(&b, "- **%s**: %s\n", r.Metric, r.Note)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(res.Micro) > 0 {
		b.WriteString("\n## Go micro-benchmarks (`go test -run '^$' -bench . -benchmem -count 5 ./...`, full output in bench/micro.txt)\n\n")
		b.WriteString("Median of the 5 counts.\n\n| package | benchmark | ns/op | B/op | allocs/op | extra |\n|---|---|---:|---:|---:|---|\n")
		for _, mr := range res.Micro {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mr.Pkg, mr.Name, fmtVal(mr.NsOp, "ns"), commas(int64(mr.BOp)), commas(int64(mr.AllocsOp)), mr.Extra)
		}
	}
	if len(res.Errors) > 0 {
		b.WriteString("\n## Errors during this run\n\n")
		for _, e := range res.Errors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	return b.String()
}

// gomaxprocsLine says what GOMAXPROCS warmpod ran with, as far as the
// environment the bench gives it says.
func gomaxprocsLine(m Machine) string {
	src := func(v string) string {
		if v == "unset" {
			return "GOMAXPROCS unset"
		}
		return "`GOMAXPROCS=" + v + "`"
	}
	if m.GOMAXPROCSNS == m.GOMAXPROCSRunc {
		s := src(m.GOMAXPROCSNS) + " in the environment of every warmpod run (namespace runs and the runc container)"
		if m.GOMAXPROCSNS == "unset" {
			s += ", so warmpod's own default applies (the Go runtime's is the CPU count or the cgroup's CPU limit, unless the binary sets its own)"
		}
		return s
	}
	return fmt.Sprintf("%s in the namespace runs (idle, startup, reap, signal, tput), %s in the runc container (probes, hand-over, memory over jobs); where unset, the binary's own default applies", src(m.GOMAXPROCSNS), src(m.GOMAXPROCSRunc))
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// MicroResult is the median of one benchmark's -count runs.
type MicroResult struct {
	Pkg      string  `json:"pkg"`
	Name     string  `json:"name"`
	Count    int     `json:"count"`
	NsOp     float64 `json:"ns_per_op"`
	BOp      float64 `json:"bytes_per_op"`
	AllocsOp float64 `json:"allocs_per_op"`
	Extra    string  `json:"extra,omitempty"`
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

func parseMicro(path string) []MicroResult {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	type acc struct {
		pkg        string
		ns, bo, al []float64
		extra      map[string][]float64
		extraOrder []string
	}
	byKey := map[string]*acc{}
	var order []string
	pkg := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(p, "github.com/warmpod/warmpod/")
			continue
		}
		mm := benchLine.FindStringSubmatch(line)
		if mm == nil {
			continue
		}
		key := pkg + " " + mm[1]
		a := byKey[key]
		if a == nil {
			a = &acc{pkg: pkg, extra: map[string][]float64{}}
			byKey[key] = a
			order = append(order, key)
		}
		f := strings.Fields(mm[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				a.ns = append(a.ns, v)
			case "B/op":
				a.bo = append(a.bo, v)
			case "allocs/op":
				a.al = append(a.al, v)
			default:
				if _, ok := a.extra[f[i+1]]; !ok {
					a.extraOrder = append(a.extraOrder, f[i+1])
				}
				a.extra[f[i+1]] = append(a.extra[f[i+1]], v)
			}
		}
	}
	var out []MicroResult
	for _, k := range order {
		a := byKey[k]
		mr := MicroResult{Pkg: a.pkg, Name: strings.SplitN(k, " ", 2)[1], Count: len(a.ns), NsOp: median(a.ns), BOp: median(a.bo), AllocsOp: median(a.al)}
		var ex []string
		for _, u := range a.extraOrder {
			ex = append(ex, fmt.Sprintf("%s %s", fmtVal(median(a.extra[u]), u), u))
		}
		sort.Strings(ex)
		mr.Extra = strings.Join(ex, ", ")
		if math.IsNaN(mr.NsOp) {
			continue
		}
		if math.IsNaN(mr.BOp) {
			mr.BOp = 0
		}
		if math.IsNaN(mr.AllocsOp) {
			mr.AllocsOp = 0
		}
		out = append(out, mr)
	}
	return out
}
