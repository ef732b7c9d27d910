// Package clitest runs a command's real command line in tests: the test
// binary re-executes itself as the command (Main), so each case sees the
// exit code and the output streams a user would, without a build.
package clitest

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

// childEnv marks the re-executed test binary.
const childEnv = "WARMPOD_TEST_MAIN=1"

// Main runs run(os.Args[1:]) and exits when this process is a case's
// re-execution, and returns otherwise. Call it first in TestMain.
func Main(run func([]string) int) {
	if os.Getenv("WARMPOD_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:]))
	}
}

// Case is one command line and what it must give.
type Case struct {
	Name           string
	Args           []string
	Code           int
	Stderr, Stdout string // regular expressions; "" = not checked
	Env            string // one more NAME=value; "" = none
}

// Run runs each case as a subtest, with empty stdin, KUBECONFIG pointing
// nowhere and a 20 s bound, so a command that would wait (a PID 1 started
// by accident, a retry loop) fails instead of hanging the suite.
func Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], tc.Args...)
			cmd.Env = append(os.Environ(), childEnv, "KUBECONFIG=/nonexistent")
			if tc.Env != "" {
				cmd.Env = append(cmd.Env, tc.Env)
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
			assert.Equal(t, tc.Code, code, "stdout %q stderr %q", out.String(), errOut.String())
			if tc.Stderr != "" {
				assert.Regexp(t, tc.Stderr, errOut.String())
			}
			if tc.Stdout != "" {
				assert.Regexp(t, tc.Stdout, out.String())
			}
		})
	}
}
