//go:build !percall

package main

import (
	"context"
	"os"
	"syscall"

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
func kubePods(kubeconfig, namespace, poolsFile string) (github.Pods, error) {
	pods := &github.KubePods{Connect: func() (executor.Cluster, error) {
		return pool.Connect(kubeconfig, namespace, "warmpod-github/"+version)
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
	// The result pipe is ours only: a credential plugin client-go starts
	// must not hold it open.
	syscall.CloseOnExec(3)
	cl, err := pool.Connect(kubeconfig, namespace, "warmpod-github/"+version)
	var c session.Cluster
	if err == nil {
		c = cl
	}
	return podexec.Serve(context.Background(), c, err, os.Getenv(podexec.EnvRequest), os.Stdin, os.Stdout, os.Stderr, os.NewFile(3, "result"))
}

// buildName is what `version` prints.
const buildName = "warmpod-github"
