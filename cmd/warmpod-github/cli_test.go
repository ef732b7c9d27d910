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
		{"help", []string{"help"}, 0, "", `usage: warmpod-github`, ""},
		{"-h", []string{"-h"}, 0, "", `-streams int`, ""},
		{"an unknown command named", []string{"stauts"}, 2, `^::error::warmpod-github: unknown command "stauts"`, "", ""},
		{"--version", []string{"--version"}, 0, "", `^warmpod-github `, ""},
		{"a bad duration in one line", []string{"--warm-wait=5x"}, 2, `^::error::warmpod-github: --warm-wait: "5x" is not a Go duration, e.g. 90s\n$`, "", ""},
		{"no streams", []string{"--streams=0"}, 2, `^::error::warmpod-github: --streams 0: must be 1 or more`, "", ""},
		{"a negative chunk size", []string{"--chunk-size=-5"}, 2, `^::error::warmpod-github: --chunk-size -5: must be 1 byte or more`, "", ""},
		{"a zero timeout", []string{"--timeout=0s"}, 2, `^::error::warmpod-github: --timeout 0s: must be above 0\n$`, "", ""},
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
