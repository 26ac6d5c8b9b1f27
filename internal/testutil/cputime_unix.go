//go:build unix

package testutil

import (
	"syscall"
	"time"
)

// CPUTime returns the process's user+system CPU time, for benchmarks that
// report throughput per CPU-second, which unlike wall time does not
// depend on other processes competing for the cores. It returns 0 when
// getrusage fails.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
