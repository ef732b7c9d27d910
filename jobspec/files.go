package jobspec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/warmpod/warmpod/internal/durable"
)

// WriteFiles creates dir with mode 0700 and writes each File variable's
// value to dir/KEY with mode 0400, opened with O_CREAT|O_EXCL|O_NOFOLLOW
// (open(2)) so that nothing already there, symlinks included, is followed
// or overwritten, and fsync'ed (as is dir). Modes are set with chmod after
// creation, so the umask does not change them. The files belong to the
// calling process's user; changing the owner is up to the caller.
//
// dir must not exist yet: an existing dir is an error (fs.ErrExist) and is
// left untouched. Its parent must not be writable by untrusted users. On
// any other error WriteFiles removes what it created (with [RemoveFiles])
// and returns the first error; errors name paths, never values. A key that
// is not a POSIX name is an error (ParseSpec never yields one; this guards
// hand-built Specs).
func (s *Spec) WriteFiles(dir string) (err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = RemoveFiles(dir)
		}
	}()
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	for _, v := range s.Variables {
		if !v.File {
			continue
		}
		if !isName(v.Key) {
			return fmt.Errorf("jobspec: file variable key %q is not a POSIX name", v.Key)
		}
		if err := writeSecretFile(filepath.Join(dir, v.Key), v.Value.b); err != nil {
			return err
		}
	}
	return durable.SyncDir(dir)
}

// writeSecretFile creates path (which must not exist) with mode 0400 and
// writes b to it durably.
func writeSecretFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o400)
	if err != nil {
		return err
	}
	err = f.Chmod(0o400)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RemoveFiles overwrites each regular file under dir with zeros (and
// fsyncs it), then removes dir recursively (os.RemoveAll). A missing dir is
// not an error (nil). Symlinks are never followed, and a file with more
// than one hard link is removed without being zeroed, so that a link
// planted in dir cannot make RemoveFiles overwrite a file elsewhere.
// RemoveFiles keeps going after an error and returns all errors joined
// (errors.Join); errors name paths, never contents.
func RemoveFiles(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	if fi.IsDir() {
		// WalkDir does not follow symlinks; a walk error is recorded
		// and the walk goes on.
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			if d.Type().IsRegular() {
				if err := zeroFile(path); err != nil {
					errs = append(errs, err)
				}
			}
			return nil
		})
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// zeroFile overwrites the regular file at path with zeros, in place.
func zeroFile(path string) error {
	const flags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	f, err := os.OpenFile(path, os.O_WRONLY|flags, 0)
	if errors.Is(err, fs.ErrPermission) {
		// Mode 0400 and we are not root: make it writable through
		// a descriptor (fchmod), so no symlink can be followed.
		r, rerr := os.OpenFile(path, os.O_RDONLY|flags, 0)
		if rerr != nil {
			return rerr
		}
		cerr := r.Chmod(0o600)
		_ = r.Close()
		if cerr != nil {
			return cerr
		}
		f, err = os.OpenFile(path, os.O_WRONLY|flags, 0)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return nil
	}
	zeros := make([]byte, min(fi.Size(), 32<<10))
	for left := fi.Size(); left > 0; {
		n, err := f.Write(zeros[:min(left, int64(len(zeros)))])
		if err != nil {
			return err
		}
		left -= int64(n)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}
