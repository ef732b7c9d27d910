package e2e

// PID-1 conformance suite, shared machinery.
//
// Every case runs the init under test as PID 1 of a fresh PID namespace:
//
//	unshare --pid --fork --mount-proc --kill-child <init> ... -- <command>
//
// and is table-driven over four inits: warmpod (asserted: must pass) and the
// anchors tini, dumb-init and catatonit (only recorded: they differ by
// design). Each outcome is logged as a line
//
//	CONFORMANCE <case> <init> <result>
//
// and collected into a markdown table (TestConformanceTable; written to
// $WARMPOD_CONFORMANCE_TABLE when set). Anchors that are not installed are
// skipped (apt-get install -y tini dumb-init catatonit).
//
// Safety: a signal is only ever sent (a) to the namespace's PID 1, found as
// the single child of our own unshare process and verified (NSpid ends in 1,
// PPid is unshare, exe is the init under test) through a pidfd, or (b) in the
// one case without a namespace (C11) to nothing at all but our own direct
// child's pid via cmd.Process. Nothing listens on anything but a unix socket
// in a per-run temp dir (--probe-addr "").

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	confTimeout = 30 * time.Second // bound of every single init run
	confGrace   = 2 * time.Second  // warmpod --grace in these tests
)

// confInits are the inits every case is run against; warmpod first.
var confInits = []string{"warmpod", "tini", "dumb-init", "catatonit"}

// confCases lists the cases in table order with a short title.
var confCases = []struct{ ID, Title string }{
	{"C1", "exit codes 0–255 pass through"},
	{"C2", "killed by signal N ⇒ 128+N"},
	{"C3", "cannot execute ⇒ 127/126 + one-line reason"},
	{"C4", "forwardable signals reach the process group; URG/CHLD never"},
	{"C5", "2,000-orphan burst ⇒ 0 zombies within 1 s"},
	{"C6", "exit noticed despite coalesced SIGCHLD"},
	{"C7", "TERM-ignoring child KILLed after --grace"},
	{"C8", "shutdown: TERM to every process before PID 1 exits"},
	{"C9", "child: default dispositions, empty mask"},
	{"C10", "PID 1 cwd /, no stray fds ≥ 3 in child"},
	{"C11", "not PID 1 ⇒ child subreaper"},
	{"C14", "no SIGHUP/SIGCONT leak at start (pty)"},
	{"C16", "a TERM handler's clean-up (started after the TERM) gets no TERM of its own"},
	{"C17", "a stopped process's TERM trap runs (SIGCONT after SIGTERM), shell's group"},
	{"C17-setsid", "same, a process outside the shell's group"},
	{"C15", "SIGPIPE on stdout never kills PID 1 (pipe)"},
	{"C15-pty", "same, warmpod --stdio pty"},
	{"C15-warm", "same, warm mode: status answers, TERM ⇒ 143"},
	{"P-a", "pty: controlling tty + job control"},
	{"P-b", "pty: outer tty raw while running, restored at exit"},
	{"P-c", "pty: initial window size + SIGWINCH resize"},
	{"P-d", "pty (C12): ^D is EOF for tac"},
	{"P-e", "pty (C13): ^C kills fg job; ^C to `sleep` ⇒ 130"},
	{"P-f", "pty: 200 KB tail before exit, no byte lost"},
}

// ---------------------------------------------------------------------------
// outcome recording

var confResults = struct {
	sync.Mutex
	m map[string]map[string]string // case → init → result
}{m: map[string]map[string]string{}}

// confStore records one outcome and rewrites the table file (if asked for),
// so the file is complete whatever order the tests ran in.
func confStore(caseID, init, result string) {
	confResults.Lock()
	defer confResults.Unlock()
	if confResults.m[caseID] == nil {
		confResults.m[caseID] = map[string]string{}
	}
	confResults.m[caseID][init] = result
	if path := os.Getenv("WARMPOD_CONFORMANCE_TABLE"); path != "" {
		_ = os.WriteFile(path, []byte(confTableLocked()), 0o644)
	}
}

func confTable() string {
	confResults.Lock()
	defer confResults.Unlock()
	return confTableLocked()
}

func confTableLocked() string {
	var b strings.Builder
	b.WriteString("| case | what | " + strings.Join(confInits, " | ") + " |\n")
	b.WriteString("|---|---|" + strings.Repeat("---|", len(confInits)) + "\n")
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }
	known := map[string]bool{}
	row := func(id, title string) {
		r := confResults.m[id]
		if r == nil {
			return
		}
		fmt.Fprintf(&b, "| %s | %s |", id, cell(title))
		for _, in := range confInits {
			v := r[in]
			if v == "" {
				v = "–"
			}
			fmt.Fprintf(&b, " %s |", cell(v))
		}
		b.WriteString("\n")
	}
	for _, c := range confCases {
		known[c.ID] = true
		row(c.ID, c.Title)
	}
	var extra []string
	for id := range confResults.m {
		if !known[id] {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	for _, id := range extra {
		row(id, "")
	}
	return b.String()
}

// confRecorder collects the observed outcome of one (case, init) pair.
type confRecorder struct {
	mu    sync.Mutex
	parts []string
}

// set adds an observation (joined with "; " in the table cell).
func (r *confRecorder) set(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.parts = append(r.parts, fmt.Sprintf(format, args...))
}

func (r *confRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.parts, "; ")
}

// forEachInit runs fn as one subtest per init. fn must assert only when
// init == "warmpod"; for anchors it only records.
func forEachInit(t *testing.T, caseID string, fn func(t *testing.T, init string, rec *confRecorder)) {
	for _, in := range confInits {
		t.Run(in, func(t *testing.T) {
			rec := &confRecorder{}
			t.Cleanup(func() { confFinish(t, caseID, in, rec) })
			if in == "warmpod" {
				requireWarmpod(t)
			} else if _, err := exec.LookPath(in); err != nil {
				rec.set("not installed")
				t.Skipf("%s not installed (apt-get install -y tini dumb-init catatonit)", in)
			}
			fn(t, in, rec)
		})
	}
}

// warmpodOnly runs fn for warmpod and records "n/a" for the anchors (the
// case exercises a warmpod-only mode).
func warmpodOnly(t *testing.T, caseID string, fn func(t *testing.T, rec *confRecorder)) {
	forEachInit(t, caseID, func(t *testing.T, in string, rec *confRecorder) {
		if in != "warmpod" {
			rec.set("n/a")
			return
		}
		fn(t, rec)
	})
}

func confFinish(t *testing.T, caseID, in string, rec *confRecorder) {
	res := rec.String()
	if res == "" {
		res = "no result"
	}
	switch {
	case t.Skipped():
		if !strings.Contains(res, "not installed") {
			res = "skipped: " + res
		}
	case in == "warmpod" && t.Failed():
		res = "**FAIL**: " + res
	case in == "warmpod":
		res = "PASS: " + res
	}
	t.Logf("CONFORMANCE %s %s %s", caseID, in, res)
	confStore(caseID, in, res)
}

// ---------------------------------------------------------------------------
// running an init as PID 1 of a fresh PID namespace

// confRun describes one run of an init.
type confRun struct {
	Init string   // "warmpod", "tini", "dumb-init", "catatonit"
	Cmd  []string // the command the init runs

	// WarmpodFlags replace the default warmpod flags (after the init's
	// path, before "--"); see warmpodDefaultFlags.
	WarmpodFlags []string
	// Wrapper is an argv prefix exec'd before unshare (C9/C10).
	Wrapper []string
	// NoNamespace runs the init as a plain child of the test (C11).
	NoNamespace bool
	// TTY, when set, is the stdin/stdout/stderr of the run, and the init
	// is made session leader with it as controlling terminal (`setsid -c`
	// inside the namespace), as a container runtime does for `-t`.
	TTY *os.File
	// Stdin/Stdout/Stderr when TTY is nil; nil stdin = /dev/null, nil
	// stdout/stderr = captured.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Env            []string
	Dir            string        // per-run directory (made when empty)
	Timeout        time.Duration // bound of the whole run (default confTimeout)
}

// warmpodDefaultFlags are the flags of a plain-init run.
func warmpodDefaultFlags(dir string) []string {
	return []string{"--exit-with-command", "--probe-addr", "", "--control-socket", filepath.Join(dir, "c.sock"),
		"--jobs-dir", filepath.Join(dir, "jobs"), "--grace", confGrace.String()}
}

// initProc is one running init.
type initProc struct {
	t        testing.TB
	init     string
	initPath string // resolved path of the init binary (for the exe check)
	dir      string
	nons     bool
	cmd      *exec.Cmd
	cancel   context.CancelFunc
	stdout   *syncBuffer
	stderr   *syncBuffer
	done     chan struct{}
	state    *os.ProcessState
	started  time.Time
	ended    time.Time
}

// confDir returns a fresh short directory (unix socket paths are limited
// to 108 bytes, test names are long), removed at cleanup.
func confDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "wpconf-")
	if err != nil {
		t.Fatalf("mkdtemp: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func initBinary(name string) (string, error) {
	if name == "warmpod" {
		if warmpodBin == "" {
			return "", fmt.Errorf("warmpod binary unavailable: %v", warmpodBuildErr)
		}
		return warmpodBin, nil
	}
	return exec.LookPath(name)
}

func initArgv(name, path, dir string, r confRun) []string {
	switch name {
	case "warmpod":
		flags := r.WarmpodFlags
		if flags == nil {
			flags = warmpodDefaultFlags(dir)
		}
		a := append([]string{path}, flags...)
		return append(append(a, "--"), r.Cmd...)
	case "dumb-init":
		return append([]string{path}, r.Cmd...)
	default: // tini, catatonit
		return append([]string{path, "--"}, r.Cmd...)
	}
}

// startInitE starts r; safe to call from any goroutine.
func startInitE(t testing.TB, r confRun) (*initProc, error) {
	path, err := initBinary(r.Init)
	if err != nil {
		return nil, err
	}
	dir := r.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "wpconf-"); err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	argv := initArgv(r.Init, path, dir, r)
	if !r.NoNamespace {
		pre := []string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}
		if r.TTY != nil {
			pre = append(pre, "setsid", "--ctty")
		}
		argv = append(pre, argv...)
	}
	argv = append(append([]string(nil), r.Wrapper...), argv...)

	if r.Timeout <= 0 {
		r.Timeout = confTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.Timeout)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir // so the init's cwd is not "/" to start with (C10)
	cmd.Env = append(os.Environ(), r.Env...)
	// A session of its own: nothing the init does with terminals can reach
	// the terminal `go test` may run on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = 3 * time.Second
	p := &initProc{t: t, init: r.Init, dir: dir, nons: r.NoNamespace, cmd: cmd, cancel: cancel,
		stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		p.initPath = real
	} else {
		p.initPath = path
	}
	if r.TTY != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = r.TTY, r.TTY, r.TTY
	} else {
		cmd.Stdin = r.Stdin
		cmd.Stdout, cmd.Stderr = io.Writer(p.stdout), io.Writer(p.stderr)
		if r.Stdout != nil {
			cmd.Stdout = r.Stdout
		}
		if r.Stderr != nil {
			cmd.Stderr = r.Stderr
		}
	}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %q: %w", argv, err)
	}
	go func() {
		_ = cmd.Wait()
		p.ended = time.Now()
		p.state = cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(p.cleanup)
	return p, nil
}

func startInit(t testing.TB, r confRun) *initProc {
	t.Helper()
	p, err := startInitE(t, r)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return p
}

// cleanup kills our own direct child (unshare, whose --kill-child takes the
// namespace with it) if it is still running.
func (p *initProc) cleanup() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill() // pid from a successful Start: our child
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.t.Logf("cleanup: %s (pid %d) did not exit after SIGKILL", p.init, p.cmd.Process.Pid)
		}
	}
	p.cancel()
}

// kill ends the run now (anchors that hang).
func (p *initProc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// wait waits up to d for the init to exit and returns its exit code (-1
// when it died of a signal) and whether it exited.
func (p *initProc) wait(d time.Duration) (int, bool) {
	select {
	case <-p.done:
		return p.state.ExitCode(), true
	case <-time.After(d):
		return 0, false
	}
}

func (p *initProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// desc describes how the run ended.
func (p *initProc) desc() string {
	if !p.exited() {
		return "running"
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return "exit " + strconv.Itoa(p.state.ExitCode())
}

func (p *initProc) logs() string {
	return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", indent(p.stdout.String()), indent(p.stderr.String()))
}

// pid1 returns the host PID of the namespace's PID 1: the single child of
// our unshare process, whose NSpid ends in 1, whose parent is unshare and
// whose executable is the init under test.
func (p *initProc) pid1() (int, error) {
	if p.nons {
		return 0, errors.New("no PID namespace in this run")
	}
	if p.exited() {
		return 0, errors.New("unshare has exited")
	}
	u := p.cmd.Process.Pid
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", u))
	kids := map[int]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil && n > 1 {
				kids[n] = true
			}
		}
	}
	if len(kids) != 1 {
		return 0, fmt.Errorf("unshare %d has %d children, want exactly 1", u, len(kids))
	}
	var pid int
	for k := range kids {
		pid = k
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	var nspidOK, ppidOK bool
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "NSpid:") {
			nspidOK = strings.HasSuffix(l, "\t1")
		}
		if strings.HasPrefix(l, "PPid:") {
			ppidOK = strings.TrimSpace(strings.TrimPrefix(l, "PPid:")) == strconv.Itoa(u)
		}
	}
	if !nspidOK || !ppidOK {
		return 0, fmt.Errorf("pid %d is not PID 1 of our namespace (NSpid ok %v, PPid ok %v)", pid, nspidOK, ppidOK)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return 0, err
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	if exe != p.initPath {
		return 0, fmt.Errorf("pid %d runs %s, not %s (yet)", pid, exe, p.initPath)
	}
	return pid, nil
}

// signalPID1 sends sig to the namespace's PID 1 (verified, through a pidfd).
func (p *initProc) signalPID1(sig unix.Signal) error {
	var pid int
	var err error
	deadline := time.Now().Add(3 * time.Second)
	for {
		if pid, err = p.pid1(); err == nil || time.Now().After(deadline) || p.exited() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	// Re-verify now that the pidfd pins the process.
	if again, err := p.pid1(); err != nil || again != pid {
		return fmt.Errorf("PID 1 changed under us (%d → %d, %v)", pid, again, err)
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

func mustSignalPID1(t testing.TB, p *initProc, sig unix.Signal) {
	t.Helper()
	if err := p.signalPID1(sig); err != nil {
		t.Fatalf("cannot signal PID 1 (%s): %v\n%s", unix.SignalName(sig), err, p.logs())
	}
}

// descendants returns pid → comm for every descendant of our unshare
// process (read-only /proc scan).
func (p *initProc) descendants() map[int]string {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	comm := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[pid], comm[pid] = pp, s[i+1:j]
	}
	root := p.cmd.Process.Pid
	out := map[int]string{}
	for pid := range parent {
		for q, n := parent[pid], 0; q > 1 && n < 64; q, n = parent[q], n+1 {
			if q == root {
				out[pid] = comm[pid]
				break
			}
		}
	}
	return out
}

// waitDescendant waits until a descendant named comm exists.
func (p *initProc) waitDescendant(comm string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, c := range p.descendants() {
			if c == comm {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// ---------------------------------------------------------------------------
// small helpers

// writeScript writes an sh script into dir and returns its path.
func writeScript(t testing.TB, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}

// waitFile waits until path exists.
func waitFile(path string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitUntil polls cond every 10 ms for up to d.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// linesContaining returns the lines of s that contain sub.
func linesContaining(s, sub string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}
