//go:build !linux && !darwin

package query

// SystemMemory reports that the machine's memory is unknown on this
// system (ok false).
func SystemMemory() (n int64, ok bool) { return 0, false }
