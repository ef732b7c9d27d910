package mux

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/muxproto"
	"github.com/warmpod/warmpod/poolapi"
)

// Spec is what a multiplexer process is started with (JSON on its stdin;
// nothing in it is secret).
type Spec struct {
	// Sock is the unix socket it listens on.
	Sock string `json:"sock"`
	// Job and Pod are the job and pod it serves.
	Job string      `json:"job"`
	Pod poolapi.Pod `json:"pod"`
	// LeaseTTL and Runner, when both are set, make the multiplexer renew
	// the job's lease while Runner's process lives ([KeepLease]): for a
	// CI system whose job holds its pod between calls without a stage
	// running (the Actions runner between two steps).
	LeaseTTL time.Duration `json:"lease_ttl,omitempty"`
	Runner   *Runner       `json:"runner,omitempty"`
}

// SocketPath is the socket of job key's multiplexer in dir: a digest of
// the key, so its length is fixed (a unix socket path has 108 bytes at
// most) and one job's name never leads to another's socket.
func SocketPath(dir, key string) string {
	h := sha256.Sum256([]byte(key))
	return filepath.Join(dir, "mux-"+hex.EncodeToString(h[:12])+".sock")
}

// maxSockPath is the longest socket path Linux takes (sun_path less its
// terminating NUL).
const maxSockPath = 107

// keptEnv are the environment variables a multiplexer process keeps: what
// client-go needs to find the cluster, and the executor's own settings.
// The CI system's job variables (GitLab's CUSTOM_ENV_*, the job token
// among them) are dropped: a process that lives for the whole job holds
// nothing secret it does not need.
var keptEnv = []string{"PATH", "HOME", "USER", "TMPDIR", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
	"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy"}

// Env returns the entries of environ (KEY=VALUE) a multiplexer keeps:
// keptEnv and those with one of prefixes (the executor's flags, e.g.
// "WARMPOD_GITLAB_").
func Env(environ []string, prefixes ...string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		keep := false
		for _, n := range keptEnv {
			keep = keep || k == n
		}
		for _, p := range prefixes {
			keep = keep || strings.HasPrefix(k, p)
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// readyTimeout bounds how long Start waits for the new process to listen.
const readyTimeout = 5 * time.Second

// maxSpec bounds the spec a multiplexer process reads on its stdin.
const maxSpec = 64 << 10

// Start starts a multiplexer for spec as its own session (detached from
// the CI system's process group, so a signal to the calling stage does
// not reach it, and its end does not wait for it): argv is the executor
// binary and its flags, to which Start appends "mux SOCK"; the spec goes
// on the process's stdin; env is its environment ([Env]). It returns
// once the socket listens. Errors: the state directory is not private to
// this uid (0700, owned by it), the path is too long, or the process did
// not come up; the job then runs on direct exec.
func Start(argv, env []string, spec Spec) error {
	p, err := spawn(argv, env, spec.Sock)
	if err != nil {
		return err
	}
	return p.give(spec)
}

// pending is a multiplexer process that sets itself up (process start,
// client set-up) while it waits for its spec on stdin.
type pending struct {
	cmd   *exec.Cmd
	spec  *os.File // its stdin
	ready *os.File // its fd 3: "ok" once it listens
}

func spawn(argv, env []string, sock string) (*pending, error) {
	if len(sock) > maxSockPath {
		return nil, fmt.Errorf("%w: socket path %s is longer than %d bytes; fix: point --state-dir at a shorter path", ErrStateDir, sock, maxSockPath)
	}
	if err := PrivateDir(filepath.Dir(sock)); err != nil {
		return nil, err
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		sr.Close()
		sw.Close()
		return nil, err
	}
	cmd := exec.Command(argv[0], append(append([]string{}, argv[1:]...), "mux", sock)...)
	cmd.Env = env
	cmd.Stdin = sr
	cmd.ExtraFiles = []*os.File{rw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	sr.Close()
	rw.Close()
	if err != nil {
		sw.Close()
		rr.Close()
		return nil, err
	}
	// Nothing waits for it: it outlives this call, in a session of its
	// own; its parent's exit hands it to init.
	_ = cmd.Process.Release()
	return &pending{cmd: cmd, spec: sw, ready: rr}, nil
}

// give hands the process its spec and waits until it listens.
func (p *pending) give(spec Spec) error {
	defer p.ready.Close()
	b, err := json.Marshal(spec)
	if err == nil {
		_, err = p.spec.Write(b)
	}
	p.spec.Close()
	if err != nil {
		return fmt.Errorf("the multiplexer did not start: %v", err)
	}
	_ = p.ready.SetReadDeadline(time.Now().Add(readyTimeout))
	line, err := bufio.NewReader(p.ready).ReadString('\n')
	if strings.TrimSpace(line) != "ok" {
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New(strings.TrimSpace(line))
		}
		return fmt.Errorf("the multiplexer did not start: %v", err)
	}
	return nil
}

// cancel ends a pending process that will get no spec: its stdin ends
// without one and it exits.
func (p *pending) cancel() {
	p.spec.Close()
	p.ready.Close()
}

// ErrStateDir is the state directory the multiplexer cannot use (its
// mode, its owner, a socket path in it too long): the operator's to fix.
// Without a multiplexer every call of the job execs directly, and each
// stage is 2–10× slower, so the drivers say it at the CI system's default
// log level ([Early.Attacher]).
var ErrStateDir = errors.New("the multiplexer's state directory is unusable")

// DirError is a state directory that is not private to this uid. Its
// message says how to fix it.
type DirError struct {
	Dir  string      // the state directory, as given (--state-dir)
	Mode fs.FileMode // its permission bits as found (want 0700)
	UID  int         // its owner (want this process's uid)
}

func (e *DirError) Error() string {
	fix := "chmod 700 " + e.Dir
	if e.UID != os.Getuid() || !e.Mode.IsDir() {
		fix = fmt.Sprintf("point --state-dir at a directory of uid %d's own (in its home, say), or remove %s and let the driver make it", os.Getuid(), e.Dir)
	}
	return fmt.Sprintf("state directory %s is %v of uid %d; the multiplexer needs a directory of uid %d with mode 0700; fix: %s",
		e.Dir, e.Mode, e.UID, os.Getuid(), fix)
}

// Unwrap makes a DirError an ErrStateDir.
func (e *DirError) Unwrap() error { return ErrStateDir }

// PrivateDir makes dir with mode 0700 (whatever the umask) when it does
// not exist, and checks that it is a directory of this uid that no one
// else may enter: *DirError otherwise. An existing directory is never
// changed: its mode may be someone's choice, and another uid's is not
// ours to take.
func PrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o700); err == nil {
			err = os.Chmod(dir, 0o700)
		}
		if err == nil {
			fi, err = os.Lstat(dir)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStateDir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%w: %s: no owner", ErrStateDir, dir)
	}
	if !fi.IsDir() || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return &DirError{Dir: dir, Mode: fi.Mode(), UID: int(st.Uid)}
	}
	return nil
}

// Stop asks the multiplexer on sock, which serves job on pod, to exit and
// waits (2 s at most) until its socket is gone; a socket left by one that
// died is removed. The Shutdown goes after a Hello naming the job and the
// pod's uid, as every call does: the multiplexer refuses it otherwise.
// Stop never fails: nothing is there afterwards, or it is said on log.
func Stop(sock, job string, pod poolapi.Pod, log io.Writer) {
	conn, err := net.DialTimeout("unix", sock, time.Second)
	if err == nil {
		w := muxproto.NewWriter(conn)
		if w.WriteJSON(muxproto.TypeHello, 0, muxproto.Hello{Version: muxproto.Version, Job: job, PodUID: string(pod.UID)}) == nil {
			_ = w.Write(muxproto.TypeShutdown, 0, nil)
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, _ = muxproto.NewReader(conn).Read()
		conn.Close()
		// The socket goes within a millisecond or so of the Bye (the
		// multiplexer says Bye to its pod and returns): a finer look
		// than 10 ms is what the CI system's clean-up call waits for.
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if _, err := os.Lstat(sock); errors.Is(err, os.ErrNotExist) {
				return
			}
		}
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) && log != nil {
		fmt.Fprintf(log, "warmpod: remove multiplexer socket %s: %v\n", sock, err)
	}
}

// Main is the multiplexer process: the "mux SOCK" command of an executor
// binary, started by Start, its Spec on stdin. connect makes its client.
// It listens on the spec's socket (0600), says "ok" on fd 3, serves until
// the job is over ([Server.Serve]), and removes the socket. It returns
// the exit status.
func Main(args []string, connect func() (session.Cluster, error)) int {
	ready := os.NewFile(3, "ready")
	fail := func(err error) int {
		if ready != nil {
			fmt.Fprintf(ready, "%v\n", err)
		}
		fmt.Fprintln(os.Stderr, "warmpod mux:", err)
		return 1
	}
	fs := flag.NewFlagSet("mux", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return fail(errors.New("usage: mux SOCK < SPEC-JSON"))
	}
	// The client is set up while the spec is still on its way (the pod is
	// being claimed meanwhile).
	cl, err := connect()
	if err != nil {
		return fail(err)
	}
	// The API connection opens meanwhile too (cleanup's requests use it;
	// the exec stream's own TLS handshake finds the crypto warm).
	if c, ok := cl.(interface{ Connect(context.Context) error }); ok {
		go func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Connect(cctx)
		}()
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, maxSpec))
	if err != nil || len(b) == 0 {
		return fail(errors.New("no spec on stdin (the claim did not happen)"))
	}
	var spec Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fail(fmt.Errorf("spec: %v", err))
	}
	if spec.Sock != fs.Arg(0) {
		return fail(fmt.Errorf("spec: socket %q, not %q", spec.Sock, fs.Arg(0)))
	}
	srv := &Server{Pod: spec.Pod, Job: spec.Job, Log: os.Stderr, Cluster: cl}
	if spec.Sock == "" || spec.Job == "" || spec.Pod.Name == "" || spec.Pod.UID == "" {
		return fail(errors.New("spec: sock, job and pod are required"))
	}
	if err := PrivateDir(filepath.Dir(spec.Sock)); err != nil {
		return fail(err)
	}
	// A socket file left by a multiplexer that died is in the way; a
	// live one is not replaced.
	if c, err := net.DialTimeout("unix", spec.Sock, time.Second); err == nil {
		c.Close()
		return fail(fmt.Errorf("a multiplexer already listens on %s", spec.Sock))
	}
	_ = os.Remove(spec.Sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: spec.Sock, Net: "unix"})
	if err != nil {
		return fail(err)
	}
	ln.SetUnlinkOnClose(false)
	defer os.Remove(spec.Sock)
	if err := os.Chmod(spec.Sock, 0o600); err != nil {
		ln.Close()
		return fail(err)
	}
	fmt.Fprintln(ready, "ok")
	ready.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	keepLease(ctx, cl, spec)
	// SIGHUP (the terminal of whoever started the runner went away) is
	// not the job's end: the session of its own has no terminal, so it
	// only comes from a kill.
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	srv.Serve(ctx, ln)
	return 0
}

// keepLease renews the job's lease in the background while spec's runner
// lives (Spec.LeaseTTL, Spec.Runner), through the multiplexer's own
// socket (so over its stream, and direct when the stream is not there);
// ctx ends it with the multiplexer.
func keepLease(ctx context.Context, cl session.Cluster, spec Spec) {
	if spec.LeaseTTL <= 0 || spec.Runner == nil {
		return
	}
	own := &Cluster{Cluster: cl, Sock: spec.Sock, Job: spec.Job, Pod: spec.Pod}
	go func() {
		if KeepLease(ctx, own, spec.Pod, spec.Job, spec.LeaseTTL, *spec.Runner, os.Stderr) {
			fmt.Fprintf(os.Stderr, "warmpod mux: job %s: its runner (pid %d) is gone: the lease is no longer renewed\n", spec.Job, spec.Runner.PID)
		}
	}()
}

// Launcher starts, reaches and stops the multiplexers of one executor
// binary's jobs. A nil *Launcher is off: every call goes direct.
type Launcher struct {
	// Argv is the executor binary and the flags its multiplexer needs
	// (the cluster's: kubeconfig, namespace).
	Argv []string
	// Env is the multiplexer's environment ([Env]).
	Env []string
	// Dir is the private state directory of the sockets.
	Dir string
	// LeaseTTL and Runner go into each multiplexer's Spec: it renews its
	// job's lease while Runner lives (nil Runner: it does not).
	LeaseTTL time.Duration
	Runner   *Runner
}

// Sock is the socket of the job keyed key (unique per job and CI server).
func (l *Launcher) Sock(key string) string { return SocketPath(l.Dir, key) }

// Wrap returns cl with Exec through the multiplexer of job (keyed key)
// on pod, falling back to cl's own ([Cluster]); nil l returns cl.
func (l *Launcher) Wrap(cl session.Cluster, key, job string, pod poolapi.Pod, log io.Writer) session.Cluster {
	if l == nil {
		return cl
	}
	return &Cluster{Cluster: cl, Sock: l.Sock(key), Job: job, Pod: pod, Log: log}
}

// Stop stops the multiplexer keyed key, which serves job on pod; see
// [Stop].
func (l *Launcher) Stop(key, job string, pod poolapi.Pod, log io.Writer) {
	if l != nil {
		Stop(l.Sock(key), job, pod, log)
	}
}

// Early starts the multiplexer process of job key before its pod is
// known, so its process start and client set-up overlap the claim; the
// first [Early.Attacher] call hands it its pod. Close ends it when no pod
// came. A nil Launcher returns nil, whose methods do nothing.
func (l *Launcher) Early(key string) *Early {
	if l == nil {
		return nil
	}
	e := &Early{l: l, key: key}
	e.p, e.err = spawn(l.Argv, l.Env, l.Sock(key))
	return e
}

// Early is a multiplexer process started ahead of its pod.
type Early struct {
	l   *Launcher
	key string
	p   *pending // nil once used
	err error
	// warned: the state directory's problem was said (once per job; the
	// core calls Attach from one goroutine, one pod after another).
	warned bool
}

// Close ends the process if no pod was handed to it.
func (e *Early) Close() {
	if e != nil && e.p != nil {
		e.p.cancel()
		e.p = nil
	}
}

func (e *Early) start(job string, pod poolapi.Pod) error {
	spec := Spec{Sock: e.l.Sock(e.key), Job: job, Pod: pod, LeaseTTL: e.l.LeaseTTL, Runner: e.l.Runner}
	if p := e.p; p != nil {
		e.p = nil
		return p.give(spec)
	}
	if e.err != nil {
		return e.err
	}
	return Start(e.l.Argv, e.l.Env, spec) // a second pod: a new process
}

// Attacher returns an executor.Core's Attach for job: the first pod gets
// the early process, another pod (the first did not take the job) a new
// one; the job is started through it, and a pod that does not take the
// job gets its multiplexer stopped. A multiplexer that does not start is
// said on log, and the job goes direct; one that cannot start for its
// state directory (ErrStateDir) is said once on warn instead, with the
// fix: warn is the CI system's default log level, since the job is
// slower for it until someone acts. Nil e returns nil (no Attach).
func (e *Early) Attacher(cl session.Cluster, job string, log, warn io.Writer) func(poolapi.Pod) (session.Cluster, func(bool)) {
	if e == nil {
		return nil
	}
	l, key := e.l, e.key
	return func(pod poolapi.Pod) (session.Cluster, func(bool)) {
		if err := e.start(job, pod); err != nil {
			switch {
			case !errors.Is(err, ErrStateDir):
				fmt.Fprintf(log, "warmpod: no multiplexer for the job (%v): every call execs directly\n", err)
			case !e.warned:
				e.warned = true
				fmt.Fprintf(warn, "warmpod: no multiplexer for the job, so every call execs directly and each stage is slower: %v\n", err)
			}
			return cl, func(bool) {}
		}
		return l.Wrap(cl, key, job, pod, log), func(ok bool) {
			if !ok {
				l.Stop(key, job, pod, log)
			}
		}
	}
}
