package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/internal/sigwait"
	"github.com/warmpod/warmpod/probe"
	"github.com/warmpod/warmpod/shellproxy"
	"github.com/warmpod/warmpod/supervisor"
)

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

// pid1Flags is PID 1's flag set and where its flags go.
type pid1Flags struct {
	fs           *flag.FlagSet
	c            pid1Config
	cleanupPaths pathList
	stdio        string
}

// newPID1Flags defines PID 1's flags. run parses them (they may come
// before a subcommand's word too), then config reads them.
func newPID1Flags() *pid1Flags {
	pf := &pid1Flags{fs: flag.NewFlagSet("warmpod", flag.ContinueOnError)}
	fs, c, sc := pf.fs, &pf.c, &pf.c.sup
	fs.DurationVar(&sc.IdleTimeout, "idle-timeout", 10*time.Minute, "drain and exit after this long without activity (0 = never)")
	fs.DurationVar(&sc.Grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL for the job's processes and at shutdown (keep below terminationGracePeriodSeconds)")
	fs.DurationVar(&sc.ReadyMargin, "ready-margin", 10*time.Second, "readiness turns false this long before the idle deadline (capped at half the idle timeout)")
	fs.StringVar(&c.probeAddr, "probe-addr", ":9898", "address of the HTTP probe server (empty = off)")
	fs.StringVar(&c.socket, "control-socket", defaultSocket, "unix socket for job, probe and status clients")
	fs.StringVar(&pf.stdio, "stdio", "auto", "stdio mode: auto, pipe, inherit or pty")
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
	fs.Var(&pf.cleanupPaths, "cleanup-path", "directory pattern (absolute, globs allowed; repeat, or separate with ':') whose contents are removed whenever a job ends, for every job; a job spec's cleanup_paths adds to it")
	fs.StringVar(&c.idleStdin, "stdin-when-idle", "forward", "stdin while no job holds the lease: forward (to the idle shell) or ignore (drop, count)")
	return pf
}

// parseConfig parses PID 1's flags (then the WARMPOD_* environment, which
// fills what no flag set) into a validated configuration. Errors name the
// flag; flag.ErrHelp after -h.
func parseConfig(args []string, getenv func(string) string) (pid1Config, error) {
	pf := newPID1Flags()
	if err := parseArgs(pf.fs, args); err != nil {
		return pf.c, err
	}
	return pf.config(getenv)
}

// config is PID 1's configuration from the parsed flags, the environment
// twins of those the command line did not set, and getenv; its command is
// what follows the flags.
func (pf *pid1Flags) config(getenv func(string) string) (pid1Config, error) {
	if err := applyEnv(pf.fs); err != nil {
		return pf.c, err
	}
	c := pf.c
	sc := &c.sup
	var err error
	if c.stdio, err = shellproxy.ParseMode(pf.stdio); err != nil {
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
	switch {
	case sc.IdleTimeout < 0:
		return c, errors.New("--idle-timeout must not be negative")
	case sc.Grace < 0:
		return c, errors.New("--grace must not be negative")
	case sc.ReadyMargin < 0:
		return c, errors.New("--ready-margin must not be negative")
	}
	sc.Command = pf.fs.Args()
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
	sc.CleanupPaths = pf.cleanupPaths
	sc.RuntimeDir = filepath.Dir(c.socket)
	// The job logs live beside the socket (/run/warmpod/logs by default):
	// a PID 1 whose socket is moved, as in the CLI tests, keeps all of its
	// runtime state in that one directory.
	sc.LogsDir = filepath.Join(sc.RuntimeDir, "logs")
	sc.TestHooks = getenv("WARMPOD_TEST_HOOKS") == "1"
	sc.Version = version
	return c, nil
}

// pid1 runs PID 1 with the parsed flags pf.
func pid1(pf *pid1Flags) int {
	c, err := pf.config(os.Getenv)
	if err != nil {
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
		// `warmpod` run inside a pod that has one (`warmpod -- sh`
		// where a client command was meant): a second PID 1 would take
		// the pod's clients.
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
func newSupervisor(c pid1Config, log *initlog.Logger) (*supervisor.Supervisor, error) {
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
	// Jobs' TMPDIRs go where PID 1's own temporary files would: on the
	// container's disk, not the memory volume (supervisor.Config.TmpDir).
	c.sup.TmpDir = os.TempDir()
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
func serve(c pid1Config, sup *supervisor.Supervisor, srv *control.Server, probeLn net.Listener, sigs chan os.Signal, log *initlog.Logger) int {
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
