package e2e

// End-to-end tests of the job protocol (issue "Step 3"): isolation between
// consecutive jobs, claim races, the lease TTL heartbeat, stages and their
// log, job put, --max-jobs, replay / config_hash / scope, cancel,
// --stdin-when-idle and --job-user. Every test runs warmpod as PID 1 of a
// real runc container (harness_test.go, warmpod_test.go).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// protoSpec is a job spec as `warmpod job start` reads it.
type protoSpec struct {
	ID         string   `json:"id"`
	Nonce      string   `json:"nonce,omitempty"`
	Token      string   `json:"token,omitempty"`
	Timeout    string   `json:"timeout,omitempty"`
	LeaseTTL   string   `json:"lease_ttl,omitempty"`
	ConfigHash string   `json:"config_hash,omitempty"`
	Scope      string   `json:"scope,omitempty"`
	Variables  []jobVar `json:"variables"`
	// CleanupPaths are directory patterns wiped at job end.
	CleanupPaths []string `json:"cleanup_paths,omitempty"`
}

func (s protoSpec) line(t testing.TB) string {
	t.Helper()
	if s.Variables == nil {
		s.Variables = []jobVar{}
	}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b) + "\n"
}

// protoStart starts a job and requires exit 0 with the documented answer.
func protoStart(t testing.TB, w *Warmpod, s protoSpec) ExecResult {
	t.Helper()
	r := w.JobStart(t, s.line(t))
	require.Equal(t, 0, r.ExitCode, "job start %s: %s", s.ID, r)
	res := decodeJSONLine(t, r.Stdout)
	require.Equal(t, true, res["ok"], r.Stdout)
	require.Equal(t, s.ID, res["job"], r.Stdout)
	require.Equal(t, "busy", res["state"], r.Stdout)
	return r
}

// protoEnd runs `job end` and requires exit 0.
func protoEnd(t testing.TB, w *Warmpod) ExecResult {
	t.Helper()
	r := w.ExecWith(t, ExecOpts{Timeout: 60 * time.Second}, warmpodInRootfs, "job", "end")
	require.NoError(t, r.Err)
	require.Equal(t, 0, r.ExitCode, "job end: %s", r)
	return r
}

// protoHTTPStatus reads GET /status on the probe port. Unlike `warmpod
// status` through runc exec it starts no process in the container, so it is
// neither activity nor a lease renewal.
func protoHTTPStatus(w *Warmpod) (map[string]any, error) {
	resp, err := httpClient.Get(w.URL("/status"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// protoNoMatchRegex turns s into a basic regex that matches s but not its
// own text, so a grep for it does not find its own command line.
func protoNoMatchRegex(s string) string {
	i := len(s) / 2
	return s[:i] + "[" + s[i:i+1] + "]" + s[i+1:]
}

// protoSecretHolders lists every process (but PID 1) whose environ or
// cmdline holds the token, and every file under /run and /tmp holding it.
func protoSecretHolders(t testing.TB, w *Warmpod, token string) string {
	t.Helper()
	script := `pat="$1"
for d in /proc/[0-9]*; do
  [ "${d#/proc/}" = 1 ] && continue
  for f in environ cmdline; do
    if grep -q "$pat" "$d/$f" 2>/dev/null; then
      echo "$d/$f: $(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"
    fi
  done
done
grep -rl "$pat" /run /tmp 2>/dev/null
true`
	r := w.ExecWith(t, ExecOpts{}, "sh", "-c", script, "sh", protoNoMatchRegex(token))
	require.NoError(t, r.Err)
	require.Equal(t, 0, r.ExitCode, r.String())
	return strings.TrimSpace(r.Stdout)
}

// protoRecords splits `job logs` output into records and rebuilds the file
// bytes from start (joblog package documentation); it also returns every
// record's offset.
func protoRecords(t testing.TB, out string, start int64) ([]byte, []int64) {
	t.Helper()
	if out == "" {
		return nil, nil
	}
	require.True(t, strings.HasSuffix(out, "\n"), "job logs output does not end with a newline: ...%q", out[max(0, len(out)-80):])
	var file bytes.Buffer
	var offs []int64
	prev := start
	for i, rec := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		sp := strings.IndexByte(rec, ' ')
		require.Greater(t, sp, 0, "record %d has no offset: %.80q", i, rec)
		off, err := strconv.ParseInt(rec[:sp], 10, 64)
		require.NoError(t, err, "record %d: %.80q", i, rec)
		line := rec[sp+1:]
		switch n := off - prev; {
		case n == int64(len(line))+1:
			file.WriteString(line)
			file.WriteByte('\n')
		case n == int64(len(line)):
			file.WriteString(line)
		default:
			t.Fatalf("record %d: offset %d after %d consumed %d bytes for a line of %d bytes", i, off, prev, n, len(line))
		}
		offs = append(offs, off)
		prev = off
	}
	return file.Bytes(), offs
}

// protoStageJSON decodes a stage document.
type protoStage struct {
	Stage     string `json:"stage"`
	PID       int    `json:"pid"`
	Running   bool   `json:"running"`
	ExitCode  *int   `json:"exit_code"`
	Signal    string `json:"signal"`
	OOMKilled bool   `json:"oom_killed"`
}

func protoDecodeStage(t testing.TB, out string) protoStage {
	t.Helper()
	var st protoStage
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &st), "stage JSON: %q", out)
	return st
}

// protoLogMarkers returns the JSON marker lines of a job log.
func protoLogMarkers(log string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(log, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			if _, ok := m["script"]; ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// protoNoProcs fails unless no process (zombies included) has substr in
// its args, allowing a few seconds for the reaper.
func protoNoProcs(t testing.TB, w *Warmpod, substr, why string) {
	t.Helper()
	Eventually(t, 5*time.Second, 100*time.Millisecond, why, func() (bool, string) {
		ps := w.PS(t)
		for _, p := range ps {
			if strings.Contains(p.Args, substr) {
				return false, formatPS(ps)
			}
		}
		return true, ""
	})
}

// protoStartWarmpodCaps is startWarmpod with the capabilities a container
// runtime grants by default (containerd/Docker: CHOWN, DAC_OVERRIDE,
// FOWNER, FSETID, SETUID, SETGID, ...). `runc spec` grants only AUDIT_WRITE,
// KILL and NET_BIND_SERVICE, with which PID 1 can neither chown the job
// directory nor setuid to --job-user.
func protoStartWarmpodCaps(t *testing.T, o wpOpts) *Warmpod {
	t.Helper()
	return protoStartWarmpodCapsEdit(t, o, nil)
}

// protoStartWarmpodCapsEdit is protoStartWarmpodCaps with a further edit
// of the OCI spec (nil: none).
func protoStartWarmpodCapsEdit(t *testing.T, o wpOpts, more func(map[string]any)) *Warmpod {
	t.Helper()
	requireWarmpod(t)
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	if o.IdleTimeout == "" {
		o.IdleTimeout = "0"
	}
	args := []string{warmpodInRootfs, "--probe-addr", addr, "--idle-timeout", o.IdleTimeout,
		"--stdio", "pipe", "--log-level", "debug", "--max-jobs", "0"}
	args = append(append(args, o.Flags...), "--", "/bin/sh")
	addCaps := []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"}
	edit := func(spec map[string]any) {
		caps := spec["process"].(map[string]any)["capabilities"].(map[string]any)
		for _, set := range []string{"bounding", "effective", "permitted"} {
			list, _ := caps[set].([]any)
			for _, c := range addCaps {
				list = append(list, c)
			}
			caps[set] = list
		}
		if more != nil {
			more(spec)
		}
	}
	w := &Warmpod{Container: Start(t, args, Opts{Env: o.Env, EditSpec: edit}), ProbeAddr: addr}
	Eventually(t, waitLong, 100*time.Millisecond, "warmpod control socket exists", func() (bool, string) {
		if w.Exited() {
			code, _ := w.Wait(0)
			t.Fatalf("warmpod exited during startup with code %d\nstderr:\n%s", code, indent(w.Stderr()))
		}
		r := w.ExecWith(t, ExecOpts{}, "test", "-S", controlSocket)
		return r.ExitCode == 0, r.String()
	})
	return w
}

// ---------------------------------------------------------------------------
// 1. nothing of job 1 reaches job 2

func TestProtocolJobIsolation(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "3s"}})
	tok1 := "tok1-" + randHex(16)
	fileVal := "filevar-" + randHex(8)
	protoStart(t, w, protoSpec{ID: "job1", Token: tok1, Timeout: "1h", Variables: []jobVar{
		{Key: "SECRET_FILE", Value: fileVal, File: true}, fooVar,
	}})

	// Leftovers of job 1.
	r := w.JobRun(t, "sh", "-c", "sleep 1000 >/dev/null 2>&1 &")
	require.Equal(t, 0, r.ExitCode, r.String())
	r = w.JobRun(t, "sh", "-c", `(setsid sh -c "sleep 1001" >/dev/null 2>&1 </dev/null &) &`)
	require.Equal(t, 0, r.ExitCode, r.String())
	w.WriteLine(t, "export LEAK=1")
	w.WriteLine(t, `echo "leak1=[$LEAK]"`)
	w.WaitOutput(t, "leak1=[1]", waitLong)

	r = w.JobRun(t, "sh", "-c", `printf '%s\n%s\n' "$SECRET_FILE" "$TMPDIR"; cat "$SECRET_FILE" >/dev/null && echo job1-data > "$TMPDIR/job1-file"`)
	require.Equal(t, 0, r.ExitCode, r.String())
	paths := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	require.Len(t, paths, 2, r.String())
	fileVar, tmpDir := paths[0], paths[1]
	assert.Equal(t, "/run/warmpod/jobs/job1/SECRET_FILE", fileVar)
	// TMPDIR is on the container's disk (/tmp), not the memory volume of
	// the file variables: a fresh directory per job.
	assert.Regexp(t, `^/tmp/warmpod-job-job1-[0-9]+$`, tmpDir)
	out, _, code := w.Exec(t, "", "sh", "-c", `stat -c '%a %n' /run/warmpod/jobs/job1 "$1" "$2" && cat "$2/job1-file"`, "sh", fileVar, tmpDir)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "700 /run/warmpod/jobs/job1\n", "job dir mode")
	assert.Contains(t, out, "400 "+fileVar+"\n", "file variable mode")
	assert.Contains(t, out, "700 "+tmpDir+"\n", "TMPDIR mode")
	assert.Contains(t, out, "job1-data")

	waitProc(t, w.Container, "sleep 1000")
	waitProc(t, w.Container, "sleep 1001")
	// Positive control: the grep does find the token while job 1 runs.
	require.NotEmpty(t, protoSecretHolders(t, w, tok1), "token search finds nothing while job 1 runs: the check is blind")

	protoEnd(t, w)
	tok2 := "tok2-" + randHex(16)
	protoStart(t, w, protoSpec{ID: "job2", Token: tok2, Timeout: "1h", Variables: []jobVar{fooVar}})

	protoNoProcs(t, w, "sleep", "no sleep of job 1 survives into job 2")
	w.WriteLine(t, `echo "leak2=[$LEAK] tok=[$CI_JOB_TOKEN]"`)
	w.WaitOutput(t, "leak2=[", waitLong)
	assert.Contains(t, w.Stdout(), "leak2=[] tok=["+tok2+"]", "job 2's shell must not see job 1's export")
	for _, p := range []string{fileVar, tmpDir + "/job1-file", tmpDir, "/run/warmpod/jobs/job1"} {
		_, _, code := w.Exec(t, "", "test", "-e", p)
		assert.NotEqual(t, 0, code, "%s still exists in job 2", p)
	}
	r = w.JobRun(t, "sh", "-c", `echo "$TMPDIR"; ls -A "$TMPDIR"; ls -A /tmp`)
	assert.Regexp(t, `^(/tmp/warmpod-job-job2-[0-9]+)\n(warmpod-job-job2-[0-9]+)\n$`, r.Stdout,
		"job 2's TMPDIR must be its own and empty, and /tmp hold nothing of job 1: %s", r)

	assert.Empty(t, protoSecretHolders(t, w, tok1), "job 1's token still present after job end")
	assert.Empty(t, protoSecretHolders(t, w, fileVal), "job 1's file variable value still present after job end")
	assert.NotContains(t, w.Stderr(), tok1, "token in warmpod's log")
}

// ---------------------------------------------------------------------------
// 2. 50 concurrent claims: exactly one wins, 100 rounds

const protoStormScript = `round=$1
i=1
while [ $i -le 50 ]; do
  (
    out=$(printf '{"id":"r%s-%s","token":"t-%s"}\n' "$round" "$i" "$i" | ` + warmpodInRootfs + ` job start 2>&1)
    rc=$?
    echo "rc $i $rc $(echo $out)"
  ) &
  i=$((i+1))
done
wait
out=$(` + warmpodInRootfs + ` job end 2>&1)
echo "end $? $out"
`

func TestProtocolConcurrentStartStorm(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	const rounds, n = 100, 50
	start := time.Now()
	for round := 1; round <= rounds; round++ {
		r := w.ExecWith(t, ExecOpts{Timeout: 120 * time.Second}, "sh", "-c", protoStormScript, "sh", strconv.Itoa(round))
		require.NoError(t, r.Err, "round %d: %s", round, r)
		require.Equal(t, 0, r.ExitCode, "round %d: %s", round, r)
		winners, busy, seen := []string{}, 0, 0
		var other []string
		var endLine string
		for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 3 && f[0] == "rc":
				seen++
				switch f[2] {
				case "0":
					winners = append(winners, fmt.Sprintf("r%d-%s", round, f[1]))
				case "75":
					busy++
				default:
					other = append(other, line)
				}
			case len(f) >= 2 && f[0] == "end":
				endLine = line
			}
		}
		require.Equal(t, n, seen, "round %d: not every job start reported: %s", round, r)
		require.Empty(t, other, "round %d: job starts with an exit other than 0/75", round)
		require.Len(t, winners, 1, "round %d: want exactly one winner, got %v (busy=%d)", round, winners, busy)
		require.Equal(t, n-1, busy, "round %d", round)
		require.True(t, strings.HasPrefix(endLine, "end 0 "), "round %d: job end: %q", round, endLine)
		assert.Contains(t, endLine, `"job":"`+winners[0]+`"`, "round %d: the job ended is not the winner", round)
	}
	t.Logf("%d rounds of %d concurrent job starts in %v", rounds, n, time.Since(start).Round(time.Millisecond))
	st := w.Status(t)
	assert.Equal(t, "idle", st["state"], "%v", st)
	assert.EqualValues(t, rounds, st["jobs_run"], "%v", st)
}

// ---------------------------------------------------------------------------
// 3. a claim racing the idle deadline is either accepted (and the pod stays)
// or refused with 69 (and the pod exits 0), never accepted-then-exited.

// protoClaimScript is written to the idle shell's stdin (the idle shell and
// warmpod's clients are the only processes that do not count as activity,
// so nothing else pushes the idle deadline while it waits). It waits, in a
// warmpod client, for the host to create /tmp/go-R, then fires job starts
// (a new id each) until one returns 0 or 69. The job start client writes
// its JSON answer to the container's stdout itself; it runs in its own
// session because a winning claim replaces this shell and signals its
// process group.
func protoClaimScript(round string) string {
	return warmpodInRootfs + ` job logs --path /tmp/go-` + round + ` --wait-file-timeout 60s --offset 0 >/dev/null 2>&1
i=0
while [ $i -lt 50 ]; do
i=$((i+1))
setsid ` + warmpodInRootfs + ` job start <<EOF
{"id":"c` + round + `-$i","token":"t"}
EOF
rc=$?
echo "claim ` + round + ` $i $rc"
case $rc in 0|69) break ;; esac
done`
}

func TestProtocolClaimAcrossIdleDeadline(t *testing.T) {
	const idle = 3 * time.Second
	won, refused, late := 0, 0, 0
	for rep := 0; rep < 5; rep++ {
		w := startWarmpod(t, wpOpts{IdleTimeout: idle.String(), Flags: []string{"--grace", "2s"}})
		exited := false
		for round := 0; round < 12 && !exited; round++ {
			id := fmt.Sprintf("%d-%d", rep, round)
			written := time.Now()
			for _, l := range strings.Split(protoClaimScript(id), "\n") {
				w.WriteLine(t, l)
			}
			// The idle deadline once PID 1 has seen that input, read
			// without starting anything in the container.
			var deadline time.Time
			Eventually(t, 10*time.Second, 20*time.Millisecond, "idle deadline in /status", func() (bool, string) {
				st, err := protoHTTPStatus(w)
				if err != nil {
					return false, err.Error()
				}
				since, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(st["idle_since"]))
				d, err := time.Parse(time.RFC3339Nano, fmt.Sprint(st["idle_deadline"]))
				if err != nil || st["state"] != "idle" || since.Before(written) {
					return false, fmt.Sprint(st)
				}
				deadline = d
				return true, ""
			})
			// The waiting client polls every 100 ms: the claim reaches PID 1
			// between offset and offset+~110 ms after the deadline.
			offset := time.Duration(mrand.IntN(250)-180) * time.Millisecond
			time.Sleep(time.Until(deadline.Add(offset)))
			require.NoError(t, os.WriteFile(filepath.Join(w.Rootfs, "tmp", "go-"+id), nil, 0o644))

			okLine := `{"job":"c` + id + `-`
			refusedRE := regexp.MustCompile(`claim ` + id + ` \d+ 69`)
			var outcome string
			Eventually(t, 20*time.Second, 10*time.Millisecond, "claim "+id+" answered or pod gone", func() (bool, string) {
				out := w.Stdout()
				switch {
				case strings.Contains(out, okLine) && strings.Contains(out, `"ok":true`):
					outcome = "won"
				case refusedRE.MatchString(out) || strings.Contains(out, `"code":69`):
					outcome = "refused"
				case w.Exited():
					outcome = "gone"
				}
				return outcome != "", out
			})
			t.Logf("rep %d round %d: claim at deadline%+v: %s", rep, round, offset, outcome)
			switch outcome {
			case "won":
				won++
				r := w.ExecWith(t, ExecOpts{Timeout: 60 * time.Second}, warmpodInRootfs, "job", "end")
				require.NoError(t, r.Err, "rep %d round %d: job end after an accepted claim: %s\nstderr:\n%s", rep, round, r, w.Stderr())
				require.Equal(t, 0, r.ExitCode, "rep %d round %d: the claim won but job end failed (PID 1 drained under a held lease): %s\nstderr:\n%s", rep, round, r, w.Stderr())
				time.Sleep(300 * time.Millisecond)
				require.False(t, w.Exited(), "rep %d round %d: pod exited right after an accepted claim", rep, round)
				st, err := protoHTTPStatus(w)
				require.NoError(t, err)
				require.Equal(t, "idle", st["state"], "rep %d round %d: after job end: %v", rep, round, st)
			case "refused":
				refused++
				assert.NotContains(t, w.Stdout(), `"ok":true`, "rep %d: a claim was accepted and another refused", rep)
				code, err := w.Wait(15 * time.Second)
				require.NoError(t, err, "rep %d: claim refused 69 but the pod did not exit", rep)
				require.Equal(t, 0, code, "rep %d: exit code after idle drain", rep)
				exited = true
			case "gone":
				// The drain killed the waiting shell (or the claim client
				// while it waited for its answer) before any claim was
				// accepted; an accepted one would show in the log check
				// below ("job started" without "job ended").
				late++
				assert.NotContains(t, w.Stdout(), okLine, "rep %d: claim accepted, then the pod exited", rep)
				code, _ := w.Wait(0)
				require.Equal(t, 0, code, "rep %d: exit code after idle drain", rep)
				exited = true
			}
		}
		if !exited {
			w.Kill(t, "TERM")
			_, _ = w.Wait(15 * time.Second)
		}
		// Second witness, warmpod's own log: every job started was ended
		// before PID 1 exited.
		logs := w.Stderr()
		for _, m := range regexp.MustCompile(`msg="job started" job=(\S+)`).FindAllStringSubmatch(logs, -1) {
			assert.Contains(t, logs, `msg="job ended" job=`+m[1]+" ", "rep %d: job %s started but never ended before exit:\n%s", rep, m[1], logs)
		}
	}
	t.Logf("claims won %d, refused (69) %d, pod gone before the claim arrived %d", won, refused, late)
	assert.Greater(t, won+refused, 0, "no claim ever reached PID 1 near the deadline")
}

// ---------------------------------------------------------------------------
// 4. lease_ttl: the job ends within TTL (+ ~1 s) of the last heartbeat

func TestProtocolLeaseTTL(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "2s"}})
	const ttl = 3 * time.Second
	token := "tok-ttl-" + randHex(8)
	protoStart(t, w, protoSpec{ID: "ttl1", Token: token, Timeout: "1h", LeaseTTL: ttl.String()})
	r := w.WP(t, "", "job", "run", "--job", "ttl1", "--", "sh", "-c", "sleep 1000 >/dev/null 2>&1 &")
	require.Equal(t, 0, r.ExitCode, r.String())
	waitProc(t, w.Container, "sleep 1000")

	// Heartbeats for 5 s (longer than the TTL): the lease must hold.
	var lastBeat time.Time
	for begin := time.Now(); time.Since(begin) < 5*time.Second; {
		r := w.WP(t, "", "job", "status", "--job", "ttl1")
		require.Equal(t, 0, r.ExitCode, "job status --job renews the lease: %s", r)
		lastBeat = time.Now() // the renewal happened before this point
		time.Sleep(time.Second)
	}
	st, err := protoHTTPStatus(w)
	require.NoError(t, err)
	require.Equal(t, "busy", st["state"], "lease lost although renewed by job status: %v", st)

	// job logs --follow --job renews while it runs: follow for 5 s.
	r = w.ExecWith(t, ExecOpts{Timeout: 30 * time.Second}, "timeout", "5", warmpodInRootfs, "job", "logs", "--follow", "--offset", "0", "--job", "ttl1")
	require.NoError(t, r.Err)
	lastBeat = time.Now()
	st, err = protoHTTPStatus(w)
	require.NoError(t, err)
	require.Equal(t, "busy", st["state"], "lease lost although renewed by job logs --follow (%s): %v", r, st)

	// Stop renewing: idle within TTL + 2 s of the last heartbeat.
	var idleAt time.Time
	Eventually(t, ttl+15*time.Second, 50*time.Millisecond, "lease_ttl job ended", func() (bool, string) {
		st, err := protoHTTPStatus(w)
		if err != nil {
			return false, err.Error()
		}
		if st["state"] == "idle" {
			idleAt = time.Now()
			return true, ""
		}
		return false, fmt.Sprint(st)
	})
	took := idleAt.Sub(lastBeat)
	t.Logf("idle %v after the last heartbeat (ttl %v)", took.Round(time.Millisecond), ttl)
	assert.LessOrEqual(t, took, ttl+2*time.Second, "lease_ttl job not ended within TTL + 2 s")
	assert.Empty(t, w.findProcs(t, "sleep 1000"), "job process survived the lease expiry")
	r = w.WP(t, "", "job", "env")
	assert.Equal(t, exitUnavailable, r.ExitCode, "job env after lease expiry: %s", r)
	_, _, code := w.Exec(t, "", "test", "-e", "/run/warmpod/jobs/ttl1")
	assert.NotEqual(t, 0, code, "job dir still exists after lease expiry")
	assert.Empty(t, protoSecretHolders(t, w, token), "token still present after lease expiry")
}

// ---------------------------------------------------------------------------
// 5. job logs resumed at random offsets of a 5 MB log

func TestProtocolLogsResume(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	protoStart(t, w, protoSpec{ID: "logs1", Token: "tok-" + randHex(8), Timeout: "1h"})
	// ~4.9 MB of base64 lines, lines longer than 64 KiB (split records), CRs,
	// and a last line without a newline.
	script := `head -c 3700000 /dev/urandom | base64
for i in 1 2 3; do head -c 100000 /dev/urandom | base64 | tr -d '\n'; echo; done
printf 'cr\rline\r\n\r\n\n'
printf 'partial-last-line'`
	r := w.WP(t, "", "job", "run", "--detach", "--stage", "big", "--", "sh", "-c", script)
	require.Equal(t, 0, r.ExitCode, r.String())
	r = w.ExecWith(t, ExecOpts{Timeout: 3 * time.Minute}, warmpodInRootfs, "job", "wait", "--stage", "big", "--timeout", "150s")
	require.NoError(t, r.Err)
	require.Equal(t, 0, r.ExitCode, "job wait: %s", r)
	st := protoDecodeStage(t, r.Stdout)
	require.NotNil(t, st.ExitCode, r.Stdout)
	require.Equal(t, 0, *st.ExitCode, r.Stdout)

	full := w.ExecWith(t, ExecOpts{Timeout: 2 * time.Minute}, warmpodInRootfs, "job", "logs", "--offset", "0")
	require.NoError(t, full.Err)
	require.Equal(t, 0, full.ExitCode, "job logs: exit %d stderr %s", full.ExitCode, full.Stderr)
	content, offs := protoRecords(t, full.Stdout, 0)
	require.Greater(t, len(content), 5_000_000, "log too small")

	// The records rebuild the log file itself.
	raw := w.ExecWith(t, ExecOpts{Timeout: 2 * time.Minute}, "cat", "/run/warmpod/logs/logs1.log")
	require.NoError(t, raw.Err)
	require.Equal(t, 0, raw.ExitCode, raw.Stderr)
	require.True(t, raw.Stdout == string(content), "records rebuild %d bytes, the log file has %d", len(content), len(raw.Stdout))
	markers := protoLogMarkers(raw.Stdout)
	require.Len(t, markers, 2, "marker lines in the log")
	assert.Equal(t, map[string]any{"script": "big"}, markers[0])
	assert.Equal(t, map[string]any{"script": "big", "command_exit_code": float64(0)}, markers[1])
	assert.True(t, strings.HasSuffix(raw.Stdout, "partial-last-line\n"+`{"command_exit_code":0,"script":"big"}`+"\n") ||
		strings.HasSuffix(raw.Stdout, "partial-last-line\n"+`{"command_exit_code": 0, "script": "big"}`+"\n"),
		"end marker must stand on its own line: ...%q", raw.Stdout[max(0, len(raw.Stdout)-100):])

	var long int
	for i := range offs {
		prev := int64(0)
		if i > 0 {
			prev = offs[i-1]
		}
		if offs[i]-prev == 64<<10 {
			long++
		}
	}
	assert.Greater(t, long, 0, "no record was a split long line")

	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 42))
	picks := []int64{}
	for i := 0; i < 20; i++ {
		picks = append(picks, offs[rng.IntN(len(offs))])
	}
	sort.Slice(picks, func(i, j int) bool { return picks[i] < picks[j] })
	for _, off := range picks {
		r := w.ExecWith(t, ExecOpts{Timeout: 2 * time.Minute}, warmpodInRootfs, "job", "logs", "--offset", strconv.FormatInt(off, 10))
		require.NoError(t, r.Err)
		require.Equal(t, 0, r.ExitCode, "job logs --offset %d: %s", off, r.Stderr)
		tail, _ := protoRecords(t, r.Stdout, off)
		if !bytes.Equal(tail, content[off:]) {
			t.Errorf("job logs --offset %d rebuilds %d bytes, want the last %d bytes of the log (equal: %v)", off, len(tail), len(content)-int(off), bytes.Equal(tail, content[off:]))
		}
	}
	t.Logf("log %d bytes, %d records, %d split pieces; resumed at %v", len(content), len(offs), long, picks)
}

// ---------------------------------------------------------------------------
// 6. a stage ends when its leader exits, whatever it left in the background

func TestProtocolStageBackgroundChild(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--grace", "2s"}})
	protoStart(t, w, protoSpec{ID: "st1", Token: "tok-" + randHex(8), Timeout: "1h"})
	r := w.WP(t, "", "job", "run", "--detach", "--stage", "s1", "--", "sh", "-c", "sleep 600 & echo started; exit 3")
	require.Equal(t, 0, r.ExitCode, r.String())
	var started map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &started), r.Stdout)
	assert.Equal(t, "s1", started["stage"], r.Stdout)
	assert.Greater(t, started["pid"], float64(1), r.Stdout)

	t0 := time.Now()
	r = w.WP(t, "", "job", "wait", "--stage", "s1", "--timeout", "2s")
	t.Logf("job wait returned after %v", time.Since(t0).Round(time.Millisecond))
	require.Equal(t, 0, r.ExitCode, "job wait --timeout 2s: the stage did not end within 2 s: %s", r)
	st := protoDecodeStage(t, r.Stdout)
	assert.False(t, st.Running, r.Stdout)
	require.NotNil(t, st.ExitCode, r.Stdout)
	assert.Equal(t, 3, *st.ExitCode, r.Stdout)

	logs := w.WP(t, "", "job", "logs", "--offset", "0")
	require.Equal(t, 0, logs.ExitCode, logs.String())
	content, _ := protoRecords(t, logs.Stdout, 0)
	markers := protoLogMarkers(string(content))
	require.Len(t, markers, 2, "log:\n%s", content)
	assert.Equal(t, map[string]any{"script": "s1"}, markers[0])
	assert.Equal(t, map[string]any{"script": "s1", "command_exit_code": float64(3)}, markers[1])
	lines := strings.Split(strings.TrimSuffix(string(content), "\n"), "\n")
	require.Len(t, lines, 3, "log:\n%s", content)
	assert.Equal(t, "started", lines[1])
	t.Logf("log:\n%s", content)

	waitProc(t, w.Container, "sleep 600")
	// A follower sees the log disappear at job end: exit 100.
	follow := w.ExecAsync(t, ExecOpts{Timeout: 60 * time.Second}, warmpodInRootfs, "job", "logs", "--follow", "--offset", "0")
	Eventually(t, 10*time.Second, 50*time.Millisecond, "job logs --follow running", func() (bool, string) {
		return len(w.findProcs(t, "job logs --follow")) > 0, formatPS(w.PS(t))
	})
	protoEnd(t, w)
	protoNoProcs(t, w, "sleep 600", "the stage's background sleep is killed at job end")
	select {
	case r := <-follow:
		require.NoError(t, r.Err)
		assert.Equal(t, 100, r.ExitCode, "job logs --follow when job end removes the log: %s", r)
		assert.Contains(t, r.Stdout, " started\n", "the follower printed the log first")
	case <-time.After(waitLong):
		t.Errorf("job logs --follow still running %v after job end", waitLong)
	}
}

// ---------------------------------------------------------------------------
// 7. job put: atomic, nothing left behind on bad input

func TestProtocolPut(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	protoStart(t, w, protoSpec{ID: "put1", Token: "tok-" + randHex(8), Timeout: "1h"})
	_, _, code := w.Exec(t, "", "mkdir", "/tmp/put")
	require.Equal(t, 0, code)

	content := []byte(randHex(50_000) + "\x00\xff\n")
	sum := sha256.Sum256(content)
	digest := hex.EncodeToString(sum[:])
	size := strconv.Itoa(len(content))
	const path = "/tmp/put/file.bin"
	put := func(stdin string, args ...string) ExecResult {
		return w.ExecWith(t, ExecOpts{Stdin: stdin}, append([]string{warmpodInRootfs, "job", "put", path}, args...)...)
	}
	dirListing := func() string {
		out, _, code := w.Exec(t, "", "ls", "-A", "/tmp/put")
		require.Equal(t, 0, code)
		return strings.TrimSpace(out)
	}

	r := put(string(content[:len(content)*6/10]), "--size", size, "--sha256", digest)
	require.NoError(t, r.Err)
	assert.Equal(t, exitDataErr, r.ExitCode, "put cut at 60%%: %s", r)
	assert.Empty(t, dirListing(), "a put cut at 60%% left something behind")

	bad := append([]byte(nil), content...)
	bad[100] ^= 1
	r = put(string(bad), "--size", size, "--sha256", digest)
	require.NoError(t, r.Err)
	assert.Equal(t, exitDataErr, r.ExitCode, "put with a digest mismatch: %s", r)
	assert.Empty(t, dirListing(), "a mismatched put left something behind")

	r = put(string(content)+"x", "--size", size, "--sha256", digest)
	require.NoError(t, r.Err)
	assert.Equal(t, exitDataErr, r.ExitCode, "put with an extra byte: %s", r)
	assert.Empty(t, dirListing(), "a put with extra input left something behind")

	r = put(string(content), "--size", size, "--sha256", digest, "--mode", "0640")
	require.NoError(t, r.Err)
	require.Equal(t, 0, r.ExitCode, "correct put: %s", r)
	assert.Equal(t, "file.bin", dirListing())
	out, _, code := w.Exec(t, "", "sh", "-c", "stat -c '%a %s' "+path+" && sha256sum "+path)
	require.Equal(t, 0, code, out)
	assert.Equal(t, "640 "+size+"\n"+digest+"  "+path+"\n", out)
	got, _, code := w.Exec(t, "", "cat", path)
	require.Equal(t, 0, code)
	assert.True(t, got == string(content), "content differs")

	// A failed put over an existing file leaves the old file as it was.
	r = put(string(content[:len(content)*6/10]), "--size", size, "--sha256", digest, "--mode", "0600")
	require.NoError(t, r.Err)
	assert.Equal(t, exitDataErr, r.ExitCode, "put cut at 60%% over an existing file: %s", r)
	assert.Equal(t, "file.bin", dirListing())
	out, _, _ = w.Exec(t, "", "sh", "-c", "stat -c '%a %s' "+path)
	assert.Equal(t, "640 "+size+"\n", out)
}

// ---------------------------------------------------------------------------
// 8. --max-jobs 1: the pod exits 0 after its job

func TestProtocolMaxJobsOne(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--max-jobs", "1"}})
	protoStart(t, w, protoSpec{ID: "only", Token: "tok-" + randHex(8), Timeout: "1h"})
	r := w.JobRun(t, "true")
	require.Equal(t, 0, r.ExitCode, r.String())
	r = w.ExecWith(t, ExecOpts{Timeout: 60 * time.Second}, warmpodInRootfs, "job", "end")
	require.NoError(t, r.Err)
	t0 := time.Now()
	assert.Equal(t, 0, r.ExitCode, "job end of the last job (the drain must not kill the job end client): %s", r)
	assert.Contains(t, r.Stdout, `"ok":true`, r.String())
	code, err := w.Wait(5 * time.Second)
	require.NoError(t, err, "pod with --max-jobs 1 still running 5 s after job end")
	t.Logf("exited %v after job end", time.Since(t0).Round(time.Millisecond))
	assert.Equal(t, 0, code, "exit code after the max-jobs drain")
}

// ---------------------------------------------------------------------------
// 9. replay, config_hash, scope pin

func TestProtocolReplayHashScope(t *testing.T) {
	t.Run("replay-and-config-hash", func(t *testing.T) {
		w := startWarmpod(t, wpOpts{Flags: []string{"--config-hash", "abc"}})
		spec := protoSpec{ID: "j1", Nonce: "n1", Token: "tok-" + randHex(8), Timeout: "1h", ConfigHash: "abc"}
		protoStart(t, w, spec)

		r := w.JobStart(t, spec.line(t))
		require.Equal(t, 0, r.ExitCode, "replay: %s", r)
		res := decodeJSONLine(t, r.Stdout)
		assert.Equal(t, true, res["replay"], r.Stdout)
		assert.Equal(t, "j1", res["job"], r.Stdout)

		other := spec
		other.Nonce = "n2"
		r = w.JobStart(t, other.line(t))
		assert.Equal(t, exitTempFail, r.ExitCode, "same id, other nonce: %s", r)
		other = spec
		other.ID = "j2"
		r = w.JobStart(t, other.line(t))
		assert.Equal(t, exitTempFail, r.ExitCode, "other id while busy: %s", r)
		assert.Equal(t, "j1", statusJobID(w.Status(t)))
		protoEnd(t, w)

		for _, h := range []string{"xyz", ""} {
			s := protoSpec{ID: "j3", Token: "t", Timeout: "1h", ConfigHash: h}
			r = w.JobStart(t, s.line(t))
			assert.Equal(t, exitTempFail, r.ExitCode, "config_hash %q on a pod with abc: %s", h, r)
			assert.Equal(t, "idle", w.Status(t)["state"])
		}
		s := protoSpec{ID: "j4", Token: "t", Timeout: "1h", ConfigHash: "abc"}
		protoStart(t, w, s)
	})
	t.Run("scope-pin", func(t *testing.T) {
		w := startWarmpod(t, wpOpts{Flags: []string{"--max-jobs", "0"}})
		protoStart(t, w, protoSpec{ID: "p1-a", Token: "t", Timeout: "1h", Scope: "p1"})
		protoEnd(t, w)
		r := w.JobStart(t, protoSpec{ID: "p2-a", Token: "t", Timeout: "1h", Scope: "p2"}.line(t))
		assert.Equal(t, exitTempFail, r.ExitCode, "scope p2 on a pod pinned to p1: %s", r)
		assert.Equal(t, "idle", w.Status(t)["state"])
		r = w.JobStart(t, protoSpec{ID: "none-a", Token: "t", Timeout: "1h"}.line(t))
		assert.Equal(t, exitTempFail, r.ExitCode, "no scope on a pod pinned to p1: %s", r)
		protoStart(t, w, protoSpec{ID: "p1-b", Token: "t", Timeout: "1h", Scope: "p1"})
		protoEnd(t, w)
	})
}

// ---------------------------------------------------------------------------
// 10. cancel

func TestProtocolCancel(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	protoStart(t, w, protoSpec{ID: "c1", Token: "tok-" + randHex(8), Timeout: "1h"})
	r := w.WP(t, "", "job", "run", "--detach", "--stage", "s1", "--", "sleep", "1000")
	require.Equal(t, 0, r.ExitCode, r.String())
	waitProc(t, w.Container, "sleep 1000")

	r = w.ExecWith(t, ExecOpts{Timeout: 30 * time.Second}, warmpodInRootfs, "job", "cancel", "--grace", "1s")
	require.NoError(t, r.Err)
	require.Equal(t, 0, r.ExitCode, "job cancel: %s", r)
	assert.Empty(t, w.findProcs(t, "sleep 1000"), "job cancel left the stage running")

	r = w.WP(t, "", "job", "status")
	require.Equal(t, 0, r.ExitCode, r.String())
	var doc struct {
		Job       string       `json:"job"`
		Cancelled bool         `json:"cancelled"`
		Stages    []protoStage `json:"stages"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &doc), r.Stdout)
	assert.Equal(t, "c1", doc.Job)
	assert.True(t, doc.Cancelled, "status after cancel: %s", r.Stdout)
	require.Len(t, doc.Stages, 1, r.Stdout)
	s := doc.Stages[0]
	assert.False(t, s.Running, r.Stdout)
	assert.Contains(t, []string{"SIGTERM", "SIGKILL"}, s.Signal, r.Stdout)
	require.NotNil(t, s.ExitCode, r.Stdout)
	assert.Contains(t, []int{143, 137}, *s.ExitCode, r.Stdout)
	assert.Equal(t, "busy", w.Status(t)["state"], "a cancelled job keeps the lease")
	logs := w.WP(t, "", "job", "logs", "--offset", "0")
	require.Equal(t, 0, logs.ExitCode, "job logs after cancel: %s", logs)
	content, _ := protoRecords(t, logs.Stdout, 0)
	markers := protoLogMarkers(string(content))
	require.Len(t, markers, 2, "log after cancel:\n%s", content)
	assert.Equal(t, markers[1]["command_exit_code"], float64(*s.ExitCode), "end marker after cancel:\n%s", content)

	protoEnd(t, w)
	assert.Equal(t, "idle", w.Status(t)["state"])
}

// ---------------------------------------------------------------------------
// 11. --stdin-when-idle ignore

func TestProtocolStdinWhenIdleIgnore(t *testing.T) {
	w := startWarmpod(t, wpOpts{Flags: []string{"--stdin-when-idle", "ignore"}})
	w.WriteLine(t, "echo idle-ran-$((1+1))")
	time.Sleep(1500 * time.Millisecond)
	assert.NotContains(t, w.Stdout(), "idle-ran-2", "a line written while idle ran")

	protoStart(t, w, protoSpec{ID: "i1", Token: "tok-" + randHex(8), Timeout: "1h"})
	w.WriteLine(t, "echo job-ran-$((2+2))")
	w.WaitOutput(t, "job-ran-4", waitLong)
	assert.NotContains(t, w.Stdout(), "idle-ran-2", "a line written while idle ran in the job")

	protoEnd(t, w)
	w.WriteLine(t, "echo after-end-$((3+3))")
	time.Sleep(1500 * time.Millisecond)
	assert.NotContains(t, w.Stdout(), "after-end-6", "a line written while idle (after job end) ran")
	protoStart(t, w, protoSpec{ID: "i2", Token: "tok-" + randHex(8), Timeout: "1h"})
	w.WriteLine(t, "echo job2-ran-$((4+4))")
	w.WaitOutput(t, "job2-ran-8", waitLong)
	assert.NotContains(t, w.Stdout(), "after-end-6", "a line written while idle ran in job 2")
}

// ---------------------------------------------------------------------------
// 12. --job-user

func TestProtocolJobUser(t *testing.T) {
	w := protoStartWarmpodCaps(t, wpOpts{Flags: []string{"--job-user", "1000:1000"}})
	protoStart(t, w, protoSpec{ID: "u1", Token: "tok-user-" + randHex(8), Timeout: "1h",
		Variables: []jobVar{{Key: "CFG", Value: "x", File: true}}})

	r := w.WP(t, "", "job", "run", "--detach", "--stage", "ids", "--", "sh", "-c", `id -u; id -g; cat "$CFG"; echo; touch "$TMPDIR/w" && echo tmp-ok; cat /proc/1/environ >/dev/null 2>&1 && echo environ-readable`)
	require.Equal(t, 0, r.ExitCode, r.String())
	r = w.WP(t, "", "job", "wait", "--stage", "ids", "--timeout", "20s")
	require.Equal(t, 0, r.ExitCode, r.String())
	logs := w.WP(t, "", "job", "logs", "--offset", "0")
	require.Equal(t, 0, logs.ExitCode, logs.String())
	content, _ := protoRecords(t, logs.Stdout, 0)
	lines := strings.Split(string(content), "\n")
	require.GreaterOrEqual(t, len(lines), 6, "log:\n%s", content)
	if !assert.Equal(t, []string{"1000", "1000", "x", "tmp-ok"}, lines[1:5], "stage as the job user: file variable and TMPDIR must be usable, log:\n%s", content) {
		out, _, _ := w.Exec(t, "", "sh", "-c", "stat -c '%a %u:%g %n' /run /run/warmpod /run/warmpod/jobs /run/warmpod/jobs/u1 /run/warmpod/jobs/u1/CFG /tmp /tmp/warmpod-job-u1-*")
		t.Logf("permissions on the path to the job dir:\n%s", out)
	}
	assert.NotContains(t, string(content), "environ-readable", "a stage of uid 1000 read /proc/1/environ")

	r = w.JobRun(t, "id", "-u")
	assert.Equal(t, "1000", strings.TrimSpace(r.Stdout), "job run as the job user: %s", r)
	w.WriteLine(t, `echo "shell-uid=$(id -u)"`)
	w.WaitOutput(t, "shell-uid=", waitLong)
	assert.Contains(t, w.Stdout(), "shell-uid=1000", "the job shell runs as the job user")

	// PID 1 is not dumpable. uid 1000 is refused by the uid check alone;
	// root without CAP_SYS_PTRACE (runc exec here) is refused only because
	// PID 1 is not dumpable, while it can read another (dumpable) root
	// process (the control).
	ctl := w.ExecWith(t, ExecOpts{}, "sh", "-c", "sleep 30 </dev/null >/dev/null 2>&1 & p=$!; cat /proc/$p/environ >/dev/null; rc=$?; kill $p; exit $rc")
	require.Equal(t, 0, ctl.ExitCode, "root reading a dumpable root process's environ (control): %s", ctl)
	for _, f := range []string{"/proc/1/environ", "/proc/1/mem"} {
		r := w.ExecWith(t, ExecOpts{}, "head", "-c", "1", f)
		require.NoError(t, r.Err)
		assert.NotEqual(t, 0, r.ExitCode, "root without CAP_SYS_PTRACE read %s: PID 1 is dumpable: %s", f, r)
	}
	for _, args := range [][]string{
		{"cat", "/proc/1/environ"},
		{"head", "-c", "1", "/proc/1/mem"},
		{"ls", "/proc/1/fd"},
	} {
		r := w.ExecWith(t, ExecOpts{User: "1000:1000"}, args...)
		require.NoError(t, r.Err)
		assert.NotEqual(t, 0, r.ExitCode, "uid 1000 %q succeeded: %s", args, r)
	}

	// The control socket refuses uid 1000.
	r = w.ExecWith(t, ExecOpts{User: "1000:1000"}, warmpodInRootfs, "status")
	require.NoError(t, r.Err)
	assert.NotEqual(t, 0, r.ExitCode, "warmpod status as uid 1000: %s", r)
	r = w.ExecWith(t, ExecOpts{User: "1000:1000"}, warmpodInRootfs, "job", "end")
	require.NoError(t, r.Err)
	assert.NotEqual(t, 0, r.ExitCode, "warmpod job end as uid 1000: %s", r)
	r = w.ExecWith(t, ExecOpts{User: "1000:1000"}, warmpodInRootfs, "job", "env")
	require.NoError(t, r.Err)
	assert.NotEqual(t, 0, r.ExitCode, "warmpod job env as uid 1000: %s", r)
	assert.NotContains(t, r.Stdout, "tok-user-", "job env as uid 1000 printed the token")
	assert.Equal(t, "busy", w.Status(t)["state"])
	protoEnd(t, w)
}

// job exec becomes its command (stdin, stdout and exit status are the
// command's, run as the exec's own user and environment) only for the job
// that holds the lease.
func TestProtocolJobExec(t *testing.T) {
	w := startWarmpod(t, wpOpts{})
	exec := func(stdin string, args ...string) ExecResult {
		return w.ExecWith(t, ExecOpts{Stdin: stdin}, append([]string{warmpodInRootfs, "job", "exec"}, args...)...)
	}
	r := exec("", "--job", "x1", "--", "true")
	require.NoError(t, r.Err)
	assert.Equal(t, exitUnavailable, r.ExitCode, "no job: %s", r)
	protoStart(t, w, protoSpec{ID: "x1", Token: "tok-" + randHex(8), Timeout: "1h", Variables: []jobVar{{Key: "SECRET_X", Value: "s3cret"}}})
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string
	}{
		{"stdin, stdout and the status are the command's", "abc", []string{"--job", "x1", "--", "sh", "-c", "cat; echo; exit 7"}, 7, "abc\n"},
		{"not the job's environment", "", []string{"--job", "x1", "--", "sh", "-c", `echo "[$SECRET_X]"`}, 0, "[]\n"},
		{"another job", "", []string{"--job", "x2", "--", "true"}, exitTempFail, ""},
		{"no --job", "", []string{"--", "true"}, 2, ""},
		{"no such command", "", []string{"--job", "x1", "--", "no-such-command-here"}, 127, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := exec(tc.stdin, tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.code, r.ExitCode, "%s", r)
			if tc.out != "" {
				assert.Equal(t, tc.out, r.Stdout)
			}
		})
	}
}
