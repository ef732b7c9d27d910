package control

import (
	"github.com/warmpod/warmpod/internal/jsondec"
)

// The documents PID 1's binary reads are decoded by package jsondec, not
// encoding/json's reflection-based decoder (PID 1's size, issue 30). Each
// list names every member of the type's json tags: a member
// missing here would be ignored when read (decode_test.go compares each
// with encoding/json).

// decode fills r from the JSON object data (jsondec.Unmarshal's errors).
func (r *Request) decode(data []byte) error {
	return jsondec.Unmarshal(data,
		jsondec.Member("op", &r.Op),
		jsondec.Member("job", &r.Job),
		jsondec.Member("spec", &r.Spec),
		jsondec.Member("probe", &r.Probe),
		jsondec.Member("stage", &r.Stage),
		jsondec.Member("argv", &r.Argv),
		jsondec.Member("dir", &r.Dir),
		jsondec.Member("sha256", &r.SHA256),
		jsondec.Member("path", &r.Path),
		jsondec.Member("duration", &r.Duration),
	)
}

// decode fills r from the JSON object data (jsondec.Unmarshal's errors).
func (r *Response) decode(data []byte) error {
	return jsondec.Unmarshal(data,
		jsondec.Member("ok", &r.OK),
		jsondec.Member("code", &r.Code),
		jsondec.Member("error", &r.Error),
		jsondec.Member("refusal", (*string)(&r.Refusal)),
		jsondec.Member("job", &r.Job),
		jsondec.Member("state", &r.State),
		jsondec.Member("replay", &r.Replay),
		jsondec.Member("env", &r.Env),
		jsondec.Member("status", &r.Status),
		jsondec.Member("data", &r.Data),
		jsondec.Member("log_path", &r.LogPath),
		jsondec.Member("user", &r.User),
		jsondec.Member("job_dir", &r.JobDir),
	)
}

// stageStatusFunc decodes a StageStatus object into s.
func stageStatusFunc(s *StageStatus) jsondec.Func {
	return jsondec.Object(
		jsondec.Member("stage", &s.Stage),
		jsondec.Member("pid", &s.PID),
		jsondec.Member("running", &s.Running),
		jsondec.Member("exit_code", &s.ExitCode),
		jsondec.Member("signal", &s.Signal),
		jsondec.Member("oom_killed", &s.OOMKilled),
		jsondec.Member("started", &s.Started),
		jsondec.Member("ended", &s.Ended),
		jsondec.Member("log_start", &s.LogStart),
		jsondec.Member("log_end", &s.LogEnd),
		jsondec.Member("sha256", &s.SHA256),
		jsondec.Member("replay", &s.Replay),
	)
}

// jobStatusFunc decodes a JobStatus object into s.
func jobStatusFunc(s *JobStatus) jsondec.Func {
	return jsondec.Object(
		jsondec.Member("job", &s.Job),
		jsondec.Member("cancelled", &s.Cancelled),
		jsondec.Member("log", &s.Log),
		jsondec.Member("stages", jsondec.Slice(&s.Stages, stageStatusFunc)),
	)
}
