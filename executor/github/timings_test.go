package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/poolapi"
)

// timedPod answers a step's stage with PID 1's start and end of it.
type timedPod struct {
	*stepPod
	t              *testing.T
	started, ended time.Time
}

func (p *timedPod) Exec(ctx context.Context, pod poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) > 2 && argv[2] == "stage" {
		var out bytes.Buffer
		code, err := p.stepPod.Exec(ctx, pod, argv, stdin, stdout, &out)
		var st control.StageStatus
		require.NoError(p.t, json.Unmarshal(bytes.TrimSpace(out.Bytes()), &st))
		st.Started, st.Ended = p.started, &p.ended
		b, _ := json.Marshal(st)
		fmt.Fprintf(stderr, "%s\n", b)
		return code, err
	}
	return p.stepPod.Exec(ctx, pod, argv, stdin, stdout, stderr)
}

// --timings appends one line per call: the command, its exit status and
// its instants in order, the stage's start and end as PID 1 gave them;
// without it nothing is written.
func TestTimingsLinePerCall(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("timings %v", on), func(t *testing.T) {
			r := newRunner(t)
			r.write("_temp/abc.sh", "true")
			file := filepath.Join(t.TempDir(), "timings.jsonl")
			started := time.Now().Add(-time.Second)
			pod := &timedPod{stepPod: &stepPod{fakeCluster: &fakeCluster{}, after: func(string) string { return "out\n" }},
				t: t, started: started, ended: started.Add(40 * time.Millisecond)}
			h, out, errb := r.hook(&fakeCluster{})
			h.Cluster = pod
			if on {
				h.Cfg.Timings = file
			}
			began := time.Now()
			h.Began = began
			state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}, Runner: "runner-0"})
			code, _ := r.call(h, CmdRunScriptStep, ScriptStepArgs{EntryPoint: "sh", EntryPointArgs: []string{"-e", "/__w/_temp/abc.sh"}}, state, nil)
			require.Equal(t, 0, code, "stdout %s stderr %s", out, errb)
			b, err := os.ReadFile(file)
			if !on {
				assert.ErrorIs(t, err, os.ErrNotExist)
				return
			}
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			require.Len(t, lines, 1)
			var tr struct {
				Command                                        string
				Main, Input, Stage, Final, End, Started, Ended int64
				Accept                                         int64
				Code                                           int
			}
			require.NoError(t, json.Unmarshal([]byte(lines[0]), &tr))
			assert.Equal(t, CmdRunScriptStep, tr.Command)
			assert.Equal(t, 0, tr.Code)
			assert.Equal(t, began.UnixNano(), tr.Main)
			for _, pair := range [][2]int64{{tr.Main, tr.Input}, {tr.Input, tr.Stage}, {tr.Stage, tr.Final}, {tr.Final, tr.End}} {
				assert.LessOrEqual(t, pair[0], pair[1], "in order: %s", lines[0])
			}
			assert.Zero(t, tr.Accept, "no multiplexer took it")
			assert.Equal(t, started.UnixNano(), tr.Started)
			assert.Equal(t, started.Add(40*time.Millisecond).UnixNano(), tr.Ended)
		})
	}
}
