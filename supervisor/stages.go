package supervisor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/lease"
	"github.com/warmpod/warmpod/procscan"
	"github.com/warmpod/warmpod/shellproxy"
	"golang.org/x/sys/unix"
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
}

// stageView is a stage's JSON status: the contract's document.
type stageView = control.StageStatus

func (st *stage) view() stageView {
	v := stageView{Stage: st.name, PID: st.pid, Running: st.running, Signal: st.signal, OOMKilled: st.oom, Started: st.started, LogStart: st.logStart, SHA256: st.digest}
	if !st.running {
		code, ended, end := st.code, st.ended, st.logEnd
		v.ExitCode, v.Ended, v.LogEnd = &code, &ended, &end
	}
	return v
}

// validStageName reports whether name is 1–128 bytes of [A-Za-z0-9._-]
// starting with a letter or digit: stage names end up in marker lines,
// file names and status documents. Written out rather than as a regexp,
// which would add regexp's ~160 KB to PID 1 for one check.
func validStageName(name string) bool {
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Stage is what StartStage, WaitStage and CancelStage tell about a stage.
type Stage struct {
	Job    string
	Status json.RawMessage // the stage's status document (stageView)
	Replay bool            // StartStage attached to a stage already started
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
	if !validStageName(name) {
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
	if j.cancelled {
		return Stage{}, errorf(ErrCancelled, "job cancelled")
	}
	if old, dup := j.stages[name]; dup {
		if digest != "" && old.digest == digest {
			v := old.view()
			v.Replay = true
			b, _ := json.Marshal(v)
			return Stage{Job: j.id, Status: b, Replay: true}, nil
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
	writeMarker(log, map[string]any{"script": name})
	if fi, err := log.Stat(); err == nil {
		st.logStart = fi.Size()
	}
	// Read before the fork: an OOM kill of the stage after it counts.
	oomBefore := oomKills(s.cfg.CgroupRoot)
	pid, exitCh, err := s.spawnStage(j, argv, dir, log)
	if err != nil {
		fmt.Fprintf(log, "warmpod: stage %s: %v\n", name, err)
		s.finishStage(j, st, shellproxy.ExecErrorCode(err), "", false)
		b, _ := json.Marshal(st.view())
		return Stage{Job: j.id, Status: b}, nil
	}
	st.pid = pid
	go func() {
		ex := <-exitCh
		sig := ""
		if ex.Status.Signaled() {
			sig = unix.SignalName(ex.Status.Signal())
		}
		oom := ex.Status.Signaled() && ex.Status.Signal() == unix.SIGKILL && oomKills(s.cfg.CgroupRoot) > oomBefore
		s.post(func() {
			s.finishStage(j, st, ex.Code(), sig, oom)
			s.log.Info("stage ended", "job", j.id, "stage", name, "code", ex.Code(), "signal", sig, "oom_killed", oom)
		})
	}()
	s.log.Info("stage started", "job", j.id, "stage", name, "pid", pid)
	b, _ := json.Marshal(st.view())
	return Stage{Job: j.id, Status: b}, nil
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
		writeMarker(log, map[string]any{"command_exit_code": code, "script": st.name})
		_ = log.Close()
	}
	close(st.done)
}

// writeMarker appends one JSON line, first ending a partial line so the
// marker always stands alone (a reader JSON-parses whole lines).
func writeMarker(f *os.File, v map[string]any) {
	var buf bytes.Buffer
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			buf.WriteByte('\n')
		}
	}
	b, _ := json.Marshal(v)
	buf.Write(b)
	buf.WriteByte('\n')
	_, _ = f.Write(buf.Bytes())
}

// WaitStage waits up to timeout for stage name to end and returns its
// status. Errors: ErrStillRunning (with the status) when it still runs at
// the timeout; lease.ErrNoJob; ErrNoStage.
func (s *Supervisor) WaitStage(name string, timeout time.Duration) (Stage, error) {
	type found struct {
		j  *job
		st *stage
	}
	f, err := call(s, false, func(reply func(found, error)) {
		j := s.job
		switch {
		case j == nil || j.phase == phaseStarting:
			reply(found{}, lease.ErrNoJob)
		case j.stages[name] == nil:
			reply(found{}, errorf(ErrNoStage, "no stage %q", name))
		default:
			reply(found{j, j.stages[name]}, nil)
		}
	})
	if err != nil {
		return Stage{}, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-f.st.done:
	case <-t.C:
		err = errorf(ErrStillRunning, "stage %q still running after %s", name, timeout)
	case <-s.stopped:
		// The loop ended: no outcome will be recorded any more.
		return Stage{}, errorf(ErrExiting, "%v", ErrExiting)
	}
	b, cerr := call(s, false, func(reply func([]byte, error)) {
		b, _ := json.Marshal(f.st.view())
		reply(b, nil)
	})
	if cerr != nil {
		return Stage{}, cerr
	}
	return Stage{Job: f.j.id, Status: b}, err
}

func isSHA256Hex(v string) bool {
	if len(v) != 64 {
		return false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CancelStage ends one running stage of the current job: SIGTERM to every
// process of the stage's session and to every descendant of its leader
// (so a trap in the stage's script runs), SIGKILL after grace to whatever
// is left of them. Unlike [Supervisor.CancelJob] the job goes on: GitLab's
// graceful cancel still runs after_script and cleanup_file_variables in
// the same pod. A daemon that left the stage's session and was re-parented
// to PID 1 is not reachable from the stage any more; job end kills it.
// It waits (bounded by grace plus 2 s) for the stage to be reaped and
// returns its status. The grace is capped at PID 1's --grace, so a caller
// never holds the job's other operations longer than PID 1's own.
// Errors: lease.ErrNoJob; lease.ErrWrongJob when jobID names another job;
// ErrNoStage.
func (s *Supervisor) CancelStage(jobID, name string, peer int, grace time.Duration) (Stage, error) {
	return call(s, true, func(reply func(Stage, error)) {
		j, err := s.current(jobID)
		if err != nil {
			reply(Stage{}, err)
			return
		}
		st := j.stages[name]
		if st == nil {
			reply(Stage{}, errorf(ErrNoStage, "no stage %q", name))
			return
		}
		leader, running := st.pid, st.running
		grace = min(grace, s.cfg.Grace)
		l := s.termed.clone()
		n := 0
		s.work("stage cancel", func() {
			if running && leader > 1 {
				n = s.terminateStage(leader, peer, l, grace)
			}
			select {
			case <-st.done:
			case <-time.After(2 * time.Second):
			}
		}, func() {
			s.log.Info("stage cancelled", "job", j.id, "stage", name, "terminated", n)
			b, _ := json.Marshal(st.view())
			reply(Stage{Job: j.id, Status: b}, nil)
		})
	})
}

// terminateStage sends SIGTERM, then SIGKILL after grace, to the stage led
// by leader (a worker). Its processes are those found now (the leader's
// descendants and session) and, at every round of SIGKILL, any process of
// the stage's session (a trap or a make -j child forked after the first
// look: it gets no SIGTERM of its own, see termLedger). A daemon that
// left the session after the first look is not the stage's any more; job
// end stops it.
func (s *Supervisor) terminateStage(leader, peer int, l *termLedger, grace time.Duration) int {
	members := map[int]bool{leader: true}
	keep := map[int]bool{}
	if procs, err := s.fx.Procs.List(); err == nil {
		for _, pid := range procscan.Descendants(procs, leader) {
			members[pid] = true
		}
		for _, p := range procs {
			if p.SID == leader {
				members[p.PID] = true
			}
		}
		if peer > 1 {
			keep = ancestors(procs, peer)
		}
		for pid := range s.fx.Procs.Clients(procs) {
			keep[pid] = true
		}
	}
	n := s.terminate(func(p procscan.Proc) bool { return !(members[p.PID] || p.SID == leader) || keep[p.PID] }, l, grace)
	s.fx.Children.Reap()
	return n
}

// oomKills reads the container's OOM-kill counter under the cgroup file
// system mounted at root ("/sys/fs/cgroup" in a container): cgroup v2
// keeps it as "oom_kill N" in memory.events
// (Documentation/admin-guide/cgroup-v2.rst); cgroup v1 as "oom_kill N" in
// memory/memory.oom_control (Linux 4.13 and later,
// Documentation/admin-guide/cgroup-v1/memory.rst). 0 when neither is
// readable.
func oomKills(root string) int {
	for _, f := range []string{"memory.events", "memory/memory.oom_control"} {
		if b, err := os.ReadFile(root + "/" + f); err == nil {
			if n, ok := parseOOMKill(b); ok {
				return n
			}
		}
	}
	return 0
}

// parseOOMKill returns the value of the "oom_kill N" line of a cgroup
// flat-keyed file (memory.events or memory.oom_control).
func parseOOMKill(b []byte) (int, bool) {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("oom_kill ")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			return n, err == nil
		}
	}
	return 0, false
}
