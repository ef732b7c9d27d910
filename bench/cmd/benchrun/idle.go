package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// benchIdle: metric 2. The four inits with /bin/sh as child (stdin a pipe
// kept open) run concurrently; VmRSS and Pss are read every 10 s from
// idleWarm on, CPU ticks at idleWarm and idleWarm+idleWindow.
func benchIdle(c *cfg, res *Results) {
	dir := filepath.Join(c.work, "idle")
	_ = os.MkdirAll(dir, 0o700)
	port := freePort()
	argvs := map[string][]string{
		"warmpod":   {c.warmpod, "--idle-timeout", "0", "--probe-addr", fmt.Sprintf("127.0.0.1:%d", port), "--control-socket", dir + "/c.sock", "--jobs-dir", dir + "/jobs", "--", "/bin/sh"},
		"tini":      {c.tini, "--", "/bin/sh"},
		"dumb-init": {c.dumbInit, "/bin/sh"},
		"catatonit": {c.catatonit, "--", "/bin/sh"},
	}
	if c.control != "" {
		argvs["go-min"] = []string{c.control, "/bin/sh"}
	}
	type inst struct {
		p    *nsProc
		w    *os.File
		pid  int
		t0   int64
		rss  []float64
		pss  []float64
		tick []float64
	}
	insts := map[string]*inst{}
	logf, _ := os.Create(filepath.Join(c.work, "logs", "idle.log"))
	defer logf.Close()
	for _, name := range c.initNames {
		r, w, err := os.Pipe()
		if err != nil {
			res.errorf("idle", "pipe: %v", err)
			return
		}
		p, err := c.startNS(argvs[name], r, nil, logf)
		r.Close()
		if err != nil {
			w.Close()
			res.errorf("idle", "%s: %v", name, err)
			continue
		}
		pid, err := p.pid1(5 * time.Second)
		if err != nil {
			w.Close()
			p.kill()
			res.errorf("idle", "%s: PID 1 not found: %v", name, err)
			continue
		}
		insts[name] = &inst{p: p, w: w, pid: pid}
	}
	defer func() {
		for _, in := range insts {
			in.w.Close()
			in.p.kill()
		}
	}()
	start := time.Now()
	samples := int(c.idleWindow/(10*time.Second)) + 1
	if samples < 2 {
		samples = 2
	}
	step := c.idleWindow / time.Duration(samples-1)
	var ticksAt []time.Time
	for s := 0; s < samples; s++ {
		at := start.Add(c.idleWarm + time.Duration(s)*step)
		time.Sleep(time.Until(at))
		ticksAt = append(ticksAt, time.Now())
		for name, in := range insts {
			if err := verifyNSInit(in.pid, in.p.cmd.Process.Pid); err != nil {
				res.errorf("idle", "%s: PID 1 gone: %v", name, err)
				continue
			}
			rss, pss, err := procMem(in.pid)
			if err != nil {
				res.errorf("idle", "%s: %v", name, err)
			}
			t, _ := procTicks(in.pid)
			in.rss = append(in.rss, rss)
			in.pss = append(in.pss, pss)
			in.tick = append(in.tick, float64(t))
		}
	}
	window := ticksAt[len(ticksAt)-1].Sub(ticksAt[0]).Seconds()
	rssRow := newRow("idle_rss", "inits", "idle PID-1 VmRSS, child `sh`", "KiB", true, fmt.Sprintf("%d samples, every %s from %s", samples, step, c.idleWarm))
	pssRow := newRow("idle_pss", "inits", "idle PID-1 Pss, child `sh`", "KiB", true, rssRow.Runs)
	cpuRow := newRow("idle_cpu", "inits", fmt.Sprintf("idle CPU over %.0f s", window), "%", true, "1 window")
	for name, in := range insts {
		rssRow.set(name, median(in.rss))
		pssRow.set(name, median(in.pss))
		rssRow.Raw[name], pssRow.Raw[name] = in.rss, in.pss
		if len(in.tick) >= 2 {
			d := in.tick[len(in.tick)-1] - in.tick[0]
			cpuRow.set(name, d/100/window*100) // USER_HZ = 100
			cpuRow.Raw[name] = in.tick
		}
	}
	if w, ok := rssRow.Values["warmpod"]; ok {
		rssRow.Target = "≤ 6 MiB (6,144 KiB)"
		rssRow.check(w <= 6144)
	}
	if w, ok := cpuRow.Values["warmpod"]; ok {
		cpuRow.Target = "≤ 0.1 % of a core"
		cpuRow.check(w <= 0.1)
	}
	rssRow.Note = fmt.Sprintf("the four inits run at the same time, each `init -- /bin/sh` with stdin a pipe held open (warmpod in warm mode: `--idle-timeout 0 --probe-addr 127.0.0.1:PORT --control-socket DIR/c.sock --jobs-dir DIR/jobs -- /bin/sh`); VmRSS from /proc/PID/status of PID 1, median of the samples taken every %s from %s after start. Dynamic tini/dumb-init share libc pages, hence their lower Pss.", step, c.idleWarm)
	pssRow.Note = "Pss from /proc/PID/smaps_rollup, same samples."
	cpuRow.Note = fmt.Sprintf("utime+stime of PID 1 (/proc/PID/stat, USER_HZ=100: one tick = 0.01 s = %.3f %% over the window) between the first and last sample; raw = cumulative ticks at each sample. warmpod scans its /proc once a second (idle detection).", 1/window)
	if in, ok := insts["warmpod"]; ok {
		if br, err := smapsBreakdown(in.pid); err == nil {
			res.note("Idle warmpod RSS by mapping (/proc/PID/smaps of PID 1 at the end of the idle window): %s.", br)
		}
	}
	res.add(rssRow)
	res.add(pssRow)
	res.add(cpuRow)
}

// smapsBreakdown sums Rss of pid's mappings by kind: the binary's text,
// read-only data and data segments, and anonymous memory (Go heap arenas,
// goroutine stacks, GC metadata, bss).
func smapsBreakdown(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return "", err
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	sums := map[string]float64{}
	var order []string
	kind := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			path := ""
			if len(f) >= 6 {
				path = f[5]
			}
			switch {
			case path != "" && path == exe && strings.HasPrefix(f[1], "r-x"):
				kind = "binary text"
			case path != "" && path == exe && strings.HasPrefix(f[1], "rw"):
				kind = "binary data"
			case path != "" && path == exe:
				kind = "binary rodata"
			case path == "":
				kind = "anonymous (heap arenas, stacks, bss, GC)"
			default:
				kind = path
			}
			if _, ok := sums[kind]; !ok {
				order = append(order, kind)
			}
			continue
		}
		if len(f) >= 2 && f[0] == "Rss:" {
			v, _ := strconv.ParseFloat(f[1], 64)
			sums[kind] += v
		}
	}
	var parts []string
	total := 0.0
	for _, k := range order {
		total += sums[k]
		if sums[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %s KiB", k, commas(int64(sums[k]))))
		}
	}
	return fmt.Sprintf("%s (total %s KiB)", strings.Join(parts, ", "), commas(int64(total))), nil
}
