package jobspec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckCleanupPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/scripts-*-*", true},
		{"/builds/logs-[0-9]*", true},
		{"/tmp/ci", true},
		{"", false},
		{"relative/dir", false},
		{"/", false},
		{"/tmp/../etc", false},
		{"/tmp/", false},
		{"//tmp", false},
		{"/proc/1", false},
		{"/sys", false},
		{"/dev/shm", false},
		{"/*", false},
		{"/?ev", false},
		{"/[ps]*/x", false},
		{"/tmp/[", false},
		{"/tmp/a\nb", false},
		{"/" + strings.Repeat("a", MaxPathBytes), false},
	} {
		got := CheckCleanupPath(tc.path)
		require.Equal(t, tc.ok, got == "", "%q: %q", tc.path, got)
	}
}

func TestParseSpecCleanupPaths(t *testing.T) {
	s, err := ParseSpec([]byte(`{"id":"a","cleanup_paths":["/scripts-*","/logs-*"]}`))
	require.NoError(t, err)
	require.Equal(t, []string{"/scripts-*", "/logs-*"}, s.CleanupPaths)

	for in, field := range map[string]string{
		`{"id":"a","cleanup_paths":"/x"}`:           "cleanup_paths",
		`{"id":"a","cleanup_paths":[1]}`:            "cleanup_paths[0]",
		`{"id":"a","cleanup_paths":["/ok","rel"]}`:  "cleanup_paths[1]",
		`{"id":"a","cleanup_paths":["/proc/self"]}`: "cleanup_paths[0]",
	} {
		_, err := ParseSpec([]byte(in))
		require.Error(t, err, in)
		require.Equal(t, field, err.(*SpecError).Field, in)
	}
	many := `{"id":"a","cleanup_paths":[` + strings.Repeat(`"/x",`, MaxCleanupPaths) + `"/y"]}`
	_, err = ParseSpec([]byte(many))
	require.ErrorContains(t, err, "MaxCleanupPaths")
}

func TestWipeCleanupPaths(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	require.NoError(t, os.Mkdir(outside, 0o755))
	keep := filepath.Join(outside, "keep")
	require.NoError(t, os.WriteFile(keep, []byte("precious"), 0o644))

	job := filepath.Join(root, "scripts-1-2")
	require.NoError(t, os.MkdirAll(filepath.Join(job, "a", "b"), 0o755))
	tokenFile := filepath.Join(job, "a", "b", "step_script")
	require.NoError(t, os.WriteFile(tokenFile, []byte("export CI_JOB_TOKEN=secret\n"), 0o400))
	// A symlink to outside and a hard link to a file outside: both are
	// unlinked as names; neither target is touched.
	require.NoError(t, os.Symlink(outside, filepath.Join(job, "link")))
	require.NoError(t, os.Link(keep, filepath.Join(job, "hard")))
	// A matching name that is a symlink to a directory is refused.
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "scripts-evil")))

	n, err := WipeCleanupPaths([]string{filepath.Join(root, "scripts-*")}, nil)
	require.Error(t, err, "the symlinked match must be reported")
	require.Contains(t, err.Error(), "scripts-evil")
	require.Equal(t, 5, n, "a, a/b, step_script, link, hard")
	entries, rerr := os.ReadDir(job)
	require.NoError(t, rerr)
	require.Empty(t, entries)
	got, rerr := os.ReadFile(keep)
	require.NoError(t, rerr)
	require.Equal(t, "precious", string(got))
	_, rerr = os.Stat(filepath.Join(outside))
	require.NoError(t, rerr)

	// Nothing matching, a missing directory: no error.
	n, err = WipeCleanupPaths([]string{filepath.Join(root, "nothing-*"), filepath.Join(root, "missing")}, nil)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestWipeDirZeroesBeforeUnlink(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tok")
	require.NoError(t, os.WriteFile(p, []byte("secret-token"), 0o600))
	// Keep a descriptor: after the unlink it still shows the inode's
	// content, which must be zeros.
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	n, err := WipeDir(dir)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	b := make([]byte, 64)
	m, _ := f.ReadAt(b, 0)
	require.Equal(t, strings.Repeat("\x00", len("secret-token")), string(b[:m]))
}

func TestWipeDirDepthBound(t *testing.T) {
	dir := t.TempDir()
	deep := dir
	for i := 0; i < maxWipeDepth+3; i++ {
		deep = filepath.Join(deep, "d")
	}
	require.NoError(t, os.MkdirAll(deep, 0o755))
	_, err := WipeDir(dir)
	require.ErrorContains(t, err, "nested deeper")
}

func TestWipeCleanupPathsProtect(t *testing.T) {
	root := t.TempDir()
	runtime := filepath.Join(root, "run", "warmpod")
	require.NoError(t, os.MkdirAll(runtime, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(runtime, "control.sock"), nil, 0o600))
	other := filepath.Join(root, "run", "other")
	require.NoError(t, os.MkdirAll(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "x"), nil, 0o600))
	n, err := WipeCleanupPaths([]string{filepath.Join(root, "run", "*"), filepath.Join(root, "run")}, []string{runtime})
	require.ErrorContains(t, err, "overlaps")
	require.Equal(t, 1, n, "other/x only")
	_, serr := os.Stat(filepath.Join(runtime, "control.sock"))
	require.NoError(t, serr)
}

func TestWipeDirManyAndSparse(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 3*readBatch+5; i++ {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), nil, 0o600))
	}
	// A sparse file with a huge apparent size: nothing to zero, quick.
	f, err := os.Create(filepath.Join(dir, "sparse"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<40))
	require.NoError(t, f.Close())
	n, err := WipeDir(dir)
	require.NoError(t, err)
	require.Equal(t, 3*readBatch+6, n)
}
