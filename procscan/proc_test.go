package procscan

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// statTail is the rest of a realistic stat line after field 6 (session).
const statTail = " 34816 1 4194560 1234 0 0 0 12 7 0 0 20 0 1 0 1234567 12345678 345 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

func TestReadProcsFakeRoot(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("1/stat", "1 (warmpod) S 0 1 1"+statTail)
	write("42/stat", "42 (my (weird) prog) ) R 1 42 1"+statTail)
	write("43/stat", "43 (sh) Z 42 42 1"+statTail)
	write("50/stat", "50 (big) S 1 50 1"+strings.Repeat(" 0", 3000)+"\n") // > the 1 KiB buffer
	write("51/stat", "51 () S 1 -1 1"+statTail)                           // empty comm, negative pgrp
	mkdir("60")                                                           // vanished: directory without stat
	write("61/stat", "garbage")                                           // unparsable: skipped
	write("62/stat", "62 (no state)")                                     // truncated: skipped
	write("70", "a regular file named like a pid")                        // ENOTDIR: skipped
	write("net/stat", "7 (x) S 1 1 1"+statTail)                           // non-numeric entries
	write("self/stat", "8 (x) S 1 1 1"+statTail)
	write("12a/stat", "9 (x) S 1 1 1"+statTail)
	write("0/stat", "10 (x) S 1 1 1"+statTail)
	write("uptime", "1.0 2.0\n")

	procs, err := ReadProcs(root)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(procs, func(a, b Proc) int { return a.PID - b.PID })
	want := []Proc{
		{PID: 1, PPID: 0, PGID: 1, SID: 1, State: 'S', Comm: "warmpod", CPU: 19, Start: 1234567},
		{PID: 42, PPID: 1, PGID: 42, SID: 1, State: 'R', Comm: "my (weird) prog) ", CPU: 19, Start: 1234567},
		{PID: 43, PPID: 42, PGID: 42, SID: 1, State: 'Z', Comm: "sh", CPU: 19, Start: 1234567},
		{PID: 50, PPID: 1, PGID: 50, SID: 1, State: 'S', Comm: "big"},
		{PID: 51, PPID: 1, PGID: -1, SID: 1, State: 'S', Comm: "", CPU: 19, Start: 1234567},
	}
	if !slices.Equal(procs, want) {
		t.Fatalf("ReadProcs =\n%+v\nwant\n%+v", procs, want)
	}
}

func TestReadProcsManyEntries(t *testing.T) {
	// More entries than one getdents buffer holds.
	root := t.TempDir()
	const n = 600
	for pid := 1; pid <= n; pid++ {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := strconv.Itoa(pid) + " (p) S 1 1 1" + statTail
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	procs, err := ReadProcs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != n {
		t.Fatalf("got %d procs, want %d", len(procs), n)
	}
}

func TestReadProcsMissingRoot(t *testing.T) {
	_, err := ReadProcs(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestReadProcsReal(t *testing.T) {
	procs, err := ReadProcs("/proc")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(procs, func(p Proc) bool { return p.PID == os.Getpid() })
	if i < 0 {
		t.Fatalf("pid %d not found among %d processes", os.Getpid(), len(procs))
	}
	self := procs[i]
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	if self.PPID != os.Getppid() || self.PGID != syscall.Getpgrp() || self.SID != sid {
		t.Fatalf("self = %+v, want PPID %d PGID %d SID %d", self, os.Getppid(), syscall.Getpgrp(), sid)
	}
	if self.Comm == "" || !strings.HasPrefix(filepath.Base(os.Args[0]), self.Comm) {
		t.Fatalf("comm %q is not a prefix of %q", self.Comm, filepath.Base(os.Args[0]))
	}
	if self.State != 'R' && self.State != 'S' {
		t.Fatalf("state %q", self.State)
	}
}

func TestDescendantsReal(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary:", err)
	}
	cmd := exec.Command(sleep, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	procs, err := ReadProcs("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if d := Descendants(procs, os.Getpid()); !slices.Contains(d, cmd.Process.Pid) {
		t.Fatalf("child %d not among descendants %v", cmd.Process.Pid, d)
	}
	self := os.Getpid()
	foreign := Foreign(procs, func(p Proc) bool { return p.PID == self })
	if slices.ContainsFunc(foreign, func(p Proc) bool { return p.PID == self }) {
		t.Fatal("skip did not exclude self")
	}
	if !slices.ContainsFunc(foreign, func(p Proc) bool { return p.PID == cmd.Process.Pid }) {
		t.Fatal("the running child is not foreign")
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		in   string
		want Proc
		ok   bool
	}{
		{in: "7 (cat) R 1 7 1" + statTail, want: Proc{PID: 7, PPID: 1, PGID: 7, SID: 1, State: 'R', Comm: "cat", CPU: 19, Start: 1234567}, ok: true},
		{in: "7 (a b) c) D 1 2 3 4", want: Proc{PID: 7, PPID: 1, PGID: 2, SID: 3, State: 'D', Comm: "a b) c"}, ok: true},
		{in: "7 ((() S 1 2 3\n", want: Proc{PID: 7, PPID: 1, PGID: 2, SID: 3, State: 'S', Comm: "(("}, ok: true},
		{in: "7 (x) S 1 2 3", want: Proc{PID: 7, PPID: 1, PGID: 2, SID: 3, State: 'S', Comm: "x"}, ok: true},
		{in: "", ok: false},
		{in: "7 x) S 1 2 3", ok: false},
		{in: "7 (x S 1 2 3", ok: false},
		{in: ") 7 (x S 1 2 3", ok: false},
		{in: "x7 (x) S 1 2 3", ok: false},
		{in: "(x) S 1 2 3", ok: false},
		{in: "7 (x)", ok: false},
		{in: "7 (x) S", ok: false},
		{in: "7 (x) S 1 2", ok: false},
		{in: "7 (x) S 1 2 x", ok: false},
		{in: "7 (x) S 1a 2 3", ok: false},
		{in: "7 (x)S 1 2 3", ok: false},
		{in: "7 (x) S 1 2 99999999999999999999999", ok: false},
	}
	for _, tt := range tests {
		got, ok := parseStat([]byte(tt.in))
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestForeign(t *testing.T) {
	procs := []Proc{
		{PID: 1, State: 'S', Comm: "warmpod"},
		{PID: 2, PPID: 1, State: 'R', Comm: "bash"},
		{PID: 3, PPID: 2, State: 'Z', Comm: "defunct"},
		{PID: 4, PPID: 2, State: 'X', Comm: "dead"},
		{PID: 5, PPID: 1, State: 'S', Comm: "helper"},
	}
	pids := func(ps []Proc) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.PID)
		}
		return out
	}
	if got := pids(Foreign(procs, nil)); !slices.Equal(got, []int{1, 2, 5}) {
		t.Errorf("Foreign(nil skip) = %v", got)
	}
	skip := func(p Proc) bool { return p.PID == 1 || p.Comm == "helper" }
	if got := pids(Foreign(procs, skip)); !slices.Equal(got, []int{2}) {
		t.Errorf("Foreign(skip) = %v", got)
	}
	if got := Foreign(nil, nil); len(got) != 0 {
		t.Errorf("Foreign(nil) = %v", got)
	}
}

func TestDescendants(t *testing.T) {
	procs := []Proc{
		{PID: 1, PPID: 0},
		{PID: 10, PPID: 1},
		{PID: 11, PPID: 10},
		{PID: 12, PPID: 11},
		{PID: 13, PPID: 10},
		{PID: 20, PPID: 1},
		{PID: 30, PPID: 31}, // a PPID cycle from a racy scan
		{PID: 31, PPID: 30},
		{PID: 40, PPID: 40}, // self-parent
	}
	tests := []struct {
		pid  int
		want []int
	}{
		{pid: 10, want: []int{11, 13, 12}},
		{pid: 1, want: []int{10, 20, 11, 13, 12}},
		{pid: 12, want: nil},
		{pid: 99, want: nil},
		{pid: 30, want: []int{31}},
		{pid: 40, want: nil},
		{pid: 0, want: []int{1, 10, 20, 11, 13, 12}},
	}
	for _, tt := range tests {
		if got := Descendants(procs, tt.pid); !slices.Equal(got, tt.want) {
			t.Errorf("Descendants(%d) = %v, want %v", tt.pid, got, tt.want)
		}
	}
}

func BenchmarkReadProcs(b *testing.B) {
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		procs, err := ReadProcs("/proc")
		if err != nil {
			b.Fatal(err)
		}
		n = len(procs)
	}
	b.ReportMetric(float64(n), "procs")
}

func TestParseIO(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"rchar: 100\nwchar: 23\nsyscr: 4\nsyscw: 2\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n", 123, true},
		{"rchar: 1\n", 0, false},
		{"rchar: x\nwchar: 1\n", 0, false},
		{"", 0, false},
	} {
		got, ok := parseIO([]byte(tc.in))
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseIO(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestUsageTracker(t *testing.T) {
	var b UsageTracker
	steps := []struct {
		name string
		cur  map[int]Usage
		want bool
	}{
		{"nothing", map[int]Usage{}, false},
		{"a new process is activity", map[int]Usage{7: {Start: 10}}, true},
		{"sleeping: not activity", map[int]Usage{7: {Start: 10}}, false},
		{"still sleeping", map[int]Usage{7: {Start: 10}}, false},
		{"CPU", map[int]Usage{7: {Start: 10, CPU: 1}}, true},
		{"I/O", map[int]Usage{7: {Start: 10, CPU: 1, IO: 5}}, true},
		{"quiet again", map[int]Usage{7: {Start: 10, CPU: 1, IO: 5}}, false},
		{"PID reused: new process", map[int]Usage{7: {Start: 99}}, true},
		{"gone", map[int]Usage{}, false},
		{"back with the old start: seen as new", map[int]Usage{7: {Start: 99}}, true},
	}
	for _, st := range steps {
		if got := b.Update(st.cur); got != st.want {
			t.Fatalf("%s: Update = %v, want %v", st.name, got, st.want)
		}
	}
}
