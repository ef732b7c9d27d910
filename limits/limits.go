// Package limits reads the container's own cgroup limits (v1 or v2) and
// tells whether given values are in force in them: `warmpod job limits`,
// which the executor runs in a warm pod it resized in place. The kubelet
// writes the new limits into the container's cgroup (CRI
// UpdateContainerResources) up to seconds before the pod's status reports
// them (it re-reads the container at its next PLEG relist, syncs the pod,
// then the status manager writes the status): bench/resize-breakdown.md.
// The executor computes the values the kubelet writes (package
// executor/pool); this side only reads and compares, to stay small.
package limits

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warmpod/warmpod/internal/jsonenc"
)

// Want is what the container's cgroup is to hold; a zero field is not
// checked.
type Want struct {
	// Shares is v1's cpu.shares (checked on v1 only).
	Shares uint64
	// Weights are the cgroup v2 cpu.weight values that mean the same
	// (checked on v2 only: runc's mapping from shares changed in 1.4).
	Weights []uint64
	// Quota is the CFS quota in µs (v1 cpu.cfs_quota_us, v2 cpu.max).
	Quota int64
	// Memory is the memory limit in bytes (v1 memory.limit_in_bytes, v2
	// memory.max); the kernel keeps it in whole pages, rounded down.
	Memory int64
}

// Values are what the container's cgroup holds.
type Values struct {
	// V2 is true on the unified hierarchy (cgroup v2).
	V2 bool `json:"v2"`
	// Shares is v1's cpu.shares; Weight v2's cpu.weight (0 when not that
	// version).
	Shares uint64 `json:"cpu_shares,omitempty"`
	Weight uint64 `json:"cpu_weight,omitempty"`
	// Quota is the CFS quota in µs; -1: no limit.
	Quota int64 `json:"cpu_quota_us"`
	// Memory is the memory limit in bytes; -1: no limit.
	Memory int64 `json:"memory_limit"`
}

// AppendJSON appends v as encoding/json.Marshal writes it (jsonenc: PID
// 1's `warmpod job limits` prints it).
func (v Values) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.Bool("v2", v.V2)
	if v.Shares != 0 {
		o.Uint("cpu_shares", v.Shares)
	}
	if v.Weight != 0 {
		o.Uint("cpu_weight", v.Weight)
	}
	o.Int("cpu_quota_us", v.Quota)
	o.Int("memory_limit", v.Memory)
	return o.End()
}

// unlimitedMemory: v1 reports no limit as the page-aligned maximum of an
// int64 (9223372036854771712); anything from 2^62 up is no limit.
const unlimitedMemory = int64(1) << 62

// Check refuses what no cgroup can be seen to hold, page being the page
// size: a memory limit below one page, which the kernel keeps as 0 pages
// (it rounds a limit down to whole pages), and 0 here means "not
// checked". Negative values are the caller's to refuse.
func (w Want) Check(page int64) error {
	if w.Memory > 0 && w.Memory < page {
		return fmt.Errorf("memory limit %d B is below one page (%d B): the kernel keeps whole pages", w.Memory, page)
	}
	return nil
}

// Met tells whether v holds w; when not, the first difference. page is
// the page size.
func (w Want) Met(v Values, page int64) (bool, string) {
	switch {
	case !v.V2 && w.Shares != 0 && v.Shares != w.Shares:
		return false, fmt.Sprintf("cpu.shares %d, want %d", v.Shares, w.Shares)
	case v.V2 && w.Weights != nil && !slices.Contains(w.Weights, v.Weight):
		return false, fmt.Sprintf("cpu.weight %d, want one of %v", v.Weight, w.Weights)
	case w.Quota != 0 && v.Quota != w.Quota:
		return false, fmt.Sprintf("cpu quota %s, want %d µs", limitString(v.Quota, "µs"), w.Quota)
	}
	if m := w.Memory; m != 0 {
		if page > 0 {
			m -= m % page
		}
		if v.Memory != m {
			return false, fmt.Sprintf("memory limit %s, want %d B", limitString(v.Memory, "B"), m)
		}
	}
	return true, ""
}

// limitString says a limit read from a cgroup in unit: -1 is none (v2's
// "max").
func limitString(n int64, unit string) string {
	if n == -1 {
		return "none"
	}
	return strconv.FormatInt(n, 10) + " " + unit
}

// Read reads the cgroup limits under root, the container's view of
// /sys/fs/cgroup: cgroup v2 when it holds cgroup.controllers (the
// container's own cgroup at the root, as a private cgroup namespace
// shows it), else v1 with the cpu and memory hierarchies as
// subdirectories (the container's own cgroup bind-mounted at each, as
// runc mounts them).
func Read(root string) (Values, error) {
	at := func(name string) string { return filepath.Join(root, name) }
	if _, err := os.Stat(at("cgroup.controllers")); err == nil {
		v := Values{V2: true}
		w, err := readFile(at("cpu.weight"))
		if err == nil {
			v.Weight, err = strconv.ParseUint(w, 10, 64)
		}
		if err != nil {
			return v, fmt.Errorf("cpu.weight: %w", err)
		}
		if v.Quota, err = readLimit(at("cpu.max"), true); err != nil {
			return v, err
		}
		v.Memory, err = readLimit(at("memory.max"), false)
		return v, err
	}
	var v Values
	cpu := at("cpu")
	if _, err := os.Stat(filepath.Join(cpu, "cpu.shares")); err != nil {
		cpu = at("cpu,cpuacct") // where cpu is not its own mount point
	}
	shares, err := readLimit(filepath.Join(cpu, "cpu.shares"), false)
	if err != nil {
		return v, err
	}
	v.Shares = uint64(max(shares, 0))
	if v.Quota, err = readLimit(filepath.Join(cpu, "cpu.cfs_quota_us"), false); err != nil {
		return v, err
	}
	if v.Memory, err = readLimit(at("memory/memory.limit_in_bytes"), false); err != nil {
		return v, err
	}
	if v.Memory >= unlimitedMemory {
		v.Memory = -1
	}
	return v, nil
}

// readLimit reads a limit file (cpuMax: v2's cpu.max, whose quota is the
// first field).
func readLimit(path string, cpuMax bool) (int64, error) {
	s, err := readFile(path)
	if err == nil && cpuMax {
		s, err = CPUMaxQuota(s)
	}
	var n int64
	if err == nil {
		n, err = ParseLimit(s)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return n, nil
}

// maxFile bounds what is read of a cgroup file (they hold one short line).
const maxFile = 256

// readFile reads the first line of a cgroup file, trimmed.
func readFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, maxFile)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	return strings.TrimSpace(line), nil
}

// ParseLimit parses a cgroup limit: a decimal integer, or "max" (v2's no
// limit) as -1. Surrounding white space is ignored.
func ParseLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < -1 {
		return 0, fmt.Errorf("not a limit: %q", trunc(s))
	}
	return n, nil
}

// CPUMaxQuota returns the quota field of cgroup v2's cpu.max, "QUOTA
// PERIOD" (QUOTA "max" for no limit), after checking the period is a
// positive number.
func CPUMaxQuota(s string) (string, error) {
	quota, period, ok := strings.Cut(strings.TrimSpace(s), " ")
	if p, err := strconv.ParseInt(period, 10, 64); !ok || err != nil || p <= 0 {
		return "", fmt.Errorf("want \"QUOTA PERIOD\", got %q", trunc(s))
	}
	return quota, nil
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// ErrNotInForce is returned by [Wait] when the limits did not show within
// its bound.
var ErrNotInForce = errors.New("not in force")

// Wait reads the limits (read) every poll until w is met, for up to
// within by now; sleep waits (time.Sleep in production). It returns the
// last values read and nil when met, [ErrNotInForce] with the difference
// when within has passed, ctx's error, or read's error (the cgroup cannot
// be read: nothing to wait for).
func Wait(ctx context.Context, w Want, page int64, within, poll time.Duration, read func() (Values, error),
	now func() time.Time, sleep func(time.Duration)) (Values, error) {
	end := now().Add(within)
	for {
		v, err := read()
		if err != nil {
			return v, err
		}
		ok, diff := w.Met(v, page)
		if ok {
			return v, nil
		}
		if !now().Before(end) {
			return v, fmt.Errorf("%w within %s: %s", ErrNotInForce, within, diff)
		}
		if err := ctx.Err(); err != nil {
			return v, err
		}
		sleep(poll)
	}
}
