package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/shellproxy"
)

func TestParseConfig(t *testing.T) {
	noenv := func(string) string { return "" }
	c, err := parseConfig(nil, noenv)
	require.NoError(t, err)
	assert.Equal(t, []string{"/bin/sh"}, c.sup.Command)
	assert.Equal(t, 10*time.Minute, c.sup.IdleTimeout)
	assert.Equal(t, 10*time.Second, c.sup.ReadyMargin)
	assert.Equal(t, 1, c.sup.MaxJobs)
	assert.Equal(t, "/run/warmpod", c.sup.RuntimeDir)
	assert.Equal(t, shellproxy.ModeAuto, c.stdio)

	c, err = parseConfig([]string{"--idle-timeout", "10s", "--ready-margin", "1m", "--job-user", "1000", "--cleanup-path", "/a:/b/*", "--", "/bin/bash", "-l"}, func(k string) string {
		if k == "WARMPOD_TEST_HOOKS" {
			return "1"
		}
		return ""
	})
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, c.sup.ReadyMargin, "capped at half the idle timeout")
	assert.Equal(t, uint32(1000), c.sup.JobUser.Gid)
	assert.Equal(t, []string{"/a", "/b/*"}, c.sup.CleanupPaths)
	assert.Equal(t, []string{"/bin/bash", "-l"}, c.sup.Command)
	assert.True(t, c.sup.TestHooks)

	t.Setenv("WARMPOD_MAX_JOBS", "3")
	c, err = parseConfig(nil, noenv)
	require.NoError(t, err)
	assert.Equal(t, 3, c.sup.MaxJobs, "the environment twin fills what no flag set")

	for _, bad := range [][]string{
		{"--stdin-when-idle", "drop"},
		{"--self-delete", "maybe"},
		{"--job-user", "nobody"},
		{"--max-jobs", "-1"},
		{"--grace", "-1s"},
		{"--stdio", "tty"},
		{"--cleanup-path", "/proc/x"},
		{"--no-such-flag"},
		{"--probe-addr", "localhost:9898"},
		{"--probe-addr", "9898"},
		{"--probe-addr", ":http"},
		{"--probe-addr", ":65536"},
		{"--probe-addr", "[fe80::1%eth0]:1"},
	} {
		_, err := parseConfig(bad, noenv)
		assert.Error(t, err, "%q", bad)
	}
	for addr, want := range map[string]string{":9898": ":9898", "127.0.0.1:0": "127.0.0.1:0", "[::1]:80": "[::1]:80", "[::]:9898": "[::]:9898"} {
		c, err := parseConfig([]string{"--probe-addr", addr}, noenv)
		require.NoError(t, err, addr)
		assert.Equal(t, want, c.probeTCP.String(), addr)
	}
	c, err = parseConfig([]string{"--probe-addr", ""}, noenv)
	require.NoError(t, err)
	assert.Nil(t, c.probeTCP, "empty: the probe server is off")
	c, err = parseConfig([]string{"--exit-with-command", "--idle-timeout", "2s", "--", "sleep", "9"}, noenv)
	require.NoError(t, err)
	assert.Zero(t, c.sup.IdleTimeout, "a plain init has no idle deadline")
	_, err = parseConfig([]string{"-h"}, noenv)
	assert.ErrorIs(t, err, flag.ErrHelp)
}

// Both log formats write durations as Go durations, as the flags take
// them (slog's JSON handler alone would write nanoseconds).
func TestLogDurations(t *testing.T) {
	for _, format := range []string{"text", "JSON"} {
		t.Run(format, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "log")
			log, closeLog, err := newLogger("info", format, file)
			require.NoError(t, err)
			log.Info("job started", "timeout", 90*time.Second)
			closeLog()
			out, err := os.ReadFile(file)
			require.NoError(t, err)
			assert.Regexp(t, `"?timeout"?[:=]"?1m30s"?`, string(out))
		})
	}
}
