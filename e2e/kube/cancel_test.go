//go:build kube

package kubee2e

// A cancelled stage leaves nothing behind, on both drivers (issue "Step
// 15", item 1): every process of the stage is gone within PID 1's grace
// period plus a bound after the cancel reached it, and the stage's trap
// runs once with its output in the job's log.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trapLoopLine is the job line of the report: a shell with a TERM/INT trap
// that loops over `sleep 1`, printing as it goes.
const trapLoopLine = `sh -c 'trap "echo TRAP-RAN >> /tmp/trap.log; echo TRAP-RAN; exit 143" TERM INT; i=1; while :; do echo "N-$i"; i=$((i+1)); sleep 1; done'`

// psSample is one look into the job's pod.
type psSample struct {
	at   time.Time
	gone bool   // the pod was gone (or had no container to exec into)
	ps   string // `ps -o pid,ppid,pgid,args`
	trap string // /tmp/trap.log
}

// podWatcher samples the processes of the first pod that selector
// finds (the job's pod) until stopped.
type podWatcher struct {
	mu      sync.Mutex
	samples []psSample
	stop    context.CancelFunc
	done    chan struct{}
}

func watchJobPod(t *testing.T, ns, selector string) *podWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &podWatcher{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var name string
		for ctx.Err() == nil {
			if name == "" {
				out, _ := exec.CommandContext(ctx, kubectl, "get", "pods", "-n", ns, "-l", selector,
					"-o", "jsonpath={.items[0].metadata.name}").Output()
				name = strings.TrimSpace(string(out))
				if name == "" {
					time.Sleep(200 * time.Millisecond)
					continue
				}
			}
			s := psSample{at: time.Now()}
			cctx, c := context.WithTimeout(ctx, 5*time.Second)
			out, err := exec.CommandContext(cctx, kubectl, "exec", "-n", ns, name, "-c", "build", "--",
				"sh", "-c", "ps -o pid,ppid,pgid,args; echo ---; cat /tmp/trap.log 2>/dev/null; true").CombinedOutput()
			c()
			if ctx.Err() != nil {
				return
			}
			ps, trap, ok := strings.Cut(string(out), "---\n")
			if err != nil || !ok {
				s.gone = true
			} else {
				s.ps, s.trap = ps, trap
			}
			w.mu.Lock()
			w.samples = append(w.samples, s)
			w.mu.Unlock()
			time.Sleep(300 * time.Millisecond)
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *podWatcher) close() {
	w.stop()
	<-w.done
}

// stageProcs are the lines of a ps listing that belong to the trap-loop
// stage: its outer shell (the stage script under scripts/), the Actions
// step's shell (its script under /__w/_temp/), the job line's shell and
// its sleep.
func stageProcs(ps string) []string {
	var out []string
	for _, l := range strings.Split(ps, "\n") {
		if strings.Contains(l, "/scripts/") || strings.Contains(l, "/__w/_temp/") || strings.Contains(l, "TRAP-RAN") || strings.HasSuffix(strings.TrimSpace(l), "sleep 1") {
			out = append(out, l)
		}
	}
	return out
}

// assertStageGone checks the samples taken from cancelAt + grace + bound
// on: none shows a process of the stage (a pod that is gone has none
// either), and the trap's log, where it could be read, has one line. At
// least one such sample exists.
func assertStageGone(t *testing.T, w *podWatcher, cancelAt time.Time, grace, bound time.Duration) {
	t.Helper()
	if d := time.Until(cancelAt.Add(grace + bound + time.Second)); d > 0 {
		time.Sleep(d)
	}
	w.close()
	w.mu.Lock()
	defer w.mu.Unlock()
	var dump strings.Builder
	for _, s := range w.samples {
		fmt.Fprintf(&dump, "%s gone=%v trap=%q\n%s\n", s.at.Format("15:04:05.000"), s.gone, s.trap, s.ps)
	}
	checked := 0
	for _, s := range w.samples {
		if s.at.Before(cancelAt.Add(grace + bound)) {
			continue
		}
		checked++
		if !s.gone {
			assert.LessOrEqual(t, strings.Count(s.trap, "TRAP-RAN"), 1, "the trap ran once")
			assert.Empty(t, stageProcs(s.ps), "at %s (%s after the cancel) the cancelled stage still has processes:\n%s",
				s.at.Format("15:04:05.000"), s.at.Sub(cancelAt).Round(time.Millisecond), dump.String())
		}
	}
	require.NotZero(t, checked, "no look into the pod after grace + bound:\n%s", dump.String())
}

// cancelTime is when the driver began the stage's cancel: the runner's
// timestamp on the driver's "cancelling stage" line of the raw trace.
func cancelTime(t *testing.T, rawTrace string) time.Time {
	t.Helper()
	for _, l := range strings.Split(rawTrace, "\n") {
		if strings.Contains(l, "warmpod: cancelling stage") {
			ts, _, _ := strings.Cut(l, " ")
			at, err := time.Parse(time.RFC3339Nano, ts)
			require.NoError(t, err, l)
			return at
		}
	}
	t.Fatalf("the driver never cancelled the stage:\n%s", lastLines(rawTrace, 40))
	return time.Time{}
}

func TestGitLabCancelledStageLeavesNothing(t *testing.T) {
	for _, mux := range []bool{true, false} {
		t.Run(fmt.Sprintf("mux=%v", mux), func(t *testing.T) {
			p := newPool(t, poolOpts{replicas: 1, flags: []string{fmt.Sprintf("--mux=%v", mux)}})
			for _, tc := range []struct {
				name  string
				id    int
				state string
			}{
				{"hard cancel", 131, "canceled"},
				{"graceful cancel", 132, "canceling"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					w := watchJobPod(t, p.ns, fmt.Sprintf("warmpod.dev/job=%d", tc.id))
					r := p.runJob(t, jobOpts{id: tc.id, script: []string{trapLoopLine},
						// The runner's graceful kill timeout is longer than
						// PID 1's --grace (10 s in deploy/kube-e2e/pool.yaml):
						// the stage, not the runner's SIGKILL, decides when
						// run ends. The cancel comes some 15 s into the stage.
						env: []string{"CANCEL_AFTER=15s", "CANCEL_STATE=" + tc.state, "GRACEFUL_KILL_TIMEOUT=40"}})
					require.Equal(t, 3, r.exit, r.String())
					tr := traceText(r.trace)
					// A hard cancel's last chunk is refused (GitLab drops
					// it); the mock keeps it, so the trace here is what
					// the runner sent.
					assert.Equal(t, 1, strings.Count(tr, "TRAP-RAN\n"), "the trap's output reached the trace once:\n%s", lastLines(tr, 20))
					assertStageGone(t, w, cancelTime(t, r.trace), 10*time.Second, 5*time.Second)
					waitIdle(t, p.ns, 1, 90*time.Second)
				})
			}
		})
	}
}

func TestGitHubCancelledStepLeavesNothing(t *testing.T) {
	g := newGHPool(t, 1, false)
	job := map[string]any{
		"name": "cancel-trap-loop", "expect": "cancelled",
		"container": map[string]any{"image": "localhost/hooks/job:v1"},
		"steps": []any{
			map[string]any{"id": "loop", "cancelAfter": "8s", "run": trapLoopLine},
			map[string]any{"id": "after", "run": "echo must be skipped after cancel"},
		},
	}
	b, err := json.Marshal(job)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "cancel-trap-loop.json")
	require.NoError(t, os.WriteFile(f, b, 0o644))
	w := watchJobPod(t, g.ns, "warmpod.dev/state=claimed")
	r, log := g.run(t, f, "runner-cancel")
	// The runner's signals came before the hook returned: the cancel
	// began at the latest then.
	cancelAt := time.Now()
	require.Equal(t, "cancelled", r.Result, log)
	res, _, lines := r.step(t, "loop")
	assert.Equal(t, "cancelled", res)
	assert.Equal(t, 1, strings.Count(strings.Join(lines, "\n"), "TRAP-RAN"), "the trap ran once and its output reached the step's log: %q", lines)
	assertStageGone(t, w, cancelAt, 10*time.Second, 5*time.Second)
}
