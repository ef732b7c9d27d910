package podapi

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestWriteTerminationMessage(t *testing.T) {
	at := time.Date(2026, 11, 29, 15, 43, 2, 0, time.UTC)
	big := strings.Repeat("r", 10<<10)
	cases := []struct {
		name       string
		m          TerminationMessage
		wantReason string // "" = check only that it is a prefix of m.Reason + "..."
		wantJob    string
		cut        bool
	}{
		{name: "plain", m: TerminationMessage{Reason: "idle-timeout", ExitCode: 0, JobsRun: 3, Version: "v0.1.0", Time: at}, wantReason: "idle-timeout"},
		{name: "sigterm during a job", m: TerminationMessage{Reason: "sigterm", ExitCode: 143, Job: "1234", JobsRun: 1, Version: "v0.1.0", Time: at}, wantReason: "sigterm", wantJob: "1234"},
		{name: "10 KB reason is cut", m: TerminationMessage{Reason: big, ExitCode: 1, Job: "j", Version: "v", Time: at}, cut: true, wantJob: "j"},
		{name: "10 KB reason and job", m: TerminationMessage{Reason: big, Job: strings.Repeat("j", 10<<10), Version: "v", Time: at}, cut: true},
		{name: "escaping-heavy reason", m: TerminationMessage{Reason: strings.Repeat("\x01\"\n", 5000), Version: "v", Time: at}, cut: true},
		{name: "multi-byte runes are not split", m: TerminationMessage{Reason: strings.Repeat("é€😀", 2000), Version: "v", Time: at}, cut: true},
		{name: "newline in reason stays one line", m: TerminationMessage{Reason: "a\nb", Version: "v", Time: at}, wantReason: "a\nb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "termination-log")
			// An older, longer message must be replaced, not overwritten in place.
			require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("x"), 8000), 0o644))
			require.NoError(t, WriteTerminationMessage(path, tc.m))
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			require.LessOrEqual(t, len(raw), MaxTerminationMessage)
			require.True(t, bytes.HasSuffix(raw, []byte("\n")))
			require.Equal(t, 1, bytes.Count(raw, []byte("\n")), "exactly one line")
			require.True(t, utf8.Valid(raw))
			var got TerminationMessage
			require.NoError(t, json.Unmarshal(raw, &got), "valid JSON: %q", raw)
			require.Equal(t, tc.m.ExitCode, got.ExitCode)
			require.Equal(t, tc.m.JobsRun, got.JobsRun)
			require.Equal(t, tc.m.Version, got.Version)
			require.True(t, tc.m.Time.Equal(got.Time))
			if tc.cut {
				require.Greater(t, len(raw), MaxTerminationMessage-64, "cut close to the limit, not far below")
				require.True(t, strings.HasSuffix(got.Reason, "...") || got.Reason == "", got.Reason)
				require.True(t, strings.HasPrefix(tc.m.Reason, strings.TrimSuffix(got.Reason, "...")))
				require.True(t, strings.HasPrefix(tc.m.Job, strings.TrimSuffix(got.Job, "...")))
			} else {
				require.Equal(t, tc.wantReason, got.Reason)
			}
			if tc.wantJob != "" {
				require.Equal(t, tc.wantJob, got.Job)
			}
			var fields map[string]any
			require.NoError(t, json.Unmarshal(raw, &fields))
			for _, k := range []string{"reason", "exit_code", "jobs_run", "version", "time"} {
				require.Contains(t, fields, k)
			}
		})
	}
}

func TestWriteTerminationMessageDefaultsAndErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "termination-log")
	before := time.Now()
	require.NoError(t, WriteTerminationMessage(path, TerminationMessage{Reason: "idle-timeout", Version: "dev"}))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotContains(t, string(raw), `"job"`, "empty job omitted")
	var got TerminationMessage
	require.NoError(t, json.Unmarshal(raw, &got))
	require.False(t, got.Time.Before(before.Add(-time.Second)), "zero Time becomes now")

	err = WriteTerminationMessage(filepath.Join(t.TempDir(), "no-such-dir", "termination-log"), TerminationMessage{Reason: "x"})
	require.Error(t, err)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestCut(t *testing.T) {
	require.Equal(t, "abc...", cut("abcdefghi", 3))
	require.Equal(t, "", cut("abc", 0))
	require.Equal(t, "é...", cut("éééé", 3), "cut on a rune boundary")
	require.Equal(t, "abc...", cut("abc", 10))
}
