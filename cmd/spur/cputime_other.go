//go:build !unix

package main

import "time"

// cpuTime returns 0: getrusage is a unix call.
func cpuTime() time.Duration { return 0 }
