package ingest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
)

// benchNow is a receive time after every generated event (the generator's
// span starts at gen.DefaultStart and lasts 90 days).
const benchNow = gen.DefaultStart + 400*86_400_000_000

// benchBody returns n generated events (the gen package's shape: five or
// six properties, an insert id, a millisecond timestamp; installs carry
// user properties) as an NDJSON body, as an SDK or `spur loadgen` sends
// them.
func benchBody(n int, seed int64) []byte {
	g, err := gen.New(gen.Config{Events: int64(n), Seed: seed})
	if err != nil {
		panic(err)
	}
	var ev event.Event
	var body []byte
	for i := 0; g.Next(&ev); i++ {
		ev.InsertID = fmt.Sprintf("%016x", uint64(seed)<<32|uint64(i))
		var user, once []event.Prop
		if ev.Name == "install" {
			user = ev.Props[:3]
			once = []event.Prop{{Name: "signup_time", Value: event.Time(ev.Time)}}
		}
		body = AppendEventJSON(body, &ev, user, once)
		body = append(body, '\n')
	}
	return body
}

// toArray turns an NDJSON body into a JSON array body.
func toArray(nd []byte) []byte {
	lines := bytes.Split(bytes.TrimSuffix(nd, []byte("\n")), []byte("\n"))
	return append(append([]byte("["), bytes.Join(lines, []byte(",\n"))...), ']')
}

// BenchmarkEventsParse: decode and check one request of 1,000 events (the
// events endpoint's work without the store), per body form.
// events/s is per core.
func BenchmarkEventsParse(b *testing.B) {
	nd := benchBody(1000, 1)
	for _, c := range []struct {
		name   string
		body   []byte
		ndjson bool
	}{
		{"ndjson-gzip", gz(b, nd), true},
		{"ndjson", nd, true},
		{"array-gzip", gz(b, toArray(nd)), false},
		{"array", toArray(nd), false},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := NewEventsParser()
			opt := EventsOptions{NDJSON: c.ndjson, Now: benchNow, MaxFuture: 86_400_000_000}
			b.ReportAllocs()
			b.SetBytes(int64(len(nd)))
			for b.Loop() {
				bt, err := p.Parse(context.Background(), bytes.NewReader(c.body), opt)
				if err != nil || len(bt.Events) != 1000 {
					b.Fatal(err, bt.Rejected)
				}
			}
			b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkEventsParseParallel: the gzip NDJSON requests of 1,000 events
// parsed on every core at once (GOMAXPROCS goroutines, one parser each);
// events/s is the total.
func BenchmarkEventsParseParallel(b *testing.B) {
	body := gz(b, benchBody(1000, 1))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		p := NewEventsParser()
		opt := EventsOptions{NDJSON: true, Now: benchNow, MaxFuture: 86_400_000_000}
		for pb.Next() {
			bt, err := p.Parse(context.Background(), bytes.NewReader(body), opt)
			if err != nil || len(bt.Events) != 1000 {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "events/s")
}
