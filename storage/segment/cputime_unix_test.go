//go:build unix

package segment

import (
	"syscall"
	"time"
)

// cpuTime returns the process's user+system CPU time, to report
// throughput per CPU-second, which unlike wall time does not depend on
// other processes competing for the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
