package jobspec

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func fileSpec() *Spec {
	return &Spec{ID: "j", Variables: []Variable{
		{Key: "PLAIN", Value: NewSecret([]byte("not a file"))},
		{Key: "KUBECONFIG", Value: NewSecret([]byte("apiVersion: v1\n" + secretMark + "\n")), File: true},
		{Key: "EMPTY", File: true},
		{Key: "BIG", Value: NewSecret(make([]byte, 100<<10)), File: true},
	}}
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "job-1")
	s := fileSpec()
	require.NoError(t, s.WriteFiles(dir))

	fi, err := os.Lstat(dir)
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"KUBECONFIG", "EMPTY", "BIG"}, names)

	for _, v := range s.Variables {
		if !v.File {
			continue
		}
		p := filepath.Join(dir, v.Key)
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular())
		require.Equal(t, fs.FileMode(0o400), fi.Mode().Perm(), v.Key)
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.True(t, string(got) == v.Value.Reveal(), "content of %s differs", v.Key)
	}

	// The environment points at the files.
	require.Contains(t, s.Env("", dir), "KUBECONFIG="+filepath.Join(dir, "KUBECONFIG"))

	// Keep a descriptor open: after RemoveFiles the inode must hold zeros.
	f, err := os.Open(filepath.Join(dir, "KUBECONFIG"))
	require.NoError(t, err)
	defer f.Close()

	require.NoError(t, RemoveFiles(dir))
	_, err = os.Lstat(dir)
	require.True(t, errors.Is(err, fs.ErrNotExist))

	got, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, make([]byte, len(got)), got, "file was not zeroed before removal")
	require.Equal(t, s.Variables[1].Value.Len(), len(got))

	// Missing dir is fine, twice.
	require.NoError(t, RemoveFiles(dir))
}

func TestWriteFilesExistingDir(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep")
	require.NoError(t, os.WriteFile(keep, []byte("x"), 0o600))

	err := fileSpec().WriteFiles(dir)
	require.Error(t, err)
	require.True(t, errors.Is(err, fs.ErrExist))
	_, err = os.Stat(keep)
	require.NoError(t, err, "WriteFiles must not touch a directory it did not create")
}

func TestWriteFilesCleansUpOnError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "job")
	s := &Spec{ID: "j", Variables: []Variable{
		{Key: "A", Value: NewSecret([]byte("a")), File: true},
		{Key: "A", Value: NewSecret([]byte("again")), File: true}, // hand-built duplicate
	}}
	err := s.WriteFiles(dir)
	require.Error(t, err)
	require.True(t, errors.Is(err, fs.ErrExist))
	_, err = os.Lstat(dir)
	require.True(t, errors.Is(err, fs.ErrNotExist), "partial directory left behind")

	bad := &Spec{ID: "j", Variables: []Variable{{Key: "../escape", File: true}}}
	require.Error(t, bad.WriteFiles(dir))
	_, err = os.Lstat(dir)
	require.True(t, errors.Is(err, fs.ErrNotExist))
	_, err = os.Lstat(filepath.Join(filepath.Dir(dir), "escape"))
	require.True(t, errors.Is(err, fs.ErrNotExist))
}

func TestRemoveFilesDoesNotFollowLinks(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	require.NoError(t, os.WriteFile(outside, []byte("precious"), 0o600))

	dir := filepath.Join(base, "job")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "SYM")))
	require.NoError(t, os.Link(outside, filepath.Join(dir, "HARD")))
	require.NoError(t, os.Symlink(base, filepath.Join(dir, "DIRSYM")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o700))
	nested := filepath.Join(dir, "sub", "N")
	require.NoError(t, os.WriteFile(nested, []byte("nested"), 0o400))
	nf, err := os.Open(nested)
	require.NoError(t, err)
	defer nf.Close()

	require.NoError(t, RemoveFiles(dir))
	_, err = os.Lstat(dir)
	require.True(t, errors.Is(err, fs.ErrNotExist))

	got, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "precious", string(got), "a file outside dir was changed")

	got, err = io.ReadAll(nf)
	require.NoError(t, err)
	require.Equal(t, make([]byte, len("nested")), got)
}

func TestRemoveFilesSymlinkDir(t *testing.T) {
	base := t.TempDir()
	realDir := filepath.Join(base, "realDir")
	require.NoError(t, os.Mkdir(realDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(realDir, "F"), []byte("keep"), 0o600))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(realDir, link))

	require.NoError(t, RemoveFiles(link))
	got, err := os.ReadFile(filepath.Join(realDir, "F"))
	require.NoError(t, err)
	require.Equal(t, "keep", string(got))
	_, err = os.Lstat(link)
	require.True(t, errors.Is(err, fs.ErrNotExist))
}
