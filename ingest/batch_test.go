package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"

	"github.com/spurdb/spur/event"
)

// readBatches drains a ColumnReader with NextBatch, returning the good
// rows (materialised with Batch.Row) and the row errors in input order,
// like readRows; a fatal error is returned.
func readBatches(t testing.TB, r Reader) ([]event.Event, []*event.RowError, error) {
	t.Helper()
	defer r.Close()
	cr, ok := r.(ColumnReader)
	if !ok {
		t.Fatalf("%T is not a ColumnReader", r)
	}
	var evs []event.Event
	var errs []*event.RowError
	var b event.Batch
	var ev event.Event
	for {
		err := cr.NextBatch(&b)
		if err == io.EOF {
			return evs, errs, nil
		}
		if err != nil {
			return evs, errs, err
		}
		if len(b.Errs) != b.Rows || len(b.Time) != b.Rows {
			t.Fatalf("batch of %d rows with %d errors, %d times", b.Rows, len(b.Errs), len(b.Time))
		}
		for i := range b.Rows {
			if b.Errs[i] != nil {
				errs = append(errs, b.Errs[i])
				continue
			}
			b.Row(&ev, i)
			c := ev
			c.Props = append([]event.Prop(nil), ev.Props...)
			evs = append(evs, c)
		}
	}
}

// readRows drains r with Next like readAll, but returns a fatal error
// instead of failing.
func readRows(r Reader) ([]event.Event, []*event.RowError, error) {
	defer r.Close()
	var evs []event.Event
	var errs []*event.RowError
	var ev event.Event
	for {
		err := r.Next(&ev)
		if err == io.EOF {
			return evs, errs, nil
		}
		var re *event.RowError
		if errors.As(err, &re) {
			errs = append(errs, re)
			continue
		}
		if err != nil {
			return evs, errs, err
		}
		c := ev
		c.Props = append([]event.Prop(nil), ev.Props...)
		evs = append(evs, c)
	}
}

// sameBothWays checks that reading body with Next and with NextBatch gives
// the same events, row errors and fatal error, and returns the number of
// events and row errors.
func sameBothWays(t testing.TB, body []byte, opt Options) (int, int) {
	t.Helper()
	opt.Format = FormatParquet
	open := func() Reader {
		r, err := NewReader(bytes.NewReader(body), "t.parquet", opt)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	evs, errs, fatal := readRows(open())
	bevs, berrs, bfatal := readBatches(t, open())
	if fmt.Sprint(fatal) != fmt.Sprint(bfatal) {
		t.Fatalf("fatal error: Next %v, NextBatch %v", fatal, bfatal)
	}
	if len(evs) != len(bevs) {
		t.Fatalf("Next read %d events, NextBatch %d", len(evs), len(bevs))
	}
	for i := range evs {
		a, b := evs[i], bevs[i]
		if len(a.Props) == 0 && len(b.Props) == 0 {
			a.Props, b.Props = nil, nil
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("event %d:\n Next      %+v\n NextBatch %+v", i, a, b)
		}
	}
	if len(errs) != len(berrs) {
		t.Fatalf("Next found %d bad rows %v, NextBatch %d %v", len(errs), errs, len(berrs), berrs)
	}
	for i := range errs {
		if *errs[i] != *berrs[i] {
			t.Fatalf("row error %d: Next %v, NextBatch %v", i, errs[i], berrs[i])
		}
	}
	return len(evs), len(errs)
}

// mixedRow has dictionary-coded strings and integers, invalid UTF-8, user
// ids out of the limits and nulls.
type mixedRow struct {
	User  string   `parquet:"user_id,dict"`
	Ts    *int64   `parquet:"timestamp,optional,timestamp(microsecond)"`
	Event string   `parquet:"event,dict"`
	Kind  *string  `parquet:"kind,optional,dict"`
	Free  *string  `parquet:"free,optional"`
	N     *int64   `parquet:"n,optional,dict"`
	U     uint32   `parquet:"u,dict"`
	F     *float32 `parquet:"f,optional,dict"`
	D     *float64 `parquet:"d,optional"`
	Day   int32    `parquet:"day,date"`
	Ins   *string  `parquet:"insert_id,optional"`
}

// mixedRows returns n rows; with bad, some of them are bad in one way or
// another.
func mixedRows(n int, bad bool) []mixedRow {
	rows := make([]mixedRow, n)
	for i := range rows {
		r := &rows[i]
		r.User = fmt.Sprintf("user-%d", i/7)
		ts := int64(1_600_000_000_000_000 + i*1000)
		r.Ts = &ts
		r.Event = []string{"view", "buy", "cart"}[i%3]
		if i%4 != 0 {
			r.Kind = ptr([]string{"a", "bb", "ccc", "dddd", "é"}[i%5])
		}
		if i%3 != 0 {
			r.Free = ptr(fmt.Sprintf("free text %d ü", i%50))
		}
		if i%5 != 0 {
			r.N = ptr(int64(i % 9))
		}
		r.U = uint32(math.MaxUint32 - i%3)
		if i%2 == 0 {
			r.F = ptr(float32(i%4) / 2)
		}
		if i%6 != 0 {
			r.D = ptr(float64(i) / 3)
		}
		r.Day = int32(18000 + i%100)
		if i%10 == 0 {
			r.Ins = ptr(fmt.Sprint("ins-", i/20))
		}
		if !bad {
			continue
		}
		switch i % 97 {
		case 11:
			r.User = ""
		case 12:
			r.User = strings.Repeat("x", 300)
		case 13:
			r.Event = "\xff\xfe"
		case 14:
			r.Ts = nil
		case 15:
			r.Free = ptr("bad \xc3")
		case 16:
			r.Event = ""
		case 17:
			r.Kind = ptr("\xe2\x82")
		case 18:
			r.Day = 200_000_000 // out of range, not wrapped by the µs overflow
		case 19:
			r.Ins = ptr("bad \xff")
		case 20:
			ts := int64(math.MaxInt64)
			r.Ts = &ts
		}
	}
	return rows
}

func TestParquetBatchMatchesNext(t *testing.T) {
	day := time.Date(2021, 5, 1, 0, 0, 0, 0, time.UTC)
	rich := []richRow{
		{UID: 42, When: day.UnixNano() + 1999, Name: "view", Insert: ptr("ins"), B: ptr(true), I32: -7, U64: 1 << 40, F32: 1.5,
			F64: ptr(2.25), S: ptr("café"), D: int32(day.Unix() / 86400), TSM: ptr(day.UnixMilli()), Dec: 12345,
			UUID: [16]byte{0x12, 0x34}, Local: day.UnixMicro(), I96: deprecated.Int96{1, 2, 2440588 + 18000}},
		{UID: -1, When: day.UnixNano() - 1, Name: "buy", U64: math.MaxUint64, I96: deprecated.Int96{0, 0, 2440588}},
		{UID: 7, When: day.UnixNano(), Name: "buy", I96: deprecated.Int96{0, 0, math.MaxUint32}},
	}
	nullable := []nullableRow{
		{User: ptr("u1"), Ts: ptr("2021-05-01 09:00:00"), Event: ptr("e"), P: ptr(1.5)},
		{Ts: ptr("2021-05-01"), Event: ptr("e")},
		{User: ptr("u3"), Event: ptr("e")},
		{User: ptr("u4"), Ts: ptr("nope"), Event: ptr("e")},
		{User: ptr("u5"), Ts: ptr("2021-05-01"), Event: ptr("")},
		{User: ptr("u6"), Ts: ptr("2021-05-01"), Event: ptr("e"), Q: ptr(int64(3)), P: ptr(2.5)},
		{User: ptr("u7"), Ts: ptr("1620000000"), Event: ptr("e"), Q: ptr(int64(5)), P: ptr(7.0)},
		{User: ptr("u8"), Ts: ptr("1620000000"), Event: ptr("e"), Q: ptr(int64(1) << 60)},
	}
	epochs := make([]epochRow, 3*parquetBatchRows+17)
	for i := range epochs {
		epochs[i] = epochRow{User: "u" + string(rune('a'+i%26)), Sec: 1620000000 + int64(i), Event: "e", F: float64(i)}
	}
	epochs[5000].Sec = math.MaxInt64
	epochs[5001].F = math.Inf(1)
	tokyo := time.FixedZone("JST", 9*3600)
	mixed := mixedRows(3*parquetBatchRows, true)
	type usersRow struct {
		User string  `parquet:"user_id"`
		Plan *string `parquet:"plan,optional,dict"`
		Seen string  `parquet:"seen"`
	}
	users := []usersRow{{"u1", ptr("pro"), "2021-05-01"}, {"", nil, "x"}, {"u3", nil, "yesterday"}, {"u4", ptr("free"), "1620000000"}}
	for _, tc := range []struct {
		name     string
		body     []byte
		opt      Options
		evs, bad int
	}{
		{"rich", writeParquet(t, rich), Options{UserCol: "uid", TimeCol: "when", EventCol: "name", Loc: tokyo}, 1, 2},
		{"rich-declared", writeParquet(t, rich), Options{UserCol: "uid", TimeCol: "when", EventCol: "name",
			Schema: map[string]event.Type{"i32": event.TypeString, "f64": event.TypeInt, "f32": event.TypeInt, "s": event.TypeBool}}, 0, 3},
		{"nullable", writeParquet(t, nullable), Options{Loc: tokyo, Schema: map[string]event.Type{"q": event.TypeFloat, "p": event.TypeInt}}, 1, 7},
		{"string-times", writeParquet(t, nullable[:1]), Options{}, 1, 0},
		// Row 5000's seconds overflow; row 5001's f is +Inf (not finite).
		{"epochs", writeParquet(t, epochs, parquet.MaxRowsPerRowGroup(5000)), Options{}, len(epochs) - 2, 2},
		{"float-times", writeParquet(t, epochs, parquet.MaxRowsPerRowGroup(5000)), Options{TimeCol: "f_time"}, len(epochs) - 1, 1},
		{"mixed", writeParquet(t, mixed), Options{}, -1, -1},
		{"mixed-small-pages", writeParquet(t, mixed, parquet.PageBufferSize(512)), Options{}, -1, -1},
		{"mixed-dict-fallback", writeParquet(t, mixed, parquet.PageBufferSize(2048), parquet.DictionaryMaxBytes(300),
			parquet.MaxRowsPerRowGroup(5000)), Options{}, -1, -1},
		{"mixed-v1-pages", writeParquet(t, mixed, parquet.DataPageVersion(1), parquet.PageBufferSize(4096)), Options{}, -1, -1},
		{"mixed-declared", writeParquet(t, mixed), Options{Schema: map[string]event.Type{"n": event.TypeString, "kind": event.TypeInt,
			"free": event.TypeString, "u": event.TypeFloat}}, -1, -1},
		{"users", writeParquet(t, users), Options{Users: true, ImportTime: 99, TimeCol: "seen"}, 2, 2},
		{"users-no-time", writeParquet(t, users), Options{Users: true, ImportTime: 99}, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, bad := sameBothWays(t, tc.body, tc.opt)
			if (tc.evs >= 0 && evs != tc.evs) || (tc.bad >= 0 && bad != tc.bad) || evs == 0 && tc.evs != 0 {
				t.Errorf("%d events and %d bad rows, want %d and %d", evs, bad, tc.evs, tc.bad)
			}
		})
	}
}

func TestParquetDateOutOfRange(t *testing.T) {
	// DATE 200000000 times 86400e6 µs overflows int64; it must be
	// rejected, not wrapped into 1933.
	rows := mixedRows(20, false)
	rows[3].Day = 200_000_000
	rows[4].Day = -2000000
	_, errs := readAll(t, parquetReaderOf(t, writeParquet(t, rows), Options{}))
	if len(errs) != 2 || errs[0].Field != "day" || errs[0].Msg != errTimeRange || errs[0].Pos.Line != 4 || errs[1].Pos.Line != 5 {
		t.Errorf("errors %v", errs)
	}
}

// TestParquetNonFiniteFloats: NaN and ±Inf FLOAT/DOUBLE values are row
// errors naming the field, on both read paths (Spur stores finite floats
// only, as its CSV and NDJSON readers already required).
func TestParquetNonFiniteFloats(t *testing.T) {
	rows := make([]epochRow, 10)
	for i := range rows {
		rows[i] = epochRow{User: "u", Sec: 1620000000 + int64(i), Event: "e", F: float64(i)}
	}
	rows[2].F, rows[5].F, rows[7].F = math.NaN(), math.Inf(-1), math.Inf(1)
	body := writeParquet(t, rows)
	_, errs := readAll(t, parquetReaderOf(t, body, Options{}))
	if len(errs) != 3 {
		t.Fatalf("errors %v", errs)
	}
	for k, line := range []int64{3, 6, 8} {
		if e := errs[k]; e.Field != "f_time" || e.Msg != errNotFinite || e.Pos.Line != line {
			t.Errorf("error %d: %+v, want field f_time, %q, line %d", k, e, errNotFinite, line)
		}
	}
	if evs, bad := sameBothWays(t, body, Options{}); evs != 7 || bad != 3 {
		t.Errorf("%d events and %d bad rows, want 7 and 3", evs, bad)
	}
}

func TestParquetBatchDictCodes(t *testing.T) {
	// Dictionary-coded strings reach the batch as codes into one Dict per
	// column chunk.
	r := parquetReaderOf(t, writeParquet(t, mixedRows(100, false)), Options{})
	defer r.Close()
	var b event.Batch
	if err := r.(ColumnReader).NextBatch(&b); err != nil {
		t.Fatal(err)
	}
	if b.Rows != 100 || b.Event.Dict == nil || len(b.Event.Dict.Strs) != 3 || b.User.Dict == nil {
		t.Fatalf("rows %d, event dict %+v", b.Rows, b.Event.Dict)
	}
	for i := range b.Rows {
		if b.Errs[i] != nil || b.Event.Str(i) != []string{"view", "buy", "cart"}[i%3] {
			t.Fatalf("row %d: event %q, error %v", i, b.Event.Str(i), b.Errs[i])
		}
	}
	if err := r.(ColumnReader).NextBatch(&b); err != io.EOF {
		t.Fatalf("after the last batch: %v", err)
	}
}

func TestParquetNextThenNextBatch(t *testing.T) {
	rows := mixedRows(parquetBatchRows+10, true)
	r := parquetReaderOf(t, writeParquet(t, rows), Options{})
	defer r.Close()
	var ev event.Event
	if err := r.Next(&ev); err != nil {
		t.Fatal(err)
	}
	var b event.Batch
	if err := r.(ColumnReader).NextBatch(&b); err == nil || !strings.Contains(err.Error(), "not yet read by Next") {
		t.Fatalf("NextBatch in the middle of a batch: %v", err)
	}
	for i := 1; i < parquetBatchRows; i++ {
		var re *event.RowError
		if err := r.Next(&ev); err != nil && !errors.As(err, &re) {
			t.Fatal(err)
		}
	}
	if err := r.(ColumnReader).NextBatch(&b); err != nil || b.Rows != 10 || b.Pos.Line != parquetBatchRows+1 {
		t.Fatalf("NextBatch after a whole batch: %v, %d rows at %v", err, b.Rows, b.Pos)
	}
}

func TestParquetBatchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	body := writeParquet(t, mixedRows(40*parquetBatchRows, false), parquet.MaxRowsPerRowGroup(40*parquetBatchRows))
	r := parquetReaderOf(t, body, Options{})
	defer r.Close()
	cr := r.(ColumnReader)
	var b event.Batch
	if err := cr.NextBatch(&b); err != nil {
		t.Fatal(err)
	}
	// Per batch: the strings of each plain string page.
	n := testing.AllocsPerRun(20, func() {
		if err := cr.NextBatch(&b); err != nil {
			t.Fatal(err)
		}
	})
	if n > 16 {
		t.Errorf("%v allocations per batch of %d rows", n, parquetBatchRows)
	}
}
