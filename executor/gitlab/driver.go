package gitlab

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// Config is the driver's configuration (flags of warmpod-gitlab).
type Config struct {
	// ResizeTimeout bounds the wait for an in-place resize of a warm pod;
	// when it is not applied by then the pod is released and the job gets
	// a cold pod with its resources.
	ResizeTimeout time.Duration
	// WarmWait is how long prepare waits for a Ready idle pod before it
	// falls back to a cold pod (0: one look).
	WarmWait time.Duration
	// ReadyTimeout bounds the wait for a cold pod to be Ready.
	ReadyTimeout time.Duration
	// LeaseTTL is the job's lease heartbeat in the pod: a runner that
	// vanishes leaves a pod that ends the job within it and then drains.
	LeaseTTL time.Duration
	// BuildsDir and CacheDir are the paths in the pod that config reports.
	BuildsDir, CacheDir string
	// StateDir holds one small file per running job: the pod it runs on
	// (the runner calls each program separately).
	StateDir string
	// Version is the driver's version for config's driver block.
	Version string
	// Timings, when set, is a file that gets one JSON line per call with
	// its wall time and, for run, the stage's own time in the pod (the
	// benchmark's instrument).
	Timings string
	// MaxStreamRetries bounds how often run reattaches to a stage after a
	// broken exec stream.
	MaxStreamRetries int
}

// Driver runs one call of the Custom executor.
type Driver struct {
	Cfg Config
	// Cluster reaches the job's pod for run and cleanup when the job's
	// multiplexer cannot carry a call (and lists the job's pods at
	// cleanup).
	Cluster session.Cluster
	// Pods carries out the calls that read pools and claim pods (config,
	// prepare): KubePods, on client-go. Nil in the per-stage build
	// (warmpod-gitlab-run), which makes only run's calls.
	Pods   Pods
	Env    Env
	Stdout io.Writer // the job's trace
	Stderr io.Writer // the job's trace too (prepare, run)
	// Now is the clock (time.Now in production).
	Now func() time.Time
	// Mux starts the job's multiplexer at prepare, carries run's and
	// cleanup's execs through it, and stops it at cleanup (package mux);
	// nil: every call execs directly.
	Mux *mux.Launcher

	muxed *mux.Cluster // this call's, for its timings

	spansMu sync.Mutex
	spans   []Span // this call's steps, for its timings
}

// Pods carries out the calls that read the pools or claim pods.
type Pods interface {
	// Config is config_exec ([Driver.Config]).
	Config(d *Driver) error
	// Prepare is prepare_exec ([Driver.Prepare]).
	Prepare(ctx context.Context, d *Driver) error
}

// ErrNoPods is config or prepare in a build without Pods.
var ErrNoPods = errors.New("config and prepare are the full build's (warmpod-gitlab), not the per-stage build's")

// Config prints config_exec's JSON (KubePods.Config).
func (d *Driver) Config() error {
	if d.Pods == nil {
		return ErrNoPods
	}
	return d.Pods.Config(d)
}

// Prepare gets a pod for the job and hands the job to it
// (KubePods.Prepare). Errors are SystemErrors.
func (d *Driver) Prepare(ctx context.Context) error {
	if d.Pods == nil {
		return &SystemError{Err: ErrNoPods}
	}
	return d.Pods.Prepare(ctx, d)
}

// session makes this call's calls on the job's pod: with the job's state
// its execs go through the job's multiplexer when it answers.
func (d *Driver) session(job Job, st *state) *session.Session {
	cl := d.Cluster
	if st != nil {
		cl = d.Mux.Wrap(cl, d.muxKey(job), job.ID, st.Pod, d.Stdout)
		d.muxed, _ = cl.(*mux.Cluster)
	}
	return &session.Session{Cluster: d.timed(cl), Log: d.Stdout, LeaseTTL: d.Cfg.LeaseTTL, MaxStreamRetries: d.Cfg.MaxStreamRetries}
}

// SystemError is a failure of the pod, the cluster or a stream: run and
// prepare exit with $SYSTEM_FAILURE_EXIT_CODE on it.
type SystemError = session.SystemError

func sysErr(format string, a ...any) error { return session.Errorf(format, a...) }

// configOutput is config_exec's JSON document (GitLab Runner's
// executors/custom/api.ConfigExecOutput).
type configOutput struct {
	BuildsDir         string            `json:"builds_dir"`
	CacheDir          string            `json:"cache_dir"`
	BuildsDirIsShared bool              `json:"builds_dir_is_shared"`
	Hostname          string            `json:"hostname,omitempty"`
	Driver            map[string]string `json:"driver"`
}

// state is what prepare leaves for run and cleanup.
type state struct {
	Job string      `json:"job"`
	Pod poolapi.Pod `json:"pod"`
	// Seq numbers the run calls: each gets the in-pod stage name
	// "NN-STAGE", because the runner calls run again with the same stage
	// name when it retries (GET_SOURCES_ATTEMPTS and friends) and a
	// retried stage must run again, while a reattach after a broken
	// stream must not.
	Seq int `json:"seq"`
}

// owner names the job's pods: job ids are unique per GitLab instance
// only, and a runner can serve several.
func (d *Driver) owner(job Job) poolapi.Owner {
	h := sha256.Sum256([]byte(d.Env["CUSTOM_ENV_CI_SERVER_URL"]))
	return poolapi.Owner{Job: job.ID, Server: hex.EncodeToString(h[:8])}
}

func (d *Driver) statePath(job Job) string {
	o := d.owner(job)
	return fmt.Sprintf("%s/job-%s-%s.json", d.Cfg.StateDir, o.Job, o.Server)
}

// muxKey names the job's multiplexer: the job and its GitLab server.
func (d *Driver) muxKey(job Job) string {
	o := d.owner(job)
	return "gitlab/" + o.Job + "/" + o.Server
}

func (d *Driver) loadState(job Job) (*state, error) {
	b, err := os.ReadFile(d.statePath(job))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w", d.statePath(job), err)
	}
	return &s, nil
}

// saveState writes the state file atomically (temp file, rename), mode
// 0600: it names a pod, nothing secret.
func (d *Driver) saveState(job Job, s *state) error {
	if err := os.MkdirAll(d.Cfg.StateDir, 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(s)
	f, err := os.CreateTemp(d.Cfg.StateDir, ".state-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), d.statePath(job))
}

// Run runs one stage: the script at path goes to the pod on the exec's
// stdin, `warmpod job stage` runs it detached under the pod's PID 1 and
// streams its output back, which goes to the trace. A broken stream is
// reattached with --offset (bytes already in the trace), so the stage never
// runs twice and no byte is lost or repeated. term delivers the runner's
// SIGTERM (cancel or timeout): it becomes `warmpod job cancel --stage` in
// the pod, so the stage's traps run and nothing of it survives, and Run
// still streams the stage to its end. Errors: *BuildError when the script
// exited non-zero, *SystemError for the rest.
func (d *Driver) Run(ctx context.Context, scriptPath, stage string, term <-chan os.Signal) error {
	t0 := d.Now()
	job, err := JobFromEnv(d.Env)
	if err != nil {
		return &SystemError{Err: err}
	}
	st, err := d.loadState(job)
	if err != nil {
		return sysErr("no pod for job %s (did prepare succeed?): %v", job.ID, err)
	}
	script, err := os.ReadFile(scriptPath)
	if err != nil {
		return sysErr("stage script: %v", err)
	}
	st.Seq++
	if err := d.saveState(job, st); err != nil {
		return sysErr("state file: %v", err)
	}
	name := fmt.Sprintf("%02d-%s", st.Seq, stage)
	cancel := make(chan struct{})
	runDone := make(chan struct{})
	defer close(runDone)
	go func() {
		select {
		case <-term:
			close(cancel)
		case <-runDone:
		}
	}()
	final, err := d.session(job, st).RunStage(ctx, st.Pod, job.ID, name, script, d.Stdout, d.Stderr, cancel)
	if err != nil {
		return err
	}
	d.timing("run", stage, t0, final, time.Time{})
	if c := *final.ExitCode; c != 0 {
		return &BuildError{Code: c}
	}
	return nil
}

// Cleanup ends the job in its pod (`warmpod job end`: its processes
// killed, its token and files wiped; the pod then drains and deletes
// itself) and deletes the pod as well. Pods labelled for
// the job that the state file does not name (a prepare that died between
// creating a pod and recording it) are deleted. Cleanup never fails the
// job: errors are only reported.
func (d *Driver) Cleanup(ctx context.Context) error {
	t0 := d.Now()
	job, err := JobFromEnv(d.Env)
	if err != nil {
		return err
	}
	var pod *poolapi.Pod
	st, err := d.loadState(job)
	if err == nil {
		pod = &st.Pod
	}
	// The pod is single-use and drains after job end, deleting itself;
	// the core deletes it too, so it goes also when it cannot delete
	// itself (no RoleBinding: a Deployment's pod would be restarted and
	// linger, claimed, forever) or when job end failed.
	d.session(job, st).End(ctx, pod, job.ID, d.owner(job))
	// Without a state the pod is unknown: the multiplexer refuses the
	// Shutdown, and ends with the job in the pod (its pod is deleted).
	var muxPod poolapi.Pod
	if pod != nil {
		muxPod = *pod
	}
	t1 := d.Now()
	d.Mux.Stop(d.muxKey(job), job.ID, muxPod, d.Stdout)
	if d.Mux != nil {
		d.Span("stop the multiplexer", t1)
	}
	_ = os.Remove(d.statePath(job))
	d.timing("cleanup", "", t0, nil, time.Time{})
	return nil
}

// timing appends one JSON line to Cfg.Timings: call from t0 until end
// (zero: now).
func (d *Driver) timing(call, stage string, t0 time.Time, final *control.StageStatus, end time.Time) {
	if d.Cfg.Timings == "" {
		return
	}
	if end.IsZero() {
		end = d.Now()
	}
	rec := map[string]any{"call": call, "job": d.Env["CUSTOM_ENV_CI_JOB_ID"], "start": t0.UnixNano(), "end": end.UnixNano()}
	if stage != "" {
		rec["stage"] = stage
	}
	if final != nil && final.Ended != nil {
		rec["stage_ns"] = final.Ended.Sub(final.Started).Nanoseconds()
	}
	if d.muxed != nil {
		rec["mux_calls"], rec["direct_calls"] = d.muxed.Calls()
	}
	d.spansMu.Lock()
	if len(d.spans) > 0 {
		rec["spans"] = d.spans
	}
	d.spansMu.Unlock()
	b, _ := json.Marshal(rec)
	f, err := os.OpenFile(d.Cfg.Timings, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = f.Write(append(b, '\n'))
	_ = f.Close()
}

// ExitCode maps a call's error to the process exit code at the edge:
// nil → 0; *BuildError → $BUILD_FAILURE_EXIT_CODE after writing the real
// code to $BUILD_EXIT_CODE_FILE; anything else → $SYSTEM_FAILURE_EXIT_CODE.
func ExitCode(err error, codes ExitCodes, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var be *BuildError
	if errors.As(err, &be) {
		if codes.ExitCodeFile != "" {
			if werr := os.WriteFile(codes.ExitCodeFile, []byte(strconv.Itoa(be.Code)+"\n"), 0o644); werr != nil {
				fmt.Fprintln(stderr, "warmpod: BUILD_EXIT_CODE_FILE:", werr)
			}
		}
		return codes.BuildFailure
	}
	w := bufio.NewWriter(stderr)
	fmt.Fprintln(w, "warmpod-gitlab:", err)
	_ = w.Flush()
	return codes.SystemFailure
}
