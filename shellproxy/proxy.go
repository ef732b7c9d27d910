// Package shellproxy is warmpod's init: it runs the underlying shell as a
// child of PID 1, connects the container's stdio to it (pipe, inherit or pty
// mode), replaces it with a fresh shell on demand or when it exits, forwards
// signals to its process group, and owns wait4 through Reaper.
package shellproxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/internal/initlog"
)

// Mode selects how the container's stdio reaches the shell.
type Mode string

// The stdio modes: how PID 1's own stdio (the container's, which `kubectl
// attach` and the runtime hold) reaches the shell.
const (
	// ModeAuto is ModePTY when stdin is a terminal, ModePipe otherwise.
	ModeAuto Mode = "auto"
	// ModePipe gives the shell a pipe that warmpod fills from its own
	// stdin, so the time of the last input byte is known; stdout and stderr
	// are passed through untouched.
	ModePipe Mode = "pipe"
	// ModeInherit gives the shell fds 0-2 directly: no copy at all, and
	// activity is only visible in the process table.
	ModeInherit Mode = "inherit"
	// ModePTY runs the shell on a fresh pseudo-terminal (its controlling
	// terminal, so job control works) and copies both directions.
	ModePTY Mode = "pty"
)

// ParseMode validates a --stdio value. It returns an error naming the
// accepted values for anything else.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModePipe, ModeInherit, ModePTY:
		return m, nil
	}
	return "", fmt.Errorf("stdio mode %q: want auto, pipe, inherit or pty", s)
}

// Config configures a Proxy. Zero durations take the documented defaults.
type Config struct {
	// Command is the shell's argv; Command[0] is looked up in PATH when it
	// has no slash. Required.
	Command []string
	// Mode is the stdio mode; ModeAuto is resolved against Stdin.
	Mode Mode
	// Stdin, Stdout and Stderr are the container's stdio (normally
	// os.Stdin, os.Stdout, os.Stderr).
	Stdin, Stdout, Stderr *os.File
	// Respawn starts a fresh shell whenever the current one exits. Without
	// it (plain-init mode) the first exit is delivered on Exited and stdin
	// EOF is passed on to the shell.
	Respawn bool
	// SwapTimeout is how long a shell being replaced may take to finish the
	// input it was given after it sees end of input, before it is signalled.
	// Default 1s.
	SwapTimeout time.Duration
	// Credential, when set, runs every shell as that user (the job user).
	Credential *syscall.Credential
	// Reaper starts every child. Required.
	Reaper *Reaper
	// Log receives lifecycle messages; never the shell's output.
	Log *initlog.Logger
}

// Proxy owns the current underlying shell. All methods are safe for
// concurrent use.
type Proxy struct {
	cfg  Config
	mode Mode
	pump *pump

	// Lock order: swapMu, then mu, then (inside Reaper.Start) the
	// reaper's and the pump's own; mu is never held while taking swapMu
	// or across a wait.
	swapMu   sync.Mutex // serialises spawn/stop of shells; held across a stop's grace period
	mu       sync.Mutex // guards the fields below
	cur      *shell
	env      []string
	stopped  bool
	backoff  time.Duration
	startErr error // the last start's error; nil once one starts

	exited chan Exit // plain-init mode: the command's exit
	stopCh chan struct{}

	restoreTerm func()
}

type shell struct {
	pid     int
	started time.Time
	exitCh  <-chan Exit
	done    chan struct{} // closed once the exit is seen and output drained
	result  Exit
	retired atomic.Bool

	w      *os.File // pipe mode: our write end of its stdin
	r      *os.File // pipe mode: our copy of the read end, to recover unread bytes
	master *os.File // pty mode
	outEnd chan struct{}
}

// New validates cfg and resolves the stdio mode. In pty mode with a
// terminal on stdin it puts that terminal in raw mode (restored by Close).
// Errors: a missing Command or Reaper, an invalid Mode, or a failure to
// set raw mode.
func New(cfg Config) (*Proxy, error) {
	if len(cfg.Command) == 0 {
		return nil, errors.New("shellproxy: empty command")
	}
	if cfg.Reaper == nil {
		return nil, errors.New("shellproxy: nil reaper")
	}
	if cfg.Log == nil {
		cfg.Log = initlog.Discard()
	}
	if cfg.SwapTimeout <= 0 {
		cfg.SwapTimeout = time.Second
	}
	mode, err := ParseMode(string(cfg.Mode))
	if err != nil {
		return nil, err
	}
	stdinTTY := isTerminal(cfg.Stdin)
	if mode == ModeAuto {
		mode = ModePipe
		if stdinTTY {
			mode = ModePTY
		}
	}
	p := &Proxy{
		cfg:    cfg,
		mode:   mode,
		exited: make(chan Exit, 1),
		stopCh: make(chan struct{}),
	}
	if mode == ModePTY && stdinTTY {
		restore, err := makeRaw(cfg.Stdin)
		if err != nil {
			return nil, fmt.Errorf("shellproxy: raw mode on stdin: %w", err)
		}
		p.restoreTerm = restore
	}
	if mode != ModeInherit {
		p.pump = newPump(!cfg.Respawn)
		go p.pump.readFrom(cfg.Stdin)
		go p.pump.run()
	}
	return p, nil
}

// Mode returns the resolved stdio mode (never ModeAuto).
func (p *Proxy) Mode() Mode { return p.mode }

// Start runs the first shell with env ("KEY=VALUE" strings). Errors are
// those of the fork/exec (see ExecErrorCode for the exit code to report).
func (p *Proxy) Start(env []string) error {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	p.mu.Lock()
	p.env = env
	p.mu.Unlock()
	err := p.spawnLocked()
	if err != nil && p.cfg.Respawn {
		go p.retrySpawn()
	}
	return err
}

// retrySpawn keeps trying to start a shell (every 5 s) until one runs, a
// Replace starts one, or the proxy stops.
func (p *Proxy) retrySpawn() {
	for {
		select {
		case <-time.After(5 * time.Second):
		case <-p.stopCh:
			return
		}
		p.swapMu.Lock()
		p.mu.Lock()
		running := p.cur != nil
		p.mu.Unlock()
		var err error
		if !running {
			err = p.spawnLocked()
		}
		p.swapMu.Unlock()
		if err == nil {
			return
		}
		p.cfg.Log.Error("cannot start shell; retrying", "error", err)
	}
}

// Replace stops the current shell and starts a fresh one with env. The
// shell being replaced first gets end of input and up to SwapTimeout to run
// what it has already read; bytes it never read go to the new shell, so no
// stdin byte is lost. If it does not exit it gets SIGTERM, then SIGKILL
// after grace. Errors are those of starting the new shell.
func (p *Proxy) Replace(env []string, grace time.Duration) error {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return errors.New("shellproxy: stopped")
	}
	sh := p.cur
	p.env = env
	p.backoff = 0
	p.mu.Unlock()
	if sh != nil {
		p.stopShell(sh, grace)
	}
	err := p.spawnLocked()
	if err != nil && p.cfg.Respawn {
		go p.retrySpawn()
	}
	return err
}

// Stop stops the current shell (end of input, SIGTERM, SIGKILL after
// grace) and starts no other. It returns when the shell has been reaped.
func (p *Proxy) Stop(grace time.Duration) {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		close(p.stopCh)
	}
	p.mu.Unlock()
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	p.mu.Lock()
	sh := p.cur
	p.mu.Unlock()
	if sh != nil {
		p.stopShell(sh, grace)
	}
}

// Freeze makes sure the current shell is not replaced when it exits and
// holds back stdin bytes, until the next Replace. With a non-nil env, the
// next shell started gets env. Callers freeze before killing a job's
// processes, so no shell holding the job's environment is started again.
func (p *Proxy) Freeze(env []string) {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	p.mu.Lock()
	if env != nil {
		p.env = env
	}
	if p.cur != nil {
		p.cur.retired.Store(true)
	}
	p.mu.Unlock()
	if p.pump != nil {
		p.pump.detach()
	}
}

// Retire marks the current shell so that its exit neither starts another
// nor is reported on Exited, like Freeze but without waiting for a shell
// swap in progress: the signal thread calls it just before it forwards
// SIGTERM, and the shell may exit before the loop gets to Freeze.
func (p *Proxy) Retire() {
	p.mu.Lock()
	if p.cur != nil {
		p.cur.retired.Store(true)
	}
	p.mu.Unlock()
}

// Close restores the terminal (pty mode) and stops copying stdin. Call it
// after Stop, just before PID 1 exits.
func (p *Proxy) Close() {
	if p.pump != nil {
		p.pump.close()
	}
	if p.restoreTerm != nil {
		p.restoreTerm()
	}
}

// Exited delivers the command's exit in plain-init mode (Respawn false).
func (p *Proxy) Exited() <-chan Exit { return p.exited }

// ShellPID returns the current shell's PID, or 0 when there is none.
func (p *Proxy) ShellPID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return 0
	}
	return p.cur.pid
}

// Signal sends sig to the current shell's process group (the shell leads
// its own group, or session in pty mode). It does nothing when no shell is
// running and never signals a PID below 2.
func (p *Proxy) Signal(sig unix.Signal) error {
	pid := p.ShellPID()
	if pid <= 1 {
		return nil
	}
	err := unix.Kill(-pid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// Resize copies the window size of the container's terminal to the
// shell's pty (pty mode, on SIGWINCH). It is a no-op in other modes.
func (p *Proxy) Resize() {
	p.mu.Lock()
	sh := p.cur
	p.mu.Unlock()
	if sh == nil || sh.master == nil {
		return
	}
	if ws, err := getWinsize(p.cfg.Stdin); err == nil {
		_ = setWinsize(sh.master, ws)
	}
}

// LastInput returns when the last byte arrived on the container's stdin
// (zero when none has, and always zero in inherit mode).
func (p *Proxy) LastInput() time.Time {
	if p.pump == nil {
		return time.Time{}
	}
	ns := p.pump.lastInput.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// SetDiscardInput switches between dropping stdin bytes (true: nothing
// reaches the shell, the bytes are counted) and delivering them. It
// returns how many bytes were dropped since the last call.
func (p *Proxy) SetDiscardInput(discard bool) uint64 {
	if p.pump == nil {
		return 0
	}
	p.pump.discarding.Store(discard)
	if discard {
		p.pump.discard()
	}
	return p.pump.dropped.Swap(0)
}

// ExecErrorCode maps a fork/exec error to the exit status a shell would
// report: 127 when the command is not found, 126 when it exists but cannot
// be executed (POSIX sh "Command Search and Execution").
func ExecErrorCode(err error) int {
	var errno syscall.Errno
	if errors.Is(err, exec.ErrNotFound) || (errors.As(err, &errno) && errno == syscall.ENOENT) {
		return 127
	}
	return 126
}

// StartError returns why the last start of a shell failed (the command
// not found, not executable), nil once a shell has started: the status
// document's reason for a pod without a shell.
func (p *Proxy) StartError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startErr
}

// spawnLocked starts a shell (caller holds swapMu) and keeps its error
// for StartError.
func (p *Proxy) spawnLocked() error {
	err := p.spawn()
	p.mu.Lock()
	if !p.stopped {
		p.startErr = err
	}
	p.mu.Unlock()
	return err
}

func (p *Proxy) spawn() error {
	p.mu.Lock()
	env := p.env
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		return errors.New("shellproxy: stopped")
	}
	argv0, err := LookPath(p.cfg.Command[0], env)
	if err != nil {
		return err
	}
	sh := &shell{done: make(chan struct{}), started: time.Now()}
	attr := &syscall.ProcAttr{Dir: "/", Env: env, Sys: &syscall.SysProcAttr{Credential: p.cfg.Credential}}
	var childEnds []*os.File
	switch p.mode {
	case ModeInherit:
		attr.Files = []uintptr{p.cfg.Stdin.Fd(), p.cfg.Stdout.Fd(), p.cfg.Stderr.Fd()}
		attr.Sys.Setpgid = true
	case ModePipe:
		r, w, err := stdinPipe()
		if err != nil {
			return err
		}
		sh.r, sh.w = r, w
		attr.Files = []uintptr{r.Fd(), p.cfg.Stdout.Fd(), p.cfg.Stderr.Fd()}
		attr.Sys.Setpgid = true
	case ModePTY:
		master, slave, err := openPTY()
		if err != nil {
			return err
		}
		ws, err := getWinsize(p.cfg.Stdin)
		if err != nil {
			ws = &unix.Winsize{Row: 24, Col: 80}
		}
		_ = setWinsize(master, ws)
		sh.master = master
		childEnds = append(childEnds, slave)
		fd := slave.Fd() // Fd makes it blocking, as the shell expects
		attr.Files = []uintptr{fd, fd, fd}
		attr.Sys.Setsid = true
		attr.Sys.Setctty = true
		attr.Sys.Ctty = 0
	}
	pid, exitCh, err := p.cfg.Reaper.Start(argv0, p.cfg.Command, attr)
	for _, f := range childEnds {
		_ = f.Close()
	}
	if err != nil {
		closeAll(sh.r, sh.w, sh.master)
		return fmt.Errorf("start %s: %w", p.cfg.Command[0], err)
	}
	sh.pid, sh.exitCh = pid, exitCh
	switch p.mode {
	case ModePipe:
		p.pump.attach(sh.w, 0)
	case ModePTY:
		sh.outEnd = make(chan struct{})
		go p.copyOutput(sh)
		p.pump.attach(sh.master, veof(sh.master))
	}
	p.mu.Lock()
	p.cur = sh
	p.mu.Unlock()
	p.cfg.Log.Debug("shell started", "pid", pid, "mode", string(p.mode))
	go p.watch(sh)
	return nil
}

// copyOutput is the one reader of a pty master: it copies the shell's
// terminal output to stdout until EIO (every slave closed: end of output).
func (p *Proxy) copyOutput(sh *shell) {
	defer close(sh.outEnd)
	buf := make([]byte, 32<<10)
	stdoutOK := true
	for {
		n, err := sh.master.Read(buf)
		if n > 0 && stdoutOK {
			if _, werr := p.cfg.Stdout.Write(buf[:n]); werr != nil {
				// A closed stdout must not stall the shell: keep
				// draining the pty and drop the bytes.
				stdoutOK = false
				p.cfg.Log.Warn("stdout closed; dropping shell output", "error", werr)
			}
		}
		if err != nil {
			return
		}
	}
}

// watch waits for the shell's exit, bounds the drain of its output, and
// respawns or reports.
func (p *Proxy) watch(sh *shell) {
	sh.result = <-sh.exitCh
	if sh.outEnd != nil {
		select {
		case <-sh.outEnd:
		case <-time.After(2 * time.Second):
			// Something still holds the terminal open: stop reading.
			_ = sh.master.SetReadDeadline(time.Unix(1, 0))
			<-sh.outEnd
		}
	}
	close(sh.done)
	p.cfg.Log.Debug("shell exited", "pid", sh.pid, "code", sh.result.Code())
	if sh.retired.Load() {
		return
	}
	if !p.cfg.Respawn {
		p.swapMu.Lock()
		p.retire(sh)
		p.swapMu.Unlock()
		p.exited <- sh.result
		return
	}
	p.mu.Lock()
	lived := time.Since(sh.started)
	switch {
	case lived >= 10*time.Second:
		p.backoff = 0
	case p.backoff == 0:
		p.backoff = 100 * time.Millisecond
	default:
		p.backoff = min(2*p.backoff, 10*time.Second)
	}
	delay := p.backoff
	if lived >= time.Second {
		delay = 0
	}
	p.mu.Unlock()
	if delay > 0 {
		p.cfg.Log.Warn("shell exited quickly; delaying the next one", "code", sh.result.Code(), "delay", delay)
		select {
		case <-time.After(delay):
		case <-p.stopCh:
			return
		}
	}
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	p.mu.Lock()
	current := p.cur == sh && !p.stopped
	p.mu.Unlock()
	if !current {
		return
	}
	p.retire(sh)
	if err := p.spawnLocked(); err != nil {
		p.cfg.Log.Error("cannot start shell; retrying", "error", err)
		go p.retrySpawn()
	}
}

// stopShell ends sh (caller holds swapMu): end of input, then SIGTERM to its
// process group, then SIGKILL after grace; unread input goes back to the
// pump.
func (p *Proxy) stopShell(sh *shell, grace time.Duration) {
	sh.retired.Store(true)
	if p.pump != nil {
		p.pump.detach()
	}
	if sh.w != nil {
		_ = sh.w.Close() // end of input: the shell finishes what it read
	}
	if sh.master != nil {
		// A pty cannot be half-closed: type end-of-file instead. The first
		// ^D flushes a partial line, the second is EOF at a line start.
		_ = sh.master.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = sh.master.Write([]byte{veof(sh.master), veof(sh.master)})
		_ = sh.master.SetWriteDeadline(time.Time{})
	}
	if !p.waitDone(sh, p.cfg.SwapTimeout) {
		p.signalGroup(sh, unix.SIGTERM)
		if sh.master != nil {
			p.signalGroup(sh, unix.SIGHUP)
		}
		if !p.waitDone(sh, grace) {
			p.signalGroup(sh, unix.SIGKILL)
			<-sh.done
		}
	}
	p.retire(sh)
}

func (p *Proxy) waitDone(sh *shell, d time.Duration) bool {
	if sh.w == nil && sh.master == nil {
		// inherit mode: there is no way to send end of input
		select {
		case <-sh.done:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-sh.done:
		return true
	case <-t.C:
		return false
	}
}

func (p *Proxy) signalGroup(sh *shell, sig unix.Signal) {
	if sh.pid > 1 {
		_ = unix.Kill(-sh.pid, sig)
	}
}

// retire releases sh's descriptors and hands the input it never read to
// the next shell (caller holds swapMu; sh has exited).
func (p *Proxy) retire(sh *shell) {
	sh.retired.Store(true)
	if p.pump != nil {
		p.pump.detach()
	}
	if sh.w != nil {
		_ = sh.w.Close()
	}
	if sh.r != nil {
		// The write end is closed, so this read ends at EOF (only the
		// write end is ours alone; descendants may hold read ends).
		left, _ := io.ReadAll(sh.r)
		_ = sh.r.Close()
		if len(left) > 0 {
			p.pump.prepend(left)
			p.cfg.Log.Debug("unread input moved to the next shell", "bytes", len(left))
		}
	}
	if sh.master != nil {
		_ = sh.master.Close()
	}
	p.mu.Lock()
	if p.cur == sh {
		p.cur = nil
	}
	p.mu.Unlock()
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

// rawFd returns f's descriptor without switching it to blocking mode (as
// (*os.File).Fd does), so deadlines keep working on it.
func rawFd(f *os.File) uintptr {
	var fd uintptr
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Fd()
	}
	_ = rc.Control(func(d uintptr) { fd = d })
	return fd
}

// stdinPipe returns a pipe whose read end is blocking (it becomes the
// shell's stdin, and a shell reading a non-blocking stdin sees EAGAIN) and
// whose write end is non-blocking in Go's poller, so a write to a shell
// that stopped reading can be interrupted with a deadline.
func stdinPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	// A larger pipe (1 MiB, the default pipe-max-size) means fewer
	// wake-ups per byte; best effort.
	_, _ = unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, 1<<20)
	if err := unix.SetNonblock(fds[1], true); err != nil {
		_ = unix.Close(fds[0])
		_ = unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// openPTY opens a pty pair and returns a master that stays in Go's poller
// (non-blocking, so deadlines work) and the slave.
func openPTY() (master, slave *os.File, err error) {
	m, s, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	// pty.Open leaves the master in blocking mode; re-wrap a duplicate
	// in non-blocking mode so reads and writes can be interrupted.
	fd, err := unix.Dup(int(m.Fd()))
	_ = m.Close()
	if err != nil {
		_ = s.Close()
		return nil, nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		_ = s.Close()
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), s, nil
}

// LookPath finds name like a shell would, in the PATH of env (a default
// PATH when env has none); a name with a slash is used as is. The error
// wraps exec.ErrNotFound (exit status 127).
func LookPath(name string, env []string) (string, error) {
	if len(name) > 0 && (name[0] == '/' || name[0] == '.') {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			path = kv[5:]
		}
	}
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for _, dir := range splitList(path) {
		if dir == "" {
			dir = "."
		}
		full := dir + "/" + name
		if st, err := os.Stat(full); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return full, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

func splitList(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ':' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
