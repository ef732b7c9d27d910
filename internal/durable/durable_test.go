package durable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600))
	require.NoError(t, SyncDir(dir))
	require.ErrorIs(t, SyncDir(filepath.Join(dir, "missing")), os.ErrNotExist)
}
