package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every command line an executor sends into a pod (package podcmd's
// golden file, one per command and variant) is one this warmpod's parser
// takes: run with -h appended, each parses every flag it names and stops
// at -h with the usage, where a flag warmpod does not know, or a value
// it refuses, would stop it first with an error.
func TestPodCommandsParse(t *testing.T) {
	f, err := os.Open("../../podcmd/testdata/argv.golden")
	require.NoError(t, err)
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		name, line, ok := strings.Cut(sc.Text(), "\t")
		require.True(t, ok, sc.Text())
		var argv []string
		require.NoError(t, json.Unmarshal([]byte(line), &argv))
		require.Greater(t, len(argv), 2)
		t.Run(name, func(t *testing.T) {
			// -h before a "--" (what follows it is the command's own).
			args := slices.Clone(argv[1:])
			at := len(args)
			if i := slices.Index(args, "--"); i >= 0 {
				at = i
			}
			args = slices.Insert(args, at, "-h")
			code, stderr := captureStderr(t, func() int { return run(args) })
			assert.Equal(t, 2, code)
			assert.True(t, strings.HasPrefix(stderr, "Usage of job "+argv[2]+":"), "warmpod refused %q:\n%s", argv, stderr)
		})
	}
	assert.GreaterOrEqual(t, n, 8, "the golden file has a line per command")
}

// captureStderr runs fn with os.Stderr a pipe and returns its result and
// what it wrote there.
func captureStderr(t *testing.T, fn func() int) (int, string) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	code := fn()
	os.Stderr = old
	require.NoError(t, w.Close())
	return code, <-done
}
