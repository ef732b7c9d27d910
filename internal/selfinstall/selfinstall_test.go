package selfinstall

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary installs itself and a file beside it, both 0755, and
// leaves no temporary file; a second install replaces them.
func TestInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	for range 2 {
		require.NoError(t, Install(dir, "tool", map[string][]byte{"tool.sh": []byte("#!/bin/sh\n")}))
	}
	self, err := os.ReadFile("/proc/self/exe")
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "tool"))
	require.NoError(t, err)
	assert.Equal(t, self, got)
	sh, err := os.ReadFile(filepath.Join(dir, "tool.sh"))
	require.NoError(t, err)
	assert.Equal(t, "#!/bin/sh\n", string(sh))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary file left")
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), e.Name())
	}
}

// A directory that cannot be made is an error, not a half install.
func TestInstallIntoAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	assert.Error(t, Install(filepath.Join(f, "dir"), "tool", nil))
}
