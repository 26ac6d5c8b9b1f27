package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/ingest"
)

// benchParquetEvents is the size of the file BenchmarkImportParquet imports.
const benchParquetEvents = 1 << 20

// writeBenchParquet writes a generated events file of benchParquetEvents
// rows (the `spur gen` schema: user id, timestamp, event, session id,
// optional price, three dictionary-coded strings) into dir and returns its
// path.
func writeBenchParquet(b *testing.B, dir string) string {
	path := filepath.Join(dir, "events.parquet")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := gen.WriteParquet(f, gen.Config{Events: benchParquetEvents, Seed: 1}, nil); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkImportParquet imports a generated Parquet file of 2^20 events
// through ingest.Open and Store.Import, as `spur import` does, into a new
// app per iteration, and reports events/s. "default" uses the default
// ImportOptions (one flush at the end); "flush256Ki" flushes every 2^18
// rows, so that flushes overlap with reading.
func BenchmarkImportParquet(b *testing.B) {
	path := writeBenchParquet(b, b.TempDir())
	for _, bc := range []struct {
		name string
		opt  ImportOptions
	}{
		{"default", ImportOptions{}},
		{"flush256Ki", ImportOptions{FlushRows: 1 << 18}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st, err := Open(Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.ReportAllocs()
			var rows int64
			i := 0
			for b.Loop() {
				r, err := ingest.Open(path, ingest.Options{})
				if err != nil {
					b.Fatal(err)
				}
				rep, err := st.Import(context.Background(), fmt.Sprintf("a%d", i), []Source{r}, bc.opt)
				r.Close()
				if err != nil {
					b.Fatal(err)
				}
				if rep.Applied != benchParquetEvents {
					b.Fatalf("applied %d of %d events", rep.Applied, benchParquetEvents)
				}
				rows += rep.Applied
				i++
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
