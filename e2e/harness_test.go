// Package e2e holds end-to-end tests that run warmpod as PID 1 of a real
// runc container built from busybox-static.
//
// Requirements: root, runc on PATH, /bin/busybox (static). Without them the
// whole package is skipped. Run with:
//
//	go test -v -count=1 ./e2e/
//
// Environment:
//
//	WARMPOD_BIN=/path/to/warmpod   use a prebuilt (static!) binary instead of building ../cmd/warmpod
//	WARMPOD_E2E_VERBOSE=1          tee container stdout/stderr to t.Log as it arrives
//	WARMPOD_E2E_KEEP=1             keep bundle dirs of failed tests (path is logged)
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	// DefaultCallTimeout bounds every single runc invocation.
	DefaultCallTimeout = 30 * time.Second
	busyboxPath        = "/bin/busybox"
	warmpodInRootfs    = "/usr/local/bin/warmpod"
	sigcountInRootfs   = "/usr/local/bin/sigcount"
)

var (
	runcPath        string   // absolute path of runc
	warmpodBin      string   // host path of the warmpod binary ("" if unavailable)
	warmpodBuildErr error    // why warmpodBin is empty
	sigcountBin     string   // host path of the sigcount test program ("" if unavailable)
	busyboxApplets  []string // output of `busybox --list`
	verbose         = os.Getenv("WARMPOD_E2E_VERBOSE") == "1"
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipping: must run as root (runc needs it)")
		return 0
	}
	p, err := exec.LookPath("runc")
	if err != nil {
		for _, cand := range []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc"} {
			if _, e := os.Stat(cand); e == nil {
				p, err = cand, nil
				break
			}
		}
	}
	if err != nil {
		fmt.Println("e2e: skipping: runc not found (apt-get install -y runc)")
		return 0
	}
	runcPath = p
	if _, err := os.Stat(busyboxPath); err != nil {
		fmt.Println("e2e: skipping: /bin/busybox missing (apt-get install -y busybox-static)")
		return 0
	}
	out, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		fmt.Printf("e2e: skipping: busybox --list: %v\n", err)
		return 0
	}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			busyboxApplets = append(busyboxApplets, a)
		}
	}

	tmp, err := os.MkdirTemp("", "warmpod-e2e-build-")
	if err != nil {
		fmt.Printf("e2e: mkdtemp: %v\n", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	if b := os.Getenv("WARMPOD_BIN"); b != "" {
		if abs, err := filepath.Abs(b); err == nil {
			b = abs
		}
		if _, err := os.Stat(b); err != nil {
			warmpodBuildErr = fmt.Errorf("WARMPOD_BIN=%s: %w", b, err)
		} else {
			warmpodBin = b
		}
	} else {
		warmpodBin, warmpodBuildErr = buildWarmpod(tmp)
	}
	if sigcountBin, err = buildSigcount(tmp); err != nil {
		sigcountBin = ""
		fmt.Printf("e2e: %v\n", err)
	}
	if warmpodBuildErr != nil {
		// Harness self-tests (busybox only) still run; warmpod tests fail
		// with this error via requireWarmpod.
		fmt.Printf("e2e: warmpod binary unavailable, warmpod tests will fail:\n%v\n", warmpodBuildErr)
	}
	return m.Run()
}

func buildWarmpod(dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if gr := os.Getenv("GOROOT"); gr != "" {
			goTool = filepath.Join(gr, "bin", "go")
		} else {
			goTool = "/usr/local/go/bin/go"
		}
	}
	return goBuild(goTool, dir, "../cmd/warmpod")
}

// goBuild builds the static binary of package pkg into dir.
func goBuild(goTool, dir, pkg string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// buildSigcount builds ./sigcount (see its doc) into dir.
func buildSigcount(dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "/usr/local/go/bin/go"
	}
	return goBuild(goTool, dir, "./sigcount")
}

// requireWarmpod fails the test when the warmpod binary could not be built.
func requireWarmpod(t testing.TB) {
	t.Helper()
	if warmpodBin == "" {
		t.Fatalf("warmpod binary unavailable: %v", warmpodBuildErr)
	}
}

// ---------------------------------------------------------------------------
// thread-safe output buffer, optionally teed to t.Log

type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	t      testing.TB
	prefix string
	tee    bool
	closed bool   // set once the test is over: stop calling t.Log
	line   []byte // partial line pending for tee
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if b.tee && !b.closed {
		b.line = append(b.line, p...)
		for {
			i := bytes.IndexByte(b.line, '\n')
			if i < 0 {
				break
			}
			b.t.Logf("%s%s", b.prefix, b.line[:i])
			b.line = b.line[i+1:]
		}
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) stopTee() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tee && !b.closed && len(b.line) > 0 {
		b.t.Logf("%s%s", b.prefix, b.line)
	}
	b.closed = true
}

// ---------------------------------------------------------------------------
// Container

// Opts configures a container.
type Opts struct {
	// Env is appended to process.env (PATH=/usr/local/bin:/bin is always set).
	Env []string
	// NoWarmpod skips copying warmpod into the rootfs (harness self-tests).
	NoWarmpod bool
	// EditSpec, if set, may modify the generated config.json before start.
	EditSpec func(spec map[string]any)
	// Stdout, if set, is PID 1's stdout itself (runc passes it on), so a
	// test can close its read end; Container.Stdout then stays empty.
	Stdout *os.File
}

// Container is one runc container run in the foreground (`runc run`).
type Container struct {
	ID     string
	Bundle string
	Rootfs string
	// Stdin is the write end of the container's stdin (PID 1's fd 0).
	Stdin io.WriteCloser

	t      testing.TB
	stdout *syncBuffer
	stderr *syncBuffer
	cmd    *exec.Cmd
	done   chan struct{}
	exit   int
	runErr error
}

var idSanitizer = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// containerID returns a unique, runc-valid id derived from the test name.
func containerID(t testing.TB) string {
	name := strings.ToLower(idSanitizer.ReplaceAllString(t.Name(), "-"))
	name = strings.TrimPrefix(name, "test")
	if len(name) > 40 {
		name = name[:40]
	}
	return "wp-e2e-" + strings.Trim(name, "-") + "-" + randHex(4)
}

// Start prepares a rootfs + bundle and runs `runc run` in the background with
// args as the container's process. Cleanup (runc delete -f, reap runc) is
// registered with t.Cleanup and runs even when the test fails.
func Start(t testing.TB, args []string, opts Opts) *Container {
	t.Helper()
	c := &Container{ID: containerID(t), t: t, done: make(chan struct{})}
	c.Bundle = t.TempDir()
	c.Rootfs = filepath.Join(c.Bundle, "rootfs")
	buildRootfs(t, c.Rootfs, !opts.NoWarmpod)
	writeSpec(t, c.Bundle, args, opts)

	c.stdout = &syncBuffer{t: t, prefix: "[stdout] ", tee: verbose}
	c.stderr = &syncBuffer{t: t, prefix: "[stderr] ", tee: verbose}
	cmd := exec.Command(runcPath, "run", "--bundle", c.Bundle, c.ID)
	cmd.Stdout = c.stdout
	if opts.Stdout != nil {
		cmd.Stdout = opts.Stdout
	}
	cmd.Stderr = c.stderr
	// If some process in the container keeps stdout open after runc exits,
	// don't let Wait hang on the copy goroutine forever.
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	c.Stdin = stdin
	c.cmd = cmd
	require.NoError(t, cmd.Start(), "runc run")
	t.Logf("container %s started (bundle %s), args %q", c.ID, c.Bundle, args)

	go func() {
		err := cmd.Wait()
		c.exit = -1
		if cmd.ProcessState != nil {
			c.exit = cmd.ProcessState.ExitCode()
		}
		if err != nil && !errors.As(err, new(*exec.ExitError)) {
			c.runErr = err
		}
		close(c.done)
	}()
	t.Cleanup(c.cleanup)

	// `runc run` returns to us before the container exists; wait until runc
	// reports it running so that exec/kill work right away.
	deadline := time.Now().Add(DefaultCallTimeout)
	for {
		st := c.State(t)
		if st == "running" {
			break
		}
		if c.Exited() {
			t.Logf("container %s exited during start (code %d); stderr:\n%s", c.ID, c.exit, indent(c.Stderr()))
			break // Wait() will tell; the test decides whether that is an error
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s not running after %v (state %q)\nstderr:\n%s",
				c.ID, DefaultCallTimeout, st, indent(c.Stderr()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

// HostPID returns the host PID of the container's PID 1 (runc state).
func (c *Container) HostPID(t testing.TB) int {
	t.Helper()
	out, err := exec.Command(runcPath, "state", c.ID).Output()
	require.NoError(t, err, "runc state")
	var st struct {
		Pid int `json:"pid"`
	}
	require.NoError(t, json.Unmarshal(out, &st))
	require.Greater(t, st.Pid, 1, "runc state: %s", out)
	return st.Pid
}

func (c *Container) cleanup() {
	t := c.t
	_ = c.Stdin.Close()
	if !c.Exited() {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultCallTimeout)
		out, err := exec.CommandContext(ctx, runcPath, "delete", "-f", c.ID).CombinedOutput()
		cancel()
		if err != nil && !strings.Contains(string(out), "does not exist") {
			t.Logf("cleanup: runc delete -f %s: %v: %s", c.ID, err, out)
		}
	}
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		t.Logf("cleanup: runc run for %s did not exit; killing runc (pid %d)", c.ID, c.cmd.Process.Pid)
		_ = c.cmd.Process.Kill() // our own child, never a looked-up pid
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
		}
	}
	// runc run normally deletes the container itself; make sure.
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCallTimeout)
	_ = exec.CommandContext(ctx, runcPath, "delete", "-f", c.ID).Run()
	cancel()
	c.stdout.stopTee()
	c.stderr.stopTee()
	if t.Failed() {
		t.Logf("container %s stdout:\n%s", c.ID, indent(c.stdout.String()))
		t.Logf("container %s stderr:\n%s", c.ID, indent(c.stderr.String()))
		if os.Getenv("WARMPOD_E2E_KEEP") == "1" {
			keep := c.Bundle + ".kept"
			if err := os.Rename(c.Bundle, keep); err == nil {
				t.Logf("bundle kept at %s", keep)
			}
		}
	}
}

func indent(s string) string {
	if s == "" {
		return "    <empty>"
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// Stdout returns everything the container's PID 1 wrote to stdout so far.
func (c *Container) Stdout() string { return c.stdout.String() }

// Stderr returns everything written to the container's stderr so far
// (includes runc's own error messages).
func (c *Container) Stderr() string { return c.stderr.String() }

// WriteLine writes s plus a newline to the container's stdin.
func (c *Container) WriteLine(t testing.TB, s string) {
	t.Helper()
	_, err := io.WriteString(c.Stdin, s+"\n")
	require.NoError(t, err, "write to container stdin")
}

// WaitOutput polls stdout until it contains substr; fails the test on timeout
// or when the container exits without having printed it.
func (c *Container) WaitOutput(t testing.TB, substr string, timeout time.Duration) {
	t.Helper()
	if !c.waitBuf(c.stdout, substr, timeout) {
		t.Fatalf("container stdout does not contain %q after %v (exited=%v)\nstdout:\n%s\nstderr:\n%s",
			substr, timeout, c.Exited(), indent(c.Stdout()), indent(c.Stderr()))
	}
}

// WaitStderr is WaitOutput for stderr (warmpod logs).
func (c *Container) WaitStderr(t testing.TB, substr string, timeout time.Duration) {
	t.Helper()
	if !c.waitBuf(c.stderr, substr, timeout) {
		t.Fatalf("container stderr does not contain %q after %v (exited=%v)\nstderr:\n%s",
			substr, timeout, c.Exited(), indent(c.Stderr()))
	}
}

func (c *Container) waitBuf(b *syncBuffer, substr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(b.String(), substr) {
			return true
		}
		if c.Exited() {
			// give the copy goroutine a last chance
			return strings.Contains(b.String(), substr)
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Exited reports whether `runc run` has returned.
func (c *Container) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Wait waits for `runc run` to return and gives its exit code, which is the
// exit status of the container's PID 1 (128+N when killed by signal N).
func (c *Container) Wait(timeout time.Duration) (int, error) {
	if c.Exited() {
		return c.exit, c.runErr
	}
	select {
	case <-c.done:
		return c.exit, c.runErr
	case <-time.After(timeout):
		return -1, fmt.Errorf("container %s still running after %v", c.ID, timeout)
	}
}

// Kill runs `runc kill ID SIG` (signals PID 1 of the container only).
func (c *Container) Kill(t testing.TB, sig string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCallTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, runcPath, "kill", c.ID, sig).CombinedOutput()
	require.NoError(t, err, "runc kill %s %s: %s", c.ID, sig, out)
}

// Delete runs `runc delete -f ID` now (cleanup does it anyway).
func (c *Container) Delete(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCallTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, runcPath, "delete", "-f", c.ID).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "does not exist") {
		t.Errorf("runc delete -f %s: %v: %s", c.ID, err, out)
	}
}

// State returns the status from `runc state` ("running", "stopped", ...), or
// "" if the container does not exist (anymore).
func (c *Container) State(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCallTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, runcPath, "state", c.ID).Output()
	if err != nil {
		return ""
	}
	var st struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(out, &st)
	return st.Status
}

// ---------------------------------------------------------------------------
// runc exec

// ExecOpts configures one `runc exec`.
type ExecOpts struct {
	Stdin   string        // fed to the process; empty = /dev/null
	StdinR  io.Reader     // fed to the process instead of Stdin when set
	Env     []string      // KEY=VALUE, passed as `--env`
	User    string        // uid[:gid], passed as `--user`
	Timeout time.Duration // default DefaultCallTimeout
}

// ExecResult is the outcome of a `runc exec`.
type ExecResult struct {
	Stdout, Stderr string
	ExitCode       int   // exit code of runc exec == the process's (128+N if signaled)
	Err            error // non-exit errors (timeout, start failure)
}

func (r ExecResult) String() string {
	return fmt.Sprintf("exit=%d err=%v\nstdout:\n%s\nstderr:\n%s", r.ExitCode, r.Err, indent(r.Stdout), indent(r.Stderr))
}

// Exec runs `runc exec ID args...` with stdin and returns stdout, stderr and
// the exit code. A timeout or failure to start fails the test.
func (c *Container) Exec(t testing.TB, stdin string, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	r := c.ExecWith(t, ExecOpts{Stdin: stdin}, args...)
	require.NoError(t, r.Err, "runc exec %q: %s", args, r)
	return r.Stdout, r.Stderr, r.ExitCode
}

// ExecWith is Exec with options; it does not fail the test on errors.
func (c *Container) ExecWith(t testing.TB, o ExecOpts, args ...string) ExecResult {
	t.Helper()
	return <-c.ExecAsync(t, o, args...)
}

// ExecAsync starts `runc exec` and returns a channel that receives the result.
func (c *Container) ExecAsync(t testing.TB, o ExecOpts, args ...string) <-chan ExecResult {
	t.Helper()
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultCallTimeout
	}
	rargs := []string{"exec"}
	for _, e := range o.Env {
		rargs = append(rargs, "--env", e)
	}
	if o.User != "" {
		rargs = append(rargs, "--user", o.User)
	}
	rargs = append(rargs, c.ID)
	rargs = append(rargs, args...)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, runcPath, rargs...)
	var so, se syncBuffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if o.Stdin != "" {
		cmd.Stdin = strings.NewReader(o.Stdin)
	}
	if o.StdinR != nil {
		cmd.Stdin = o.StdinR
	}
	// A background process started by the exec'd command may inherit stdout;
	// don't wait for its EOF longer than this after the process exited.
	cmd.WaitDelay = 2 * time.Second
	ch := make(chan ExecResult, 1)
	if err := cmd.Start(); err != nil {
		cancel()
		ch <- ExecResult{ExitCode: -1, Err: err}
		return ch
	}
	go func() {
		defer cancel()
		err := cmd.Wait()
		r := ExecResult{Stdout: so.String(), Stderr: se.String(), ExitCode: -1}
		if cmd.ProcessState != nil {
			r.ExitCode = cmd.ProcessState.ExitCode()
		}
		switch {
		case ctx.Err() != nil:
			r.Err = fmt.Errorf("runc exec %q timed out after %v", args, timeout)
		case errors.Is(err, exec.ErrWaitDelay):
			// process exited; some child kept the pipe open. Not an error.
		case err != nil && !errors.As(err, new(*exec.ExitError)):
			r.Err = err
		}
		if r.ExitCode < 0 && r.Err == nil {
			r.Err = fmt.Errorf("runc exec %q: killed: %v", args, err)
		}
		ch <- r
	}()
	return ch
}

// ---------------------------------------------------------------------------
// ps

// Proc is one line of `ps -o pid,stat,args` inside the container.
type Proc struct {
	PID  int
	Stat string
	Args string
}

// PS lists the processes in the container (busybox ps).
func (c *Container) PS(t testing.TB) []Proc {
	t.Helper()
	out, errOut, code := c.Exec(t, "", "ps", "-o", "pid,stat,args")
	require.Equal(t, 0, code, "ps failed: %s", errOut)
	return parsePS(out)
}

func parsePS(out string) []Proc {
	var ps []Proc
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 2 {
			continue // header / blank
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		ps = append(ps, Proc{PID: pid, Stat: f[1], Args: strings.Join(f[2:], " ")})
	}
	return ps
}

func formatPS(ps []Proc) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%5d %-4s %s\n", p.PID, p.Stat, p.Args)
	}
	return b.String()
}

// Zombie reports whether the process is in state Z.
func (p Proc) Zombie() bool { return strings.HasPrefix(p.Stat, "Z") }

// waitProc waits until ps in the container shows a non-zombie process whose
// args contain substr.
func waitProc(t testing.TB, c *Container, substr string) Proc {
	t.Helper()
	var found Proc
	Eventually(t, 20*time.Second, 100*time.Millisecond, "process "+substr+" running", func() (bool, string) {
		ps := c.PS(t)
		for _, p := range ps {
			if strings.Contains(p.Args, substr) && !p.Zombie() {
				found = p
				return true, ""
			}
		}
		return false, formatPS(ps)
	})
	return found
}

// ---------------------------------------------------------------------------
// rootfs & bundle

func buildRootfs(t testing.TB, root string, withWarmpod bool) {
	t.Helper()
	for _, d := range []string{"bin", "usr/local/bin", "proc", "sys", "dev", "run", "etc", "root", "home/user"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	tmp := filepath.Join(root, "tmp")
	require.NoError(t, os.MkdirAll(tmp, 0o755))
	require.NoError(t, os.Chmod(tmp, 0o777|os.ModeSticky))
	require.NoError(t, os.Chown(filepath.Join(root, "home/user"), 1000, 1000))

	copyFile(t, busyboxPath, filepath.Join(root, "bin/busybox"), 0o755)
	for _, a := range busyboxApplets {
		p := filepath.Join(root, "bin", a)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		require.NoError(t, os.Symlink("busybox", p))
	}
	if withWarmpod {
		requireWarmpod(t)
		copyFile(t, warmpodBin, filepath.Join(root, warmpodInRootfs), 0o755)
		if sigcountBin != "" {
			copyFile(t, sigcountBin, filepath.Join(root, sigcountInRootfs), 0o755)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/passwd"), []byte(
		"root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/group"), []byte(
		"root:x:0:\nuser:x:1000:\n"), 0o644))
}

func copyFile(t testing.TB, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

func writeSpec(t testing.TB, bundle string, args []string, opts Opts) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCallTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, runcPath, "spec", "--bundle", bundle).CombinedOutput()
	require.NoError(t, err, "runc spec: %s", out)
	path := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var spec map[string]any
	require.NoError(t, json.Unmarshal(raw, &spec))

	proc := spec["process"].(map[string]any)
	proc["args"] = args
	proc["terminal"] = false
	proc["cwd"] = "/"
	proc["env"] = append([]string{"PATH=/usr/local/bin:/bin", "HOME=/root"}, opts.Env...)

	root := spec["root"].(map[string]any)
	root["path"] = "rootfs"
	root["readonly"] = false

	linux := spec["linux"].(map[string]any)
	var nss []any
	for _, ns := range linux["namespaces"].([]any) {
		if ns.(map[string]any)["type"] == "network" {
			continue // host network: the probe port is reachable on 127.0.0.1
		}
		nss = append(nss, ns)
	}
	linux["namespaces"] = nss

	spec["mounts"] = append(spec["mounts"].([]any), map[string]any{
		"destination": "/run",
		"type":        "tmpfs",
		"source":      "tmpfs",
		"options":     []string{"nosuid", "nodev", "mode=755"},
	})
	if opts.EditSpec != nil {
		opts.EditSpec(spec)
	}
	raw, err = json.MarshalIndent(spec, "", "\t")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
}

// ---------------------------------------------------------------------------
// network helpers

// FreePort returns a currently unused TCP port on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// HTTPGet returns the status code of GET url (client timeout 2 s).
func HTTPGet(url string) (int, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}

// Eventually polls cond every interval until it returns ok or timeout passes;
// on timeout it fails the test with msg and the last detail cond reported.
func Eventually(t testing.TB, timeout, interval time.Duration, msg string, cond func() (ok bool, detail string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (not true after %v); last state:\n%s", msg, timeout, indent(detail))
		}
		time.Sleep(interval)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
