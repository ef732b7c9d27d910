package supervisor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/idle"
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

// stageView is a stage's JSON status.
type stageView struct {
	Stage     string     `json:"stage"`
	PID       int        `json:"pid,omitempty"`
	Running   bool       `json:"running"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	Signal    string     `json:"signal,omitempty"`
	OOMKilled bool       `json:"oom_killed"`
	Started   time.Time  `json:"started"`
	Ended     *time.Time `json:"ended,omitempty"`
	// LogStart and LogEnd are byte offsets in the job log: the stage's
	// output is [LogStart, LogEnd); LogEnd is absent while it runs.
	LogStart int64  `json:"log_start"`
	LogEnd   *int64 `json:"log_end,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	// Replay is true when this answer attached to a stage that an
	// earlier request with the same script digest had started.
	Replay bool `json:"replay,omitempty"`
}

func (st *stage) view() stageView {
	v := stageView{Stage: st.name, PID: st.pid, Running: st.running, Signal: st.signal, OOMKilled: st.oom, Started: st.started, LogStart: st.logStart, SHA256: st.digest}
	if !st.running {
		code, ended, end := st.code, st.ended, st.logEnd
		v.ExitCode, v.Ended, v.LogEnd = &code, &ended, &end
	}
	return v
}

// stageName: stage names end up in marker lines and status documents.
var stageName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// StartStage runs argv as stage name of the current job, detached: in its
// own session and process group, with the job's environment, stdin
// /dev/null, stdout and stderr appended to the job's log between
// GitLab-compatible marker lines ({"script": "<name>"} before,
// {"command_exit_code": N, "script": "<name>"} after, as gitlab-runner's
// attach-mode trap prints them). The stage ends when its leader exits,
// never on pipe EOF: nothing it starts in the background can hold it open.
// With digest (the hex SHA-256 of the stage's script) a request for a stage
// that already exists with the same digest attaches to it: the answer
// describes that stage (Replay set) and nothing runs again.
// Errors: 69 no job; 65 bad name, empty argv, or a name already used
// (with another digest, or none).
func (s *Supervisor) StartStage(jobID, name string, argv []string, dir, digest string) control.Response {
	// opMu orders a stage start against job end, cancel and expiry: a
	// stage never starts from an environment being wiped, nor after the
	// clean-up that should have killed it.
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	j := s.job
	s.mu.Unlock()
	if j == nil {
		return control.Response{Code: control.ExitUnavailable, Error: idle.ErrNoJob.Error()}
	}
	// Handle checked jobID before taking opMu; the job may have ended and
	// another started since: a stage of one job never runs in the next.
	if jobID != "" && jobID != j.spec.ID {
		return control.Response{Code: control.ExitTempFail, Error: idle.ErrWrongJob.Error()}
	}
	if !stageName.MatchString(name) {
		if len(name) > 64 {
			name = name[:64] + "..."
		}
		return control.Response{Code: control.ExitDataErr, Error: fmt.Sprintf("stage name %q: want [A-Za-z0-9][A-Za-z0-9._-]*, at most 128 bytes", name)}
	}
	if len(argv) == 0 {
		return control.Response{Code: control.ExitDataErr, Error: "stage: empty command"}
	}
	if digest != "" && !isSHA256Hex(digest) {
		return control.Response{Code: control.ExitDataErr, Error: "stage: sha256 must be 64 lower-case hex digits"}
	}
	if dir == "" {
		dir = "/"
	}
	st := &stage{name: name, started: time.Now(), running: true, done: make(chan struct{}), digest: digest, logEnd: -1}
	s.mu.Lock()
	if old, dup := j.stages[name]; dup || j.cancelled {
		if j.cancelled {
			s.mu.Unlock()
			return control.Response{Code: control.ExitUnavailable, Error: "job cancelled"}
		}
		if digest != "" && old.digest == digest {
			v := old.view()
			s.mu.Unlock()
			v.Replay = true
			b, _ := json.Marshal(v)
			return control.Response{OK: true, Job: j.spec.ID, Replay: true, Data: b}
		}
		s.mu.Unlock()
		return control.Response{Code: control.ExitDataErr, Error: fmt.Sprintf("stage %q already exists in this job", name)}
	}
	j.stages[name] = st
	j.order = append(j.order, name)
	s.mu.Unlock()

	log, err := os.OpenFile(j.logPath, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		s.finishStage(j, st, 70, "", false, nil)
		return control.Response{Code: control.ExitSoftware, Error: "job log: " + err.Error()}
	}
	defer log.Close()
	writeMarker(log, map[string]any{"script": name})
	if fi, err := log.Stat(); err == nil {
		s.mu.Lock()
		st.logStart = fi.Size()
		s.mu.Unlock()
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		s.finishStage(j, st, 70, "", false, log)
		return control.Response{Code: control.ExitSoftware, Error: err.Error()}
	}
	defer devnull.Close()
	argv0, err := shellproxy.LookPath(argv[0], j.env)
	var pid int
	var exitCh <-chan shellproxy.Exit
	oomBefore := oomKills(s.cfg.CgroupRoot)
	if err == nil {
		attr := &syscall.ProcAttr{
			Dir:   dir,
			Env:   j.env,
			Files: []uintptr{devnull.Fd(), log.Fd(), log.Fd()},
			Sys:   &syscall.SysProcAttr{Setsid: true, Credential: s.cfg.JobUser},
		}
		pid, exitCh, err = s.reaper.Start(argv0, argv, attr)
	}
	if err != nil {
		code := shellproxy.ExecErrorCode(err)
		fmt.Fprintf(log, "warmpod: stage %s: %v\n", name, err)
		s.finishStage(j, st, code, "", false, log)
		s.mu.Lock()
		v := st.view()
		s.mu.Unlock()
		b, _ := json.Marshal(v)
		return control.Response{OK: true, Job: j.spec.ID, Data: b}
	}
	s.mu.Lock()
	st.pid = pid
	v := st.view()
	s.mu.Unlock()
	go func() {
		ex := <-exitCh
		sig := ""
		if ex.Status.Signaled() {
			sig = unix.SignalName(ex.Status.Signal())
		}
		oom := ex.Status.Signaled() && ex.Status.Signal() == unix.SIGKILL && oomKills(s.cfg.CgroupRoot) > oomBefore
		f, err := os.OpenFile(j.logPath, os.O_RDWR|os.O_APPEND, 0)
		if err != nil {
			f = nil // the job ended and its log is gone
		}
		s.finishStage(j, st, ex.Code(), sig, oom, f)
		if f != nil {
			_ = f.Close()
		}
		s.log.Info("stage ended", "job", j.spec.ID, "stage", name, "code", ex.Code(), "signal", sig, "oom_killed", oom)
	}()
	s.log.Info("stage started", "job", j.spec.ID, "stage", name, "pid", pid)
	b, _ := json.Marshal(v)
	return control.Response{OK: true, Job: j.spec.ID, Data: b}
}

// finishStage records a stage's outcome and writes its end marker to log
// (nil: no marker). The outcome is recorded before the marker is written:
// a stage stream that sees the stage still running after a read of the log
// knows that read held no marker (cmd/warmpod job stage relies on it to
// stream exactly the stage's bytes).
func (s *Supervisor) finishStage(j *job, st *stage, code int, sig string, oom bool, log *os.File) {
	end := int64(-1)
	if log != nil {
		if fi, err := log.Stat(); err == nil {
			end = fi.Size()
		}
	}
	s.mu.Lock()
	if end < st.logStart {
		end = st.logStart // the log is gone: nothing more to read
	}
	st.running, st.code, st.signal, st.oom, st.ended, st.logEnd = false, code, sig, oom, time.Now(), end
	s.mu.Unlock()
	if log != nil {
		writeMarker(log, map[string]any{"command_exit_code": code, "script": st.name})
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

func (s *Supervisor) stageOf(j *job, name string) *stage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return j.stages[name]
}

// WaitStage waits up to timeout for stage name to end and returns its
// status: exit 0 when it has ended, 75 when it still runs at the timeout,
// 69 when there is no job or no such stage.
func (s *Supervisor) WaitStage(name string, timeout time.Duration) control.Response {
	s.mu.Lock()
	j := s.job
	s.mu.Unlock()
	if j == nil {
		return control.Response{Code: control.ExitUnavailable, Error: idle.ErrNoJob.Error()}
	}
	st := s.stageOf(j, name)
	if st == nil {
		return control.Response{Code: control.ExitUnavailable, Error: fmt.Sprintf("no stage %q", name)}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	code := 0
	select {
	case <-st.done:
	case <-t.C:
		code = control.ExitTempFail
	}
	resp := control.Response{OK: code == 0, Code: code, Job: j.spec.ID, Data: s.jobStatusJSON(j, name)}
	if code != 0 {
		resp.Error = fmt.Sprintf("stage %q still running after %s", name, timeout)
	}
	return resp
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
// returns its status. The grace is capped at PID 1's --grace. Errors: 69
// no job or no such stage; 75 jobID names another job, or the stage is
// still being started (retry).
func (s *Supervisor) CancelStage(jobID, name string, peer int, grace time.Duration) control.Response {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	j, lease, ok := s.current()
	if !ok || j == nil {
		return control.Response{Code: control.ExitUnavailable, Error: idle.ErrNoJob.Error()}
	}
	if jobID != "" && jobID != lease.JobID {
		return control.Response{Code: control.ExitTempFail, Error: idle.ErrWrongJob.Error()}
	}
	st := s.stageOf(j, name)
	if st == nil {
		return control.Response{Code: control.ExitUnavailable, Error: fmt.Sprintf("no stage %q", name)}
	}
	s.mu.Lock()
	leader, running := st.pid, st.running
	s.mu.Unlock()
	if running && leader <= 1 {
		// Registered but not forked yet: the caller asks again.
		return control.Response{Code: control.ExitTempFail, Error: fmt.Sprintf("stage %q is starting: retry", name)}
	}
	// A caller's grace never holds the job's other operations longer
	// than PID 1's own --grace.
	grace = min(grace, s.cfg.Grace)
	n := 0
	if running && leader > 1 {
		members := map[int]bool{}
		keep := map[int]bool{}
		if procs, err := s.procs.container(); err == nil {
			for _, pid := range idle.Descendants(procs, leader) {
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
			for pid := range s.procs.executorClients(procs) {
				keep[pid] = true
			}
		}
		members[leader] = true
		// The stage's processes are those found now and, at every round
		// of signals, any process of the stage's session (a trap or a
		// make -j child forked after the first look). A daemon that left
		// the session after the first look is not the stage's any more;
		// job end kills it.
		n = s.procs.terminate(func(p idle.Proc) bool { return !(members[p.PID] || p.SID == leader) || keep[p.PID] }, grace)
		s.reaper.Reap()
	}
	select {
	case <-st.done:
	case <-time.After(2 * time.Second):
	}
	s.log.Info("stage cancelled", "job", lease.JobID, "stage", name, "terminated", n)
	return control.Response{OK: true, Job: lease.JobID, State: s.State(), Data: s.jobStatusJSON(j, name)}
}

// waitStages waits up to d for every stage of j to be reaped.
func (s *Supervisor) waitStages(j *job, d time.Duration) {
	deadline := time.After(d)
	s.mu.Lock()
	var pending []*stage
	for _, st := range j.stages {
		pending = append(pending, st)
	}
	s.mu.Unlock()
	for _, st := range pending {
		select {
		case <-st.done:
		case <-deadline:
			return
		}
	}
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
