package query

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SystemMemory returns the memory this process may use, bytes: the
// machine's physical memory (sysinfo(2)), or its cgroup's memory limit
// when that is lower (cgroup v2 memory.max, v1 memory.limit_in_bytes).
// ok is false when it cannot be read.
func SystemMemory() (n int64, ok bool) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, false
	}
	n = int64(si.Totalram) * int64(si.Unit)
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if lim, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && lim > 0 && lim < n {
			n = lim // "max" (no limit) does not parse
		}
	}
	return n, n > 0
}
