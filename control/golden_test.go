package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The golden files in testdata/golden are the contract's documents as
// they travel: every writer (this package's types and Client, the
// supervisor, the executor) and every reader (package jobspec, the
// executor's stage parser, the in-pod clients) is tested against them, so
// a change to a field name, its order or its omitempty shows up as a
// failing test on both sides instead of only in an end-to-end run.
// docs/reference/protocol.md describes them. Regenerate after a
// deliberate change with `go test ./control -run Golden -update`, then
// read the diff.
var update = flag.Bool("update", false, "rewrite testdata/golden from the code")

// GoldenDir is the golden files' directory, relative to this package.
const goldenDir = "testdata/golden"

// checkGolden compares got (compact JSON, or a map of name → compact
// JSON) with the golden file, byte for byte after compaction: the order
// of fields is part of the contract (the executor finds status lines by
// their `{"stage":` prefix).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		var ind bytes.Buffer
		require.NoError(t, json.Indent(&ind, got, "", "  "))
		ind.WriteByte('\n')
		require.NoError(t, os.WriteFile(path, ind.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	var c bytes.Buffer
	require.NoError(t, json.Compact(&c, want), "%s is not JSON", path)
	require.Equal(t, c.String(), string(got), "%s: the writer and the golden file differ (-update after a deliberate change)", path)
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func intp(v int) *int       { return &v }
func int64p(v int64) *int64 { return &v }

// goldenTime is the fixed instant of the golden documents.
var goldenTime = time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)

func TestGoldenDocuments(t *testing.T) {
	ended := goldenTime.Add(1500 * time.Millisecond)
	running := StageStatus{Stage: "step_script", PID: 42, Running: true, Started: goldenTime, LogStart: 1024,
		SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	done := running
	done.Running, done.ExitCode, done.Ended, done.LogEnd = false, intp(1), &ended, int64p(2048)
	killed := StageStatus{Stage: "build", PID: 57, ExitCode: intp(137), Signal: "SIGKILL", OOMKilled: true,
		Started: goldenTime, Ended: &ended, LogStart: 0, LogEnd: int64p(1024), Replay: true}
	docs := []struct {
		file string
		v    any
	}{
		{"job-spec.json", JobSpec{ID: "1234", Nonce: "5f1c0e7a9b2d4c68", Token: "glcbt-secret", Timeout: "1h10m0s",
			LeaseTTL: "1m0s", ConfigHash: "7c9e2f", Scope: "group/project",
			Variables: []JobVariable{{Key: "CI_JOB_ID", Value: "1234"}, {Key: "DEPLOY_KEY", Value: "s3cret", Masked: true},
				{Key: "KUBECONFIG", Value: "apiVersion: v1\n", File: true}},
			CleanupPaths: []string{"/builds/*", "/cache"}}},
		{"job-spec-minimal.json", JobSpec{ID: "1235", Nonce: "0a1b2c3d4e5f6071", Timeout: "1h0m0s", Variables: []JobVariable{}}},
		{"stage-status-running.json", running},
		{"stage-status-ended.json", done},
		{"stage-status-killed.json", killed},
		{"job-status.json", JobStatus{Job: "1234", Log: "/run/warmpod/logs/1234.log", Stages: []StageStatus{killed, done}}},
		{"exit-codes.json", map[string]int{"usage": ExitUsage, "data_err": ExitDataErr, "unavailable": ExitUnavailable,
			"software": ExitSoftware, "cant_create": ExitCantCreat, "io_err": ExitIOErr, "temp_fail": ExitTempFail,
			"no_perm": ExitNoPerm, "log_gone": ExitLogGone}},
	}
	for _, d := range docs {
		t.Run(d.file, func(t *testing.T) { checkGolden(t, d.file, marshal(t, d.v)) })
	}
}

// The documents read back into the same values: a reader that decodes
// the golden files with these types loses nothing.
func TestGoldenDocumentsRoundTrip(t *testing.T) {
	for file, v := range map[string]any{"job-spec.json": &JobSpec{}, "stage-status-ended.json": &StageStatus{},
		"stage-status-killed.json": &StageStatus{}, "job-status.json": &JobStatus{}} {
		b, err := os.ReadFile(filepath.Join(goldenDir, file))
		require.NoError(t, err)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(v), file)
		var c bytes.Buffer
		require.NoError(t, json.Compact(&c, b))
		require.Equal(t, c.String(), string(marshal(t, v)), file)
	}
}

// fakePID1 listens on a temporary socket and records each request line;
// every request gets resp.
func fakePID1(t *testing.T, resp string) (Client, <-chan []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	lines := make(chan []byte, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, err := bufio.NewReader(c).ReadBytes('\n')
			if err == nil {
				lines <- bytes.TrimSuffix(line, []byte("\n"))
				_, _ = c.Write([]byte(resp + "\n"))
			}
			_ = c.Close()
		}
	}()
	return Client{Socket: path}, lines
}

// Every Client method's request line, as PID 1 receives it.
func TestGoldenClientRequests(t *testing.T) {
	c, lines := fakePID1(t, `{"ok":true,"code":0}`)
	ctx := context.Background()
	calls := []struct {
		name string
		call func() (*Response, error)
	}{
		{"start", func() (*Response, error) {
			return c.Start(ctx, json.RawMessage(`{"id":"1234","nonce":"5f1c0e7a9b2d4c68","timeout":"1h0m0s","variables":[]}`))
		}},
		{"end", func() (*Response, error) { return c.End(ctx, "1234") }},
		{"env", func() (*Response, error) { return c.Env(ctx, "1234") }},
		{"status", func() (*Response, error) { return c.Status(ctx) }},
		{"probe", func() (*Response, error) { return c.Probe(ctx, "ready") }},
		{"job-status", func() (*Response, error) { return c.JobStatus(ctx, "1234", "") }},
		{"stage-status", func() (*Response, error) { return c.JobStatus(ctx, "1234", "step_script") }},
		{"stage", func() (*Response, error) {
			return c.Stage(ctx, StageRequest{Job: "1234", Stage: "step_script", Argv: []string{"/bin/bash", "/run/warmpod/jobs/1234/scripts/step_script"},
				Dir: "/builds", SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"})
		}},
		{"wait", func() (*Response, error) { return c.Wait(ctx, "1234", "step_script", time.Hour) }},
		{"cancel", func() (*Response, error) { return c.Cancel(ctx, "1234", "", 0) }},
		{"cancel-stage", func() (*Response, error) { return c.Cancel(ctx, "1234", "step_script", 5*time.Second) }},
		{"renew", func() (*Response, error) { return c.Renew(ctx, "1234") }},
		{"put", func() (*Response, error) { return c.Put(ctx, "1234", "/builds/.warmpod-put-1a2b3c") }},
		{"stall", func() (*Response, error) { return c.Stall(ctx, "3s") }},
	}
	var all bytes.Buffer
	all.WriteByte('{')
	for i, k := range calls {
		r, err := k.call()
		require.NoError(t, err, k.name)
		require.True(t, r.OK, k.name)
		if i > 0 {
			all.WriteByte(',')
		}
		all.WriteString(`"` + k.name + `":`)
		all.Write(<-lines)
	}
	all.WriteByte('}')
	checkGolden(t, "requests.json", all.Bytes())
}

// Answers as PID 1 writes them, decoded by the typed helpers. The shape
// (fields, codes) is the contract; the error texts are examples, which
// PID 1 may word differently.
func TestGoldenResponses(t *testing.T) {
	st, err := os.ReadFile(filepath.Join(goldenDir, "stage-status-running.json"))
	require.NoError(t, err)
	var stc bytes.Buffer
	require.NoError(t, json.Compact(&stc, st))
	responses := []struct {
		name string
		r    Response
	}{
		{"started", Response{OK: true, Job: "1234", State: "busy", LogPath: "/run/warmpod/logs/1234.log"}},
		{"replay", Response{OK: true, Job: "1234", State: "busy", Replay: true}},
		{"busy", Response{Code: ExitTempFail, Error: "busy: another job holds the lease", Refusal: RefusalBusy}},
		{"draining", Response{Code: ExitUnavailable, Error: "draining: the pod no longer accepts jobs", Refusal: RefusalDraining}},
		{"no-job", Response{Code: ExitUnavailable, Error: "no job holds the lease", Refusal: RefusalNoJob, State: "idle"}},
		{"bad-spec", Response{Code: ExitDataErr, Error: "job spec: timeout: longer than MaxTimeout (168h0m0s)", Refusal: RefusalInvalid}},
		{"stage", Response{OK: true, Job: "1234", Data: stc.Bytes()}},
	}
	var all bytes.Buffer
	all.WriteByte('{')
	for i, r := range responses {
		if i > 0 {
			all.WriteByte(',')
		}
		all.WriteString(`"` + r.name + `":`)
		all.Write(marshal(t, r.r))
	}
	all.WriteByte('}')
	checkGolden(t, "responses.json", all.Bytes())

	c, _ := fakePID1(t, string(marshal(t, responses[len(responses)-1].r)))
	resp, err := c.Stage(context.Background(), StageRequest{Job: "1234", Stage: "step_script"})
	require.NoError(t, err)
	s, err := resp.StageStatus()
	require.NoError(t, err)
	require.Equal(t, "step_script", s.Stage)
	require.True(t, s.Running)
	_, err = (&Response{Data: json.RawMessage(`[]`)}).StageStatus()
	require.Error(t, err)
}

func TestValidStageName(t *testing.T) {
	long := string(bytes.Repeat([]byte("a"), MaxStageName))
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"step_script", true}, {"a", true}, {"0.b-c_d", true}, {long, true},
		{"", false}, {long + "a", false}, {".hidden", false}, {"-x", false}, {"_x", false},
		{"a/b", false}, {"a b", false}, {"..", false}, {"a\n", false}, {"é", false},
	} {
		require.Equal(t, c.ok, ValidStageName(c.name), "%q", c.name)
	}
}
