// Command benchrun is warmpod's benchmark driver (`make bench`): it runs
// every metric of the bench suite with warmpod and the anchor inits tini,
// dumb-init and catatonit side by side in one run, each init as PID 1 of a
// fresh PID namespace (unshare) or of a runc container, and writes
// bench/results.md and bench/results.json. Needs root.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cfg holds paths and run counts.
type cfg struct {
	warmpod, tini, dumbInit, catatonit string
	orphans, sigstamp, ptyrelay        string
	control                            string
	sizeTable                          string
	busybox                            string
	out, work                          string
	micro                              string
	root                               string
	loadAtMakeStart                    string
	makeStart                          int64

	idleWarm, idleWindow time.Duration
	startupRuns          int
	readyRuns            int
	reapN, reapRuns      int
	sigRuns              int
	pipeBytes, ptyBytes  int64
	tputRuns             int
	probeReqs            int
	jobs, coldRuns       int
	minJobs              int
	jobsCap              time.Duration
	minSig               int
	sigCap               time.Duration
	loopJobs             int

	// cl stops what the run started, at its end.
	cl *cleaner

	// Set once by setupInits: the inits under test and their names.
	inits     []initDef
	initNames []string
	// warm is the warm container of runcSetup, read by the later runc
	// steps.
	warm    *runcState
	loopCap time.Duration
	only    map[string]bool
}

func (c *cfg) want(m string) bool { return len(c.only) == 0 || c.only[m] }

// initDef is one init under test.
type initDef struct {
	name string
	path string
	// plain returns the argv of the init running cmd as a plain init (exit
	// with the command's status). n makes per-run paths unique.
	plain func(n int, cmd ...string) []string
}

// anchorNames are the inits warmpod is compared with.
var anchorNames = [...]string{"tini", "dumb-init", "catatonit"}

// setupInits fills the inits under test: warmpod and the three anchors,
// and the minimal Go init with -control.
func (c *cfg) setupInits() {
	c.initNames = []string{"warmpod", "tini", "dumb-init", "catatonit"}
	c.inits = []initDef{
		{"warmpod", c.warmpod, func(n int, cmd ...string) []string {
			d := filepath.Join(c.work, "wp", fmt.Sprint(n%4)) // a few slots: runs are sequential
			return append([]string{c.warmpod, "--exit-with-command", "--probe-addr=", "--control-socket", d + "/c.sock", "--jobs-dir", d + "/jobs", "--"}, cmd...)
		}},
		{"tini", c.tini, func(_ int, cmd ...string) []string { return append([]string{c.tini, "--"}, cmd...) }},
		{"dumb-init", c.dumbInit, func(_ int, cmd ...string) []string { return append([]string{c.dumbInit}, cmd...) }},
		{"catatonit", c.catatonit, func(_ int, cmd ...string) []string { return append([]string{c.catatonit, "--"}, cmd...) }},
	}
	if c.control != "" {
		c.inits = append(c.inits, initDef{"go-min", c.control, func(_ int, cmd ...string) []string { return append([]string{c.control}, cmd...) }})
		c.initNames = append(c.initNames, "go-min")
	}
}

func main() {
	c := cfg{cl: newCleaner()}
	var only string
	var quick bool
	var pipeMiB, ptyMiB int
	flag.StringVar(&c.warmpod, "warmpod", "bin/warmpod", "warmpod binary (static)")
	flag.StringVar(&c.tini, "tini", "/usr/bin/tini", "tini")
	flag.StringVar(&c.dumbInit, "dumb-init", "/usr/bin/dumb-init", "dumb-init")
	flag.StringVar(&c.catatonit, "catatonit", "/usr/bin/catatonit", "catatonit")
	flag.StringVar(&c.orphans, "orphans", "bin/bench/orphans", "orphans helper (bench/cmd/orphans)")
	flag.StringVar(&c.sigstamp, "sigstamp", "bin/bench/sigstamp", "sigstamp helper (bench/cmd/sigstamp)")
	flag.StringVar(&c.ptyrelay, "ptyrelay", "bin/bench/ptyrelay", "reference pty relay (bench/cmd/ptyrelay)")
	flag.StringVar(&c.control, "control", "", "also measure this minimal Go init (bench/cmd/goinit) as column go-min (profiling runs)")
	flag.StringVar(&c.sizeTable, "size-table", "", "write warmpod's bytes-by-package table here (size step)")
	flag.StringVar(&c.busybox, "busybox", "/bin/busybox", "static busybox for the runc rootfs")
	flag.StringVar(&c.out, "out", "bench", "directory for results.md and results.json")
	flag.StringVar(&c.work, "work", "", "scratch directory (default: a new one under /tmp, removed at the end)")
	flag.StringVar(&c.root, "root", ".", "module root (for the size profile build)")
	flag.StringVar(&c.micro, "micro", "", "go test -bench output to summarise in results.md (set by the micro step)")
	flag.StringVar(&c.loadAtMakeStart, "load-at-start", "", "/proc/loadavg when make bench started")
	flag.Int64Var(&c.makeStart, "make-start", 0, "unix time when make bench started (for the total in results.md)")
	flag.StringVar(&only, "only", "", "comma-separated subset: size,idle,startup,reap,signal,tput,runc,micro")
	flag.BoolVar(&quick, "quick", false, "tiny run counts (smoke test, not for results)")
	flag.DurationVar(&c.idleWarm, "idle-warm", 10*time.Second, "settle time before the idle RSS reading")
	flag.DurationVar(&c.idleWindow, "idle-window", 60*time.Second, "idle CPU window")
	flag.IntVar(&c.startupRuns, "startup-runs", 100, "hyperfine runs per init")
	flag.IntVar(&c.readyRuns, "ready-runs", 20, "exec → /readyz runs")
	flag.IntVar(&c.reapN, "reap-n", 10000, "orphans per reaping run")
	flag.IntVar(&c.reapRuns, "reap-runs", 5, "reaping runs per init")
	flag.IntVar(&c.sigRuns, "signal-runs", 200, "signal runs per init")
	flag.IntVar(&pipeMiB, "pipe-mib", 1024, "MiB through each pipe-mode throughput run")
	flag.IntVar(&ptyMiB, "pty-mib", 16, "MiB through each pty-mode throughput run")
	flag.IntVar(&c.tputRuns, "tput-runs", 3, "throughput runs per mode")
	flag.IntVar(&c.probeReqs, "probe-reqs", 10000, "requests per probe endpoint and condition")
	flag.IntVar(&c.jobs, "jobs", 200, "job hand-overs through runc exec")
	flag.IntVar(&c.coldRuns, "cold-runs", 30, "cold container starts")
	flag.IntVar(&c.minJobs, "min-jobs", 100, "hand-overs always run, even past -jobs-cap")
	flag.DurationVar(&c.jobsCap, "jobs-cap", 90*time.Second, "stop the hand-overs after this long once -min-jobs are done")
	flag.IntVar(&c.minSig, "min-signal-runs", 100, "signal runs per init always done, even past -signal-cap")
	flag.DurationVar(&c.sigCap, "signal-cap", 100*time.Second, "stop the signal runs after this long once -min-signal-runs are done")
	flag.DurationVar(&c.loopCap, "loop-cap", 200*time.Second, "time cap of the in-container job loop")
	flag.IntVar(&c.loopJobs, "loop-jobs", 1000, "jobs in the in-container loop before the second RSS reading")
	flag.Parse()
	if quick {
		c.idleWarm, c.idleWindow = 2*time.Second, 5*time.Second
		c.startupRuns, c.readyRuns, c.reapN, c.reapRuns, c.sigRuns = 10, 3, 1000, 1, 10
		pipeMiB, ptyMiB, c.tputRuns, c.probeReqs = 64, 16, 1, 500
		c.jobs, c.coldRuns, c.loopJobs, c.minJobs, c.minSig = 5, 3, 10, 5, 10
	}
	c.pipeBytes, c.ptyBytes = int64(pipeMiB)<<20, int64(ptyMiB)<<20
	if only != "" {
		c.only = map[string]bool{}
		for _, m := range strings.Split(only, ",") {
			c.only[strings.TrimSpace(m)] = true
		}
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "benchrun: must run as root (unshare, runc)")
		os.Exit(1)
	}
	for _, p := range []*string{&c.warmpod, &c.orphans, &c.sigstamp, &c.ptyrelay, &c.control, &c.out, &c.root} {
		if *p == "" {
			continue
		}
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	if c.work == "" {
		d, err := os.MkdirTemp("", "warmpod-bench-")
		if err != nil {
			fatal(&c, err)
		}
		c.work = d
		defer os.RemoveAll(d)
	}
	for _, d := range []string{"wp/0", "wp/1", "wp/2", "wp/3", "logs"} {
		_ = os.MkdirAll(filepath.Join(c.work, d), 0o700)
	}
	c.setupInits()

	// Clean up every namespace and container we started on ^C / SIGTERM.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "\nbenchrun: %v: cleaning up\n", s)
		c.cl.all()
		os.RemoveAll(c.work)
		os.Exit(130)
	}()
	defer c.cl.all()

	res := &Results{Started: time.Now(), Machine: machineInfo(&c)}
	logf("machine: %s, %d CPUs, kernel %s, load %s", res.Machine.CPUModel, res.Machine.NProc, res.Machine.Kernel, res.Machine.LoadAtStart)
	steps := []struct {
		name string
		fn   func(*cfg, *Results)
	}{
		{"runc-setup", runcSetup}, // its job loop runs during size and idle
		{"size", benchSize},
		{"idle", benchIdle},
		{"idle-pods", benchIdlePods}, // after idle: the pods would share pages with its inits
		{"runc-wait", runcLoopWait},  // nothing timing-sensitive overlaps the loop
		{"startup", benchStartup},
		{"reap", benchReap},
		{"signal", benchSignal},
		{"tput", benchTput},
		{"runc", benchRunc},
		{"micro", benchMicro},
	}
	for _, s := range steps {
		if metric, _, _ := strings.Cut(s.name, "-"); !c.want(metric) { // runc-setup → runc, idle-pods → idle
			continue
		}
		t := time.Now()
		logf("== %s", s.name)
		func() {
			defer func() {
				if r := recover(); r != nil {
					res.errorf(s.name, "panic: %v", r)
				}
			}()
			s.fn(&c, res)
		}()
		res.StepSeconds = append(res.StepSeconds, StepTime{s.name, time.Since(t).Seconds()})
		logf("   %s done in %.1f s", s.name, time.Since(t).Seconds())
	}
	res.Seconds = time.Since(res.Started).Seconds()
	if c.makeStart > 0 {
		res.MakeSeconds = float64(time.Now().Unix() - c.makeStart)
	}
	if c.micro != "" {
		res.Micro = parseMicro(c.micro)
	}
	if err := res.write(&c); err != nil {
		fatal(&c, err)
	}
	logf("wrote %s/results.md and results.json (%.0f s)", c.out, res.Seconds)
	if len(res.Errors) > 0 {
		logf("%d errors (see results.md)", len(res.Errors))
	}
}

// cleaner runs the clean-ups of a run at its end, also on a fatal error
// or a signal: it stops the containers and kills the namespaces the run
// started. Safe for concurrent use.
type cleaner struct {
	mu   sync.Mutex
	fns  []func()         // guarded by mu
	live map[*nsProc]bool // every unshare still running; guarded by mu
}

func newCleaner() *cleaner { return &cleaner{live: map[*nsProc]bool{}} }

// add registers f to run at the end (last added, first run).
func (cl *cleaner) add(f func()) {
	cl.mu.Lock()
	cl.fns = append(cl.fns, f)
	cl.mu.Unlock()
}

// track records a running process, untrack forgets it once it exited.
func (cl *cleaner) track(p *nsProc) {
	cl.mu.Lock()
	cl.live[p] = true
	cl.mu.Unlock()
}

func (cl *cleaner) untrack(p *nsProc) {
	cl.mu.Lock()
	delete(cl.live, p)
	cl.mu.Unlock()
}

// all kills every process still running, then runs the clean-ups.
func (cl *cleaner) all() {
	cl.mu.Lock()
	ps := make([]*nsProc, 0, len(cl.live))
	for p := range cl.live {
		ps = append(ps, p)
	}
	fns := cl.fns
	cl.fns = nil
	cl.mu.Unlock()
	for _, p := range ps {
		p.kill()
	}
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

// fatal ends the run on err, after its clean-ups.
func fatal(c *cfg, err error) {
	fmt.Fprintln(os.Stderr, "benchrun:", err)
	c.cl.all()
	os.Exit(1)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func cmdOut(name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, _ := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(b))
}

func machineInfo(c *cfg) Machine {
	m := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	m.Kernel = cmdOut("uname", "-r")
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAtStart = strings.TrimSpace(string(b))
	}
	m.LoadAtMakeStart = c.loadAtMakeStart
	m.GOMAXPROCSNS, m.GOMAXPROCSRunc = envGOMAXPROCS(cleanEnv()), envGOMAXPROCS(warmEnv())
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotalKiB = kbField(b, "MemTotal:")
	}
	m.Versions = map[string]string{
		"warmpod":   cmdOut(c.warmpod, "version"),
		"tini":      cmdOut(c.tini, "--version"),
		"dumb-init": cmdOut(c.dumbInit, "--version"),
		"catatonit": cmdOut(c.catatonit, "--version"),
		"hyperfine": cmdOut("hyperfine", "--version"),
		"runc":      strings.Split(cmdOut("runc", "--version"), "\n")[0],
		"unshare":   cmdOut("unshare", "--version"),
	}
	return m
}

// Results is everything results.json holds.
type Results struct {
	Started     time.Time      `json:"started"`
	Seconds     float64        `json:"seconds"`
	MakeSeconds float64        `json:"make_bench_seconds,omitempty"`
	Machine     Machine        `json:"machine"`
	Rows        []*Row         `json:"rows"`
	Errors      []string       `json:"errors,omitempty"`
	Notes       []string       `json:"notes,omitempty"`
	StepSeconds []StepTime     `json:"step_seconds"`
	Raw         map[string]any `json:"raw,omitempty"`
	Micro       []MicroResult  `json:"micro,omitempty"`
	mu          sync.Mutex
}

type StepTime struct {
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
}

type Machine struct {
	NProc           int               `json:"nproc"`
	CPUModel        string            `json:"cpu_model"`
	Kernel          string            `json:"kernel"`
	LoadAtStart     string            `json:"loadavg_at_benchrun_start"`
	LoadAtMakeStart string            `json:"loadavg_at_make_start,omitempty"`
	MemTotalKiB     float64           `json:"mem_total_kib"`
	GoVersion       string            `json:"go_version"`
	Versions        map[string]string `json:"versions"`
	// GOMAXPROCS in warmpod's environment: the namespace runs (cleanEnv)
	// and the runc container (warmEnv); "unset" when absent.
	GOMAXPROCSNS   string `json:"warmpod_gomaxprocs_namespaces"`
	GOMAXPROCSRunc string `json:"warmpod_gomaxprocs_runc"`
}

// envGOMAXPROCS is GOMAXPROCS in env, or "unset".
func envGOMAXPROCS(env []string) string {
	v := "unset"
	for _, e := range env {
		if x, ok := strings.CutPrefix(e, "GOMAXPROCS="); ok {
			v = x // the last one wins, as in the Go runtime's getenv
		}
	}
	return v
}

func (r *Results) errorf(step, format string, a ...any) {
	msg := step + ": " + fmt.Sprintf(format, a...)
	logf("ERROR %s", msg)
	r.mu.Lock()
	r.Errors = append(r.Errors, msg)
	r.mu.Unlock()
}

func (r *Results) note(format string, a ...any) {
	r.mu.Lock()
	r.Notes = append(r.Notes, fmt.Sprintf(format, a...))
	r.mu.Unlock()
}

func (r *Results) add(row *Row) *Row {
	r.mu.Lock()
	r.Rows = append(r.Rows, row)
	r.mu.Unlock()
	return row
}

func (r *Results) raw(key string, v any) {
	r.mu.Lock()
	if r.Raw == nil {
		r.Raw = map[string]any{}
	}
	r.Raw[key] = v
	r.mu.Unlock()
}
