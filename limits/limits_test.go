package limits

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMet(t *testing.T) {
	v1 := Values{Shares: 512, Quota: -1, Memory: 256 << 20}
	v2 := Values{V2: true, Weight: 20, Quota: 50000, Memory: 256 << 20}
	for _, tc := range []struct {
		name string
		want Want
		v    Values
		ok   bool
		diff string
	}{
		{"nothing asked", Want{}, Values{}, true, ""},
		{"v1 shares and memory", Want{Shares: 512, Weights: []uint64{20, 59}, Memory: 256 << 20}, v1, true, ""},
		{"v1 old shares", Want{Shares: 512}, Values{Shares: 102}, false, "cpu.shares 102, want 512"},
		{"v1 no quota yet", Want{Quota: 50000}, v1, false, "cpu quota none, want 50000 µs"},
		{"v1 memory not yet", Want{Memory: 512 << 20}, v1, false, "memory limit 268435456 B, want 536870912 B"},
		{"no memory limit yet", Want{Memory: 512 << 20}, Values{Memory: -1}, false, "memory limit none, want 536870912 B"},
		{"memory rounded down to pages", Want{Memory: 256<<20 + 100}, v1, true, ""},
		{"v2 weight, quota and memory", Want{Shares: 512, Weights: []uint64{20, 59}, Quota: 50000, Memory: 256 << 20}, v2, true, ""},
		{"v2 the other weight", Want{Weights: []uint64{59, 20}}, v2, true, ""},
		{"v2 old weight", Want{Shares: 20, Weights: []uint64{21, 60}}, v2, false, "cpu.weight 20, want one of [21 60]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, diff := tc.want.Met(tc.v, 4096)
			assert.Equal(t, tc.ok, ok)
			assert.Contains(t, diff, tc.diff)
		})
	}
}

// A memory limit below one page cannot be waited for: the kernel keeps
// it as 0 pages, and 0 means "not checked" (`job limits --memory-limit 1`
// waited for 0 and said "memory limit -1, want 0").
func TestCheck(t *testing.T) {
	assert.NoError(t, Want{}.Check(4096))
	assert.NoError(t, Want{Memory: 4096}.Check(4096))
	assert.NoError(t, Want{Memory: 256 << 20}.Check(4096))
	for _, m := range []int64{1, 4095} {
		assert.ErrorContains(t, Want{Memory: m}.Check(4096), "below one page (4096 B)", m)
	}
}

// cgroupDir writes files (name → content) under a new directory.
func cgroupDir(t testing.TB, files map[string]string) string {
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  Values
		err   string
	}{
		{"v1", map[string]string{"cpu/cpu.shares": "512\n", "cpu/cpu.cfs_quota_us": "-1\n", "memory/memory.limit_in_bytes": "268435456\n"},
			Values{Shares: 512, Quota: -1, Memory: 256 << 20}, ""},
		{"v1 cpu,cpuacct and no memory limit", map[string]string{"cpu,cpuacct/cpu.shares": "2\n", "cpu,cpuacct/cpu.cfs_quota_us": "50000\n",
			"memory/memory.limit_in_bytes": "9223372036854771712\n"}, Values{Shares: 2, Quota: 50000, Memory: -1}, ""},
		{"v2", map[string]string{"cgroup.controllers": "cpu memory\n", "cpu.weight": "20\n", "cpu.max": "max 100000\n", "memory.max": "max\n"},
			Values{V2: true, Weight: 20, Quota: -1, Memory: -1}, ""},
		{"v2 limits", map[string]string{"cgroup.controllers": "", "cpu.weight": "20", "cpu.max": "50000 100000", "memory.max": "268435456"},
			Values{V2: true, Weight: 20, Quota: 50000, Memory: 256 << 20}, ""},
		{"no cgroup", map[string]string{}, Values{}, "cpu.shares"},
		{"v2 without cpu controller", map[string]string{"cgroup.controllers": ""}, Values{V2: true}, "cpu.weight"},
		{"v2 bad cpu.max", map[string]string{"cgroup.controllers": "", "cpu.weight": "20", "cpu.max": "50000"}, Values{V2: true, Weight: 20}, "cpu.max"},
		{"v1 garbage", map[string]string{"cpu/cpu.shares": "lots"}, Values{}, "cpu.shares"},
		{"v1 empty file", map[string]string{"cpu/cpu.shares": "2", "cpu/cpu.cfs_quota_us": ""}, Values{Shares: 2}, "cpu.cfs_quota_us"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Read(cgroupDir(t, tc.files))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, v)
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int64
		err   bool
	}{
		{"max", -1, false}, {" 42\n", 42, false}, {"-1", -1, false}, {"-2", 0, true}, {"", 0, true}, {"4x", 0, true},
		{"99999999999999999999", 0, true},
	} {
		n, err := ParseLimit(tc.in)
		assert.Equal(t, tc.err, err != nil, "%q", tc.in)
		assert.Equal(t, tc.limit, n, "%q", tc.in)
	}
	for _, tc := range []struct {
		in, quota string
		err       bool
	}{
		{"max 100000\n", "max", false}, {"1000 5000", "1000", false}, {"max", "", true}, {"1 0", "", true},
		{"1 max", "", true}, {"a b", "", true}, {"a 5", "a", false}, {"1 2 3", "", true},
	} {
		q, err := CPUMaxQuota(tc.in)
		assert.Equal(t, tc.err, err != nil, "%q", tc.in)
		assert.Equal(t, tc.quota, q, "%q", tc.in)
	}
}

// fakeClock advances only when slept on.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time        { return c.t }
func (c *fakeClock) sleep(d time.Duration) { c.t = c.t.Add(d) }

func TestWait(t *testing.T) {
	old := Values{Shares: 102, Quota: -1, Memory: 128 << 20}
	applied := Values{Shares: 512, Quota: -1, Memory: 256 << 20}
	half := Values{Shares: 102, Quota: -1, Memory: 256 << 20} // memory first, as the kubelet does
	want := Want{Shares: 512, Memory: 256 << 20}
	broken := errors.New("read failed")
	for _, tc := range []struct {
		name   string
		reads  []Values // the last repeats
		err    error
		want   error
		reads0 int
	}{
		{"already in force", []Values{applied}, nil, nil, 1},
		{"after a few reads", []Values{old, old, half, applied}, nil, nil, 4},
		{"never", []Values{old}, nil, ErrNotInForce, 11},
		{"half only", []Values{half}, nil, ErrNotInForce, 11},
		{"unreadable", nil, broken, broken, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1000, 0)}
			n := 0
			read := func() (Values, error) {
				n++
				if tc.err != nil {
					return Values{}, tc.err
				}
				return tc.reads[min(n, len(tc.reads))-1], nil
			}
			v, err := Wait(context.Background(), want, 4096, time.Second, 100*time.Millisecond, read, clk.now, clk.sleep)
			assert.ErrorIs(t, err, tc.want)
			assert.Equal(t, tc.reads0, n, "reads")
			if tc.want == nil {
				assert.Equal(t, applied, v)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		clk := &fakeClock{t: time.Unix(1000, 0)}
		_, err := Wait(ctx, want, 4096, time.Second, time.Millisecond, func() (Values, error) { return old, nil }, clk.now, clk.sleep)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

// FuzzRead: no cgroup file content crashes or hangs the reader, and what
// it accepts is a limit (-1 or above).
func FuzzRead(f *testing.F) {
	for _, s := range []string{"max", "max 100000", "50000 100000\n", "-1", "9223372036854771712", "", " ", "1 2 3", "\x00", "-9223372036854775808"} {
		f.Add(s)
	}
	v1 := []string{"cpu/cpu.shares", "cpu/cpu.cfs_quota_us", "memory/memory.limit_in_bytes"}
	v2 := []string{"cgroup.controllers", "cpu.weight", "cpu.max", "memory.max"}
	dirs := map[string]string{}
	for _, names := range [][]string{v1, v2} {
		files := map[string]string{}
		for _, n := range names {
			files[n] = ""
		}
		dirs[names[0]] = cgroupDir(f, files)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseLimit(s); err == nil && n < -1 {
			t.Fatalf("limit %d from %q", n, s)
		}
		if q, err := CPUMaxQuota(s); err == nil && len(q) > len(s) {
			t.Fatalf("quota %q from %q", q, s)
		}
		for _, names := range [][]string{v1, v2} {
			dir := dirs[names[0]]
			for _, n := range names {
				require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644))
			}
			if v, err := Read(dir); err == nil {
				if v.Quota < -1 || v.Memory < -1 {
					t.Fatalf("%+v from %q", v, s)
				}
				_, _ = (Want{Shares: 512, Weights: []uint64{20, 59}, Quota: 50000, Memory: 1 << 20}).Met(v, 4096)
			}
		}
	})
}

// `warmpod job limits` prints what encoding/json wrote before PID 1
// dropped its encoder (jsonenc).
func TestValuesJSONIsMarshals(t *testing.T) {
	type plain Values
	for _, v := range []Values{{}, {V2: true, Weight: 100, Quota: -1, Memory: -1}, {Shares: 1024, Quota: 50000, Memory: 1 << 30}} {
		want, err := json.Marshal(plain(v))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(v.AppendJSON(nil)))
	}
}
