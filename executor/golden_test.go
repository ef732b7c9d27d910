package executor

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/poolapi"
)

// golden reads one of the contract's golden files (package control's
// testdata/golden), compacted.
func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "control", "testdata", "golden", name))
	require.NoError(t, err)
	var c bytes.Buffer
	require.NoError(t, json.Compact(&c, b))
	return c.Bytes()
}

// The spec the executor writes is the golden one, field for field and in
// order.
func TestJobSpecIsGolden(t *testing.T) {
	c := &Core{}
	spec := c.jobSpec(Job{ID: "1235", Timeout: 50 * time.Minute}, poolapi.Pod{}, "0a1b2c3d4e5f6071")
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	assert.Equal(t, string(golden(t, "job-spec-minimal.json")), string(b))
}

// The stage parser finds the golden status lines among the call's other
// stderr, and takes the ended one for the stage's end only when all of
// the stage's output arrived.
func TestStderrParserReadsGoldenStatus(t *testing.T) {
	var rest bytes.Buffer
	p := &stderrParser{w: &rest}
	in := append(append(append(golden(t, "stage-status-running.json"), "\nwarmpod: a message\n"...),
		golden(t, "stage-status-ended.json")...), '\n')
	// Split writes: a status line may arrive in pieces.
	_, _ = p.Write(in[:17])
	_, _ = p.Write(in[17:])
	p.flush()
	require.Len(t, p.lines, 2)
	assert.Equal(t, "warmpod: a message\n", rest.String())
	assert.True(t, p.lines[0].Running)
	assert.Nil(t, p.final(1023), "1023 of the stage's 1024 bytes: not the end yet")
	f := p.final(1024)
	require.NotNil(t, f)
	assert.Equal(t, 1, *f.ExitCode)
	assert.Equal(t, "step_script", f.Stage)
}
