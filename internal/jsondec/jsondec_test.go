package jsondec

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// inner and doc hold every kind of value the Funcs decode, tagged for
// encoding/json, the reference the fuzz test compares with.
type inner struct {
	Name string `json:"name"`
	N    *int   `json:"n,omitempty"`
}

type doc struct {
	S   string          `json:"s"`
	B   bool            `json:"b"`
	I   int             `json:"i"`
	I64 int64           `json:"i64"`
	PI  *int            `json:"pi"`
	P64 *int64          `json:"p64"`
	SS  []string        `json:"ss"`
	Raw json.RawMessage `json:"raw"`
	T   time.Time       `json:"t"`
	PT  *time.Time      `json:"pt"`
	In  []inner         `json:"in"`
	Snk string          `json:"snake_case"`
}

func (x *inner) fields() []Field {
	return []Field{Member("name", &x.Name), Member("n", &x.N)}
}

func innerFunc(x *inner) Func { return Object(x.fields()...) }

func (d *doc) fields() []Field {
	return []Field{
		Member("s", &d.S), Member("b", &d.B), Member("i", &d.I), Member("i64", &d.I64),
		Member("pi", &d.PI), Member("p64", &d.P64), Member("ss", &d.SS),
		Member("raw", &d.Raw), Member("t", &d.T), Member("pt", &d.PT),
		Member("in", Slice(&d.In, innerFunc)), Member("snake_case", &d.Snk),
	}
}

// seeds are documents that reach every rule of the package doc.
var seeds = []string{
	`{}`, `null`, ` {"s":"x"} `, `[]`, `"s"`, `1`, `{"s":1}`, `{"s":null}`, `{"s":"a","s":null}`,
	`{"s":"\u00e9\ud83d\ude00\ud800x\udc00\ud800\u0041\"\\\/\b\f\n\r\t"}`, "{\"s\":\"\xff\xfe ok\"}",
	`{"S":"upper"}`, `{"SNAKE_CASE":"x"}`, "{\"\u017f\":\"long s\"}", `{"\u212a":1}`,
	`{"b":true}`, `{"b":false}`, `{"b":"true"}`, `{"b":null}`, `{"b":0}`,
	`{"i":12}`, `{"i":-0}`, `{"i":1.0}`, `{"i":1e2}`, `{"i":9223372036854775807}`, `{"i":9223372036854775808}`,
	`{"i":"1"}`, `{"i64":-9223372036854775808}`, `{"pi":null}`, `{"pi":3}`, `{"pi":3,"pi":null}`, `{"pi":"x"}`,
	`{"p64":7}`, `{"ss":["a","b"]}`, `{"ss":[]}`, `{"ss":null}`, `{"ss":[null,"x"]}`, `{"ss":"a"}`,
	`{"ss":["a","b","c"],"ss":["x"],"ss":[null,null,null]}`, `{"ss":[1]}`,
	`{"raw":{"a": [1, 2]}}`, `{"raw":null}`, `{"raw":"x"}`, `{"raw":1.5e3}`,
	`{"t":"2026-12-03T14:00:00Z"}`, `{"t":"2026-12-03T14:00:00.123+01:00"}`, `{"t":"yesterday"}`, `{"t":null}`, `{"t":1}`,
	`{"pt":"2026-12-03T14:00:00Z"}`, `{"pt":null}`, `{"pt":{}}`,
	`{"in":[{"name":"a","n":1}],"in":[{"name":"b"}]}`, `{"in":[null]}`, `{"in":[{"n":null}]}`, `{"in":[[]]}`,
	`{"unknown":{"deep":[1,{"x":"}"}]},"s":"after"}`, `{"s":"a"`, `{"s":"a"}x`, `{"s":"a",}`, "{\"s\":\"a\x01\"}",
}

// decodeBoth decodes data with the Funcs and with encoding/json.
func decodeBoth(data []byte) (got, want doc, gotErr, wantErr error) {
	gotErr = Unmarshal(data, got.fields()...)
	wantErr = json.Unmarshal(data, &want)
	return got, want, gotErr, wantErr
}

func TestAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range seeds {
		t.Run(s, func(t *testing.T) {
			got, want, gotErr, wantErr := decodeBoth([]byte(s))
			require.Equal(t, wantErr == nil, gotErr == nil, "jsondec error %v, encoding/json error %v", gotErr, wantErr)
			if wantErr == nil {
				assert.Equal(t, want, got)
			}
		})
	}
}

// FuzzAgreesWithEncodingJSON: for any input, jsondec fails exactly when
// encoding/json.Unmarshal does, and otherwise decodes the same values; it
// never panics.
func FuzzAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want, gotErr, wantErr := decodeBoth(data)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: jsondec error %v, encoding/json error %v", data, gotErr, wantErr)
		}
		if wantErr == nil {
			require.Equal(t, want, got)
		}
	})
}

// TestStringAgrees compares String with encoding/json for a JSON string
// alone (the form jobspec decodes its member names with).
func TestStringAgrees(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"plain", `"abc"`},
		{"escapes", `"\"\\\/\b\f\n\r\t\u0041"`},
		{"pair", `"\ud83d\ude00"`},
		{"lone surrogate", `"\udc00x"`},
		{"invalid utf-8", "\"\xc3\x28\""},
		{"not a string", `12`},
		{"unterminated", `"abc`},
		{"control character", "\"a\x1fb\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got, want string
			gotErr := Value([]byte(tt.in), &got)
			wantErr := json.Unmarshal([]byte(tt.in), &want)
			require.Equal(t, wantErr == nil, gotErr == nil, "jsondec %v, encoding/json %v", gotErr, wantErr)
			assert.Equal(t, want, got)
		})
	}
}

// TestUnknownDestination: a destination type Value does not list is an
// error naming it, not a panic (PID 1 never crashes).
func TestUnknownDestination(t *testing.T) {
	var f float64
	require.EqualError(t, Unmarshal([]byte(`{"f":1.5}`), Member("f", &f)),
		`jsondec: member "f": jsondec: cannot decode into *float64`)
	require.NoError(t, Unmarshal([]byte(`{"g":1.5}`), Member("f", &f)), "a member not in the input is not decoded")
}
