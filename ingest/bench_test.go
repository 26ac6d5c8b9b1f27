package ingest

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
)

// benchReader reads a fresh reader per iteration and reports rows/s,
// ns/row and allocs/row (all allocations, including opening the reader).
func benchReader(b *testing.B, size int, open func() (Reader, error)) {
	b.Helper()
	b.ReportAllocs()
	b.SetBytes(int64(size))
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	rows := 0
	var ev event.Event
	for b.Loop() {
		r, err := open()
		if err != nil {
			b.Fatal(err)
		}
		for {
			err := r.Next(&ev)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			rows++
		}
		r.Close()
	}
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(rows), "allocs/row")
}

const benchRows = 200_000

var (
	benchOnce                      sync.Once
	benchCSV, benchNDJSON, benchOT []byte
)

// benchInputs builds the same benchRows events as CSV, NDJSON and OTTO:
// 1000 users, an RFC 3339 millisecond timestamp, 4 event names and three
// properties (int, float, string).
func benchInputs() {
	names := []string{"view", "cart", "purchase", "remove_from_cart"}
	brands := []string{"acme", "globex", "initech", "umbrella", "hooli"}
	base := time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC)
	var c, n, o bytes.Buffer
	c.WriteString("user_id,timestamp,event,product_id,price,brand\n")
	for i := range benchRows {
		u := fmt.Sprintf("user-%d", i%1000)
		ts := base.Add(time.Duration(i) * 1237 * time.Millisecond)
		tss := ts.Format("2006-01-02T15:04:05.000Z")
		name, brand := names[i%4], brands[i%5]
		price := float64(i%10000) / 100
		fmt.Fprintf(&c, "%s,%s,%s,%d,%.2f,%s\n", u, tss, name, 1000000+i%7919, price, brand)
		fmt.Fprintf(&n, `{"user_id":%q,"timestamp":%q,"event":%q,"properties":{"product_id":%d,"price":%.2f,"brand":%q}}`+"\n", u, tss, name, 1000000+i%7919, price, brand)
	}
	for s := range benchRows / 50 {
		fmt.Fprintf(&o, `{"session":%d,"events":[`, s)
		for k := range 50 {
			if k > 0 {
				o.WriteByte(',')
			}
			fmt.Fprintf(&o, `{"aid":%d,"ts":%d,"type":%q}`, 1000000+(s*50+k)%7919, base.Add(time.Duration(s*50+k)*time.Second).UnixMilli(), []string{"clicks", "carts", "orders"}[k%3])
		}
		o.WriteString("]}\n")
	}
	benchCSV, benchNDJSON, benchOT = c.Bytes(), n.Bytes(), o.Bytes()
}

func BenchmarkCSV(b *testing.B) {
	benchOnce.Do(benchInputs)
	benchReader(b, len(benchCSV), func() (Reader, error) {
		return NewReader(bytes.NewReader(benchCSV), "b.csv", Options{})
	})
}

func BenchmarkNDJSON(b *testing.B) {
	benchOnce.Do(benchInputs)
	benchReader(b, len(benchNDJSON), func() (Reader, error) {
		return NewReader(bytes.NewReader(benchNDJSON), "b.ndjson", Options{})
	})
}

func BenchmarkOTTO(b *testing.B) {
	benchOnce.Do(benchInputs)
	benchReader(b, len(benchOT), func() (Reader, error) {
		return NewReader(bytes.NewReader(benchOT), "b.jsonl", Options{Format: FormatOTTO})
	})
}

func BenchmarkCSVGzip(b *testing.B) {
	benchOnce.Do(benchInputs)
	body := gz(b, benchCSV)
	benchReader(b, len(body), func() (Reader, error) {
		return NewReader(bytes.NewReader(body), "b.csv.gz", Options{})
	})
}

// benchParquetRow is the events schema of the Parquet benchmark.
type benchParquetRow struct {
	UserID    string  `parquet:"user_id,dict"`
	Timestamp int64   `parquet:"timestamp,timestamp(millisecond)"`
	Event     string  `parquet:"event,dict"`
	ProductID int64   `parquet:"product_id"`
	Price     float64 `parquet:"price"`
	Brand     *string `parquet:"brand,optional,dict"`
}

var (
	benchParquetOnce sync.Once
	benchParquet     []byte
)

// BenchmarkParquet reads a generated 1M-row file (6 columns, 1000 users,
// dictionary-encoded strings, one optional column with 20% nulls).
func BenchmarkParquet(b *testing.B) {
	benchParquetOnce.Do(func() {
		const n = 1_000_000
		rows := make([]benchParquetRow, n)
		users := make([]string, 1000)
		for i := range users {
			users[i] = fmt.Sprintf("user-%d", i)
		}
		brands := []string{"acme", "globex", "initech", "umbrella"}
		base := time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		for i := range rows {
			rows[i] = benchParquetRow{UserID: users[i%1000], Timestamp: base + int64(i)*1237, Event: []string{"view", "cart", "purchase"}[i%3],
				ProductID: 1000000 + int64(i%7919), Price: float64(i%10000) / 100}
			if i%5 != 0 {
				rows[i].Brand = &brands[i%4]
			}
		}
		benchParquet = writeParquet(b, rows)
	})
	benchReader(b, len(benchParquet), func() (Reader, error) {
		return NewReader(bytes.NewReader(benchParquet), "b.parquet", Options{})
	})
}

func TestBenchInputsParse(t *testing.T) {
	// The benchmark inputs are valid: every row reads without an error.
	benchOnce.Do(benchInputs)
	for name, body := range map[string][]byte{"b.csv": benchCSV[:strings.Index(string(benchCSV), "user-5,")], "b.ndjson": benchNDJSON[:20000]} {
		body = body[:bytes.LastIndexByte(body, '\n')+1]
		evs, errs := readAll(t, openString(t, string(body), name, Options{}))
		if len(errs) != 0 || len(evs) == 0 || len(evs[0].Props) != 3 {
			t.Errorf("%s: %d events, errors %v", name, len(evs), errs)
		}
	}
}
