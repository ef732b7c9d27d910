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
		{Name: "help", Args: []string{"help"}, Code: 0, Stdout: `usage: warmpod-github`},
		{Name: "-h", Args: []string{"-h"}, Code: 0, Stdout: `-streams int`},
		{Name: "an unknown command named", Args: []string{"stauts"}, Code: 2, Stderr: `^::error::warmpod-github: unknown command "stauts"`},
		{Name: "--version", Args: []string{"--version"}, Code: 0, Stdout: `^warmpod-github `},
		{Name: "a bad duration in one line", Args: []string{"--warm-wait=5x"}, Code: 2, Stderr: `^::error::warmpod-github: --warm-wait: "5x" is not a Go duration, e.g. 90s\n$`},
		{Name: "no streams", Args: []string{"--streams=0"}, Code: 2, Stderr: `^::error::warmpod-github: --streams 0: must be 1 or more`},
		{Name: "a negative chunk size", Args: []string{"--chunk-size=-5"}, Code: 2, Stderr: `^::error::warmpod-github: --chunk-size -5: must be 1 byte or more`},
		{Name: "an offers URL without a host", Args: []string{"--offers=http://"}, Code: 2, Stderr: `^::error::warmpod-github: --offers: offers URL "http://": no host, such as http://warmpod-pools.NAMESPACE:9090\n$`},
		{Name: "a zero timeout", Args: []string{"--timeout=0s"}, Code: 2, Stderr: `^::error::warmpod-github: --timeout 0s: must be above 0\n$`},
	})
}
