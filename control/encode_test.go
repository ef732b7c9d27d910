package control

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The types without their methods: encoding/json's reflection-based
// output for the same fields, the reference AppendJSON must equal.
type (
	plainRequest     Request
	plainResponse    Response
	plainStageStatus StageStatus
	plainJobStatus   struct {
		Job       string             `json:"job"`
		Cancelled bool               `json:"cancelled"`
		Log       string             `json:"log"`
		Stages    []plainStageStatus `json:"stages"`
	}
)

// checkAppend fails unless AppendJSON's bytes are encoding/json's for the
// same value.
func checkAppend(t testing.TB, want any, got []byte) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	assert.Equal(t, string(w), string(got))
}

func plainJob(s JobStatus) plainJobStatus {
	p := plainJobStatus{Job: s.Job, Cancelled: s.Cancelled, Log: s.Log}
	if s.Stages != nil {
		p.Stages = []plainStageStatus{}
		for _, st := range s.Stages {
			p.Stages = append(p.Stages, plainStageStatus(st))
		}
	}
	return p
}

func TestAppendJSONIsMarshals(t *testing.T) {
	at := time.Date(2026, 12, 4, 3, 4, 5, 6, time.FixedZone("", 3600))
	ended := at.Add(time.Second)
	stages := []StageStatus{
		{},
		{Stage: "step_script", PID: 42, Running: true, Started: at, LogStart: 1024, SHA256: "9f86"},
		{Stage: "build<&>", PID: 57, ExitCode: intp(137), Signal: "SIGKILL", OOMKilled: true, Started: at,
			Ended: &ended, LogEnd: int64p(1 << 40), Replay: true},
		{Stage: "x", ExitCode: intp(0), LogEnd: int64p(0)},
	}
	for _, s := range stages {
		checkAppend(t, plainStageStatus(s), s.AppendJSON(nil))
	}
	for _, j := range []JobStatus{{}, {Job: "1", Log: "/l", Stages: []StageStatus{}}, {Job: "2", Cancelled: true, Stages: stages}} {
		checkAppend(t, plainJob(j), j.AppendJSON(nil))
	}
	requests := []Request{{}, {Op: OpStatus}, {Op: "job.start", Job: "j", Spec: json.RawMessage(` {"id": "j", "token": "<t>"} `)},
		{Op: "job.stage", Job: "j", Stage: "s", Argv: []string{"/bin/sh", "-c", "echo \u2028"}, Dir: "/b", SHA256: "ab",
			Path: "/p", Duration: "1m", Probe: "ready"}, {Op: "x", Argv: []string{}}}
	for _, r := range requests {
		checkAppend(t, plainRequest(r), r.AppendJSON(nil))
	}
	responses := []Response{{}, {OK: true, Job: "j", State: "busy", Replay: true, LogPath: "/l", User: "1000:1000", JobDir: "/d"},
		{Code: ExitTempFail, Error: "busy: <another> job & more"}, {OK: true, Env: []string{"A=1", "B=\x00"},
			Status: json.RawMessage(`{"state":"idle"}`), Data: json.RawMessage("[1, 2]\n")}, {Env: []string{}}}
	for _, r := range responses {
		checkAppend(t, plainResponse(r), r.AppendJSON(nil))
	}
}

func FuzzAppendJSONIsMarshals(f *testing.F) {
	f.Add("job.start", "j-1", `{"id":"j-1"}`, "step_script", "/bin/sh", 0, int64(7), true)
	f.Add("", "", "", "", "", -1, int64(-1), false)
	f.Fuzz(func(t *testing.T, op, job, raw, stage, arg string, code int, n int64, flag bool) {
		if !json.Valid([]byte(raw)) {
			raw = "" // RawMessage fields hold valid JSON: PID 1 checks it on the way in
		}
		r := Request{Op: op, Job: job, Spec: json.RawMessage(raw), Stage: stage, Argv: []string{arg, op}, Dir: arg}
		checkAppend(t, plainRequest(r), r.AppendJSON(nil))
		resp := Response{OK: flag, Code: code, Error: arg, Job: job, State: op, Replay: flag, Env: []string{arg},
			Data: json.RawMessage(raw), Status: json.RawMessage(raw), LogPath: stage, User: job, JobDir: arg}
		checkAppend(t, plainResponse(resp), resp.AppendJSON(nil))
		s := StageStatus{Stage: stage, PID: code, Running: flag, ExitCode: &code, Signal: arg, Started: time.Unix(n%(1<<35), n).UTC(),
			LogStart: n, LogEnd: &n, SHA256: job, Replay: !flag}
		checkAppend(t, plainStageStatus(s), s.AppendJSON(nil))
		j := JobStatus{Job: job, Cancelled: flag, Log: arg, Stages: []StageStatus{s, s}}
		checkAppend(t, plainJob(j), j.AppendJSON(nil))
	})
}
