package putfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestPut(t *testing.T) {
	content := bytes.Repeat([]byte("warmpod put test\x00\xff\n"), 10_000)
	sum := hexSum(content)
	old := []byte("old content\n")
	errRead := errors.New("stream reset")

	tests := []struct {
		name     string
		existing []byte    // file already at path, or nil
		input    io.Reader // what r yields
		size     int64
		digest   string
		mode     os.FileMode
		wantErr  error // nil: success
	}{
		{name: "lower-case digest", input: bytes.NewReader(content), size: int64(len(content)), digest: sum, mode: 0o640},
		{name: "upper-case digest replaces file", existing: old, input: bytes.NewReader(content),
			size: int64(len(content)), digest: strings.ToUpper(sum), mode: 0o755},
		{name: "one byte at a time", input: iotest.OneByteReader(bytes.NewReader(content[:999])),
			size: 999, digest: hexSum(content[:999]), mode: 0o600},
		{name: "empty file", input: strings.NewReader(""), size: 0, digest: hexSum(nil), mode: 0o444},
		{name: "data with EOF on last read", input: iotest.DataErrReader(bytes.NewReader(content)),
			size: int64(len(content)), digest: sum, mode: 0o600},
		{name: "input cut at 60%", input: bytes.NewReader(content[:len(content)*6/10]),
			size: int64(len(content)), digest: sum, mode: 0o644, wantErr: ErrBadInput},
		{name: "input cut at 60%, existing unchanged", existing: old, input: bytes.NewReader(content[:len(content)*6/10]),
			size: int64(len(content)), digest: sum, mode: 0o644, wantErr: ErrBadInput},
		{name: "extra bytes", input: io.MultiReader(bytes.NewReader(content), strings.NewReader("x")),
			size: int64(len(content)), digest: sum, mode: 0o644, wantErr: ErrBadInput},
		{name: "wrong digest, existing unchanged", existing: old, input: bytes.NewReader(content),
			size: int64(len(content)), digest: hexSum(old), mode: 0o644, wantErr: ErrBadInput},
		{name: "malformed digest", input: bytes.NewReader(content), size: int64(len(content)),
			digest: sum[:63] + "g", mode: 0o644, wantErr: ErrBadInput},
		{name: "short digest", input: bytes.NewReader(content), size: int64(len(content)),
			digest: sum[:62], mode: 0o644, wantErr: ErrBadInput},
		{name: "negative size", input: strings.NewReader(""), size: -1, digest: hexSum(nil), mode: 0o644, wantErr: ErrBadInput},
		{name: "read error", input: io.MultiReader(bytes.NewReader(content[:100]), iotest.ErrReader(errRead)),
			size: int64(len(content)), digest: sum, mode: 0o644, wantErr: errRead},
		{name: "read error after all bytes", input: io.MultiReader(bytes.NewReader(content), iotest.ErrReader(errRead)),
			size: int64(len(content)), digest: sum, mode: 0o644, wantErr: errRead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "artifact.bin")
			if tc.existing != nil {
				require.NoError(t, os.WriteFile(p, tc.existing, 0o600))
			}
			err := Put(p, tc.input, tc.size, tc.digest, Options{Mode: tc.mode, UID: -1, GID: -1})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorIs(t, err, ErrBadInput, "input problems wrap ErrBadInput")
				if tc.existing == nil {
					require.Empty(t, dirNames(t, dir), "no file and no temp file left")
					return
				}
				require.Equal(t, []string{"artifact.bin"}, dirNames(t, dir), "no temp file left")
				got, err := os.ReadFile(p)
				require.NoError(t, err)
				require.Equal(t, tc.existing, got, "existing file unchanged")
				return
			}
			require.NoError(t, err)
			require.Equal(t, []string{"artifact.bin"}, dirNames(t, dir), "no temp file left")
			got, err := os.ReadFile(p)
			require.NoError(t, err)
			require.Equal(t, hexSum(got), strings.ToLower(tc.digest))
			require.Equal(t, tc.size, int64(len(got)))
			st, err := os.Stat(p)
			require.NoError(t, err)
			require.Equal(t, tc.mode, st.Mode().Perm())
		})
	}
}

func TestPutOwner(t *testing.T) {
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 12345, 23456 // root may give the file away
	}
	p := filepath.Join(t.TempDir(), "owned")
	require.NoError(t, Put(p, strings.NewReader("x"), 1, hexSum([]byte("x")), Options{Mode: 0o600, UID: uid, GID: gid}))
	st, err := os.Stat(p)
	require.NoError(t, err)
	sys, ok := st.Sys().(*syscall.Stat_t)
	require.True(t, ok)
	require.Equal(t, uint32(uid), sys.Uid)
	require.Equal(t, uint32(gid), sys.Gid)
}

func TestPutFileSystemErrors(t *testing.T) {
	dir := t.TempDir()
	data := []byte("data")
	tests := []struct {
		name string
		path string
		want error
	}{
		{name: "missing directory", path: filepath.Join(dir, "missing", "f"), want: fs.ErrNotExist},
		{name: "path is a directory", path: dir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := dirNames(t, dir)
			err := Put(tc.path, bytes.NewReader(data), int64(len(data)), hexSum(data), Options{Mode: 0o644, UID: -1, GID: -1})
			require.Error(t, err)
			require.NotErrorIs(t, err, ErrBadInput)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			require.Equal(t, before, dirNames(t, dir), "temp file removed")
		})
	}
}

// A job user must not be able to redirect a root Put through a symlink it
// planted, nor make it replace a socket, a device or a /proc file.
func TestPutRefusesUnsafeDestinations(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.Mkdir(victim, 0o755))
	require.NoError(t, os.Symlink(victim, filepath.Join(dir, "builds")))
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()
	content := []byte("#!/bin/sh\necho pwned\n")
	sum := sha256.Sum256(content)
	for _, path := range []string{
		filepath.Join(dir, "builds", "warmpod"),
		sock,
		"/proc/self/comm",
		"/dev/null",
		filepath.Join(dir, "builds", "sub", "x"),
	} {
		err := Put(path, bytes.NewReader(content), int64(len(content)), hex.EncodeToString(sum[:]), Options{Mode: 0o755, UID: -1, GID: -1})
		require.Error(t, err, path)
		if !strings.Contains(path, "/sub/") {
			require.ErrorIs(t, err, ErrUnsafePath, path)
		}
	}
	ents, err := os.ReadDir(victim)
	require.NoError(t, err)
	require.Empty(t, ents, "nothing written through the symlink")
	st, err := os.Lstat(sock)
	require.NoError(t, err)
	require.True(t, st.Mode()&os.ModeSocket != 0, "the socket is still a socket")
}

func TestIsTempName(t *testing.T) {
	for name, want := range map[string]bool{
		".big.tmp-0123456789abcdef":    true,
		".a.b.tmp-ffffffffffffffff":    true,
		"big.tmp-0123456789abcdef":     false, // not hidden
		".big.tmp-0123456789ABCDEF":    false, // upper case
		".big.tmp-0123456789abcde":     false, // 15 digits
		".big.tmp-0123456789abcdef0":   false, // 17 digits
		"..tmp-0123456789abcdef":       false, // empty base
		".passwd":                      false,
		".big.tmp-0123456789abcdeg":    false,
		".big.tmp-0123456789abcdef/..": false,
	} {
		require.Equal(t, want, IsTempName(name), name)
	}
}

func TestPutClaim(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	data := []byte("payload")
	var claimed string
	err := Put(p, bytes.NewReader(data), int64(len(data)), hexSum(data), Options{Mode: 0o644, UID: -1, GID: -1,
		Claim: func(tmp string) (int, int, error) {
			claimed = tmp
			// Nothing exists yet when the claim is made.
			_, err := os.Stat(tmp)
			require.True(t, os.IsNotExist(err))
			return -1, -1, nil
		}})
	require.NoError(t, err)
	require.Equal(t, dir, filepath.Dir(claimed))
	require.True(t, IsTempName(filepath.Base(claimed)), claimed)
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, data, got)

	// A refused claim writes nothing and returns the claim's error.
	refused := errors.New("no lease")
	err = Put(filepath.Join(dir, "g"), bytes.NewReader(data), int64(len(data)), hexSum(data), Options{Mode: 0o644, UID: -1, GID: -1,
		Claim: func(string) (int, int, error) { return 0, 0, refused }})
	require.ErrorIs(t, err, refused)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "only f")
}

func TestRemoveTemp(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, ".f.tmp-0123456789abcdef")
	require.NoError(t, os.WriteFile(tmp, []byte("partial"), 0o600))
	require.NoError(t, RemoveTemp(tmp))
	_, err := os.Stat(tmp)
	require.True(t, os.IsNotExist(err))
	require.NoError(t, RemoveTemp(tmp), "already gone is fine")

	other := filepath.Join(dir, "keep")
	require.NoError(t, os.WriteFile(other, nil, 0o600))
	require.ErrorIs(t, RemoveTemp(other), ErrUnsafePath)
	require.ErrorIs(t, RemoveTemp("relative/.f.tmp-0123456789abcdef"), ErrUnsafePath)

	// Through a symlinked directory: refused, the target survives.
	real := t.TempDir()
	target := filepath.Join(real, ".f.tmp-0123456789abcdef")
	require.NoError(t, os.WriteFile(target, nil, 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	require.ErrorIs(t, RemoveTemp(filepath.Join(link, ".f.tmp-0123456789abcdef")), ErrUnsafePath)
	_, err = os.Stat(target)
	require.NoError(t, err)
}
