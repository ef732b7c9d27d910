// Package putfile writes one file into the pod atomically for `warmpod
// job put` (artifacts, caches, file variables of the executor): [Put]
// takes a file of known size and SHA-256 digest, writes a temp file
// beside its destination, fsyncs it, renames it and fsyncs the directory,
// so a reader never sees a partial file and a failed or corrupt transfer
// leaves nothing behind. It refuses a destination reached through a
// symlink ([ErrUnsafePath]).
package putfile

import (
	"bytes"
	"crypto/rand"
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

	"github.com/warmpod/warmpod/internal/durable"
)

// ErrBadInput reports that the input given to [Put] does not match what the
// caller announced: fewer or more bytes than size, a read error of the
// input, a SHA-256 digest that differs, or an invalid size or digest
// argument. Nothing is left behind when Put fails with it.
var ErrBadInput = errors.New("putfile: bad input")

// ErrUnsafePath reports a Put destination that could be used to escalate or
// to break the pod: a symlink anywhere in its directory part (a job user
// could point a directory of its own at /usr/local/bin and have root write
// there), a path under /proc, /sys or /dev, or an existing destination that
// is not a regular file (a socket, a device, a directory). Nothing is
// written.
var ErrUnsafePath = errors.New("putfile: unsafe destination")

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

// Options are the optional parts of a [Put].
type Options struct {
	// Mode is the file's mode (setuid, setgid and sticky bits honoured).
	Mode os.FileMode
	// UID and GID own the file when UID >= 0 (GID -1 keeps the group).
	UID, GID int
	// Claim, when set, is called with the absolute path of the temporary
	// file before anything is created; its error aborts the Put and is
	// returned as is. It returns the owner to use (replacing UID and
	// GID). `warmpod job put` uses it to register the write with PID 1,
	// which checks that the caller's job holds the lease and, when that
	// job ends first, kills the writer and removes the temporary file.
	Claim func(tmp string) (uid, gid int, err error)
}

// tempInfix marks Put's temporary files: ".<base>.tmp-<16 hex digits>".
const tempInfix = ".tmp-"

// IsTempName tells whether name (a base name) has the form of a [Put]
// temporary file: "." + base + ".tmp-" + 16 lower-case hex digits.
func IsTempName(name string) bool {
	i := strings.LastIndex(name, tempInfix)
	if !strings.HasPrefix(name, ".") || i < 2 || len(name)-i-len(tempInfix) != 16 {
		return false
	}
	for _, c := range name[i+len(tempInfix):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// RemoveTemp removes the [Put] temporary file at the absolute path tmp, if
// it is still there (a writer that died or was stopped leaves it). Its
// directory is opened without following symlinks and the name must pass
// [IsTempName], so a caller cannot make it remove anything else; those
// refusals wrap [ErrUnsafePath]. A missing file is not an error.
func RemoveTemp(tmp string) error {
	if !filepath.IsAbs(tmp) || filepath.Clean(tmp) != tmp || !IsTempName(filepath.Base(tmp)) {
		return fmt.Errorf("%w: %q is not a put temporary file", ErrUnsafePath, tmp)
	}
	dirfd, err := openDirNoSymlinks(tmp)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer unix.Close(dirfd)
	if err := unix.Unlinkat(dirfd, filepath.Base(tmp), 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "unlink", Path: tmp, Err: err}
	}
	return nil
}

// Put writes exactly size bytes from r to path atomically, so that path
// either keeps its old content or holds the complete, verified new one:
//
//  1. pick a temporary name ".<base>.tmp-<random>" in path's directory and
//     call opt.Claim with it (when set); then create it with
//     O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600, so no other file is
//     clobbered and nobody else can read the partial content;
//  2. copy size bytes from r into it while hashing them, then read r to
//     EOF to make sure no extra byte follows (r must reach EOF; Put blocks
//     until it does);
//  3. check the size and the SHA-256 digest (sha256Hex: 64 hex digits,
//     upper or lower case);
//  4. chown to the owner when its uid >= 0, then chmod to opt.Mode (after
//     creation, so the umask does not apply; after chown, which clears
//     setuid and setgid);
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
func Put(path string, r io.Reader, size int64, sha256Hex string, opt Options) (err error) {
	if size < 0 {
		return fmt.Errorf("%w: negative size %d", ErrBadInput, size)
	}
	want, derr := hex.DecodeString(sha256Hex)
	if derr != nil || len(want) != sha256.Size {
		return fmt.Errorf("%w: digest %.80q is not 64 hex digits", ErrBadInput, sha256Hex)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dirfd, err := openDirNoSymlinks(abs)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	base := filepath.Base(abs)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand never fails on Linux
	tmpBase := "." + base + tempInfix + hex.EncodeToString(rnd[:])
	uid, gid := opt.UID, opt.GID
	if opt.Claim != nil {
		if uid, gid, err = opt.Claim(filepath.Join(filepath.Dir(abs), tmpBase)); err != nil {
			return err
		}
	}
	// Every later step goes through the directory opened above (its
	// /proc/self/fd magic link), never through path again, so swapping a
	// directory for a symlink after the check changes nothing.
	dir := "/proc/self/fd/" + strconv.Itoa(dirfd)
	fd, err := unix.Openat(dirfd, tmpBase, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(filepath.Dir(abs), tmpBase), Err: err}
	}
	tmp := os.NewFile(uintptr(fd), dir+"/"+tmpBase)
	tmpName := tmp.Name()
	path = dir + "/" + base
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
	// chown before chmod: chown(2) clears setuid and setgid.
	if uid >= 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err := tmp.Chmod(opt.Mode); err != nil {
		return err
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
	return durable.SyncDir(dir)
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
