//go:build !unix

package testutil

import "time"

// CPUTime is unavailable on this platform: it returns 0, and benchmarks
// then omit their per-CPU-second metric.
func CPUTime() time.Duration { return 0 }
