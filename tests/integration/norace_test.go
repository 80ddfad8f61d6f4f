//go:build !race

package integration_test

// raceEnabled reports whether the race detector is on (race_test.go).
const raceEnabled = false
