package control

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/internal/jsondec"
)

// decoders names the documents PID 1 decodes with package jsondec, in
// decodeWith's order, with a golden file of each.
var decoders = []struct{ name, golden string }{
	{"Request", "requests.json"}, {"Response", "responses.json"},
	{"StageStatus", "stage-status-ended.json"}, {"JobStatus", "job-status.json"},
}

// decodeWith decodes data as the i-th document with the package's decoder
// and with encoding/json; it returns both values and both errors.
func decodeWith(i int, data []byte) (got, want any, gotErr, wantErr error) {
	switch i {
	case 0:
		var g, w Request
		gotErr, wantErr = g.decode(data), json.Unmarshal(data, &w)
		return g, w, gotErr, wantErr
	case 1:
		var g, w Response
		gotErr, wantErr = g.decode(data), json.Unmarshal(data, &w)
		return g, w, gotErr, wantErr
	case 2:
		var g, w StageStatus
		gotErr, wantErr = jsondec.Value(data, stageStatusFunc(&g)), json.Unmarshal(data, &w)
		return g, w, gotErr, wantErr
	default:
		var g, w JobStatus
		gotErr, wantErr = jsondec.Value(data, jobStatusFunc(&g)), json.Unmarshal(data, &w)
		return g, w, gotErr, wantErr
	}
}

// full is a value of each type with every field set, so a member missing
// from a decoder's list shows as a difference.
func full() []any {
	code, end, logEnd := 3, time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC), int64(99)
	st := StageStatus{Stage: "build", PID: 42, Running: true, ExitCode: &code, Signal: "SIGKILL", OOMKilled: true,
		Started: end.Add(-time.Minute), Ended: &end, LogStart: 7, LogEnd: &logEnd, SHA256: "ab", Replay: true}
	all := []any{
		Request{Op: "job.stage", Job: "j", Spec: json.RawMessage(`{"id":"x"}`), Probe: "ready", Stage: "s",
			Argv: []string{"/bin/sh", "-c"}, Dir: "/d", SHA256: "00", Path: "/p", Duration: "1s"},
		Response{OK: true, Code: 75, Error: "e", Refusal: RefusalBusy, Job: "j", State: "busy", Replay: true, Env: []string{"A=1"},
			Status: json.RawMessage(`{"state":"busy"}`), Data: json.RawMessage(`[1]`), LogPath: "/l", User: "1:1", JobDir: "/j"},
		st,
		JobStatus{Job: "j", Cancelled: true, Log: "/l", Stages: []StageStatus{st, {Stage: "b"}}},
	}
	return all
}

func TestFullSetsEveryField(t *testing.T) {
	for _, v := range full() {
		rv := reflect.ValueOf(v)
		for f := range rv.NumField() {
			assert.False(t, rv.Field(f).IsZero(), "%T.%s is not set in full", v, rv.Type().Field(f).Name)
		}
	}
}

// seedsFor are the documents of type i: a full value, the golden files,
// and forms that reach jsondec's rules.
func seedsFor(i int) [][]byte {
	b, err := json.Marshal(full()[i])
	if err != nil {
		panic(err)
	}
	seeds := [][]byte{b, []byte(`null`), []byte(`{}`), []byte(`[]`), []byte(`{"OP":"x","Code":1,"STAGE":"s"}`),
		[]byte(`{"argv":["a",null],"env":["x"],"stages":[{"stage":"a"},null],"pid":1.5}`),
		[]byte(`{"spec":null,"status":null,"ended":null,"exit_code":null,"log_end":null,"code":null}`)}
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", decoders[i].golden))
	if err != nil {
		panic(err)
	}
	var golden map[string]json.RawMessage
	if json.Unmarshal(raw, &golden) == nil && i < 2 {
		for _, v := range golden {
			seeds = append(seeds, v)
		}
	} else {
		seeds = append(seeds, raw)
	}
	return seeds
}

func TestDecodersAgreeWithEncodingJSON(t *testing.T) {
	for i, d := range decoders {
		t.Run(d.name, func(t *testing.T) {
			for _, s := range seedsFor(i) {
				got, want, gotErr, wantErr := decodeWith(i, s)
				require.Equal(t, wantErr == nil, gotErr == nil, "%s: jsondec %v, encoding/json %v", s, gotErr, wantErr)
				if wantErr == nil {
					assert.Equal(t, want, got, "%s", s)
				}
			}
		})
	}
}

// TestDecodersReadEveryMember: a value with every field set reads back
// whole (a member missing from a decoder's list would read as zero).
func TestDecodersReadEveryMember(t *testing.T) {
	for i, v := range full() {
		t.Run(decoders[i].name, func(t *testing.T) {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			got, _, gotErr, _ := decodeWith(i, b)
			require.NoError(t, gotErr)
			assert.Equal(t, v, got)
		})
	}
}

// FuzzDecodersAgreeWithEncodingJSON: for any input, each document's
// decoder fails exactly when encoding/json.Unmarshal does and otherwise
// decodes the same value; none panics.
func FuzzDecodersAgreeWithEncodingJSON(f *testing.F) {
	for i := range decoders {
		for _, s := range seedsFor(i) {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		i := int(which) % len(decoders)
		got, want, gotErr, wantErr := decodeWith(i, data)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%s %q: jsondec error %v, encoding/json error %v", decoders[i].name, data, gotErr, wantErr)
		}
		if wantErr == nil {
			require.Equal(t, want, got)
		}
	})
}
