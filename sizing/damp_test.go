package sizing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDamper(t *testing.T) {
	t0 := day(0, 11, 0)
	var d Damper
	n, held := d.Damp(t0, 5, 2, 2, nil)
	assert.Equal(t, 5, n, "a growth at once")
	assert.False(t, held)
	n, held = d.Damp(t0.Add(10*time.Second), 1, 5, 5, nil)
	assert.Equal(t, 1, n, "no panic: a shrink at once")
	assert.False(t, held)

	// Panic: 6 claims in 6 s against 2 Ready idle pods.
	p0 := t0.Add(time.Hour)
	claims := times(p0.Add(-5*time.Second), 6, time.Second)
	var q Damper
	n, _ = q.Damp(p0, 8, 2, 2, claims)
	assert.Equal(t, 8, n)
	n, held = q.Damp(p0.Add(59*time.Second), 0, 8, 8, nil)
	assert.Equal(t, 8, n, "no shrink while panicking")
	assert.True(t, held)
	n, held = q.Damp(p0.Add(60*time.Second), 0, 8, 8, nil)
	assert.Equal(t, 0, n, "a stable window after the panic's last moment")
	assert.False(t, held)
	// Two claims against 5 Ready pods: no panic.
	var r Damper
	r.Damp(p0, 5, 5, 5, times(p0.Add(-time.Second), 2, 0))
	n, _ = r.Damp(p0.Add(time.Second), 0, 5, 5, nil)
	assert.Equal(t, 0, n)
	// Reset ends a panic.
	q.Damp(p0, 8, 2, 2, claims)
	q.Reset()
	n, _ = q.Damp(p0.Add(time.Second), 0, 8, 8, nil)
	assert.Equal(t, 0, n)
}
