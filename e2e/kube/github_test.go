//go:build kube

package kubee2e

// GitHub Actions runner container hooks on warm pods (issue "Step 11"):
// every job here goes through ../shared/actions-hooks/hookrun, which calls
// the hook exactly as actions/runner's ContainerHookManager does, with
// warmpod-github's shim as ACTIONS_RUNNER_CONTAINER_HOOKS, against a pool
// applied from deploy/kube-e2e/github-pool.yaml, which the hook reads from
// the cluster (no --pools, as shipped). The hook talks to the API
// server with a token of the ServiceAccount of deploy/github-rbac.yaml, so
// the documented RBAC is proven enough.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	hookOnce sync.Once
	hookDir  string
	hookErr  error
)

// hookShim is a directory with warmpod-github, its per-step build and its
// shim, installed as the runner pod's init container installs them from
// $WARMPOD_GITHUB_BIN and the -step beside it (make e2e-kube builds
// both), else from fresh builds.
func hookShim(t testing.TB) string {
	t.Helper()
	hookOnce.Do(func() {
		dir, err := os.MkdirTemp("", "warmpod-github-")
		if err != nil {
			hookErr = err
			return
		}
		hookDir = dir
		// The full build and the per-step build beside it (`make build`
		// makes both): install copies both, as an init container does.
		bin := os.Getenv("WARMPOD_GITHUB_BIN")
		src := filepath.Join(dir, "src")
		if bin == "" {
			for name, tags := range map[string]string{"warmpod-github": "", "warmpod-github-step": "percall"} {
				out, err := exec.Command("go", "build", "-tags", tags, "-o", filepath.Join(src, name), filepath.Join(repoRoot, "cmd/warmpod-github")).CombinedOutput()
				if err != nil {
					hookErr = fmt.Errorf("go build: %v: %s", err, out)
					return
				}
			}
		} else if out, err := exec.Command("mkdir", "-p", src).CombinedOutput(); err != nil {
			hookErr = fmt.Errorf("mkdir: %v: %s", err, out)
			return
		} else if out, err := exec.Command("cp", bin, bin+"-step", src).CombinedOutput(); err != nil {
			hookErr = fmt.Errorf("cp: %v: %s", err, out)
			return
		}
		if out, err := exec.Command(filepath.Join(src, "warmpod-github"), "install", dir).CombinedOutput(); err != nil {
			hookErr = fmt.Errorf("warmpod-github install: %v: %s", err, out)
			return
		}
	})
	require.NoError(t, hookErr)
	return hookDir
}

// hooksDir is the actions-hooks fixture (make e2e-kube builds it).
func hooksDir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("HOOKS_DIR")
	if d == "" {
		d = filepath.Join(repoRoot, "..", "shared", "actions-hooks")
	}
	if _, err := os.Stat(filepath.Join(d, "hookrun")); err != nil {
		t.Fatalf("actions-hooks fixture not found at %s (set HOOKS_DIR): %v", d, err)
	}
	return d
}

// ghPool is a namespace with a warm pool of the fixture's job image and
// the environment a runner pod gives the hook.
type ghPool struct {
	ns         string
	dir        string
	kubeconfig string
	replicas   int
	proxy      *cutProxy // when the hook reaches the API server through one
	// poolsFile is the hook's --pools (WARMPOD_GITHUB_POOLS); empty: the
	// hook reads the pools from the cluster.
	poolsFile string
	// hookDir holds the hook and its shim; empty: hookShim's.
	hookDir string
}

func newGHPool(t *testing.T, replicas int, proxy bool) *ghPool {
	t.Helper()
	return newGHPoolFrom(t, replicas, proxy, "deploy/kube-e2e/github-pool.yaml")
}

// newGHPoolFrom is newGHPool with the pools applied from poolFile (a path
// in the repository, or an absolute one).
func newGHPoolFrom(t *testing.T, replicas int, proxy bool, poolFile string) *ghPool {
	t.Helper()
	ns := newNamespace(t, "gh", true)
	g := &ghPool{ns: ns, dir: t.TempDir(), replicas: replicas}
	for _, f := range []string{"deploy/github-rbac.yaml", poolFile} {
		if !filepath.IsAbs(f) {
			f = filepath.Join(repoRoot, f)
		}
		out, err := exec.Command(kubectl, "apply", "-n", ns, "-f", f).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	out, err := exec.Command(kubectl, "scale", "-n", ns, "deployment/hooks-job", "--replicas", strconv.Itoa(replicas)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	waitIdle(t, ns, replicas, 3*time.Minute)
	kc := saKubeconfig(t, ns, "warmpod-github")
	if proxy {
		cl := kc["clusters"].([]any)[0].(map[string]any)["cluster"].(map[string]any)
		g.proxy = newCutProxy(t, strings.TrimPrefix(cl["server"].(string), "https://"))
		cl["server"] = "https://" + g.proxy.addr
	}
	b, _ := json.Marshal(kc)
	g.kubeconfig = filepath.Join(g.dir, "kubeconfig")
	require.NoError(t, os.WriteFile(g.kubeconfig, b, 0o600))
	return g
}

// stateDir is the hook's private directory of multiplexer sockets.
func (g *ghPool) stateDir() string { return filepath.Join(g.dir, "state") }

// stepsSaid tells whether any step's log (its ::debug:: lines included)
// has s.
func (r *hookResult) stepsSaid(s string) bool {
	for _, st := range r.Steps {
		for _, o := range st.Output {
			if strings.Contains(o.Text, s) {
				return true
			}
		}
	}
	return false
}

// hookResult is the part of hookrun's result document the tests read.
type hookResult struct {
	Result    string `json:"result"`
	Container struct {
		ID string `json:"id"`
	} `json:"job_container_context"`
	Expect       string  `json:"expect"`
	TotalMS      float64 `json:"total_ms"`
	PrepareJobMS float64 `json:"prepare_job_ms"`
	CleanupJobMS float64 `json:"cleanup_job_ms"`
	IsAlpine     bool    `json:"is_alpine"`
	Steps        []struct {
		ID         string  `json:"id"`
		Result     string  `json:"result"`
		ExitCode   *int    `json:"exit_code"`
		HookMS     float64 `json:"hook_ms"`
		ScriptMS   float64 `json:"script_ms"`
		OverheadMS float64 `json:"overhead_ms"`
		Error      string  `json:"error"`
		Output     []struct {
			Stream string `json:"stream"`
			Kind   string `json:"kind"`
			Text   string `json:"text"`
		} `json:"output"`
	} `json:"steps"`
	Calls []struct {
		Command  string   `json:"command"`
		WallMS   float64  `json:"wall_ms"`
		ExitCode int      `json:"exit_code"`
		Signals  []string `json:"signals"`
	} `json:"calls"`
	// Annotations are the job's ::error::, ::warning:: and ::notice::
	// lines, the hook's own among them.
	Annotations []struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"annotations"`
}

// step returns the step with id.
func (r *hookResult) step(t testing.TB, id string) (res string, code *int, lines []string) {
	t.Helper()
	for _, s := range r.Steps {
		if s.ID == id {
			for _, o := range s.Output {
				lines = append(lines, o.Text)
			}
			return s.Result, s.ExitCode, lines
		}
	}
	t.Fatalf("no step %q in the result", id)
	return "", nil, nil
}

// run runs example (a file of the fixture's examples/, or a path) through
// hookrun with warmpod's hook as runner runner, and returns hookrun's
// result and its log.
func (g *ghPool) run(t *testing.T, example, runner string, env ...string) (*hookResult, string) {
	t.Helper()
	cmd, out := g.hookrun(t, example, runner, env...)
	log, _ := cmd.CombinedOutput() // exit 1 when the job fails: the result says how
	return readResult(t, out, log)
}

// hookrun is the command that runs example through warmpod's hook for
// runner, and the path of its result file.
func (g *ghPool) hookrun(t *testing.T, example, runner string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	if !filepath.IsAbs(example) {
		example = filepath.Join(hooksDir(t), "examples", example)
	}
	out := filepath.Join(t.TempDir(), "result.json")
	hook := g.hookDir
	if hook == "" {
		hook = hookShim(t)
	}
	cmd := exec.Command(filepath.Join(hooksDir(t), "hookrun"), "--hook", filepath.Join(hook, "warmpod-github.sh"), "--out", out, example)
	if g.poolsFile != "" {
		env = append([]string{"WARMPOD_GITHUB_POOLS=" + g.poolsFile}, env...)
	}
	cmd.Env = append(append(os.Environ(),
		"WARMPOD_GITHUB_KUBECONFIG="+g.kubeconfig,
		"ACTIONS_RUNNER_POD_NAME="+runner,
		"HOOKRUN_TMP="+filepath.Join(g.dir, "hookrun-"+runner),
		"WARMPOD_GITHUB_STATE_DIR="+g.stateDir()), env...)
	return cmd, out
}

func readResult(t *testing.T, out string, log []byte) (*hookResult, string) {
	t.Helper()
	b, err := os.ReadFile(out)
	require.NoError(t, err, "hookrun wrote no result:\n%s", log)
	var r hookResult
	require.NoError(t, json.Unmarshal(b, &r), "%s", b)
	return &r, string(log)
}

// jobPods lists the pods of the namespace that are not idle pool pods.
func jobPods(t testing.TB, ns string) []string {
	var out []string
	for _, p := range poolPods(t, ns) {
		if p.Metadata.Labels["warmpod.dev/state"] != "idle" {
			out = append(out, p.Metadata.Name+":"+p.Metadata.Labels["warmpod.dev/state"])
		}
	}
	return out
}

// TestGitHubHookExamples runs every example of the fixture through
// warmpod's hook on one pool: each ends as hookrun expects, a failing
// step reports its own exit code, the file commands reach later steps, a
// masked value never shows, and after cleanup_job the namespace holds
// exactly the pool's idle pods.
func TestGitHubHookExamples(t *testing.T) {
	g := newGHPool(t, 2, false)
	for _, ex := range []string{"pass", "fail", "js-action", "service", "cancel"} {
		t.Run(ex, func(t *testing.T) {
			r, log := g.run(t, ex+".json", "gh-runner-"+ex)
			t.Logf("%s: %s in %.0f ms (prepare_job %.0f ms, cleanup_job %.0f ms)", ex, r.Result, r.TotalMS, r.PrepareJobMS, r.CleanupJobMS)
			require.Equal(t, r.Expect, r.Result, "hookrun:\n%s", log)
			for _, s := range r.Steps {
				for _, o := range s.Output {
					assert.NotContains(t, o.Text, "s3cr3t-value-xyz", "a secret in the log of step %s", s.ID)
					assert.NotContains(t, o.Text, "runtime-value-123 must", "an ::add-mask:: value in the log of step %s", s.ID)
				}
			}
			switch ex {
			case "pass":
				res, _, lines := r.step(t, "s2")
				assert.Equal(t, "success", res)
				assert.Contains(t, strings.Join(lines, "\n"), "GREETING=hi there answer=42", "GITHUB_ENV and GITHUB_OUTPUT reached the next step")
				assert.Contains(t, strings.Join(lines, "\n"), "PATH has /opt/hookrun/bin", "GITHUB_PATH reached the next step")
				_, _, lines = r.step(t, "s4")
				all := strings.Join(lines, "\n")
				assert.Contains(t, all, "HOME=/github/home")
				assert.Contains(t, all, "event.json: ", "GITHUB_EVENT_PATH points at the event file")
				assert.Contains(t, all, "hello workspace", "the workspace is in the pod")
			case "fail":
				res, code, _ := r.step(t, "boom")
				assert.Equal(t, "failure", res)
				require.NotNil(t, code)
				assert.Equal(t, 3, *code, "the step's own exit code, not the hook's 1")
				res, _, _ = r.step(t, "always")
				assert.Equal(t, "success", res)
			case "js-action":
				_, _, lines := r.step(t, "after")
				assert.Contains(t, strings.Join(lines, "\n"), "FROM_NODE=yes")
			case "service":
				res, _, _ := r.step(t, "get")
				assert.Equal(t, "success", res, "the service answered on localhost")
			case "cancel":
				res, _, lines := r.step(t, "long")
				assert.Equal(t, "cancelled", res)
				assert.Contains(t, strings.Join(lines, "\n"), "step got SIG", "the step's trap ran in the pod")
				for _, c := range r.Calls {
					if c.Command == "run_script_step" {
						assert.NotContains(t, c.Signals, "SIGKILL", "the hook exited before the runner's SIGKILL")
					}
				}
			}
			assert.False(t, r.stepsSaid("direct exec"), "every step went through the job's multiplexer")
			assert.Empty(t, muxProcs(t, g.stateDir()), "cleanup_job stopped the multiplexer")
			assert.Empty(t, stateFiles(t, g.stateDir()), "no socket left")
			waitFor(t, 30*time.Second, "only the pool's idle pods left", func() (bool, string) {
				left := jobPods(t, g.ns)
				return len(left) == 0, strings.Join(left, " ")
			})
		})
	}
	waitIdle(t, g.ns, g.replicas, 2*time.Minute)
}

// writeExample writes a job description for hookrun.
func writeExample(t *testing.T, job map[string]any) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), job["name"].(string)+".json")
	b, _ := json.Marshal(job)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// countedOnce checks the "count" step's output (line-1 … line-40): every
// line once and in order; it returns the step's lines.
func countedOnce(t *testing.T, r *hookResult) []string {
	t.Helper()
	_, _, lines := r.step(t, "count")
	var got, want []string
	for _, l := range lines {
		if strings.HasPrefix(l, "line-") {
			got = append(got, l)
		}
	}
	for i := 1; i <= 40; i++ {
		want = append(want, "line-"+strconv.Itoa(i))
	}
	assert.Equal(t, want, got, "every line once, in order")
	return lines
}

// The exec stream cut mid-step: the hook reattaches, every output line
// arrives once and in order, and the step ran once.
func TestGitHubHookStreamCutMidStep(t *testing.T) {
	g := newGHPool(t, 1, true)
	ex := writeExample(t, map[string]any{"name": "cut", "expect": "success",
		"container": map[string]any{"image": "localhost/hooks/job:v1"},
		"steps": []map[string]any{
			{"id": "count", "run": "echo run >> /__w/runs\ni=1; while [ $i -le 40 ]; do echo line-$i; i=$((i+1)); sleep 0.1; done"},
			{"id": "once", "run": "echo runs=$(wc -l < /__w/runs)"},
		}})
	cmd, out := g.hookrun(t, ex, "gh-runner-cut")
	var log []byte
	done := make(chan struct{})
	go func() { log, _ = cmd.CombinedOutput(); close(done) }()
	waitFor(t, 60*time.Second, "the job's pod claimed", func() (bool, string) {
		left := jobPods(t, g.ns)
		return len(left) > 0, ""
	})
	time.Sleep(2 * time.Second) // into the step's 4 s of output
	g.proxy.cut()
	<-done
	r, _ := readResult(t, out, log)
	require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
	lines := countedOnce(t, r)
	assert.Contains(t, strings.Join(lines, "\n"), "reattaching", "the stream was cut and reattached (::debug:: line)")
	_, _, lines = r.step(t, "once")
	assert.Contains(t, lines, "runs=1", "the step ran once")
}

// The job's multiplexer SIGKILLed mid-step: the step completes through a
// direct exec, every line once and in order, the step ran once, and the
// next step goes direct.
func TestGitHubHookMuxKilledMidStep(t *testing.T) {
	g := newGHPool(t, 1, false)
	t.Cleanup(func() { killMux(t, g.stateDir()) })
	ex := writeExample(t, map[string]any{"name": "muxkill", "expect": "success",
		"container": map[string]any{"image": "localhost/hooks/job:v1"},
		"steps": []map[string]any{
			{"id": "count", "run": "echo run >> /__w/runs\ni=1; while [ $i -le 40 ]; do echo line-$i; i=$((i+1)); sleep 0.1; done"},
			{"id": "once", "run": "echo runs=$(wc -l < /__w/runs)"},
		}})
	cmd, out := g.hookrun(t, ex, "gh-runner-muxkill")
	var log []byte
	done := make(chan struct{})
	go func() { log, _ = cmd.CombinedOutput(); close(done) }()
	waitFor(t, 60*time.Second, "the job's multiplexer up", func() (bool, string) {
		return len(muxProcs(t, g.stateDir())) == 1, ""
	})
	time.Sleep(2 * time.Second) // into the step's 4 s of output
	assert.Equal(t, 1, killMux(t, g.stateDir()), "the multiplexer was there to kill")
	<-done
	r, _ := readResult(t, out, log)
	require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
	lines := countedOnce(t, r)
	assert.Contains(t, strings.Join(lines, "\n"), "reattaching", "the call was resumed (::debug:: line)")
	_, _, lines = r.step(t, "once")
	assert.Contains(t, lines, "runs=1", "the step ran once")
	assert.Contains(t, strings.Join(lines, "\n"), "direct exec", "the next step went direct")
	assert.Empty(t, stateFiles(t, g.stateDir()), "cleanup_job removed the dead multiplexer's socket")
}

// The hook SIGKILLed mid-step with the runner (the runner pod dying): the
// pod's lease lapses, warmpod ends the job, and the pod deletes itself.
func TestGitHubHookKilledMidStep(t *testing.T) {
	g := newGHPool(t, 1, false)
	ex := writeExample(t, map[string]any{"name": "killed", "expect": "success",
		"container": map[string]any{"image": "localhost/hooks/job:v1"},
		"steps":     []map[string]any{{"id": "long", "run": "echo started; sleep 600"}}})
	cmd, _ := g.hookrun(t, ex, "gh-runner-killed", "WARMPOD_GITHUB_LEASE_TTL=5s")
	// A process group of its own: the test kills the runner and its hook,
	// nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var claimed string
	waitFor(t, 60*time.Second, "the step running in the pod", func() (bool, string) {
		for _, p := range poolPods(t, g.ns) {
			if p.Metadata.Labels["warmpod.dev/state"] == "claimed" {
				claimed = p.Metadata.Name
				out, _ := exec.Command(kubectl, "exec", "-n", g.ns, claimed, "--", "ps").CombinedOutput()
				return strings.Contains(string(out), "sleep 600"), string(out)
			}
		}
		return false, "no claimed pod"
	})
	killed := time.Now()
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	<-done
	waitFor(t, 90*time.Second, "the orphaned pod gone", func() (bool, string) {
		code, _, _ := api.do("GET", podPath(g.ns, claimed), nil)
		return code == 404, fmt.Sprint(code)
	})
	t.Logf("pod %s gone %v after the runner died (lease TTL 5 s, --grace 10 s)", claimed, time.Since(killed).Round(100*time.Millisecond))
	// The job's multiplexer, in a session of its own, survived the
	// runner: it renewed nothing and goes with the job.
	waitFor(t, 30*time.Second, "the job's multiplexer gone with its job", func() (bool, string) {
		return len(muxProcs(t, g.stateDir())) == 0 && len(stateFiles(t, g.stateDir())) == 0, fmt.Sprint(stateFiles(t, g.stateDir()))
	})
	waitIdle(t, g.ns, 1, 2*time.Minute)
}

// Ten jobs at once on a pool of three: each runs, no pod runs two jobs,
// and after them the namespace holds exactly the pool's pods.
func TestGitHubHookConcurrentJobs(t *testing.T) {
	g := newGHPool(t, 3, false)
	var wg sync.WaitGroup
	results := make([]*hookResult, 10)
	logs := make([]string, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd, out := g.hookrun(t, "pass.json", fmt.Sprintf("gh-runner-c%d", i))
			log, _ := cmd.CombinedOutput()
			logs[i] = string(log)
			if b, err := os.ReadFile(out); err == nil {
				var r hookResult
				if json.Unmarshal(b, &r) == nil {
					results[i] = &r
				}
			}
		}()
	}
	wg.Wait()
	pods := map[string]int{}
	for i, r := range results {
		require.NotNil(t, r, "job %d wrote no result:\n%s", i, logs[i])
		assert.Equal(t, "success", r.Result, "job %d:\n%s", i, logs[i])
		require.NotEmpty(t, r.Container.ID, "job %d: job.container.id", i)
		pods[r.Container.ID]++
	}
	for pod, n := range pods {
		assert.Equal(t, 1, n, "pod %s ran %d jobs", pod, n)
	}
	waitIdle(t, g.ns, 3, 2*time.Minute)
}

// A 200 MiB workspace arrives complete: its SHA-256 in the pod is the
// runner's.
func TestGitHubHookBigWorkspace(t *testing.T) {
	g := newGHPool(t, 1, false)
	ex := writeExample(t, map[string]any{"name": "big", "expect": "success",
		"container": map[string]any{"image": "localhost/hooks/job:v1"},
		"workspace": []map[string]any{{"path": "big.bin", "sizeMB": 200}},
		"steps":     []map[string]any{{"id": "sum", "run": "sha256sum big.bin"}}})
	cmd, out := g.hookrun(t, ex, "gh-runner-big")
	cmd.Args = append(cmd.Args[:1], append([]string{"--keep"}, cmd.Args[1:]...)...)
	log, _ := cmd.CombinedOutput()
	r, _ := readResult(t, out, log)
	require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
	t.Logf("200 MiB workspace: prepare_job %.0f ms", r.PrepareJobMS)
	var kept string
	_ = filepath.WalkDir(filepath.Join(g.dir, "hookrun-gh-runner-big"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "big.bin" {
			kept = p
		}
		return nil
	})
	require.NotEmpty(t, kept, "hookrun --keep kept no big.bin")
	f, err := os.Open(kept)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	_, _, lines := r.step(t, "sum")
	assert.Contains(t, strings.Join(lines, "\n"), hex.EncodeToString(h.Sum(nil))+"  big.bin")
}
