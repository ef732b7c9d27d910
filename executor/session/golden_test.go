package session

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// golden reads one of the contract's golden files (package control's
// testdata/golden), compacted.
func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "control", "testdata", "golden", name))
	require.NoError(t, err)
	var c bytes.Buffer
	require.NoError(t, json.Compact(&c, b))
	return c.Bytes()
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
