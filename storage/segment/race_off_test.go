//go:build !race

package segment

// raceEnabled reports a -race build, whose instrumentation allocates.
const raceEnabled = false
