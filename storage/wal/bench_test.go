package wal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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

// BenchmarkSalvage measures Salvage on the operating system's filesystem
// (real fsyncs) over a 16 MiB log of 1 KiB records in 4 MiB files,
// undamaged and with 1 MiB zeroed in its second file (Salvage
// resynchronises across it). Bytes per op are the log's size.
func BenchmarkSalvage(b *testing.B) {
	src := b.TempDir()
	l, err := Open(vfs.Default, src, Options{SegmentSize: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	rec := make([]byte, 1<<10)
	batch := make([][]byte, 256)
	for i := range batch {
		batch[i] = rec
	}
	for range 64 {
		if _, err := l.AppendBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	size := l.Stats().Bytes
	l.Close()
	for _, damaged := range []bool{false, true} {
		b.Run(fmt.Sprintf("damaged=%v", damaged), func(b *testing.B) {
			if damaged {
				names, err := vfs.Default.List(src)
				if err != nil {
					b.Fatal(err)
				}
				path := filepath.Join(src, names[1]) // names[0] is the lock file
				data, err := os.ReadFile(path)
				if err != nil {
					b.Fatal(err)
				}
				clear(data[1<<20 : 2<<20])
				if err := os.WriteFile(path, data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				rep, err := Salvage(context.Background(), vfs.Default, src, filepath.Join(b.TempDir(), "new"), SalvageOptions{})
				if err != nil || len(rep.Lost) != map[bool]int{false: 0, true: 1}[damaged] {
					b.Fatalf("salvage: %v, %+v", err, rep)
				}
			}
		})
	}
}
