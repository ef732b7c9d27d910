package sizing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// An image becomes a pool after its third cold job within a day, the most
// cold first, within the cap; a pool made so is removed after a week
// without a claim.
func TestDiscovery(t *testing.T) {
	rule := DefaultDiscovery()
	f := NewFinder(rule)
	t0 := day(0, 9, 0)
	f.Cold("python", t0)
	f.Cold("python", t0.Add(time.Hour))
	assert.Empty(t, f.Due(t0.Add(time.Hour), 0), "two cold jobs are not yet use")
	f.Cold("rust", t0.Add(-25*time.Hour)) // outside the day
	f.Cold("rust", t0.Add(time.Hour))
	f.Cold("rust", t0.Add(2*time.Hour))
	f.Cold("python", t0.Add(2*time.Hour))
	f.Cold("ruby", t0.Add(2*time.Hour))
	f.Cold("ruby", t0.Add(2*time.Hour))
	f.Cold("ruby", t0.Add(2*time.Hour))
	f.Cold("ruby", t0.Add(2*time.Hour))
	now := t0.Add(2 * time.Hour)
	assert.Equal(t, []string{"ruby", "python"}, f.Due(now, 0), "rust's first cold job is over a day old")
	assert.Equal(t, []string{"ruby"}, f.Due(now, rule.Max-1), "the cap counts the pools made already")
	assert.Len(t, f.Colds("python", now), 3)
	f.Made("python")
	assert.Equal(t, []string{"ruby"}, f.Due(now, 0))
	assert.Empty(t, f.Due(now.Add(25*time.Hour), 0), "a day later the cold jobs are forgotten")

	assert.False(t, rule.Unused(t0, t0.Add(3*24*time.Hour), t0.Add(9*24*time.Hour)))
	assert.True(t, rule.Unused(t0, t0.Add(time.Hour), t0.Add(8*24*time.Hour)))
	assert.True(t, rule.Unused(t0, time.Time{}, t0.Add(7*24*time.Hour)), "never claimed: a week after it was made")

	off := NewFinder(Discovery{})
	for range 10 {
		off.Cold("python", t0)
	}
	assert.Empty(t, off.Due(t0, 0), "the zero Discovery is off")
}
