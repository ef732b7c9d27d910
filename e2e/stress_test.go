package e2e

// Stress scenarios (issue 10, Step 7): warmpod as PID 1 of a real runc
// container under long runs, races, faults and floods. Each prints one
// "FIGURE" line. `make test` runs the short version of every scenario;
// `make stress` sets WARMPOD_STRESS=full for the full counts and collects
// the figures (WARMPOD_STRESS_OUT) into bench/stress.md.

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/internal/runc"
)

// stressFull tells whether the full counts run (make stress).
func stressFull() bool { return os.Getenv("WARMPOD_STRESS") == "full" }

// scale returns full under make stress, short otherwise.
func scale(short, full int) int {
	if stressFull() {
		return full
	}
	return short
}

// figure logs one result line and appends it to WARMPOD_STRESS_OUT.
func figure(t testing.TB, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Logf("FIGURE %s", line)
	if out := os.Getenv("WARMPOD_STRESS_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		require.NoError(t, err)
		defer f.Close()
		_, _ = fmt.Fprintf(f, "- %s\n", line)
	}
}

// pid1Usage reads PID 1's VmRSS (KiB) and open descriptors from the host
// (job code in the container cannot list a non-dumpable PID 1's fds).
func pid1Usage(t testing.TB, w *Warmpod) (rssKiB, fds int) {
	t.Helper()
	pid := w.HostPID(t)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rssKiB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	return rssKiB, len(ents)
}

// pid1Anon reads RssAnon (KiB) of PID 1: its heap, stacks and other
// private memory, without the binary's file pages that VmRSS also counts.
func pid1Anon(t testing.TB, w *Warmpod) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.HostPID(t)))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssAnon:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no RssAnon in /proc/PID/status")
	return 0
}

// leftovers returns the container's processes other than PID 1, the
// idle shell and the ps that lists them, and the zombies among all.
func leftovers(t testing.TB, w *Warmpod) (procs []Proc, zombies int) {
	t.Helper()
	shell := 0
	if v, ok := w.Status(t)["shell_pid"].(float64); ok {
		shell = int(v)
	}
	for _, p := range w.PS(t) {
		if p.Zombie() {
			zombies++
		}
		if p.PID == 1 || p.PID == shell || strings.HasPrefix(p.Args, "ps -o") {
			continue
		}
		procs = append(procs, p)
	}
	return procs, zombies
}

// grepContainer lists files under dirs (in the container) holding pat, and
// /proc/*/environ and /proc/*/cmdline entries that do (PID 1's from the
// host), with pat written so that no command line matches itself.
func grepContainer(t testing.TB, w *Warmpod, pat string, dirs ...string) string {
	t.Helper()
	re := protoNoMatchRegex(pat)
	script := `pat="$1"; shift
for d in /proc/[0-9]*; do
  [ "${d#/proc/}" = 1 ] && continue
  for f in environ cmdline; do grep -q "$pat" "$d/$f" 2>/dev/null && echo "$d/$f"; done
done
grep -rl "$pat" "$@" 2>/dev/null
true`
	r := w.ExecWith(t, ExecOpts{Timeout: 2 * time.Minute}, append([]string{"sh", "-c", script, "sh", re}, dirs...)...)
	require.NoError(t, r.Err)
	found := strings.TrimSpace(r.Stdout)
	pid := w.HostPID(t)
	for _, f := range []string{"environ", "cmdline"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		require.NoError(t, err)
		if strings.Contains(string(b), pat) {
			found += "\n/proc/1/" + f
		}
	}
	return strings.TrimSpace(found)
}

// ---------------------------------------------------------------------------
// 1. Soak

const soakScript = `sleep 1000 &
(setsid sh -c 'sleep 1001 &' &)
export SOAK_EXPORTED="$CI_JOB_TOKEN"
echo "$CI_JOB_TOKEN" > "$TMPDIR/tempfile"
mkdir -p /ci-scripts/step && echo "export CI_JOB_TOKEN=$CI_JOB_TOKEN" > /ci-scripts/step/script
[ -s "$SOAK_FILE" ] && [ "$SOAK_VAR" = v ] && echo soak-ok
`

// Many consecutive jobs in one container, each leaving a background
// process, a double-forked daemon, an exported variable, a file variable, a
// temporary file, an in-flight put and a token copy under a cleanup path:
// nothing of any survives, and PID 1 does not grow.
func TestStressSoak(t *testing.T) {
	jobs := scale(40, 1000)
	base := scale(20, 100)
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "2s", "--cleanup-path", "/ci-scripts"}})
	_, _, code := w.Exec(t, "", "mkdir", "-p", "/up", "/ci-scripts")
	require.Equal(t, 0, code)
	upload := make([]byte, 256<<10)
	_, _ = rand.Read(upload)
	var baseRSS, baseFDs, baseAnon int
	start := time.Now()
	for i := 1; i <= jobs; i++ {
		id := fmt.Sprintf("soak-%d", i)
		token := fmt.Sprintf("tok-soak-%d-%s", i, randHex(6))
		protoStart(t, w, protoSpec{ID: id, Token: token, Variables: []jobVar{
			{Key: "SOAK_VAR", Value: "v"}, {Key: "SOAK_FILE", Value: token, File: true}}})
		pr, pw := io.Pipe()
		put := w.ExecAsync(t, ExecOpts{StdinR: pr, Timeout: time.Minute}, putArgs(id, "/up/blob", upload)...)
		go func() { _, _ = pw.Write(upload[:len(upload)/2]) }() // and never the rest
		r := stageCall(t, w, id, "s", soakScript)
		require.Equal(t, 0, r.ExitCode, "job %d: %s", i, r)
		require.Equal(t, "soak-ok\n", r.Stdout, "job %d", i)
		protoEnd(t, w)
		_ = pr.Close()
		if pr := <-put; pr.ExitCode == 0 {
			t.Fatalf("job %d: the in-flight put outlived its job: %s", i, pr)
		}
		if i == base {
			baseRSS, baseFDs = pid1Usage(t, w)
			baseAnon = pid1Anon(t, w)
		}
	}
	elapsed := time.Since(start)
	rss, fds := pid1Usage(t, w)
	anon := pid1Anon(t, w)
	var procs []Proc
	var zombies int
	Eventually(t, 10*time.Second, 200*time.Millisecond, "no job process survives", func() (bool, string) {
		procs, zombies = leftovers(t, w)
		return len(procs) == 0 && zombies == 0, formatPS(procs)
	})
	leaks := grepContainer(t, w, "tok-soak-", "/run", "/tmp", "/up", "/ci-scripts")
	st := w.WP(t, "", "status")
	assert.NotContains(t, st.Stdout, "tok-soak-")
	assert.NotContains(t, w.Stderr(), "tok-soak-", "PID 1's log holds a token")
	assert.Empty(t, leaks, "past jobs' tokens found")
	assert.Empty(t, lsA(t, w, "/up"), "a put's temporary file survived")
	assert.Empty(t, lsA(t, w, "/ci-scripts"), "the cleanup path was not wiped")
	assert.Empty(t, lsA(t, w, "/run/warmpod/jobs"), "job directories left")
	assert.LessOrEqual(t, fds, baseFDs+2, "PID 1's descriptors grew from %d at job %d", baseFDs, base)
	// A leak shows in the anonymous memory, not in VmRSS, which also
	// counts the binary's file pages. The Go heap is still growing towards
	// its GC target early on (the old binary and this one both grew by
	// about 3.2 MiB from job 10 to job 40, hence the base at job 20 in
	// short mode); 4 MiB over the remaining jobs still catches a leak of
	// 200 KiB a job in short mode, 4.5 KiB in full mode.
	assert.LessOrEqual(t, anon, baseAnon+4096, "PID 1's anonymous memory grew from %d KiB at job %d", baseAnon, base)
	figure(t, "soak: %d jobs in %s (%.0f ms/job); after: %d job processes, %d zombies, %d token copies; PID 1 fds %d (job %d: %d), VmRSS %d KiB (job %d: %d KiB), RssAnon %d KiB (job %d: %d KiB)",
		jobs, elapsed.Round(time.Second), float64(elapsed.Milliseconds())/float64(jobs), len(procs), zombies, strings.Count(leaks, "\n")+min(1, len(leaks)), fds, base, baseFDs, rss, base, baseRSS, anon, base, baseAnon)
}

// ---------------------------------------------------------------------------
// 2. Races

// Job starts fired across the idle deadline: each is accepted (and its job
// stays, the pod does not exit under it) or refused with 69/75; never a
// half-started job. Each pod's volley is released at another offset from
// its idle deadline, from 300 ms before to 300 ms after.
func TestStressStartsAcrossIdleDeadline(t *testing.T) {
	// About half the volleys run (those released before their pod's
	// deadline); 44 pods fire about 1,000 starts.
	reps := scale(4, 44)
	const per = 50
	won, exited, fired, refused := 0, 0, 0, map[int]int{}
	for rep := 0; rep < reps; rep++ {
		w := startWarmpod(t, wpOpts{IdleTimeout: "3s", Flags: []string{"--grace", "1s", "--ready-margin", "0s"}})
		// The volley runs from the idle shell (no exec session, whose
		// new process would count as activity), held by a warmpod
		// client until the host creates /tmp/go; waves of 10 starts
		// every 20 ms, each answer echoed on the container's stdout.
		// The volley is a session of its own: a winning start replaces
		// the idle shell and signals the shell's process group.
		volley := `read go < /tmp/go
i=0; while [ $i -lt ` + strconv.Itoa(per) + ` ]; do for k in 0 1 2 3 4 5 6 7 8 9; do i=$((i+1)); ( echo "{\"id\":\"r-$i\",\"token\":\"tok-race-$i\"}" | /usr/local/bin/warmpod job start >/dev/null 2>&1; echo "start $i $?" >> /tmp/answers ) & done; sleep 0.02; done; wait`
		require.NoError(t, os.WriteFile(filepath.Join(w.Rootfs, "tmp/volley.sh"), []byte(volley), 0o755))
		// A FIFO holds the volley without using CPU or doing I/O, so
		// the waiting shell stops counting as activity after its first
		// scan and the deadline read below stays put.
		fifo := filepath.Join(w.Rootfs, "tmp/go")
		require.NoError(t, syscall.Mkfifo(fifo, 0o644))
		w.WriteLine(t, "setsid sh /tmp/volley.sh </dev/null >/dev/null 2>&1 &")
		// Let the scans see the waiting client (a new process counts
		// once), then read the deadline it left.
		time.Sleep(2200 * time.Millisecond)
		st, err := protoHTTPStatus(w)
		require.NoError(t, err)
		deadline, err := time.Parse(time.RFC3339Nano, fmt.Sprint(st["idle_deadline"]))
		require.NoError(t, err, "%v", st)
		offset := -300*time.Millisecond + time.Duration(rep)*600*time.Millisecond/time.Duration(max(1, reps-1))
		time.Sleep(time.Until(deadline.Add(min(offset, 0) - 300*time.Millisecond)))
		st, err = protoHTTPStatus(w)
		require.NoError(t, err)
		again, err := time.Parse(time.RFC3339Nano, fmt.Sprint(st["idle_deadline"]))
		require.NoError(t, err, "read at %s (first read: deadline %s; offset %s): %v", time.Now().Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano), offset, st)
		require.Equal(t, deadline, again, "the idle deadline moved while the volley waited")
		time.Sleep(time.Until(deadline.Add(offset)))
		// Non-blocking: once the pod has drained nobody reads the FIFO
		// (ENXIO), and the volley never runs.
		if fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_, _ = syscall.Write(fd, []byte("go\n"))
			_ = syscall.Close(fd)
		} else {
			require.ErrorIs(t, err, syscall.ENXIO)
		}
		answers := func() string {
			b, _ := os.ReadFile(filepath.Join(w.Rootfs, "tmp/answers"))
			return string(b)
		}
		var winners []string
		answered := 0
		Eventually(t, 30*time.Second, 100*time.Millisecond, "every start answered, or the pod gone", func() (bool, string) {
			winners, answered = nil, 0
			for _, l := range strings.Split(answers(), "\n") {
				f := strings.Fields(l)
				if len(f) != 3 || f[0] != "start" {
					continue
				}
				answered++
				if f[2] == "0" {
					winners = append(winners, "r-"+f[1])
				}
			}
			return answered == per || w.Exited(), fmt.Sprintf("%d answered", answered)
		})
		for _, l := range strings.Split(answers(), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "start" && f[2] != "0" {
				code, _ := strconv.Atoi(f[2])
				refused[code]++
				assert.Contains(t, []int{exitUnavailable, exitTempFail}, code, "a refused start's exit code")
			}
		}
		fired += answered
		require.LessOrEqual(t, len(winners), 1, "more than one start won: %v", winners)
		if len(winners) == 1 {
			won++
			time.Sleep(time.Until(deadline.Add(1500 * time.Millisecond)))
			require.False(t, w.Exited(), "the pod exited under an accepted job")
			st, err := protoHTTPStatus(w)
			require.NoError(t, err)
			require.Equal(t, "busy", st["state"])
			require.Equal(t, winners[0], statusJobID(st))
			assert.Equal(t, winners[0], lsA(t, w, "/run/warmpod/jobs"), "job directories: only the winner's")
			protoEnd(t, w)
		} else {
			exited++
			code, err := w.Wait(20 * time.Second)
			require.NoError(t, err, "no start won, yet the pod did not drain")
			assert.Equal(t, 0, code)
		}
	}
	figure(t, "races: volleys of %d job starts released from 300 ms before to 300 ms after the idle deadline of %d pods (%d starts ran; a volley released after its pod drained never runs): %d pods took one job and kept it, %d drained with none; refusals by exit code %v; 0 half-started", per, reps, fired, won, exited, refused)
}

// Job end racing lease expiry, job cancel and SIGTERM: one end wins, the
// rest are refused cleanly; the job's process gets one SIGTERM per phase;
// the job ends (and its secrets are wiped) once; PID 1 never panics.
func TestStressEndRaces(t *testing.T) {
	reps := scale(4, 40)
	ends := 0
	for rep := 0; rep < reps; rep++ {
		sigterm := rep%2 == 1
		w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "1s"}})
		id := fmt.Sprintf("race-%d", rep)
		const ttl = 3 * time.Second
		protoStart(t, w, protoSpec{ID: id, Token: "tok-" + randHex(8), LeaseTTL: ttl.String()})
		r := w.WP(t, "", "job", "run", "--job", id, "--detach", "--stage", "victim", "--", sigcountInRootfs, "/tmp/terms")
		started := time.Now() // that call renewed the lease last
		require.Equal(t, 0, r.ExitCode, r.String())
		waitProc(t, w.Container, "sigcount /tmp/terms")
		time.Sleep(time.Until(started.Add(ttl - 100*time.Millisecond))) // the lease expires at ttl
		var wg sync.WaitGroup
		codes := make([]int, 3)
		for k, args := range [][]string{{"job", "end", "--job", id}, {"job", "cancel", "--job", id}, {"job", "end"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[k] = w.ExecWith(t, ExecOpts{Timeout: time.Minute}, append([]string{warmpodInRootfs}, args...)...).ExitCode
			}()
		}
		if sigterm {
			w.Kill(t, "TERM")
		}
		wg.Wait()
		for _, c := range codes {
			assert.Contains(t, []int{0, exitUnavailable, exitTempFail, 137, 143, 255}, c, "rep %d: exit codes %v", rep, codes)
		}
		if sigterm {
			code, err := w.Wait(30 * time.Second)
			require.NoError(t, err)
			assert.Equal(t, 143, code)
		} else {
			Eventually(t, 10*time.Second, 100*time.Millisecond, "the job is over", func() (bool, string) {
				st, err := protoHTTPStatus(w)
				return err == nil && st["state"] == "idle", fmt.Sprint(st, err)
			})
		}
		b, _ := os.ReadFile(filepath.Join(w.Rootfs, "tmp/terms"))
		assert.LessOrEqual(t, strings.Count(string(b), "terminated"), 1, "rep %d: the job's process got more than one SIGTERM: %q", rep, b)
		if !sigterm {
			// The status turns idle as the job ends; its "job ended" line
			// reaches our copy of stderr through a pipe a moment later.
			Eventually(t, 10*time.Second, 50*time.Millisecond, "the job's end is logged", func() (bool, string) {
				return strings.Contains(w.Stderr(), "job ended"), ""
			})
		}
		log := w.Stderr()
		assert.NotContains(t, log, "panic", "rep %d", rep)
		n := strings.Count(log, "job ended")
		if !sigterm {
			assert.Equal(t, 1, n, "rep %d: the job ended %d times\n%s", rep, n, log)
		}
		ends += n
	}
	figure(t, "races: job end vs lease expiry vs job cancel (vs SIGTERM every other run), %d runs: each job ended at most once (%d ends), ≤ 1 SIGTERM per process, no panic", reps, ends)
}

// ---------------------------------------------------------------------------
// 3. Faults

func TestStressFaults(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "1s"}, Container: Opts{EditSpec: func(spec map[string]any) {
		// A small /run, so that a job can fill its tmpfs.
		mounts := spec["mounts"].([]any)
		for _, m := range mounts {
			if mm := m.(map[string]any); mm["destination"] == "/run" {
				mm["options"] = []string{"nosuid", "nodev", "mode=755", "size=8m"}
			}
		}
	}}})
	probeOK := func(why string) {
		t.Helper()
		code, err := HTTPGet(w.URL("/livez"))
		require.NoError(t, err, why)
		require.Equal(t, 200, code, why)
	}
	var faults []string

	// The job shell SIGKILLed mid-stage: the stage goes on, a new job
	// shell comes, PID 1 answers.
	protoStart(t, w, protoSpec{ID: "f1", Token: "tok-" + randHex(8)})
	const slow = "sleep 2; echo stage-done\n"
	stage := w.ExecAsync(t, ExecOpts{Stdin: slow, Timeout: time.Minute},
		warmpodInRootfs, "job", "stage", "--job", "f1", "--stage", "s", "--size", strconv.Itoa(len(slow)), "--sha256", sha256Hex(slow))
	shell := int(w.Status(t)["shell_pid"].(float64))
	_, _, code := w.Exec(t, "", "kill", "-9", strconv.Itoa(shell))
	require.Equal(t, 0, code)
	r := <-stage
	assert.Equal(t, 0, r.ExitCode, r.String())
	assert.Equal(t, "stage-done\n", r.Stdout)
	Eventually(t, 10*time.Second, 100*time.Millisecond, "a new job shell", func() (bool, string) {
		v, _ := w.Status(t)["shell_pid"].(float64)
		return int(v) > 1 && int(v) != shell, fmt.Sprint(v)
	})
	probeOK("after the job shell was killed")
	faults = append(faults, "job shell SIGKILLed mid-stage: stage completed")

	// The job's tmpfs full (its directory there, the file variables';
	// TMPDIR is on the container's disk): the job end still wipes it,
	// the next job starts.
	r = w.WP(t, "", "job", "run", "--job", "f1", "--", "sh", "-c", `dd if=/dev/zero of=/run/warmpod/jobs/f1/fill bs=1M count=100 2>&1; df /run | tail -1`)
	assert.Contains(t, r.Stdout, "No space left", r.String())
	r = w.ExecWith(t, ExecOpts{Stdin: "echo x\n"}, warmpodInRootfs, "job", "stage", "--job", "f1", "--stage", "full", "--size", "7", "--sha256", sha256Hex("echo x\n"))
	assert.Contains(t, []int{0, exitDataErr, 70, 74}, r.ExitCode, "a stage on a full tmpfs: %s", r)
	probeOK("with the tmpfs full")
	protoEnd(t, w)
	protoStart(t, w, protoSpec{ID: "f2", Token: "tok-" + randHex(8)})
	faults = append(faults, fmt.Sprintf("tmpfs full: stage exit %d, job end freed it, next job started", r.ExitCode))

	// The exec client killed mid-`job start` (the spec half sent): PID 1
	// is unchanged and the next start works.
	protoEnd(t, w)
	pr, pw := io.Pipe()
	start := w.ExecAsync(t, ExecOpts{StdinR: pr, Timeout: time.Minute}, warmpodInRootfs, "job", "start")
	_, _ = pw.Write([]byte(`{"id":"half","tok`))
	p := waitProc(t, w.Container, "job start")
	_, _, _ = w.Exec(t, "", "kill", "-9", strconv.Itoa(p.PID))
	_ = pr.Close()
	<-start
	st, err := protoHTTPStatus(w)
	require.NoError(t, err)
	assert.Equal(t, "idle", st["state"], "a killed job start changed the state")
	protoStart(t, w, protoSpec{ID: "f3", Token: "tok-" + randHex(8)})
	faults = append(faults, "exec client killed mid-job start: state unchanged")

	// Processes exiting during the /proc scan: a fork storm of short-lived
	// processes while the job ends.
	r = w.WP(t, "", "job", "run", "--job", "f3", "--detach", "--stage", "storm", "--", "sh", "-c", "while :; do true & done")
	require.Equal(t, 0, r.ExitCode, r.String())
	time.Sleep(time.Second)
	protoEnd(t, w)
	procs, zombies := leftovers(t, w)
	Eventually(t, 10*time.Second, 200*time.Millisecond, "the storm is gone", func() (bool, string) {
		procs, zombies = leftovers(t, w)
		return len(procs) == 0 && zombies == 0, formatPS(procs)
	})
	probeOK("after the fork storm")
	faults = append(faults, "fork storm during job end: 0 survivors")

	// Bad requests get their documented codes.
	r = w.JobStart(t, "{not json\n")
	assert.Equal(t, exitDataErr, r.ExitCode, r.String())
	r = w.WP(t, "", "job", "end")
	assert.Equal(t, exitUnavailable, r.ExitCode, r.String())
	r = w.WP(t, "", "job", "nonsense")
	assert.Equal(t, 2, r.ExitCode, r.String())
	probeOK("at the end")
	assert.NotContains(t, w.Stderr(), "panic")
	figure(t, "faults: %s; PID 1 alive and live throughout", strings.Join(faults, "; "))
}

// PID 1's stdout closed (the log collector gone): PID 1 stays up, serves
// jobs and probes; SIGTERM during a job start ends the pod cleanly.
func TestStressClosedStdoutAndSIGTERMDuringStart(t *testing.T) {
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "1s"}, Container: Opts{Stdout: pw}})
	_ = pw.Close()
	_ = pr.Close()
	w.WriteLine(t, "echo to-a-closed-stdout; echo again")
	protoStart(t, w, protoSpec{ID: "c1", Token: "tok-" + randHex(8)})
	r := w.WP(t, "", "job", "run", "--job", "c1", "--", "sh", "-c", "echo hi")
	assert.Equal(t, 0, r.ExitCode, r.String())
	protoEnd(t, w)
	code, err := HTTPGet(w.URL("/livez"))
	require.NoError(t, err)
	assert.Equal(t, 200, code)

	token := "tok-sigterm-" + randHex(8)
	res := make(chan ExecResult, 1)
	go func() {
		res <- w.ExecWith(t, ExecOpts{Stdin: protoSpec{ID: "c2", Token: token}.line(t)}, warmpodInRootfs, "job", "start")
	}()
	time.Sleep(30 * time.Millisecond)
	w.Kill(t, "TERM")
	exit, err := w.Wait(30 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 143, exit)
	sr := <-res
	// The start may have answered (0), been refused as the pod drains
	// (69, 75), or been killed by the shutdown: 143 when the sweep's
	// SIGTERM found it before it was a warmpod client (runc's exec
	// process still starting, so not spared as a client is), 137 by the
	// grace period's SIGKILL or the namespace's end, 255 from runc when
	// the container went first. Which one is a race of the 30 ms above;
	// what must hold whichever it is comes next: no token left on disk.
	assert.Contains(t, []int{0, exitUnavailable, exitTempFail, 137, 143, 255}, sr.ExitCode, sr.String())
	var holders []string
	_ = filepath.WalkDir(w.Rootfs, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), token) {
				holders = append(holders, p)
			}
		}
		return nil
	})
	assert.Empty(t, holders, "the token of a start cut by SIGTERM stayed on disk")
	assert.NotContains(t, w.Stderr(), "panic")
	figure(t, "faults: PID 1's stdout closed: jobs and probes unaffected; SIGTERM during job start: exit 143, start exit %d, token on disk: %d files", sr.ExitCode, len(holders))
}

// ---------------------------------------------------------------------------
// 4. Floods

// controlSocket of a running container, reached from the host through its
// PID 1's root.
func hostSocket(t testing.TB, w *Warmpod) string {
	return fmt.Sprintf("/proc/%d/root%s", w.HostPID(t), controlSocket)
}

func TestStressFloods(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "1s"}, Cmd: []string{"/bin/sh", "-c", "exec cat >/dev/null"}})
	protoStart(t, w, protoSpec{ID: "fl", Token: "tok-" + randHex(8)})
	rss0, _ := pid1Usage(t, w)
	sock := hostSocket(t, w)
	hostPID := w.HostPID(t)
	var maxRSS atomic.Int64
	stopSample := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSample:
				return
			case <-time.After(100 * time.Millisecond):
				if rss, _ := pid1UsageQuiet(hostPID); int64(rss) > maxRSS.Load() {
					maxRSS.Store(int64(rss))
				}
			}
		}
	}()

	// A stage runs through all floods and must be unaffected.
	script := "i=0; while [ $i -lt 20 ]; do echo tick-$i; i=$((i+1)); sleep 0.5; done\n"
	stage := w.ExecAsync(t, ExecOpts{Stdin: script, Timeout: 5 * time.Minute}, warmpodInRootfs, "job", "stage", "--job", "fl", "--stage", "steady",
		"--size", strconv.Itoa(len(script)), "--sha256", sha256Hex(script))

	// Control socket: silent connections, oversized frames, garbage.
	conns := scale(300, 1000)
	var opened []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	refusedFast := atomic.Int64{}
	// One frame for every oversized write: a copy per connection would
	// have this race-instrumented process allocate and collect 400 MB
	// while it measures the probes, and its own GC stalls would be
	// counted as PID 1's latency.
	oversized := []byte(`{"op":"job.start","spec":"` + strings.Repeat("A", 2<<20))
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("unix", sock, 5*time.Second)
			if err != nil {
				return
			}
			mu.Lock()
			opened = append(opened, c)
			mu.Unlock()
			switch i % 3 {
			case 1: // oversized frame
				_, _ = c.Write(oversized)
			case 2: // garbage
				_, _ = c.Write([]byte("\x00\xff garbage\n"))
			}
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			if l, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.Contains(l, `"code":75`) {
				refusedFast.Add(1)
			}
		}()
	}
	// Probes during the flood.
	probeLat := probeLoad(t, w, scale(5, 30), 10000)
	wg.Wait()
	mu.Lock()
	for _, c := range opened {
		_ = c.Close()
	}
	mu.Unlock()
	// A legitimate call works again once the flood is over.
	Eventually(t, 15*time.Second, 200*time.Millisecond, "control calls answered after the flood", func() (bool, string) {
		r := w.ExecWith(t, ExecOpts{}, warmpodInRootfs, "status")
		return r.ExitCode == 0, r.String()
	})

	// 10 MB/s of stdin for a while.
	secs := scale(5, 30)
	chunk := make([]byte, 1<<20)
	t0 := time.Now()
	var sent int64
	for time.Since(t0) < time.Duration(secs)*time.Second {
		n, err := w.Stdin.Write(chunk)
		require.NoError(t, err)
		sent += int64(n)
		if ahead := time.Duration(sent/(10<<20))*time.Second - time.Since(t0); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	mbps := float64(sent) / (1 << 20) / time.Since(t0).Seconds()

	r := <-stage
	close(stopSample)
	<-sampled
	assert.Equal(t, 0, r.ExitCode, r.String())
	assert.Equal(t, 20, strings.Count(r.Stdout, "tick-"), "the stage's output was affected")
	rss1, _ := pid1Usage(t, w)
	sort.Slice(probeLat.lat, func(i, j int) bool { return probeLat.lat[i] < probeLat.lat[j] })
	p99 := probeLat.lat[len(probeLat.lat)*99/100]
	maxLat := probeLat.lat[len(probeLat.lat)-1]
	// The kubelet's probe timeout is 1 s. The full run (30 s, every core
	// saturated by the floods and this test's own client) holds every
	// probe under it and the p99 under 100 ms. The short run in make test
	// may share the machine with other packages' race-detector tests:
	// beside four of them it saw a max of 904 ms, so it allows 2 s for a
	// probe (the kubelet acts on failureThreshold, 3 timeouts in a row,
	// not one) and 250 ms at the p99. Outliers of 1.5-2.9 s and EOFs on
	// new connections that CI runs saw came from this process, not PID 1:
	// a copy of the 2 MiB frame per connection, 400 MB to allocate and
	// collect under the race detector, stalled the probe client; the old
	// net/http build showed the same. With one shared frame, alone:
	// max 110-253 ms, p99 10-17 ms, in 13 runs.
	limit, p99Limit := 2*time.Second, 250*time.Millisecond
	if stressFull() {
		limit, p99Limit = time.Second, 100*time.Millisecond
	}
	assert.Less(t, p99, p99Limit, "probe p99")
	assert.Less(t, maxLat, limit, "a probe took too long (%d new connections, the slowest connect took %s)", probeLat.dials, probeLat.dialMax)
	assert.Zero(t, probeLat.errors, "probe errors: %q", probeLat.failed)
	assert.Less(t, maxRSS.Load(), int64(128<<10), "PID 1's RSS went past the 128 MiB bound")
	figure(t, "floods: %d control connections (silent, 2 MiB frames, garbage; %d refused at once with 75), %d probe requests in %d s (%.0f/s achieved of 10,000/s asked, p99 %s, max %s, %d errors; %d new connections, slowest connect %s), %.1f MB/s stdin for %d s; stage unaffected; PID 1 VmRSS %d KiB before, max %d KiB during, %d KiB after",
		conns, refusedFast.Load(), len(probeLat.lat), probeLat.secs, float64(len(probeLat.lat))/float64(probeLat.secs), p99.Round(time.Microsecond), maxLat.Round(time.Microsecond), probeLat.errors, probeLat.dials, probeLat.dialMax.Round(time.Microsecond), mbps, secs, rss0, maxRSS.Load(), rss1)
}

// pid1UsageQuiet reads the VmRSS (KiB) of host process pid, false when
// it is gone.
func pid1UsageQuiet(pid int) (int, bool) {
	out, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n, true
		}
	}
	return 0, false
}

type probeResult struct {
	lat     []time.Duration
	errors  int
	secs    int
	dials   int           // requests that opened a new TCP connection
	dialMax time.Duration // the longest connect(2) among them
	failed  []string      // the first few errors: what, after how long, on which connection
}

// probeLoad sends GET /livez at rate per second for secs seconds and
// records each latency: most workers over keep-alive connections, one in
// eight over a new connection each time, as the kubelet's HTTP prober
// does (it disables keep-alives), so that a stalled accept loop shows.
func probeLoad(t testing.TB, w *Warmpod, secs, rate int) probeResult {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var mu sync.Mutex
	res := probeResult{secs: secs}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
	defer cancel()
	const workers = 32
	var wg sync.WaitGroup
	interval := time.Duration(workers) * time.Second / time.Duration(rate)
	for k := 0; k < workers; k++ {
		wg.Add(1)
		c := client
		if k%8 == 0 {
			c = fresh
		}
		go func() {
			defer wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				t0 := time.Now()
				// The transport may dial on its own goroutine and
				// finish that dial after Do has returned (an idle
				// connection won the race), so the hooks write an
				// atomic.
				var dialed atomic.Int64
				var reused atomic.Bool
				trace := &httptrace.ClientTrace{
					ConnectStart: func(string, string) { dialed.Add(-int64(time.Since(t0))) },
					ConnectDone:  func(string, string, error) { dialed.Add(int64(time.Since(t0))) },
					GotConn:      func(i httptrace.GotConnInfo) { reused.Store(i.Reused) },
				}
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, w.URL("/livez"), nil)
				resp, err := c.Do(req)
				d := time.Since(t0)
				mu.Lock()
				switch {
				case ctx.Err() != nil && d < time.Second:
					// Cut by the end of the window: not an answer,
					// unless it had waited longer than the kubelet's
					// probe timeout already (a PID 1 hung in the last
					// second would otherwise show nothing).
				case err != nil || resp.StatusCode != 200:
					res.errors++
					if len(res.failed) < 5 {
						what := fmt.Sprint(err)
						if err == nil {
							what = resp.Status
						}
						res.failed = append(res.failed, fmt.Sprintf("%s after %s (reused connection %v, connect %s)",
							what, d.Round(time.Millisecond), reused.Load(), time.Duration(dialed.Load()).Round(time.Millisecond)))
					}
				default:
					res.lat = append(res.lat, d)
					if d := time.Duration(dialed.Load()); d != 0 {
						res.dials++
						res.dialMax = max(res.dialMax, d)
					}
				}
				mu.Unlock()
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(res.lat)
	require.NotEmpty(t, res.lat, "no probe answered")
	return res
}

// ---------------------------------------------------------------------------
// 6. Job code attacking PID 1

// Job code (as root and as --job-user) tries PID 1's environ, memory and
// fds, its control socket, and the warmpod binary on disk. The figure
// lists what held; docs/explanations/guarantees-and-threats.md says why and which
// securityContext closes the rest.
func TestStressJobCodeAttacksPID1(t *testing.T) {
	attack := `for f in /proc/1/environ /proc/1/mem /proc/1/maps; do
  if head -c 1 "$f" >/dev/null 2>&1; then echo "read $f: YES"; else echo "read $f: no"; fi
done
if readlink /proc/1/fd/0 >/dev/null 2>&1; then echo "follow /proc/1/fd: YES"; else echo "follow /proc/1/fd: no"; fi
if ls -l /proc/1/exe >/dev/null 2>&1 && cat /proc/1/exe >/dev/null 2>&1; then echo "open /proc/1/exe: YES"; else echo "open /proc/1/exe: no"; fi
if /usr/local/bin/warmpod job env >/dev/null 2>&1; then echo "control socket: YES"; else echo "control socket: no"; fi
if cp /bin/busybox /usr/local/bin/warmpod.new 2>/dev/null && mv /usr/local/bin/warmpod.new /usr/local/bin/warmpod 2>/dev/null; then echo "replace binary: YES"; else rm -f /usr/local/bin/warmpod.new; echo "replace binary: no"; fi
`
	results := map[string]string{}
	for _, mode := range []struct {
		who, user string
		roBin     bool
	}{{"root", "", false}, {"root, binary read-only", "", true}, {"job user", "1000:1000", false}} {
		flags := []string{"--grace", "1s"}
		if mode.user != "" {
			flags = append(flags, "--job-user", mode.user)
		}
		var edit func(map[string]any)
		if mode.roBin {
			// As deploy/pool.yaml mounts it: the binary on a
			// read-only volume.
			edit = func(spec map[string]any) {
				spec["mounts"] = append(spec["mounts"].([]any), map[string]any{
					"destination": "/usr/local/bin", "type": "bind", "source": "rootfs/usr/local/bin",
					"options": []string{"rbind", "ro"},
				})
			}
		}
		w := protoStartWarmpodCapsEdit(t, wpOpts{Flags: flags}, edit)
		user, who := mode.user, mode.who
		token := "tok-attack-" + randHex(8)
		protoStart(t, w, protoSpec{ID: "atk", Token: token})
		r := stageCall(t, w, "atk", "attack", attack)
		require.Equal(t, 0, r.ExitCode, r.String())
		results[who] = strings.ReplaceAll(strings.TrimSpace(r.Stdout), "\n", ", ")
		// What holds in both modes: PID 1's memory, environ and fds
		// (not dumpable; no CAP_SYS_PTRACE in a default container).
		for _, l := range []string{"read /proc/1/environ: no", "read /proc/1/mem: no", "follow /proc/1/fd: no", "open /proc/1/exe: no"} {
			assert.Contains(t, r.Stdout, l, who)
		}
		if user != "" {
			assert.Contains(t, r.Stdout, "control socket: no", who)
		}
		if user != "" || mode.roBin {
			assert.Contains(t, r.Stdout, "replace binary: no", who)
		}
		if strings.Contains(r.Stdout, "replace binary: YES") {
			// Not defended for root job code on a writable binary:
			// put the real one back so the executor's calls work.
			require.NoError(t, runc.CopyFile(warmpodBin, filepath.Join(w.Rootfs, warmpodInRootfs), 0o755))
		}
		// Nothing of this job is left for the next, whatever it tried.
		protoEnd(t, w)
		assert.Empty(t, grepContainer(t, w, token, "/run", "/tmp"), who)
	}
	figure(t, "job code attacking PID 1: as root: %s; as root with the binary on a read-only mount: %s; as the job user: %s", results["root"], results["root, binary read-only"], results["job user"])
}
