// Command warmpod is the PID 1 of a warm CI pod: an init that proxies the
// container's stdio to a shell, reaps zombies, forwards signals, hands jobs
// over through a local control socket, serves kubelet probes, and drains
// after an idle deadline. See README.md.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	// PID 1 runs with GOMAXPROCS=1 unless the environment sets it; see
	// the package for why and why it is set from an initialiser.
	_ "github.com/warmpod/warmpod/internal/oneproc"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultSocket = "/run/warmpod/control.sock"

// init keeps the main goroutine on the main thread for the whole run
// (runtime.main holds that lock during initialisation; locking here
// keeps it). PID 1 takes signals on that thread (package sigwait): the
// kernel offers a process-directed signal to the main thread first.
func init() { runtime.LockOSThread() }

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

// errHelp: -h was asked for; the usage has been printed.
var errHelp = errors.New("help")

// errPrinted: the flag package has printed the error and the usage.
var errPrinted = errors.New("bad flags")
