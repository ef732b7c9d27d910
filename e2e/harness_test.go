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
	"flag"
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

	"github.com/warmpod/warmpod/internal/runc"
)

const (
	// DefaultCallTimeout bounds every single runc invocation.
	DefaultCallTimeout = 30 * time.Second
	busyboxPath        = "/bin/busybox"
	warmpodInRootfs    = "/usr/local/bin/warmpod"
	sigcountInRootfs   = "/usr/local/bin/sigcount"
)

var (
	rt              runc.Runtime // the runc binary
	runcPath        string       // its absolute path (rt.Path)
	warmpodBin      string       // host path of the warmpod binary ("" if unavailable)
	warmpodBuildErr error        // why warmpodBin is empty
	sigcountBin     string       // host path of the sigcount test program ("" if unavailable)
	verbose         = os.Getenv("WARMPOD_E2E_VERBOSE") == "1"
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		// -short is the no-root tier (CONTRIBUTING.md): this one starts
		// real runc containers for about ten minutes.
		fmt.Println("e2e: skipping in -short mode (make e2e runs this tier)")
		return 0
	}
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipping: must run as root (runc needs it)")
		return 0
	}
	var err error
	if rt, err = runc.Find(); err != nil {
		fmt.Println("e2e: skipping:", err)
		return 0
	}
	runcPath = rt.Path
	if _, err := os.Stat(busyboxPath); err != nil {
		fmt.Println("e2e: skipping: /bin/busybox missing (apt-get install -y busybox-static)")
		return 0
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
	*runc.Container
	Rootfs string
	// Stdin is the write end of the container's stdin (PID 1's fd 0).
	Stdin io.WriteCloser

	t      testing.TB
	stdout *syncBuffer
	stderr *syncBuffer
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
	id := containerID(t)
	bundle := t.TempDir()
	c := &Container{Rootfs: filepath.Join(bundle, "rootfs"), t: t}
	var files []runc.File
	if !opts.NoWarmpod {
		requireWarmpod(t)
		files = append(files, runc.File{Src: warmpodBin, Dst: warmpodInRootfs, Mode: 0o755})
		if sigcountBin != "" {
			files = append(files, runc.File{Src: sigcountBin, Dst: sigcountInRootfs, Mode: 0o755})
		}
	}
	require.NoError(t, runc.BuildRootfs(c.Rootfs, busyboxPath, files...))
	require.NoError(t, rt.WriteSpec(bundle, runc.Spec{Args: args, Env: opts.Env, Edit: opts.EditSpec}))

	c.stdout = &syncBuffer{t: t, prefix: "[stdout] ", tee: verbose}
	c.stderr = &syncBuffer{t: t, prefix: "[stderr] ", tee: verbose}
	// An *os.File goes to runc as it is: no copying goroutine for
	// `runc run` to wait for.
	stdin, w, err := os.Pipe()
	require.NoError(t, err)
	c.Stdin = w
	stdio := runc.IO{Stdin: stdin, Stdout: c.stdout, Stderr: c.stderr}
	if opts.Stdout != nil {
		stdio.Stdout = opts.Stdout
	}
	rc, err := rt.Run(id, bundle, stdio)
	_ = stdin.Close() // runc has its own copy
	require.NoError(t, err, "runc run\nstderr:\n%s", indent(c.stderr.String()))
	c.Container = rc
	t.Logf("container %s started (bundle %s), args %q", c.ID, c.Bundle, args)
	t.Cleanup(c.cleanup)
	if c.Exited() {
		t.Logf("container %s exited during start; stderr:\n%s", c.ID, indent(c.Stderr()))
	}
	return c
}

// HostPID returns the host PID of the container's PID 1 (runc state).
func (c *Container) HostPID(t testing.TB) int {
	t.Helper()
	_, pid, err := c.Container.State()
	require.NoError(t, err)
	require.Greater(t, pid, 1, "runc state")
	return pid
}

func (c *Container) cleanup() {
	t := c.t
	_ = c.Stdin.Close()
	c.Container.Stop()
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
// Kill runs `runc kill ID SIG` (signals PID 1 of the container only).
func (c *Container) Kill(t testing.TB, sig string) {
	t.Helper()
	require.NoError(t, c.Container.Kill(sig))
}

// Delete runs `runc delete -f ID` now (cleanup does it anyway).
func (c *Container) Delete(t testing.TB) {
	t.Helper()
	if err := c.Container.Delete(); err != nil {
		t.Error(err)
	}
}

// State returns the status from `runc state` ("running", "stopped", ...), or
// "" if the container does not exist (anymore).
func (c *Container) State(t testing.TB) string {
	t.Helper()
	st, _, _ := c.Container.State()
	return st
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
type ExecResult = runc.ExecResult

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
	ro := runc.ExecOpts{Env: o.Env, User: o.User, Timeout: o.Timeout}
	if o.Stdin != "" {
		ro.Stdin = strings.NewReader(o.Stdin)
	}
	if o.StdinR != nil {
		ro.Stdin = o.StdinR
	}
	return c.Container.ExecAsync(ro, args...)
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
