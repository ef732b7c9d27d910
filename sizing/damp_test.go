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
	assert.Equal(t, 5, n, "a shrink waits for a stable window without a higher decision")
	assert.True(t, held)
	n, _ = d.Damp(t0.Add(50*time.Second), 3, 5, 5, nil)
	assert.Equal(t, 5, n)
	n, held = d.Damp(t0.Add(61*time.Second), 1, 5, 5, nil)
	assert.Equal(t, 3, n, "the most of the last minute: 3 at +50 s")
	assert.True(t, held)
	n, held = d.Damp(t0.Add(111*time.Second), 1, 3, 3, nil)
	assert.Equal(t, 1, n)
	assert.False(t, held)

	// Panic: 6 claims in 6 s against 2 Ready idle pods.
	var p Damper
	p0 := t0.Add(time.Hour)
	claims := times(p0.Add(-5*time.Second), 6, time.Second)
	n, _ = p.Damp(p0, 8, 2, 2, claims)
	assert.Equal(t, 8, n)
	n, held = p.Damp(p0.Add(90*time.Second), 0, 8, 8, claims)
	assert.Equal(t, 0, n, "a stable window after the panic's last moment, no higher decision in the last minute")
	assert.False(t, held)
	var q Damper
	q.Damp(p0, 8, 2, 2, claims)
	n, held = q.Damp(p0.Add(59*time.Second), 0, 8, 8, nil)
	assert.Equal(t, 8, n, "no shrink while panicking")
	assert.True(t, held)
	// Two claims against 5 Ready pods: no panic.
	var r Damper
	r.Damp(p0, 5, 5, 5, times(p0.Add(-time.Second), 2, 0))
	n, _ = r.Damp(p0.Add(61*time.Second), 0, 5, 5, nil)
	assert.Equal(t, 0, n)
}
