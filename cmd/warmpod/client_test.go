package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseClientArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		job  string
		ok   bool
	}{
		{[]string{"/up/f", "--size", "3", "--job", "a"}, []string{"/up/f"}, "a", true},
		{[]string{"--job", "a", "/up/f", "--size", "3"}, []string{"/up/f"}, "a", true},
		{[]string{"--job", "a", "--size", "3", "/up/f"}, []string{"/up/f"}, "a", true},
		{[]string{"--job", "a", "--", "-dash", "x"}, []string{"-dash", "x"}, "a", true},
		{[]string{"a", "b"}, []string{"a", "b"}, "", true},
		{[]string{"--nope", "x"}, nil, "", false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		job := fs.String("job", "", "")
		fs.Int64("size", -1, "")
		pos, ok := parseClientArgs(fs, tc.args)
		require.Equal(t, tc.ok, ok, "%q", tc.args)
		if ok {
			require.Equal(t, tc.pos, pos, "%q", tc.args)
			require.Equal(t, tc.job, *job, "%q", tc.args)
		}
	}
}

// parseClient keeps the positional arguments for commands that read
// them from fs.Args() (probe live, job run cmd args).
func TestParseClientKeepsArgs(t *testing.T) {
	for _, args := range [][]string{{"live"}, {"stall", "60s"}, {"--control-socket", "/s", "sh", "-c", "x"}} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("control-socket", "", "")
		require.True(t, parseClient(fs, args))
		require.NotZero(t, fs.NArg(), "%q", args)
		require.Equal(t, args[len(args)-fs.NArg():], fs.Args())
	}
}

func TestPathList(t *testing.T) {
	var l pathList
	require.NoError(t, l.Set("/scripts-*:/logs-*"))
	require.NoError(t, l.Set("/tmp/ci"))
	require.Equal(t, pathList{"/scripts-*", "/logs-*", "/tmp/ci"}, l)
	require.Error(t, l.Set("relative"))
	require.Error(t, l.Set("/proc/1"))
	require.Error(t, l.Set("/ok:/*"))
	require.Len(t, l, 3, "a refused value adds nothing")
}
