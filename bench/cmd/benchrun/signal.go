package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// benchSignal: metric 5. `init -- sigstamp`: wait for "ready", find the
// namespace's PID 1 on the host (single child of our unshare, NSpid ends
// with "\t1"), take t0 and kill(PID1, SIGTERM); sigstamp prints the
// CLOCK_MONOTONIC time its handler saw the signal.
func benchSignal(c *cfg, res *Results) {
	logFile, _ := os.Create(filepath.Join(c.work, "logs", "signal.log"))
	defer logFile.Close()
	med := newRow("signal_p50", "inits", "SIGTERM to PID 1 → child's handler ran, median", "µs", true, "")
	p99 := newRow("signal_p99", "inits", "SIGTERM to PID 1 → child's handler ran, p99", "µs", true, med.Runs)
	lat := map[string][]float64{}
	fails := map[string]int{}
	run := 0
	t0 := time.Now()
	for rep := 0; rep < c.sigRuns; rep++ {
		if rep >= c.minSig && time.Since(t0) > c.sigCap {
			res.note("signal runs stopped at %d of %d per init: the %s time cap of this step was reached (machine load)", rep, c.sigRuns, c.sigCap)
			break
		}
		for _, in := range c.inits {
			run++
			us, err := signalOnce(c, in, run, logFile)
			if err != nil {
				fails[in.name]++
				if fails[in.name] <= 3 {
					res.errorf("signal", "%s run %d: %v", in.name, rep, err)
				}
				continue
			}
			lat[in.name] = append(lat[in.name], us)
		}
	}
	med.Runs = fmt.Sprintf("%d per init, interleaved", len(lat["warmpod"]))
	p99.Runs = med.Runs
	for _, n := range c.initNames {
		if xs := lat[n]; len(xs) > 0 {
			med.set(n, median(xs))
			p99.set(n, pct(xs, 99))
			med.Raw[n] = xs
		}
	}
	med.targetVs("tini", 1.2)
	p99.targetVs("tini", 2)
	med.Note = fmt.Sprintf("`init -- sigstamp` (bench/cmd/sigstamp, a Go child with signal.Notify(SIGTERM)) in a fresh namespace per run; after it printed ready, the host PID of the namespace's PID 1 is found as the single child of our unshare with NSpid ending in \"\\t1\", t0 = CLOCK_MONOTONIC, kill(PID1, SIGTERM); t1 = CLOCK_MONOTONIC read in the child when the signal arrived. %d runs per init, round-robin; failed runs: %s.", len(lat["warmpod"]), failString(fails))
	res.add(med)
	res.add(p99)
}

func signalOnce(c *cfg, in initDef, run int, logFile *os.File) (float64, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	p, err := c.startNS(in.plain(run, c.sigstamp), nil, w, logFile)
	w.Close()
	if err != nil {
		return 0, err
	}
	defer func() {
		if !p.wait(5 * time.Second) {
			p.kill()
		}
	}()
	lines := make(chan string, 2)
	go func() {
		br := bufio.NewReader(r)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- strings.TrimSpace(l)
		}
	}()
	select {
	case l, ok := <-lines:
		if !ok || l != "ready" {
			p.kill()
			return 0, fmt.Errorf("child did not get ready (%q)", l)
		}
	case <-time.After(10 * time.Second):
		p.kill()
		return 0, fmt.Errorf("child not ready after 10 s")
	}
	pid, err := p.pid1(2 * time.Second)
	if err != nil {
		p.kill()
		return 0, err
	}
	t0 := mono()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		p.kill()
		return 0, err
	}
	select {
	case l, ok := <-lines:
		f := strings.Fields(l)
		if !ok || len(f) != 2 || f[0] != "t" {
			return 0, fmt.Errorf("bad stamp %q", l)
		}
		t1, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, err
		}
		return float64(t1-t0) / 1e3, nil
	case <-time.After(5 * time.Second):
		p.kill()
		return 0, fmt.Errorf("no stamp within 5 s of SIGTERM")
	}
}

func failString(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	return fmt.Sprint(m)
}
