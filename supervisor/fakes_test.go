package supervisor

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/podapi"
	"github.com/warmpod/warmpod/procscan"
	"github.com/warmpod/warmpod/shellproxy"
)

// world is a fake container: a process table, the shell, PID 1's children,
// pinned writers and the pod, all behind one mutex (test code may lock;
// the supervisor may not). Its processes die when signalled, unless they
// ignore SIGTERM; then only SIGKILL after the grace period takes them.
type world struct {
	mu      sync.Mutex
	next    int
	procs   map[int]*fproc
	signals []sent // every signal sent, in order
	clients map[int]bool
	// onList, when set, runs (mu held) at every List of the process
	// table, numbered from 1: a test places a process's start between two
	// looks of PID 1 (after the forward, before the sweep).
	onList func(w *world, n int)
	lists  int

	// shell
	shellPID  int
	shellEnv  []string
	frozen    bool
	exited    chan shellproxy.Exit
	lastInput time.Time
	discard   bool
	stopSlow  time.Duration // Replace takes this long (a shell slow to go)
	startErr  error         // Start fails with this (a command not found)

	// pod
	terminated []podapi.TerminationMessage
	deleted    int
	// podGoes is what DeleteSelf answers: the pod is going, so PID 1
	// waits for the kubelet's stop (false: not in a cluster).
	podGoes bool
}

type fproc struct {
	p          procscan.Proc
	ignoreTERM bool
	// onTERM, when set, is the process's TERM handler (run with the
	// world's mutex held): the process survives the TERM and does what
	// the handler does (spawn its clean-up, say).
	onTERM func(w *world, pid int)
	// termPending: a TERM reached the process while it was stopped
	// (State 'T'); it is delivered at SIGCONT, as the kernel does.
	termPending bool
	exit        chan shellproxy.Exit // PID 1's child: gets its wait status
	pinned      chan struct{}        // a pinned writer: closed when it dies
}

type sent struct {
	pid int
	sig unix.Signal
}

func newWorld() *world {
	return &world{next: 100, procs: map[int]*fproc{}, clients: map[int]bool{}, exited: make(chan shellproxy.Exit)}
}

func (w *world) effects() Effects {
	return Effects{Shell: (*fakeShell)(w), Children: (*fakeChildren)(w), Procs: (*fakeProcs)(w), Writers: (*fakeWriters)(w), Pod: (*fakePod)(w)}
}

// spawn adds a process; pgid 0 makes it its own group leader.
func (w *world) spawn(ppid, pgid int, comm string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.spawnLocked(ppid, pgid, comm)
}

func (w *world) spawnLocked(ppid, pgid int, comm string) int {
	w.next++
	pid := w.next
	if pgid == 0 {
		pgid = pid
	}
	// Start is unique per process, as the kernel's start time is per
	// PID: a fake PID is never reused.
	w.procs[pid] = &fproc{p: procscan.Proc{PID: pid, PPID: ppid, PGID: pgid, SID: pgid, State: 'S', Comm: comm, Start: uint64(pid) * 3}}
	return pid
}

// trap gives pid a TERM handler (see fproc.onTERM).
func (w *world) trap(pid int, handler func(w *world, pid int)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.procs[pid].onTERM = handler
}

// stop puts pid in the stopped state (SIGSTOP, a job-control stop).
func (w *world) stop(pid int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.procs[pid].p.State = 'T'
}

func (w *world) ignoreTERM(pid int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.procs[pid].ignoreTERM = true
}

func (w *world) alive(pid int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.procs[pid] != nil
}

// signalsTo returns the signals pid got.
func (w *world) signalsTo(pid int) []unix.Signal {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []unix.Signal
	for _, s := range w.signals {
		if s.pid == pid {
			out = append(out, s.sig)
		}
	}
	return out
}

// kill delivers sig to pid (caller holds mu).
func (w *world) kill(pid int, sig unix.Signal) {
	p := w.procs[pid]
	if p == nil {
		return // kill(2) of a reaped PID: ESRCH
	}
	w.signals = append(w.signals, sent{pid, sig})
	switch sig {
	case unix.SIGKILL:
	case unix.SIGCONT:
		if p.p.State == 'T' {
			p.p.State = 'S'
			if p.termPending {
				p.termPending = false
				w.deliverTERM(pid, p)
			}
		}
		return
	case unix.SIGTERM:
		if p.p.State == 'T' {
			p.termPending = true
			return
		}
		w.deliverTERM(pid, p)
		return
	default:
		return // forwarded signals: recorded only
	}
	w.die(pid, p, sig)
}

// deliverTERM acts out a TERM that reached a running process (caller holds
// mu).
func (w *world) deliverTERM(pid int, p *fproc) {
	switch {
	case p.ignoreTERM:
	case p.onTERM != nil:
		p.onTERM(w, pid)
	default:
		w.die(pid, p, unix.SIGTERM)
	}
}

// die removes pid, killed by sig (caller holds mu).
func (w *world) die(pid int, p *fproc, sig unix.Signal) {
	delete(w.procs, pid)
	if p.exit != nil {
		p.exit <- shellproxy.Exit{PID: pid, Status: unix.WaitStatus(sig)}
	}
	if p.pinned != nil {
		close(p.pinned)
	}
}

// exit makes PID 1's child pid exit with code.
func (w *world) exit(pid, code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.procs[pid]
	delete(w.procs, pid)
	p.exit <- shellproxy.Exit{PID: pid, Status: unix.WaitStatus(code << 8)}
}

type fakeShell world

func (f *fakeShell) w() *world { return (*world)(f) }

func (f *fakeShell) Start(env []string) error {
	if err := f.StartError(); err != nil {
		return err
	}
	return f.Replace(env, 0)
}

func (f *fakeShell) StartError() error { f.w().mu.Lock(); defer f.w().mu.Unlock(); return f.startErr }

func (f *fakeShell) Replace(env []string, grace time.Duration) error {
	w := f.w()
	w.mu.Lock()
	slow := w.stopSlow
	w.mu.Unlock()
	time.Sleep(slow)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shellPID != 0 {
		w.kill(w.shellPID, unix.SIGKILL)
	}
	w.shellPID = w.spawnLocked(1, 0, "sh")
	w.shellEnv = slices.Clone(env)
	w.frozen = false
	return nil
}

func (f *fakeShell) Stop(time.Duration) {
	w := f.w()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shellPID != 0 {
		w.kill(w.shellPID, unix.SIGKILL)
	}
	w.shellPID = 0
}

func (f *fakeShell) Freeze([]string) {
	w := f.w()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frozen = true
}

func (f *fakeShell) Retire() { f.Freeze(nil) }

func (f *fakeShell) Close()                         {}
func (f *fakeShell) Exited() <-chan shellproxy.Exit { return f.w().exited }
func (f *fakeShell) Resize()                        {}
func (f *fakeShell) Mode() shellproxy.Mode          { return shellproxy.ModePipe }
func (f *fakeShell) SetDiscardInput(d bool) uint64 {
	f.w().mu.Lock()
	f.discard = d
	f.w().mu.Unlock()
	return 0
}
func (f *fakeShell) LastInput() time.Time {
	f.w().mu.Lock()
	defer f.w().mu.Unlock()
	return f.lastInput
}
func (f *fakeShell) ShellPID() int                { f.w().mu.Lock(); defer f.w().mu.Unlock(); return f.shellPID }
func (f *fakeShell) env() []string                { f.w().mu.Lock(); defer f.w().mu.Unlock(); return f.shellEnv }
func (f *fakeShell) Signal(sig unix.Signal) error { return f.w().signalGroup(sig) }
func (w *world) signalGroup(sig unix.Signal) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shellPID == 0 {
		return errors.New("no shell")
	}
	pg := w.shellPID
	for pid, p := range w.procs {
		if p.p.PGID == pg {
			w.kill(pid, sig)
		}
	}
	return nil
}

type fakeChildren world

func (f *fakeChildren) Start(argv0 string, argv []string, attr *syscall.ProcAttr) (int, <-chan shellproxy.Exit, error) {
	w := (*world)(f)
	w.mu.Lock()
	defer w.mu.Unlock()
	pid := w.spawnLocked(1, 0, argv[0])
	ch := make(chan shellproxy.Exit, 1)
	w.procs[pid].exit = ch
	return pid, ch, nil
}
func (f *fakeChildren) Reap() int           { return 0 }
func (f *fakeChildren) LastReap() time.Time { return time.Now() }
func (f *fakeChildren) Orphans() uint64     { return 0 }

type fakeProcs world

func (f *fakeProcs) List() ([]procscan.Proc, error) {
	w := (*world)(f)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lists++
	if w.onList != nil {
		w.onList(w, w.lists)
	}
	out := make([]procscan.Proc, 0, len(w.procs))
	for _, p := range w.procs {
		out = append(out, p.p)
	}
	slices.SortFunc(out, func(a, b procscan.Proc) int { return a.PID - b.PID })
	return out, nil
}

func (f *fakeProcs) Clients([]procscan.Proc) map[int]bool {
	w := (*world)(f)
	w.mu.Lock()
	defer w.mu.Unlock()
	return cloneSet(w.clients)
}

func cloneSet(m map[int]bool) map[int]bool {
	out := make(map[int]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (f *fakeProcs) Signal(pid int, sig unix.Signal) {
	w := (*world)(f)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kill(pid, sig)
}

func (f *fakeProcs) IO(int) (uint64, bool) { return 0, true }

type fakeWriters world

func (f *fakeWriters) Pin(pid int) (Pinned, error) {
	w := (*world)(f)
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.procs[pid]
	if p == nil {
		return nil, errors.New("no such process")
	}
	if p.pinned == nil {
		p.pinned = make(chan struct{})
	}
	return fakePinned{w, pid, p.pinned}, nil
}

type fakePinned struct {
	w    *world
	pid  int
	dead chan struct{}
}

func (p fakePinned) Wait() { <-p.dead }
func (p fakePinned) Kill() {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	if p.w.procs[p.pid] != nil {
		p.w.kill(p.pid, unix.SIGKILL)
	}
}
func (p fakePinned) Close() {}

type fakePod world

func (f *fakePod) Terminated(m podapi.TerminationMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminated = append(f.terminated, m)
}

func (f *fakePod) DeleteSelf(context.Context) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted++
	return f.podGoes
}

// pod is a supervisor running in a synctest bubble on a fake world.
type pod struct {
	t    *testing.T
	w    *world
	s    *Supervisor
	sigs chan os.Signal
	code chan int
	cfg  Config
}

// startPod runs a supervisor (in the bubble of t) with cfg, its
// directories under a temporary directory.
func startPod(t *testing.T, cfg Config) *pod { return startPodLog(t, cfg, nil) }

// startPodLog is startPod with PID 1's logger.
func startPodLog(t *testing.T, cfg Config, log *initlog.Logger) *pod {
	return startPodIn(t, cfg, newWorld(), log)
}

// startPodIn is startPodLog in the world w.
func startPodIn(t *testing.T, cfg Config, w *world, log *initlog.Logger) *pod {
	dir := t.TempDir()
	cfg.JobsDir = dir + "/jobs"
	cfg.LogsDir = dir + "/logs"
	cfg.CgroupRoot = dir
	cfg.BaseEnv = []string{"PATH=/usr/bin:/bin", "HOME=/root"}
	if cfg.TokenEnv == "" {
		cfg.TokenEnv = "CI_JOB_TOKEN"
	}
	p := &pod{t: t, w: w, sigs: make(chan os.Signal, 8), code: make(chan int, 1), cfg: cfg}
	p.s = New(cfg, p.w.effects(), log)
	// Every test that runs a pod fails on a broken invariant of the loop's
	// state: an illegal phase move, a second worker.
	p.s.onBroken = func(err error) { t.Errorf("supervisor invariant broken: %v", err) }
	go func() { p.code <- p.s.Run(context.Background(), p.sigs) }()
	return p
}

// handle sends req through Handle, the control adapter, as peer PID 2.
func (p *pod) handle(req control.Request) control.Response {
	return p.s.Handle(context.Background(), control.Peer{PID: 2}, &req)
}

// exitCode waits for Run to return.
func (p *pod) exitCode() int { return <-p.code }

// ShellPID is the current shell's PID.
func (w *world) ShellPID() int { return (*fakeShell)(w).ShellPID() }

func shellExit(code int) shellproxy.Exit { return shellproxy.Exit{Status: unix.WaitStatus(code << 8)} }
