package github

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor/mux"
)

// callTrace is one hook call's timeline, appended to Cfg.Timings as one
// JSON line: the instrument of `make bench-github`'s breakdown of a step's
// overhead. Instants are Unix nanoseconds, 0 for a part the call did not
// have. Started and Ended are PID 1's clock: the pod's, which is this
// host's in kube-e2e, where the benchmark runs. A nil *callTrace records
// nothing (no --timings).
type callTrace struct {
	mu sync.Mutex
	// Command is the hook command.
	Command string `json:"command"`
	// Main is when the process's main began (Hook.Began), Input when its
	// input was read and decoded.
	Main  int64 `json:"main"`
	Input int64 `json:"input"`
	// ClientNS is the time spent setting up the Kubernetes client, in
	// nanoseconds (0: the call set up none).
	ClientNS int64 `json:"client_ns"`
	// Stage is when the step's stage script was made and RunStage
	// called; Accept when the job's multiplexer took the stage's call
	// (0: it went direct); Started and Ended when PID 1 started the
	// stage and saw it end; Final when RunStage returned.
	Stage   int64 `json:"stage"`
	Accept  int64 `json:"accept"`
	Started int64 `json:"started"`
	Ended   int64 `json:"ended"`
	Final   int64 `json:"final"`
	// End is when the call's work was done (its response written).
	End int64 `json:"end"`
	// Code is the hook's exit status.
	Code int `json:"code"`
	// MuxCalls and DirectCalls count the call's execs into the job's pod
	// through the multiplexer and directly.
	MuxCalls    int64 `json:"mux_calls"`
	DirectCalls int64 `json:"direct_calls"`

	muxed *mux.Cluster
}

func newTrace(began time.Time) *callTrace {
	if began.IsZero() {
		began = time.Now()
	}
	return &callTrace{Main: began.UnixNano()}
}

// at sets *field to now, once.
func (t *callTrace) at(field func(*callTrace) *int64) {
	if t == nil {
		return
	}
	now := time.Now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := field(t); *p == 0 {
		*p = now
	}
}

func (t *callTrace) input(command string) {
	if t != nil {
		t.mu.Lock()
		t.Command = command
		t.mu.Unlock()
		t.at(func(t *callTrace) *int64 { return &t.Input })
	}
}

func (t *callTrace) client(d time.Duration) {
	if t != nil {
		t.mu.Lock()
		t.ClientNS += d.Nanoseconds()
		t.mu.Unlock()
	}
}

func (t *callTrace) stage()  { t.at(func(t *callTrace) *int64 { return &t.Stage }) }
func (t *callTrace) accept() { t.at(func(t *callTrace) *int64 { return &t.Accept }) }

// final records RunStage's return and the stage's times in the pod.
func (t *callTrace) final(st *control.StageStatus) {
	t.at(func(t *callTrace) *int64 { return &t.Final })
	if t == nil || st == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !st.Started.IsZero() {
		t.Started = st.Started.UnixNano()
	}
	if st.Ended != nil {
		t.Ended = st.Ended.UnixNano()
	}
}

// via notes the call's multiplexed Cluster, whose exec counts it records.
func (t *callTrace) via(c *mux.Cluster) {
	if t != nil {
		t.mu.Lock()
		t.muxed = c
		t.mu.Unlock()
	}
}

// write appends the call's line to path; a file that cannot be written
// costs the call nothing (the benchmark finds the line missing).
func (t *callTrace) write(path string, code int) {
	if t == nil || path == "" {
		return
	}
	t.at(func(t *callTrace) *int64 { return &t.End })
	t.mu.Lock()
	t.Code = code
	if t.muxed != nil {
		t.MuxCalls, t.DirectCalls = t.muxed.Calls()
	}
	b, err := json.Marshal(t)
	t.mu.Unlock()
	if err != nil {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = f.Write(append(b, '\n'))
	_ = f.Close()
}
