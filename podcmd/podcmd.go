// Package podcmd is the executor↔pod contract on the command line: the
// argv of every `warmpod job …` call an executor execs into a pool pod
// (kubectl exec's command, or a call carried by the job's multiplexer),
// built here once. Its golden files (testdata/argv.golden) pin what goes
// over the wire; cmd/warmpod's tests run each argv through warmpod's real
// flag parser, so the two sides cannot drift apart unseen. Standard
// library only: PID 1's side and the drivers' per-call path import it.
//
// In each command, Bin is the warmpod binary's path in the pod's
// container (the pool's warmpod.dev/bin annotation or its command[0];
// "warmpod" on PATH).
package podcmd

import (
	"strconv"
	"time"
)

// JobStart is `warmpod job start`: the job spec (control.JobSpec, one
// JSON line) goes on stdin; the answer on stdout.
type JobStart struct{ Bin string }

// Argv returns the command line.
func (c JobStart) Argv() []string { return []string{c.Bin, "job", "start"} }

// JobStage is `warmpod job stage`: the script (exactly Size bytes with
// that SHA256) on stdin, the stage's output on stdout from byte Offset on
// (a retry after a broken stream), its status lines on stderr.
type JobStage struct {
	Bin        string
	Job, Stage string
	Size       int
	SHA256     string // hex
	Offset     int64
	// Shell is the script's interpreter, a path or a name on the job's
	// PATH; empty: warmpod's auto (bash if the image has it, else sh).
	Shell string
}

// Argv returns the command line.
func (c JobStage) Argv() []string {
	argv := []string{c.Bin, "job", "stage", "--job", c.Job, "--stage", c.Stage,
		"--size", strconv.Itoa(c.Size), "--sha256", c.SHA256, "--offset", strconv.FormatInt(c.Offset, 10)}
	if c.Shell != "" {
		argv = append(argv, "--shell", c.Shell)
	}
	return argv
}

// JobCancel is `warmpod job cancel`: the stage's processes get SIGTERM,
// then SIGKILL after Grace (0: PID 1's --grace).
type JobCancel struct {
	Bin        string
	Job, Stage string
	Grace      time.Duration
}

// Argv returns the command line.
func (c JobCancel) Argv() []string {
	argv := []string{c.Bin, "job", "cancel", "--job", c.Job, "--stage", c.Stage}
	if c.Grace > 0 {
		argv = append(argv, "--grace", c.Grace.String())
	}
	return argv
}

// JobEnd is `warmpod job end`: ends Job if it holds the lease, wipes its
// token and variables.
type JobEnd struct{ Bin, Job string }

// Argv returns the command line.
func (c JobEnd) Argv() []string { return []string{c.Bin, "job", "end", "--job", c.Job} }

// JobStatus is `warmpod job status`: the job's status document on stdout;
// the call renews Job's lease (a heartbeat).
type JobStatus struct{ Bin, Job string }

// Argv returns the command line.
func (c JobStatus) Argv() []string { return []string{c.Bin, "job", "status", "--job", c.Job} }

// JobAttach is `warmpod job attach`: the one long-lived exec of a job's
// multiplexer, which carries the job's calls as frames (muxproto).
type JobAttach struct{ Bin, Job string }

// Argv returns the command line.
func (c JobAttach) Argv() []string { return []string{c.Bin, "job", "attach", "--job", c.Job} }

// JobExec is `warmpod job exec`: Command run as a direct exec would run
// it, once Job holds the lease; the job's multiplexer stream carries it.
type JobExec struct {
	Bin, Job string
	Command  []string
}

// Argv returns the command line.
func (c JobExec) Argv() []string {
	return append([]string{c.Bin, "job", "exec", "--job", c.Job, "--"}, c.Command...)
}

// JobPut is `warmpod job put`: exactly Size bytes with that SHA256 on
// stdin, written atomically to Dest with Mode.
type JobPut struct {
	Bin       string
	Dest, Job string
	Size      int
	SHA256    string // hex
	Mode      uint32 // permission bits, written in octal
}

// Argv returns the command line.
func (c JobPut) Argv() []string {
	return []string{c.Bin, "job", "put", c.Dest, "--job", c.Job, "--size", strconv.Itoa(c.Size),
		"--sha256", c.SHA256, "--mode", "0" + strconv.FormatUint(uint64(c.Mode&0o7777), 8)}
}

// JobLimits is `warmpod job limits`: it waits, at most Within, until the
// container's cgroup holds the values set (after an in-place resize). A
// zero field is not waited for.
type JobLimits struct {
	Bin    string
	Within time.Duration
	// Shares is cgroup v1's cpu.shares; Weights are the cgroup v2
	// cpu.weight values the kubelet may write for it (two formulas).
	Shares  uint64
	Weights []uint64
	// Quota is the CFS quota in µs (cpu.max or cpu.cfs_quota_us);
	// Memory the memory limit in bytes.
	Quota, Memory int64
}

// Argv returns the command line; nil when no field is set (nothing to
// wait for).
func (c JobLimits) Argv() []string {
	var args []string
	if c.Shares != 0 {
		args = append(args, "--cpu-shares", strconv.FormatUint(c.Shares, 10))
		for _, w := range c.Weights {
			args = append(args, "--cpu-weight", strconv.FormatUint(w, 10))
		}
	}
	if c.Quota != 0 {
		args = append(args, "--cpu-quota", strconv.FormatInt(c.Quota, 10))
	}
	if c.Memory != 0 {
		args = append(args, "--memory-limit", strconv.FormatInt(c.Memory, 10))
	}
	if args == nil {
		return nil
	}
	return append([]string{c.Bin, "job", "limits", "--within", c.Within.String()}, args...)
}
