//go:build race

package poolsim

// raceEnabled: under the race detector a play of 15 days takes about ten
// times as long; TestTargets plays two seeds then (one seen, one not).
const raceEnabled = true
