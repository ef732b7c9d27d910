//go:build kube

// Command selfdelete is a helper of the e2e/kube tests: it exercises package
// kube inside a real pod, independently of PID 1's wiring. It builds the
// in-cluster Config with podapi.FromEnv, calls DeleteSelf, prints
// "result=<Result>" on stdout, writes a termination message
// (reason "selfdelete-<Result>"), and then waits up to 60 s for the kubelet's
// SIGTERM (exit 143) before exiting 0.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/podapi"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	log := initlog.New(os.Stderr, initlog.LevelDebug, initlog.Text, time.Now).With("component", "selfdelete")
	c, err := podapi.FromEnv(os.Getenv, "")
	if err != nil {
		log.Error("no in-cluster config", "error", err)
		os.Exit(3)
	}
	start := time.Now()
	res, err := c.DeleteSelf(context.Background(), log)
	fmt.Printf("result=%s took=%s err=%v\n", res, time.Since(start).Round(time.Millisecond), err)
	code := 0
	if res == podapi.Deleted {
		select {
		case <-sig:
			code = 143
		case <-time.After(60 * time.Second):
		}
	}
	if err := podapi.WriteTerminationMessage("/dev/termination-log", podapi.TerminationMessage{
		Reason: "selfdelete-" + string(res), ExitCode: code, Version: "e2e",
	}); err != nil {
		log.Error("termination message", "error", err)
	}
	os.Exit(code)
}
