// Command ptyrelay is the reference pty relay of warmpod's throughput bench
// (metric 6): the least a relay can do. It runs its arguments on the slave
// of a fresh, cooked pty (as warmpod --stdio pty does), copies stdin to the
// master and the master to stdout with plain blocking reads and writes, and
// types ^D when stdin ends. Its MB/s is what the kernel's line discipline
// allows on this machine.
package main

import (
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"
)

func main() {
	if len(os.Args) < 2 {
		os.Stderr.WriteString("usage: ptyrelay command args...\n")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	m, err := pty.Start(cmd)
	if err != nil {
		os.Stderr.WriteString("ptyrelay: " + err.Error() + "\n")
		os.Exit(1)
	}
	go func() {
		_, _ = io.Copy(m, os.Stdin)
		_, _ = m.Write([]byte{4}) // VEOF at a line start
	}()
	_, _ = io.Copy(os.Stdout, m) // ends with EIO once the slave is closed
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(ee.ExitCode())
	}
}
