package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nsArgv is how every init is started: PID 1 of a fresh PID namespace with
// its own /proc; --kill-child makes the kernel SIGKILL PID 1 (and so the
// whole namespace) when unshare dies.
func nsArgv(argv []string) []string {
	return append([]string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}, argv...)
}

// nsProc is one `unshare ... init ...` we started.
type nsProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startNS starts argv as PID 1 of a new PID namespace. Stdio are files (no
// copy goroutines in this process); nil means /dev/null.
func (c *cfg) startNS(argv []string, stdin, stdout, stderr *os.File) (*nsProc, error) {
	return c.startProc(nsArgv(argv), stdin, stdout, stderr)
}

// startProc starts full as is (startNS without the namespace); kill() then
// only kills full[0].
func (c *cfg) startProc(full []string, stdin, stdout, stderr *os.File) (*nsProc, error) {
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = cleanEnv()
	// A nil *os.File in an io.Reader/io.Writer is not a nil interface.
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if stderr != nil {
		cmd.Stderr = stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &nsProc{cmd: cmd, done: make(chan struct{})}
	c.cl.track(p)
	go func() {
		p.err = cmd.Wait()
		c.cl.untrack(p)
		close(p.done)
	}()
	return p, nil
}

// cleanEnv is the environment of every init under test.
func cleanEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C"}
}

// wait waits up to d for unshare to exit; false on timeout.
func (p *nsProc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// exitCode of unshare (= PID 1's status), -1 if unknown.
func (p *nsProc) exitCode() int {
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// kill SIGKILLs our own unshare process (never a looked-up pid); the kernel
// then kills PID 1 (--kill-child) and with it the whole namespace.
func (p *nsProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	p.wait(10 * time.Second)
}

// pid1 finds the host PID of the namespace's PID 1: the single child of our
// unshare process whose /proc/PID/status NSpid ends with "\t1" and whose
// PPid is unshare. It never returns a pid <= 1.
func (p *nsProc) pid1(timeout time.Duration) (int, error) {
	upid := p.cmd.Process.Pid
	deadline := time.Now().Add(timeout)
	var last error
	for {
		pid, err := nsChild(upid)
		if err == nil {
			return pid, nil
		}
		last = err
		select {
		case <-p.done:
			return 0, fmt.Errorf("unshare exited: %v", last)
		default:
		}
		if time.Now().After(deadline) {
			return 0, last
		}
		time.Sleep(time.Millisecond)
	}
}

func nsChild(upid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", upid, upid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0, fmt.Errorf("unshare %d has %d children", upid, len(f))
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("bad child pid %q", f[0])
	}
	if err := verifyNSInit(pid, upid); err != nil {
		return 0, err
	}
	return pid, nil
}

// verifyNSInit checks that host pid is PID 1 of its namespace (NSpid ends
// with "\t1") and, when ppid > 0, that its parent is ppid.
func verifyNSInit(pid, ppid int) error {
	if pid <= 1 {
		return fmt.Errorf("refusing pid %d", pid)
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err
	}
	nsOK, ppOK := false, ppid <= 0
	for _, line := range bytes.Split(st, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("NSpid:")); ok {
			nsOK = bytes.HasSuffix(v, []byte("\t1")) && bytes.Count(v, []byte("\t")) >= 2
		}
		if v, ok := bytes.CutPrefix(line, []byte("PPid:")); ok && ppid > 0 {
			n, _ := strconv.Atoi(string(bytes.TrimSpace(v)))
			ppOK = n == ppid
		}
	}
	if !nsOK {
		return fmt.Errorf("pid %d is not PID 1 of a child namespace", pid)
	}
	if !ppOK {
		return fmt.Errorf("pid %d is not a child of %d", pid, ppid)
	}
	return nil
}

// memSample is one reading of a process's memory, KiB.
type memSample struct {
	RSS          float64 `json:"vmrss"`         // VmRSS, /proc/PID/status
	RssAnon      float64 `json:"rss_anon"`      // RssAnon, /proc/PID/status
	Pss          float64 `json:"pss"`           // Pss, /proc/PID/smaps_rollup
	PrivateDirty float64 `json:"private_dirty"` // Private_Dirty, smaps_rollup
	Anonymous    float64 `json:"anonymous"`     // Anonymous, smaps_rollup
}

// readMem reads pid's status and smaps_rollup once each.
func readMem(pid int) (memSample, error) {
	var m memSample
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	m.RSS, m.RssAnon = kbField(st, "VmRSS:"), kbField(st, "RssAnon:")
	sm, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return m, err
	}
	m.Pss, m.PrivateDirty, m.Anonymous = kbField(sm, "Pss:"), kbField(sm, "Private_Dirty:"), kbField(sm, "Anonymous:")
	return m, nil
}

// procMem reads VmRSS (status) and Pss (smaps_rollup) in KiB.
func procMem(pid int) (rss, pss float64, err error) {
	m, err := readMem(pid)
	return m.RSS, m.Pss, err
}

func kbField(b []byte, key string) float64 {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			f := strings.Fields(string(v))
			if len(f) > 0 {
				n, _ := strconv.ParseFloat(f[0], 64)
				return n
			}
		}
	}
	return 0
}

// procTicks is utime+stime of pid (clock ticks, /proc/PID/stat fields 14, 15).
func procTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14 → f[11], stime f[12].
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, nil
}

func fdCount(pid int) (int, error) {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es), err
}

func threadCount(pid int) int {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	return int(kbField(st, "Threads:"))
}
