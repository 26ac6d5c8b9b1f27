//go:build race

package storage

// raceEnabled reports a -race build, whose instrumentation allocates.
const raceEnabled = true
