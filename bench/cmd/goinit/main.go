// Command goinit is the control of warmpod's profiling runs
// (bench/profile.sh): the least a Go init can do. It starts its arguments
// in their own process group, forwards every catchable signal but SIGCHLD
// and SIGURG to that group, reaps with a wait4(-1, WNOHANG) loop on every
// SIGCHLD and exits with the child's status (128+N on signal N). What it
// costs is the Go runtime's share of warmpod's figures.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		os.Stderr.WriteString("usage: goinit command args...\n")
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs)
	pid, err := syscall.ForkExec(os.Args[1], os.Args[1:], &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		os.Stderr.WriteString("goinit: " + err.Error() + "\n")
		os.Exit(127)
	}
	for sig := range sigs {
		s := sig.(syscall.Signal)
		switch s {
		case syscall.SIGURG:
			continue
		case syscall.SIGCHLD:
			for {
				var ws syscall.WaitStatus
				p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if err == syscall.EINTR {
					continue
				}
				if err != nil || p <= 0 {
					break
				}
				if p == pid {
					if ws.Signaled() {
						os.Exit(128 + int(ws.Signal()))
					}
					os.Exit(ws.ExitStatus())
				}
			}
		default:
			_ = syscall.Kill(-pid, s)
		}
	}
}
