package gitlab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/fake"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// fakeCluster is the executor side's fake Kubernetes (package fake):
// the tests' OnExec plays the pod.
type fakeCluster = fake.Cluster

// execs are fc's execs, each the pod's name then the argv.
func execs(fc *fakeCluster) [][]string {
	var out [][]string
	for _, e := range fc.Execs() {
		out = append(out, append([]string{e.Pod}, e.Argv...))
	}
	return out
}

// stdins are what fc's execs had on stdin, in order.
func stdins(fc *fakeCluster) []string {
	var out []string
	for _, e := range fc.Execs() {
		out = append(out, e.Stdin)
	}
	return out
}

// resized are fc's claims with a resize: "POD requests … , limits …".
func resized(fc *fakeCluster) []string {
	var out []string
	for _, r := range fc.Resized() {
		out = append(out, r.Pod+" "+executor.Describe(r.Want))
	}
	return out
}

const manifest = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: alpine}
spec:
  selector: {matchLabels: {warmpod.dev/pool: alpine, warmpod.dev/state: idle}}
  template:
    metadata: {labels: {warmpod.dev/pool: alpine, warmpod.dev/state: idle}}
    spec:
      containers:
      - {name: build, image: alpine:3.20, command: [/wp/warmpod]}
`

func newDriver(t *testing.T, fc *fakeCluster, env map[string]string) (*Driver, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	set, err := pool.Parse(strings.NewReader(manifest))
	require.NoError(t, err)
	e := Env{"CUSTOM_ENV_CI_JOB_ID": "42", "CUSTOM_ENV_CI_JOB_TOKEN": "glcbt-secret", "CUSTOM_ENV_CI_JOB_TIMEOUT": "3600"}
	for k, v := range env {
		e[k] = v
	}
	var out, errb bytes.Buffer
	d := &Driver{Cfg: Config{StateDir: t.TempDir(), BuildsDir: "/builds", CacheDir: "/cache", Version: "v1",
		LeaseTTL: time.Minute, MaxStreamRetries: 3}, Cluster: fc, Pods: &KubePods{Cluster: fc, Pools: set}, Env: e, Stdout: &out, Stderr: &errb, Now: time.Now}
	return d, &out, &errb
}

// kube is d's KubePods, for a test to set its pools and bounds.
func kube(d *Driver) *KubePods { return d.Pods.(*KubePods) }

func TestConfigJSON(t *testing.T) {
	d, out, _ := newDriver(t, &fakeCluster{}, nil)
	require.NoError(t, d.Config())
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	assert.Equal(t, map[string]any{"builds_dir": "/builds", "cache_dir": "/cache", "builds_dir_is_shared": false,
		"hostname": "warmpod-alpine", "driver": map[string]any{"name": "warmpod", "version": "v1"}}, doc)
}

func TestPrepareWarmThenJobStart(t *testing.T) {
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Bin: "/wp/warmpod", Hash: "h", Warm: true, Pool: "alpine"}}}
	d, out, _ := newDriver(t, fc, nil)
	require.NoError(t, d.Prepare(context.Background()))
	assert.Contains(t, out.String(), "job 42 runs on warm pod w1")
	require.Len(t, execs(fc), 1)
	assert.Equal(t, []string{"w1", "/wp/warmpod", "job", "start"}, execs(fc)[0])
	assert.NotContains(t, strings.Join(execs(fc)[0], " "), "glcbt-secret", "the token is never in argv")
	var spec map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdins(fc)[0]), &spec))
	assert.Equal(t, "42", spec["id"])
	assert.Equal(t, "glcbt-secret", spec["token"])
	assert.Equal(t, "1h10m0s", spec["timeout"], "the job's timeout plus the margin for after_script")
	assert.Equal(t, "1m0s", spec["lease_ttl"])
	assert.Equal(t, "h", spec["config_hash"])
	st, err := d.loadState(Job{ID: "42"})
	require.NoError(t, err)
	assert.Equal(t, "w1", st.Pod.Name)
	assert.Empty(t, fc.Deleted())
}

func TestPrepareRefusedPodIsDeletedAndNextTried(t *testing.T) {
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true}, {Name: "w2", Warm: true}}}
	fc.OnExec = func(_ poolapi.Pod, argv []string, _ []byte, _, stderr io.Writer) (int, error) {
		if len(execs(fc)) == 1 {
			fmt.Fprintln(stderr, "warmpod: busy")
			return 75, nil
		}
		return 0, nil
	}
	d, out, _ := newDriver(t, fc, nil)
	require.NoError(t, d.Prepare(context.Background()))
	assert.Equal(t, []string{"w1"}, fc.Deleted())
	assert.Contains(t, out.String(), "pod w1 did not take the job")
	assert.Contains(t, out.String(), "runs on warm pod w2")
}

func TestPrepareStopsOnForbidden(t *testing.T) {
	fc := &fakeCluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true}, {Name: "w2", Warm: true}}}
	fc.OnExec = func(poolapi.Pod, []string, []byte, io.Writer, io.Writer) (int, error) {
		return -1, errors.New(`unable to upgrade streaming request: pods "w1" is forbidden: User "x" cannot get resource "pods/exec"`)
	}
	d, _, _ := newDriver(t, fc, nil)
	err := d.Prepare(context.Background())
	var se *SystemError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "deploy/gitlab-rbac.yaml")
	assert.Equal(t, []string{"w1"}, fc.Deleted(), "one pod, not the whole pool")
}

func TestPrepareColdFallbackAndOtherImage(t *testing.T) {
	fc := &fakeCluster{}
	d, out, _ := newDriver(t, fc, map[string]string{"CUSTOM_ENV_CI_JOB_IMAGE": "golang:1.26"})
	require.NoError(t, d.Prepare(context.Background()))
	assert.Equal(t, 1, len(fc.Colds()))
	assert.Contains(t, out.String(), "runs on cold pod cold-1")
	assert.Contains(t, out.String(), "no pool runs image golang:1.26")
}

func TestPrepareErrorsAreSystemFailures(t *testing.T) {
	fc := &fakeCluster{OnExec: func(poolapi.Pod, []string, []byte, io.Writer, io.Writer) (int, error) {
		return -1, errors.New("stream reset")
	}}
	d, _, _ := newDriver(t, fc, nil)
	err := d.Prepare(context.Background())
	var se *SystemError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, []string{"cold-1", "cold-2", "cold-3", "cold-4", "cold-5"}, fc.Deleted(), "each pod that could not take the job is deleted, the next tried, five at most")

	d2, _, _ := newDriver(t, &fakeCluster{}, nil)
	delete(d2.Env, "CUSTOM_ENV_CI_JOB_ID")
	require.ErrorAs(t, d2.Prepare(context.Background()), &se)
}

// stageAnswer writes the two JSON lines of `warmpod job stage` and output.
func stageAnswer(stdout, stderr io.Writer, output string, code int) {
	fmt.Fprintln(stderr, `{"stage":"x","running":true,"log_start":10}`)
	io.WriteString(stdout, output)
	fmt.Fprintf(stderr, `{"stage":"x","running":false,"exit_code":%d,"started":"2026-01-01T00:00:00Z","ended":"2026-01-01T00:00:01Z"}`+"\n", code)
}

func prepared(t *testing.T, fc *fakeCluster) (*Driver, *bytes.Buffer, *bytes.Buffer, string) {
	t.Helper()
	fc.Warm = []poolapi.Pod{{Name: "w1", Bin: "/wp/warmpod", Warm: true}}
	d, out, errb := newDriver(t, fc, nil)
	require.NoError(t, d.Prepare(context.Background()))
	out.Reset()
	script := filepath.Join(t.TempDir(), "script")
	require.NoError(t, os.WriteFile(script, []byte("echo hi\nexit 3\n"), 0o700))
	return d, out, errb, script
}

func TestRunStreamsAndMapsExitCodes(t *testing.T) {
	fc := &fakeCluster{}
	d, out, _, script := prepared(t, fc)
	fc.OnExec = func(_ poolapi.Pod, argv []string, stdin []byte, stdout, stderr io.Writer) (int, error) {
		stageAnswer(stdout, stderr, "hi\n", 3)
		return 3, nil
	}
	err := d.Run(context.Background(), script, "build_script", nil)
	var be *BuildError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 3, be.Code)
	assert.Equal(t, "hi\n", out.String())
	last := execs(fc)[len(execs(fc))-1]
	assert.Equal(t, []string{"w1", "/wp/warmpod", "job", "stage", "--job", "42", "--stage", "01-build_script", "--size", "15",
		"--sha256", sha256Hex("echo hi\nexit 3\n"), "--offset", "0"}, last)
	assert.Equal(t, "echo hi\nexit 3\n", stdins(fc)[len(stdins(fc))-1], "the script goes on stdin")

	// The exit code file and the runner's codes, at the edge.
	codeFile := filepath.Join(t.TempDir(), "code")
	assert.Equal(t, 7, ExitCode(err, ExitCodes{BuildFailure: 7, SystemFailure: 8, ExitCodeFile: codeFile}, io.Discard))
	b, _ := os.ReadFile(codeFile)
	assert.Equal(t, "3\n", string(b))
	assert.Equal(t, 8, ExitCode(&SystemError{Err: errors.New("x")}, ExitCodes{BuildFailure: 7, SystemFailure: 8}, io.Discard))
	assert.Equal(t, 0, ExitCode(nil, ExitCodes{}, io.Discard))

	// A second call of the same stage (a retried get_sources) gets a new name.
	require.Error(t, d.Run(context.Background(), script, "build_script", nil))
	assert.Equal(t, "02-build_script", execs(fc)[len(execs(fc))-1][7])
}

func TestRunReattachesAfterABrokenStream(t *testing.T) {
	fc := &fakeCluster{}
	d, out, errb, script := prepared(t, fc)
	calls := 0
	fc.OnExec = func(_ poolapi.Pod, argv []string, stdin []byte, stdout, stderr io.Writer) (int, error) {
		calls++
		switch calls {
		case 1:
			fmt.Fprintln(stderr, `{"stage":"x","running":true}`)
			io.WriteString(stdout, "line-1\nli")
			return -1, errors.New("connection reset by peer")
		default:
			assert.Equal(t, "9", argv[len(argv)-1], "the reattach resumes after the bytes already in the trace")
			assert.NotEmpty(t, stdin, "the script is sent again (the stage may not have started), never run twice: warmpod attaches by digest")
			stageAnswer(stdout, stderr, "ne-2\n", 0)
			return 0, nil
		}
	}
	require.NoError(t, d.Run(context.Background(), script, "build_script", nil))
	assert.Equal(t, "line-1\nline-2\n", out.String())
	assert.Contains(t, errb.String(), "reattaching at byte 9")
}

// A stream that ends after the final status line but before the last
// output bytes is reattached, not taken for the end.
func TestRunReattachesWhenOutputIsShort(t *testing.T) {
	fc := &fakeCluster{}
	d, out, _, script := prepared(t, fc)
	calls := 0
	fc.OnExec = func(_ poolapi.Pod, argv []string, _ []byte, stdout, stderr io.Writer) (int, error) {
		calls++
		if calls == 1 {
			io.WriteString(stdout, "abc")
			fmt.Fprintln(stderr, `{"stage":"x","running":false,"exit_code":0,"log_start":10,"log_end":16}`)
			return -1, errors.New("reset")
		}
		assert.Equal(t, "3", argv[len(argv)-1])
		io.WriteString(stdout, "def")
		fmt.Fprintln(stderr, `{"stage":"x","running":false,"exit_code":0,"log_start":10,"log_end":16}`)
		return 0, nil
	}
	require.NoError(t, d.Run(context.Background(), script, "build_script", nil))
	assert.Equal(t, "abcdef", out.String())
	assert.Equal(t, 2, calls)
}

func TestRunGivesUpAfterRetries(t *testing.T) {
	fc := &fakeCluster{}
	d, _, _, script := prepared(t, fc)
	d.Cfg.MaxStreamRetries = 1
	fc.OnExec = func(poolapi.Pod, []string, []byte, io.Writer, io.Writer) (int, error) { return -1, errors.New("EOF") }
	var se *SystemError
	require.ErrorAs(t, d.Run(context.Background(), script, "build_script", nil), &se)
}

func TestRunWarmpodErrorIsASystemFailure(t *testing.T) {
	fc := &fakeCluster{}
	d, _, _, script := prepared(t, fc)
	fc.OnExec = func(_ poolapi.Pod, _ []string, _ []byte, _, stderr io.Writer) (int, error) {
		fmt.Fprintln(stderr, "warmpod: no job holds the lease")
		return 69, nil
	}
	err := d.Run(context.Background(), script, "build_script", nil)
	var se *SystemError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "no job holds the lease")
}

func TestRunSIGTERMCancelsTheStage(t *testing.T) {
	fc := &fakeCluster{}
	d, _, _, script := prepared(t, fc)
	term := make(chan os.Signal, 1)
	cancelled := make(chan struct{})
	fc.OnExec = func(_ poolapi.Pod, argv []string, _ []byte, stdout, stderr io.Writer) (int, error) {
		switch argv[2] {
		case "cancel":
			assert.Equal(t, []string{"/wp/warmpod", "job", "cancel", "--job", "42", "--stage", "01-build_script"}, argv)
			close(cancelled)
			return 0, nil
		case "stage":
			term <- os.Interrupt
			<-cancelled // the stage ends because it was cancelled
			stageAnswer(stdout, stderr, "trapped\n", 143)
			return 143, nil
		}
		return 0, nil
	}
	err := d.Run(context.Background(), script, "build_script", term)
	var be *BuildError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 143, be.Code)
}

func TestRunWithoutPrepare(t *testing.T) {
	d, _, _ := newDriver(t, &fakeCluster{}, nil)
	var se *SystemError
	require.ErrorAs(t, d.Run(context.Background(), "/nonexistent", "build_script", nil), &se)
}

func TestCleanupEndsTheJobOrDeletesThePod(t *testing.T) {
	fc := &fakeCluster{}
	d, _, _, _ := prepared(t, fc)
	require.NoError(t, d.Cleanup(context.Background()))
	assert.Equal(t, []string{"w1", "/wp/warmpod", "job", "end", "--job", "42"}, execs(fc)[len(execs(fc))-1])
	assert.Equal(t, []string{"w1"}, fc.Deleted(), "deleted after job end too: it must go even when it cannot delete itself")
	_, err := d.loadState(Job{ID: "42"})
	assert.ErrorIs(t, err, os.ErrNotExist, "the state file is gone")

	fc2 := &fakeCluster{}
	d2, _, _, _ := prepared(t, fc2)
	fc2.OnExec = func(poolapi.Pod, []string, []byte, io.Writer, io.Writer) (int, error) {
		return -1, errors.New("pod gone")
	}
	require.NoError(t, d2.Cleanup(context.Background()))
	assert.Equal(t, []string{"w1"}, fc2.Deleted())
}

func TestJobFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  Env
		want string // error substring, "" = ok
	}{
		{Env{"CUSTOM_ENV_CI_JOB_ID": "7"}, ""},
		{Env{}, "CUSTOM_ENV_CI_JOB_ID is not set"},
		{Env{"CUSTOM_ENV_CI_JOB_ID": "7;rm"}, "CUSTOM_ENV_CI_JOB_ID"},
		{Env{"CUSTOM_ENV_CI_JOB_ID": strings.Repeat("1", 64)}, "CUSTOM_ENV_CI_JOB_ID"},
		{Env{"CUSTOM_ENV_CI_JOB_ID": "7", "CUSTOM_ENV_CI_JOB_TIMEOUT": "1h"}, "CUSTOM_ENV_CI_JOB_TIMEOUT"},
	} {
		_, err := JobFromEnv(tc.env)
		if tc.want == "" {
			assert.NoError(t, err)
		} else {
			assert.ErrorContains(t, err, tc.want)
		}
	}
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
