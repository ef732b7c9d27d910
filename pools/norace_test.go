//go:build !race

package pools

const raceEnabled = false
