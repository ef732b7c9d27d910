//go:build !race

package poolsim

const raceEnabled = false
