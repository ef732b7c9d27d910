package gitlab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warmpod/warmpod/executor/pool"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Cluster is what the driver needs of Kubernetes; *pool.Kube is the real
// one.
type Cluster interface {
	// ClaimWarm claims a Ready idle pod of p for owner within wait; nil
	// when there is none.
	ClaimWarm(ctx context.Context, p pool.Pool, owner pool.Owner, wait time.Duration) (*pool.Pod, error)
	// CreateCold creates a pod from p's template and waits until it is
	// Ready (at most timeout).
	CreateCold(ctx context.Context, p pool.Pool, owner pool.Owner, timeout time.Duration) (pool.Pod, error)
	// Exec runs argv in the pod and returns its exit code; an error means
	// the stream failed and the command's fate is unknown.
	Exec(ctx context.Context, p pool.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
	// Delete deletes the pod (uid precondition); gone is no error.
	Delete(ctx context.Context, p pool.Pod) error
	// PodsOfJob lists the pods labelled for owner.
	PodsOfJob(ctx context.Context, owner pool.Owner) ([]pool.Pod, error)
}

// Config is the driver's configuration (flags of warmpod-gitlab).
type Config struct {
	// Pools is the pool manifest; prepare and config need it.
	Pools *pool.Set
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
	Cfg     Config
	Cluster Cluster
	Env     Env
	Stdout  io.Writer // the job's trace
	Stderr  io.Writer // the job's trace too (prepare, run)
	// Now is the clock (time.Now in production).
	Now func() time.Time
}

// SystemError is a failure of the pod, the cluster or a stream: run and
// prepare exit with $SYSTEM_FAILURE_EXIT_CODE on it.
type SystemError struct{ Err error }

func (e *SystemError) Error() string { return e.Err.Error() }
func (e *SystemError) Unwrap() error { return e.Err }

func sysErr(format string, a ...any) error { return &SystemError{Err: fmt.Errorf(format, a...)} }

// configOutput is config_exec's JSON document (GitLab Runner's
// executors/custom/api.ConfigExecOutput).
type configOutput struct {
	BuildsDir         string            `json:"builds_dir"`
	CacheDir          string            `json:"cache_dir"`
	BuildsDirIsShared bool              `json:"builds_dir_is_shared"`
	Hostname          string            `json:"hostname,omitempty"`
	Driver            map[string]string `json:"driver"`
}

// Config prints config_exec's JSON: builds and cache directories in the
// pod (not shared: every job has a pod of its own), the pool's name as the
// hostname, and the driver's name and version.
func (d *Driver) Config() error {
	out := configOutput{BuildsDir: d.Cfg.BuildsDir, CacheDir: d.Cfg.CacheDir,
		Driver: map[string]string{"name": "warmpod", "version": d.Cfg.Version}}
	if d.Cfg.Pools != nil {
		p, warm := d.Cfg.Pools.ForImage(strings.TrimSpace(d.Env["CUSTOM_ENV_CI_JOB_IMAGE"]))
		out.Hostname = "warmpod-" + p.Name
		if !warm {
			out.Hostname += "-cold"
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(d.Stdout, "%s\n", b)
	return err
}

// state is what prepare leaves for run and cleanup.
type state struct {
	Job string   `json:"job"`
	Pod pool.Pod `json:"pod"`
	// Seq numbers the run calls: each gets the in-pod stage name
	// "NN-STAGE", because the runner calls run again with the same stage
	// name when it retries (GET_SOURCES_ATTEMPTS and friends) and a
	// retried stage must run again, while a reattach after a broken
	// stream must not.
	Seq int `json:"seq"`
}

// owner names the job's pods: job ids are unique per GitLab instance
// only, and a runner can serve several.
func (d *Driver) owner(job Job) pool.Owner {
	h := sha256.Sum256([]byte(d.Env["CUSTOM_ENV_CI_SERVER_URL"]))
	return pool.Owner{Job: job.ID, Server: hex.EncodeToString(h[:8])}
}

func (d *Driver) statePath(job Job) string {
	o := d.owner(job)
	return fmt.Sprintf("%s/job-%s-%s.json", d.Cfg.StateDir, o.Job, o.Server)
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

// Prepare gets a pod for the job and hands the job to it: a warm pod of
// the job image's pool when one is Ready within WarmWait, else a cold pod
// from the same template (or, for an image without a pool, from the
// default pool's template with the job's image). It then runs `warmpod
// job start` in the pod with the token on stdin. A pod that refuses the
// job (75: busy or another configuration) is deleted and the next one
// tried. Errors are SystemErrors; any pod this call claimed or created is
// deleted on failure.
func (d *Driver) Prepare(ctx context.Context) error {
	t0 := d.Now()
	job, err := JobFromEnv(d.Env)
	if err != nil {
		return &SystemError{Err: err}
	}
	if d.Cfg.Pools == nil {
		return sysErr("no pool manifest (--pools)")
	}
	p, hasPool := d.Cfg.Pools.ForImage(job.Image)
	if hasPool && p.FileHash != p.Hash {
		fmt.Fprintf(d.Stdout, "warmpod: WARNING: %s=%q in the pool manifest, but its template hashes to %q: pods made from it are never claimed warm; put the hash in the manifest (warmpod-gitlab --pools FILE pool-hash) and apply it\n", pool.LabelConfig, p.FileHash, p.Hash)
	}
	for attempt := 0; attempt < 5; attempt++ {
		var pod *pool.Pod
		if hasPool {
			if pod, err = d.Cluster.ClaimWarm(ctx, p, d.owner(job), d.Cfg.WarmWait); err != nil {
				return &SystemError{Err: err}
			}
		}
		if pod == nil {
			if hasPool {
				fmt.Fprintf(d.Stdout, "warmpod: no warm pod of pool %s (config %s) is Ready: creating a cold pod (image %s)\n", p.Name, p.Hash, p.Image)
			} else {
				fmt.Fprintf(d.Stdout, "warmpod: no pool runs image %s: creating a cold pod of it from pool %s's template\n", p.Image, p.Name)
			}
			cold, err := d.Cluster.CreateCold(ctx, p, d.owner(job), d.Cfg.ReadyTimeout)
			if err != nil {
				return &SystemError{Err: err}
			}
			pod = &cold
		}
		code, msg, err := d.startJob(ctx, job, *pod)
		if err == nil && code == 0 {
			if err := d.saveState(job, &state{Job: job.ID, Pod: *pod}); err != nil {
				d.deletePod(ctx, *pod)
				return sysErr("state file: %v", err)
			}
			kind := "cold"
			if pod.Warm {
				kind = "warm"
			}
			fmt.Fprintf(d.Stdout, "warmpod: job %s runs on %s pod %s (pool %s) after %d ms\n", job.ID, kind, pod.Name, pod.Pool, d.Now().Sub(t0).Milliseconds())
			d.timing("prepare", "", t0, nil)
			return nil
		}
		d.deletePod(ctx, *pod)
		if err != nil && forbidden(err) {
			// Every pod would be refused the same way: stop here rather
			// than burn the pool.
			return sysErr("job start on pod %s: %v (the driver's account needs create and get on pods/exec: deploy/gitlab-rbac.yaml)", pod.Name, err)
		}
		if err == nil && code != 75 && code != 69 {
			return sysErr("job start on pod %s: exit %d: %s", pod.Name, code, msg)
		}
		if err != nil {
			msg = err.Error()
		}
		fmt.Fprintf(d.Stdout, "warmpod: pod %s did not take the job (%s): trying another\n", pod.Name, msg)
	}
	return sysErr("no pod took the job after 5 tries")
}

func (d *Driver) deletePod(ctx context.Context, p pool.Pod) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := d.Cluster.Delete(dctx, p); err != nil {
		fmt.Fprintf(d.Stderr, "warmpod: delete pod %s: %v\n", p.Name, err)
	}
}

// jobSpec is warmpod's job start document.
type jobSpec struct {
	ID         string   `json:"id"`
	Nonce      string   `json:"nonce"`
	Token      string   `json:"token,omitempty"`
	Timeout    string   `json:"timeout"`
	LeaseTTL   string   `json:"lease_ttl,omitempty"`
	ConfigHash string   `json:"config_hash,omitempty"`
	Variables  []string `json:"variables"`
}

// leaseMargin is added to the job's timeout for warmpod's lease: GitLab
// enforces the timeout itself (SIGTERM to run) and still runs after_script
// and cleanup after it.
const leaseMargin = 10 * time.Minute

// maxLease is the longest job timeout warmpod's job start accepts.
const maxLease = 168 * time.Hour

func (d *Driver) startJob(ctx context.Context, job Job, pod pool.Pod) (int, string, error) {
	timeout := job.Timeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	// warmpod refuses a lease longer than 168 h (65).
	timeout = min(timeout, maxLease-leaseMargin)
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	spec := jobSpec{ID: job.ID, Nonce: hex.EncodeToString(nonce), Token: job.Token,
		Timeout: (timeout + leaseMargin).String(), ConfigHash: pod.Hash, Variables: []string{}}
	if d.Cfg.LeaseTTL > 0 {
		spec.LeaseTTL = d.Cfg.LeaseTTL.String()
	}
	b, _ := json.Marshal(spec)
	b = append(b, '\n')
	defer clear(b)
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	code, err := d.Cluster.Exec(ctx, pod, []string{pod.Bin, "job", "start"}, bytes.NewReader(b), &out, &errb)
	return code, strings.TrimSpace(errb.String()), err
}

// stageLine is a JSON line that `warmpod job stage` writes on stderr.
type stageLine struct {
	Stage    string     `json:"stage"`
	LogStart int64      `json:"log_start"`
	LogEnd   *int64     `json:"log_end"`
	Running  bool       `json:"running"`
	ExitCode *int       `json:"exit_code"`
	Signal   string     `json:"signal"`
	Started  time.Time  `json:"started"`
	Ended    *time.Time `json:"ended"`
	Replay   bool       `json:"replay"`
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
	sum := sha256.Sum256(script)
	digest := hex.EncodeToString(sum[:])

	runDone := make(chan struct{})
	defer close(runDone)
	go func() {
		select {
		case <-term:
		case <-ctx.Done():
			return
		case <-runDone:
			return
		}
		func() {
			fmt.Fprintf(d.Stderr, "warmpod: cancelling stage %s in pod %s\n", stage, st.Pod.Name)
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			// The stage may not be registered (69) or started (75) yet
			// when the signal comes: ask again until PID 1 has cancelled
			// it, or the stage has ended on its own (Run returned).
			for {
				var errb bytes.Buffer
				code, err := d.Cluster.Exec(cctx, st.Pod, []string{st.Pod.Bin, "job", "cancel", "--job", job.ID, "--stage", name}, nil, io.Discard, &errb)
				if err == nil && code == 0 {
					return
				}
				select {
				case <-runDone:
					return
				case <-cctx.Done():
					fmt.Fprintf(d.Stderr, "warmpod: cancel of stage %s: exit %d %v %s\n", stage, code, err, strings.TrimSpace(errb.String()))
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}()

	out := &countingWriter{w: d.Stdout}
	var final *stageLine
	var lastErr error
	retries := d.Cfg.MaxStreamRetries
	for attempt := 0; ; attempt++ {
		errs := &stderrParser{w: d.Stderr}
		argv := []string{st.Pod.Bin, "job", "stage", "--job", job.ID, "--stage", name,
			"--size", strconv.Itoa(len(script)), "--sha256", digest, "--offset", strconv.FormatInt(out.n, 10)}
		stdin := newHoldOpen(script)
		code, err := d.Cluster.Exec(ctx, st.Pod, argv, stdin, out, errs)
		stdin.close()
		errs.flush()
		if f := errs.final(out.n); f != nil {
			final = f
			break
		}
		if err == nil && len(errs.lines) > 0 {
			// The call ran the stage but ended before all its output
			// arrived: reattach.
			err = fmt.Errorf("the stream ended %d bytes into the stage's output", out.n)
		}
		if err == nil {
			// warmpod's own error (usage, no job, bad script, no shell):
			// the stage did not run, or its outcome is unknown.
			return sysErr("warmpod job stage in pod %s: exit %d: %s", st.Pod.Name, code, errs.lastMessage())
		}
		lastErr = err
		if attempt >= retries || ctx.Err() != nil {
			return sysErr("stage %s: exec stream to pod %s failed %d times: %v", stage, st.Pod.Name, attempt+1, lastErr)
		}
		fmt.Fprintf(d.Stderr, "\nwarmpod: exec stream to pod %s broke (%v): reattaching at byte %d\n", st.Pod.Name, err, out.n)
		select {
		case <-time.After(time.Duration(attempt+1) * 500 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	d.timing("run", stage, t0, final)
	if final.ExitCode == nil {
		return sysErr("stage %s: no exit code", stage)
	}
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
	st, err := d.loadState(job)
	if err == nil {
		var errb bytes.Buffer
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		code, err := d.Cluster.Exec(cctx, st.Pod, []string{st.Pod.Bin, "job", "end", "--job", job.ID}, nil, io.Discard, &errb)
		cancel()
		if err != nil || code != 0 {
			fmt.Fprintf(d.Stderr, "warmpod: job end in pod %s: exit %d %v %s\n", st.Pod.Name, code, err, strings.TrimSpace(errb.String()))
		}
		// The pod is single-use and drains after job end, deleting itself;
		// the driver deletes it too, so it goes also when it cannot
		// delete itself (no RoleBinding: a Deployment's pod would be
		// restarted and linger, claimed, forever) or when job end failed.
		d.deletePod(ctx, st.Pod)
	}
	if pods, err := d.Cluster.PodsOfJob(ctx, d.owner(job)); err == nil {
		for _, p := range pods {
			if st == nil || p.UID != st.Pod.UID {
				d.deletePod(ctx, p)
			}
		}
	} else {
		fmt.Fprintf(d.Stderr, "warmpod: list pods of job %s: %v\n", job.ID, err)
	}
	_ = os.Remove(d.statePath(job))
	d.timing("cleanup", "", t0, nil)
	return nil
}

// timing appends one JSON line to Cfg.Timings.
func (d *Driver) timing(call, stage string, t0 time.Time, final *stageLine) {
	if d.Cfg.Timings == "" {
		return
	}
	rec := map[string]any{"call": call, "job": d.Env["CUSTOM_ENV_CI_JOB_ID"], "start": t0.UnixNano(), "end": d.Now().UnixNano()}
	if stage != "" {
		rec["stage"] = stage
	}
	if final != nil && final.Ended != nil {
		rec["stage_ns"] = final.Ended.Sub(final.Started).Nanoseconds()
	}
	b, _ := json.Marshal(rec)
	f, err := os.OpenFile(d.Cfg.Timings, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = f.Write(append(b, '\n'))
	_ = f.Close()
}

// countingWriter counts the bytes that reached the trace: the offset a
// reattach resumes from.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// stderrParser splits `warmpod job stage`'s stderr: its JSON status lines
// are kept, everything else goes on to the trace.
type stderrParser struct {
	w     io.Writer
	buf   []byte
	lines []stageLine
	msg   string
}

func (p *stderrParser) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.line(p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *stderrParser) line(l []byte) {
	if bytes.HasPrefix(l, []byte(`{"stage":`)) {
		var s stageLine
		if json.Unmarshal(l, &s) == nil {
			p.lines = append(p.lines, s)
			return
		}
	}
	if len(bytes.TrimSpace(l)) > 0 {
		p.msg = string(l)
	}
	_, _ = fmt.Fprintf(p.w, "%s\n", l)
}

func (p *stderrParser) flush() {
	if len(p.buf) > 0 {
		p.line(p.buf)
		p.buf = nil
	}
}

// final is the stage's final status line, if the call printed it and the
// trace holds all of the stage's output (received bytes, over every
// attempt, reach log_end − log_start): a stream that broke after the
// status line but before the last output bytes is reattached, not taken
// for the end.
func (p *stderrParser) final(received int64) *stageLine {
	for i := len(p.lines) - 1; i >= 0; i-- {
		l := &p.lines[i]
		if !l.Running && l.ExitCode != nil {
			if l.LogEnd != nil && received < *l.LogEnd-l.LogStart {
				return nil
			}
			return l
		}
	}
	return nil
}

func (p *stderrParser) lastMessage() string { return p.msg }

// holdOpen is an exec's stdin: the script, then nothing until close. The
// pod's `warmpod job stage` takes the end of its stdin for the end of the
// executor and stops renewing the job's lease.
type holdOpen struct {
	r    *bytes.Reader
	done chan struct{}
	once sync.Once
}

func newHoldOpen(b []byte) *holdOpen {
	return &holdOpen{r: bytes.NewReader(b), done: make(chan struct{})}
}

func (h *holdOpen) Read(p []byte) (int, error) {
	if h.r.Len() > 0 {
		return h.r.Read(p)
	}
	<-h.done
	return 0, io.EOF
}

func (h *holdOpen) close() { h.once.Do(func() { close(h.done) }) }

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
	fmt.Fprintln(w, "warmpod:", err)
	_ = w.Flush()
	return codes.SystemFailure
}

// forbidden tells an API server's 403 (RBAC) from a failure that another
// pod might not have; exec upgrade errors carry it only in their text.
func forbidden(err error) bool {
	return apierrors.IsForbidden(err) || strings.Contains(err.Error(), " is forbidden: ")
}
