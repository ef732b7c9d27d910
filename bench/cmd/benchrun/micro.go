package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// benchMicro runs the Go micro-benchmarks (benchstat-comparable output in
// bench/micro.txt) and summarises them in results.md.
func benchMicro(c *cfg, res *Results) {
	out := filepath.Join(c.out, "micro.txt")
	f, err := os.Create(out)
	if err != nil {
		res.errorf("micro", "%v", err)
		return
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "5", "./...")
	cmd.Dir = c.root
	// The e2e package's TestMain would otherwise build its own warmpod.
	cmd.Env = append(os.Environ(), "WARMPOD_BIN="+c.warmpod)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		res.errorf("micro", "go test -bench: %v (see %s)", err, out)
	}
	c.micro = out
}
