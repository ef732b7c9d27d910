package joblog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrBadInput reports that the input given to [Put] does not match what the
// caller announced: fewer or more bytes than size, a read error of the
// input, a SHA-256 digest that differs, or an invalid size or digest
// argument. Nothing is left behind when Put fails with it.
var ErrBadInput = errors.New("joblog: bad input")

// ErrUnsafePath reports a Put destination that could be used to escalate or
// to break the pod: a symlink anywhere in its directory part (a job user
// could point a directory of its own at /usr/local/bin and have root write
// there), a path under /proc, /sys or /dev, or an existing destination that
// is not a regular file (a socket, a device, a directory). Nothing is
// written.
var ErrUnsafePath = errors.New("joblog: unsafe destination")

// openDirNoSymlinks opens path's directory with openat2(2)
// RESOLVE_NO_SYMLINKS and checks the destination entry: see ErrUnsafePath.
func openDirNoSymlinks(path string) (int, error) {
	if !filepath.IsAbs(path) {
		abs, err := filepath.Abs(path)
		if err != nil {
			return -1, err
		}
		path = abs
	}
	path = filepath.Clean(path)
	for _, bad := range []string{"/proc", "/sys", "/dev"} {
		if path == bad || strings.HasPrefix(path, bad+"/") {
			return -1, fmt.Errorf("%w: %s is under %s", ErrUnsafePath, path, bad)
		}
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, filepath.Dir(path), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ELOOP) {
		return -1, fmt.Errorf("%w: a symlink in %s", ErrUnsafePath, filepath.Dir(path))
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	var st unix.Stat_t
	err = unix.Fstatat(fd, filepath.Base(path), &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFLNK {
		unix.Close(fd)
		return -1, fmt.Errorf("%w: %s exists and is not a regular file", ErrUnsafePath, path)
	}
	return fd, nil
}

// putBuf is the copy buffer size of Put, in bytes.
const putBuf = 128 << 10

// Put writes exactly size bytes from r to path atomically, so that path
// either keeps its old content or holds the complete, verified new one:
//
//  1. create a temp file ".<base>.tmp-<random>" in path's directory with
//     O_CREAT|O_EXCL and mode 0600 ([os.CreateTemp]), so no other file is
//     clobbered and nobody else can read the partial content;
//  2. copy size bytes from r into it while hashing them, then read r to
//     EOF to make sure no extra byte follows (r must reach EOF; Put blocks
//     until it does);
//  3. check the size and the SHA-256 digest (sha256Hex: 64 hex digits,
//     upper or lower case);
//  4. chmod to mode (after creation, so the umask does not apply; setuid,
//     setgid and sticky bits are honoured), chown to uid/gid when uid >= 0
//     (gid -1 keeps the group);
//  5. fsync the temp file (after chmod/chown so the metadata is durable
//     too), close it, rename it over path (rename(2) is atomic within a
//     file system), and fsync the directory so the rename is durable.
//
// Short input, extra input beyond size, a read error of r, a digest
// mismatch, a negative size or a malformed digest return an error wrapping
// [ErrBadInput] (and, for a read error, the read error too); the temp file
// is removed and path is not touched. File system errors (create, write,
// chmod, chown, fsync, rename) are returned as is from package os, after
// the temp file is removed. If only the final directory fsync fails, the
// new file is already in place at path and that error is returned.
func Put(path string, r io.Reader, size int64, sha256Hex string, mode os.FileMode, uid, gid int) (err error) {
	if size < 0 {
		return fmt.Errorf("%w: negative size %d", ErrBadInput, size)
	}
	want, derr := hex.DecodeString(sha256Hex)
	if derr != nil || len(want) != sha256.Size {
		return fmt.Errorf("%w: digest %.80q is not 64 hex digits", ErrBadInput, sha256Hex)
	}
	dirfd, err := openDirNoSymlinks(path)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	base := filepath.Base(path)
	// Every later step goes through the directory opened above (its
	// /proc/self/fd magic link), never through path again, so swapping a
	// directory for a symlink after the check changes nothing.
	dir := "/proc/self/fd/" + strconv.Itoa(dirfd)
	path = dir + "/" + base
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	closed, renamed := false, false
	defer func() {
		if !closed {
			_ = tmp.Close()
		}
		if err != nil && !renamed {
			_ = os.Remove(tmpName)
		}
	}()

	h := sha256.New()
	if err := copyExact(tmp, h, r, size); err != nil {
		return err
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("%w: sha256 mismatch: got %x, want %x", ErrBadInput, got, want)
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if uid >= 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	closed = true
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmpName, path); err != nil {
		return err
	}
	renamed = true
	return syncDir(dir)
}

// copyExact copies exactly size bytes from r to f and h, then checks that
// r is at EOF. Input problems wrap ErrBadInput; write errors of f are
// returned as is.
func copyExact(f *os.File, h io.Writer, r io.Reader, size int64) error {
	buf := make([]byte, min(size, putBuf))
	var n int64
	eof := false
	for n < size {
		chunk := buf[:min(int64(len(buf)), size-n)]
		m, rerr := r.Read(chunk)
		if m > 0 {
			_, _ = h.Write(chunk[:m]) // hash.Hash never fails
			if _, werr := f.Write(chunk[:m]); werr != nil {
				return werr
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			eof = true
			if n < size {
				return fmt.Errorf("%w: short input: got %d of %d bytes", ErrBadInput, n, size)
			}
		} else if rerr != nil {
			return fmt.Errorf("%w: reading input after %d of %d bytes: %w", ErrBadInput, n, size, rerr)
		}
	}
	if !eof {
		var one [1]byte
		m, rerr := io.ReadFull(r, one[:])
		switch {
		case m > 0:
			return fmt.Errorf("%w: more than %d bytes of input", ErrBadInput, size)
		case rerr != io.EOF:
			return fmt.Errorf("%w: reading input after %d bytes: %w", ErrBadInput, size, rerr)
		}
	}
	return nil
}

// syncDir fsyncs directory dir so that a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}
