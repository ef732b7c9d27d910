package fsuser

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func owner(t *testing.T, p string) (uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// Files made in Do belong to the user from birth; permission checks are
// the user's; the process's own identity is untouched, on every thread.
func TestDoCreatesAsTheUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID, CAP_SETGID)")
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711)) // t.TempDir's own parent is 0700
	require.NoError(t, os.Chmod(dir, 0o777))
	closed := filepath.Join(dir, "closed")
	require.NoError(t, os.Mkdir(closed, 0o700))

	for name, tc := range map[string]struct {
		uid, gid int
		path     string
		err      error
	}{
		"a job user":                        {1000, 1001, filepath.Join(dir, "u"), nil},
		"root with the job's group":         {0, 1001, filepath.Join(dir, "g"), nil},
		"no access where the user has none": {1000, 1000, filepath.Join(closed, "x"), fs.ErrPermission},
	} {
		t.Run(name, func(t *testing.T) {
			err := Do(tc.uid, tc.gid, func() error { return os.Mkdir(tc.path, 0o700) })
			if tc.err != nil {
				require.Error(t, err)
				assert.True(t, errors.Is(err, tc.err), "%v", err)
				return
			}
			require.NoError(t, err)
			uid, gid := owner(t, tc.path)
			assert.Equal(t, []uint32{uint32(tc.uid), uint32(tc.gid)}, []uint32{uid, gid})
		})
	}

	// Many calls, then the process still creates as root.
	for i := 0; i < 50; i++ {
		require.NoError(t, Do(1000, 1000, func() error { return nil }))
	}
	mine := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(mine, 0o700))
	uid, gid := owner(t, mine)
	assert.Equal(t, []uint32{0, 0}, []uint32{uid, gid})

	// Root without the job's group gives a file to it only through Do
	// (group membership, not CAP_CHOWN, is what the kernel checks here).
	require.NoError(t, Do(0, 1001, func() error { return os.Lchown(mine, 0, 1001) }))
	_, gid = owner(t, mine)
	assert.Equal(t, uint32(1001), gid)
}
