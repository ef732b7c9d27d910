package jobspec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/control"
)

// What an executor writes with control.JobSpec is what PID 1 reads: the
// one definition of the job spec and this parser agree field by field.
func TestControlJobSpecIsWhatParseSpecReads(t *testing.T) {
	in := control.JobSpec{ID: "42", Nonce: "n1", Token: "tok", Timeout: "1h10m", LeaseTTL: "1m", ConfigHash: "abc", Scope: "s",
		Variables:    []control.JobVariable{{Key: "A", Value: "1"}, {Key: "M", Value: "secret", Masked: true}, {Key: "F", Value: "content", File: true}},
		CleanupPaths: []string{"/scripts-*"}}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	s, err := ParseSpec(b)
	require.NoError(t, err)
	assert.Equal(t, "42", s.ID)
	assert.Equal(t, "n1", s.Nonce)
	assert.Equal(t, "abc", s.ConfigHash)
	assert.Equal(t, "s", s.Scope)
	assert.Equal(t, "tok", s.Token.Reveal())
	assert.Equal(t, 70*time.Minute, s.Timeout)
	assert.Equal(t, time.Minute, s.LeaseTTL)
	require.Len(t, s.Variables, 3)
	assert.Equal(t, "A", s.Variables[0].Key)
	assert.Equal(t, "1", s.Variables[0].Value.Reveal())
	assert.True(t, s.Variables[1].Masked)
	assert.True(t, s.Variables[2].File)
	assert.Equal(t, []string{"/scripts-*"}, s.CleanupPaths)

	empty, err := json.Marshal(control.JobSpec{ID: "43", Nonce: "n", Timeout: "1h", Variables: []control.JobVariable{}})
	require.NoError(t, err)
	_, err = ParseSpec(empty)
	require.NoError(t, err, "%s", empty)
}

// PID 1 reads the contract's golden job specs (package control's
// testdata/golden, which control.JobSpec and the executor write) into
// the values they hold.
func TestParseSpecReadsGoldenSpecs(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "control", "testdata", "golden", name))
		require.NoError(t, err)
		return b
	}
	s, err := ParseSpec(read("job-spec.json"))
	require.NoError(t, err)
	assert.Equal(t, "1234", s.ID)
	assert.Equal(t, "5f1c0e7a9b2d4c68", s.Nonce)
	assert.Equal(t, "glcbt-secret", s.Token.Reveal())
	assert.Equal(t, 70*time.Minute, s.Timeout)
	assert.Equal(t, time.Minute, s.LeaseTTL)
	assert.Equal(t, "7c9e2f", s.ConfigHash)
	assert.Equal(t, "group/project", s.Scope)
	require.Len(t, s.Variables, 3)
	assert.Equal(t, "s3cret", s.Variables[1].Value.Reveal())
	assert.True(t, s.Variables[1].Masked)
	assert.True(t, s.Variables[2].File)
	assert.Equal(t, "apiVersion: v1\n", s.Variables[2].Value.Reveal())
	assert.Equal(t, []string{"/builds/*", "/cache"}, s.CleanupPaths)

	m, err := ParseSpec(read("job-spec-minimal.json"))
	require.NoError(t, err)
	assert.Equal(t, "1235", m.ID)
	assert.Equal(t, time.Hour, m.Timeout)
	assert.Empty(t, m.Variables)
}
