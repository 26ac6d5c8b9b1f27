package storage

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/spurdb/spur/event"
)

// BenchmarkIngest measures durable live ingestion on the OS filesystem:
// requests of 1,000 events with four properties from 8 goroutines (group
// commit), each acknowledged after its log record is fsynced and applied.
// The background loop seals, merges and flushes as in a server.
func BenchmarkIngest(b *testing.B) {
	st, err := Open(Config{Dir: b.TempDir(), Writer: true, Live: &LiveOptions{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const batch, writers = 1000, 8
	reqs := make([][]event.Event, 64)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range reqs {
		evs := make([]event.Event, batch)
		for k := range evs {
			evs[k] = event.Event{UserID: fmt.Sprintf("user%d", r.IntN(100_000)), Name: names[r.IntN(len(names))],
				Time: 1_700_000_000_000_000 + int64(i*batch+k)*1000, InsertID: fmt.Sprintf("%016x", r.Uint64()),
				Props: []event.Prop{{Name: "url", Value: event.String(fmt.Sprintf("/p/%d", r.IntN(500)))},
					{Name: "price", Value: event.Float(float64(r.IntN(10000)) / 100)},
					{Name: "qty", Value: event.Int(int64(r.IntN(5)))}, {Name: "country", Value: event.String([]string{"DE", "US", "KR", "BR"}[r.IntN(4)])}}}
		}
		reqs[i] = evs
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	next := make(chan int)
	for range writers {
		wg.Go(func() {
			evs := make([]event.Event, batch)
			for i := range next {
				copy(evs, reqs[i%len(reqs)])
				if _, err := st.Ingest(context.Background(), "bench", evs, nil); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
}
