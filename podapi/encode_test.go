package podapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// PID 1's two documents to the outside are what encoding/json wrote
// before PID 1 dropped its encoder (jsonenc).
func TestDocumentsAreEncodingJSONs(t *testing.T) {
	for _, m := range []TerminationMessage{
		{},
		{Reason: "idle-timeout", ExitCode: 143, Job: "j<1>&", JobsRun: 4, Version: "v1\u2028", Time: time.Date(2026, 12, 4, 3, 4, 5, 6, time.UTC)},
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(m))
		got, err := encodeLine(m)
		require.NoError(t, err)
		assert.Equal(t, want.String(), string(got))
	}
	type preconditions struct {
		UID string `json:"uid"`
	}
	type options struct {
		Kind              string        `json:"kind"`
		APIVersion        string        `json:"apiVersion"`
		Preconditions     preconditions `json:"preconditions"`
		PropagationPolicy string        `json:"propagationPolicy"`
	}
	for _, uid := range []string{"", "0b8a2d4e-1c3f-4a5b-9c7d-6e5f4a3b2c1d", `"<x>"`} {
		want, err := json.Marshal(options{"DeleteOptions", "v1", preconditions{uid}, "Background"})
		require.NoError(t, err)
		assert.Equal(t, string(want), string(deleteOptions(uid)))
	}
}
