//go:build kube

package kubee2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// muxProcs are the pids of the job multiplexers of the driver whose
// state directory is stateDir: processes this test's runner started (the
// directory is the test's own temporary one), found by their command line.
func muxProcs(t testing.TB, stateDir string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i, a := range args {
			if a == "mux" && i+1 < len(args) && strings.Contains(args[i+1], stateDir+"/") {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// killMux SIGKILLs the multiplexers of stateDir (see muxProcs) and returns
// how many there were.
func killMux(t testing.TB, stateDir string) int {
	t.Helper()
	pids := muxProcs(t, stateDir)
	for _, pid := range pids {
		if pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return len(pids)
}

// stateFiles lists what is left in the driver's state directory.
func stateFiles(t testing.TB, stateDir string) []string {
	t.Helper()
	ents, err := os.ReadDir(stateDir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// linesOf returns the trace's lines with prefix, in order.
func linesOf(tr, prefix string) []string {
	var got []string
	for _, l := range strings.Split(tr, "\n") {
		if strings.HasPrefix(l, prefix) {
			got = append(got, l)
		}
	}
	return got
}

func numbered(prefix string, n int) []string {
	want := make([]string, n)
	for i := range want {
		want[i] = prefix + strconv.Itoa(i)
	}
	return want
}

// afterStage runs f once the driver has recorded stage of job id (a run
// timing line), after delay: the build stage is then streaming.
func afterStage(p *glrPool, id int, stage string, delay time.Duration, f func()) func() {
	return func() {
		go func() {
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				b, _ := os.ReadFile(p.timingsFile)
				found := false
				for _, l := range bytes.Split(b, []byte("\n")) {
					found = found || bytes.Contains(l, []byte(`"stage":"`+stage+`"`)) && bytes.Contains(l, []byte(`"job":"`+strconv.Itoa(id)+`"`))
				}
				if found {
					time.Sleep(delay)
					f()
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
}

func TestGitLabMultiplexer(t *testing.T) {
	p := newPool(t, poolOpts{replicas: 2})
	state := filepath.Join(p.dir, "state")
	t.Cleanup(func() { killMux(t, state) })

	t.Run("every stage and the job end go through one stream", func(t *testing.T) {
		r := p.runJob(t, jobOpts{id: 601, script: []string{`echo "JOB-OUTPUT: $CI_JOB_ID"`}})
		require.Equal(t, 0, r.exit, r.String())
		assert.Contains(t, traceText(r.trace), "JOB-OUTPUT: 601")
		assert.NotContains(t, traceText(r.trace), "direct exec")
		for _, tm := range p.timings(t, 601) {
			if tm.Call == "prepare" {
				continue
			}
			assert.Positive(t, tm.MuxCalls, "%s %s went through the multiplexer", tm.Call, tm.Stage)
			assert.Zero(t, tm.DirectCalls, "%s %s: no direct exec", tm.Call, tm.Stage)
		}
		assert.Empty(t, muxProcs(t, state), "cleanup stopped the multiplexer")
		assert.Empty(t, stateFiles(t, state), "no socket or state file left")
	})

	t.Run("killed mid-stage: the stage completes exactly and later stages go direct", func(t *testing.T) {
		var killed atomic.Int32
		r := p.runJob(t, jobOpts{id: 602, script: []string{
			`echo run >> /builds/runs`,
			`i=0; while [ $i -lt 40 ]; do echo "LINE-$i"; i=$((i+1)); sleep 0.1; done`,
			`echo "RUNS=$(wc -l < /builds/runs)"`,
		}, after: []string{`echo "AFTER: $CI_JOB_STATUS"`},
			onRunning: afterStage(p, 602, "get_sources", 1500*time.Millisecond, func() { killed.Store(int32(killMux(t, state))) })})
		require.Equal(t, 0, r.exit, r.String())
		require.EqualValues(t, 1, killed.Load(), "one multiplexer was killed")
		tr := traceText(r.trace)
		assert.Equal(t, numbered("LINE-", 40), linesOf(tr, "LINE-"), "every line once, in order, across the kill")
		assert.Contains(t, tr, "RUNS=1", "the stage did not run again")
		assert.Contains(t, tr, "AFTER: success")
		var build, after timing
		for _, tm := range p.timings(t, 602) {
			switch tm.Stage {
			case "build_script":
				build = tm
			case "after_script":
				after = tm
			}
		}
		assert.Positive(t, build.MuxCalls, "the build stage began on the multiplexer")
		assert.Positive(t, build.DirectCalls, "and was resumed by a direct exec")
		assert.Zero(t, after.MuxCalls, "after_script: the dead multiplexer was not used")
		assert.Positive(t, after.DirectCalls)
		assert.Empty(t, stateFiles(t, state), "cleanup removed the dead multiplexer's socket")
	})

	t.Run("fifty jobs: each reaches its own pod, nothing is left", func(t *testing.T) {
		const jobs, parallel = 50, 5
		results := make([]jobResult, jobs)
		sem := make(chan struct{}, parallel)
		var wg sync.WaitGroup
		for i := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				results[i] = p.runJob(t, jobOpts{id: 700 + i, script: []string{
					`echo "JOB-OUTPUT: $CI_JOB_ID on $POD_NAME"`}})
			}()
		}
		wg.Wait()
		re := regexp.MustCompile(`runs on (?:warm|cold) pod (\S+)`)
		for i, r := range results {
			id := 700 + i
			require.Equal(t, 0, r.exit, "job %d: %s", id, r)
			tr := traceText(r.trace)
			m := re.FindStringSubmatch(tr)
			require.NotNil(t, m, "job %d trace: %s", id, tr)
			// The pod's name as its PID 1 has it (downward API): the stage
			// ran in the pod prepare named, and no other job's output came.
			assert.Equal(t, []string{fmt.Sprintf("JOB-OUTPUT: %d on %s", id, m[1])}, linesOf(tr, "JOB-OUTPUT: "), "job %d ran in its own pod", id)
			for _, tm := range p.timings(t, id) {
				if tm.Call == "run" {
					assert.Positive(t, tm.MuxCalls, "job %d %s through the multiplexer", id, tm.Stage)
				}
			}
		}
		assert.Empty(t, muxProcs(t, state), "no multiplexer process left")
		assert.Empty(t, stateFiles(t, state), "no socket or state file left")
	})
}
