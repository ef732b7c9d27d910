package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain runs the command itself when the tests re-execute their binary
// with WARMPOD_TEST_MAIN=1: the table below runs the real command line,
// exit codes and output streams included, without a build.
func TestMain(m *testing.M) {
	if os.Getenv("WARMPOD_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// A mistyped command or flag is refused at once, exit 2, naming the word
// or the flag and what it takes in one line; help prints the usage and
// the flags and exits 0; --version works (issue 39).
func TestCLIFailsFast(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stderr, stdout string // regular expressions; "" = not checked
		env            string
	}{
		{"help", []string{"help"}, 0, "", `usage: warmpod-gitlab`, ""},
		{"-h", []string{"-h"}, 0, "", `-warm-wait duration`, ""},
		{"an unknown command named", []string{"stauts"}, 2, `^warmpod-gitlab: unknown command "stauts"; the commands: config, prepare`, "", ""},
		{"a known command with wrong arguments", []string{"run", "x"}, 2, `^warmpod-gitlab: run: wrong arguments`, "", ""},
		{"no command", nil, 2, `^warmpod-gitlab: no command: config, prepare`, "", ""},
		{"--version", []string{"--version"}, 0, "", `^warmpod-gitlab `, ""},
		{"a bad duration in one line", []string{"--warm-wait=5x", "prepare"}, 2, `^warmpod-gitlab: --warm-wait: "5x" is not a Go duration, e.g. 90s\n$`, "", ""},
		{"a bad duration from the environment", []string{"prepare"}, 2, `^warmpod-gitlab: WARMPOD_GITLAB_READY_TIMEOUT="soon": not a Go duration`, "", "WARMPOD_GITLAB_READY_TIMEOUT=soon"},
		{"a negative retry count", []string{"--stream-retries=-1", "prepare"}, 2, `^warmpod-gitlab: --stream-retries -1: must be 0 or more\n$`, "", ""},
		{"a zero ready timeout", []string{"--ready-timeout=0s", "prepare"}, 2, `^warmpod-gitlab: --ready-timeout 0s: must be above 0\n$`, "", ""},
		{"an unknown flag", []string{"--no-such", "prepare"}, 2, `^warmpod-gitlab: flag provided but not defined: -no-such \(warmpod-gitlab -h lists its flags\)\n$`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], tc.args...)
			cmd.Env = append(os.Environ(), "WARMPOD_TEST_MAIN=1", "KUBECONFIG=/nonexistent")
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			var out, errOut bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(nil), &out, &errOut
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.code, code, "stdout %q stderr %q", out.String(), errOut.String())
			if tc.stderr != "" {
				assert.Regexp(t, tc.stderr, errOut.String())
			}
			if tc.stdout != "" {
				assert.Regexp(t, tc.stdout, out.String())
			}
		})
	}
}
