package control

import (
	"github.com/warmpod/warmpod/internal/jsonenc"
)

// The documents PID 1's binary writes are encoded by package jsonenc, not
// encoding/json's reflection-based encoder (PID 1's size, issue 30). Each
// method lists its type's members in field order and leaves out what the
// json tag's omitempty would; encode_test.go checks that the bytes are
// encoding/json.Marshal's for the golden documents and for random values.
// The executor side may marshal the same types with encoding/json: the
// wire is the same.

// AppendJSON appends r as encoding/json.Marshal writes it. It never fails.
func (r *Request) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.String("op", r.Op)
	o.OmitEmpty("job", r.Job)
	if len(r.Spec) > 0 {
		o.Raw("spec", r.Spec)
	}
	o.OmitEmpty("probe", r.Probe)
	o.OmitEmpty("stage", r.Stage)
	if len(r.Argv) > 0 {
		o.Strings("argv", r.Argv)
	}
	o.OmitEmpty("dir", r.Dir)
	o.OmitEmpty("sha256", r.SHA256)
	o.OmitEmpty("path", r.Path)
	o.OmitEmpty("duration", r.Duration)
	return o.End()
}

// AppendJSON appends r as encoding/json.Marshal writes it. It never fails.
func (r *Response) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.Bool("ok", r.OK)
	o.Int("code", int64(r.Code))
	o.OmitEmpty("error", r.Error)
	o.OmitEmpty("refusal", string(r.Refusal))
	o.OmitEmpty("job", r.Job)
	o.OmitEmpty("state", r.State)
	if r.Replay {
		o.Bool("replay", true)
	}
	if len(r.Env) > 0 {
		o.Strings("env", r.Env)
	}
	if len(r.Status) > 0 {
		o.Raw("status", r.Status)
	}
	if len(r.Data) > 0 {
		o.Raw("data", r.Data)
	}
	o.OmitEmpty("log_path", r.LogPath)
	o.OmitEmpty("user", r.User)
	o.OmitEmpty("job_dir", r.JobDir)
	return o.End()
}

// AppendJSON appends s as encoding/json.Marshal writes it. It never fails.
func (s *StageStatus) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.String("stage", s.Stage)
	if s.PID != 0 {
		o.Int("pid", int64(s.PID))
	}
	o.Bool("running", s.Running)
	if s.ExitCode != nil {
		o.Int("exit_code", int64(*s.ExitCode))
	}
	o.OmitEmpty("signal", s.Signal)
	o.Bool("oom_killed", s.OOMKilled)
	o.Time("started", s.Started)
	if s.Ended != nil {
		o.Time("ended", *s.Ended)
	}
	o.Int("log_start", s.LogStart)
	if s.LogEnd != nil {
		o.Int("log_end", *s.LogEnd)
	}
	o.OmitEmpty("sha256", s.SHA256)
	if s.Replay {
		o.Bool("replay", true)
	}
	return o.End()
}

// AppendJSON appends s as encoding/json.Marshal writes it. It never fails.
func (s *JobStatus) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.String("job", s.Job)
	o.Bool("cancelled", s.Cancelled)
	o.String("log", s.Log)
	o.Value("stages", func(b []byte) []byte {
		if s.Stages == nil {
			return append(b, "null"...)
		}
		b = append(b, '[')
		for i := range s.Stages {
			if i > 0 {
				b = append(b, ',')
			}
			b = s.Stages[i].AppendJSON(b)
		}
		return append(b, ']')
	})
	return o.End()
}
