// Command warmpod-gitlab is GitLab Runner's Custom executor driver for
// warm pods: config, prepare, run SCRIPT STAGE and cleanup, as the runner
// calls them (config_exec, prepare_exec, run_exec, cleanup_exec with
// config_args = ["config"] and so on). It runs beside gitlab-runner, never
// in a pod; the logic is package driver, the Kubernetes side package pool.
// See README.md, "GitLab Runner".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/gitlab"
	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/internal/flagenv"
	"github.com/warmpod/warmpod/internal/kubeclient"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: warmpod-gitlab [flags] config | prepare | run SCRIPT STAGE | cleanup
       warmpod-gitlab [flags] pool-hash      (prints each pool's warmpod.dev/config label value)
       warmpod-gitlab version
flags (each also as WARMPOD_GITLAB_<NAME>):`

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	env := gitlab.EnvFrom(os.Environ())
	codes := gitlab.ExitCodesFromEnv(env)
	fs := flag.NewFlagSet("warmpod-gitlab", flag.ContinueOnError)
	pools := fs.String("pools", "", "pool manifest: a YAML file with the pools' Deployments (deploy/pool.yaml); default: read the pool Deployments from the namespace")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	namespace := fs.String("namespace", "", "namespace of the pools (default: the kubeconfig context's, or the service account's)")
	warmWait := fs.Duration("warm-wait", time.Second, "how long prepare waits for a Ready idle pod before creating a cold one")
	readyTimeout := fs.Duration("ready-timeout", 5*time.Minute, "how long prepare waits for a cold pod to be Ready")
	leaseTTL := fs.Duration("lease-ttl", time.Minute, "the job's lease heartbeat in the pod: a pod whose runner died ends the job within it (0 = none)")
	buildsDir := fs.String("builds-dir", "/builds", "builds_dir in the pod")
	cacheDir := fs.String("cache-dir", "/cache", "cache_dir in the pod")
	stateDir := fs.String("state-dir", filepath.Join(os.TempDir(), "warmpod-gitlab"), "directory for the per-job state files (which pod a job runs on)")
	timings := fs.String("timings", "", "append one JSON line of timings per call to this file (benchmarks)")
	retries := fs.Int("stream-retries", 5, "how often run reattaches to a stage after a broken exec stream")
	useMux := fs.Bool("mux", true, "carry each job's stages over one exec stream, through a per-job multiplexer process started by prepare (false: one exec per call)")
	resizeTimeout := fs.Duration("resize-timeout", 10*time.Second, "how long prepare waits for an in-place resize of a warm pod before it takes a cold pod instead")
	// The Kubernetes executor's *_overwrite_max_allowed: no bound, no overwrite.
	var b gitlab.Bounds
	fs.StringVar(&b.CPURequest, "cpu-request-overwrite-max-allowed", "", "highest KUBERNETES_CPU_REQUEST a job may set (empty: the variable is ignored)")
	fs.StringVar(&b.CPULimit, "cpu-limit-overwrite-max-allowed", "", "highest KUBERNETES_CPU_LIMIT a job may set (empty: ignored)")
	fs.StringVar(&b.MemoryRequest, "memory-request-overwrite-max-allowed", "", "highest KUBERNETES_MEMORY_REQUEST a job may set (empty: ignored)")
	fs.StringVar(&b.MemoryLimit, "memory-limit-overwrite-max-allowed", "", "highest KUBERNETES_MEMORY_LIMIT a job may set (empty: ignored)")
	fs.StringVar(&b.EphemeralStorageRequest, "ephemeral-storage-request-overwrite-max-allowed", "", "highest KUBERNETES_EPHEMERAL_STORAGE_REQUEST a job may set (empty: ignored; always a cold pod)")
	fs.StringVar(&b.EphemeralStorageLimit, "ephemeral-storage-limit-overwrite-max-allowed", "", "highest KUBERNETES_EPHEMERAL_STORAGE_LIMIT a job may set (empty: ignored; always a cold pod)")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if err := flagenv.Apply(fs, "WARMPOD_GITLAB_"); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod-gitlab:", err)
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	if cmd == "version" {
		fmt.Println("warmpod-gitlab", version)
		return 0
	}
	cfg := gitlab.Config{WarmWait: *warmWait, ReadyTimeout: *readyTimeout, LeaseTTL: *leaseTTL,
		BuildsDir: *buildsDir, CacheDir: *cacheDir, StateDir: *stateDir, Version: version,
		Timings: *timings, MaxStreamRetries: *retries, Bounds: b, ResizeTimeout: *resizeTimeout}
	if err := b.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod-gitlab:", err)
		return 2
	}
	if *pools != "" {
		set, err := pool.Load(*pools)
		if err != nil {
			fmt.Fprintln(os.Stderr, "warmpod-gitlab:", err)
			return codes.SystemFailure
		}
		cfg.Pools = set
	}
	d := &gitlab.Driver{Cfg: cfg, Env: env, Stdout: os.Stdout, Stderr: os.Stderr, Now: time.Now}
	switch {
	case cmd == "config" && len(rest) == 0:
		return gitlab.ExitCode(d.Config(), codes, os.Stderr)
	case cmd == "pool-hash" && len(rest) == 0:
		if cfg.Pools == nil {
			fmt.Fprintln(os.Stderr, "warmpod-gitlab: pool-hash needs --pools")
			return 2
		}
		for _, p := range cfg.Pools.Pools {
			fmt.Printf("%s\t%s=%s\n", p.Name, pool.LabelConfig, p.Hash)
		}
		return 0
	case cmd == "mux":
		// The job's multiplexer, started by prepare (package mux).
		return mux.Main(rest, func() (executor.Cluster, error) {
			return kubeclient.New(*kubeconfig, *namespace, "warmpod-gitlab/"+version)
		})
	case cmd == "prepare" && len(rest) == 0, cmd == "cleanup" && len(rest) == 0, cmd == "run" && len(rest) == 2:
	default:
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	kube, err := kubeclient.New(*kubeconfig, *namespace, "warmpod-gitlab/"+version)
	if err != nil {
		return gitlab.ExitCode(&gitlab.SystemError{Err: err}, codes, os.Stderr)
	}
	d.Cluster = kube
	if *useMux {
		d.Mux = muxLauncher(*kubeconfig, kube.Namespace, *stateDir)
	}
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
