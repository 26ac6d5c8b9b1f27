package wal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spurdb/spur/storage/vfs"
)

// BenchmarkAppend measures Append throughput from 8 goroutines on the
// operating system's filesystem (a temporary directory: real fsyncs), for
// 1 KiB and 100 KiB records. Besides ns/op (per record) and MB/s it
// reports records/s, fsyncs/s and records per commit (how well group
// commit batches).
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			l, err := Open(vfs.Default, b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			rec := make([]byte, size)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range rec {
				rec[i] = byte(r.Uint32())
			}
			const goroutines = 8
			var next atomic.Int64
			before := l.Stats()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, err := l.Append(context.Background(), rec); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start).Seconds()
			b.StopTimer()
			st := l.Stats()
			b.ReportMetric(float64(b.N)/elapsed, "records/s")
			b.ReportMetric(float64(st.Syncs-before.Syncs)/elapsed, "fsyncs/s")
			b.ReportMetric(float64(b.N)/float64(st.Commits-before.Commits), "records/commit")
		})
	}
}
