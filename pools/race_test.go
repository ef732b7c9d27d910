//go:build race

package pools

// raceEnabled: under the race detector a 1,000-pool hour takes minutes;
// TestSimulationLearned runs its -short size then.
const raceEnabled = true
