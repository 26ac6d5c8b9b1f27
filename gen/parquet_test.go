package gen

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/spurdb/spur/event"
)

// readAll reads every row of a Parquet file in data.
func readAll[T any](t *testing.T, data []byte) ([]T, *parquet.File) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	r := parquet.NewGenericReader[T](bytes.NewReader(data))
	defer r.Close()
	rows := make([]T, r.NumRows())
	n, err := r.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return rows[:n], f
}

func TestParquetRoundTrip(t *testing.T) {
	cfg := Config{Events: 30_000, Seed: 3}
	var buf bytes.Buffer
	var calls, last int64
	if err := WriteParquet(&buf, cfg, func(n int64) { calls++; last = n }); err != nil {
		t.Fatal(err)
	}
	if last != cfg.Events || calls != (cfg.Events+writeBatch-1)/writeBatch {
		t.Fatalf("progress: %d calls, last %d", calls, last)
	}
	rows, f := readAll[EventRow](t, buf.Bytes())
	if int64(len(rows)) != cfg.Events {
		t.Fatalf("%d rows, want %d", len(rows), cfg.Events)
	}

	// Schema: timestamp is TIMESTAMP(MICROS, UTC); price is optional and
	// null exactly where the event has no price.
	ts, ok := f.Schema().Lookup("timestamp")
	if !ok {
		t.Fatal("no timestamp column")
	}
	lt := ts.Node.Type().LogicalType()
	tt, ok := lt.Value.(*format.TimestampType)
	if !ok || !tt.IsAdjustedToUTC || tt.Unit.Value.Duration() != time.Microsecond {
		t.Fatalf("timestamp logical type %v, want TIMESTAMP(MICROS, UTC)", lt)
	}
	if price, _ := f.Schema().Lookup("price"); !price.Node.Optional() {
		t.Fatal("price column is not optional")
	}
	var nulls int64
	for _, rg := range f.Metadata().RowGroups {
		nulls += rg.Columns[4].MetaData.Statistics.NullCount
	}

	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	var priced int64
	for i, r := range rows {
		if !g.Next(&ev) {
			t.Fatalf("stream ended at row %d", i)
		}
		want := EventRow{
			UserID: ev.UserID, Timestamp: ev.Time, Event: ev.Name,
			Platform: ev.Props[0].Value.Str, Channel: ev.Props[1].Value.Str, Country: ev.Props[2].Value.Str,
			SessionID: ev.Props[3].Value.Int,
		}
		for _, p := range ev.Props[4:] {
			switch p.Name {
			case PropPrice:
				want.Price = &p.Value.Float
				priced++
			case PropRevenue:
				want.Revenue = &p.Value.Float
			case PropURL:
				want.URL = &p.Value.Str
			}
		}
		same := func(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
		if !same(r.Price, want.Price) || !same(r.Revenue, want.Revenue) || (r.URL == nil) != (want.URL == nil) || r.URL != nil && *r.URL != *want.URL {
			t.Fatalf("row %d price %v revenue %v url %v, want %v %v %v", i, r.Price, r.Revenue, r.URL, want.Price, want.Revenue, want.URL)
		}
		r.Price, want.Price, r.Revenue, want.Revenue, r.URL, want.URL = nil, nil, nil, nil, nil, nil
		if r != want {
			t.Fatalf("row %d = %+v, want %+v", i, r, want)
		}
	}
	if nulls != cfg.Events-priced {
		t.Fatalf("price nulls %d, want %d", nulls, cfg.Events-priced)
	}
}

func TestUsersParquetRoundTrip(t *testing.T) {
	cfg := Config{Events: 50_000, Seed: 4}
	var buf bytes.Buffer
	if err := WriteUsersParquet(&buf, cfg); err != nil {
		t.Fatal(err)
	}
	rows, _ := readAll[UserRow](t, buf.Bytes())
	s, err := NewUserStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(rows)) != s.Users() {
		t.Fatalf("%d rows, want %d", len(rows), s.Users())
	}
	var u event.Event
	for i, r := range rows {
		s.Next(&u)
		want := UserRow{UserID: u.UserID, SignupTime: u.Time,
			Platform: u.Props[0].Value.Str, Channel: u.Props[1].Value.Str, Country: u.Props[2].Value.Str}
		if r != want {
			t.Fatalf("row %d = %+v, want %+v", i, r, want)
		}
	}
}

func TestParquetFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Events: 2000, Seed: 1}
	ev, us := filepath.Join(dir, "events.parquet"), filepath.Join(dir, "users.parquet")
	if err := WriteParquetFile(ev, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteUsersParquetFile(us, cfg); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ev, us} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}

	missing := filepath.Join(dir, "no", "such", "dir", "x.parquet")
	if err := WriteParquetFile(missing, cfg, nil); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("WriteParquetFile into a missing dir: %v", err)
	}
	// A bad config leaves no file behind.
	bad := filepath.Join(dir, "bad.parquet")
	if err := WriteParquetFile(bad, Config{}, nil); err == nil {
		t.Fatal("WriteParquetFile with a zero config succeeded")
	}
	if err := WriteUsersParquetFile(bad, Config{Events: 1, Users: 2}); err == nil {
		t.Fatal("WriteUsersParquetFile with users > events succeeded")
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial file left behind: %v", err)
	}
}

// failWriter fails every write after limit bytes.
type failWriter struct{ limit int }

var errFull = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.limit {
		return 0, errFull
	}
	w.limit -= len(p)
	return len(p), nil
}

func TestParquetWriteError(t *testing.T) {
	cfg := Config{Events: 20_000, Seed: 2}
	if err := WriteParquet(&failWriter{limit: 1000}, cfg, nil); !errors.Is(err, errFull) {
		t.Fatalf("WriteParquet to a failing writer: %v", err)
	}
	if err := WriteUsersParquet(&failWriter{limit: 100}, cfg); !errors.Is(err, errFull) {
		t.Fatalf("WriteUsersParquet to a failing writer: %v", err)
	}
}

// TestParquetCodec checks that every column chunk is zstd-compressed.
func TestParquetCodec(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteParquet(&buf, Config{Events: 100}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			if c.MetaData.Codec != format.Zstd {
				t.Fatalf("column %v codec %v, want ZSTD", c.MetaData.PathInSchema, c.MetaData.Codec)
			}
		}
	}
}
