//go:build unix

package gen

import "syscall"

// cpuTime returns the CPU time (user and system) the process has used so
// far, in ns, or 0 when it cannot be read.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
