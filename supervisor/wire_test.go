package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/control"
)

// The control responses, byte for byte, as json.Marshal writes them on the
// socket. The operations return typed values and Handle marshals them: this
// pins field names, omitempty and order against what the protocol's
// clients parse. Paths under the test's temporary directory read $DIR,
// and timestamps read @+<time since the bubble's start>, so the strings
// hold in any time zone.
func TestWireResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		p := startPod(t, Config{Grace: time.Second, IdleTimeout: time.Hour, MaxJobs: 0, Version: "v1"})
		synctest.Wait()
		dir := strings.TrimSuffix(p.cfg.JobsDir, "/jobs")
		writer := p.w.spawn(0, 0, "warmpod")
		digest := strings.Repeat("ab", 32)
		steps := []struct {
			name string
			peer int
			req  control.Request
			run  func() // before the request
			want string
		}{
			{name: "status idle", req: control.Request{Op: control.OpStatus},
				want: `{"ok":true,"code":0,"state":"idle","status":{"state":"idle","jobs_run":0,"idle_since":"@+0s","idle_deadline":"@+1h0m0s","version":"v1","stdio":"pipe","shell_pid":101,"orphans_reaped":0}}`},
			{name: "job.start", req: control.Request{Op: control.OpJobStart, Spec: spec("a")},
				want: `{"ok":true,"code":0,"job":"a","state":"busy","log_path":"$DIR/logs/a.log"}`},
			{name: "job.start replay", req: control.Request{Op: control.OpJobStart, Spec: spec("a")},
				want: `{"ok":true,"code":0,"job":"a","state":"busy","replay":true}`},
			{name: "job.start busy", req: control.Request{Op: control.OpJobStart, Spec: spec("b")},
				want: `{"ok":false,"code":75,"error":"busy: another job holds the lease","refusal":"busy","state":"busy"}`},
			{name: "job.env", req: control.Request{Op: control.OpJobEnv, Job: "a"},
				want: `{"ok":true,"code":0,"job":"a","state":"busy","env":["A=1","CI_JOB_TOKEN=tok-a","TMPDIR=$DIR/jobs/a/tmp"],"log_path":"$DIR/logs/a.log"}`},
			{name: "job.stage", req: control.Request{Op: control.OpJobStage, Job: "a", Stage: "build", Argv: []string{"/bin/sh"}, SHA256: digest},
				want: `{"ok":true,"code":0,"job":"a","data":{"stage":"build","pid":104,"running":true,"oom_killed":false,"started":"@+0s","log_start":19,"sha256":"` + digest + `"}}`},
			{name: "job.stage replay", req: control.Request{Op: control.OpJobStage, Job: "a", Stage: "build", Argv: []string{"/bin/sh"}, SHA256: digest},
				want: `{"ok":true,"code":0,"job":"a","replay":true,"data":{"stage":"build","pid":104,"running":true,"oom_killed":false,"started":"@+0s","log_start":19,"sha256":"` + digest + `","replay":true}}`},
			{name: "job.stage taken", req: control.Request{Op: control.OpJobStage, Job: "a", Stage: "build", Argv: []string{"/bin/sh"}},
				want: `{"ok":false,"code":65,"error":"stage \"build\" already exists in this job","refusal":"invalid","state":"busy"}`},
			{name: "job.wait running", req: control.Request{Op: control.OpJobWait, Stage: "build", Duration: "1s"},
				want: `{"ok":false,"code":75,"error":"stage \"build\" still running after 1s","refusal":"still-running","job":"a","state":"busy","data":{"stage":"build","pid":104,"running":true,"oom_killed":false,"started":"@+0s","log_start":19,"sha256":"` + digest + `"}}`},
			{name: "job.wait ended", req: control.Request{Op: control.OpJobWait, Stage: "build"}, run: func() { p.w.exit(104, 3) },
				want: `{"ok":true,"code":0,"job":"a","data":{"stage":"build","pid":104,"running":false,"exit_code":3,"oom_killed":false,"started":"@+0s","ended":"@+1s","log_start":19,"log_end":19,"sha256":"` + digest + `"}}`},
			{name: "job.wait no stage", req: control.Request{Op: control.OpJobWait, Stage: "nope"},
				want: `{"ok":false,"code":69,"error":"no stage \"nope\"","refusal":"no-stage","state":"busy"}`},
			{name: "job.status", req: control.Request{Op: control.OpJobStatus, Job: "a"},
				want: `{"ok":true,"code":0,"job":"a","state":"busy","data":{"job":"a","cancelled":false,"log":"$DIR/logs/a.log","stages":[{"stage":"build","pid":104,"running":false,"exit_code":3,"oom_killed":false,"started":"@+0s","ended":"@+1s","log_start":19,"log_end":19,"sha256":"` + digest + `"}]},"log_path":"$DIR/logs/a.log","job_dir":"$DIR/jobs/a"}`},
			{name: "job.status stage", req: control.Request{Op: control.OpJobStatus, Stage: "build"},
				want: `{"ok":true,"code":0,"job":"a","state":"busy","data":{"stage":"build","pid":104,"running":false,"exit_code":3,"oom_killed":false,"started":"@+0s","ended":"@+1s","log_start":19,"log_end":19,"sha256":"` + digest + `"},"log_path":"$DIR/logs/a.log","job_dir":"$DIR/jobs/a"}`},
			{name: "job.cancel stage", req: control.Request{Op: control.OpJobCancel, Job: "a", Stage: "build"},
				want: `{"ok":true,"code":0,"job":"a","state":"busy","data":{"stage":"build","pid":104,"running":false,"exit_code":3,"oom_killed":false,"started":"@+0s","ended":"@+1s","log_start":19,"log_end":19,"sha256":"` + digest + `"}}`},
			{name: "job.put", peer: writer, req: control.Request{Op: control.OpJobPut, Job: "a", Path: "/tmp/x/.out.tmp-0123456789abcdef"},
				want: `{"ok":true,"code":0,"job":"a","state":"busy"}`},
			{name: "job.renew", req: control.Request{Op: control.OpJobRenew, Job: "a"},
				want: `{"ok":true,"code":0,"job":"a","state":"busy"}`},
			{name: "job.renew other", req: control.Request{Op: control.OpJobRenew, Job: "b"},
				want: `{"ok":false,"code":75,"error":"job \"b\": lease held by another job","refusal":"wrong-job","state":"busy"}`},
			{name: "probe live", req: control.Request{Op: control.OpProbe, Probe: "live"},
				want: `{"ok":true,"code":0,"state":"busy"}`},
			{name: "probe ready", req: control.Request{Op: control.OpProbe, Probe: "ready"},
				want: `{"ok":false,"code":1,"error":"busy","state":"busy"}`},
			{name: "status busy", req: control.Request{Op: control.OpStatus},
				want: `{"ok":true,"code":0,"state":"busy","status":{"state":"busy","job":"a","jobs_run":0,"version":"v1","stdio":"pipe","shell_pid":103,"orphans_reaped":0}}`},
			{name: "job.cancel", req: control.Request{Op: control.OpJobCancel, Job: "a"},
				want: `{"ok":true,"code":0,"job":"a","state":"busy","data":{"job":"a","cancelled":true,"log":"$DIR/logs/a.log","stages":[{"stage":"build","pid":104,"running":false,"exit_code":3,"oom_killed":false,"started":"@+0s","ended":"@+1s","log_start":19,"log_end":19,"sha256":"` + digest + `"}]}}`},
			{name: "job.env cancelled", req: control.Request{Op: control.OpJobEnv},
				want: `{"ok":false,"code":69,"error":"job cancelled: only status, logs, wait, cancel and end remain","refusal":"cancelled","state":"busy"}`},
			{name: "job.status cancelled", req: control.Request{Op: control.OpJobStatus},
				want: `{"ok":true,"code":0,"job":"a","state":"busy","data":{"job":"a","cancelled":true,"log":"$DIR/logs/a.log","stages":[{"stage":"build","pid":104,"running":false,"exit_code":3,"oom_killed":false,"started":"@+0s","ended":"@+1s","log_start":19,"log_end":19,"sha256":"` + digest + `"}]},"log_path":"$DIR/logs/a.log","job_dir":"$DIR/jobs/a"}`},
			{name: "job.end", req: control.Request{Op: control.OpJobEnd, Job: "a"},
				want: `{"ok":true,"code":0,"job":"a","state":"idle"}`},
			{name: "job.end none", req: control.Request{Op: control.OpJobEnd},
				want: `{"ok":false,"code":69,"error":"no job holds the lease","refusal":"no-job","state":"idle"}`},
			{name: "job.status none", req: control.Request{Op: control.OpJobStatus},
				want: `{"ok":false,"code":69,"error":"no job holds the lease","refusal":"no-job","state":"idle"}`},
			{name: "unknown", req: control.Request{Op: "job.nope"},
				want: `{"ok":false,"code":2,"error":"unknown operation \"job.nope\"","refusal":"usage","state":"idle"}`},
		}
		for _, st := range steps {
			if st.run != nil {
				st.run()
				time.Sleep(time.Second)
				synctest.Wait()
			}
			peer := st.peer
			if peer == 0 {
				peer = 2
			}
			resp := p.s.Handle(context.Background(), control.Peer{PID: peer}, &st.req)
			b, err := json.Marshal(resp)
			require.NoError(t, err)
			assert.Equal(t, st.want, normalise(string(b), dir, t0), st.name)
		}
		// The probe server's /status body: the same document, one line.
		assert.Equal(t, `{"state":"idle","jobs_run":1,"idle_since":"@+2s","idle_deadline":"@+1h0m2s","version":"v1","stdio":"pipe","shell_pid":106,"orphans_reaped":0}`+"\n",
			normalise(string(p.s.StatusJSON()), dir, t0))
		assert.Equal(t, 143, p.stop())
		assert.Equal(t, `{"state":"draining","jobs_run":1,"drain_reason":"sigterm","version":"v1","stdio":"pipe","orphans_reaped":0}`+"\n",
			normalise(string(p.s.StatusJSON()), dir, t0), "after the drain: no shell")
	})
}

// normalise replaces dir with $DIR and every RFC 3339 timestamp with its
// offset from t0.
func normalise(s, dir string, t0 time.Time) string {
	s = strings.ReplaceAll(s, dir, "$DIR")
	stamp := regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)"`)
	return stamp.ReplaceAllStringFunc(s, func(q string) string {
		at, err := time.Parse(time.RFC3339Nano, strings.Trim(q, `"`))
		if err != nil {
			return q
		}
		return fmt.Sprintf(`"@+%s"`, at.Sub(t0))
	})
}
