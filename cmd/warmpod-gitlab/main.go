// Command warmpod-gitlab is GitLab Runner's Custom executor driver for
// warm pods: config, prepare, run SCRIPT STAGE and cleanup, as the runner
// calls them (config_exec, prepare_exec, run_exec, cleanup_exec with
// config_args = ["config"] and so on). It runs beside gitlab-runner, never
// in a pod; the logic is package executor/gitlab, the Kubernetes side
// package executor/pool. See docs/guides/gitlab-runner.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/executor/gitlab"
	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/internal/flagenv"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: warmpod-gitlab [flags] config | prepare | run SCRIPT STAGE | cleanup
       warmpod-gitlab [flags] pool-hash      (prints each pool's warmpod.dev/config label value)
       warmpod-gitlab install DIR     (copies itself to DIR/warmpod-gitlab: an init container's command)
       warmpod-gitlab version
flags (each also as WARMPOD_GITLAB_<NAME>):`

func main() { os.Exit(run(os.Args[1:])) }

// run is the whole command but for the process exit: flags, then the
// driver's Config, then the command; it returns the exit code.
func run(args []string) int {
	began := time.Now()
	env := gitlab.EnvFrom(os.Environ())
	codes := gitlab.ExitCodesFromEnv(env)
	o, code, done := parseFlags(args)
	if done {
		return code
	}
	o.began = began
	if o.cmd == "version" {
		fmt.Println(buildName, version)
		return 0
	}
	if code, handed := handOver(o, codes); handed {
		return code
	}
	if o.cmd == "install" && len(o.rest) == 1 {
		// An init container of the runner pod copies the driver out of the
		// executor image (which has no cp) into a volume the runner mounts.
		files, err := install(o.rest[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, "warmpod-gitlab: install:", err)
			return 1
		}
		fmt.Println("installed", strings.Join(files, " "))
		return 0
	}
	d := &gitlab.Driver{Cfg: o.cfg, Env: env, Stdout: os.Stdout, Stderr: os.Stderr, Now: time.Now}
	return o.dispatch(d, codes)
}

// options is the command line once parsed: the driver's Config (Pools
// still unset) and what only the wiring here uses.
type options struct {
	cfg        gitlab.Config
	bounds     bounds
	pools      string // --pools, the manifest file; "" = read the pools from the cluster
	offers     string // --offers, the pool controller's URL; "" = claims list the pool
	kubeconfig string
	namespace  string
	useMux     bool
	cmd        string   // the first argument after the flags
	rest       []string // the command's arguments
	began      time.Time
}

// bounds are the --*-overwrite-max-allowed flags (gitlab.Bounds, which
// the full build checks and uses; the per-stage build only parses them,
// since the runner passes the same flags to every call).
type bounds struct {
	CPURequest, CPULimit                           string
	MemoryRequest, MemoryLimit                     string
	EphemeralStorageRequest, EphemeralStorageLimit string
}

// parseFlags reads args and the flags' WARMPOD_GITLAB_ variables. done
// says the command line is handled already (--help, a bad flag or
// variable, no command), with code the exit code.
func parseFlags(args []string) (o options, code int, done bool) {
	fs := flag.NewFlagSet("warmpod-gitlab", flag.ContinueOnError)
	fs.StringVar(&o.pools, "pools", "", "pool manifest: a YAML file with the pools' Deployments (deploy/pool.yaml); default: read the pool Deployments from the namespace")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVar(&o.offers, "offers", "", "the pool controller's URL (http://warmpod-pools.NAMESPACE:9090): a claim takes the idle pod it offers, one write, instead of listing the pool; when it is down the claim lists (empty: always list)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the pools (default: the kubeconfig context's, or the service account's)")
	c := &o.cfg
	c.Version = version
	fs.DurationVar(&c.WarmWait, "warm-wait", time.Second, "how long prepare waits for a Ready idle pod before creating a cold one")
	fs.DurationVar(&c.ReadyTimeout, "ready-timeout", 5*time.Minute, "how long prepare waits for a cold pod to be Ready")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", time.Minute, "the job's lease heartbeat in the pod: a pod whose runner died ends the job within it (0 = none)")
	fs.StringVar(&c.BuildsDir, "builds-dir", "/builds", "builds_dir in the pod")
	fs.StringVar(&c.CacheDir, "cache-dir", "/cache", "cache_dir in the pod")
	fs.StringVar(&c.StateDir, "state-dir", filepath.Join(os.TempDir(), "warmpod-gitlab"), "directory for the per-job state files (which pod a job runs on)")
	fs.StringVar(&c.Timings, "timings", "", "append one JSON line of timings per call to this file (benchmarks)")
	fs.IntVar(&c.MaxStreamRetries, "stream-retries", 5, "how often run reattaches to a stage after a broken exec stream")
	fs.BoolVar(&o.useMux, "mux", true, "carry each job's stages over one exec stream, through a per-job multiplexer process started by prepare (false: one exec per call)")
	fs.DurationVar(&c.ResizeTimeout, "resize-timeout", 10*time.Second, "how long prepare waits for an in-place resize of a warm pod before it takes a cold pod instead")
	// The Kubernetes executor's *_overwrite_max_allowed: no bound, no overwrite.
	b := &o.bounds
	fs.StringVar(&b.CPURequest, "cpu-request-overwrite-max-allowed", "", "highest KUBERNETES_CPU_REQUEST a job may set (empty: the variable is ignored)")
	fs.StringVar(&b.CPULimit, "cpu-limit-overwrite-max-allowed", "", "highest KUBERNETES_CPU_LIMIT a job may set (empty: ignored)")
	fs.StringVar(&b.MemoryRequest, "memory-request-overwrite-max-allowed", "", "highest KUBERNETES_MEMORY_REQUEST a job may set (empty: ignored)")
	fs.StringVar(&b.MemoryLimit, "memory-limit-overwrite-max-allowed", "", "highest KUBERNETES_MEMORY_LIMIT a job may set (empty: ignored)")
	fs.StringVar(&b.EphemeralStorageRequest, "ephemeral-storage-request-overwrite-max-allowed", "", "highest KUBERNETES_EPHEMERAL_STORAGE_REQUEST a job may set (empty: ignored; always a cold pod)")
	fs.StringVar(&b.EphemeralStorageLimit, "ephemeral-storage-limit-overwrite-max-allowed", "", "highest KUBERNETES_EPHEMERAL_STORAGE_LIMIT a job may set (empty: ignored; always a cold pod)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	err := flagenv.Parse(fs, args, "WARMPOD_GITLAB_", "warmpod-gitlab")
	switch {
	case errors.Is(err, flag.ErrHelp) || err == nil && fs.Arg(0) == "help":
		printUsage(fs, os.Stdout)
		return o, 0, true
	case err == nil:
		err = o.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod-gitlab:", err)
		return o, 2, true
	}
	if *showVersion {
		o.cmd = "version"
		return o, 0, false
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "warmpod-gitlab: no command: "+commands+" (warmpod-gitlab help lists them and the flags)")
		return o, 2, true
	}
	o.cmd, o.rest = fs.Arg(0), fs.Args()[1:]
	return o, 0, false
}

// commands lists the driver's commands, for the errors that name a wrong one.
const commands = "config, prepare, run SCRIPT STAGE, cleanup, pool-hash, install DIR, version, help"

// printUsage prints the usage and every flag to w.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintln(w, usage)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// validate refuses flag values the driver cannot work with, naming the
// flag and what it takes.
func (o options) validate() error {
	c := o.cfg
	for _, d := range []struct {
		flag string
		v    time.Duration
		zero bool // 0 is allowed (it means none)
	}{{"warm-wait", c.WarmWait, true}, {"ready-timeout", c.ReadyTimeout, false}, {"lease-ttl", c.LeaseTTL, true}, {"resize-timeout", c.ResizeTimeout, false}} {
		if d.v < 0 || d.v == 0 && !d.zero {
			return fmt.Errorf("--%s %v: must be above 0%s", d.flag, d.v, map[bool]string{true: " (or 0)", false: ""}[d.zero])
		}
	}
	if c.MaxStreamRetries < 0 {
		return fmt.Errorf("--stream-retries %d: must be 0 or more", c.MaxStreamRetries)
	}
	return nil
}

// dispatch carries out o's command with d; the calls of a job (prepare,
// run, cleanup) get d's cluster and multiplexer here, the others need
// neither.
func (o options) dispatch(d *gitlab.Driver, codes gitlab.ExitCodes) int {
	cmd, rest := o.cmd, o.rest
	switch {
	case cmd == "config" && len(rest) == 0:
		// No client: config only reads the --pools manifest.
		pods, _, err := kubePods(o, false)
		if err != nil {
			return exitSetUp(err, codes)
		}
		d.Pods = pods
		return gitlab.ExitCode(d.Config(), codes, os.Stderr)
	case cmd == "pool-hash" && len(rest) == 0:
		return poolHash(o.pools, codes)
	case cmd == "mux":
		// The job's multiplexer, started by prepare (package mux).
		return muxMain(rest, o.kubeconfig, o.namespace)
	case cmd == "pod-exec" && len(rest) == 0:
		// One direct call of the per-stage build (package podexec).
		return podExec(o.kubeconfig, o.namespace)
	case cmd == "prepare" && len(rest) == 0, cmd == "cleanup" && len(rest) == 0, cmd == "run" && len(rest) == 2:
	case slices.Contains([]string{"config", "prepare", "run", "cleanup", "pool-hash", "install", "version"}, cmd):
		fmt.Fprintf(os.Stderr, "warmpod-gitlab: %s: wrong arguments %q; the commands: %s\n", cmd, rest, commands)
		return 2
	default:
		fmt.Fprintf(os.Stderr, "warmpod-gitlab: unknown command %q; the commands: %s\n", cmd, commands)
		return 2
	}
	d.Span("process: flags", o.began)
	if cmd != "prepare" {
		// run and cleanup go through the job's multiplexer, which has a
		// client of its own: theirs is set up only when a call goes
		// direct (no multiplexer, or it went away). Their multiplexer is
		// running already, so its argv is never used.
		d.Cluster = directCluster(o)
		if o.useMux {
			d.Mux = muxLauncher(o.kubeconfig, o.namespace, d.Cfg.StateDir)
		}
		return jobCall(d, cmd, rest, codes)
	}
	t0 := time.Now()
	pods, ns, err := kubePods(o, true)
	if err != nil {
		return exitSetUp(err, codes)
	}
	d.Span("client set-up", t0)
	d.Pods = pods
	if o.useMux {
		d.Mux = muxLauncher(o.kubeconfig, ns, d.Cfg.StateDir)
	}
	return jobCall(d, cmd, rest, codes)
}

// exitSetUp reports an error of setting up config's or prepare's pools
// and client: a flag value refused (2) or a system failure.
func exitSetUp(err error, codes gitlab.ExitCodes) int {
	var fe flagError
	if errors.As(err, &fe) {
		fmt.Fprintln(os.Stderr, "warmpod-gitlab:", err)
		return 2
	}
	fmt.Fprintln(os.Stderr, "warmpod-gitlab:", err)
	return codes.SystemFailure
}

// flagError is a flag value the full build refuses (a bound that is not a
// quantity).
type flagError struct{ error }

// jobCall makes one of a job's calls, prepare, run SCRIPT STAGE or
// cleanup, with the runner's signals wired as each needs them.
func jobCall(d *gitlab.Driver, cmd string, rest []string, codes gitlab.ExitCodes) int {
	ctx := context.Background()
	switch cmd {
	case "prepare":
		// The runner kills prepare on cancel; what it created is found
		// again by cleanup through the job label.
		pctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return gitlab.ExitCode(d.Prepare(pctx), codes, os.Stderr)
	case "run":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
		return gitlab.ExitCode(d.Run(ctx, rest[0], rest[1], term), codes, os.Stderr)
	default:
		return gitlab.ExitCode(d.Cleanup(ctx), codes, os.Stderr)
	}
}

// muxLauncher starts a job's multiplexer as this binary's "mux" command,
// with the cluster flags it needs and the environment package mux keeps;
// nil (no multiplexer) when this binary's path is unknown.
func muxLauncher(kubeconfig, namespace, stateDir string) *mux.Launcher {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return &mux.Launcher{Argv: []string{exe, "--kubeconfig", kubeconfig, "--namespace", namespace},
		Env: mux.Env(os.Environ(), "WARMPOD_GITLAB_"), Dir: stateDir}
}
