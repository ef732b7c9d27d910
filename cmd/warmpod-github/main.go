// Command warmpod-github is a GitHub Actions runner container hook
// (ACTIONS_RUNNER_CONTAINER_HOOKS) that runs job containers on warm pods.
// The runner launches the shim beside it, warmpod-github.sh (shim.sh,
// written there by `warmpod-github install DIR`), which execs this binary: it reads the command from stdin and carries it out. The
// logic is package executor/github, the Kubernetes side executor/pool.
// See docs/guides/github-actions.md.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/executor/github"
	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/internal/flagenv"
	"github.com/warmpod/warmpod/poolapi"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: warmpod-github [flags]           (a container hook: the command on stdin, as the runner sends it)
       warmpod-github install DIR     (copies itself to DIR/warmpod-github, the per-step build beside it to DIR/warmpod-github-step, the shim to DIR/warmpod-github.sh)
       warmpod-github version
flags (each also as WARMPOD_GITHUB_<NAME>, which is how a runner pod sets them):`

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	began := time.Now() // the start of --timings' timeline
	fs := flag.NewFlagSet("warmpod-github", flag.ContinueOnError)
	pools := fs.String("pools", "", "pool manifest: a YAML file with the pools' Deployments, each warmpod reading the warmpod.dev/config label (docs/guides/github-actions.md); default: read the pool Deployments from the namespace")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	namespace := fs.String("namespace", "", "namespace of the pools (default: the kubeconfig context's, or the service account's)")
	offers := fs.String("offers", "", "the pool controller's URL (http://warmpod-pools.NAMESPACE:9090): a claim takes the idle pod it offers, one write, instead of listing the pool; when it is down the claim lists (empty: always list)")
	warmWait := fs.Duration("warm-wait", time.Second, "how long prepare_job waits for a Ready idle pod before creating a cold one")
	readyTimeout := fs.Duration("ready-timeout", 5*time.Minute, "how long prepare_job waits for a cold pod to be Ready")
	resizeTimeout := fs.Duration("resize-timeout", 10*time.Second, "how long prepare_job waits for the in-place resize of a warm pod to the job's resources before it takes a cold pod instead")
	leaseTTL := fs.Duration("lease-ttl", time.Minute, "the job's lease heartbeat in the pod: a pod whose runner died ends the job within it (0 = none)")
	retries := fs.Int("stream-retries", 5, "how often a step reattaches after a broken exec stream, and a piece of _work is sent again")
	cancelGrace := fs.Duration("cancel-grace", 5*time.Second, "SIGTERM → SIGKILL of a cancelled step in the pod (the runner kills the hook 10 s after its SIGINT)")
	chunk := fs.Int64("chunk-size", github.DefaultChunkSize, "bytes per verified piece of the _work transfer (up to streams+2 pieces are in memory at once)")
	streams := fs.Int("streams", github.DefaultStreams, "pieces of the _work transfer sent at once, each on an exec of its own")
	useMux := fs.Bool("mux", true, "carry each job's steps over one exec stream, through a per-job multiplexer process started by prepare_job (false: one exec per call)")
	stateDir := fs.String("state-dir", filepath.Join(os.TempDir(), "warmpod-github"), "private directory (0700) of the jobs' multiplexer sockets")
	timeout := fs.Duration("timeout", 6*time.Hour, "the job's lease in the pod (GitHub ends a job after at most 6 h)")
	timings := fs.String("timings", "", "append one JSON line of timings per call to this file (benchmarks)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	err := flagenv.Parse(fs, args, "WARMPOD_GITHUB_", "warmpod-github")
	if errors.Is(err, flag.ErrHelp) || err == nil && fs.NArg() == 1 && fs.Arg(0) == "help" {
		fmt.Println(usage)
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		return 0
	}
	if err == nil {
		err = validate(*warmWait, *readyTimeout, *resizeTimeout, *leaseTTL, *cancelGrace, *timeout, *retries, *chunk, *streams)
	}
	if err == nil && *offers != "" {
		if _, err = poolapi.ParseOfferURL(*offers); err != nil {
			err = fmt.Errorf("--offers: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "::error::warmpod-github:", err)
		return 2
	}
	switch {
	case *showVersion || fs.NArg() == 1 && fs.Arg(0) == "version":
		fmt.Println(buildName, version)
		return 0
	case fs.NArg() == 2 && fs.Arg(0) == "install":
		files, err := install(fs.Arg(1))
		if err != nil {
			fmt.Fprintln(os.Stderr, "warmpod-github: install:", err)
			return 73
		}
		fmt.Println("installed", strings.Join(files, " "))
		return 0
	case fs.NArg() == 2 && fs.Arg(0) == "mux":
		// A job's multiplexer, started by prepare_job (package mux).
		return muxMain(fs.Args()[1:], *kubeconfig, *namespace)
	case fs.NArg() == 1 && fs.Arg(0) == "pod-exec":
		// One direct call of the per-step build (package podexec).
		return podExec(*kubeconfig, *namespace)
	case fs.NArg() != 0:
		fmt.Fprintf(os.Stderr, "::error::warmpod-github: unknown command %q; with no command it is the runner's container hook (the command on stdin), or: install DIR, version, help\n", strings.Join(fs.Args(), " "))
		return 2
	}
	cfg := github.Config{WarmWait: *warmWait, ReadyTimeout: *readyTimeout, ResizeTimeout: *resizeTimeout, LeaseTTL: *leaseTTL, MaxStreamRetries: *retries,
		CancelGrace: *cancelGrace, ChunkSize: *chunk, Streams: *streams, Timeout: *timeout}
	cfg.Timings = *timings
	pods, err := kubePods(*kubeconfig, *namespace, *pools, *offers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "::error::warmpod-github:", err)
		return 1
	}
	// The whole command first: the per-step build hands every command but
	// a step to the full build, with the same stdin.
	input, err := io.ReadAll(io.LimitReader(os.Stdin, github.MaxInput))
	if err != nil {
		fmt.Fprintln(os.Stderr, "::error::warmpod-github: stdin:", err)
		return 1
	}
	if code, handed := handOver(input, *useMux); handed {
		return code
	}
	// The runner cancels with SIGINT, then SIGTERM 7.5 s later: either
	// becomes a cancel of the step in the pod.
	cancel := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		close(cancel)
	}()
	h := &github.Hook{Cfg: cfg, Connect: connector(*kubeconfig, *namespace), Pods: pods, Env: env(), Stdout: os.Stdout, Stderr: os.Stderr, Began: began}
	if exe, err := os.Executable(); err == nil && *useMux {
		h.Mux = &mux.Launcher{Argv: []string{exe, "--kubeconfig", *kubeconfig, "--namespace", *namespace},
			Env: mux.Env(os.Environ(), "WARMPOD_GITHUB_"), Dir: *stateDir, LeaseTTL: *leaseTTL}
		// The runner starts the hook for every step of a job from one
		// process (the shim execs this binary): the job's multiplexer
		// renews the lease while that process lives, also between steps.
		// Without it (an error: the parent is gone) it renews nothing.
		h.Mux.Runner, _ = mux.RunnerOf(os.Getppid())
	}
	return h.Run(context.Background(), bytes.NewReader(input), cancel)
}

// validate refuses flag values the hook cannot work with, naming the flag
// and what it takes.
func validate(warmWait, readyTimeout, resizeTimeout, leaseTTL, cancelGrace, timeout time.Duration, retries int, chunk int64, streams int) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
		zero bool // 0 is allowed
	}{{"warm-wait", warmWait, true}, {"ready-timeout", readyTimeout, false}, {"resize-timeout", resizeTimeout, false}, {"lease-ttl", leaseTTL, true},
		{"cancel-grace", cancelGrace, true}, {"timeout", timeout, false}} {
		if d.v < 0 || d.v == 0 && !d.zero {
			return fmt.Errorf("--%s %v: must be above 0%s", d.flag, d.v, map[bool]string{true: " (or 0)", false: ""}[d.zero])
		}
	}
	switch {
	case retries < 0:
		return fmt.Errorf("--stream-retries %d: must be 0 or more", retries)
	case chunk < 1:
		return fmt.Errorf("--chunk-size %d: must be 1 byte or more (default %d)", chunk, github.DefaultChunkSize)
	case streams < 1:
		return fmt.Errorf("--streams %d: must be 1 or more (default %d)", streams, github.DefaultStreams)
	}
	return nil
}

func env() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return m
}
