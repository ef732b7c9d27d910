//go:build !percall

package main

import (
	"fmt"
	"os"

	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/github"
	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/executor/podexec"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/executor/session"
)

// The full build: every command, on client-go. `make build` also makes
// the per-step build (step.go) from the same sources.

// kubePods is the hook's Pods: prepare_job and run_container_step on
// the cluster, with the pool manifest of --pools when set.
func kubePods(kubeconfig, namespace, poolsFile, offers string) (github.Pods, error) {
	pods := &github.KubePods{Connect: func() (executor.Cluster, error) {
		k, err := pool.Connect(kubeconfig, namespace, "warmpod-github/"+version)
		if err != nil || offers == "" {
			return k, err
		}
		oc, err := pool.NewOfferClient(offers)
		if err != nil {
			return nil, err
		}
		k.Offers = oc
		k.OfferFailed = func(err error) {
			fmt.Fprintf(os.Stderr, "warmpod-github: %v: claiming by listing the pool\n", err)
		}
		return k, nil
	}}
	if poolsFile != "" {
		set, err := pool.Load(poolsFile)
		if err != nil {
			return nil, err
		}
		pods.Pools = set
	}
	return pods, nil
}

// connector sets up a client of the cluster for a command's calls on its
// job's pod.
func connector(kubeconfig, namespace string) func() (session.Cluster, error) {
	return func() (session.Cluster, error) {
		return pool.Connect(kubeconfig, namespace, "warmpod-github/"+version)
	}
}

// handOver: the full build carries out every command itself.
func handOver([]byte, bool) (int, bool) { return 0, false }

// muxMain runs a job's multiplexer.
func muxMain(args []string, kubeconfig, namespace string) int {
	return mux.Main(args, connector(kubeconfig, namespace))
}

// podExec makes one direct call for the per-step build (its request in
// the environment, its result on fd 3).
func podExec(kubeconfig, namespace string) int {
	return podexec.Main(func() (session.Cluster, error) {
		return pool.Connect(kubeconfig, namespace, "warmpod-github/"+version)
	})
}

// buildName is what `version` prints.
const buildName = "warmpod-github"
