package flagenv

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestApply(t *testing.T) {
	t.Setenv("WP_IDLE_TIMEOUT", "90s")
	t.Setenv("WP_MAX_JOBS", "3")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	idle := fs.Duration("idle-timeout", time.Minute, "")
	jobs := fs.Int("max-jobs", 1, "")
	require.NoError(t, fs.Parse([]string{"--max-jobs", "5"}))
	require.NoError(t, Apply(fs, "WP_"))
	assert.Equal(t, 90*time.Second, *idle, "unset flag takes its twin")
	assert.Equal(t, 5, *jobs, "the command line wins")

	t.Setenv("WP_IDLE_TIMEOUT", "soon")
	fs2 := flag.NewFlagSet("x", flag.ContinueOnError)
	fs2.Duration("idle-timeout", time.Minute, "")
	require.NoError(t, fs2.Parse(nil))
	assert.ErrorContains(t, Apply(fs2, "WP_"), `WP_IDLE_TIMEOUT="soon"`)
}
