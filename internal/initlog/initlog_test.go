package initlog

import (
	"bytes"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// at is the fixed time of the compared lines: a fraction with more than
// millisecond digits, in a zone that is not UTC.
var at = time.Date(2026, 12, 4, 3, 4, 5, 678912345, time.FixedZone("", -(3*3600+1800)))

// reason is a named string type, as lease.Reason is.
type reason string

// signum is a named integer type with a String method, as unix.Signal is.
type signum int

func (s signum) String() string { return "signal " + string(rune('0'+s)) }

// redacted marshals itself as text and as JSON, as jobspec.Secret does.
type redacted string

func (redacted) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }
func (redacted) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// slogLine is log/slog's line for the call, with PID 1's former handler
// options: the time pinned to at, and in JSON a Duration as its String.
func slogLine(f Format, min Level, with []any, lv Level, msg string, args []any) string {
	var buf bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.Level(min), ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			a.Value = slog.TimeValue(at)
		}
		if f == JSON && a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String())
		}
		return a
	}}
	var h slog.Handler = slog.NewTextHandler(&buf, opts)
	if f == JSON {
		h = slog.NewJSONHandler(&buf, opts)
	}
	l := slog.New(h)
	if with != nil {
		l = l.With(with...)
	}
	l.Log(nil, slog.Level(lv), msg, args...) //nolint:staticcheck // a nil context is what Info passes
	return buf.String()
}

// line is this package's line for the same call.
func line(f Format, min Level, with []any, lv Level, msg string, args []any) string {
	var buf bytes.Buffer
	l := New(&buf, min, f, func() time.Time { return at })
	if with != nil {
		l = l.With(with...)
	}
	l.log(lv, msg, args)
	return buf.String()
}

func TestLinesAreLogSlogs(t *testing.T) {
	var nilErr error
	cases := []struct {
		name string
		with []any
		lv   Level
		msg  string
		args []any
	}{
		{name: "message only", lv: LevelInfo, msg: "pod is ready"},
		{name: "empty message", lv: LevelWarn, msg: ""},
		{name: "quoted message", lv: LevelError, msg: `a "b" = c` + "\n\t\x00<&>\u2028"},
		{name: "strings", lv: LevelInfo, msg: "m", args: []any{"job", "j-1", "empty", "", "space", "a b", "eq", "a=b", "back", `a\b`, "uni", "café ☃", "bad", "\xff", "nbsp", "a\u00a0b", "ctl", "\b\f\x7f"}},
		{name: "numbers", lv: LevelDebug, msg: "m", args: []any{"int", -3, "i8", int8(-8), "i16", int16(16), "i32", int32(32), "i64", int64(1 << 62), "u", uint(7), "u8", uint8(8), "u16", uint16(16), "u32", uint32(32), "u64", uint64(1 << 63), "uptr", uintptr(9), "t", true, "f", false, "f64", 1.5, "f64e", 1e21, "f32", float32(0.25)}},
		{name: "durations and times", lv: LevelInfo, msg: "m", args: []any{"d", 90 * time.Second, "zero", time.Duration(0), "ns", 1500 * time.Nanosecond, "t", at.Add(time.Hour), "utc", at.UTC()}},
		{name: "errors", lv: LevelError, msg: "m", args: []any{"err", errors.New("open /x: no such file"), "nil", nilErr}},
		{name: "named and marshalers", lv: LevelInfo, msg: "m", args: []any{"reason", reason("idle-timeout"), "sig", signum(5), "secret", redacted("hunter2"), "bytes", []byte("a b")}},
		{name: "odd and bad keys", lv: LevelInfo, msg: "m", args: []any{42, "x", "y", "dangling"}},
		{name: "key needs quoting", lv: LevelInfo, msg: "m", args: []any{"a key", 1, "", "v"}},
		{name: "with", with: []any{"pod", "p-1", "uid", 7}, lv: LevelWarn, msg: "m", args: []any{"k", "v"}},
		{name: "trace level name", lv: LevelTrace, msg: "m"},
		{name: "level above error", lv: LevelError + 2, msg: "m"},
	}
	for _, c := range cases {
		for _, f := range []Format{Text, JSON} {
			want := slogLine(f, LevelTrace, c.with, c.lv, c.msg, c.args)
			got := line(f, LevelTrace, c.with, c.lv, c.msg, c.args)
			assert.Equal(t, want, got, "%s, format %d", c.name, f)
		}
	}
}

func FuzzTextAndJSONStrings(f *testing.F) {
	f.Add("msg", "key", "value")
	f.Add("", "a b", "\xff\u2028<")
	f.Fuzz(func(t *testing.T, msg, key, val string) {
		for _, fm := range []Format{Text, JSON} {
			args := []any{key, val}
			if want, got := slogLine(fm, LevelInfo, nil, LevelInfo, msg, args), line(fm, LevelInfo, nil, LevelInfo, msg, args); want != got {
				t.Fatalf("format %d: log/slog %q, initlog %q", fm, want, got)
			}
		}
	})
}

func TestLevels(t *testing.T) {
	for _, c := range []struct {
		min, lv Level
		written bool
	}{
		{LevelInfo, LevelDebug, false}, {LevelInfo, LevelInfo, true}, {LevelWarn, LevelInfo, false},
		{LevelTrace, LevelDebug, true}, {LevelOff, LevelError, false},
	} {
		assert.Equal(t, c.written, line(Text, c.min, nil, c.lv, "m", nil) != "", "min %v, line at %v", c.min, c.lv)
		assert.Equal(t, c.written, New(nil, c.min, Text, time.Now).Enabled(c.lv))
	}
	for _, l := range []Level{LevelTrace, LevelDebug, LevelInfo, LevelWarn, LevelError, LevelError + 3, LevelInfo + 1, LevelOff} {
		assert.Equal(t, slog.Level(l).String(), l.String())
	}
}

func TestDiscardAndNil(t *testing.T) {
	var nilLogger *Logger
	for _, l := range []*Logger{Discard(), nilLogger, Discard().With("k", "v")} {
		assert.False(t, l.Enabled(LevelError))
		l.Error("nothing", "k", "v") // must not panic
	}
}

// TestOneWritePerLine checks that concurrent lines never interleave: each
// is one Write under the sink's lock.
func TestOneWritePerLine(t *testing.T) {
	var w countingWriter
	l := New(&w, LevelInfo, Text, time.Now)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				l.With("g", i).Info("line", "k", "v")
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 800, w.writes)
	assert.Equal(t, 800, bytes.Count(w.buf.Bytes(), []byte("\n")))
}

type countingWriter struct {
	buf    bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	assert.Equal(nil, byte('\n'), p[len(p)-1])
	return c.buf.Write(p)
}
