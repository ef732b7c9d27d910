package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/warmpod/warmpod/internal/runc"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// container is warmpod as PID 1 of a runc container run in the foreground.
type container struct {
	*runc.Container
	rootfs   string
	logsHost string // host dir bind-mounted at /run/warmpod/logs
	port     int
	url      string
	stdinW   *os.File
	pid1     int
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runcRuntime is runc with a clean environment, so nothing of the caller's
// (a GODEBUG, a proxy) reaches the containers.
func runcRuntime() (runc.Runtime, error) {
	rt, err := runc.Find()
	rt.Env = cleanEnv()
	return rt, err
}

// warmEnv is what the warm container's spec adds to runc.Spec's PATH and
// HOME: gctrace for the heap lines of the memory rows.
func warmEnv() []string { return []string{"GODEBUG=gctrace=1"} }

func startWarm(c *cfg) (*container, error) {
	rt, err := runcRuntime()
	if err != nil {
		return nil, err
	}
	bundle := filepath.Join(c.work, "warm")
	ct := &container{rootfs: filepath.Join(bundle, "rootfs"), logsHost: filepath.Join(c.work, "warm-logs")}
	for _, d := range []string{ct.rootfs, ct.logsHost} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := runc.BuildRootfs(ct.rootfs, c.busybox, runc.File{Src: c.warmpod, Dst: "/usr/local/bin/warmpod", Mode: 0o755}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(ct.rootfs, "bench"), 0o755); err != nil {
		return nil, err
	}
	ct.port = freePort()
	ct.url = fmt.Sprintf("http://127.0.0.1:%d", ct.port)
	args := []string{"/usr/local/bin/warmpod", "--stdio", "pipe", "--idle-timeout", "0", "--max-jobs", "0", "--grace", "2s", "--probe-addr", fmt.Sprintf("127.0.0.1:%d", ct.port)}
	spec := runc.Spec{Args: args, Rootfs: ct.rootfs, Mounts: []map[string]any{runc.Bind(ct.logsHost, "/run/warmpod/logs")}, Env: warmEnv()}
	if err := rt.WriteSpec(bundle, spec); err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ct.stdinW = w
	so, _ := os.Create(filepath.Join(c.work, "logs", "warm.stdout"))
	se, _ := os.Create(filepath.Join(c.work, "logs", "warm.stderr"))
	rc, err := rt.Run("wpbench-warm-"+randHex(4), bundle, runc.IO{Stdin: r, Stdout: so, Stderr: se})
	r.Close()
	so.Close()
	se.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	ct.Container = rc
	c.cl.add(ct.stop)
	cl := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := get(cl, ct.url+"/readyz"); code == 200 {
			break
		}
		if ct.Exited() {
			b, _ := os.ReadFile(filepath.Join(c.work, "logs", "warm.stderr"))
			return nil, fmt.Errorf("container exited during start: %s", tail(string(b), 600))
		}
		if time.Now().After(deadline) {
			ct.stop()
			return nil, errors.New("no /readyz 200 within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	pid, err := ct.statePid()
	if err != nil {
		ct.stop()
		return nil, err
	}
	ct.pid1 = pid
	return ct, nil
}

// statePid is the host PID of the container's PID 1 from `runc state`,
// checked to be PID 1 of its namespace and to run warmpod.
func (ct *container) statePid() (int, error) {
	_, pid, err := ct.State()
	if err != nil {
		return 0, err
	}
	if err := verifyNSInit(pid, 0); err != nil {
		return 0, err
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !bytes.Contains(cmdline, []byte("warmpod")) {
		return 0, fmt.Errorf("pid %d is not warmpod", pid)
	}
	return pid, nil
}

func (ct *container) stop() {
	if !ct.Exited() {
		ct.stdinW.Close()
		_ = ct.Kill("KILL")
	}
	ct.Stop()
}

type execResult struct {
	code           int
	stdout, stderr string
	err            error
	end            time.Time
}

func (ct *container) execAsync(stdin string, timeout time.Duration, args ...string) <-chan execResult {
	o := runc.ExecOpts{Timeout: timeout}
	if stdin != "" {
		o.Stdin = strings.NewReader(stdin)
	}
	in := ct.ExecAsync(o, args...)
	ch := make(chan execResult, 1)
	go func() {
		r := <-in
		ch <- execResult{code: r.ExitCode, stdout: r.Stdout, stderr: r.Stderr, err: r.Err, end: r.End}
	}()
	return ch
}

func (ct *container) exec(stdin string, timeout time.Duration, args ...string) execResult {
	return <-ct.execAsync(stdin, timeout, args...)
}

func (r execResult) ok() error {
	if r.err != nil {
		return r.err
	}
	if r.code != 0 {
		return fmt.Errorf("exit %d: %s %s", r.code, strings.TrimSpace(r.stdout), strings.TrimSpace(r.stderr))
	}
	return nil
}

func get(cl *http.Client, url string) (int, error) {
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// fileWatch reports when dir/name first contains want, woken by inotify.
type fileWatch struct {
	fd   int
	hit  chan time.Time
	stop chan struct{}
}

func watchFor(dir, name string, want []byte) (*fileWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MODIFY|unix.IN_CLOSE_WRITE); err != nil {
		unix.Close(fd)
		return nil, err
	}
	w := &fileWatch{fd: fd, hit: make(chan time.Time, 1), stop: make(chan struct{})}
	path := filepath.Join(dir, name)
	go func() {
		defer unix.Close(fd)
		buf := make([]byte, 64<<10)
		for {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, want) {
				w.hit <- time.Now()
				return
			}
			select {
			case <-w.stop:
				return
			default:
			}
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(pfd, 50)
			for {
				if n, err := unix.Read(fd, buf); n <= 0 || err != nil {
					break
				}
			}
		}
	}()
	return w, nil
}

func (w *fileWatch) wait(d time.Duration) (time.Time, error) {
	select {
	case t := <-w.hit:
		return t, nil
	case <-time.After(d):
		close(w.stop)
		return time.Time{}, fmt.Errorf("not seen within %s", d)
	}
}

// probeLatencies: n sequential GETs on one keep-alive connection (ms).
func probeLatencies(url string, n int) ([]float64, map[int]int, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	lat := make([]float64, 0, n)
	codes := map[int]int{}
	for i := 0; i < n; i++ {
		t := time.Now()
		code, err := get(cl, url)
		d := time.Since(t)
		if err != nil {
			return lat, codes, err
		}
		codes[code]++
		lat = append(lat, float64(d.Nanoseconds())/1e6)
	}
	return lat, codes, nil
}

type memSnap struct {
	Jobs    int     `json:"jobs"`
	RSS     float64 `json:"vmrss_kib"`
	PSS     float64 `json:"pss_kib"`
	FDs     int     `json:"fds"`
	Threads int     `json:"threads"`
}

func (ct *container) snap(jobs int) (memSnap, error) {
	if err := verifyNSInit(ct.pid1, 0); err != nil {
		return memSnap{}, err
	}
	rss, pss, err := procMem(ct.pid1)
	if err != nil {
		return memSnap{}, err
	}
	fds, err := fdCount(ct.pid1)
	if err != nil {
		return memSnap{}, err
	}
	return memSnap{Jobs: jobs, RSS: rss, PSS: pss, FDs: fds, Threads: threadCount(ct.pid1)}, nil
}

// runcState carries the warm container from runcSetup (before the idle
// window, whose 70 quiet seconds the 1,000-job loop runs in) to benchRunc.
type runcState struct {
	ct       *container
	snap1    memSnap
	jobsDone int
	loopDone chan struct{} // closed when both loop phases and their readings are done
	snap100  memSnap       // after the first phase (to 100 jobs)
	snap2    memSnap       // after the second phase (to 1 + loopJobs jobs)
	loopN    int           // jobs the loop ran
	loopSecs float64
	loopErr  error
	heap     []string // gctrace live-heap readings at the snapshots
}

// runcSetup starts the warm container, runs one hand-over, takes the
// "after 1 job" reading and starts the in-container job loop in the
// background. Per-process figures of the idle step (RSS, CPU ticks of idle
// inits) do not depend on what else runs on the machine.
func runcSetup(c *cfg, res *Results) {
	ct, err := startWarm(c)
	if err != nil {
		res.errorf("runc", "warm container: %v", err)
		return
	}
	logf("   warm container %s up (PID 1 = host pid %d, probes on %s)", ct.ID, ct.pid1, ct.url)
	st := &runcState{ct: ct}
	if _, _, err := warmJob(ct, -1); err != nil {
		res.errorf("handover", "first job: %v", err)
	} else {
		st.jobsDone = 1
	}
	time.Sleep(time.Second)
	if st.snap1, err = ct.snap(st.jobsDone); err != nil {
		res.errorf("handover", "snapshot: %v", err)
	}
	// Two phases, each bounded by count and by time (machine load), each
	// printing how many jobs ran: to 100 jobs, then to 1 + loopJobs, with a
	// reading of PID 1 after each. They run in the background during the
	// size and idle steps; runcLoopWait waits for them.
	st.loopDone = make(chan struct{})
	st.heap = append(st.heap, fmt.Sprintf("after 1 job: %s", lastGCLine(c)))
	go func() {
		defer close(st.loopDone)
		t0 := time.Now()
		first := min(99, c.loopJobs)
		for phase, n := range []int{first, c.loopJobs - first} {
			if n <= 0 {
				continue
			}
			capLeft := c.loopCap - time.Since(t0)
			if capLeft < time.Second {
				break
			}
			lr := ct.exec("", capLeft+time.Minute, "sh", "-c", jobLoop(phase, n, int(capLeft.Seconds())))
			done := 0
			if err := lr.ok(); err != nil {
				st.loopErr = err
			} else if _, err := fmt.Sscanf(strings.TrimSpace(lr.stdout), "done %d", &done); err != nil {
				st.loopErr = fmt.Errorf("job loop output %q", lr.stdout)
			}
			st.loopN += done
			time.Sleep(time.Second)
			sn, err := ct.snap(st.jobsDone + st.loopN)
			if err != nil && st.loopErr == nil {
				st.loopErr = err
			}
			st.heap = append(st.heap, fmt.Sprintf("after %d jobs: %s", st.jobsDone+st.loopN, lastGCLine(c)))
			if phase == 0 {
				st.snap100 = sn
			} else {
				st.snap2 = sn
			}
			if st.loopErr != nil {
				break
			}
		}
		st.loopSecs = time.Since(t0).Seconds()
		if st.snap2.RSS == 0 {
			st.snap2 = st.snap100 // one phase only (small -loop-jobs)
		}
	}()
	logf("   %d-job loop started inside the container (runs during the size and idle steps; cap %s)", c.loopJobs, c.loopCap)
	c.warm = st
}

// jobLoop is the in-container loop: n jobs (job start, a detached `true`
// stage, job end), stopping after capSecs; it prints "done N".
func jobLoop(phase, n, capSecs int) string {
	return fmt.Sprintf(`i=0; end=$(( $(date +%%s) + %d ))
while [ $i -lt %d ] && [ $(date +%%s) -lt $end ]; do
  echo "{\"id\":\"loop%d-$i\"}" | warmpod job start >/dev/null || { echo "start $i failed"; exit 1; }
  warmpod job run --job loop%d-$i --detach --stage s -- true >/dev/null || { echo "stage $i failed"; exit 2; }
  warmpod job end --job loop%d-$i >/dev/null || { echo "end $i failed"; exit 3; }
  i=$((i+1))
done
echo "done $i"`, capSecs, n, phase, phase, phase)
}

// lastGCLine is the live heap of warmpod's last GC so far, from the
// GODEBUG=gctrace=1 lines on the container's stderr ("A->B->C MB": C is
// the heap marked live).
func lastGCLine(c *cfg) string {
	b, err := os.ReadFile(filepath.Join(c.work, "logs", "warm.stderr"))
	if err != nil {
		return "?"
	}
	last, n := "", 0
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "gc ") {
			continue
		}
		n++
		for _, f := range strings.Split(l, ",") {
			if strings.Contains(f, "->") && strings.HasSuffix(strings.TrimSpace(f), "MB") {
				last = strings.TrimSpace(f)
			}
		}
	}
	if n == 0 {
		return "no GC yet"
	}
	return fmt.Sprintf("GC #%d heap %s (before->after->live)", n, last)
}

// runcLoopWait waits for the background job loop (after the idle step, so
// that it never overlaps a timing-sensitive step).
func runcLoopWait(c *cfg, res *Results) {
	if c.warm == nil {
		return
	}
	<-c.warm.loopDone
	logf("   job loop: %d jobs in %.0f s", c.warm.loopN, c.warm.loopSecs)
}

// benchRunc: metrics 7, 8 and 9 against the warm container: probe
// latency idle and under load, the runc exec floor, hand-overs interleaved
// with cold starts and attach-mode starts, and PID 1's memory over the
// jobs.
func benchRunc(c *cfg, res *Results) {
	if c.warm == nil {
		runcSetup(c, res)
		if c.warm == nil {
			return
		}
	}
	st := c.warm
	ct := st.ct
	defer ct.stop()

	// 8: the loop's readings.
	<-st.loopDone
	if st.loopErr != nil {
		res.errorf("handover", "job loop: %v", st.loopErr)
	}
	st.jobsDone += st.loopN
	if st.loopN < c.loopJobs && st.loopErr == nil {
		res.note("the in-container job loop stopped at %d of %d jobs: its %s time cap was reached (machine load)", st.loopN, c.loopJobs, c.loopCap)
	}
	probeRows(c, ct, res, "idle")
	floor := execFloor(ct, res)
	lat := handovers(c, st, res)
	// 7b: probes while a stage burns both cores.
	if err := loadJob(ct, func() { probeRows(c, ct, res, "under load") }); err != nil {
		res.errorf("probe", "under load: %v", err)
	}
	st.jobsDone++
	time.Sleep(time.Second)
	snap3, err := ct.snap(st.jobsDone)
	if err != nil {
		res.errorf("handover", "snapshot: %v", err)
	}
	st.heap = append(st.heap, fmt.Sprintf("after %d jobs: %s", snap3.Jobs, lastGCLine(c)))
	res.raw("pid1_after_jobs", []memSnap{st.snap1, st.snap100, st.snap2, snap3})
	res.raw("pid1_gctrace", st.heap)
	handoverRows(res, lat, floor)
	memoryRows(res, st, snap3)
}

// probeRows measures /livez and /readyz latency under cond (metric 7).
func probeRows(c *cfg, ct *container, res *Results, cond string) {
	for _, ep := range []string{"/livez", "/readyz"} {
		lat, codes, err := probeLatencies(ct.url+ep, c.probeReqs)
		if err != nil {
			res.errorf("probe", "%s %s: %v after %d requests", ep, cond, err, len(lat))
		}
		if len(lat) == 0 {
			continue
		}
		row := newRow("probe_"+strings.TrimPrefix(ep, "/")+"_"+strings.ReplaceAll(cond, " ", "_"), "warmpod", fmt.Sprintf("GET %s, %s: p50 / p99 / max", ep, cond), "ms", true, fmt.Sprintf("%s sequential, keep-alive", commas(int64(len(lat)))))
		row.set("warmpod", pct(lat, 99))
		row.Cells = map[string]string{"warmpod": fmt.Sprintf("%s / %s / %s", fmtVal(pct(lat, 50), "ms"), fmtVal(pct(lat, 99), "ms"), fmtVal(maxOf(lat), "ms"))}
		row.Raw["p50_p90_p99_p999_max"] = []float64{pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 99.9), maxOf(lat)}
		if cond == "under load" {
			row.Target = "p99 ≤ 10 ms"
			row.check(pct(lat, 99) <= 10)
		}
		row.Note = fmt.Sprintf("status codes %v; %d of %d over 1 s (the kubelet's default timeoutSeconds).", codes, countAbove(lat, 1000), len(lat))
		if cond == "under load" {
			row.Note += " Load: a job whose detached stage runs `sh -c 'while :; do :; done & while :; do :; done'` (both cores busy; /readyz answers 503 because the pod is busy), started 1 s before."
		}
		res.add(row)
	}
}

// execFloor is 20 bare `runc exec CTR true` runs, in ms.
func execFloor(ct *container, res *Results) []float64 {
	var floor []float64
	for i := 0; i < 20; i++ {
		t := time.Now()
		if err := ct.exec("", 30*time.Second, "true").ok(); err != nil {
			res.errorf("runc", "runc exec true: %v", err)
			break
		}
		floor = append(floor, ms(time.Since(t)))
	}

	return floor
}

// handoverLat are the latencies of the hand-over runs, in ms.
type handoverLat struct {
	start, end, cold, coldRun, attach []float64
}

// handovers runs the warm jobs (metric 8), interleaved with cold starts
// and attach-mode starts (metric 9).
func handovers(c *cfg, st *runcState, res *Results) handoverLat {
	ct := st.ct
	cold, coldErr := newColdRunner(c, ct)
	if coldErr != nil {
		res.errorf("cold", "%v", coldErr)
	}
	var startLat, endLat, coldLat, coldRunLat, attachLat []float64
	t0 := time.Now()
	for i := 0; i < c.jobs; i++ {
		if i >= c.minJobs && time.Since(t0) > c.jobsCap {
			res.note("job hand-overs stopped at %d of %d: the %s time cap of this step was reached (machine load)", i, c.jobs, c.jobsCap)
			break
		}
		s, e, err := warmJob(ct, i)
		if err != nil {
			res.errorf("handover", "job %d: %v", i, err)
			if i > 5 && len(startLat) == 0 {
				break
			}
			continue
		}
		st.jobsDone++
		startLat = append(startLat, s)
		endLat = append(endLat, e)
		if i < c.coldRuns {
			if cold != nil {
				v, r, err := cold.once(i)
				if err != nil {
					res.errorf("cold", "run %d: %v", i, err)
				} else {
					coldLat = append(coldLat, v)
					coldRunLat = append(coldRunLat, r)
				}
			}
			a, err := attachJob(c, ct, i)
			if err != nil {
				res.errorf("attach", "run %d: %v", i, err)
			} else {
				attachLat = append(attachLat, a)
				st.jobsDone++
			}
		}
	}
	return handoverLat{startLat, endLat, coldLat, coldRunLat, attachLat}
}

// handoverRows reports the hand-over and warm-vs-cold rows.
func handoverRows(res *Results, lat handoverLat, floor []float64) {
	startLat, endLat, coldLat, coldRunLat, attachLat := lat.start, lat.end, lat.cold, lat.coldRun, lat.attach
	stRow := newRow("job_start_first_byte", "warmpod", "`job start` → first byte of a stage's output (2 runc execs)", "ms", true, fmt.Sprintf("%d jobs", len(startLat)))
	stRow.set("warmpod", median(startLat))
	stRow.Cells = map[string]string{"warmpod": fmt.Sprintf("%s (p99 %s)", fmtVal(median(startLat), "ms"), fmtVal(pct(startLat, 99), "ms"))}
	stRow.Raw["warmpod"] = startLat
	stRow.Note = "t0 before `runc exec CTR warmpod job start` (spec on stdin); then `runc exec CTR warmpod job run --job ID --detach --stage s -- sh -c 'echo first'`; t1 when the job log (/run/warmpod/logs/ID.log, bind-mounted from the host, watched with inotify) first holds the stage's `first`. Median (p99)."
	res.add(stRow)
	en := newRow("job_end_ready", "warmpod", "`job end` → /readyz 200", "ms", true, stRow.Runs)
	en.set("warmpod", median(endLat))
	en.Cells = map[string]string{"warmpod": fmt.Sprintf("%s (p99 %s)", fmtVal(median(endLat), "ms"), fmtVal(pct(endLat, 99), "ms"))}
	en.Raw["warmpod"] = endLat
	en.Note = "t0 before `runc exec CTR warmpod job end --job ID`; /readyz polled every 1 ms on a keep-alive connection meanwhile; t1 at the first 200 (the job's shell was killed, its files removed, a fresh idle shell started). Median (p99)."
	res.add(en)
	floorRow := newRow("runc_exec_floor", "warmpod", "`runc exec CTR true` (the floor of every hand-over step)", "ms", true, fmt.Sprint(len(floor)))
	floorRow.set("warmpod", median(floor))
	floorRow.Raw["warmpod"] = floor
	floorRow.Note = "a bare `runc exec` into the warm container, measured between the probe and hand-over runs: every `warmpod job …` call an executor makes pays this once (kubectl exec adds the API server and kubelet on top)."
	res.add(floorRow)

	wc := newRow("warm_vs_cold", "warmpod", "job assigned → first script line ran: warm, stage (2 runc execs) vs cold container", "ms", true, fmt.Sprintf("warm %d, cold %d", len(startLat), len(coldLat)))
	wc.RefName = "cold runc run"
	wc.set("warmpod", median(startLat))
	wc.set("cold runc run", median(coldLat))
	wc.Raw["cold runc run"] = coldLat
	wc.Raw["cold runc run returned"] = coldRunLat
	wc.Note = fmt.Sprintf("warm = the hand-over row above (job start + detached stage, first output byte). cold = `runc run -d` of a new container from the same rootfs with `sh -c 'echo first'` as its process (stdout a host file watched with inotify), t0 before runc run, t1 when `first` is in the file (`runc run -d` itself returned after %s ms median; `runc delete` not counted); interleaved with the warm jobs. This cold is the best case for cold (bundle on disk, no image pull, no pod sandbox, no scheduling, no CNI), all of which a Kubernetes cold pod adds.", fmtVal(median(coldRunLat), "ms"))
	wa := newRow("warm_attach_vs_cold", "warmpod", "job assigned → first script line ran: warm, attach (1 runc exec + a line on the container's stdin) vs cold container", "ms", true, fmt.Sprintf("warm %d, cold %d", len(attachLat), len(coldLat)))
	wa.RefName = "cold runc run"
	wa.set("warmpod", median(attachLat))
	wa.set("cold runc run", median(coldLat))
	wa.Raw["warmpod"] = attachLat
	wa.Note = "GitLab's attach strategy: t0 before `runc exec CTR warmpod job start`; after it returns, `echo attach-N` is written to the container's stdin (warmpod --stdio pipe gives it to the job's fresh shell); t1 when `attach-N` is in the container's stdout (a host file, inotify). Same cold runs as the row above."
	for _, r := range []*Row{wc, wa} {
		r.targetVs("cold runc run", 0.1)
		res.add(r)
	}

}

// memoryRows reports PID 1's RSS and fds over the jobs.
func memoryRows(res *Results, st *runcState, snap3 memSnap) {
	snap2, loopDone, loopSecs := st.snap2, st.loopN, st.loopSecs
	if st.snap1.RSS > 0 && snap2.RSS > 0 {
		mr := newRow("rss_growth", "warmpod", fmt.Sprintf("PID 1 VmRSS after %s jobs vs after 1", commas(int64(snap2.Jobs))), "KiB", true, "1 reading each")
		mr.RefName = "after 1 job"
		mr.set("warmpod", snap2.RSS)
		mr.set("after 1 job", st.snap1.RSS)
		mr.Note = fmt.Sprintf("VmRSS of the container's PID 1 (host /proc), 1 s after the first job ended, after job 100 and after job %s (jobs 2–%d ran in two `runc exec sh -c` loops of `job start`, a detached `true` stage, `job end`: %.1f s, %.0f ms per job, during the size and idle steps): %s → %s → %s KiB; threads %d → %d → %d. At the very end (%d jobs): %s KiB, %d fds, %d threads. Live heap from GODEBUG=gctrace=1 on warmpod's stderr: %s.",
			commas(int64(snap2.Jobs)), snap2.Jobs, loopSecs, loopSecs*1000/float64(max(loopDone, 1)),
			fmtVal(st.snap1.RSS, "KiB"), fmtVal(st.snap100.RSS, "KiB"), fmtVal(snap2.RSS, "KiB"), st.snap1.Threads, st.snap100.Threads, snap2.Threads,
			snap3.Jobs, fmtVal(snap3.RSS, "KiB"), snap3.FDs, snap3.Threads, strings.Join(st.heap, "; "))
		mr.Target = "no growth beyond noise (≤ +10 %)"
		mr.check(snap2.RSS <= st.snap1.RSS*1.10)
		res.add(mr)
		if st.snap100.RSS > 0 && st.snap100.Jobs != snap2.Jobs {
			ref := fmt.Sprintf("after %d jobs", st.snap100.Jobs)
			m2 := newRow("rss_growth_100", "warmpod", fmt.Sprintf("PID 1 VmRSS after %s jobs vs %s", commas(int64(snap2.Jobs)), ref), "KiB", true, "1 reading each")
			m2.RefName = ref
			m2.set("warmpod", snap2.RSS)
			m2.set(ref, st.snap100.RSS)
			m2.Target = "no growth beyond noise (≤ +10 %)"
			m2.check(snap2.RSS <= st.snap100.RSS*1.10)
			m2.Note = "same readings: growth per job once the first jobs have warmed PID 1 up (heap arenas, stacks, code pages of the job paths)."
			res.add(m2)
		}
		fr := newRow("fd_growth", "warmpod", fmt.Sprintf("PID 1 open fds after %s jobs vs after 1", commas(int64(snap2.Jobs))), "count", true, "1 reading each")
		fr.RefName = "after 1 job"
		fr.set("warmpod", float64(snap2.FDs))
		fr.set("after 1 job", float64(st.snap1.FDs))
		fr.Target = "no growth"
		fr.check(snap2.FDs <= st.snap1.FDs)
		fr.Note = fmt.Sprintf("entries of /proc/PID/fd of the container's PID 1, same readings (after 100 jobs: %d).", st.snap100.FDs)
		res.add(fr)
	}
}

// attachJob: job start through runc exec, then a script line on the
// container's stdin; ms until its output is in the container's stdout.
func attachJob(c *cfg, ct *container, i int) (float64, error) {
	id := fmt.Sprintf("attach-%d", i)
	marker := []byte(id + "\n")
	w, err := watchFor(filepath.Join(c.work, "logs"), "warm.stdout", marker)
	if err != nil {
		return 0, err
	}
	spec := fmt.Sprintf(`{"id":%q,"token":"glcbt-bench-secret","timeout":"10m"}`+"\n", id)
	t0 := time.Now()
	if err := ct.exec(spec, 30*time.Second, "warmpod", "job", "start").ok(); err != nil {
		close(w.stop)
		return 0, fmt.Errorf("job start: %v", err)
	}
	if _, err := ct.stdinW.Write([]byte("echo " + id + "\n")); err != nil {
		close(w.stop)
		return 0, err
	}
	t1, err := w.wait(10 * time.Second)
	if _, e := endAndReady(ct, id); e != nil && err == nil {
		err = e
	}
	if err != nil {
		return 0, err
	}
	return ms(t1.Sub(t0)), nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// warmJob: one hand-over; returns start→first byte and end→ready in ms.
func warmJob(ct *container, i int) (float64, float64, error) {
	id := fmt.Sprintf("bench-%d", i)
	if i < 0 {
		id = "bench-first"
	}
	spec := fmt.Sprintf(`{"id":%q,"token":"glcbt-bench-secret-%d","timeout":"10m","variables":[{"key":"GREETING","value":"hello"}]}`+"\n", id, i)
	w, err := watchFor(ct.logsHost, id+".log", []byte("first\n"))
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := ct.exec(spec, 30*time.Second, "warmpod", "job", "start").ok(); err != nil {
		close(w.stop)
		return 0, 0, fmt.Errorf("job start: %v", err)
	}
	if err := ct.exec("", 30*time.Second, "warmpod", "job", "run", "--job", id, "--detach", "--stage", "s", "--", "sh", "-c", "echo first").ok(); err != nil {
		close(w.stop)
		_ = ct.exec("", 30*time.Second, "warmpod", "job", "end", "--job", id)
		return 0, 0, fmt.Errorf("job run: %v", err)
	}
	t1, err := w.wait(10 * time.Second)
	if err != nil {
		_ = ct.exec("", 30*time.Second, "warmpod", "job", "end", "--job", id)
		return 0, 0, fmt.Errorf("stage output: %v", err)
	}
	startMS := ms(t1.Sub(t0))
	endMS, err := endAndReady(ct, id)
	return startMS, endMS, err
}

// endAndReady runs `warmpod job end` and polls /readyz until 200.
func endAndReady(ct *container, id string) (float64, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	t2 := time.Now()
	ch := ct.execAsync("", 60*time.Second, "warmpod", "job", "end", "--job", id)
	var t3 time.Time
	for time.Since(t2) < 30*time.Second {
		if code, _ := get(cl, ct.url+"/readyz"); code == 200 {
			t3 = time.Now()
			break
		}
		time.Sleep(time.Millisecond)
	}
	r := <-ch
	if err := r.ok(); err != nil {
		return 0, fmt.Errorf("job end: %v", err)
	}
	if t3.IsZero() {
		return 0, errors.New("no /readyz 200 within 30 s of job end")
	}
	return ms(t3.Sub(t2)), nil
}

// loadJob starts a job whose stage keeps both cores busy, runs fn, ends it.
func loadJob(ct *container, fn func()) error {
	spec := `{"id":"bench-load","timeout":"10m"}` + "\n"
	if err := ct.exec(spec, 30*time.Second, "warmpod", "job", "start").ok(); err != nil {
		return fmt.Errorf("job start: %v", err)
	}
	defer func() { _ = ct.exec("", 60*time.Second, "warmpod", "job", "end", "--job", "bench-load") }()
	if err := ct.exec("", 30*time.Second, "warmpod", "job", "run", "--job", "bench-load", "--detach", "--stage", "burn", "--", "sh", "-c", "while :; do :; done & while :; do :; done").ok(); err != nil {
		return fmt.Errorf("burn stage: %v", err)
	}
	time.Sleep(time.Second)
	fn()
	return nil
}

// coldRunner starts fresh containers from the warm container's rootfs.
type coldRunner struct {
	bundle, outDir, tag string
	rt                  runc.Runtime
	cl                  *cleaner
}

func newColdRunner(c *cfg, ct *container) (*coldRunner, error) {
	cr := &coldRunner{bundle: filepath.Join(c.work, "cold"), outDir: filepath.Join(c.work, "cold-out"), tag: randHex(3)}
	for _, d := range []string{cr.bundle, cr.outDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	rt, err := runcRuntime()
	if err != nil {
		return nil, err
	}
	cr.rt, cr.cl = rt, c.cl
	if err := rt.WriteSpec(cr.bundle, runc.Spec{Args: []string{"/bin/sh", "-c", "echo first"}, Rootfs: ct.rootfs}); err != nil {
		return nil, err
	}
	return cr, nil
}

// once: ms from `runc run -d` to the script's first output, and to runc
// run returning.
func (cr *coldRunner) once(i int) (float64, float64, error) {
	id := fmt.Sprintf("wpbench-cold-%s-%d", cr.tag, i)
	name := fmt.Sprintf("out-%d", i)
	out, err := os.Create(filepath.Join(cr.outDir, name))
	if err != nil {
		return 0, 0, err
	}
	defer out.Close()
	w, err := watchFor(cr.outDir, name, []byte("first\n"))
	if err != nil {
		return 0, 0, err
	}
	cr.cl.add(func() { _ = cr.rt.Delete(id) })
	defer func() { _ = cr.rt.Delete(id) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := cr.rt.Command(ctx, "run", "-d", "--bundle", cr.bundle, id)
	var se bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &se
	t0 := time.Now()
	err = cmd.Run()
	tRun := time.Since(t0)
	if err != nil {
		close(w.stop)
		return 0, 0, fmt.Errorf("runc run -d: %v: %s", err, strings.TrimSpace(se.String()))
	}
	t1, err := w.wait(10 * time.Second)
	if err != nil {
		return 0, 0, err
	}
	return ms(t1.Sub(t0)), ms(tRun), nil
}
