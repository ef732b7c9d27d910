package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/jsonenc"
	"github.com/warmpod/warmpod/shellproxy"
)

// stage is one detached command of a job. PID 1 started it, so PID 1 reaps
// it and knows its outcome whatever happened to the exec stream that asked
// for it.
type stage struct {
	name    string
	pid     int
	started time.Time
	ended   time.Time
	running bool
	code    int
	signal  string
	oom     bool
	done    chan struct{}
	// digest is the hex SHA-256 of the stage's script when the client
	// gave one: a repeated request with the same digest attaches to this
	// stage instead of running it again (an executor retrying after a
	// broken exec stream).
	digest string
	// logStart and logEnd delimit the stage's own output in the job log,
	// in bytes: logStart is just after the start marker, logEnd just
	// before the end marker (and before the newline PID 1 adds to end a
	// partial last line), so a client streams exactly what the stage
	// printed. logEnd is -1 while the stage runs.
	logStart, logEnd int64
	// cancelling is true while a stage cancel's worker stops the stage's
	// processes; the leader's exit is then held (held) and the stage
	// ends when the cancel has: the traps of its other processes (an
	// orphan of a shell that died of its TERM at once) still write into
	// the stage's output, before its end marker, and a stage reported
	// ended has no process left. onEnd are run once the stage has ended
	// (a cancel's reply that came before the reaper's news). Loop only.
	cancelling bool
	held       *stageExit
	onEnd      []func()
}

// stageExit is how a stage's leader ended.
type stageExit struct {
	code int
	sig  string
	oom  bool
}

// view is the stage's status document (loop only): a copy, which a
// handler may marshal after the loop has moved on.
func (st *stage) view() control.StageStatus {
	v := control.StageStatus{Stage: st.name, PID: st.pid, Running: st.running, Signal: st.signal, OOMKilled: st.oom, Started: st.started, LogStart: st.logStart, SHA256: st.digest}
	if !st.running {
		code, ended, end := st.code, st.ended, st.logEnd
		v.ExitCode, v.Ended, v.LogEnd = &code, &ended, &end
	}
	return v
}

// Stage is what StartStage, WaitStage and CancelStage tell about a stage.
type Stage struct {
	Job    string               // the job's id
	Status *control.StageStatus // the stage's status document; nil with most errors
	Replay bool                 // StartStage attached to a stage already started
}

// StartStage runs argv as stage name of the current job, detached: in its
// own session and process group, with the job's environment, stdin
// /dev/null, stdout and stderr appended to the job's log between
// GitLab-compatible marker lines ({"script": "<name>"} before,
// {"command_exit_code": N, "script": "<name>"} after, as gitlab-runner's
// attach-mode trap prints them). The stage ends when its leader exits,
// never on pipe EOF: nothing it starts in the background can hold it open.
// With digest (the hex SHA-256 of the stage's script) a request for a stage
// that already exists with the same digest attaches to it: the answer
// describes that stage (Replay set) and nothing runs again. A command that
// cannot be executed is a stage that ended with 127 or 126, as in a shell.
// Errors: lease.ErrNoJob; lease.ErrWrongJob when jobID names another job;
// ErrInvalid for a bad name, an empty argv, a bad digest, or a name
// already used (with another digest, or none); ErrCancelled; an internal
// error when the job's log cannot be opened.
func (s *Supervisor) StartStage(jobID, name string, argv []string, dir, digest string) (Stage, error) {
	// Exclusive: a stage never starts from an environment being wiped,
	// nor after the clean-up that should have killed it.
	return call(s, true, func(reply func(Stage, error)) {
		reply(s.startStage(jobID, name, argv, dir, digest))
	})
}

func (s *Supervisor) startStage(jobID, name string, argv []string, dir, digest string) (Stage, error) {
	j, err := s.current(jobID)
	if err != nil {
		return Stage{}, err
	}
	if !control.ValidStageName(name) {
		if len(name) > 64 {
			name = name[:64] + "..."
		}
		return Stage{}, errorf(ErrInvalid, "stage name %q: want [A-Za-z0-9][A-Za-z0-9._-]*, at most 128 bytes", name)
	}
	if len(argv) == 0 {
		return Stage{}, errorf(ErrInvalid, "stage: empty command")
	}
	if digest != "" && !isSHA256Hex(digest) {
		return Stage{}, errorf(ErrInvalid, "stage: sha256 must be 64 lower-case hex digits")
	}
	if j.phase == jobCancelled {
		return Stage{}, errorf(ErrCancelled, "job cancelled")
	}
	if old, dup := j.stages[name]; dup {
		if digest != "" && old.digest == digest {
			v := old.view()
			v.Replay = true
			return Stage{Job: j.id, Status: &v, Replay: true}, nil
		}
		return Stage{}, errorf(ErrInvalid, "stage %q already exists in this job", name)
	}
	if dir == "" {
		dir = "/"
	}
	st := &stage{name: name, started: time.Now(), running: true, done: make(chan struct{}), digest: digest, logEnd: -1}
	j.stages[name] = st
	j.order = append(j.order, name)

	log, err := os.OpenFile(j.logPath, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		s.finishStage(j, st, 70, "", false)
		return Stage{}, fmt.Errorf("job log: %w", err)
	}
	defer log.Close()
	writeMarker(log, nil, name)
	if fi, err := log.Stat(); err == nil {
		st.logStart = fi.Size()
	}
	// Read before the fork: an OOM kill of the stage after it counts.
	oomBefore := oomKills(s.cfg.CgroupRoot)
	pid, exitCh, err := s.spawnStage(j, argv, dir, log)
	if err != nil {
		fmt.Fprintf(log, "warmpod: stage %s: %v\n", name, err)
		s.finishStage(j, st, shellproxy.ExecErrorCode(err), "", false)
		v := st.view()
		return Stage{Job: j.id, Status: &v}, nil
	}
	st.pid = pid
	go func() {
		ex := <-exitCh
		sig := ""
		if ex.Status.Signaled() {
			sig = unix.SignalName(ex.Status.Signal())
		}
		oom := ex.Status.Signaled() && ex.Status.Signal() == unix.SIGKILL && oomKills(s.cfg.CgroupRoot) > oomBefore
		s.post(func() { s.stageExited(j, st, stageExit{ex.Code(), sig, oom}) })
	}()
	s.log.Info("stage started", "job", j.id, "stage", name, "pid", pid)
	v := st.view()
	return Stage{Job: j.id, Status: &v}, nil
}

// spawnStage forks the stage's leader in its own session, stdin
// /dev/null, stdout and stderr the job's log.
func (s *Supervisor) spawnStage(j *job, argv []string, dir string, log *os.File) (int, <-chan shellproxy.Exit, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, nil, err
	}
	defer devnull.Close()
	argv0, err := shellproxy.LookPath(argv[0], j.env)
	if err != nil {
		return 0, nil, err
	}
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   j.env,
		Files: []uintptr{devnull.Fd(), log.Fd(), log.Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true, Credential: s.cfg.JobUser},
	}
	return s.fx.Children.Start(argv0, argv, attr)
}

// stageExited records that the stage's leader ended (loop only): the
// stage ends now, or, while a cancel still stops its other processes,
// when the cancel has (see stage.cancelling).
func (s *Supervisor) stageExited(j *job, st *stage, ex stageExit) {
	if st.cancelling {
		st.held = &ex
		return
	}
	s.endStage(j, st, ex)
}

// endStage ends a stage whose leader exited (loop only) and runs what
// waited for its end.
func (s *Supervisor) endStage(j *job, st *stage, ex stageExit) {
	s.finishStage(j, st, ex.code, ex.sig, ex.oom)
	s.log.Info("stage ended", "job", j.id, "stage", st.name, "code", ex.code, "signal", ex.sig, "oom_killed", ex.oom)
	waiting := st.onEnd
	st.onEnd = nil
	for _, f := range waiting {
		f()
	}
}

// finishStage records a stage's outcome and appends its end marker to the
// job's log when the log is still there (loop only). The outcome is
// recorded before the marker is written: a stage stream that sees the
// stage still running after a read of the log knows that read held no
// marker (cmd/warmpod job stage relies on it to stream exactly the
// stage's bytes).
func (s *Supervisor) finishStage(j *job, st *stage, code int, sig string, oom bool) {
	log, err := os.OpenFile(j.logPath, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		log = nil // the job ended and its log is gone
	}
	end := int64(-1)
	if log != nil {
		if fi, err := log.Stat(); err == nil {
			end = fi.Size()
		}
	}
	if end < st.logStart {
		end = st.logStart // the log is gone: nothing more to read
	}
	st.running, st.code, st.signal, st.oom, st.ended, st.logEnd = false, code, sig, oom, time.Now(), end
	if log != nil {
		writeMarker(log, &code, st.name)
		_ = log.Close()
	}
	close(st.done)
}

// writeMarker appends one JSON line, {"script":NAME} at a stage's start
// and {"command_exit_code":CODE,"script":NAME} at its end (members in
// name order, as encoding/json wrote the map they once were), first
// ending a partial line so the marker always stands alone (a reader
// JSON-parses whole lines).
func writeMarker(f *os.File, code *int, script string) {
	var buf bytes.Buffer
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			buf.WriteByte('\n')
		}
	}
	o := jsonenc.NewObject(buf.Bytes())
	if code != nil {
		o.Int("command_exit_code", int64(*code))
	}
	o.String("script", script)
	_, _ = f.Write(append(o.End(), '\n'))
}
