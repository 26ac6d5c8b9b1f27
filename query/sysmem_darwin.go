package query

import "golang.org/x/sys/unix"

// SystemMemory returns the machine's physical memory, bytes (sysctl
// hw.memsize); ok is false when it cannot be read.
func SystemMemory() (n int64, ok bool) {
	m, err := unix.SysctlUint64("hw.memsize")
	if err != nil || m == 0 || m >= 1<<63 {
		return 0, false
	}
	return int64(m), true
}
