// Package runc runs OCI containers from a busybox-static rootfs with the
// runc CLI: the one container harness of warmpod's end-to-end tests
// (package e2e) and of its benchmarks (bench/). It is not part of either
// binary.
//
// A container runs in the foreground (`runc run`), with the host's network
// namespace (a probe port is reachable on 127.0.0.1) and a tmpfs at /run
// (warmpod's runtime directory, as an emptyDir of medium Memory would be in
// a pod).
package runc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// CallTimeout bounds every runc invocation but `runc run` and `runc exec`,
// which take their own.
const CallTimeout = 30 * time.Second

// Runtime is the runc binary and the environment it runs with.
type Runtime struct {
	// Path is runc's absolute path.
	Path string
	// Env is runc's environment; nil means the caller's.
	Env []string
}

// Find looks runc up on PATH and in the usual sbin directories. Errors
// when it is not installed (Debian package runc).
func Find() (Runtime, error) {
	if p, err := exec.LookPath("runc"); err == nil {
		return Runtime{Path: p}, nil
	}
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc"} {
		if _, err := os.Stat(p); err == nil {
			return Runtime{Path: p}, nil
		}
	}
	return Runtime{}, errors.New("runc not found (apt-get install -y runc)")
}

// Command is `runc args...` with the runtime's environment, for what the
// other methods do not cover (`runc run -d`).
func (r Runtime) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.Path, args...)
	cmd.Env = r.Env
	return cmd
}

// Delete runs `runc delete -f id`; a container that does not exist (any
// more) is no error.
func (r Runtime) Delete(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	out, err := r.Command(ctx, "delete", "-f", id).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "does not exist") {
		return fmt.Errorf("runc delete -f %s: %v: %s", id, err, out)
	}
	return nil
}

// File is a host file copied into a rootfs.
type File struct {
	Src  string      // host path
	Dst  string      // path inside the rootfs, e.g. "/usr/local/bin/warmpod"
	Mode os.FileMode // e.g. 0o755
}

// BuildRootfs lays out a minimal root file system at root: /bin/busybox
// (a static busybox, from busybox) with a symlink per applet, the usual
// empty directories, a sticky /tmp, root and a user 1000 ("user", home
// /home/user) in /etc/passwd and /etc/group, and files. Errors are those
// of the file system and of `busybox --list`.
func BuildRootfs(root, busybox string, files ...File) error {
	for _, d := range []string{"bin", "usr/local/bin", "proc", "sys", "dev", "run", "etc", "root", "home/user", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky); err != nil {
		return err
	}
	if err := os.Chown(filepath.Join(root, "home/user"), 1000, 1000); err != nil {
		return err
	}
	if err := CopyFile(busybox, filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		return err
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	for _, f := range files {
		if err := CopyFile(f.Src, filepath.Join(root, f.Dst), f.Mode); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\nuser:x:1000:\n"), 0o644)
}

// CopyFile copies src to dst (created or truncated with mode).
func CopyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// Spec is what WriteSpec changes in runc's default config.json.
type Spec struct {
	// Args is the container's process (PID 1).
	Args []string
	// Env is appended to PATH=/usr/local/bin:/bin and HOME=/root.
	Env []string
	// Rootfs is the root's path, relative to the bundle or absolute
	// (default "rootfs").
	Rootfs string
	// Mounts are added after the tmpfs at /run (see Bind).
	Mounts []map[string]any
	// Edit, when set, may change anything last.
	Edit func(spec map[string]any)
}

// Bind is a read-write bind mount of host path src at dst.
func Bind(src, dst string) map[string]any {
	return map[string]any{"destination": dst, "type": "bind", "source": src, "options": []string{"rbind", "rw"}}
}

// WriteSpec writes bundle/config.json: runc's default (`runc spec`), no
// terminal, cwd /, a writable root, no network namespace, a tmpfs at /run,
// then s. Errors are those of runc spec, JSON and the file system.
func (r Runtime) WriteSpec(bundle string, s Spec) error {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	path := filepath.Join(bundle, "config.json")
	_ = os.Remove(path)
	if out, err := r.Command(ctx, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		return fmt.Errorf("runc spec: %v: %s", err, out)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	proc := spec["process"].(map[string]any)
	proc["args"] = s.Args
	proc["terminal"] = false
	proc["cwd"] = "/"
	proc["env"] = append([]string{"PATH=/usr/local/bin:/bin", "HOME=/root"}, s.Env...)
	root := spec["root"].(map[string]any)
	root["path"] = "rootfs"
	if s.Rootfs != "" {
		root["path"] = s.Rootfs
	}
	root["readonly"] = false
	linux := spec["linux"].(map[string]any)
	var nss []any
	for _, ns := range linux["namespaces"].([]any) {
		if ns.(map[string]any)["type"] != "network" {
			nss = append(nss, ns)
		}
	}
	linux["namespaces"] = nss
	ms := append(spec["mounts"].([]any), map[string]any{"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=755"}})
	for _, m := range s.Mounts {
		ms = append(ms, m)
	}
	spec["mounts"] = ms
	if s.Edit != nil {
		s.Edit(spec)
	}
	raw, err = json.MarshalIndent(spec, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// Container is one `runc run` in the foreground.
type Container struct {
	ID     string
	Bundle string
	rt     Runtime
	cmd    *exec.Cmd
	done   chan struct{}
	exit   int   // written before done is closed
	runErr error // likewise
}

// IO is a container's stdio (nil: /dev/null).
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Run starts `runc run --bundle bundle id` and waits until runc reports the
// container running (or it has exited already: Wait tells how), bounded
// by CallTimeout. Errors: runc cannot be started, or the container is not
// running in time (it is then deleted).
func (r Runtime) Run(id, bundle string, stdio IO) (*Container, error) {
	c := &Container{ID: id, Bundle: bundle, rt: r, done: make(chan struct{})}
	c.cmd = r.Command(context.Background(), "run", "--bundle", bundle, id)
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	// A process in the container that keeps stdout open after runc exits
	// must not hold Wait on the copy goroutine forever.
	c.cmd.WaitDelay = 5 * time.Second
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("runc run: %w", err)
	}
	go func() {
		err := c.cmd.Wait()
		c.exit = -1
		if c.cmd.ProcessState != nil {
			c.exit = c.cmd.ProcessState.ExitCode()
		}
		if err != nil && !errors.As(err, new(*exec.ExitError)) {
			c.runErr = err
		}
		close(c.done)
	}()
	// `runc run` returns to us before the container exists; exec and kill
	// work once runc reports it running.
	deadline := time.Now().Add(CallTimeout)
	for {
		if st, _, _ := c.State(); st == "running" || c.Exited() {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.Stop()
			return nil, fmt.Errorf("container %s not running after %v", id, CallTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Exited tells whether `runc run` has returned.
func (c *Container) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Wait waits up to timeout for `runc run` to return and gives its exit
// code: the exit status of the container's PID 1 (128+N when killed by
// signal N). Errors: still running at the timeout, or runc's own failure.
func (c *Container) Wait(timeout time.Duration) (int, error) {
	select {
	case <-c.done:
		return c.exit, c.runErr
	case <-time.After(timeout):
		return -1, fmt.Errorf("container %s still running after %v", c.ID, timeout)
	}
}

// Kill runs `runc kill ID sig`: it signals the container's PID 1 only.
func (c *Container) Kill(sig string) error {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	if out, err := c.rt.Command(ctx, "kill", c.ID, sig).CombinedOutput(); err != nil {
		return fmt.Errorf("runc kill %s %s: %v: %s", c.ID, sig, err, out)
	}
	return nil
}

// Delete runs `runc delete -f ID`; a container that does not exist (any
// more) is no error.
func (c *Container) Delete() error { return c.rt.Delete(c.ID) }

// State returns the status from `runc state` ("running", "stopped", ...)
// and the host PID of the container's PID 1; "" when the container does
// not exist (any more).
func (c *Container) State() (status string, pid int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	out, err := c.rt.Command(ctx, "state", c.ID).Output()
	if err != nil {
		return "", 0, fmt.Errorf("runc state %s: %w", c.ID, err)
	}
	var st struct {
		Status string `json:"status"`
		Pid    int    `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return "", 0, err
	}
	return st.Status, st.Pid, nil
}

// Stop ends the container for good: `runc delete -f` while it runs, then
// up to 15 s for `runc run` to return (after which runc itself, our own
// child, is killed), and a last delete.
func (c *Container) Stop() {
	if !c.Exited() {
		_ = c.Delete()
	}
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill() // our own child, never a looked-up PID
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
		}
	}
	_ = c.Delete()
}

// ExecOpts configures one `runc exec`.
type ExecOpts struct {
	Stdin   io.Reader     // nil: /dev/null
	Env     []string      // KEY=VALUE, passed as --env
	User    string        // uid[:gid], passed as --user
	Timeout time.Duration // default CallTimeout
}

// ExecResult is the outcome of a `runc exec`.
type ExecResult struct {
	Stdout, Stderr string
	// ExitCode is the process's (128+N when killed by signal N), -1 when
	// unknown.
	ExitCode int
	// Err is a failure other than an exit status: runc could not start,
	// or the timeout passed.
	Err error
	// End is when the exec returned.
	End time.Time
}

// Exec runs `runc exec ID args...` and waits for it.
func (c *Container) Exec(o ExecOpts, args ...string) ExecResult {
	return <-c.ExecAsync(o, args...)
}

// ExecAsync starts `runc exec ID args...`; the channel gets its result.
func (c *Container) ExecAsync(o ExecOpts, args ...string) <-chan ExecResult {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = CallTimeout
	}
	rargs := []string{"exec"}
	for _, e := range o.Env {
		rargs = append(rargs, "--env", e)
	}
	if o.User != "" {
		rargs = append(rargs, "--user", o.User)
	}
	rargs = append(append(rargs, c.ID), args...)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := c.rt.Command(ctx, rargs...)
	var so, se lockedBuffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &so, &se, o.Stdin
	// A background process started by the command may inherit stdout;
	// do not wait for its EOF longer than this after the command exited.
	cmd.WaitDelay = 2 * time.Second
	ch := make(chan ExecResult, 1)
	if err := cmd.Start(); err != nil {
		cancel()
		ch <- ExecResult{ExitCode: -1, Err: err, End: time.Now()}
		return ch
	}
	go func() {
		defer cancel()
		err := cmd.Wait()
		r := ExecResult{Stdout: so.String(), Stderr: se.String(), ExitCode: -1, End: time.Now()}
		if cmd.ProcessState != nil {
			r.ExitCode = cmd.ProcessState.ExitCode()
		}
		switch {
		case ctx.Err() != nil:
			r.Err = fmt.Errorf("runc exec %q timed out after %v", args, timeout)
		case errors.Is(err, exec.ErrWaitDelay):
			// The command exited; a child kept the pipe open. Not an error.
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

// lockedBuffer is a bytes.Buffer safe for the writer goroutines of
// os/exec and a reader after Wait.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// String shows the whole result, for a failure message.
func (r ExecResult) String() string {
	ind := func(s string) string {
		if s == "" {
			return "    <empty>"
		}
		return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
	}
	return fmt.Sprintf("exit=%d err=%v\nstdout:\n%s\nstderr:\n%s", r.ExitCode, r.Err, ind(r.Stdout), ind(r.Stderr))
}
