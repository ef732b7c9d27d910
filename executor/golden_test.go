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
