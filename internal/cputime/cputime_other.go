//go:build !unix

package cputime

import "time"

// Process is unavailable on this platform: it returns 0, and callers then
// omit their CPU-time figures.
func Process() time.Duration { return 0 }
