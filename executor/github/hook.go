package github

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// Config is the hook's configuration (flags of warmpod-github, each also
// WARMPOD_GITHUB_<NAME>).
type Config struct {
	// WarmWait, ReadyTimeout, LeaseTTL and MaxStreamRetries are the
	// executor core's (executor.Core).
	WarmWait, ReadyTimeout, LeaseTTL time.Duration
	MaxStreamRetries                 int
	// ResizeTimeout bounds the wait for the in-place resize of a warm pod
	// to the job's resources (executor.Core.ResizeTimeout).
	ResizeTimeout time.Duration
	// CancelGrace is the stage's grace period on cancel: the runner sends
	// SIGKILL 10 s after its SIGINT, so the stage's traps get this long
	// and the hook still streams the end and exits before that.
	CancelGrace time.Duration
	// ChunkSize is the size of each verified piece of the _work transfer
	// (a broken stream resends one piece, not the whole), in bytes; 0:
	// DefaultChunkSize. Streams is how many pieces go at once, each on
	// an exec of its own; 0: DefaultStreams. The transfer holds up to
	// Streams+2 pieces in memory.
	ChunkSize int64
	Streams   int
	// Timeout is the job's lease in the pod (the Actions service enforces
	// the job's timeout-minutes itself; default 6 h, its maximum).
	Timeout time.Duration
	// Timings, when set, is a file that gets one JSON line per call with
	// its timeline (callTrace: the benchmark's instrument).
	Timings string
}

// State is what prepare_job answers as the hook's state, and what every
// later command gets back: which pod runs the job.
type State struct {
	// Job is the job's id in the pod (warmpod's lease, the pod's label).
	Job string `json:"job"`
	// Pod is the pod that runs the job.
	Pod poolapi.Pod `json:"pod"`
	// Runner and Server label the pod (poolapi.Owner).
	Runner string `json:"runner"`
	Server string `json:"server"`
}

// Hook runs one command of the container hook.
type Hook struct {
	Cfg Config
	// Cluster reaches the job's pod (exec, delete, list: a step's and
	// cleanup_job's calls).
	Cluster session.Cluster
	// Connect makes Cluster when it is nil, once the input has been read
	// and checked: bad input is reported as such, whatever the kubeconfig.
	Connect func() (session.Cluster, error)
	// Pods carries out the commands that claim or create pods
	// (prepare_job, run_container_step): KubePods, on client-go. Nil in a
	// build without it, which refuses them with ErrNoPods.
	Pods Pods
	// Env is the hook process's environment (the runner's, plus GITHUB_*
	// and RUNNER_*).
	Env map[string]string
	// Stdout and Stderr go to the runner's output manager: the step's log.
	Stdout, Stderr io.Writer
	// Mux starts the job's multiplexer at prepare_job, carries the later
	// commands' execs through it, and stops it at cleanup_job (package
	// mux); nil: every command execs directly.
	Mux *mux.Launcher
	// Began is when the process's main began (Cfg.Timings; zero: when
	// Run began).
	Began time.Time

	trace *callTrace // nil without Cfg.Timings
}

// debugWriter turns each line written to it into a ::debug:: workflow
// command: the hook's own notes show in the log only with step debug on.
type debugWriter struct{ w io.Writer }

func (d debugWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l != "" {
			if _, err := fmt.Fprintf(d.w, "::debug::%s\n", l); err != nil {
				return 0, err
			}
		}
	}
	return len(p), nil
}

// warningWriter turns each line written to it into a ::warning:: workflow
// command: shown in the job's log and its annotations at the default
// level, for what the operator must fix.
type warningWriter struct{ w io.Writer }

func (d warningWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l != "" {
			if _, err := fmt.Fprintf(d.w, "::warning::%s\n", l); err != nil {
				return 0, err
			}
		}
	}
	return len(p), nil
}

// session makes this command's calls on the job's pod over cl; with the
// job's state its execs go through the job's multiplexer when it answers.
func (h *Hook) session(cl session.Cluster, st *State) *session.Session {
	if st != nil {
		cl = h.Mux.Wrap(cl, muxKey(st), st.Job, st.Pod, debugWriter{h.Stdout})
		if mc, ok := cl.(*mux.Cluster); ok && h.trace != nil {
			mc.Accepted = h.trace.accept
			h.trace.via(mc)
		}
	}
	return &session.Session{Cluster: cl, Log: debugWriter{h.Stdout}, LeaseTTL: h.Cfg.LeaseTTL,
		MaxStreamRetries: h.Cfg.MaxStreamRetries, CancelGrace: h.Cfg.CancelGrace}
}

// Pods carries out the hook's commands that claim or create pods.
type Pods interface {
	// PrepareJob is prepare_job: a pod for the job container.
	PrepareJob(ctx context.Context, h *Hook, args PrepareJobArgs, cancel <-chan struct{}) (*Response, error)
	// RunContainerStep is run_container_step: a container action's
	// image in a pod of its own.
	RunContainerStep(ctx context.Context, h *Hook, job *State, args Container, cancel <-chan struct{}) error
}

// MaxInput bounds the command the hook reads from stdin, in bytes.
const MaxInput = 64 << 20

// ErrNoPods is a command that claims or creates pods in a build without
// Pods.
var ErrNoPods = errors.New("this build of the hook claims no pods")

// muxKey names the job's multiplexer.
func muxKey(st *State) string { return "github/" + st.Job + "/" + st.Server }

// ErrInput is a hook input that cannot be acted on (not JSON, an unknown
// command, missing args or state): the runner's or a human's mistake, not
// the cluster's.
var ErrInput = errors.New("hook input")

// StepError is a step whose script exited non-zero: the hook exits with
// Code, as the runner reports the hook's status as the step's.
type StepError struct{ Code int }

func (e *StepError) Error() string { return fmt.Sprintf("the step exited with %d", e.Code) }

// Run reads one command from stdin and carries it out. cancel is closed
// when the runner cancels (SIGINT or SIGTERM). It returns the hook's exit
// status: 0, the step's own status for run_script_step, 1 for anything
// else that failed (the error printed as an ::error:: line on stderr).
func (h *Hook) Run(ctx context.Context, stdin io.Reader, cancel <-chan struct{}) int {
	if h.Cfg.Timings != "" {
		h.trace = newTrace(h.Began)
	}
	code := h.status(h.run(ctx, stdin, cancel))
	h.trace.write(h.Cfg.Timings, code)
	return code
}

// status is the hook's exit status for run's error (printing it).
func (h *Hook) status(err error) int {
	var se *StepError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &se):
		return se.Code
	}
	fmt.Fprintf(h.Stderr, "::error::warmpod-github: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	return 1
}

func (h *Hook) run(ctx context.Context, stdin io.Reader, cancel <-chan struct{}) error {
	// The runner writes one line; hooklib keeps the last non-empty line,
	// so does this (a stray empty line after it is not an error).
	b, err := io.ReadAll(io.LimitReader(stdin, MaxInput))
	if err != nil {
		return fmt.Errorf("%w: stdin: %v", ErrInput, err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var in Input
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &in); err != nil {
		return fmt.Errorf("%w: stdin is not the runner's JSON: %v", ErrInput, err)
	}
	switch in.Command {
	case CmdPrepareJob, CmdRunScriptStep, CmdRunContainerStep, CmdCleanupJob:
	default:
		return fmt.Errorf("%w: unknown command %q", ErrInput, in.Command)
	}
	h.trace.input(in.Command)
	if err := h.connect(in.Command); err != nil {
		return err
	}
	var resp *Response
	switch in.Command {
	case CmdPrepareJob:
		var args PrepareJobArgs
		if err := unmarshalArgs(in.Args, &args); err != nil {
			return err
		}
		if h.Pods == nil {
			return ErrNoPods
		}
		resp, err = h.Pods.PrepareJob(ctx, h, args, cancel)
	case CmdRunScriptStep:
		st, serr := stateOf(in.State)
		if serr != nil {
			return serr
		}
		var args ScriptStepArgs
		if err := unmarshalArgs(in.Args, &args); err != nil {
			return err
		}
		resp, err = h.runScriptStep(ctx, st, args, cancel)
	case CmdRunContainerStep:
		var args Container
		if err := unmarshalArgs(in.Args, &args); err != nil {
			return err
		}
		st, _ := stateOf(in.State) // a job without a job container has none
		if h.Pods == nil {
			return ErrNoPods
		}
		err = h.Pods.RunContainerStep(ctx, h, st, args, cancel)
	case CmdCleanupJob:
		st, _ := stateOf(in.State) // cleans up what it can without one
		err = h.cleanupJob(ctx, st)
	}
	if resp != nil && in.ResponseFile != "" {
		if werr := writeResponse(in.ResponseFile, resp); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// connect sets up Cluster for command: for a step that the job's
// multiplexer serves at its first use (session.Lazy), which is never when
// every exec of the step goes through the multiplexer; for cleanup_job at
// once. prepare_job and run_container_step are Pods', which connects its
// own.
func (h *Hook) connect(command string) error {
	if h.Cluster != nil || h.Connect == nil || command == CmdPrepareJob || command == CmdRunContainerStep {
		return nil
	}
	if command == CmdRunScriptStep && h.Mux != nil {
		h.Cluster = &session.Lazy{Connect: h.Connect, Took: h.trace.client}
		return nil
	}
	t0 := time.Now()
	cl, err := h.Connect()
	h.trace.client(time.Since(t0))
	if err != nil {
		return err
	}
	h.Cluster = cl
	return nil
}

func unmarshalArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("%w: no args", ErrInput)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: args: %v", ErrInput, err)
	}
	return nil
}

// stateOf decodes the state prepare_job answered. Errors: ErrInput when
// there is none (prepare_job did not run or failed).
func stateOf(raw json.RawMessage) (*State, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("%w: no state: did prepare_job succeed?", ErrInput)
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil || st.Job == "" || st.Pod.Name == "" {
		return nil, fmt.Errorf("%w: state is not warmpod's: %s", ErrInput, raw)
	}
	return &st, nil
}

// writeResponse writes the response file the runner created (it reads it
// after the hook's exit 0).
func writeResponse(path string, r *Response) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// runner is the name of the runner this hook serves: ARC's runner pod
// (ACTIONS_RUNNER_POD_NAME), else the host name. It labels every pod the
// hook holds, so cleanup_job finds them all.
func (h *Hook) runner() string {
	r := h.Env["ACTIONS_RUNNER_POD_NAME"]
	if r == "" {
		r, _ = os.Hostname()
	}
	return labelSafe(r)
}

// server is a hash of the Actions server's URL (GITHUB_SERVER_URL).
func (h *Hook) server() string {
	s := sha256.Sum256([]byte(h.Env["GITHUB_SERVER_URL"]))
	return hex.EncodeToString(s[:8])
}

// newJobID is a fresh id for the job in the pod: the runner's job ids are
// not in the hook's environment, and the id only has to be unique among
// the pods of one runner.
func newJobID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "gh-" + hex.EncodeToString(b)
}

// labelSafe makes s a Kubernetes label value: at most 63 bytes of
// [A-Za-z0-9._-], alphanumeric at both ends (a pod name always is).
func labelSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	s = strings.Trim(string(b), "-._")
	if len(s) > 63 {
		s = strings.Trim(s[:63], "-._")
	}
	if s == "" {
		s = "runner"
	}
	return s
}

// workDir is the runner's _work directory on this host: RUNNER_TEMP is
// _work/_temp (HostContext.GetDirectory), GITHUB_WORKSPACE
// _work/<repo>/<repo>.
func (h *Hook) workDir() (string, error) {
	if t := h.Env["RUNNER_TEMP"]; t != "" {
		return filepath.Dir(t), nil
	}
	if w := h.Env["GITHUB_WORKSPACE"]; w != "" {
		return filepath.Dir(filepath.Dir(w)), nil
	}
	return "", fmt.Errorf("%w: neither RUNNER_TEMP nor GITHUB_WORKSPACE is set: is this called by the Actions runner?", ErrInput)
}

// cleanupJob ends the job in its pod (`warmpod job end`) and deletes the
// pod, then every other pod labelled for this runner (an earlier job's it
// lost track of, a prepare_job cancelled before it answered).
func (h *Hook) cleanupJob(ctx context.Context, st *State) error {
	s := h.session(h.Cluster, st)
	if st != nil {
		s.End(ctx, &st.Pod, st.Job, poolapi.Owner{Job: st.Job, Server: st.Server, Runner: st.Runner})
		h.Mux.Stop(muxKey(st), st.Job, st.Pod, s.Log)
	}
	s.End(ctx, nil, "", poolapi.Owner{Runner: h.runner()})
	return nil
}
