package stageclient

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/fsuser"
	"github.com/warmpod/warmpod/putfile"
)

// ErrOtherScript means a stage of that name exists in the job with
// another script: the call is refused (65) before it touches the job's
// files.
var ErrOtherScript = errors.New("already exists in this job with another script")

// Store returns the path of the stage's script in the job's directory,
// JOBDIR/scripts/NAME, writing it first unless the job (st, the answer of
// job.status) already has a stage of that name and digest (a retry: the
// script is not read again). A new script is size bytes from r whose hex
// SHA-256 is digest, stored atomically and verified (mode 0500, owned by
// the job user); the directory is the job's tmpfs, removed at job end,
// and the script (which holds the job's variables, token included) never
// appears in argv. Errors: ErrOtherScript; putfile.ErrBadInput (a bad
// name, size or digest) or putfile.ErrUnsafePath; other I/O errors.
func Store(st *control.Response, name string, r io.Reader, size int64, digest string) (string, error) {
	// A status without a stage list is a job with no stages yet.
	js, _ := st.JobStatus()
	for _, e := range js.Stages {
		if e.Stage != name {
			continue
		}
		if e.SHA256 != digest {
			return "", fmt.Errorf("stage %q %w", name, ErrOtherScript)
		}
		return filepath.Join(st.JobDir, "scripts", name), nil
	}
	return putScript(st, name, r, size, digest)
}

func putScript(st *control.Response, name string, r io.Reader, size int64, digest string) (string, error) {
	if !control.ValidStageName(name) {
		return "", fmt.Errorf("%w: stage name %q: want [A-Za-z0-9][A-Za-z0-9._-]*, at most %d bytes", putfile.ErrBadInput, name, control.MaxStageName)
	}
	dir := filepath.Join(st.JobDir, "scripts")
	path := filepath.Join(dir, name)
	put := func() error {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		return putfile.Put(path, io.LimitReader(r, size), size, digest, putfile.Options{Mode: 0o500, UID: -1, GID: -1})
	}
	if st.User == "" {
		if err := put(); err != nil {
			return "", err
		}
		return path, nil
	}
	cred, err := control.ParseUser(st.User)
	if err != nil {
		return "", fmt.Errorf("job user: %v", err)
	}
	// The job's directory is the job user's (0700): the script is stored
	// as that user (package fsuser), so it is theirs from birth and this
	// root client needs neither CAP_CHOWN nor CAP_DAC_OVERRIDE, which a
	// pod that drops them does not have.
	if err := fsuser.Do(int(cred.Uid), int(cred.Gid), put); err != nil {
		return "", err
	}
	return path, nil
}
