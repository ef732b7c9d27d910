//go:build !percall

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/gitlab"
	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/executor/podexec"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/internal/selfinstall"
	"github.com/warmpod/warmpod/poolapi"
)

// The full build: every command, on client-go. `make build` also makes
// the per-stage build (run.go), warmpod-gitlab-run, from the same sources.

// buildName is what `version` prints.
const buildName = "warmpod-gitlab"

// kubePods is config's and prepare's Pods: the --pools manifest and the
// bounds, and with connect a client of the cluster (prepare), whose
// namespace it returns. Errors: a bound that is not a quantity
// (flagError), the manifest's, the client's.
func kubePods(o options, connect bool) (gitlab.Pods, string, error) {
	b := gitlab.Bounds(o.bounds)
	if err := b.Validate(); err != nil {
		return nil, "", flagError{err}
	}
	var offers *pool.OfferClient
	if o.offers != "" {
		var err error
		if offers, err = pool.NewOfferClient(o.offers); err != nil {
			return nil, "", flagError{fmt.Errorf("--offers: %w", err)}
		}
	}
	k := &gitlab.KubePods{Bounds: b}
	if o.pools != "" {
		set, err := pool.Load(o.pools)
		if err != nil {
			return nil, "", err
		}
		k.Pools = set
	}
	if !connect {
		return k, o.namespace, nil
	}
	kube, err := pool.Connect(o.kubeconfig, o.namespace, "warmpod-gitlab/"+version)
	if err != nil {
		return nil, "", &gitlab.SystemError{Err: err}
	}
	if offers != nil {
		kube.Offers = offers
		kube.OfferFailed = func(err error) {
			fmt.Fprintf(os.Stderr, "warmpod-gitlab: %v: claiming by listing the pool\n", err)
		}
	}
	k.Cluster = kube
	return k, kube.Namespace, nil
}

// poolHash prints each pool of the manifest with its warmpod.dev/config
// label value.
func poolHash(manifest string, codes gitlab.ExitCodes) int {
	if manifest == "" {
		fmt.Fprintln(os.Stderr, "warmpod-gitlab: pool-hash needs --pools")
		return 2
	}
	set, err := pool.Load(manifest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod-gitlab:", err)
		return codes.SystemFailure
	}
	for _, p := range set.Pools {
		fmt.Printf("%s\t%s=%s\n", p.Name, poolapi.LabelConfig, p.Hash)
	}
	return 0
}

// directCluster reaches a job's pod for run and cleanup when the job's
// multiplexer cannot: a client made on the first such call.
func directCluster(o options) session.Cluster {
	return executor.NewLazy(o.kubeconfig, o.namespace, "warmpod-gitlab/"+version)
}

// handOver: the full build carries out every command itself.
func handOver(options, gitlab.ExitCodes) (int, bool) { return 0, false }

// muxMain runs a job's multiplexer.
func muxMain(args []string, kubeconfig, namespace string) int {
	return mux.Main(args, func() (session.Cluster, error) {
		return pool.Connect(kubeconfig, namespace, "warmpod-gitlab/"+version)
	})
}

// podExec makes one direct call for the per-stage build (its request in
// the environment, its result on fd 3).
func podExec(kubeconfig, namespace string) int {
	return podexec.Main(func() (session.Cluster, error) {
		return pool.Connect(kubeconfig, namespace, "warmpod-gitlab/"+version)
	})
}

// stageBuild is the per-stage build's file name, beside the full build.
const stageBuild = "warmpod-gitlab-run"

// install copies the running binary to DIR/warmpod-gitlab and the
// per-stage build beside it when it is beside this one (0755,
// atomically): the command of an init container that fills a volume of
// the runner pod from the executor image. It returns what it wrote.
// Errors: DIR cannot be written, the per-stage build cannot be read.
func install(dir string) ([]string, error) {
	extra := map[string][]byte{}
	if exe, err := os.Executable(); err == nil {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(exe), stageBuild))
		switch {
		case err == nil:
			extra[stageBuild] = b
		case !os.IsNotExist(err):
			return nil, fmt.Errorf("%s: %w", stageBuild, err)
		}
	}
	if err := selfinstall.Install(dir, "warmpod-gitlab", extra); err != nil {
		return nil, err
	}
	out := []string{filepath.Join(dir, "warmpod-gitlab")}
	if _, ok := extra[stageBuild]; ok {
		out = append(out, filepath.Join(dir, stageBuild))
	}
	return out, nil
}
