package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCLIFailsFast runs the warmpod command (this test binary under the
// name warmpod: TestMain hands it to testscript.Main) with the inputs of
// issue 39: a word that is neither a subcommand nor a program is refused
// (2, the word named, a suggestion), flags before a subcommand work, and a
// bad flag value is one line that names the flag. None of these may start
// a PID 1: with the old behaviour they did, and would have run for the
// idle timeout of 2s here (each run is bounded by a context besides, so a
// regression fails instead of hanging). The last rows do start one, as a
// plain init that exits with its command: a program, a path, and anything
// after "--" still do.
func TestCLIFailsFast(t *testing.T) {
	dir := t.TempDir()
	warmpod := filepath.Join(dir, "warmpod")
	require.NoError(t, os.Symlink(os.Args[0], warmpod))
	sock := filepath.Join(dir, "run", "warmpod.sock")
	exe := filepath.Join(dir, "script")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\nexit 5\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644))
	for _, tc := range []struct {
		args   []string
		env    []string
		stdin  string
		code   int
		stderr string // the whole of stderr, as a regular expression
		stdout string // a regular expression stdout matches
	}{
		{args: []string{"help"}, stdout: `^usage: warmpod \[flags\]`},
		{args: []string{"--help"}, stdout: `^usage: warmpod \[flags\]`},
		{args: []string{"help", "job"}, stdout: `^usage: warmpod job COMMAND`},
		{args: []string{"stauts"}, code: 2,
			stderr: `^warmpod: unknown command "stauts": did you mean "status"\? \(warmpod help lists the commands; warmpod -- CMD runs a program as PID 1's shell\)\n$`},
		{args: []string{"jobs", "start"}, code: 2, stderr: `^warmpod: unknown command "jobs": did you mean "job"\? .*\n$`},
		{args: []string{"frobnicate"}, code: 2, stderr: `^warmpod: unknown command "frobnicate": neither a warmpod command nor a program in PATH .*\n$`},
		{args: []string{"--idle-timeout", "5m", "frobnicate"}, code: 2, stderr: `^warmpod: unknown command "frobnicate"`},
		{args: []string{filepath.Join(dir, "nothing")}, code: 2, stderr: `^warmpod: ".*/nothing": no such program .*\n$`},
		{args: []string{filepath.Join(dir, "plain")}, code: 2, stderr: `^warmpod: ".*/plain": not an executable file .*\n$`},
		{args: []string{"--control-socket", filepath.Join(dir, "elsewhere.sock"), "status"}, code: 69,
			stderr: `^warmpod: PID 1 not reachable at .*/elsewhere\.sock: .*\n$`},
		{args: []string{"--control-socket", filepath.Join(dir, "elsewhere.sock"), "job", "status"}, code: 69,
			stderr: `^warmpod: PID 1 not reachable at .*/elsewhere\.sock: .*\n$`},
		{args: []string{"--idle-timeout", "5m", "status"}, code: 2,
			stderr: `^warmpod: --idle-timeout is a flag of PID 1, not of warmpod status \(warmpod status -h lists its flags\)\n$`},
		{args: []string{"--idle-timeout", "5x"}, code: 2, stderr: `^warmpod: --idle-timeout: "5x" is not a Go duration, e.g\. 90s\n$`},
		{args: []string{"--idle-timeout=5x", "sh"}, code: 2, stderr: `^warmpod: --idle-timeout: "5x" is not a Go duration, e.g\. 90s\n$`},
		{args: []string{"--max-jobs", "two"}, code: 2, stderr: `^warmpod: --max-jobs: "two" is not an integer\n$`},
		{args: []string{"--exit-with-command=maybe"}, code: 2, stderr: `^warmpod: --exit-with-command: "maybe" is not true or false\n$`},
		{env: []string{"WARMPOD_GRACE=5x"}, code: 2, stderr: `^warmpod: WARMPOD_GRACE="5x": not a Go duration, e.g\. 90s\n$`},
		{args: []string{"--no-such-flag"}, code: 2, stderr: `^warmpod: flag provided but not defined: -no-such-flag \(warmpod -h lists its flags\)\n$`},
		{args: []string{"job", "wait", "--stage", "build", "--timeout", "soon"}, code: 2,
			stderr: `^warmpod: job wait: --timeout: "soon" is not a Go duration, e.g\. 90s\n$`},
		{args: []string{"job", "logs", "--offset", "x"}, code: 2, stderr: `^warmpod: job logs: --offset: "x" is not an integer\n$`},
		{args: []string{"job", "limits", "--cpu-shares", "-1"}, code: 2, stderr: `^warmpod: job limits: --cpu-shares: "-1" is not a whole number \(0 or more\)\n$`},
		{args: []string{"job", "start", "--bogus"}, code: 2,
			stderr: `^warmpod: job start: flag provided but not defined: -bogus \(warmpod job start -h lists its flags\)\n$`},
		{args: []string{"job", "limits", "--memory-limit", "1"}, code: 2,
			stderr: `^warmpod: job limits: --memory-limit: memory limit 1 B is below one page \(\d+ B\): the kernel keeps whole pages\n$`},
		{args: []string{"job", "check"}, stdin: `{"id":"job-1","nonce":` + "\n", code: 65,
			stdout: `^\{"code":65,"error":"job spec: not valid JSON \(error at byte offset 22\)","ok":false\}\n$`,
			stderr: `^warmpod: job spec: not valid JSON \(error at byte offset 22\)\n$`},
		{args: []string{"job", "check"}, stdin: `{"id":"job-1","timeout":"1m","variables":[{"key":"1A"}]}` + "\n", code: 65,
			stdout: `^\{"code":65,"error":"job spec: variables\[0\]\.key: .+","ok":false\}\n$`,
			stderr: `^warmpod: job spec: variables\[0\]\.key: not a POSIX name`},
		{args: []string{"job", "check"}, stdin: `{"id":"job-1","timeout":"1m","variables":[{"key":"A","value":"x"}]}` + "\n",
			stdout: `^\{"job":"job-1","ok":true\}\n$`},
		// PID 1 still starts for a program, a path and after "--" (a
		// plain init here, which exits with its command).
		{args: []string{"--exit-with-command", "--stdio", "pipe", "sh", "-c", "exit 3"}, code: 3},
		{args: []string{"--exit-with-command", "--stdio=pipe", exe}, code: 5},
		{args: []string{"--exit-with-command", "--stdio", "pipe", "--", "stauts"}, code: 127, stderr: `warmpod: .*stauts.*not found`},
	} {
		t.Run(strings.Join(append(tc.env, tc.args...), " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, warmpod, tc.args...)
			cmd.WaitDelay = time.Second
			cmd.Env = append(cliEnv(dir, sock), tc.env...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			require.NoError(t, ctx.Err(), "still running after 20s: a PID 1 was started")
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.code, cmd.ProcessState.ExitCode(), "stderr: %s", stderr.String())
			if tc.stderr != "" {
				assert.Regexp(t, tc.stderr, stderr.String())
			} else if tc.code != 0 || tc.stdout != "" {
				assert.Empty(t, stderr.String())
			}
			assert.Regexp(t, tc.stdout, stdout.String())
		})
	}
}

// cliEnv is the environment of TestCLIFailsFast's runs: the caller's
// without its WARMPOD_* twins, then twins that keep a PID 1 started by
// mistake under dir, on 127.0.0.1, and short-lived.
func cliEnv(dir, sock string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WARMPOD_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"WARMPOD_CONTROL_SOCKET="+sock,
		"WARMPOD_JOBS_DIR="+filepath.Join(dir, "jobs"),
		"WARMPOD_TERMINATION_LOG="+filepath.Join(dir, "termination-log"),
		"WARMPOD_PROBE_ADDR=127.0.0.1:0",
		"WARMPOD_SELF_DELETE=never",
		"WARMPOD_IDLE_TIMEOUT=2s",
		"WARMPOD_LOG_LEVEL=error",
		"GORACE=atexit_sleep_ms=10",
	)
}

func TestSuggest(t *testing.T) {
	for word, want := range map[string]string{
		"stauts": "status", "jobs": "job", "statsu": "status", "proeb": "probe", "versoin": "version",
		"hlep": "help", "frobnicate": "", "x": "", "": "",
	} {
		assert.Equal(t, want, suggest(word), "%q", word)
	}
}
