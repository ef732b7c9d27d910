package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/muxproto"
	"github.com/warmpod/warmpod/poolapi"
)

// A step that the job's multiplexer serves sets up no Kubernetes client
// of its own: the multiplexer has one for the whole job (issue 30). When
// the multiplexer is not there the step sets one up, once, and goes
// direct; a client that cannot be set up is the step's error, said once,
// and not retried as a broken stream would be.
func TestRunScriptStepSetsUpAClientOnlyToGoDirect(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		name       string
		mux        bool  // a multiplexer serves the job
		connectErr error // of the client set-up
		code       int
		connects   int32
		stderr     string
	}{
		{name: "the multiplexer serves the step", mux: true, code: 0, connects: 0},
		{name: "no multiplexer: a client, once, for the direct exec", code: 0, connects: 1},
		{name: "no multiplexer, no client: its error, once", connectErr: errors.New("kubeconfig: no configuration"), code: 1, connects: 1,
			stderr: "::error::warmpod-github: kubeconfig: no configuration\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t)
			r.write("_temp/abc.sh", "echo hello")
			r.write("_temp/_runner_file_commands/set_env_1", "")
			dir, err := os.MkdirTemp("", "wpgh") // short: a socket path has 107 bytes at most
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			st := State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", UID: "u1", Bin: "/warmpod/warmpod"}, Runner: "runner-0", Server: "s1"}
			answer := func(marker string) string { return "hello\n" + marker + "\n0\n" }
			served := make(chan error, 1)
			if tc.mux {
				ln, err := net.Listen("unix", mux.SocketPath(dir, muxKey(&st)))
				require.NoError(t, err)
				defer ln.Close()
				go func() { served <- fakeMuxStage(ln, answer) }()
			}
			h, out, errb := r.hook(&fakeCluster{})
			h.Cluster = nil
			var connects atomic.Int32
			h.Connect = func() (session.Cluster, error) {
				connects.Add(1)
				if tc.connectErr != nil {
					return nil, tc.connectErr
				}
				return &stepPod{fakeCluster: &fakeCluster{}, after: answer}, nil
			}
			h.Mux = &mux.Launcher{Dir: dir}
			state, _ := json.Marshal(st)
			code, _ := r.call(h, CmdRunScriptStep, ScriptStepArgs{EntryPoint: "sh", EntryPointArgs: []string{"-e", "/__w/_temp/abc.sh"},
				EnvironmentVariables: map[string]string{"GITHUB_ENV": "/__w/_temp/_runner_file_commands/set_env_1"}}, state, nil)
			assert.Equal(t, tc.code, code, "stdout %s stderr %s", out, errb)
			assert.Equal(t, tc.connects, connects.Load(), "client set-ups")
			if tc.mux {
				require.NoError(t, <-served)
			}
			if tc.code == 0 {
				assert.Contains(t, out.String(), "hello\n", "the step's output")
				assert.NotContains(t, out.String(), "::warmpod-file-commands", "the file commands are not the step's output")
			}
			if tc.stderr != "" {
				assert.Equal(t, tc.stderr, errb.String())
			}
		})
	}
}

// fakeMuxStage serves one `job stage` call on ln as the job's multiplexer
// does, with the pod's answer played: the output answer(marker) (the
// marker from the script), a final status, exit 0.
func fakeMuxStage(ln net.Listener, answer func(string) string) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	r, w := muxproto.NewReader(c), muxproto.NewWriter(c)
	if f, err := r.Read(); err != nil || f.Type != muxproto.TypeHello {
		return fmt.Errorf("no hello: %v %v", f.Type, err)
	}
	f, err := r.Read()
	var o muxproto.Open
	if err != nil || f.Type != muxproto.TypeOpen || muxproto.Decode(f, &o) != nil || len(o.Argv) < 3 || o.Argv[2] != "stage" {
		return fmt.Errorf("no job stage: %v %v", f.Type, err)
	}
	size := -1
	for i, a := range o.Argv {
		if a == "--size" && i+1 < len(o.Argv) {
			size, _ = strconv.Atoi(o.Argv[i+1])
		}
	}
	if err := w.Write(muxproto.TypeAccept, 0, nil); err != nil {
		return err
	}
	var script bytes.Buffer
	for script.Len() < size {
		f, err := r.Read()
		if err != nil {
			return err
		}
		script.Write(f.Payload)
	}
	out := answer(string(regexp.MustCompile(`::warmpod-file-commands-[0-9a-f]+::`).Find(script.Bytes())))
	code, end := 0, int64(len(out))
	status, _ := json.Marshal(control.StageStatus{Stage: o.Argv[6], ExitCode: &code, LogEnd: &end})
	if err := w.Write(muxproto.TypeStdout, 0, []byte(out)); err != nil {
		return err
	}
	if err := w.Write(muxproto.TypeStderr, 0, append(status, '\n')); err != nil {
		return err
	}
	return w.WriteJSON(muxproto.TypeExit, 0, muxproto.Exit{Code: 0})
}
