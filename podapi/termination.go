package podapi

import (
	"fmt"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/warmpod/warmpod/internal/jsonenc"
)

// MaxTerminationMessage is the most the kubelet keeps of a container's
// termination message, in bytes (kubelet: "message truncated by the node above
// 4096 bytes", pkg/kubelet/kuberuntime). WriteTerminationMessage never
// writes more, newline included.
const MaxTerminationMessage = 4096

// TerminationMessage is the one-line JSON written to the container's
// terminationMessagePath (default /dev/termination-log, a file the kubelet
// bind-mounts into the container). The kubelet copies it to
// .status.containerStatuses[].state.terminated.message, where the executor
// and `kubectl describe pod` read why PID 1 exited.
type TerminationMessage struct {
	Reason   string    `json:"reason"`        // why PID 1 exits: idle-timeout, max-jobs, sigterm, command-exited, ...
	ExitCode int       `json:"exit_code"`     // PID 1's exit status (0 idle drain, 143 SIGTERM, ...)
	Job      string    `json:"job,omitempty"` // job id that was running, never a secret
	JobsRun  int       `json:"jobs_run"`      // jobs ended since PID 1 started (as in `warmpod status`; a job still running is not counted)
	Version  string    `json:"version"`       // warmpod version
	Time     time.Time `json:"time"`          // when PID 1 decided to exit; zero: the time of the write (UTC)
}

// WriteTerminationMessage writes m as one JSON line (ending in "\n", HTML
// characters not escaped) of at most MaxTerminationMessage (4096) bytes to
// path, replacing what the file held (O_TRUNC; the file is created 0644 if
// absent), then fsyncs it. When the line would be longer, Job and Reason are
// shortened (the longer one first, on UTF-8 boundaries, ending in "...") until
// it fits; Version last, if it alone is too long. A missing directory is an
// error (the *PathError of open(2)); so is a failed write or fsync.
func WriteTerminationMessage(path string, m TerminationMessage) error {
	if m.Time.IsZero() {
		m.Time = time.Now().UTC()
	}
	line, err := fitTerminationMessage(m)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("termination message: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("termination message: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("termination message: fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("termination message: %w", err)
	}
	return nil
}

const ellipsis = "..."

// fitTerminationMessage encodes m as one line of at most MaxTerminationMessage
// bytes, shortening the longer of Job and Reason first, then the other, then
// Version, each to the longest prefix that fits.
func fitTerminationMessage(m TerminationMessage) ([]byte, error) {
	line, err := encodeLine(m)
	if err != nil {
		return nil, fmt.Errorf("termination message: %w", err)
	}
	first, second := &m.Reason, &m.Job
	if len(m.Job) > len(m.Reason) {
		first, second = second, first
	}
	for _, field := range []*string{first, second, &m.Version} {
		if len(line) <= MaxTerminationMessage {
			return line, nil
		}
		full := *field
		// Largest k such that full[:k]+"..." fits (JSON escaping makes a byte of
		// input cost 1 to 6 bytes of output, so search instead of computing).
		lo, hi := 0, len(full) // invariant: cut(lo) fits or lo == 0; cut(hi+1) does not fit
		var best []byte
		for lo <= hi {
			k := (lo + hi) / 2
			*field = cut(full, k)
			l, err := encodeLine(m)
			if err != nil {
				return nil, fmt.Errorf("termination message: %w", err)
			}
			if len(l) <= MaxTerminationMessage {
				best, lo = l, k+1
			} else {
				hi = k - 1
			}
		}
		if best != nil {
			return best, nil
		}
		*field = ""
		if line, err = encodeLine(m); err != nil {
			return nil, fmt.Errorf("termination message: %w", err)
		}
	}
	if len(line) <= MaxTerminationMessage {
		return line, nil
	}
	return nil, fmt.Errorf("termination message: %d bytes even with empty fields", len(line))
}

// cut is the first k bytes of s, moved back to a UTF-8 boundary, marked with
// "..."; "" when nothing is left.
func cut(s string, k int) string {
	k = min(k, len(s))
	for k > 0 && k < len(s) && !utf8.RuneStart(s[k]) {
		k--
	}
	if k == 0 {
		return ""
	}
	return s[:k] + ellipsis
}

// encodeLine writes m as one JSON line, as an encoding/json Encoder with
// SetEscapeHTML(false) writes it (jsonenc: PID 1 links no reflection-based
// encoder). It never fails; the error is the fitting code's contract.
func encodeLine(m TerminationMessage) ([]byte, error) {
	b := []byte(`{"reason":`)
	b = jsonenc.AppendStringNoHTML(b, m.Reason)
	b = strconv.AppendInt(append(b, `,"exit_code":`...), int64(m.ExitCode), 10)
	if m.Job != "" {
		b = jsonenc.AppendStringNoHTML(append(b, `,"job":`...), m.Job)
	}
	b = strconv.AppendInt(append(b, `,"jobs_run":`...), int64(m.JobsRun), 10)
	b = jsonenc.AppendStringNoHTML(append(b, `,"version":`...), m.Version)
	b = jsonenc.AppendTime(append(b, `,"time":`...), m.Time)
	return append(b, "}\n"...), nil
}
