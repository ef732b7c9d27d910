//go:build kube

package kubee2e

// GitLab Runner on warm pods (issue "Step 6"): every job here is run by the
// real GitLab Runner of ../shared/gitlab-runner (run-single, Custom
// executor, a mock coordinator) through warmpod-gitlab, against a pool
// applied from deploy/kube-e2e/pool.yaml. The driver talks to the API server
// with a token of the ServiceAccount of deploy/gitlab-rbac.yaml, so the
// documented RBAC is proven enough.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	driverOnce sync.Once
	driverPath string
	driverErr  error
)

// driverBinary is $WARMPOD_GITLAB_BIN (make e2e-kube builds it, and its
// per-stage build warmpod-gitlab-run beside it), else a fresh build of
// both.
func driverBinary(t testing.TB) string {
	t.Helper()
	driverOnce.Do(func() {
		if p := os.Getenv("WARMPOD_GITLAB_BIN"); p != "" {
			driverPath = p
			return
		}
		dir, err := os.MkdirTemp("", "warmpod-gitlab-")
		if err != nil {
			driverErr = err
			return
		}
		driverPath = filepath.Join(dir, "warmpod-gitlab")
		out, err := exec.Command("go", "build", "-o", driverPath, filepath.Join(repoRoot, "cmd/warmpod-gitlab")).CombinedOutput()
		if err == nil {
			// The per-stage build beside it, as make build puts it.
			out, err = exec.Command("go", "build", "-tags", "percall", "-o", driverPath+"-run", filepath.Join(repoRoot, "cmd/warmpod-gitlab")).CombinedOutput()
		}
		if err != nil {
			driverErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, driverErr)
	return driverPath
}

// glrDir is the GitLab Runner fixture (its build.sh has run: make e2e-kube
// does it).
func glrDir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("GLR_DIR")
	if d == "" {
		d = filepath.Join(repoRoot, "..", "shared", "gitlab-runner")
	}
	if _, err := os.Stat(filepath.Join(d, "run-job.sh")); err != nil {
		t.Fatalf("GitLab Runner fixture not found at %s (set GLR_DIR): %v", d, err)
	}
	return d
}

// glrPool is a namespace with a warm pool and a driver directory for
// run-job.sh.
type glrPool struct {
	ns          string
	dir         string // config.sh, prepare.sh, run.sh, cleanup.sh
	kubeconfig  string // the driver's: the warmpod-gitlab ServiceAccount's token
	timingsFile string
	stampsFile  string
	proxy       *cutProxy
}

type poolOpts struct {
	replicas    int
	extra       []string // more pool manifests to apply (their replicas count in waitIdle's n)
	idle        int      // Ready idle pods to wait for (default replicas)
	poolFile    string   // the pool manifest (default deploy/kube-e2e/pool.yaml; an absolute path as it is)
	stamps      bool     // each driver script appends "NS CALL JOB" to p.stampsFile before it execs the driver
	proxy       bool     // the driver reaches the API server through a proxy that can cut streams
	flags       []string // extra driver flags
	prepareGate string   // a file prepare.sh waits for (the concurrency test's barrier)
	driver      string   // the warmpod-gitlab binary (default driverBinary)
}

func newPool(t *testing.T, o poolOpts) *glrPool {
	t.Helper()
	ns := newNamespace(t, "glr", true)
	if o.poolFile == "" {
		o.poolFile = "deploy/kube-e2e/pool.yaml"
	}
	for _, f := range append([]string{"deploy/gitlab-rbac.yaml", o.poolFile}, o.extra...) {
		if !filepath.IsAbs(f) {
			f = filepath.Join(repoRoot, f)
		}
		out, err := exec.Command(kubectl, "apply", "-n", ns, "-f", f).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	out, err := exec.Command(kubectl, "scale", "-n", ns, "deployment/busybox", "--replicas", strconv.Itoa(o.replicas)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	if o.idle == 0 {
		o.idle = o.replicas
	}
	waitIdle(t, ns, o.idle, 2*time.Minute)
	return glrPoolIn(t, ns, "warmpod-gitlab", o)
}

// glrPoolIn makes the driver scripts of a GitLab Runner whose driver
// (o.driver, default driverBinary) works in namespace ns as ServiceAccount
// sa, on pools that are there already.
func glrPoolIn(t *testing.T, ns, sa string, o poolOpts) *glrPool {
	t.Helper()
	p := &glrPool{ns: ns, dir: t.TempDir()}
	driver := o.driver
	if driver == "" {
		driver = driverBinary(t)
	}
	kc := saKubeconfig(t, ns, sa)
	if o.proxy {
		cl := kc["clusters"].([]any)[0].(map[string]any)["cluster"].(map[string]any)
		target := strings.TrimPrefix(cl["server"].(string), "https://")
		p.proxy = newCutProxy(t, target)
		cl["server"] = "https://" + p.proxy.addr
	}
	b, _ := json.Marshal(kc)
	p.kubeconfig = filepath.Join(p.dir, "kubeconfig")
	require.NoError(t, os.WriteFile(p.kubeconfig, b, 0o600))

	p.timingsFile = filepath.Join(p.dir, "timings.jsonl")
	p.stampsFile = filepath.Join(p.dir, "stamps.txt")
	// No --pools: the driver reads the pool Deployments from the cluster.
	flags := []string{"--kubeconfig", p.kubeconfig,
		"--state-dir", filepath.Join(p.dir, "state"), "--timings", p.timingsFile, "--ready-timeout", "3m"}
	flags = append(flags, o.flags...)
	for _, c := range []string{"config", "prepare", "run", "cleanup"} {
		gate := ""
		if c == "prepare" && o.prepareGate != "" {
			gate = fmt.Sprintf("touch %q.$CUSTOM_ENV_CI_JOB_ID; while [ ! -e %q ]; do sleep 0.02; done\n", o.prepareGate, o.prepareGate)
		}
		if o.stamps {
			// When the runner started the call: before the driver's own
			// process start and client set-up.
			gate += fmt.Sprintf("echo \"$(date +%%s%%N) %s $CUSTOM_ENV_CI_JOB_ID\" >> %q\n", c, p.stampsFile)
		}
		bin := driver
		if _, err := os.Stat(driver + "-run"); err == nil && c == "run" {
			// run_exec is the per-stage build when it sits beside the
			// driver, as NOTES.txt configures it.
			bin = driver + "-run"
		}
		script := fmt.Sprintf("#!/bin/sh\n%sexec %q %s %s \"$@\"\n", gate, bin, shellWords(flags), c)
		require.NoError(t, os.WriteFile(filepath.Join(p.dir, c+".sh"), []byte(script), 0o755))
	}
	return p
}

// saKubeconfig is a kubeconfig (as its JSON map) for ServiceAccount sa of
// namespace ns: a 2 h token, the admin kubeconfig's cluster, ns as the
// context's namespace.
func saKubeconfig(t *testing.T, ns, sa string) map[string]any {
	t.Helper()
	tok, err := exec.Command(kubectl, "create", "token", "-n", ns, sa, "--duration", "2h").Output()
	require.NoError(t, err)
	raw, err := exec.Command(kubectl, "config", "view", "--raw", "--minify", "--flatten", "-o", "json").Output()
	require.NoError(t, err)
	var kc map[string]any
	require.NoError(t, json.Unmarshal(raw, &kc))
	kc["users"] = []any{map[string]any{"name": sa, "user": map[string]any{"token": strings.TrimSpace(string(tok))}}}
	ctxs := kc["contexts"].([]any)
	c0 := ctxs[0].(map[string]any)["context"].(map[string]any)
	c0["user"], c0["namespace"] = sa, ns
	return kc
}

func shellWords(ws []string) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Quote(w))
	}
	return b.String()
}

// poolPods lists the namespace's pods with their state labels.
func poolPods(t testing.TB, ns string) []pod {
	t.Helper()
	code, b, err := api.do("GET", "/api/v1/namespaces/"+ns+"/pods", nil)
	require.NoError(t, err)
	require.Equal(t, 200, code, "%s", b)
	var l struct{ Items []pod }
	require.NoError(t, json.Unmarshal(b, &l))
	return l.Items
}

// waitIdle waits until the pool has exactly n Ready idle pods and nothing
// else in the namespace.
func waitIdle(t testing.TB, ns string, n int, timeout time.Duration) []pod {
	t.Helper()
	var last []pod
	waitFor(t, timeout, fmt.Sprintf("exactly %d Ready idle pool pods and no other pod", n), func() (bool, string) {
		last = poolPods(t, ns)
		ready, desc := 0, []string{}
		for _, p := range last {
			st := p.Metadata.Labels["warmpod.dev/state"]
			desc = append(desc, fmt.Sprintf("%s:%s:ready=%v:%s", p.Metadata.Name, st, p.ready(), p.Status.Phase))
			if st == "idle" && p.ready() {
				ready++
			}
		}
		return ready == n && len(last) == n, strings.Join(desc, " ")
	})
	return last
}

type jobOpts struct {
	id        int
	script    []string // the job's script: lines
	after     []string // after_script lines
	env       []string // run-job.sh env: CANCEL_AFTER=..., EXTRA_VARIABLES=...
	extraVars []map[string]any
	timeout   time.Duration
	onRunning func() // called once the runner has started (the stream-cut test)
}

type jobResult struct {
	exit   int
	final  map[string]any
	trace  string
	out    string // run-job.sh's output
	runDir string
}

func (r jobResult) String() string {
	return fmt.Sprintf("run-job.sh exit %d, final %v\n--- run-job.sh output:\n%s", r.exit, r.final, lastLines(r.out, 80))
}

// runJob runs one job through the real GitLab Runner with p's driver.
func (p *glrPool) runJob(t *testing.T, o jobOpts) jobResult {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, lines []string) string {
		f := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		return f
	}
	args := []string{filepath.Join(glrDir(t), "run-job.sh"), p.dir, write("script.txt", o.script)}
	if len(o.after) > 0 {
		args = append(args, write("after.txt", o.after))
	}
	runDir := filepath.Join(dir, "run")
	cmd := exec.Command("bash", args...)
	cmd.Env = append(os.Environ(), "GLR_RUN_DIR="+runDir, "JOB_ID="+strconv.Itoa(o.id), "RUNNER_TIMEOUT=240")
	cmd.Env = append(cmd.Env, o.env...)
	if len(o.extraVars) > 0 {
		b, _ := json.Marshal(o.extraVars)
		cmd.Env = append(cmd.Env, "EXTRA_VARIABLES="+write("vars.json", []string{string(b)}))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	if o.onRunning != nil {
		o.onRunning()
	}
	err := cmd.Wait()
	r := jobResult{out: out.String(), runDir: runDir, exit: cmd.ProcessState.ExitCode()}
	if err != nil && r.exit < 0 {
		t.Fatalf("run-job.sh: %v\n%s", err, out.String())
	}
	if b, err := os.ReadFile(filepath.Join(runDir, "mock", fmt.Sprintf("final-%d.json", o.id))); err == nil {
		_ = json.Unmarshal(b, &r.final)
	}
	for _, f := range []string{"trace-%d.log", "trace-%d.refused.log"} {
		if b, err := os.ReadFile(filepath.Join(runDir, "mock", fmt.Sprintf(f, o.id))); err == nil {
			r.trace += string(b)
		}
	}
	return r
}

// timing is one line of the driver's --timings file.
type timing struct {
	Call    string `json:"call"`
	Job     string `json:"job"`
	Stage   string `json:"stage"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	StageNS int64  `json:"stage_ns"`
	// MuxCalls and DirectCalls count the call's execs through the job's
	// multiplexer and direct ones.
	MuxCalls    int64 `json:"mux_calls"`
	DirectCalls int64 `json:"direct_calls"`
}

func (p *glrPool) timings(t testing.TB, job int) []timing {
	t.Helper()
	b, err := os.ReadFile(p.timingsFile)
	require.NoError(t, err)
	var out []timing
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var tm timing
		require.NoError(t, json.Unmarshal([]byte(l), &tm), l)
		if tm.Job == strconv.Itoa(job) {
			out = append(out, tm)
		}
	}
	return out
}

func stagesOf(tms []timing) []string {
	var s []string
	for _, tm := range tms {
		if tm.Call == "run" {
			s = append(s, tm.Stage)
		} else {
			s = append(s, tm.Call)
		}
	}
	return s
}

// traceText strips the runner's "<time> 00O " prefixes and the colour codes.
func traceText(tr string) string {
	pre := regexp.MustCompile(`(?m)^\S+ \d\d[OE]\+? ?`)
	ansi := regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	return ansi.ReplaceAllString(pre.ReplaceAllString(tr, ""), "")
}

func TestGitLabRunnerJobs(t *testing.T) {
	p := newPool(t, poolOpts{replicas: 2})
	before := map[string]bool{}
	for _, pd := range poolPods(t, p.ns) {
		before[pd.Metadata.Name] = true
	}

	t.Run("pass", func(t *testing.T) {
		r := p.runJob(t, jobOpts{id: 101, script: []string{
			`echo "JOB-OUTPUT: token length ${#CI_JOB_TOKEN} greeting=$MOCK_GREETING"`,
			`cat /proc/1/cmdline | tr '\0' ' '; echo`,
		}})
		require.Equal(t, 0, r.exit, r.String())
		assert.Equal(t, "success", r.final["state"])
		assert.Equal(t, true, r.final["trace_complete"])
		tr := traceText(r.trace)
		assert.Contains(t, tr, "JOB-OUTPUT: token length 18 greeting=hello from the mock coordinator")
		assert.Contains(t, tr, "/warmpod/warmpod --max-jobs=1", "the job ran under warmpod, installed by the init container into the busybox image")
		assert.Regexp(t, `runs on warm pod busybox-\S+ \(pool busybox\)`, tr)
		assert.Equal(t, []string{"prepare", "prepare_script", "get_sources", "build_script", "cleanup_file_variables", "cleanup"}, stagesOf(p.timings(t, 101)))
	})

	t.Run("pool refills by itself", func(t *testing.T) {
		// The claimed pod left the ReplicaSet, which started a new one; the
		// claimed pod drained and deleted itself after its job.
		pods := waitIdle(t, p.ns, 2, 90*time.Second)
		fresh := 0
		for _, pd := range pods {
			if !before[pd.Metadata.Name] {
				fresh++
			}
		}
		assert.Equal(t, 1, fresh, "one new idle pod replaced the claimed one")
	})

	t.Run("failing job", func(t *testing.T) {
		r := p.runJob(t, jobOpts{id: 102, script: []string{`echo "JOB-OUTPUT: before"`, `exit 3`, `echo "SHOULD-NOT-""PRINT"`},
			after: []string{`echo "AFTER-SCRIPT: CI_JOB_STATUS=$CI_JOB_STATUS"`}})
		require.Equal(t, 1, r.exit, r.String())
		assert.Equal(t, "failed", r.final["state"])
		assert.Equal(t, "script_failure", r.final["failure_reason"])
		assert.Equal(t, float64(3), r.final["exit_code"], "the stage's real exit code reached BUILD_EXIT_CODE_FILE")
		tr := traceText(r.trace)
		assert.Contains(t, tr, "JOB-OUTPUT: before")
		assert.NotContains(t, tr, "SHOULD-NOT-PRINT\n")
		assert.Contains(t, tr, "AFTER-SCRIPT: CI_JOB_STATUS=failed")
	})

	t.Run("hard cancel", func(t *testing.T) {
		start := time.Now()
		r := p.runJob(t, jobOpts{id: 103, script: []string{`echo "JOB-OUTPUT: sleeping"; sleep 60; echo "SHOULD-NOT-""PRINT"`},
			after: []string{`echo AFTER-SCRIPT`}, env: []string{"CANCEL_AFTER=3s", "CANCEL_STATE=canceled"}})
		require.Equal(t, 3, r.exit, r.String())
		assert.Less(t, time.Since(start), 40*time.Second, "the job ended long before its 60 s sleep")
		assert.NotContains(t, traceText(r.trace), "SHOULD-NOT-PRINT\n")
		calls := stagesOf(p.timings(t, 103))
		assert.Contains(t, calls, "cleanup", "cleanup ran")
		// The pod drains after cleanup: only the pool is left.
		waitIdle(t, p.ns, 2, 90*time.Second)
	})

	t.Run("graceful cancel", func(t *testing.T) {
		r := p.runJob(t, jobOpts{id: 104,
			script: []string{`trap 'echo "TRAP: TERM received"' TERM; echo "JOB-OUTPUT: sleeping"; sleep 60 & wait; echo "JOB-OUTPUT: after wait"`},
			after:  []string{`echo "AFTER-SCRIPT: CI_JOB_STATUS=$CI_JOB_STATUS survivors=$(ps | grep -c '[s]leep 60')"`},
			env:    []string{"CANCEL_AFTER=3s", "CANCEL_STATE=canceling"}})
		require.Equal(t, 3, r.exit, r.String())
		tr := traceText(r.trace)
		assert.Contains(t, tr, "TRAP: TERM received", "the stage's trap ran")
		assert.Contains(t, tr, "AFTER-SCRIPT: CI_JOB_STATUS=canceled survivors=0", "after_script ran in the same pod, and nothing of the cancelled stage survived")
		assert.Equal(t, []string{"prepare", "prepare_script", "get_sources", "build_script", "after_script", "cleanup_file_variables", "cleanup"}, stagesOf(p.timings(t, 104)))
		waitIdle(t, p.ns, 2, 90*time.Second)
	})

	t.Run("variables", func(t *testing.T) {
		r := p.runJob(t, jobOpts{id: 105, script: []string{
			`echo "MULTI<$MULTI_LINE>"`, `echo "NASTY<$NASTY_QUOTES>"`, `echo "FILE<$(cat "$SECRET_FILE")>"`,
		}, extraVars: []map[string]any{
			{"key": "MULTI_LINE", "value": "one\ntwo\n  three", "public": true},
			{"key": "NASTY_QUOTES", "value": "it's \"q\" $(echo INJECTED) `echo BT` \\ back; x", "public": true},
			{"key": "SECRET_FILE", "value": "file 'line' \"2\" $(date)\n", "file": true},
		}})
		require.Equal(t, 0, r.exit, r.String())
		tr := traceText(r.trace)
		assert.Contains(t, tr, "MULTI<one\ntwo\n  three>")
		assert.Contains(t, tr, "NASTY<it's \"q\" $(echo INJECTED) `echo BT` \\ back; x>")
		assert.Contains(t, tr, "FILE<file 'line' \"2\" $(date)>")
	})

	t.Run("an image that cannot be had fails fast, naming the reason", func(t *testing.T) {
		start := time.Now()
		r := p.runJob(t, jobOpts{id: 107, script: []string{`echo SHOULD-NOT-RUN`},
			extraVars: []map[string]any{{"key": "CI_JOB_IMAGE", "value": "localhost/no-such-image:v0", "public": true}}})
		require.Equal(t, 1, r.exit, r.String())
		assert.Equal(t, "runner_system_failure", r.final["failure_reason"])
		assert.Contains(t, traceText(r.trace), "ErrImageNeverPull")
		assert.Less(t, time.Since(start), 90*time.Second, "not the 3 minutes of --ready-timeout, three times")
		waitIdle(t, p.ns, 2, 90*time.Second) // the failed cold pods are gone
	})

	t.Run("image without a pool gets a cold pod of that image", func(t *testing.T) {
		r := p.runJob(t, jobOpts{id: 106, script: []string{`ls /usr/local/bin/warmpod && echo "IMAGE: warmpod image"`},
			extraVars: []map[string]any{{"key": "CI_JOB_IMAGE", "value": warmImage, "public": true}}})
		require.Equal(t, 0, r.exit, r.String())
		tr := traceText(r.trace)
		assert.Contains(t, tr, "IMAGE: warmpod image")
		assert.Regexp(t, `runs on cold pod busybox-cold-\S+`, tr)
		waitIdle(t, p.ns, 2, 90*time.Second)
	})
}

// cutProxy forwards TCP to the API server and can cut every connection at
// once: a broken exec stream, as a flaky network or a restarted
// load balancer makes it.
type cutProxy struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
	cuts  int
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.cuts++
}

func TestGitLabStreamCutMidStage(t *testing.T) {
	p := newPool(t, poolOpts{replicas: 1, proxy: true})
	var cutAt time.Time
	r := p.runJob(t, jobOpts{id: 201, script: []string{
		`echo run >> /builds/runs`,
		`i=0; while [ $i -lt 60 ]; do echo "LINE-$i"; i=$((i+1)); sleep 0.1; done`,
		`echo "RUNS=$(wc -l < /builds/runs)"`,
	}, onRunning: func() {
		go func() {
			// Cut once the build stage is streaming.
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				b, _ := os.ReadFile(p.timingsFile)
				if bytes.Contains(b, []byte(`"stage":"get_sources"`)) {
					time.Sleep(2500 * time.Millisecond)
					cutAt = time.Now()
					p.proxy.cut()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}})
	require.Equal(t, 0, r.exit, r.String())
	require.False(t, cutAt.IsZero(), "the stream was cut")
	tr := traceText(r.trace)
	assert.Contains(t, tr, "reattaching at byte", "the driver noticed the cut")
	var got []string
	for _, l := range strings.Split(tr, "\n") {
		if strings.HasPrefix(l, "LINE-") {
			got = append(got, l)
		}
	}
	want := make([]string, 60)
	for i := range want {
		want[i] = "LINE-" + strconv.Itoa(i)
	}
	assert.Equal(t, want, got, "every line once, in order, across the cut")
	assert.Contains(t, tr, "RUNS=1", "the stage did not run again")
	for _, tm := range p.timings(t, 201) {
		if tm.Stage == "build_script" {
			// The cut stream was replaced by the job's multiplexer, and
			// the stage resumed through it.
			assert.GreaterOrEqual(t, tm.MuxCalls, int64(2), "the build stage and its reattach went through the multiplexer")
			assert.Zero(t, tm.DirectCalls)
		}
	}
}

func TestGitLabConcurrentPrepare(t *testing.T) {
	const pool, jobs = 5, 20
	gate := filepath.Join(t.TempDir(), "go")
	p := newPool(t, poolOpts{replicas: pool, flags: []string{"--warm-wait", "0"}, prepareGate: gate})
	secretsBefore, cmBefore := countOf(t, p.ns, "secrets"), countOf(t, p.ns, "configmaps")

	results := make([]jobResult, jobs)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = p.runJob(t, jobOpts{id: 300 + i, script: []string{`echo "JOB-OUTPUT: $CI_JOB_ID on $(cat /proc/sys/kernel/hostname)"`}})
		}()
	}
	// Every runner waits at the gate of its prepare: open it for all at once.
	waitFor(t, 3*time.Minute, "all prepares at the gate", func() (bool, string) {
		m, _ := filepath.Glob(gate + ".*")
		return len(m) == jobs, fmt.Sprintf("%d at the gate", len(m))
	})
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	wg.Wait()

	claimed := map[string]int{}
	warm, cold := 0, 0
	re := regexp.MustCompile(`runs on (warm|cold) pod (\S+)`)
	for i, r := range results {
		require.Equal(t, 0, r.exit, "job %d: %s", 300+i, r)
		m := re.FindStringSubmatch(traceText(r.trace))
		require.NotNil(t, m, "job %d trace: %s", 300+i, r.trace)
		claimed[m[2]]++
		if m[1] == "warm" {
			warm++
		} else {
			cold++
		}
	}
	t.Logf("%d concurrent prepares against a pool of %d: %d warm claims, %d cold fallbacks", jobs, pool, warm, cold)
	assert.Equal(t, pool, warm, "exactly the pool's pods were claimed warm")
	assert.Equal(t, jobs-pool, cold)
	for name, n := range claimed {
		assert.Equal(t, 1, n, "pod %s ran one job", name)
	}
	// After all jobs: exactly the pool's replicas, nothing leaked.
	waitIdle(t, p.ns, pool, 3*time.Minute)
	assert.Equal(t, secretsBefore, countOf(t, p.ns, "secrets"), "no Secret leaked")
	assert.Equal(t, cmBefore, countOf(t, p.ns, "configmaps"), "no ConfigMap leaked")
}

func countOf(t testing.TB, ns, kind string) int {
	t.Helper()
	code, b, err := api.do("GET", "/api/v1/namespaces/"+ns+"/"+kind, nil)
	require.NoError(t, err)
	require.Equal(t, 200, code)
	var l struct{ Items []json.RawMessage }
	require.NoError(t, json.Unmarshal(b, &l))
	return len(l.Items)
}
