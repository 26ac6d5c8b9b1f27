package ingest

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"

	"github.com/spurdb/spur/event"
)

// simpleRow is the canonical events schema with a TIMESTAMP(MILLIS) time.
type simpleRow struct {
	UserID string `parquet:"user_id"`
	Ts     int64  `parquet:"timestamp,timestamp(millisecond)"`
	Event  string `parquet:"event,dict"`
	N      int64  `parquet:"n"`
}

// writeParquet encodes rows into a Parquet file body.
func writeParquet[T any](t testing.TB, rows []T, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, opts...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func parquetReaderOf(t testing.TB, body []byte, opt Options) Reader {
	t.Helper()
	opt.Format = FormatParquet
	r, err := NewReader(bytes.NewReader(body), "t.parquet", opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type richRow struct {
	UID    int64            `parquet:"uid"`
	When   int64            `parquet:"when,timestamp(nanosecond)"`
	Name   string           `parquet:"name,dict"`
	Insert *string          `parquet:"insert_id,optional"`
	B      *bool            `parquet:"b,optional"`
	I32    int32            `parquet:"i32"`
	U64    uint64           `parquet:"u64"`
	F32    float32          `parquet:"f32"`
	F64    *float64         `parquet:"f64,optional"`
	S      *string          `parquet:"s,optional"`
	D      int32            `parquet:"d,date"`
	TSM    *int64           `parquet:"tsm,optional,timestamp(millisecond)"`
	Dec    int64            `parquet:"dec,decimal(2:10)"`
	UUID   [16]byte         `parquet:"uuid,uuid"`
	Local  int64            `parquet:"local,timestamp(microsecond:local)"`
	I96    deprecated.Int96 `parquet:"i96"`
}

func ptr[T any](v T) *T { return &v }

func TestParquetTypes(t *testing.T) {
	day := time.Date(2021, 5, 1, 0, 0, 0, 0, time.UTC)
	rows := []richRow{
		{UID: 42, When: day.UnixNano() + 1999, Name: "view", Insert: ptr("ins"), B: ptr(true), I32: -7, U64: 1 << 40, F32: 1.5,
			F64: ptr(2.25), S: ptr("café"), D: int32(day.Unix() / 86400), TSM: ptr(day.UnixMilli()), Dec: 12345,
			UUID: [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}, Local: day.UnixMicro(),
			I96: deprecated.Int96{uint32(uint64(3600e9) & 0xffffffff), uint32(uint64(3600e9) >> 32), 2440588 + uint32(day.Unix()/86400)}},
		{UID: -1, When: day.UnixNano() - 1, Name: "buy", U64: math.MaxUint64, I96: deprecated.Int96{0, 0, 2440588}},
	}
	tokyo := time.FixedZone("JST", 9*3600)
	opt := Options{UserCol: "uid", TimeCol: "when", EventCol: "name", Loc: tokyo}
	r := parquetReaderOf(t, writeParquet(t, rows), opt)
	types := map[string]event.Type{}
	for _, p := range r.(Typed).PropTypes() {
		types[p.Name] = p.Type
	}
	wantTypes := map[string]event.Type{"b": event.TypeBool, "i32": event.TypeInt, "u64": event.TypeInt, "f32": event.TypeFloat,
		"f64": event.TypeFloat, "s": event.TypeString, "d": event.TypeTime, "tsm": event.TypeTime, "dec": event.TypeFloat,
		"uuid": event.TypeString, "local": event.TypeTime, "i96": event.TypeTime}
	for k, v := range wantTypes {
		if types[k] != v {
			t.Errorf("column %s: type %s, want %s (all: %v)", k, types[k], v, types)
		}
	}
	evs, errs := readAll(t, r)
	if len(evs) != 1 || len(errs) != 1 {
		t.Fatalf("events %+v errors %v", evs, errs)
	}
	e := evs[0]
	if e.UserID != "42" || e.Name != "view" || e.InsertID != "ins" || e.Time != day.UnixMicro()+1 || e.Pos.Line != 1 {
		t.Errorf("event = %+v", e)
	}
	want := map[string]event.Value{
		"b": event.Bool(true), "i32": event.Int(-7), "u64": event.Int(1 << 40), "f32": event.Float(1.5), "f64": event.Float(2.25),
		"s": event.String("café"), "d": event.Time(day.UnixMicro()), "tsm": event.Time(day.UnixMicro()), "dec": event.Float(123.45),
		"uuid": event.String("12345678-9abc-def0-0102-030405060708"), "local": event.Time(day.Add(-9 * time.Hour).UnixMicro()),
		"i96": event.Time(day.Add(time.Hour).UnixMicro()),
	}
	for k, v := range want {
		if got := prop(e, k); got != v {
			t.Errorf("%s = %+v, want %+v", k, got, v)
		}
	}
	// Row 2: u64 out of the int64 range.
	if re := errs[0]; re.Pos.Line != 2 || re.Field != "u64" || !strings.Contains(re.Msg, "out of the int64 range") {
		t.Errorf("row error = %v", re)
	}
}

type nullableRow struct {
	User  *string  `parquet:"user_id,optional"`
	Ts    *string  `parquet:"timestamp,optional"`
	Event *string  `parquet:"event,optional"`
	P     *float64 `parquet:"p,optional"`
	Q     *int64   `parquet:"q,optional"`
}

func TestParquetNullsAndStringTimes(t *testing.T) {
	rows := []nullableRow{
		{User: ptr("u1"), Ts: ptr("2021-05-01 09:00:00"), Event: ptr("e"), P: ptr(1.5)},
		{Ts: ptr("2021-05-01"), Event: ptr("e")},
		{User: ptr("u3"), Event: ptr("e")},
		{User: ptr("u4"), Ts: ptr("nope"), Event: ptr("e")},
		{User: ptr("u5"), Ts: ptr("2021-05-01"), Event: ptr("")},
		{User: ptr("u6"), Ts: ptr("2021-05-01"), Event: ptr("e"), Q: ptr(int64(3))},
	}
	tokyo := time.FixedZone("JST", 9*3600)
	evs, errs := readAll(t, parquetReaderOf(t, writeParquet(t, rows), Options{Loc: tokyo, Schema: map[string]event.Type{"q": event.TypeFloat}}))
	if len(evs) != 2 || len(errs) != 4 {
		t.Fatalf("events %+v errors %v", evs, errs)
	}
	if e := evs[0]; e.Time != micros(t, "2021-05-01T00:00:00Z") || len(e.Props) != 1 || prop(e, "p") != event.Float(1.5) {
		t.Errorf("event 0 = %+v", e)
	}
	if e := evs[1]; e.Pos.Line != 6 || len(e.Props) != 1 || prop(e, "q") != event.Float(3) {
		t.Errorf("event 1 = %+v (declared float)", e)
	}
	want := []struct {
		line       int64
		field, msg string
	}{{2, "user_id", "missing user id"}, {3, "timestamp", "missing timestamp"}, {4, "timestamp", `invalid timestamp "nope"`}, {5, "event", "empty event name"}}
	for i, w := range want {
		if e := errs[i]; e.Pos.Line != w.line || e.Field != w.field || !strings.Contains(e.Msg, w.msg) {
			t.Errorf("error %d = %v, want %+v", i, e, w)
		}
	}
}

type epochRow struct {
	User  string  `parquet:"user_id"`
	Sec   int64   `parquet:"timestamp"`
	Event string  `parquet:"event"`
	F     float64 `parquet:"f_time"`
}

func TestParquetEpochAndBatches(t *testing.T) {
	// More rows than a batch, in several row groups, and epoch seconds.
	const n = 3*parquetBatchRows + 17
	rows := make([]epochRow, n)
	for i := range rows {
		rows[i] = epochRow{User: "u" + string(rune('a'+i%26)), Sec: 1620000000 + int64(i), Event: "e", F: float64(i)}
	}
	body := writeParquet(t, rows, parquet.MaxRowsPerRowGroup(5000))
	if f, err := parquet.OpenFile(bytes.NewReader(body), int64(len(body))); err != nil || len(f.RowGroups()) < 2 {
		t.Fatalf("want several row groups: %v", err)
	}
	evs, errs := readAll(t, parquetReaderOf(t, body, Options{}))
	if len(evs) != n || len(errs) != 0 {
		t.Fatalf("%d events, errors %v", len(evs), errs)
	}
	for i, e := range evs {
		if e.Time != (1620000000+int64(i))*1e6 || e.Pos.Line != int64(i+1) || e.UserID != rows[i].User || prop(e, "f_time") != event.Float(float64(i)) {
			t.Fatalf("row %d = %+v", i, e)
		}
	}
	// The same file as a time column of floats.
	evs, _ = readAll(t, parquetReaderOf(t, body, Options{TimeCol: "f_time"}))
	if evs[5].Time != 5e6 || prop(evs[5], "timestamp") != event.Int(1620000005) {
		t.Errorf("float time = %+v", evs[5])
	}
}

type nestedRow struct {
	User  string `parquet:"user_id"`
	Ts    int64  `parquet:"timestamp"`
	Event string `parquet:"event"`
	Inner struct {
		A int64 `parquet:"a"`
	} `parquet:"inner"`
}

type repeatedRow struct {
	User  string  `parquet:"user_id"`
	Ts    int64   `parquet:"timestamp"`
	Event string  `parquet:"event"`
	Tags  []int64 `parquet:"tags"`
}

type badTypesRow struct {
	User  float64 `parquet:"user_id"`
	Ts    int64   `parquet:"timestamp"`
	Event string  `parquet:"event"`
}

func TestParquetSchemaErrors(t *testing.T) {
	tests := []struct {
		body []byte
		opt  Options
		want string
	}{
		{writeParquet(t, []nestedRow{{}}), Options{}, `column "inner": nested groups are not supported`},
		{writeParquet(t, []repeatedRow{{}}), Options{}, `column "tags"`},
		{writeParquet(t, []badTypesRow{{}}), Options{}, `column "user_id": want a string or integer column`},
		{writeParquet(t, []simpleRow{{}}), Options{UserCol: "uid"}, `no user id column "uid" in the Parquet schema (columns: [user_id timestamp event n])`},
		{writeParquet(t, []simpleRow{{}}), Options{EventCol: "n"}, `column "n": want a string column`},
		{[]byte("PAR1 not really parquet PAR1"), Options{}, "t.parquet"},
		{[]byte("x"), Options{}, "t.parquet"},
		// A trailer claiming a 3.6 GB footer in an 86-byte file: rejected
		// before parquet-go would allocate the footer buffer.
		{append([]byte("PAR1 some bytes of a corrupt file..."), 0x15, 0x20, 0x15, 0xd9, 'P', 'A', 'R', '1'), Options{}, "footer length 3642040341 exceeds the file size"},
	}
	for i, tc := range tests {
		tc.opt.Format = FormatParquet
		_, err := NewReader(bytes.NewReader(tc.body), "t.parquet", tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("case %d: error %v, want %q", i, err, tc.want)
		}
	}
}

func TestParquetUsers(t *testing.T) {
	type userRow struct {
		User string `parquet:"user_id"`
		Plan string `parquet:"plan"`
	}
	evs, errs := readAll(t, parquetReaderOf(t, writeParquet(t, []userRow{{"u1", "pro"}}), Options{Users: true, ImportTime: 9}))
	if len(evs) != 1 || len(errs) != 0 || evs[0].Time != 9 || evs[0].Name != "" || prop(evs[0], "plan") != event.String("pro") {
		t.Errorf("users = %+v %v", evs, errs)
	}
}

func TestParquetOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.parquet")
	body := writeParquet(t, []simpleRow{{"u1", 1619827200000, "view", 1}})
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := r.(Progresser)
	evs, _ := readAll(t, r)
	if len(evs) != 1 || p.Size() != int64(len(body)) || p.BytesRead() == 0 {
		t.Errorf("events %v, size %d, read %d", evs, p.Size(), p.BytesRead())
	}
}

func TestParquetAllocs(t *testing.T) {
	rows := make([]simpleRow, 20000)
	for i := range rows {
		rows[i] = simpleRow{UserID: "user", Ts: 1619827200000 + int64(i), Event: "view", N: int64(i)}
	}
	r := parquetReaderOf(t, writeParquet(t, rows), Options{})
	defer r.Close()
	var ev event.Event
	if err := r.Next(&ev); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(10000, func() {
		if err := r.Next(&ev); err != nil {
			t.Fatal(err)
		}
	})
	if n > 0.05 {
		t.Errorf("%v allocs per row", n)
	}
}
