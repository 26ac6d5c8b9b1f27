package gen

import (
	"fmt"
	"testing"

	"github.com/spurdb/spur/event"
)

// BenchmarkNext measures the in-memory event stream; one op is one event.
func BenchmarkNext(b *testing.B) {
	g, err := New(Config{Events: max(int64(b.N), 1), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	var ev event.Event
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for g.Next(&ev) {
		n++
	}
	if n != b.N {
		b.Fatalf("got %d events, want %d", n, b.N)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// countWriter discards its input and counts the bytes.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// BenchmarkWriteParquet measures WriteParquet to a discarding writer; one op
// is one event. It reports the file size per event.
func BenchmarkWriteParquet(b *testing.B) {
	var w countWriter
	b.ReportAllocs()
	if err := WriteParquet(&w, Config{Events: max(int64(b.N), 1), Seed: 1}, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(w.n)/float64(b.N), "bytes/event")
}

// reportCPU reports the process's CPU time per op since cpu (a cpuTime
// value), as "cpu-ns/op": on a shared machine it varies less than the wall
// time, which counts the time spent waiting for a core.
func reportCPU(b *testing.B, cpu int64) {
	if cpu != 0 {
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkNextPersons measures Next without and with persons
// (Config.Persons); one op is one event, the $identify events included.
func BenchmarkNextPersons(b *testing.B) {
	for _, rate := range []float64{0, 0.1} {
		b.Run(fmt.Sprintf("rate=%v", rate), func(b *testing.B) {
			g, err := New(Config{Events: max(int64(b.N), 1), Seed: 1, Persons: rate})
			if err != nil {
				b.Fatal(err)
			}
			var ev event.Event
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				if !g.Next(&ev) {
					b.Fatal("stream ended early")
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkNextBatchPersons measures NextBatch (the import path) without
// and with persons; one op is one event.
func BenchmarkNextBatchPersons(b *testing.B) {
	for _, rate := range []float64{0, 0.1} {
		b.Run(fmt.Sprintf("rate=%v", rate), func(b *testing.B) {
			g, err := New(Config{Events: max(int64(b.N), 1), Seed: 1, Persons: rate})
			if err != nil {
				b.Fatal(err)
			}
			var batch event.Batch
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for n := 0; n < b.N; n += batch.Rows {
				if err := (Source{G: g}).NextBatch(&batch); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}
