package supervisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/internal/initlog"
)

// bare is a Supervisor that runs no loop: its phases are moved by the test
// itself. broken collects what onBroken was told, log what PID 1 logged.
func bare(t *testing.T) (s *Supervisor, broken *[]error, log *syncBuffer) {
	t.Helper()
	log = &syncBuffer{}
	s = New(Config{}, newWorld().effects(), initlog.New(log, initlog.LevelInfo, initlog.Text, time.Now))
	broken = &[]error{}
	s.onBroken = func(err error) { *broken = append(*broken, err) }
	return s, broken, log
}

// Every move between two job phases, allowed or refused. A refused move
// leaves the job where it was, returns an error of kind errIllegalMove,
// is logged at Error and reported to onBroken; it never panics.
func TestJobPhaseMoves(t *testing.T) {
	all := []jobPhase{jobStarting, jobRunning, jobCancelled, jobEnding, jobReleased}
	allowed := map[[2]jobPhase]bool{
		{jobStarting, jobRunning}:    true, // the start's worker completed
		{jobStarting, jobReleased}:   true, // the start failed
		{jobRunning, jobCancelled}:   true, // job cancel
		{jobRunning, jobEnding}:      true, // job end, lease expiry, shutdown
		{jobCancelled, jobCancelled}: true, // another cancel sweeps again
		{jobCancelled, jobEnding}:    true, // job end after a cancel
		{jobEnding, jobReleased}:     true, // the end's worker completed
	}
	for _, from := range all {
		for _, to := range all {
			ok := allowed[[2]jobPhase{from, to}]
			t.Run(from.String()+"→"+to.String(), func(t *testing.T) {
				s, broken, log := bare(t)
				j := &job{id: "a", phase: from}
				err := s.moveJob(j, to)
				if ok {
					require.NoError(t, err)
					assert.Equal(t, to, j.phase)
					assert.Equal(t, from, j.from)
					assert.Empty(t, *broken)
					return
				}
				require.ErrorIs(t, err, errIllegalMove)
				assert.Equal(t, from, j.phase, "a refused move changes nothing")
				assert.Equal(t, []error{err}, *broken)
				assert.Contains(t, log.String(), "level=ERROR")
				assert.Contains(t, log.String(), "illegal move "+from.String()+" → "+to.String())
			})
		}
	}
}

// Every move between two pod phases: forward, one step at a time.
func TestPodPhaseMoves(t *testing.T) {
	all := []podPhase{podServing, podShutdownQueued, podShuttingDown, podShutDown}
	allowed := map[[2]podPhase]bool{
		{podServing, podShutdownQueued}:      true, // drain
		{podShutdownQueued, podShuttingDown}: true, // the shutdown's turn
		{podShuttingDown, podShutDown}:       true, // its worker completed
	}
	for _, from := range all {
		for _, to := range all {
			ok := allowed[[2]podPhase{from, to}]
			t.Run(from.String()+"→"+to.String(), func(t *testing.T) {
				s, broken, log := bare(t)
				s.ls.pod = from
				err := s.movePod(to)
				if ok {
					require.NoError(t, err)
					assert.Equal(t, to, s.ls.pod)
					assert.Empty(t, *broken)
					return
				}
				require.ErrorIs(t, err, errIllegalMove)
				assert.Equal(t, from, s.ls.pod, "a refused move changes nothing")
				assert.Equal(t, []error{err}, *broken)
				assert.Contains(t, log.String(), "level=ERROR")
			})
		}
	}
}

// The status document's "cancelled" holds from the cancel until the job
// is gone, through its end.
func TestCancelledSurvivesTheEnd(t *testing.T) {
	s, broken, _ := bare(t)
	j := &job{id: "a", phase: jobRunning}
	assert.False(t, j.cancelled())
	require.NoError(t, s.moveJob(j, jobCancelled))
	assert.True(t, j.cancelled())
	require.NoError(t, s.moveJob(j, jobCancelled))
	assert.True(t, j.cancelled(), "a second cancel")
	require.NoError(t, s.moveJob(j, jobEnding))
	assert.True(t, j.cancelled(), "ending after a cancel")
	k := &job{id: "b", phase: jobRunning}
	require.NoError(t, s.moveJob(k, jobEnding))
	assert.False(t, k.cancelled(), "ending without a cancel")
	assert.Empty(t, *broken)
}

// Each phase has a name of its own in logs and errors.
func TestPhaseNames(t *testing.T) {
	names := map[string]bool{}
	for _, p := range []jobPhase{jobStarting, jobRunning, jobCancelled, jobEnding, jobReleased} {
		names[p.String()] = true
	}
	for _, p := range []podPhase{podServing, podShutdownQueued, podShuttingDown, podShutDown} {
		names[p.String()] = true
	}
	assert.Len(t, names, 9)
	assert.NotContains(t, names, "jobPhase(5)")
	assert.Equal(t, "jobPhase(9)", jobPhase(9).String())
	assert.Equal(t, "podPhase(9)", podPhase(9).String())
}
