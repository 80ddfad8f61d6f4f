//go:build race

package integration_test

// raceEnabled reports whether the race detector is on: under it, which
// slows every byte copied several times over, the tests whose point is not
// the size use smaller values (see TestGraphService).
const raceEnabled = true
