package github

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor/fake"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// fakeCluster is the executor side's fake Kubernetes (package fake)
// whose pod it plays: job start, job put (the digest checked), the
// unpack, job stage (runs nothing: answers with output and an exit code),
// the file commands' way back, job end.
type fakeCluster struct {
	fake.Cluster
	mu       sync.Mutex
	starts   []control.JobSpec
	scripts  []string
	puts     map[string][]byte // path → content
	podFiles map[string]string // what the step left in the pod's file commands
	stepCode int
	// breakPut makes the first n puts fail with a broken stream.
	breakPut int
	// noJobExec plays a warmpod older than `job exec`.
	noJobExec bool
}

// argvs are f's execs' argv, in order.
func argvs(f *fakeCluster) [][]string {
	var out [][]string
	for _, e := range f.Execs() {
		out = append(out, e.Argv)
	}
	return out
}

// PodsOfJob: a runner's sweep (no job) finds a pod left over.
func (f *fakeCluster) PodsOfJob(ctx context.Context, o poolapi.Owner) ([]poolapi.Pod, error) {
	_, _ = f.Cluster.PodsOfJob(ctx, o) // recorded
	if o.Job == "" && o.Runner != "" {
		return []poolapi.Pod{{Name: "leftover", UID: "u-left"}}, nil
	}
	return nil, nil
}

// Exec is recorded by the fake and answered as the pod would.
func (f *fakeCluster) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var in []byte
	if h, ok := stdin.(interface{ Held() []byte }); ok {
		in = h.Held()
	} else if stdin != nil {
		in, _ = io.ReadAll(stdin)
	}
	_, _ = f.Cluster.Exec(ctx, p, argv, bytes.NewReader(in), io.Discard, io.Discard) // recorded
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(argv) > 6 && argv[1] == "job" && argv[2] == "exec" {
		if f.noJobExec {
			fmt.Fprintln(stderr, `warmpod: unknown job command "exec"`)
			return 2, nil
		}
		argv = argv[slices.Index(argv, "--")+1:] // what it execs
	}
	switch {
	case len(argv) > 2 && argv[1] == "job" && argv[2] == "start":
		var s control.JobSpec
		if err := json.Unmarshal(in, &s); err != nil {
			return 65, nil
		}
		f.starts = append(f.starts, s)
		return 0, nil
	case len(argv) > 3 && argv[2] == "put":
		return f.put(argv[3], argv[slices.Index(argv, "--sha256")+1], in)
	case len(argv) > 7 && argv[0] == "sh" && argv[6] == "put" && strings.Contains(argv[2], "tar -xf"):
		// The last piece, and the unpack in the same exec: the put's argv
		// as sh's "$@".
		put := argv[4:]
		return f.put(put[3], put[slices.Index(put, "--sha256")+1], in)
	case len(argv) == 3 && argv[0] == "sh" && strings.Contains(argv[2], "tar -xf"):
		return 0, nil // the unpack alone, after a large last piece
	case len(argv) > 2 && argv[1] == "job" && argv[2] == "stage":
		f.scripts = append(f.scripts, string(in))
		// The step prints a line, split across writes, then its script
		// prints the marker and the file commands (as writeStepScript's
		// loop does).
		out := "step output\n"
		if m := regexp.MustCompile(`printf '%s\\n' '(::warmpod-file-commands-[0-9a-f]+::)'`).FindStringSubmatch(string(in)); m != nil {
			out += m[1] + "\n"
			for _, path := range regexp.MustCompile(`(?m)^for f in (.*?); do `).FindStringSubmatch(string(in))[1:] {
				for _, q := range strings.Fields(path) {
					q = strings.Trim(q, "'")
					if c, ok := f.podFiles[q]; ok {
						out += fmt.Sprintf("%d\n%s", len(c), c)
					} else {
						out += "-1\n"
					}
				}
			}
		}
		for i := 0; i < len(out); i += 7 {
			fmt.Fprint(stdout, out[i:min(i+7, len(out))])
		}
		code := f.stepCode
		end := int64(len(out))
		b, _ := json.Marshal(control.StageStatus{Stage: argv[6], ExitCode: &code, LogEnd: &end})
		fmt.Fprintf(stderr, "%s\n", b)
		return code, nil
	case len(argv) > 2 && argv[1] == "job" && argv[2] == "end":
		return 0, nil
	}
	return 127, nil
}

func (f *fakeCluster) put(path, sha string, in []byte) (int, error) {
	if f.breakPut > 0 {
		f.breakPut--
		return -1, errors.New("stream reset")
	}
	sum := sha256.Sum256(in)
	if hex.EncodeToString(sum[:]) != sha {
		return 65, nil
	}
	if f.puts == nil {
		f.puts = map[string][]byte{}
	}
	f.puts[path] = in
	return 0, nil
}

const testPools = `apiVersion: apps/v1
kind: Deployment
metadata: {name: job}
spec:
  selector: {matchLabels: {warmpod.dev/pool: job, warmpod.dev/state: idle}}
  template:
    metadata:
      labels: {warmpod.dev/pool: job, warmpod.dev/state: idle}
      annotations: {warmpod.dev/alpine: "false"}
    spec:
      containers:
      - {name: job, image: localhost/hooks/job:v1, command: [/warmpod/warmpod], imagePullPolicy: Never}
`

// runner lays out a runner's _work as the Actions runner does.
type runner struct {
	t    *testing.T
	root string
	work string
	env  map[string]string
}

func newRunner(t *testing.T) *runner {
	root := t.TempDir()
	r := &runner{t: t, root: root, work: filepath.Join(root, "_work")}
	for _, d := range []string{"_temp/_github_home", "_temp/_github_workflow", "_temp/_runner_file_commands", "_actions/o/a/v1", "repo/repo"} {
		require.NoError(t, os.MkdirAll(filepath.Join(r.work, d), 0o755))
	}
	r.write("repo/repo/README.md", "hello\n")
	r.write("_actions/o/a/v1/index.js", "console.log(1)\n")
	r.write("_temp/_github_workflow/event.json", "{}")
	r.write("_temp/other-step.sh", "not for the pod at prepare_job")
	r.env = map[string]string{"RUNNER_TEMP": filepath.Join(r.work, "_temp"), "GITHUB_WORKSPACE": filepath.Join(r.work, "repo/repo"),
		"ACTIONS_RUNNER_POD_NAME": "runner-0", "GITHUB_SERVER_URL": "https://github.com"}
	return r
}

func (r *runner) write(rel, content string) {
	require.NoError(r.t, os.WriteFile(filepath.Join(r.work, rel), []byte(content), 0o644))
}

func (r *runner) hook(f *fakeCluster) (*Hook, *bytes.Buffer, *bytes.Buffer) {
	set, err := pool.Parse(strings.NewReader(testPools))
	require.NoError(r.t, err)
	var out, errb bytes.Buffer
	h := &Hook{Cfg: Config{MaxStreamRetries: 2, ChunkSize: 1024}, Env: r.env, Stdout: &out, Stderr: &errb}
	kp := &KubePods{Pools: set}
	if f != nil {
		h.Cluster, kp.Cluster = f, f
	}
	h.Pods = kp
	return h, &out, &errb
}

// call runs one command as the runner does and returns the exit status
// and the response.
func (r *runner) call(h *Hook, cmd string, args any, state json.RawMessage, cancel <-chan struct{}) (int, *Response) {
	resp := filepath.Join(r.work, "_temp", "resp.json")
	require.NoError(r.t, os.WriteFile(resp, nil, 0o644))
	b, _ := json.Marshal(args)
	if state == nil {
		state = json.RawMessage("null")
	}
	in, _ := json.Marshal(Input{Command: cmd, ResponseFile: resp, Args: b, State: state})
	code := h.Run(context.Background(), bytes.NewReader(append(in, '\n')), cancel)
	raw, _ := os.ReadFile(resp)
	if len(raw) == 0 {
		return code, nil
	}
	var out Response
	require.NoError(r.t, json.Unmarshal(raw, &out), "%s", raw)
	return code, &out
}

func TestPrepareJobClaimsAWarmPodAndBringsWorkIn(t *testing.T) {
	r := newRunner(t)
	r.write("repo/repo/big.bin", strings.Repeat("x", 5000)) // several 1 KiB pieces
	f := &fakeCluster{Cluster: fake.Cluster{Warm: []poolapi.Pod{{Name: "w1", UID: "u1", Bin: "/warmpod/warmpod", Warm: true, Pool: "job"}}}, breakPut: 1}
	h, out, errb := r.hook(f)
	code, resp := r.call(h, CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: "localhost/hooks/job:v1",
		EnvironmentVariables: map[string]string{"HOME": "/github/home", "CONTAINER_LEVEL": "from-container-env-9f", "bad-name": "y"}, PortMappings: []string{"8080"}},
		Services: []Container{}}, nil, nil)
	require.Equal(t, 0, code, "stdout %s stderr %s", out, errb)
	require.NotNil(t, resp)
	require.NotNil(t, resp.IsAlpine)
	assert.False(t, *resp.IsAlpine, "the pool's annotation")
	assert.Equal(t, "w1", resp.State.Pod.Name)
	assert.Equal(t, "runner-0", resp.State.Runner)
	assert.Equal(t, "w1", resp.Context.Container.ID)
	assert.Equal(t, map[string]string{"8080": "8080"}, resp.Context.Container.Ports)
	require.Len(t, f.starts, 1)
	assert.Equal(t, resp.State.Job, f.starts[0].ID)
	assert.Equal(t, []control.JobVariable{{Key: "CI", Value: "true"}, {Key: "CONTAINER_LEVEL", Value: "from-container-env-9f"},
		{Key: "GITHUB_ACTIONS", Value: "true"}, {Key: "HOME", Value: "/github/home"}}, f.starts[0].Variables,
		"the container's environment on job start's stdin with GITHUB_ACTIONS and CI, a name warmpod cannot export left out")
	assert.Contains(t, errb.String(), `"bad-name" is not a POSIX name`)
	for _, a := range argvs(f) {
		assert.NotContains(t, strings.Join(a, " "), "from-container-env-9f", "no variable in argv")
	}
	// The pieces put together are the archive of what the pod needs.
	var names []string
	for n := range f.puts {
		names = append(names, n)
	}
	slices.Sort(names)
	require.Greater(t, len(names), 4, "5 KiB in 1 KiB pieces")
	assert.Len(t, argvs(f), 1+len(names)+1, "job start, a put per piece (the last one unpacks them all), the piece sent again")
	var archive []byte
	for _, n := range names {
		archive = append(archive, f.puts[n]...)
	}
	files := tarNames(t, archive)
	assert.Contains(t, files, "repo/repo/big.bin")
	assert.Contains(t, files, "_actions/o/a/v1/index.js")
	assert.Contains(t, files, "_temp/_github_workflow/event.json")
	assert.NotContains(t, files, "_temp/other-step.sh", "steps bring their own scripts")
	assert.Regexp(t, `::debug::warmpod: piece [0-9]+ of _work did not arrive whole`, out.String(), "a broken piece is sent again (the first put to break: several go at once)")
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		assert.True(t, strings.HasPrefix(l, "::debug::"), "only ::debug:: lines of the hook's own on stdout: %q", l)
	}
}

func TestPrepareJobWithServicesNoPoolHasIsCold(t *testing.T) {
	r := newRunner(t)
	f := &fakeCluster{Cluster: fake.Cluster{Warm: []poolapi.Pod{{Name: "w1", Warm: true}}}}
	h, _, _ := r.hook(f)
	ep := "httpd"
	code, resp := r.call(h, CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: "localhost/hooks/job:v1"},
		Services: []Container{{Image: "localhost/hooks/svc:v1", EntryPoint: &ep, EntryPointArgs: []string{"-f"}, PortMappings: []string{"18080:18080"},
			EnvironmentVariables: map[string]string{"A": "1"}}}}, nil, nil)
	require.Equal(t, 0, code)
	require.Len(t, f.Colds(), 1, "no pool has that service set: a cold pod")
	cs := f.Colds()[0].Template.Spec.Containers
	require.Len(t, cs, 2)
	assert.Equal(t, "localhost/hooks/svc:v1", cs[1].Image)
	assert.Equal(t, []string{"httpd"}, cs[1].Command)
	assert.Equal(t, "Never", string(cs[1].ImagePullPolicy), "the pool's pull policy")
	assert.Equal(t, int32(18080), cs[1].Ports[0].ContainerPort)
	require.Len(t, resp.Context.Services, 1)
	assert.Equal(t, map[string]string{"18080": "18080"}, resp.Context.Services[0].Ports)
}

func TestRunScriptStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
	}{{"success", 0}, {"the step's own exit status", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t)
			r.write("_temp/abc.sh", "echo hi\nexit 0")
			r.write("_temp/_runner_file_commands/set_env_1", "")
			r.write("_temp/_runner_file_commands/set_output_1", "")
			f := &fakeCluster{stepCode: tc.code, podFiles: map[string]string{
				"/__w/_temp/_runner_file_commands/set_env_1":    "GREETING=hi there\n",
				"/__w/_temp/_runner_file_commands/set_output_1": "answer=42\n"}}
			h, out, _ := r.hook(f)
			state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}, Runner: "runner-0"})
			code, resp := r.call(h, CmdRunScriptStep, ScriptStepArgs{EntryPoint: "sh", EntryPointArgs: []string{"-e", "/__w/_temp/abc.sh"},
				EnvironmentVariables: map[string]string{"GITHUB_ENV": "/__w/_temp/_runner_file_commands/set_env_1",
					"GITHUB_OUTPUT": "/__w/_temp/_runner_file_commands/set_output_1", "TOKEN": "it's s3cr3t"},
				PrependPath: []string{"/opt/b", "/opt/a"}, WorkingDirectory: "/__w/repo/repo"}, state, nil)
			assert.Equal(t, tc.code, code)
			assert.Nil(t, resp)
			assert.Equal(t, "step output\n", out.String(), "the step's output, the file commands taken out of it")
			require.Len(t, f.scripts, 1)
			s := f.scripts[0]
			assert.Contains(t, s, "printf '%s' 'echo hi\nexit 0' > '/__w/_temp/abc.sh'", "the step's script, byte for byte")
			assert.Contains(t, s, "export TOKEN='it'\\''s s3cr3t'\n", "the step's environment on stdin")
			assert.Contains(t, s, "export PATH='/opt/b:/opt/a':\"$PATH\"\n")
			assert.Contains(t, s, "cd '/__w/repo/repo' || exit 1\n")
			assert.Contains(t, s, "trap 'cancelled=1' TERM INT HUP\n(\n")
			assert.Contains(t, s, "exec 'sh' '-e' '/__w/_temp/abc.sh'\n)\nrc=$?\n")
			assert.Len(t, argvs(f), 1, "one exec per step: the file commands come back in the stage's stream")
			for _, a := range argvs(f) {
				assert.NotContains(t, strings.Join(a, " "), "s3cr3t", "no secret in argv")
			}
			b, _ := os.ReadFile(filepath.Join(r.work, "_temp/_runner_file_commands/set_env_1"))
			assert.Equal(t, "GREETING=hi there\n", string(b), "the file commands come back, also after a failure")
			b, _ = os.ReadFile(filepath.Join(r.work, "_temp/_runner_file_commands/set_output_1"))
			assert.Equal(t, "answer=42\n", string(b))
		})
	}
}

func TestCleanupJobEndsTheJobAndSweepsTheRunnersPods(t *testing.T) {
	r := newRunner(t)
	f := &fakeCluster{}
	h, _, _ := r.hook(f)
	state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", UID: "u1", Bin: "/warmpod/warmpod"}, Runner: "runner-0", Server: "s"})
	code, _ := r.call(h, CmdCleanupJob, struct{}{}, state, nil)
	assert.Equal(t, 0, code)
	assert.Equal(t, []string{"/warmpod/warmpod", "job", "end", "--job", "gh-1"}, argvs(f)[0])
	assert.Equal(t, []string{"w1", "leftover"}, f.Deleted())
	assert.Contains(t, f.Listed(), poolapi.Owner{Runner: "runner-0"})
}

func TestBadInputIsAClearError(t *testing.T) {
	for _, tc := range []struct {
		name, stdin, want string
	}{
		{"not JSON", "{nope\n", "stdin is not the runner's JSON"},
		{"unknown command", `{"command":"frob","args":{}}` + "\n", `unknown command "frob"`},
		{"a step without state", `{"command":"run_script_step","args":{"entryPoint":"sh"},"state":null}` + "\n", "did prepare_job succeed?"},
		{"a state of someone else's", `{"command":"run_script_step","args":{"entryPoint":"sh"},"state":{"jobPod":"x"}}` + "\n", "state is not warmpod's"},
		{"no job container", `{"command":"prepare_job","args":{"container":null,"services":[]}}` + "\n", "the job has no container"},
		{"a Dockerfile action", `{"command":"run_container_step","args":{"image":"","dockerfile":"Dockerfile"}}` + "\n", "Dockerfile actions are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t)
			f := &fakeCluster{}
			h, _, errb := r.hook(f)
			code := h.Run(context.Background(), strings.NewReader(tc.stdin), nil)
			assert.Equal(t, 1, code)
			assert.Contains(t, errb.String(), tc.want)
			assert.True(t, strings.HasPrefix(errb.String(), "::error::"), errb.String())
			assert.Empty(t, argvs(f), "nothing reached the cluster")
		})
	}
}

func TestHostPath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"/__w/_temp/a.sh", "/r/_work/_temp/a.sh", true},
		{"/__w/../etc/passwd", "", false},
		{"/__w/_temp/../../x", "", false},
		{"/github/home/x", "", false},
		{"", "", false},
	} {
		got, ok := hostPath("/r/_work", tc.in)
		assert.Equal(t, tc.ok, ok, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestLabelSafe(t *testing.T) {
	assert.Equal(t, "runner-0", labelSafe("runner-0"))
	assert.Equal(t, "a-b", labelSafe("a/b"))
	assert.Equal(t, "runner", labelSafe("///"))
	assert.Len(t, labelSafe(strings.Repeat("x", 100)), 63)
}

// tarNames lists the entries of a tar archive.
func tarNames(t *testing.T, b []byte) []string {
	tr := tar.NewReader(bytes.NewReader(b))
	var out []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, h.Name)
	}
}

// The tap passes output through as it comes and takes out what follows
// the marker, however the writes split it.
func TestFileTap(t *testing.T) {
	const m = "::warmpod-file-commands-00::"
	for _, tc := range []struct {
		name, in, out, rest string
		found               bool
	}{
		{"marker after output", "a\nb\n" + m + "\n3\nxyz", "a\nb\n", "\n3\nxyz", true},
		{"output without a final newline", "partial" + m + "\n-1\n", "partial", "\n-1\n", true},
		{"a lookalike tail is held, then passed on", "x ::warmpod-file-commands-0", "x ::warmpod-file-commands-0", "", false},
		{"colons in output", "a::b::\n", "a::b::\n", "", false},
	} {
		for _, split := range []int{1, 3, 7, 1000} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, split), func(t *testing.T) {
				var out bytes.Buffer
				tap := &fileTap{w: &out, marker: []byte(m)}
				for i := 0; i < len(tc.in); i += split {
					n, err := tap.Write([]byte(tc.in[i:min(i+split, len(tc.in))]))
					require.NoError(t, err)
					require.Equal(t, min(split, len(tc.in)-i), n)
				}
				tap.flush()
				assert.Equal(t, tc.out, out.String())
				assert.Equal(t, tc.found, tap.found)
				assert.Equal(t, tc.rest, tap.rest.String())
			})
		}
	}
}

// The stage script, run by a real sh: the step's files at their paths, its
// environment (a name sh cannot export through env(1)), its PATH and
// working directory, its exit status, and after the marker the file
// commands framed by size, whatever PATH and IFS the step set.
func TestStepScriptUnderSh(t *testing.T) {
	dir := t.TempDir()
	fc := filepath.Join(dir, "fc")
	step := filepath.Join(dir, "step.sh")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "wd"), 0o755))
	var script bytes.Buffer
	writeStepScript(&script,
		map[string][]byte{step: []byte("echo \"in $(pwd) A=$A\"; echo 'env line' > \"$GITHUB_ENV\"; printf partial; exit 3"), fc: nil},
		map[string]string{"A": "it's", "INPUT_FETCH-DEPTH": "1", "GITHUB_ENV": fc, "IFS": "0", "PATH": "/nonexistent"},
		[]string{"/usr/bin:/bin"}, filepath.Join(dir, "wd"), []string{"sh", step}, []string{fc, filepath.Join(dir, "gone")}, "::m::")
	sp := filepath.Join(dir, "stage.sh")
	require.NoError(t, os.WriteFile(sp, script.Bytes(), 0o500))
	cmd := exec.Command("/bin/sh", sp)
	out, err := cmd.Output()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 3, ee.ExitCode(), "the step's status")
	assert.Equal(t, "in "+filepath.Join(dir, "wd")+" A=it's\npartial::m::\n9\nenv line\n-1\n", string(out))
	assert.NoFileExists(t, sp, "the script, with the step's secrets, removes itself")

	// A JavaScript action's hyphenated input reaches the entry point (node;
	// here env(1) itself), which a shell would drop.
	script.Reset()
	writeStepScript(&script, nil, map[string]string{"INPUT_FETCH-DEPTH": "1"}, nil, "", []string{"env"}, nil, "")
	require.NoError(t, os.WriteFile(sp, script.Bytes(), 0o500))
	out, err = exec.Command("/bin/sh", sp).Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), "INPUT_FETCH-DEPTH=1\n")
}
