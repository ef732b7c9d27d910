package supervisor

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/lease"
)

// The status document's and the log markers' bytes are what
// encoding/json wrote before PID 1 dropped it (jsonenc).
func TestStatusDocumentIsMarshals(t *testing.T) {
	at := time.Date(2026, 12, 4, 3, 4, 5, 6, time.UTC)
	for _, st := range []podStatus{
		{},
		{Status: lease.Status{State: "idle", JobsRun: 3, IdleSince: at, IdleDeadline: &at}, Version: "v1<&>", Stdio: "pty", Shell: 7, Orphans: 1 << 40},
		{Status: lease.Status{State: "draining", JobID: "j-1", IdleSince: at, DrainReason: "idle-timeout"}, Version: "dev", Stdio: "pipe"},
		{Status: lease.Status{State: "busy", JobID: "j-1"}, Version: "dev", Stdio: "pipe", ShellError: `start "stauts": not found`},
	} {
		want, err := json.Marshal(st)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(st.AppendJSON(nil)))
	}
}

func TestLogMarkers(t *testing.T) {
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer f.Close()
	code := -1
	writeMarker(f, nil, "step_script")
	_, _ = f.WriteString("partial line")
	writeMarker(f, &code, `a "b"`)
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	var want bytes.Buffer
	for _, m := range []any{map[string]any{"script": "step_script"}, "partial line", map[string]any{"command_exit_code": code, "script": `a "b"`}} {
		if s, ok := m.(string); ok {
			want.WriteString(s + "\n")
			continue
		}
		j, _ := json.Marshal(m)
		want.Write(append(j, '\n'))
	}
	assert.Equal(t, want.String(), string(b))
}
