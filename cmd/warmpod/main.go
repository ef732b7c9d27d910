// Command warmpod is the PID 1 of a warm CI pod: an init that proxies the
// container's stdio to a shell, reaps zombies, forwards signals, hands jobs
// over through a local control socket, serves kubelet probes, and drains
// after an idle deadline. See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/flagenv"
	"github.com/warmpod/warmpod/probe"
	"github.com/warmpod/warmpod/shellproxy"
	"github.com/warmpod/warmpod/supervisor"
	"github.com/warmpod/warmpod/tokens"
	"golang.org/x/sys/unix"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultSocket = "/run/warmpod/control.sock"

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

type pid1Flags struct {
	idleTimeout, grace, readyMargin time.Duration
	probeAddr, socket, stdio        string
	tokenEnv, jobsDir               string
	logLevel, logFormat, logFile    string
	exitWithCommand                 bool
	maxJobs                         int
	configHash, jobUser, idleStdin  string
	terminationLog, selfDelete      string
	cleanupPaths                    pathList
}

// pathList is a repeatable flag of path patterns; one value may also hold
// several separated by ':' (as PATH does), which is how its environment
// twin carries more than one.
type pathList []string

func (l *pathList) String() string { return strings.Join(*l, ":") }

// Set appends each ':'-separated pattern of v, refusing any that
// tokens.CheckCleanupPath refuses.
func (l *pathList) Set(v string) error {
	ps := strings.Split(v, ":")
	for _, p := range ps {
		if reason := tokens.CheckCleanupPath(p); reason != "" {
			return fmt.Errorf("%q: %s", p, reason)
		}
	}
	*l = append(*l, ps...)
	return nil
}

func pid1(args []string) int {
	fs := flag.NewFlagSet("warmpod", flag.ContinueOnError)
	var f pid1Flags
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 10*time.Minute, "drain and exit after this long without activity (0 = never)")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL for the job's processes and at shutdown (keep below terminationGracePeriodSeconds)")
	fs.DurationVar(&f.readyMargin, "ready-margin", 10*time.Second, "readiness turns false this long before the idle deadline (capped at half the idle timeout)")
	fs.StringVar(&f.probeAddr, "probe-addr", ":9898", "address of the HTTP probe server (empty = off)")
	fs.StringVar(&f.socket, "control-socket", defaultSocket, "unix socket for job, probe and status clients")
	fs.StringVar(&f.stdio, "stdio", "auto", "stdio mode: auto, pipe, inherit or pty")
	fs.StringVar(&f.tokenEnv, "token-env", "CI_JOB_TOKEN", "environment variable that carries the job token")
	fs.StringVar(&f.jobsDir, "jobs-dir", "/run/warmpod/jobs", "directory (tmpfs) for per-job file variables")
	fs.StringVar(&f.logLevel, "log-level", "info", "trace, debug, info, warn, error or off")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&f.logFile, "log-file", "", "append logs to this file instead of stderr")
	fs.BoolVar(&f.exitWithCommand, "exit-with-command", false, "plain init: no respawn, exit with the command's status")
	fs.IntVar(&f.maxJobs, "max-jobs", 1, "drain after this many jobs (1: single-use pre-warmed pod; 0 = unlimited, pinned to the first job's scope)")
	fs.StringVar(&f.configHash, "config-hash", "", "refuse jobs whose config_hash differs (set from a pod annotation through the downward API)")
	fs.StringVar(&f.jobUser, "job-user", "", "run shells and stages as UID[:GID] (PID 1 stays root)")
	fs.StringVar(&f.terminationLog, "termination-log", "/dev/termination-log", "file for the one-line JSON exit reason (the pod's terminationMessagePath; written only if it exists)")
	fs.StringVar(&f.selfDelete, "self-delete", "auto", "delete the pod after an idle or max-jobs exit: auto (when the downward API env and a token are present), always, never")
	fs.Var(&f.cleanupPaths, "cleanup-path", "directory pattern (absolute, globs allowed; repeat, or separate with ':') whose contents are removed whenever a job ends, for every job; a job spec's cleanup_paths adds to it")
	fs.StringVar(&f.idleStdin, "stdin-when-idle", "forward", "stdin while no job holds the lease: forward (to the idle shell) or ignore (drop, count)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: warmpod [flags] [-- command args...]       PID 1 (default command /bin/sh)\n       warmpod job start|run|logs|status|wait|cancel|put|env|end ...   (warmpod job -h)\n       warmpod probe live|ready | status | version | install DIR\n\nflags (each also as WARMPOD_<NAME>):\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return control.ExitUsage
	}
	if err := flagenv.Apply(fs, "WARMPOD_"); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return control.ExitUsage
	}
	mode, err := shellproxy.ParseMode(f.stdio)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return control.ExitUsage
	}
	if f.idleStdin != "forward" && f.idleStdin != "ignore" {
		fmt.Fprintf(os.Stderr, "warmpod: --stdin-when-idle %q: want forward or ignore\n", f.idleStdin)
		return control.ExitUsage
	}
	if f.selfDelete != "auto" && f.selfDelete != "always" && f.selfDelete != "never" {
		fmt.Fprintf(os.Stderr, "warmpod: --self-delete %q: want auto, always or never\n", f.selfDelete)
		return control.ExitUsage
	}
	jobUser, err := parseUser(f.jobUser)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: --job-user:", err)
		return control.ExitUsage
	}
	if f.maxJobs < 0 {
		fmt.Fprintln(os.Stderr, "warmpod: --max-jobs must not be negative")
		return control.ExitUsage
	}
	if f.idleTimeout < 0 || f.grace < 0 || f.readyMargin < 0 {
		fmt.Fprintln(os.Stderr, "warmpod: durations must not be negative")
		return control.ExitUsage
	}
	command := fs.Args()
	if len(command) == 0 {
		command = []string{"/bin/sh"}
	}
	log, closeLog, err := newLogger(f.logLevel, f.logFormat, f.logFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return control.ExitUsage
	}
	defer closeLog()
	harden(log)

	// Bind the probe port first: the kubelet may probe as soon as the
	// container starts, and a refused connection is a failed probe.
	var probeLn net.Listener
	if f.probeAddr != "" {
		if probeLn, err = net.Listen("tcp", f.probeAddr); err != nil {
			log.Error("probe listener", "addr", f.probeAddr, "error", err)
		}
	}
	margin := min(f.readyMargin, f.idleTimeout/2)
	sup, err := supervisor.New(supervisor.Config{
		Command: command, Stdio: mode, IdleTimeout: f.idleTimeout, Grace: f.grace,
		ReadyMargin: margin, TokenEnv: f.tokenEnv, JobsDir: f.jobsDir,
		ExitWithCommand: f.exitWithCommand, Version: version, Log: log,
		MaxJobs: f.maxJobs, ConfigHash: f.configHash, JobUser: jobUser,
		IgnoreIdleStdin: f.idleStdin == "ignore", CleanupPaths: f.cleanupPaths,
		TerminationLog: f.terminationLog, SelfDelete: f.selfDelete,
		TestHooks: os.Getenv("WARMPOD_TEST_HOOKS") == "1",
	})
	if err != nil {
		log.Error("cannot start", "error", err)
		return control.ExitSoftware
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	srv, err := control.Listen(f.socket, sup.Handle, log.Named("control"))
	if err != nil {
		log.Error("control socket unavailable: job hand-over disabled", "path", f.socket, "error", err)
	} else {
		go func() { _ = srv.Serve(ctx) }()
		defer srv.Close()
	}
	if probeLn != nil {
		live := []probe.Check{{Name: "ping", Fn: func() error { return nil }}, {Name: "supervisor", Fn: sup.Live}, {Name: "reaper", Fn: sup.Reaping}}
		if srv != nil {
			live = append(live, probe.Check{Name: "control-socket", Fn: srv.Healthy})
		}
		ready := []probe.Check{{Name: "state", Fn: sup.Ready}, {Name: "shell", Fn: sup.ShellUp}}
		h := probe.NewHandler(live, ready, sup.StatusJSON, log.Named("probe"))
		go func() {
			if err := probe.ServeListener(ctx, probeLn, h, log.Named("probe")); err != nil {
				log.Error("probe server stopped", "addr", f.probeAddr, "error", err)
			}
		}()
	}
	return sup.Run(ctx)
}

// harden applies the process-level protections of PID 1: no inherited fd
// reaches a child, cwd "/", no core
// dumps and not dumpable, so job code running as another user cannot read
// PID 1's memory, environment or fds through /proc (prctl(2) PR_SET_DUMPABLE).
func harden(log hclog.Logger) {
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

func newLogger(level, format, file string) (hclog.Logger, func(), error) {
	lvl := hclog.LevelFromString(level)
	if lvl == hclog.NoLevel {
		return nil, nil, fmt.Errorf("log level %q: want trace, debug, info, warn, error or off", level)
	}
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
	return hclog.New(&hclog.LoggerOptions{
		Name: "warmpod", Level: lvl, Output: out, JSONFormat: format == "json",
		DisableTime: false, Color: hclog.ColorOff,
	}), closeFn, nil
}

// parseUser parses "UID[:GID]" (numeric: the image may have no
// /etc/passwd); GID defaults to UID. Empty means none.
func parseUser(v string) (*syscall.Credential, error) {
	if v == "" {
		return nil, nil
	}
	us, gs, hasG := strings.Cut(v, ":")
	uid, err := strconv.ParseUint(us, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%q: want numeric UID[:GID]", v)
	}
	gid := uid
	if hasG {
		if gid, err = strconv.ParseUint(gs, 10, 32); err != nil {
			return nil, fmt.Errorf("%q: want numeric UID[:GID]", v)
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}
