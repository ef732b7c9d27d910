package jsonenc

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// marshal is encoding/json's output for v, the reference.
func marshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// noHTML is encoding/json's output for v with SetEscapeHTML(false).
func noHTML(t testing.TB, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return strings.TrimSuffix(buf.String(), "\n")
}

// slogString is log/slog's JSON handler's output for the string s.
func slogString(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == "x" {
			return a
		}
		return slog.Attr{} // only the one attribute is compared
	}})).Info("", "x", s)
	line := strings.TrimSuffix(buf.String(), "}\n")
	return line[strings.Index(line, `"x":`)+len(`"x":`):]
}

var samples = []string{
	"", "plain", `quote " and \ backslash`, "\b\f\n\r\t", "\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "\u2028\u2029", "caf\xc3\xa9", "bad \xff\xfe utf-8", "\xed\xa0\x80",
	"emoji \U0001F600", "trailing \xc3",
}

func TestAppendStringIsMarshals(t *testing.T) {
	for _, s := range samples {
		assert.Equal(t, marshal(t, s), string(AppendString(nil, s)), "%q", s)
		assert.Equal(t, noHTML(t, s), string(AppendStringNoHTML(nil, s)), "%q", s)
		assert.Equal(t, slogString(t, s), string(AppendLogString(nil, s)), "%q", s)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(AppendString([]byte("x"), s)), "x"+marshal(t, s); got != want {
			t.Fatalf("AppendString(%q) = %s, encoding/json: %s", s, got, want)
		}
		if got, want := string(AppendStringNoHTML(nil, s)), noHTML(t, s); got != want {
			t.Fatalf("AppendStringNoHTML(%q) = %s, encoding/json: %s", s, got, want)
		}
		if got, want := string(AppendLogString(nil, s)), slogString(t, s); got != want {
			t.Fatalf("AppendLogString(%q) = %s, log/slog: %s", s, got, want)
		}
	})
}

func FuzzAppendRaw(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2, "<b>"]}`, ` "\u2028" `, `null`, `{`, ``, `[1,2]`, "\"\u2028\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, err := json.Marshal(json.RawMessage(raw))
		got := AppendRaw(nil, raw)
		switch {
		case len(raw) == 0:
			assert.Equal(t, "null", string(got)) // encoding/json writes null for an empty RawMessage too
		case err != nil:
			assert.Equal(t, "null", string(got), "not valid JSON is written as null")
		default:
			assert.Equal(t, string(want), string(got))
		}
	})
}

func TestAppendStringsAndTime(t *testing.T) {
	for _, ss := range [][]string{nil, {}, {"a"}, {"<a>", "b\n"}} {
		assert.Equal(t, marshal(t, ss), string(AppendStrings(nil, ss)))
	}
	for _, tm := range []time.Time{{}, time.Date(2026, 12, 4, 3, 4, 5, 123456789, time.UTC),
		time.Date(2026, 12, 4, 3, 4, 5, 0, time.FixedZone("x", 3600+1800)), time.Unix(1, 500).Local()} {
		assert.Equal(t, marshal(t, tm), string(AppendTime(nil, tm)))
	}
}

func TestObject(t *testing.T) {
	type doc struct {
		S   string          `json:"s"`
		I   int64           `json:"i"`
		U   uint64          `json:"u"`
		B   bool            `json:"b"`
		T   time.Time       `json:"t"`
		SS  []string        `json:"ss"`
		R   json.RawMessage `json:"r"`
		N   *int            `json:"n"`
		Sub struct {
			X string `json:"x"`
		} `json:"sub"`
	}
	v := doc{S: "<s>", I: -3, U: 1 << 63, B: true, T: time.Unix(7, 8).UTC(), SS: []string{"a"}, R: json.RawMessage(` { "k" : "&" } `)}
	v.Sub.X = "y"
	o := NewObject([]byte("prefix "))
	o.String("s", v.S)
	o.Int("i", v.I)
	o.Uint("u", v.U)
	o.Bool("b", v.B)
	o.Time("t", v.T)
	o.Strings("ss", v.SS)
	o.Raw("r", v.R)
	o.Null("n")
	o.Value("sub", func(b []byte) []byte {
		s := NewObject(b)
		s.String("x", v.Sub.X)
		return s.End()
	})
	assert.Equal(t, "prefix "+marshal(t, v), string(o.End()))
	empty := NewObject(nil)
	assert.Equal(t, "{}", string(empty.End()))
	omit := NewObject(nil)
	omit.OmitEmpty("a", "")
	omit.OmitEmpty("b", "x")
	omit.OmitEmpty("c", "")
	assert.Equal(t, `{"b":"x"}`, string(omit.End()))
}
