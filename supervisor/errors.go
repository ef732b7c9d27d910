package supervisor

import (
	"errors"
	"fmt"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/lease"
)

// The supervisor's error kinds. Every error its operations return wraps
// exactly one of these (or one of package lease's), keeps its own
// message, and is mapped to an exit code in one place, ExitCode, at the
// control boundary.
var (
	// ErrInvalid: the request itself is malformed (a bad spec, stage name,
	// digest or path); asking again unchanged cannot succeed. Exit 65.
	ErrInvalid = errors.New("invalid request")
	// ErrRefused: the pod cannot take the request now or ever for this job
	// (config hash, scope, replay mismatch, too many writes, a stage still
	// starting); another pod, or a retry, may. Exit 75.
	ErrRefused = errors.New("refused")
	// ErrCancelled: the job was cancelled; only status, logs, wait, cancel and end
	// remain. Exit 69.
	ErrCancelled = errors.New("job cancelled")
	// ErrNoStage: the job has no stage of that name. Exit 69.
	ErrNoStage = errors.New("no such stage")
	// ErrStillRunning: a wait ended before the stage did. Exit 75.
	ErrStillRunning = errors.New("still running")
	// ErrUsage: an operation or argument the control protocol does not
	// know (or a test hook while hooks are off). Exit 2.
	ErrUsage = errors.New("usage")
	// ErrExiting: PID 1 finished its shutdown; nothing more is served.
	// Exit 69.
	ErrExiting = errors.New("PID 1 is exiting")
)

// kindError is an error of one kind with its own message: clients print
// the message, and the kind only chooses the exit code.
type kindError struct {
	kind error
	msg  string
}

// Error is the message clients print.
func (e *kindError) Error() string { return e.msg }

// Unwrap is the kind, for errors.Is.
func (e *kindError) Unwrap() error { return e.kind }

// errorf returns an error of kind with a formatted message.
func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// ExitCode maps an error of the supervisor to the exit code its client
// reports (sysexits.h, as documented in the README): 0 for nil, 65 for
// ErrInvalid, 2 for ErrUsage, 75 for a refusal worth retrying elsewhere or
// later (lease.ErrBusy, lease.ErrWrongJob, ErrRefused, ErrStillRunning), 69
// when the thing asked for is not there (lease.ErrNoJob, lease.ErrDraining,
// ErrCancelled, ErrNoStage, ErrExiting), 70 for anything else (an internal
// failure: the job could not be started, a file could not be opened).
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrInvalid):
		return control.ExitDataErr
	case errors.Is(err, ErrUsage):
		return control.ExitUsage
	case errors.Is(err, lease.ErrBusy), errors.Is(err, lease.ErrWrongJob),
		errors.Is(err, ErrRefused), errors.Is(err, ErrStillRunning):
		return control.ExitTempFail
	case errors.Is(err, lease.ErrNoJob), errors.Is(err, lease.ErrDraining),
		errors.Is(err, ErrCancelled), errors.Is(err, ErrNoStage), errors.Is(err, ErrExiting):
		return control.ExitUnavailable
	}
	return control.ExitSoftware
}

// RefusalOf names the refusal err is, for a client that acts on which one
// it was (control.Response.Refusal); empty for nil and for a failure that
// is no refusal (ExitCode's 70).
func RefusalOf(err error) control.Refusal {
	for _, r := range []struct {
		kind error
		name control.Refusal
	}{
		{lease.ErrNoJob, control.RefusalNoJob}, {lease.ErrDraining, control.RefusalDraining},
		{ErrNoStage, control.RefusalNoStage}, {ErrCancelled, control.RefusalCancelled}, {ErrExiting, control.RefusalExiting},
		{lease.ErrBusy, control.RefusalBusy}, {lease.ErrWrongJob, control.RefusalWrongJob},
		{ErrStillRunning, control.RefusalStillRunning}, {ErrRefused, control.RefusalRefused},
		{ErrInvalid, control.RefusalInvalid}, {ErrUsage, control.RefusalUsage},
	} {
		if err != nil && errors.Is(err, r.kind) {
			return r.name
		}
	}
	return ""
}
