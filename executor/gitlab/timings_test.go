package gitlab

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/poolapi"
)

// With --timings, each call's line names its steps (the benchmark's
// breakdown): prepare's claim and job start, cleanup's job end, delete
// and list; without it nothing is written.
func TestTimingsSpans(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timings   bool
		wantCalls map[string][]string
	}{
		{name: "with --timings", timings: true, wantCalls: map[string][]string{
			"prepare": {"claim warm (list idle pods, patch)", "exec job start"},
			"cleanup": {"exec job end", "delete pod", "list pods of job"},
		}},
		{name: "without", wantCalls: map[string][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Bin: "/wp/warmpod", Warm: true}}}
			d, _, _ := newDriver(t, fc, nil)
			file := filepath.Join(t.TempDir(), "timings.jsonl")
			if tc.timings {
				d.Cfg.Timings = file
			}
			require.NoError(t, d.Prepare(context.Background()))
			d2, _, _ := newDriver(t, fc, nil) // a new process, as the runner calls it
			d2.Cfg.StateDir, d2.Cfg.Timings = d.Cfg.StateDir, d.Cfg.Timings
			require.NoError(t, d2.Cleanup(context.Background()))

			got := map[string][]string{}
			b, err := os.ReadFile(file)
			if !tc.timings {
				assert.ErrorIs(t, err, os.ErrNotExist)
				return
			}
			require.NoError(t, err)
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var rec struct {
					Call  string `json:"call"`
					Spans []Span `json:"spans"`
				}
				require.NoError(t, json.Unmarshal([]byte(l), &rec))
				for _, s := range rec.Spans {
					assert.LessOrEqual(t, s.Start, s.End, s.Name)
					got[rec.Call] = append(got[rec.Call], s.Name)
				}
			}
			for call, want := range tc.wantCalls {
				assert.ElementsMatch(t, want, got[call], call)
			}
		})
	}
}
