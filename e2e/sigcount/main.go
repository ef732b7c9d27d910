// Command sigcount is a test program for warmpod's end-to-end tests: it
// appends one line "<signal> <n>" to the file named by its first argument
// for every delivery of SIGTERM, SIGINT or SIGHUP, ignoring them otherwise,
// so it lives until SIGKILL. It prints "ready" once its handlers are set.
// The signal-forwarding tests count the lines: a process must receive the
// pod's SIGTERM once, not once from the forward and again from the
// shutdown sweep.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sigcount FILE")
		os.Exit(2)
	}
	c := make(chan os.Signal, 64)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	f, err := os.OpenFile(os.Args[1], os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	n := map[os.Signal]int{}
	for sig := range c {
		n[sig]++
		fmt.Fprintf(f, "%s %d\n", sig, n[sig])
		_ = f.Sync()
	}
}
