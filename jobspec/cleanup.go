package jobspec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxWipeDepth bounds the directory nesting WipeDir descends (each level
// holds one descriptor open): a job could nest directories thousands deep
// to exhaust PID 1's descriptors.
const maxWipeDepth = 128

// WipeCleanupPaths removes the contents of every directory that matches one
// of patterns (each accepted by [CheckCleanupPath]; others are skipped with
// an error) and keeps the directories themselves, so a volume mounted there
// stays usable. It returns how many entries it removed and every error it
// met, joined; it never stops at the first one, because whatever it could
// not remove may hold a token.
//
// Matches come from [filepath.Glob] and are then opened with openat2(2)
// RESOLVE_NO_SYMLINKS: a match reached through a symlink anywhere in its
// path is refused, so job code cannot point a cleanup path at /usr. See
// [WipeDir] for what happens inside a match.
//
// A match that is, contains or lies inside one of protect (PID 1's own
// runtime directories: its control socket, job directories and logs) is
// skipped with an error: "/run/*" must not take the control socket.
func WipeCleanupPaths(patterns, protect []string) (int, error) {
	var errs []error
	removed := 0
	for _, p := range patterns {
		if reason := CheckCleanupPath(p); reason != "" {
			errs = append(errs, fmt.Errorf("cleanup path %q: %s", p, reason))
			continue
		}
		matches, err := filepath.Glob(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup path %q: %w", p, err))
			continue
		}
		for _, m := range matches {
			if p := overlaps(m, protect); p != "" {
				errs = append(errs, fmt.Errorf("cleanup path %s: overlaps PID 1's %s: skipped", m, p))
				continue
			}
			n, err := WipeDir(m)
			removed += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return removed, errors.Join(errs...)
}

// overlaps returns the first of protect that dir equals, contains or lies
// inside, or "".
func overlaps(dir string, protect []string) string {
	dir = filepath.Clean(dir)
	for _, p := range protect {
		p = filepath.Clean(p)
		if dir == p || strings.HasPrefix(p, dir+"/") || strings.HasPrefix(dir, p+"/") || dir == "/" {
			return p
		}
	}
	return ""
}

// maxZeroBytes bounds the bytes one WipeDir overwrites with zeros (the
// files' allocated blocks, not their apparent size: a sparse 1 TB file
// costs nothing); past it files are only unlinked. Job code must not be
// able to make PID 1 write for minutes, or charge its memory cgroup, while
// a job end waits.
const maxZeroBytes = 256 << 20

// readBatch is how many names WipeDir reads from a directory at a time,
// so a directory of millions of entries does not load them all at once.
const readBatch = 1024

// WipeDir removes everything inside directory dir and keeps dir. It never
// follows a symlink: dir is opened with RESOLVE_NO_SYMLINKS (a symlink in
// its path is an error wrapping unix.ELOOP), every entry below it is
// reached relative to its parent's descriptor with O_NOFOLLOW, symlinks are
// unlinked as links, and a mount point below dir is not entered
// (RESOLVE_NO_XDEV: its contents are not ours to remove; the mount point
// is reported). Regular files with a single link are overwritten with
// zeros before they are unlinked, so a token does not stay in freed blocks
// of a disk-backed volume (at most their allocated blocks, 256 MiB in all
// per call); a file with more links, or one mounted there (another
// device), is only unlinked, since zeroing would change what the other
// name shows. A dir that does not
// exist, or is not a directory, is skipped without error. Directories
// nested more than 128 deep are reported and left.
func WipeDir(dir string) (int, error) {
	if fi, err := os.Lstat(dir); err != nil || fi.Mode()&os.ModeSymlink == 0 && !fi.IsDir() {
		return 0, nil // gone, or not a directory: nothing of ours
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOENT):
		return 0, nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return 0, fmt.Errorf("cleanup path %s: reached through a symlink: refused", dir)
	case err != nil:
		return 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	for _, bad := range []string{"/proc", "/sys", "/dev"} {
		if dir == bad || strings.HasPrefix(filepath.Clean(dir)+"/", bad+"/") {
			unix.Close(fd)
			return 0, fmt.Errorf("cleanup path %s: under %s", dir, bad)
		}
	}
	w := wiper{zeroLeft: maxZeroBytes}
	w.contents(fd, dir, 0)
	unix.Close(fd)
	return w.removed, errors.Join(w.errs...)
}

type wiper struct {
	removed  int
	zeroLeft int64 // bytes that may still be zeroed
	errs     []error
}

// contents removes the entries of the directory open at fd (path names it
// in errors only), readBatch names at a time. Unlinking while reading a
// directory stream may make getdents(2) skip entries, so each batch is
// read from the start again; it stops when the directory is empty or a
// batch removed nothing (what is left is reported).
func (w *wiper) contents(fd int, path string, depth int) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		w.errs = append(w.errs, &os.PathError{Op: "stat", Path: path, Err: err})
		return
	}
	for {
		dup, err := unix.Dup(fd)
		if err != nil {
			w.errs = append(w.errs, &os.PathError{Op: "dup", Path: path, Err: err})
			return
		}
		_, _ = unix.Seek(dup, 0, 0)
		f := os.NewFile(uintptr(dup), path)
		names, err := f.Readdirnames(readBatch)
		_ = f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			w.errs = append(w.errs, err)
		}
		if len(names) == 0 {
			return
		}
		before := w.removed
		for _, name := range names {
			w.entry(fd, uint64(st.Dev), path, name, depth)
		}
		if w.removed == before {
			return
		}
	}
}

func (w *wiper) entry(parent int, dev uint64, path, name string, depth int) {
	full := path + "/" + name
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if !errors.Is(err, unix.ENOENT) {
			w.errs = append(w.errs, &os.PathError{Op: "stat", Path: full, Err: err})
		}
		return
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if depth >= maxWipeDepth {
			w.errs = append(w.errs, fmt.Errorf("%s: nested deeper than %d directories: left in place", full, maxWipeDepth))
			return
		}
		fd, err := unix.Openat2(parent, name, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
		})
		switch {
		case errors.Is(err, unix.EXDEV):
			w.errs = append(w.errs, fmt.Errorf("%s: a mount point: its contents are left", full))
			return
		case errors.Is(err, unix.ENOENT):
			return
		case err != nil:
			w.errs = append(w.errs, &os.PathError{Op: "open", Path: full, Err: err})
			return
		}
		w.contents(fd, full, depth+1)
		unix.Close(fd)
		w.unlink(parent, full, name, unix.AT_REMOVEDIR)
	case unix.S_IFREG:
		if st.Nlink == 1 && st.Blocks > 0 && uint64(st.Dev) == dev && w.zeroLeft > 0 {
			w.zero(parent, full, name, min(st.Size, st.Blocks*512))
		}
		w.unlink(parent, full, name, 0)
	default:
		w.unlink(parent, full, name, 0)
	}
}

// zero overwrites the regular file name (in parent) with zeros through a
// descriptor opened without following symlinks and without blocking on a
// FIFO swapped in after the stat.
func (w *wiper) zero(parent int, full, name string, limit int64) {
	fd, err := unix.Openat(parent, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return // unlinked below all the same
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	if st, ok := fi.Sys().(*unix.Stat_t); ok && st.Nlink > 1 {
		return
	}
	size := min(fi.Size(), limit, w.zeroLeft)
	w.zeroLeft -= size
	zeros := make([]byte, min(size, 32<<10))
	for left := size; left > 0; {
		n, err := f.Write(zeros[:min(left, int64(len(zeros)))])
		if err != nil {
			w.errs = append(w.errs, err)
			return
		}
		left -= int64(n)
	}
	_ = f.Sync()
}

func (w *wiper) unlink(parent int, full, name string, flags int) {
	err := unix.Unlinkat(parent, name, flags)
	switch {
	case err == nil:
		w.removed++
	case errors.Is(err, unix.ENOENT):
	case errors.Is(err, unix.EBUSY):
		w.errs = append(w.errs, fmt.Errorf("%s: a mount point: its contents are left", full))
	default:
		w.errs = append(w.errs, &os.PathError{Op: "unlink", Path: full, Err: err})
	}
}
