//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process returns the process's user+system CPU time (getrusage
// RUSAGE_SELF), or 0 when getrusage fails.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
