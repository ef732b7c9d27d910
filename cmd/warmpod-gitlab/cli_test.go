package main

import (
	"os"
	"testing"

	"github.com/warmpod/warmpod/internal/clitest"
)

// TestMain runs the command itself when a case re-executes the test
// binary (clitest.Main).
func TestMain(m *testing.M) {
	clitest.Main(run)
	os.Exit(m.Run())
}

// A mistyped command or flag is refused at once, exit 2, naming the word
// or the flag and what it takes in one line; help prints the usage and
// the flags and exits 0; --version works (issue 39).
func TestCLIFailsFast(t *testing.T) {
	clitest.Run(t, []clitest.Case{
		{Name: "help", Args: []string{"help"}, Code: 0, Stdout: `usage: warmpod-gitlab`},
		{Name: "-h", Args: []string{"-h"}, Code: 0, Stdout: `-warm-wait duration`},
		{Name: "an unknown command named", Args: []string{"stauts"}, Code: 2, Stderr: `^warmpod-gitlab: unknown command "stauts"; the commands: config, prepare`},
		{Name: "a known command with wrong arguments", Args: []string{"run", "x"}, Code: 2, Stderr: `^warmpod-gitlab: run: wrong arguments`},
		{Name: "no command", Code: 2, Stderr: `^warmpod-gitlab: no command: config, prepare`},
		{Name: "--version", Args: []string{"--version"}, Code: 0, Stdout: `^warmpod-gitlab `},
		{Name: "a bad duration in one line", Args: []string{"--warm-wait=5x", "prepare"}, Code: 2, Stderr: `^warmpod-gitlab: --warm-wait: "5x" is not a Go duration, e.g. 90s\n$`},
		{Name: "a bad duration from the environment", Args: []string{"prepare"}, Code: 2, Stderr: `^warmpod-gitlab: WARMPOD_GITLAB_READY_TIMEOUT="soon": not a Go duration`, Env: "WARMPOD_GITLAB_READY_TIMEOUT=soon"},
		{Name: "a negative retry count", Args: []string{"--stream-retries=-1", "prepare"}, Code: 2, Stderr: `^warmpod-gitlab: --stream-retries -1: must be 0 or more\n$`},
		{Name: "a zero ready timeout", Args: []string{"--ready-timeout=0s", "prepare"}, Code: 2, Stderr: `^warmpod-gitlab: --ready-timeout 0s: must be above 0\n$`},
		{Name: "an offers URL that is none", Args: []string{"--offers=warmpod-pools:9090", "config"}, Code: 2, Stderr: `^warmpod-gitlab: --offers: offers URL "warmpod-pools:9090": want http:// or https://, such as http://warmpod-pools.NAMESPACE:9090\n$`},
		{Name: "an unknown flag", Args: []string{"--no-such", "prepare"}, Code: 2, Stderr: `^warmpod-gitlab: flag provided but not defined: -no-such \(warmpod-gitlab -h lists its flags\)\n$`},
	})
}
