package github

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor"
)

// sendWork brings the runner's _work into the pod once, at prepare_job:
// the workspace, _actions (downloaded before prepare_job), _tool, and of
// _temp only _github_home and _github_workflow (steps bring their own
// scripts and file commands). It goes as one tar archive, cut into
// pieces of Cfg.ChunkSize, each written by `warmpod job put` with its
// size and SHA-256 (checked in the pod, the file renamed into place only
// when both match): a broken stream or a corrupt piece resends that piece
// alone. The last piece's exec then unpacks them (see unpack) and tells
// whether the image is Alpine (/etc/alpine-release), the answer
// prepare_job gives when the pool does not say.
func (h *Hook) sendWork(ctx context.Context, core *executor.Core, st *State) (alpine bool, err error) {
	work, err := h.workDir()
	if err != nil {
		return false, err
	}
	f, err := os.CreateTemp("", "warmpod-work-*.tar")
	if err != nil {
		return false, executor.Errorf("the _work archive: %v", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	size, err := writeWorkTar(f, work)
	if err != nil {
		return false, executor.Errorf("the _work archive of %s: %v", work, err)
	}
	chunk := h.Cfg.ChunkSize
	if chunk <= 0 {
		chunk = 64 << 20
	}
	pieces := int((size + chunk - 1) / chunk)
	var out string
	for i := 0; i < pieces; i++ {
		off := int64(i) * chunk
		then := ""
		if i == pieces-1 {
			// The last piece's exec unpacks them all: one exec fewer.
			then = unpack
		}
		if out, err = h.putPiece(ctx, core, st, io.NewSectionReader(f, off, min(chunk, size-off)), i, pieces, then); err != nil {
			return false, err
		}
	}
	fmt.Fprintf(core.Log, "warmpod: _work (%d bytes in %d pieces) is in pod %s\n", size, pieces, st.Pod.Name)
	return strings.Contains(out, "alpine"), nil
}

// unpack is the shell script that follows the last piece's put, with the
// number of pieces as $1: it unpacks them into /__w (once: a resend after
// a stream that broke past the unpack finds the done mark and only removes
// the piece sent again), links /github/home and /github/workflow to their
// _temp copies, and prints "alpine" on an Alpine image.
const unpack = `set -e
cd /__w
if [ -e .warmpod-work.done ]; then rm -f .warmpod-work.[0-9]*
else cat .warmpod-work.[0-9]* | tar -xf -; touch .warmpod-work.done; rm -f .warmpod-work.[0-9]*; fi
mkdir -p /__w/_temp/_github_home /__w/_temp/_github_workflow
{ mkdir -p /github && ln -sfn /__w/_temp/_github_home /github/home && ln -sfn /__w/_temp/_github_workflow /github/workflow; } 2>/dev/null || echo "no /github: read-only root file system?" >&2
if [ -e /etc/alpine-release ]; then echo alpine; fi`

// putPiece writes piece i of pieces into the pod, verified, and runs the
// shell script then after it in the same exec when then is set (its
// stdout is returned); it tries again, from the start of the piece, after
// a broken stream or a digest mismatch (65), MaxStreamRetries times.
func (h *Hook) putPiece(ctx context.Context, core *executor.Core, st *State, r *io.SectionReader, i, pieces int, then string) (string, error) {
	hash := sha256.New()
	if _, err := io.Copy(hash, io.NewSectionReader(r, 0, r.Size())); err != nil {
		return "", executor.Errorf("the _work archive: %v", err)
	}
	sum := hex.EncodeToString(hash.Sum(nil))
	dest := fmt.Sprintf("%s/.warmpod-work.%04d", workMount, i)
	argv := []string{st.Pod.Bin, "job", "put", dest, "--job", st.Job, "--size", strconv.FormatInt(r.Size(), 10), "--sha256", sum, "--mode", "0600"}
	if then != "" {
		argv = []string{"sh", "-c", `"$0" job put "$1" --job "$2" --size "$3" --sha256 "$4" --mode 0600 || exit $?` + "\nshift 4\n" + then,
			st.Pod.Bin, dest, st.Job, strconv.FormatInt(r.Size(), 10), sum, strconv.Itoa(pieces)}
	}
	var last string
	for attempt := 0; attempt <= h.Cfg.MaxStreamRetries; attempt++ {
		var out, errb bytes.Buffer
		code, err := h.Cluster.Exec(ctx, st.Pod, argv, io.NewSectionReader(r, 0, r.Size()), &out, &errb)
		if err == nil && code == 0 {
			return out.String(), nil
		}
		if err == nil && code != control.ExitDataErr {
			return "", executor.Errorf("job put %s in pod %s: exit %d: %s", dest, st.Pod.Name, code, strings.TrimSpace(errb.String()))
		}
		if ctx.Err() != nil {
			return "", executor.Errorf("job put %s: %v", dest, ctx.Err())
		}
		last = fmt.Sprintf("exit %d %v %s", code, err, strings.TrimSpace(errb.String()))
		fmt.Fprintf(core.Log, "warmpod: piece %d of _work did not arrive whole (%s): sending it again\n", i, last)
	}
	return "", executor.Errorf("job put %s in pod %s failed %d times: %s", dest, st.Pod.Name, h.Cfg.MaxStreamRetries+1, last)
}

// writeWorkTar writes the tar archive of work to f from its start (see
// sendWork for what it holds) and returns its size: regular files,
// directories and symbolic links, with their modes; anything else (a
// socket, a device) is skipped.
func writeWorkTar(f *os.File, work string) (int64, error) {
	tw := tar.NewWriter(f)
	err := filepath.WalkDir(work, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(work, path)
		if err != nil || rel == "." {
			return err
		}
		if d.IsDir() && skipInTemp(rel) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasPrefix(rel, "_temp"+string(filepath.Separator)) && !keptInTemp(rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		case info.IsDir(), info.Mode().IsRegular():
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		// Owned by whoever unpacks it (root in a job container): a tar
		// run as root restores owners, which needs CAP_CHOWN for any
		// other uid (the runner's 1001).
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return f.Seek(0, io.SeekCurrent)
}

// keptInTemp: of _work/_temp, only _github_home and _github_workflow go
// into the pod at prepare_job.
func keptInTemp(rel string) bool {
	rel = filepath.ToSlash(rel)
	for _, k := range []string{"_temp/_github_home", "_temp/_github_workflow"} {
		if rel == k || strings.HasPrefix(rel, k+"/") {
			return true
		}
	}
	return false
}

// skipInTemp: a directory under _temp that holds nothing kept.
func skipInTemp(rel string) bool {
	rel = filepath.ToSlash(rel)
	if rel == "_temp" || !strings.HasPrefix(rel, "_temp/") {
		return false
	}
	return !keptInTemp(rel)
}
