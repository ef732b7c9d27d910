//go:build percall

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/executor/github"
	"github.com/warmpod/warmpod/executor/podexec"
	"github.com/warmpod/warmpod/executor/session"
)

// The per-step build, warmpod-github-step (`go build -tags percall`): the
// runner starts the hook once per step, and a step needs no Kubernetes
// client while the job's multiplexer carries its calls, so this build
// links none (client-go's package initialisation alone is tens of
// milliseconds of every step). Every other command, and a step's direct
// call when the multiplexer cannot carry it, goes to the full build,
// warmpod-github beside it.

// full is the full build's path: beside this one.
func full() string {
	exe, err := os.Executable()
	if err != nil {
		return "warmpod-github"
	}
	return filepath.Join(filepath.Dir(exe), "warmpod-github")
}

// kubePods: this build claims no pods (handOver sends those commands to
// the full build before the hook runs).
func kubePods(string, string, string, string) (github.Pods, error) { return nil, nil }

// connector reaches the job's pod through a child of the full build per
// call (package podexec): only when the job's multiplexer cannot carry
// the call.
func connector(kubeconfig, namespace string) func() (session.Cluster, error) {
	return func() (session.Cluster, error) {
		return &podexec.Client{Argv: []string{full(), "--kubeconfig", kubeconfig, "--namespace", namespace}, Env: os.Environ()}, nil
	}
}

// handOver execs the full build for any command but run_script_step, and
// for every command without the job's multiplexer (muxOn false: each of
// the step's calls would go direct), its stdin the same command (from a
// memfd: nothing on disk, any size). It returns only when the exec failed.
func handOver(input []byte, muxOn bool) (int, bool) {
	lines := strings.Split(strings.TrimSpace(string(input)), "\n")
	var in struct {
		Command string `json:"command"`
	}
	if muxOn && json.Unmarshal([]byte(lines[len(lines)-1]), &in) == nil && in.Command == github.CmdRunScriptStep {
		return 0, false
	}
	if err := execFull(input); err != nil {
		fmt.Fprintf(os.Stderr, "::error::warmpod-github: %s: %v (the full hook must sit beside warmpod-github-step)\n", full(), err)
		return 1, true
	}
	return 0, true // not reached
}

// execFull replaces this process with the full build, input on its stdin.
func execFull(input []byte) error {
	// Close-on-exec: only its copy on fd 0 (dup2 clears the flag) goes
	// to the full build, not a second descriptor of the command (which
	// holds the job's secrets) for whatever that starts.
	fd, err := unix.MemfdCreate("hook-input", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "hook-input")
	if _, err := f.Write(input); err != nil {
		return err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return err
	}
	if err := unix.Dup2(fd, 0); err != nil {
		return err
	}
	runtime.KeepAlive(f) // its finalizer must not close fd before the dup
	return syscall.Exec(full(), append([]string{full()}, os.Args[1:]...), os.Environ())
}

// muxMain and podExec are the full build's.
func muxMain(args []string, _, _ string) int {
	return fullOnly("mux")
}

func podExec(string, string) int { return fullOnly("pod-exec") }

func fullOnly(cmd string) int {
	if err := syscall.Exec(full(), append([]string{full()}, os.Args[1:]...), os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "warmpod-github-step: %s is the full build's (%s): %v\n", cmd, full(), err)
	}
	return 1
}

// install is the full build's.
func install(string) ([]string, error) {
	fullOnly("install")
	return nil, fmt.Errorf("the full build %s did not run", full())
}

// buildName is what `version` prints.
const buildName = "warmpod-github-step"
