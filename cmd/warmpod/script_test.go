package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScript is the CLI tier: the scripts in testdata/script run the real
// warmpod command (this test binary under the name warmpod: TestMain
// hands it to testscript.Main) as a user
// would, and assert what an executor depends on: the exit codes (2 usage,
// 65 bad spec, 69 no job or no PID 1, 75 busy or another configuration),
// the one-line JSON answers on stdout and the reasons on stderr. PID 1
// runs in child-subreaper mode (it is not PID 1 here) on a control socket
// under $WORK with its probe server on 127.0.0.1, and ends with its
// script: by an idle drain, a job end of a single-use pod, or
// testscript's kill. Nothing needs root: PID 1 keeps its job logs beside
// its socket. The scripts take about a second in all, so -short runs them
// too.
//
// Commands added to testscript's:
//
//	exitcode N PROG [ARGS...]      run PROG as exec does; fail unless it exits N
//	waitsock PATH                  wait (10s at most) for a unix socket at PATH
//	until DURATION PROG [ARGS...]  rerun PROG until it exits 0 (DURATION at most)
//	expand FILE...                 replace $VAR and ${VAR} in FILEs by their values
//
// Setup sets $SOCK (the socket every script's PID 1 listens on), $JOB (a
// job id unique to the run) and the WARMPOD_* twins of the flags
// that touch the host (socket, jobs dir, termination log, probe address,
// self-delete, idle timeout), so that a command that forgets a flag stays
// under $WORK and on 127.0.0.1.
func TestScript(t *testing.T) {
	var runs atomic.Int64
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			sock := filepath.Join(env.WorkDir, "run", "warmpod.sock")
			env.Setenv("SOCK", sock)
			job := fmt.Sprintf("script-%d-%d", os.Getpid(), runs.Add(1))
			env.Setenv("JOB", job)
			if env.Getenv("GORACE") == "" {
				// Under -race each warmpod run would sleep 1s at exit.
				env.Setenv("GORACE", "atexit_sleep_ms=10")
			}
			for k, v := range map[string]string{
				"WARMPOD_CONTROL_SOCKET":  sock,
				"WARMPOD_JOBS_DIR":        filepath.Join(env.WorkDir, "jobs"),
				"WARMPOD_TERMINATION_LOG": filepath.Join(env.WorkDir, "termination-log"),
				"WARMPOD_PROBE_ADDR":      "127.0.0.1:0",
				"WARMPOD_SELF_DELETE":     "never",
				"WARMPOD_IDLE_TIMEOUT":    "5s",
			} {
				env.Setenv(k, v)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitCode,
			"waitsock": cmdWaitSock,
			"until":    cmdUntil,
			"expand":   cmdExpand,
		},
	})
}

// cmdExitCode runs a program as exec does (stdin from the stdin command,
// stdout and stderr kept for the stdout and stderr commands) and fails
// unless it exits with the given status.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exitcode")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %q is not a number", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ts.Fatalf("%s: killed by %v, want exit %d", args[1], ws.Signal(), want)
		}
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s: exit %d, want %d", args[1], got, want)
	}
}

// cmdWaitSock waits for a unix socket at the path: PID 1 renames its
// socket into place once it listens, so a client may connect as soon as
// it exists. It also makes sure that the script's background commands
// (started with &) end with the script, even one that failed before its
// kill: PID 1 forwards SIGINT, which testscript sends them at the end,
// instead of exiting, so they are sent SIGKILL (what the kill command
// sends them) first. A background command already waited for is not
// signalled again (os.Process.Kill knows it is done).
func cmdWaitSock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitsock PATH")
	}
	ts.Defer(func() {
		for _, c := range ts.BackgroundCmds() {
			_ = c.Process.Kill()
		}
	})
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("no unix socket at %s after 10s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cmdUntil reruns a program (as exec does) every 20ms until it exits 0,
// and fails if it has not within the duration: PID 1 serves its socket
// before its shell is up, so a script waits for readiness as the kubelet
// does before anything that needs the shell.
func cmdUntil(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: until DURATION program [args...]")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		ts.Fatalf("until: %v", err)
	}
	deadline := time.Now().Add(d)
	for {
		err := ts.Exec(args[1], args[2:]...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s: still failing after %s: %v", args[1], d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdExpand replaces $VAR and ${VAR} in each file by the script's value
// of VAR, so that archive files (job specs) can carry $JOB.
func cmdExpand(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: expand FILE...")
	}
	for _, f := range args {
		path := ts.MkAbs(f)
		b, err := os.ReadFile(path)
		ts.Check(err)
		ts.Check(os.WriteFile(path, []byte(os.Expand(string(b), ts.Getenv)), 0o666))
	}
}
