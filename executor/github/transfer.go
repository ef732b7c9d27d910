package github

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/podcmd"
)

// sendWork brings the runner's _work into the pod once, at prepare_job:
// the workspace, _actions (downloaded before prepare_job), _tool, and of
// _temp only _github_home and _github_workflow (steps bring their own
// scripts and file commands). It goes as one tar archive, cut into
// pieces of Cfg.ChunkSize as it is written (no temp file: each piece is
// hashed as its bytes arrive, one pass over them, and held in memory
// until the pod has it), each written by `warmpod job put` with its size
// and SHA-256 (checked in the pod, the file renamed into place only when
// both match): a broken stream or a corrupt piece resends that piece
// alone. Up to Cfg.Streams pieces go at once, each on an exec of its own
// (one exec stream does not fill the path through the API server and
// the kubelet: bench/github-kube.md), so at most Streams+2 pieces are in
// memory. The last piece goes after all the others have arrived, and its
// exec unpacks them (see unpack) and tells whether the image is Alpine
// (/etc/alpine-release), the answer prepare_job gives when the pool does
// not say; a last piece of up to maxStreamPiece goes with the unpack as
// one `job exec` over the job's stream, a larger one as the others do
// and the unpack alone after it. A debug line gives where the time went
// (workTimings).
func (h *Hook) sendWork(ctx context.Context, log io.Writer, cl session.Cluster, st *State) (alpine bool, err error) {
	work, err := h.workDir()
	if err != nil {
		return false, err
	}
	chunk, streams := h.Cfg.ChunkSize, h.Cfg.Streams
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	if streams <= 0 {
		streams = DefaultStreams
	}
	t0 := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pc := newPiecer(ctx, int(chunk), streams+2)
	var tarErr error
	var tarTime time.Duration
	go func() {
		defer close(pc.ready)
		t := time.Now()
		if tarErr = writeWorkTar(pc, work); tarErr == nil {
			tarErr = pc.close()
		}
		tarTime = time.Since(t)
	}()
	var tm workTimings
	out, err := h.putPieces(ctx, cancel, cl, st, pc, streams, &tm)
	cancel(nil) // the archive's writer stops at its next piece when a put failed
	for range pc.ready {
	}
	if tarErr != nil && !errors.Is(tarErr, context.Canceled) {
		return false, session.Errorf("the _work archive of %s: %v", work, tarErr)
	}
	if err != nil {
		return false, err
	}
	tm.bytes, tm.pieces, tm.streams, tm.wall = pc.size, pc.n, streams, time.Since(t0)
	tm.collect, tm.hash, tm.wait = tarTime-pc.hashing-pc.waiting, pc.hashing, pc.waiting
	tm.extract = extractTime(out)
	fmt.Fprintf(log, "warmpod: _work (%d bytes in %d pieces) is in pod %s\n", pc.size, pc.n, st.Pod.Name)
	fmt.Fprintf(log, "warmpod: _work timings: %s\n", tm)
	return strings.Contains(out, "alpine"), nil
}

// DefaultChunkSize and DefaultStreams are the _work transfer's piece size
// (bytes) and how many pieces go at once when Config leaves them 0; the
// figures behind them are in bench/github-kube.md.
const (
	DefaultChunkSize = 16 << 20
	DefaultStreams   = 3
)

// putPieces sends the pieces pc makes, up to streams at once, and the
// last one with the unpack once all others are in; it returns the
// unpack's output. A failed put cancels ctx (cancel) with its error, so
// the others and the archive's writer stop.
func (h *Hook) putPieces(ctx context.Context, cancel context.CancelCauseFunc, cl session.Cluster, st *State, pc *piecer, streams int, tm *workTimings) (string, error) {
	sem := make(chan struct{}, streams)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first, last time.Time
	// finish runs the unpack once every piece is in: with the last piece
	// (p) when it is small enough for the job's stream, else alone.
	finish := func(p *workPiece, n int) (string, error) {
		wg.Wait()
		if err := context.Cause(ctx); err != nil {
			return "", putErr(err)
		}
		t := time.Now()
		if !first.IsZero() {
			tm.putWall = last.Sub(first)
		}
		defer func() { tm.last = time.Since(t) }()
		if p != nil {
			return h.putPiece(ctx, cl, st, *p, unpack)
		}
		return h.unpackPieces(ctx, cl, st, n)
	}
	for p := range pc.ready {
		if p.last && len(p.data) <= maxStreamPiece {
			return finish(&p, 0)
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return "", putErr(context.Cause(ctx))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			_, err := h.putPiece(ctx, cl, st, p, "")
			mu.Lock()
			if first.IsZero() {
				first = t
			}
			last = time.Now()
			tm.put += last.Sub(t)
			mu.Unlock()
			<-sem
			if err != nil {
				cancel(err)
				return
			}
			pc.release(p.data)
		}()
		if p.last {
			return finish(nil, p.i+1)
		}
	}
	wg.Wait()
	return "", putErr(context.Cause(ctx))
}

// maxStreamPiece is the largest last piece that goes with the unpack over
// the job's stream (carriedExec): the stream is a WebSocket exec whose
// bytes are framed twice over, so a large piece is faster by the bulk
// transport (SPDY first); 8.4 MB took about 300 ms more over the stream
// on kube-e2e, about what the exec it spares costs. A larger last piece
// goes as the others do, and the unpack alone over the stream.
const maxStreamPiece = 1 << 20

// putErr is the error of a transfer that stopped: a put's own error as
// it is, a cancel of the job as one.
func putErr(err error) error {
	var se *session.SystemError
	switch {
	case err == nil:
		return session.Errorf("the _work archive ended without its last piece")
	case errors.As(err, &se):
		return err
	}
	return session.Errorf("sending _work: %v", err)
}

// unpack is the shell script that follows the last piece's put, with the
// number of pieces as $1: it unpacks them into /__w (once: a resend after
// a stream that broke past the unpack finds the done mark and only removes
// the piece sent again), links /github/home and /github/workflow to their
// _temp copies, prints "alpine" on an Alpine image, and the unpack's time
// in centiseconds as "warmpod-extract-cs N" (from /proc/uptime; nothing
// when it cannot be read). Every process it starts is prepare_job's time
// in a pod whose cpu weight is its pool's request (10m in deploy/), so it
// starts only those that do work: the shell's builtins for the clock (no
// command substitution, which forks), the done mark and the check of the
// _temp directories the archive brings, and no cat for a single piece.
// The /github links are made always: a fresh pod has none, and a link
// the image brings may point elsewhere.
const unpack = `set -e
cd /__w
read -r a _ </proc/uptime 2>/dev/null || a=
if [ -e .warmpod-work.done ]; then rm -f .warmpod-work.[0-9]*
else
  if [ "$1" = 1 ]; then tar -xf .warmpod-work.0000; else cat .warmpod-work.[0-9]* | tar -xf -; fi
  : >.warmpod-work.done; rm -f .warmpod-work.[0-9]*
  read -r b _ </proc/uptime 2>/dev/null || b=
  if [ -n "$a" ] && [ -n "$b" ]; then echo "warmpod-extract-cs $((${b%.*}${b#*.} - ${a%.*}${a#*.}))"; fi
fi
[ -d _temp/_github_home ] && [ -d _temp/_github_workflow ] || mkdir -p _temp/_github_home _temp/_github_workflow
{ mkdir -p /github && ln -sfn /__w/_temp/_github_home /github/home && ln -sfn /__w/_temp/_github_workflow /github/workflow; } 2>/dev/null || echo "no /github: read-only root file system?" >&2
if [ -e /etc/alpine-release ]; then echo alpine; fi`

// putPiece writes piece p into the pod, verified, and runs the shell
// script then after it in the same exec when then is set (its stdout is
// returned); it tries again, from the start of the piece, after a broken
// stream or a digest mismatch (65), MaxStreamRetries times. A piece alone
// goes by the bulk transport (session.BulkExec); with then, the two go
// as one `job exec` (carriedExec).
func (h *Hook) putPiece(ctx context.Context, cl session.Cluster, st *State, p workPiece, then string) (string, error) {
	dest := fmt.Sprintf("%s/.warmpod-work.%04d", workMount, p.i)
	argv := podcmd.JobPut{Bin: st.Pod.Bin, Dest: dest, Job: st.Job, Size: len(p.data), SHA256: p.sum, Mode: 0o600}.Argv()
	run := func(out, errb *bytes.Buffer) (int, error) {
		return session.BulkExec(cl)(ctx, st.Pod, argv, bytes.NewReader(p.data), out, errb)
	}
	if then != "" {
		// The put's own argv as sh's positional parameters ("$@", no
		// quoting to get wrong), then the script with $1 the next piece's
		// number, as it expects.
		argv = append([]string{"sh", "-c", `"$@" || exit $?` + "\nset -- " + strconv.Itoa(p.i+1) + "\n" + then, "sh"}, argv...)
		run = func(out, errb *bytes.Buffer) (int, error) { return carriedExec(ctx, cl, st, argv, p.data, out, errb) }
	}
	var last string
	for attempt := 0; attempt <= h.Cfg.MaxStreamRetries; attempt++ {
		var out, errb bytes.Buffer
		code, err := run(&out, &errb)
		if err == nil && code == 0 {
			return out.String(), nil
		}
		if err == nil && code != control.ExitDataErr {
			return "", session.Errorf("job put %s in pod %s: exit %d: %s", dest, st.Pod.Name, code, strings.TrimSpace(errb.String()))
		}
		if ctx.Err() != nil {
			return "", session.Errorf("job put %s: %v", dest, context.Cause(ctx))
		}
		last = fmt.Sprintf("exit %d %v %s", code, err, strings.TrimSpace(errb.String()))
		fmt.Fprintf(debugWriter{h.Stdout}, "warmpod: piece %d of _work did not arrive whole (%s): sending it again\n", p.i, last)
	}
	return "", session.Errorf("job put %s in pod %s failed %d times: %s", dest, st.Pod.Name, h.Cfg.MaxStreamRetries+1, last)
}

// unpackPieces runs the unpack of n pieces already in the pod (a last
// piece too large for the stream went by the bulk transport), as one
// `job exec`, trying again after a broken stream (the unpack runs once:
// its done mark), MaxStreamRetries times; it returns the unpack's output.
func (h *Hook) unpackPieces(ctx context.Context, cl session.Cluster, st *State, n int) (string, error) {
	argv := []string{"sh", "-c", "set -- " + strconv.Itoa(n) + "\n" + unpack}
	var last error
	for range h.Cfg.MaxStreamRetries + 1 {
		var out, errb bytes.Buffer
		code, err := carriedExec(ctx, cl, st, argv, nil, &out, &errb)
		switch {
		case err == nil && code == 0:
			return out.String(), nil
		case err == nil:
			return "", session.Errorf("the unpack of _work in pod %s: exit %d: %s", st.Pod.Name, code, strings.TrimSpace(errb.String()))
		case ctx.Err() != nil:
			return "", session.Errorf("the unpack of _work: %v", context.Cause(ctx))
		}
		last = err
	}
	return "", session.Errorf("the unpack of _work in pod %s failed %d times: %v", st.Pod.Name, h.Cfg.MaxStreamRetries+1, last)
}

// carriedExec runs cmd in st's pod as `job exec` through cl, so that the
// job's multiplexer stream carries it (cl.Exec): prepare_job then has no
// exec of its own for it (a round trip through the API server, the
// kubelet and the container runtime is about a third of prepare_job:
// bench/github-kube.md). A warmpod older than `job exec` refuses it
// (its attach, or an unknown command, exit 2): cmd then goes by a direct
// exec of its own.
// stdin nil: none.
func carriedExec(ctx context.Context, cl session.Cluster, st *State, cmd []string, stdin []byte, stdout, stderr *bytes.Buffer) (int, error) {
	in := func() io.Reader {
		if stdin == nil {
			return nil
		}
		return bytes.NewReader(stdin)
	}
	code, err := cl.Exec(ctx, st.Pod, podcmd.JobExec{Bin: st.Pod.Bin, Job: st.Job, Command: cmd}.Argv(), in(), stdout, stderr)
	// Through the job's multiplexer, an older attach refuses the call
	// (mux.ErrRefused); by direct exec, an older warmpod says it does not
	// know the command.
	if errors.Is(err, mux.ErrRefused) || err == nil && code == control.ExitUsage && strings.Contains(stderr.String(), `unknown job command "exec"`) {
		stdout.Reset()
		stderr.Reset()
		return session.BulkExec(cl)(ctx, st.Pod, cmd, in(), stdout, stderr)
	}
	return code, err
}

// writeWorkTar writes the tar archive of work to w (see sendWork for
// what it holds): regular files, directories and symbolic links, with
// their modes; anything else (a socket, a device) is skipped.
func writeWorkTar(w io.Writer, work string) error {
	tw := tar.NewWriter(w)
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
		return writeEntry(tw, path, rel, info)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// writeEntry writes one entry of writeWorkTar: its header, and the
// content of a regular file.
func writeEntry(tw *tar.Writer, path, rel string, info fs.FileInfo) error {
	link := ""
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		var err error
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
	// Owned by whoever unpacks it (root in a job container): a tar run as
	// root restores owners, which needs CAP_CHOWN for any other uid (the
	// runner's 1001).
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	// The file's size is in the header: a file that grew or shrank since
	// is an error of tar.Writer (ErrWriteTooLong) or a short copy here.
	n, err := io.Copy(tw, src)
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("%s changed while it was read (%d of %d bytes)", path, n, hdr.Size)
	}
	return err
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
