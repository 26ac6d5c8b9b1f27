//go:build !unix

package gen

// cpuTime returns 0: the process's CPU time is read on unix only.
func cpuTime() int64 { return 0 }
