// Command sigstamp is the child of the init under test in warmpod's signal
// forwarding bench (metric 5): it prints "ready", waits for SIGTERM and
// prints "t <CLOCK_MONOTONIC ns>" taken as soon as the signal reached it,
// then exits 0. It exits 3 by itself after -timeout.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	timeout := flag.Duration("timeout", 30*time.Second, "exit 3 when no SIGTERM arrives within this")
	flag.Parse()
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		os.Exit(4)
	}
	select {
	case <-c:
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		fmt.Printf("t %d\n", ts.Nano())
		os.Exit(0)
	case <-time.After(*timeout):
		os.Exit(3)
	}
}
