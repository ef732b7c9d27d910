// Command warmpod is the PID 1 of a warm CI pod: an init that proxies the
// container's stdio to a shell, reaps zombies, forwards signals, hands jobs
// over through a local control socket, serves kubelet probes, and drains
// after an idle deadline. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/flagenv"

	// PID 1 runs with GOMAXPROCS=1 unless the environment sets it; see
	// the package for why and why it is set from an initialiser.
	_ "github.com/warmpod/warmpod/internal/oneproc"
	"github.com/warmpod/warmpod/internal/sigwait"
	"github.com/warmpod/warmpod/jobspec"
	"github.com/warmpod/warmpod/probe"
	"github.com/warmpod/warmpod/shellproxy"
	"github.com/warmpod/warmpod/supervisor"
	"golang.org/x/sys/unix"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultSocket = "/run/warmpod/control.sock"

// init keeps the main goroutine on the main thread for the whole run
// (runtime.main holds that lock during initialisation; locking here
// keeps it). PID 1 takes signals on that thread (package sigwait): the
// kernel offers a process-directed signal to the main thread first.
func init() { runtime.LockOSThread() }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "job":
			return jobCmd(args[1:])
		case "probe":
			return probeCmd(args[1:])
		case "status":
			return statusCmd(args[1:])
		case "debug":
			return debugCmd(args[1:])
		case "install":
			return installCmd(args[1:])
		case "version", "--version":
			fmt.Println("warmpod", version)
			return 0
		}
	}
	return pid1(args)
}

// pathList is a repeatable flag of path patterns; one value may also hold
// several separated by ':' (as PATH does), which is how its environment
// twin carries more than one.
type pathList []string

func (l *pathList) String() string { return strings.Join(*l, ":") }

// Set appends each ':'-separated pattern of v, refusing any that
// jobspec.CheckCleanupPath refuses.
func (l *pathList) Set(v string) error {
	ps := strings.Split(v, ":")
	for _, p := range ps {
		if reason := jobspec.CheckCleanupPath(p); reason != "" {
			return fmt.Errorf("%q: %s", p, reason)
		}
	}
	*l = append(*l, ps...)
	return nil
}

// pid1Config is PID 1's whole configuration, from flags and their
// WARMPOD_* environment twins, validated.
type pid1Config struct {
	sup                 supervisor.Config
	stdio               shellproxy.Mode
	probeAddr, socket   string
	probeTCP            *net.TCPAddr // probeAddr parsed; nil when the server is off
	logLevel, logFormat string
	logFile             string
	terminationLog      string
	selfDelete          string
	idleStdin, jobUser  string
}

// errHelp: -h was asked for; the usage has been printed.
var errHelp = errors.New("help")

// errPrinted: the flag package has printed the error and the usage.
var errPrinted = errors.New("bad flags")

// parseConfig parses PID 1's flags (then the WARMPOD_* environment, which
// fills what no flag set) into a validated configuration. Errors name the
// flag; errHelp after -h.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (pid1Config, error) {
	fs := flag.NewFlagSet("warmpod", flag.ContinueOnError)
	fs.SetOutput(out)
	var c pid1Config
	var cleanupPaths pathList
	var stdio string
	sc := &c.sup
	fs.DurationVar(&sc.IdleTimeout, "idle-timeout", 10*time.Minute, "drain and exit after this long without activity (0 = never)")
	fs.DurationVar(&sc.Grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL for the job's processes and at shutdown (keep below terminationGracePeriodSeconds)")
	fs.DurationVar(&sc.ReadyMargin, "ready-margin", 10*time.Second, "readiness turns false this long before the idle deadline (capped at half the idle timeout)")
	fs.StringVar(&c.probeAddr, "probe-addr", ":9898", "address of the HTTP probe server (empty = off)")
	fs.StringVar(&c.socket, "control-socket", defaultSocket, "unix socket for job, probe and status clients")
	fs.StringVar(&stdio, "stdio", "auto", "stdio mode: auto, pipe, inherit or pty")
	fs.StringVar(&sc.TokenEnv, "token-env", "CI_JOB_TOKEN", "environment variable that carries the job token")
	fs.StringVar(&sc.JobsDir, "jobs-dir", "/run/warmpod/jobs", "directory (tmpfs) for per-job file variables")
	fs.StringVar(&c.logLevel, "log-level", "info", "trace, debug, info, warn, error or off")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&c.logFile, "log-file", "", "append logs to this file instead of stderr")
	fs.BoolVar(&sc.ExitWithCommand, "exit-with-command", false, "plain init: no respawn, exit with the command's status")
	fs.IntVar(&sc.MaxJobs, "max-jobs", 1, "drain after this many jobs (1: single-use pre-warmed pod; 0 = unlimited, pinned to the first job's scope)")
	fs.StringVar(&sc.ConfigHash, "config-hash", "", "refuse jobs whose config_hash differs (set from a pod annotation through the downward API)")
	fs.StringVar(&c.jobUser, "job-user", "", "run shells and stages as UID[:GID] (PID 1 stays root)")
	fs.StringVar(&c.terminationLog, "termination-log", "/dev/termination-log", "file for the one-line JSON exit reason (the pod's terminationMessagePath; written only if it exists)")
	fs.StringVar(&c.selfDelete, "self-delete", "auto", "delete the pod after an idle or max-jobs exit: auto (when the downward API env and a token are present), always, never")
	fs.Var(&cleanupPaths, "cleanup-path", "directory pattern (absolute, globs allowed; repeat, or separate with ':') whose contents are removed whenever a job ends, for every job; a job spec's cleanup_paths adds to it")
	fs.StringVar(&c.idleStdin, "stdin-when-idle", "forward", "stdin while no job holds the lease: forward (to the idle shell) or ignore (drop, count)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: warmpod [flags] [-- command args...]       PID 1 (default command /bin/sh)\n       warmpod job start|run|logs|status|wait|cancel|put|env|end ...   (warmpod job -h)\n       warmpod probe live|ready | status | version | install DIR\n\nflags (each also as WARMPOD_<NAME>):\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return c, errHelp
		}
		return c, errPrinted
	}
	if err := flagenv.Apply(fs, "WARMPOD_"); err != nil {
		return c, err
	}
	var err error
	if c.stdio, err = shellproxy.ParseMode(stdio); err != nil {
		return c, err
	}
	if c.idleStdin != "forward" && c.idleStdin != "ignore" {
		return c, fmt.Errorf("--stdin-when-idle %q: want forward or ignore", c.idleStdin)
	}
	if c.selfDelete != "auto" && c.selfDelete != "always" && c.selfDelete != "never" {
		return c, fmt.Errorf("--self-delete %q: want auto, always or never", c.selfDelete)
	}
	if c.probeAddr != "" {
		if c.probeTCP, err = parseListenAddr(c.probeAddr); err != nil {
			return c, fmt.Errorf("--probe-addr: %w", err)
		}
	}
	if sc.JobUser, err = control.ParseUser(c.jobUser); err != nil {
		return c, fmt.Errorf("--job-user: %w", err)
	}
	if sc.MaxJobs < 0 {
		return c, errors.New("--max-jobs must not be negative")
	}
	if sc.IdleTimeout < 0 || sc.Grace < 0 || sc.ReadyMargin < 0 {
		return c, errors.New("durations must not be negative")
	}
	sc.Command = fs.Args()
	if len(sc.Command) == 0 {
		sc.Command = []string{"/bin/sh"}
	}
	if sc.ExitWithCommand {
		// A plain init (a tini replacement) has no jobs and watches no
		// activity: an idle deadline would kill a quiet command.
		sc.IdleTimeout = 0
	}
	sc.ReadyMargin = min(sc.ReadyMargin, sc.IdleTimeout/2)
	sc.IgnoreIdleStdin = c.idleStdin == "ignore"
	sc.CleanupPaths = cleanupPaths
	sc.RuntimeDir = filepath.Dir(c.socket)
	sc.TestHooks = getenv("WARMPOD_TEST_HOOKS") == "1"
	sc.Version = version
	return c, nil
}

func pid1(args []string) int {
	c, err := parseConfig(args, os.Getenv, os.Stderr)
	switch {
	case err == errHelp:
		return 0
	case err == errPrinted:
		return control.ExitUsage
	case err != nil:
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return control.ExitUsage
	}
	log, closeLog, err := newLogger(c.logLevel, c.logFormat, c.logFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return control.ExitUsage
	}
	defer closeLog()
	// Catch signals first: until os/signal is subscribed, a SIGTERM (a
	// pod deleted as it starts) would make the Go runtime exit 2 rather
	// than drain (see serve).
	sigs := initProcess(log)
	harden(log)
	srv, err := control.Listen(c.socket, nil, log.With("component", "control"))
	switch {
	case errors.Is(err, control.ErrInUse):
		// `warmpod` run inside a pod that has one (a mistyped
		// subcommand): a second PID 1 would take the pod's clients.
		fmt.Fprintf(os.Stderr, "warmpod: %v: not starting a second one (a client command is: warmpod job|probe|status|debug|install|version)\n", err)
		return control.ExitUnavailable
	case err != nil:
		log.Error("control socket unavailable: job hand-over disabled", "path", c.socket, "error", err)
		srv = nil
	}
	becomeSubreaper(log)
	// Bind the probe port next: the kubelet may probe as soon as the
	// container starts, and a refused connection is a failed probe.
	var probeLn net.Listener // nil (not a nil *TCPListener) when off or failed
	if c.probeTCP != nil {
		if ln, err := net.ListenTCP("tcp", c.probeTCP); err != nil {
			log.Error("probe listener", "addr", c.probeAddr, "error", err)
		} else {
			probeLn = ln
			log.Debug("probe server listening", "addr", ln.Addr().String())
		}
	}
	sup, err := newSupervisor(c, log)
	if err != nil {
		log.Error("cannot start", "error", err)
		if srv != nil {
			_ = srv.Close()
		}
		return control.ExitSoftware
	}
	return serve(c, sup, srv, probeLn, sigs, log)
}

// newSupervisor builds the supervisor with its real effects: the shell
// proxy and reaper, /proc, pidfds and the pod's API.
func newSupervisor(c pid1Config, log *slog.Logger) (*supervisor.Supervisor, error) {
	reaper := shellproxy.NewReaper()
	proxy, err := shellproxy.New(shellproxy.Config{
		Command: c.sup.Command,
		Mode:    c.stdio,
		Stdin:   os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Respawn:    !c.sup.ExitWithCommand,
		Credential: c.sup.JobUser,
		Reaper:     reaper,
		Log:        log.With("component", "shell"),
	})
	if err != nil {
		return nil, err
	}
	c.sup.BaseEnv = os.Environ()
	fx := supervisor.Effects{
		Shell:    proxy,
		Children: reaper,
		Procs:    supervisor.NewProcTable("/proc"),
		Writers:  supervisor.Pidfds{},
		Pod: supervisor.KubePod{
			TerminationLog: c.terminationLog, SelfDelete: c.selfDelete,
			Getenv: os.Getenv, Log: log,
		},
	}
	return supervisor.New(c.sup, fx, log), nil
}

// serve runs the control socket and the probe server beside the
// supervisor until it returns PID 1's exit status.
func serve(c pid1Config, sup *supervisor.Supervisor, srv *control.Server, probeLn net.Listener, sigs chan os.Signal, log *slog.Logger) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if srv != nil {
		srv.SetHandler(sup.Handle)
		go func() { _ = srv.Serve(ctx) }()
		defer srv.Close()
	}
	if probeLn != nil {
		live := []probe.Check{{Name: "ping", Fn: func() error { return nil }}, {Name: "supervisor", Fn: sup.Live}, {Name: "reaper", Fn: sup.Reaping}}
		if srv != nil {
			live = append(live, probe.Check{Name: "control-socket", Fn: srv.Healthy})
		}
		ready := []probe.Check{{Name: "state", Fn: sup.Ready}, {Name: "shell", Fn: sup.ShellUp}}
		h := probe.NewHandler(live, ready, sup.StatusJSON, log.With("component", "probe"))
		go func() {
			if err := probe.ServeListener(ctx, probeLn, h, log.With("component", "probe")); err != nil {
				log.Error("probe server stopped", "addr", c.probeAddr, "error", err)
			}
		}()
	}
	// sigs is never stopped (no signal.Stop), so os/signal stays
	// subscribed until the process exits. Stopped, a SIGTERM would make
	// the Go runtime raise it again with the default action, which the
	// kernel does not deliver to a PID 1 without a handler
	// (pid_namespaces(7)), and the runtime then exits 2. The kubelet sends
	// one as soon as PID 1 has deleted its own pod, so a clean idle exit
	// read as status 2 (TestSIGTERMAfterServeReturns). Subscribed, a late
	// signal lands in the channel, unread.
	//
	// The main goroutine (locked to the main thread by init) takes the
	// forwarded signals with rt_sigtimedwait and forwards each before
	// anything else runs; while it is busy, os/signal's channel is the
	// fallback and the loop forwards. The loop runs on its own goroutine.
	waiter, err := sigwait.New(supervisor.ForwardedSignals())
	if err != nil {
		log.Warn("signals go through os/signal only", "error", err)
	}
	code := make(chan int, 1)
	go func() {
		code <- sup.Run(ctx, sigs)
		if waiter != nil {
			waiter.Stop(time.Second)
		}
	}()
	if waiter != nil {
		waiter.Run(sup.Forward)
	}
	return <-code
}

// initProcess readies this process's signals as an init's: inherited
// ignored signals reset for its children, and every signal delivered to
// the returned channel.
func initProcess(log *slog.Logger) chan os.Signal {
	if caught := shellproxy.CatchIgnoredSignals(); len(caught) > 0 {
		log.Debug("inherited ignored signals reset for children", "signals", fmt.Sprint(caught))
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, caught()...)
	return sigs
}

// becomeSubreaper makes this process a child subreaper when it is not
// PID 1, so that orphans are still reaped. It runs once this process is
// sure to be the pod's init (after the control socket check), before the
// first child.
func becomeSubreaper(log *slog.Logger) {
	if os.Getpid() == 1 {
		return
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		log.Warn("not PID 1 and cannot become a child subreaper: orphans will not be reaped", "error", err)
	} else {
		log.Info("not PID 1: running as child subreaper", "pid", os.Getpid())
	}
}

// caught lists the signals PID 1 subscribes to through os/signal: all of
// 1–64 but SIGKILL and SIGSTOP (which cannot be caught) and SIGURG, the
// Go runtime's own preemption signal, which arrives often and means
// nothing to PID 1: relayed, it would only crowd the 64-slot channel,
// where a dropped SIGCHLD would leave a zombie to the 1 s reap tick.
// Signals 32–34 are in the list but Notify cannot take them: the runtime
// leaves them to the C library (README, "Guarantees and limits").
func caught() []os.Signal {
	var out []os.Signal
	for s := unix.Signal(1); s <= 64; s++ {
		if s != unix.SIGKILL && s != unix.SIGSTOP && s != unix.SIGURG {
			out = append(out, s)
		}
	}
	return out
}

// harden applies the process-level protections of PID 1: no inherited fd
// reaches a child, cwd "/", no core
// dumps and not dumpable, so job code running as another user cannot read
// PID 1's memory, environment or fds through /proc (prctl(2) PR_SET_DUMPABLE).
func harden(log *slog.Logger) {
	// Descriptors inherited from whoever started PID 1 (a runtime, a test
	// harness) must not leak into the shell: mark every fd >= 3 close-on-exec.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
			for _, e := range fds {
				if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
					unix.CloseOnExec(fd)
				}
			}
		}
	}
	if err := os.Chdir("/"); err != nil {
		log.Warn("chdir /", "error", err)
	}
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Warn("cannot make PID 1 non-dumpable", "error", err)
	}
}

// levelTrace is below slog's Debug as hclog's Trace was: the flag keeps
// accepting "trace", and nothing in PID 1 logs at it today.
const levelTrace = slog.LevelDebug - 4

// levelOff is above every level PID 1 logs at.
const levelOff = slog.LevelError + 100

// newLogger builds PID 1's logger: log/slog's text or JSON handler on
// stderr, or on file (appended, 0600, close-on-exec so no child inherits
// it). The returned func closes the file. Errors: an unknown level or
// format, or the file's open error.
func newLogger(level, format, file string) (*slog.Logger, func(), error) {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "trace":
		lvl = levelTrace
	case "debug":
		lvl = slog.LevelDebug
	case "info":
		lvl = slog.LevelInfo
	case "warn":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	case "off":
		lvl = levelOff
	default:
		return nil, nil, fmt.Errorf("log level %q: want trace, debug, info, warn, error or off", level)
	}
	format = strings.ToLower(format)
	if format != "text" && format != "json" {
		return nil, nil, fmt.Errorf("log format %q: want text or json", format)
	}
	var out io.Writer = os.Stderr
	closeFn := func() {}
	if file != "" {
		fh, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, nil, err
		}
		out, closeFn = fh, func() { _ = fh.Close() }
	}
	if lvl == levelOff {
		return slog.New(slog.DiscardHandler), closeFn, nil
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		// slog's JSON handler writes a time.Duration as integer
		// nanoseconds; the text handler, the flags and the job spec all
		// write "1m30s", so the JSON log does too.
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(out, opts)), closeFn, nil
	}
	return slog.New(slog.NewTextHandler(out, opts)), closeFn, nil
}

// parseListenAddr parses "[IP]:PORT" (":9898" listens on every address;
// an IPv6 address goes in brackets). A host name is refused: resolving it
// would link net's resolver into PID 1 (internal/sockdial says why), and
// a probe server binds to an address anyway.
func parseListenAddr(s string) (*net.TCPAddr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%q: the port must be a number from 0 to 65535", s)
	}
	a := &net.TCPAddr{Port: int(p)}
	if host != "" {
		ip, err := netip.ParseAddr(host)
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("%q: the host must be empty or an IP address", s)
		}
		a.IP = ip.AsSlice()
	}
	return a, nil
}
