package joblog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrGone reports that the log file disappeared while it was being read:
// path was deleted, or now names another file (another inode or device, e.g.
// a new file renamed over it). The CLI exits 100 on it, like read-logs'
// outputLogFileNotExistsExitCode; gitlab-runner's Kubernetes executor then
// restarts from offset 0.
var ErrGone = errors.New("joblog: log file is gone")

// ErrNotFound reports that the log file did not exist and did not appear
// within [ReadOptions.WaitFile]. The CLI exits 100 on it as well.
var ErrNotFound = errors.New("joblog: log file not found")

const (
	// DefaultPoll is the EOF poll interval in follow mode when
	// [ReadOptions.Poll] is zero or negative (read-logs sleeps 500 ms).
	DefaultPoll = 500 * time.Millisecond
	// DefaultMaxLine is the maximum record length in bytes when
	// [ReadOptions.MaxLine] is zero or negative (64 KiB, read-logs' buffer).
	DefaultMaxLine = 64 << 10
	// WaitFilePoll is how often [Read] looks for a missing file while
	// waiting for it (100 ms).
	WaitFilePoll = 100 * time.Millisecond

	// minBuf is the smallest read buffer, in bytes.
	minBuf = 64 << 10
)

// ReadOptions tunes [Read]. The zero value reads the whole file once from
// offset 0, with the defaults below.
type ReadOptions struct {
	// Offset is the file position, in bytes, to start at; it is normally
	// the offset of the last record the executor received. It must not be
	// negative. An offset beyond the end of the file prints nothing without
	// Follow; with Follow, Read waits until the file grows past it.
	Offset int64
	// Follow keeps reading as the file grows (read-logs' only mode) until
	// ctx is done or the file goes away ([ErrGone]).
	Follow bool
	// WaitFile is how long to wait for a missing file to appear, polling
	// every [WaitFilePoll] (read-logs' --wait-file-timeout). Zero means
	// don't wait: a missing file is [ErrNotFound] at once.
	WaitFile time.Duration
	// Poll is the EOF poll interval in follow mode; zero or negative means
	// [DefaultPoll] (500 ms).
	Poll time.Duration
	// MaxLine is the maximum number of line bytes in one record; lines
	// longer than this are split into pieces of MaxLine bytes (the last
	// piece may be shorter). A line of exactly MaxLine bytes is not split.
	// Zero or negative means [DefaultMaxLine] (64 KiB).
	MaxLine int
	// OnPoll, if not nil, is called on every EOF poll in follow mode, from
	// Read's goroutine, before sleeping (the CLI renews the job lease
	// there). It should return quickly.
	OnPoll func()
}

// Read writes "<offset> <line>\n" records to w for the content of path from
// opts.Offset (see the package documentation for the record format and how
// to reassemble the file from records).
//
// Partial last line: in follow mode a last line without '\n' is held back
// until it is completed or grows longer than MaxLine (the writer is
// probably in the middle of it; resuming at the last record's offset picks
// it up whole). Without follow, a partial last line at EOF is printed, with
// '\n' added to the record. When the file goes away (ErrGone), the rest of
// the old file is still read through the open descriptor and a partial last
// line is printed, so everything written before the file went away is
// delivered.
//
// Records are written in batches (one w.Write per read from the file, at
// most about 64 KiB or MaxLine of file bytes); a batch always ends at a
// record boundary.
//
// Read returns:
//   - nil at EOF without follow;
//   - nil when ctx is done in follow mode (also while waiting for the file);
//     without follow, ctx.Err() if ctx is done before EOF;
//   - [ErrGone] in follow mode when, at an EOF, a fresh stat of path fails
//     with ENOENT/ENOTDIR or shows another inode/device than the opened
//     descriptor (read-logs stats its file on EOF the same way);
//   - an error wrapping [ErrNotFound] when the file does not exist and does
//     not appear within opts.WaitFile;
//   - a write error of w as is (the exec stream broke; resume from the last
//     complete record's offset);
//   - other file system errors (open, read, stat) as returned by package os.
func Read(ctx context.Context, path string, w io.Writer, opts ReadOptions) error {
	if opts.Offset < 0 {
		return fmt.Errorf("joblog: negative offset %d", opts.Offset)
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	f, err := openWait(ctx, path, opts.WaitFile)
	if err != nil {
		if opts.Follow && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil
		}
		return err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := f.Seek(opts.Offset, io.SeekStart); err != nil {
		return err
	}
	bufSize := max(opts.MaxLine+1, minBuf)
	r := reader{
		f:       f,
		path:    path,
		opened:  opened,
		w:       w,
		opts:    opts,
		buf:     make([]byte, bufSize),
		out:     make([]byte, 0, bufSize+bufSize/8),
		pending: 0,
		base:    opts.Offset,
	}
	return r.run(ctx)
}

// reader is the state of one Read call.
type reader struct {
	f      *os.File
	path   string
	opened os.FileInfo // fstat of f at open: the inode that must stay at path
	w      io.Writer
	opts   ReadOptions

	buf     []byte // buf[:pending] holds file bytes not yet printed
	pending int
	base    int64  // file offset of buf[0]
	out     []byte // records being built for one w.Write
}

func (r *reader) run(ctx context.Context) error {
	var timer *time.Timer
	gone := false // file went away: drain the descriptor, then ErrGone
	for {
		if err := ctx.Err(); err != nil {
			if r.opts.Follow {
				return nil
			}
			return err
		}
		n, err := r.f.Read(r.buf[r.pending:])
		if n > 0 {
			r.pending += n
			if err := r.emit(false); err != nil {
				return err
			}
			continue
		}
		if err != nil && err != io.EOF {
			return err
		}
		// EOF.
		if !r.opts.Follow || gone {
			if err := r.emit(true); err != nil {
				return err
			}
			if gone {
				return fmt.Errorf("%w: %s", ErrGone, r.path)
			}
			return nil
		}
		if gone, err = r.isGone(); err != nil {
			return err
		}
		if gone {
			continue // read what the old file still holds, then ErrGone
		}
		if r.opts.OnPoll != nil {
			r.opts.OnPoll()
		}
		if timer == nil {
			timer = time.NewTimer(r.opts.Poll)
			defer timer.Stop()
		} else {
			timer.Reset(r.opts.Poll)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
	}
}

// emit prints every complete record in buf[:pending] (and, when flush is
// set, a final partial line), writes them to w, and moves the rest of the
// pending bytes to the front of buf.
func (r *reader) emit(flush bool) error {
	p := r.buf[:r.pending]
	maxLine := r.opts.MaxLine
	done := 0
	r.out = r.out[:0]
	for done < len(p) {
		rest := p[done:]
		look := rest[:min(len(rest), maxLine+1)]
		var line []byte
		var used int
		if i := bytes.IndexByte(look, '\n'); i >= 0 {
			line, used = rest[:i], i+1 // a complete line of at most MaxLine bytes
		} else if len(rest) > maxLine {
			line, used = rest[:maxLine], maxLine // longer than MaxLine: split
		} else if flush {
			line, used = rest, len(rest) // partial last line at EOF
		} else {
			break // partial line: wait for the rest
		}
		done += used
		r.out = strconv.AppendInt(r.out, r.base+int64(done), 10)
		r.out = append(r.out, ' ')
		r.out = append(r.out, line...)
		r.out = append(r.out, '\n')
	}
	if done == 0 {
		return nil
	}
	copy(r.buf, p[done:])
	r.pending -= done
	r.base += int64(done)
	n, err := r.w.Write(r.out)
	if err == nil && n < len(r.out) {
		err = io.ErrShortWrite
	}
	return err
}

// isGone reports whether path no longer names the opened file.
func (r *reader) isGone() (bool, error) {
	st, err := os.Stat(r.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return true, nil
		}
		return false, err
	}
	return !os.SameFile(r.opened, st), nil
}

// openWait opens path, polling every WaitFilePoll for up to wait while it
// does not exist. It returns an error wrapping ErrNotFound when the file is
// still missing at the deadline, ctx.Err() when ctx is done first, and
// other open errors as is.
func openWait(ctx context.Context, path string, wait time.Duration) (*os.File, error) {
	deadline := time.Now().Add(wait)
	var timer *time.Timer
	for {
		f, err := os.Open(path)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%w: %s (waited %v)", ErrNotFound, path, wait)
		}
		d := min(WaitFilePoll, left)
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// ParseRecord splits one record line, without its trailing '\n', into the
// offset (bytes, the file position just after what the record consumed) and
// the line. It is the executor-side helper; see the package documentation
// for how to turn records back into file bytes. Split the stream into
// records at '\n' only: a line may end with '\r' (or hold any other byte),
// which bufio.ScanLines would drop. The error reports a
// missing space or an offset that is not a non-negative decimal int64.
func ParseRecord(rec string) (offset int64, line string, err error) {
	i := strings.IndexByte(rec, ' ')
	if i <= 0 {
		return 0, "", fmt.Errorf("joblog: malformed record (no offset): %.40q", rec)
	}
	for _, c := range []byte(rec[:i]) {
		if c < '0' || c > '9' {
			return 0, "", fmt.Errorf("joblog: malformed record offset %.40q", rec[:i])
		}
	}
	offset, err = strconv.ParseInt(rec[:i], 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("joblog: malformed record offset: %w", err)
	}
	return offset, rec[i+1:], nil
}
