//go:build percall

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/warmpod/warmpod/executor/gitlab"
	"github.com/warmpod/warmpod/executor/podexec"
	"github.com/warmpod/warmpod/executor/session"
)

// The per-stage build, warmpod-gitlab-run (`go build -tags percall`):
// GitLab Runner starts run_exec once per stage (a job has a dozen), and a
// stage needs no Kubernetes client while the job's multiplexer carries its
// calls, so this build links none (client-go's package initialisation
// alone is tens of milliseconds of every stage: bench/gitlab-kube.md).
// Every other command, and a stage's direct call when the multiplexer
// cannot carry it, goes to the full build, warmpod-gitlab beside it.

// buildName is what `version` prints.
const buildName = "warmpod-gitlab-run"

// full is the full build's path: beside this one.
func full() string {
	exe, err := os.Executable()
	if err != nil {
		return "warmpod-gitlab"
	}
	return filepath.Join(filepath.Dir(exe), "warmpod-gitlab")
}

// handOver execs the full build, with this process's arguments and
// environment, for any command but run, and for run without the job's
// multiplexer (each of its calls would go direct). It returns only when
// the exec failed: a system failure, as the driver's own.
func handOver(o options, codes gitlab.ExitCodes) (int, bool) {
	if o.cmd == "run" && o.useMux {
		return 0, false
	}
	err := syscall.Exec(full(), append([]string{full()}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "warmpod-gitlab-run: %s is the full build's (%s, which must sit beside warmpod-gitlab-run): %v\n", o.cmd, full(), err)
	return codes.SystemFailure, true
}

// directCluster reaches the job's pod through a child of the full build
// per call (package podexec): only when the job's multiplexer cannot
// carry the call.
func directCluster(o options) session.Cluster {
	return &podexec.Client{Argv: []string{full(), "--kubeconfig", o.kubeconfig, "--namespace", o.namespace}, Env: os.Environ()}
}

// The rest is the full build's: handOver sends those commands there
// before they get here.

var errFull = errors.New("the full build's (warmpod-gitlab)")

func kubePods(options, bool) (gitlab.Pods, string, error) { return nil, "", errFull }
func poolHash(string, gitlab.ExitCodes) int               { return 2 }
func muxMain([]string, string, string) int                { return 2 }
func podExec(string, string) int                          { return 2 }
func install(string) ([]string, error)                    { return nil, errFull }
