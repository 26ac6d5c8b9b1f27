package cputime

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProcessGrows: busy work shows up as CPU time (on platforms with
// getrusage), and the figure never goes back.
func TestProcessGrows(t *testing.T) {
	c0 := Process()
	x := uint64(1)
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	runtime.KeepAlive(x)
	c1 := Process()
	if c1 == 0 {
		t.Skip("no CPU time on this platform")
	}
	if c1 < c0 {
		t.Fatalf("CPU time went back: %v -> %v", c0, c1)
	}
	if c1-c0 < 10*time.Millisecond {
		t.Fatalf("50 ms of busy work took %v of CPU time", c1-c0)
	}
}
