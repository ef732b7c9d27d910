package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/limits"
)

// limitsPoll is how often `job limits` reads the cgroup while it waits:
// the files are read by the kernel from memory, three of them each time.
const limitsPoll = 10 * time.Millisecond

// maxLimitsWait bounds --within.
const maxLimitsWait = 10 * time.Minute

// jobLimits prints the container's cgroup limits as JSON; given the
// values the kubelet writes for a resize (the executor computes them), it
// first waits until the cgroup holds them (the kubelet writes the cgroup
// before the pod's status says so). Exit 0: in force; 75: not within
// --within; 69: the cgroup cannot be read (the executor then relies on
// the pod's status alone). It reads files only and never talks to PID 1:
// every process of the container shares its cgroup.
func jobLimits(args []string) int {
	fs := flag.NewFlagSet("job limits", flag.ContinueOnError)
	var w limits.Want
	fs.Uint64Var(&w.Shares, "cpu-shares", 0, "wait for this cpu.shares (cgroup v1; 0: not checked)")
	fs.Func("cpu-weight", "wait for this cpu.weight (cgroup v2; repeat for values that mean the same)", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number (0 or more)", s)
		}
		w.Weights = append(w.Weights, n)
		return nil
	})
	fs.Int64Var(&w.Quota, "cpu-quota", 0, "wait for this CFS quota in µs (0: not checked)")
	fs.Int64Var(&w.Memory, "memory-limit", 0, "wait for this memory limit in bytes (0: not checked)")
	within := fs.Duration("within", 10*time.Second, "give up after this long (exit 75); at most 10m")
	root := fs.String("cgroup", "/sys/fs/cgroup", "where the container sees its cgroup")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	if fs.NArg() != 0 || w.Quota < 0 || w.Memory < 0 || *within < 0 || *within > maxLimitsWait {
		fmt.Fprintln(os.Stderr, "usage: warmpod job limits [--cpu-shares N] [--cpu-weight N]... [--cpu-quota µs] [--memory-limit BYTES] [--within D ≤ 10m]")
		return control.ExitUsage
	}
	page := int64(os.Getpagesize())
	if err := w.Check(page); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: job limits: --memory-limit:", err)
		return control.ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer stop()
	v, err := limits.Wait(ctx, w, page, *within, limitsPoll,
		func() (limits.Values, error) { return limits.Read(*root) }, time.Now, time.Sleep)
	if errors.Is(err, limits.ErrNotInForce) || ctx.Err() != nil {
		printJSON(v)
		fmt.Fprintln(os.Stderr, "warmpod: job limits:", err)
		return control.ExitTempFail
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: job limits: cannot read the container's cgroup:", err)
		return control.ExitUnavailable
	}
	printJSON(v)
	return 0
}
