package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// idleInst is one init of the idle steps: `init -- /bin/sh` as PID 1 of a
// fresh PID namespace, stdin a pipe we hold open so the shell waits.
type idleInst struct {
	p   *nsProc
	w   *os.File // our end of the shell's stdin
	pid int      // host PID of the namespace's PID 1 (verified, > 1)
}

// idleArgv is the argv of init name idling on /bin/sh. warmpod runs in warm
// mode with its control socket and jobs dir under dir and its probes on
// 127.0.0.1:port.
func (c *cfg) idleArgv(name, dir string, port int) []string {
	switch name {
	case "warmpod":
		return []string{c.warmpod, "--idle-timeout", "0", "--probe-addr", fmt.Sprintf("127.0.0.1:%d", port), "--control-socket", dir + "/c.sock", "--jobs-dir", dir + "/jobs", "--", "/bin/sh"}
	case "tini":
		return []string{c.tini, "--", "/bin/sh"}
	case "dumb-init":
		return []string{c.dumbInit, "/bin/sh"}
	case "catatonit":
		return []string{c.catatonit, "--", "/bin/sh"}
	case "go-min":
		return []string{c.control, "/bin/sh"}
	}
	return nil
}

// startIdle starts init name idling on /bin/sh (idleArgv) and finds its
// PID 1. stop ends it.
func (c *cfg) startIdle(name, dir string, port int, logf *os.File) (*idleInst, error) {
	argv := c.idleArgv(name, dir, port)
	if argv == nil {
		return nil, fmt.Errorf("no idle argv for %s", name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p, err := c.startNS(argv, r, nil, logf)
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	pid, err := p.pid1(5 * time.Second)
	if err != nil {
		w.Close()
		p.kill()
		return nil, fmt.Errorf("PID 1 not found: %v", err)
	}
	return &idleInst{p: p, w: w, pid: pid}, nil
}

// stop closes the shell's stdin and kills our unshare (the kernel then
// kills the namespace).
func (in *idleInst) stop() {
	in.w.Close()
	in.p.kill()
}

// mem reads the PID 1's memory after checking it still is that PID 1.
func (in *idleInst) mem() (memSample, error) {
	if err := verifyNSInit(in.pid, in.p.cmd.Process.Pid); err != nil {
		return memSample{}, fmt.Errorf("PID 1 gone: %v", err)
	}
	return readMem(in.pid)
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago (all listeners are held until the last one is open).
func freePorts(n int) []int {
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			ports = append(ports, 0)
			continue
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// syncBinaries fsyncs the binaries under test. A binary `make build` has
// just written sits in the page cache as dirty pages, which smaps counts as
// Private_Dirty (Shared_Dirty with sharers) until writeback; an image's
// binary in a pod is clean, and so should be the one measured.
func (c *cfg) syncBinaries(res *Results) {
	for _, in := range c.inits {
		f, err := os.Open(in.path)
		if err == nil {
			err = f.Sync()
			f.Close()
		}
		if err != nil {
			res.errorf("idle", "fsync %s: %v", in.path, err)
		}
	}
}

// benchIdle: metric 2. The four inits with /bin/sh as child (stdin a pipe
// kept open) run concurrently; memory (VmRSS, RssAnon, Pss, Private_Dirty,
// Anonymous) is read every 10 s from idleWarm on, CPU ticks at idleWarm
// and idleWarm+idleWindow.
func benchIdle(c *cfg, res *Results) {
	dir := filepath.Join(c.work, "idle")
	port := freePort()
	c.syncBinaries(res)
	type inst struct {
		*idleInst
		mems []memSample
		tick []float64
	}
	insts := map[string]*inst{}
	logf, _ := os.Create(filepath.Join(c.work, "logs", "idle.log"))
	defer logf.Close()
	for _, name := range c.initNames {
		in, err := c.startIdle(name, dir, port, logf)
		if err != nil {
			res.errorf("idle", "%s: %v", name, err)
			continue
		}
		insts[name] = &inst{idleInst: in}
	}
	defer func() {
		for _, in := range insts {
			in.stop()
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
			m, err := in.mem()
			if err != nil {
				res.errorf("idle", "%s: %v", name, err)
				continue
			}
			t, _ := procTicks(in.pid)
			in.mems = append(in.mems, m)
			in.tick = append(in.tick, float64(t))
		}
	}
	window := ticksAt[len(ticksAt)-1].Sub(ticksAt[0]).Seconds()
	runs := fmt.Sprintf("%d samples, every %s from %s", samples, step, c.idleWarm)
	rssRow := newRow("idle_rss", "inits", "idle PID-1 VmRSS, child `sh`", "KiB", true, runs)
	pssRow := newRow("idle_pss", "inits", "idle PID-1 Pss, child `sh`", "KiB", true, runs)
	anonRow := newRow("idle_rss_anon", "inits", "idle PID-1 RssAnon (per-pod cost), child `sh`", "KiB", true, runs)
	dirtyRow := newRow("idle_private_dirty", "inits", "idle PID-1 Private_Dirty, child `sh`", "KiB", true, runs)
	anonymousRow := newRow("idle_anonymous", "inits", "idle PID-1 Anonymous (smaps_rollup), child `sh`", "KiB", true, runs)
	cpuRow := newRow("idle_cpu", "inits", fmt.Sprintf("idle CPU over %.0f s", window), "%", true, "1 window")
	memRows := []struct {
		r *Row
		f func(memSample) float64
	}{
		{rssRow, func(m memSample) float64 { return m.RSS }},
		{pssRow, func(m memSample) float64 { return m.Pss }},
		{anonRow, func(m memSample) float64 { return m.RssAnon }},
		{dirtyRow, func(m memSample) float64 { return m.PrivateDirty }},
		{anonymousRow, func(m memSample) float64 { return m.Anonymous }},
	}
	for name, in := range insts {
		for _, mr := range memRows {
			var xs []float64
			for _, m := range in.mems {
				xs = append(xs, mr.f(m))
			}
			if len(xs) > 0 {
				mr.r.set(name, median(xs))
				mr.r.Raw[name] = xs
			}
		}
		if len(in.tick) >= 2 {
			d := in.tick[len(in.tick)-1] - in.tick[0]
			cpuRow.set(name, d/100/window*100) // USER_HZ = 100
			cpuRow.Raw[name] = in.tick
		}
	}
	if w, ok := rssRow.Values["warmpod"]; ok {
		rssRow.Target = "≤ 5.5 MiB (5,632 KiB)"
		rssRow.check(w <= 5.5*1024)
	}
	if w, ok := anonRow.Values["warmpod"]; ok {
		anonRow.Target = "≤ 1.2 MiB (1,228.8 KiB)"
		anonRow.check(w <= 1.2*1024)
	}
	if w, ok := cpuRow.Values["warmpod"]; ok {
		cpuRow.Target = "≤ 0.1 % of a core"
		cpuRow.check(w <= 0.1)
	}
	rssRow.Note = fmt.Sprintf("the four inits run at the same time, each `init -- /bin/sh` with stdin a pipe held open (warmpod in warm mode: `--idle-timeout 0 --probe-addr 127.0.0.1:PORT --control-socket DIR/c.sock --jobs-dir DIR/jobs -- /bin/sh`); VmRSS from /proc/PID/status of PID 1, median of the samples taken every %s from %s after start. VmRSS counts every resident page PID 1 maps, including the file pages of its binary and libraries, which all pods of one image on a node share.", step, c.idleWarm)
	pssRow.Note = "Pss from /proc/PID/smaps_rollup, same samples: shared pages divided among the processes mapping them. Dynamic tini/dumb-init share libc pages with every other process (the shells included), hence their low Pss; warmpod's binary pages are shared with no one here (one instance of the binary), so its Pss is close to its VmRSS — the 5-pod rows below show it with sharers. Any other process on the machine running the same file (another session's test of /usr/bin/catatonit, say) lowers an init's Pss too."
	anonRow.Note = "RssAnon from /proc/PID/status of PID 1, same samples: resident anonymous memory (heap, stacks, bss, GC metadata; for Go the runtime's arenas), which no other pod shares. This is what each extra pod of the same image costs a node for its PID 1."
	dirtyRow.Note = "Private_Dirty from /proc/PID/smaps_rollup, same samples: dirty pages mapped by PID 1 alone (its anonymous memory plus the pages of its binary's data segment it wrote to). The binaries are fsynced before the step: a freshly built binary's pages are still dirty in the page cache and would count here in full."
	anonymousRow.Note = "Anonymous from /proc/PID/smaps_rollup, same samples: pages not backed by a file (as RssAnon, counted from the page tables; the two can differ by a few pages of shmem or by the per-CPU RSS counters' lag in status)."
	cpuRow.Note = fmt.Sprintf("utime+stime of PID 1 (/proc/PID/stat, USER_HZ=100: one tick = 0.01 s = %.3f %% over the window) between the first and last sample; raw = cumulative ticks at each sample. warmpod scans its /proc once a second (idle detection).", 1/window)
	if in, ok := insts["warmpod"]; ok {
		if br, err := smapsBreakdown(in.pid); err == nil {
			res.note("Idle warmpod RSS by mapping (/proc/PID/smaps of PID 1 at the end of the idle window): %s.", br)
		}
	}
	res.add(rssRow)
	res.add(pssRow)
	res.add(anonRow)
	res.add(dirtyRow)
	res.add(anonymousRow)
	res.add(cpuRow)
}

// idlePods is how many instances of each init benchIdlePods runs at once.
const idlePods = 5

// benchIdlePods: metric 2b. idlePods instances of each init, all at once,
// each idling on /bin/sh as in benchIdle (warmpod with its own control
// socket, jobs dir and probe port); after idleWarm, one reading of each
// PID 1. Pss splits the binary's file pages among the instances, so its
// mean is the per-pod figure on a node running idlePods pods of the image.
func benchIdlePods(c *cfg, res *Results) {
	logf, _ := os.Create(filepath.Join(c.work, "logs", "idle-pods.log"))
	defer logf.Close()
	ports := freePorts(idlePods)
	insts := map[string][]*idleInst{}
	defer func() {
		for _, ins := range insts {
			for _, in := range ins {
				in.stop()
			}
		}
	}()
	for i := 0; i < idlePods; i++ {
		for _, name := range c.initNames {
			dir := filepath.Join(c.work, "idle-pods", fmt.Sprintf("%s-%d", name, i))
			in, err := c.startIdle(name, dir, ports[i], logf)
			if err != nil {
				res.errorf("idle-pods", "%s #%d: %v", name, i, err)
				continue
			}
			insts[name] = append(insts[name], in)
		}
	}
	time.Sleep(c.idleWarm)
	runs := fmt.Sprintf("%d at once, 1 reading each at %s", idlePods, c.idleWarm)
	pssRow := newRow("idle_pss_pods", "inits", fmt.Sprintf("idle PID-1 Pss with %d pods of each init, mean per pod", idlePods), "KiB", true, runs)
	anonRow := newRow("idle_rss_anon_pods", "inits", fmt.Sprintf("idle PID-1 RssAnon with %d pods of each init, mean per pod", idlePods), "KiB", true, runs)
	rssRaw := map[string][]float64{}
	for _, name := range c.initNames {
		var pss, anon []float64
		for i, in := range insts[name] {
			m, err := in.mem()
			if err != nil {
				res.errorf("idle-pods", "%s #%d: %v", name, i, err)
				continue
			}
			pss = append(pss, m.Pss)
			anon = append(anon, m.RssAnon)
			rssRaw[name] = append(rssRaw[name], m.RSS)
		}
		if len(pss) < idlePods {
			res.errorf("idle-pods", "%s: %d of %d instances read; no mean", name, len(pss), idlePods)
			continue
		}
		pssRow.set(name, mean(pss))
		anonRow.set(name, mean(anon))
		pssRow.Raw[name], anonRow.Raw[name] = pss, anon
	}
	res.raw("idle_pods_vmrss", rssRaw)
	pssRow.Note = fmt.Sprintf("%d instances of each init (%d namespaces) started at once, each `init -- /bin/sh` with stdin a pipe held open, as the idle rows (warmpod in the same warm mode, each instance with its own control socket, jobs dir and probe port on 127.0.0.1); after %s, Pss of each PID 1 from /proc/PID/smaps_rollup, mean over the instances (raw: each instance; their VmRSS in results.json, raw.idle_pods_vmrss). Pss divides each shared page among the processes mapping it, so the binary's file pages count 1/%d per instance (less for the libc pages of the dynamic inits, shared by every process): the per-pod figure on a node running %d pods of one image. Measured after the idle rows, with their inits gone.", idlePods, idlePods*len(c.initNames), c.idleWarm, idlePods, idlePods)
	anonRow.Note = "RssAnon from /proc/PID/status of the same PID 1s, same reading, mean over the instances: the part of each pod's PID 1 that sharing does not divide."
	res.add(pssRow)
	res.add(anonRow)
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
