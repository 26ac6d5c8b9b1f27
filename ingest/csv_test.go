package ingest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
)

// The acceptance case of the issue: a malformed timestamp on line 7 and a
// wrong-typed property on line 9 give row errors for exactly those lines,
// naming the fields, and reading continues past them. The price type is
// declared: inferred from this sample it would be string, since "abc" is
// in the sample (TestCSVInference covers values past the sample).
func TestCSVBadRows(t *testing.T) {
	const in = `user_id,timestamp,event,price,plan
u1,2021-05-01T10:00:00Z,view,10,free
u2,2021-05-01T10:01:00Z,view,11,free
u3,2021-05-01T10:02:00Z,buy,12.5,pro
u1,2021-05-01T10:03:00Z,view,,free
u2,2021-05-01T10:04:00Z,view,13,
u3,2021-13-01T10:05:00Z,view,14,pro
u1,2021-05-01T10:06:00Z,buy,15,pro
u2,2021-05-01T10:07:00Z,view,abc,pro
u3,2021-05-01T10:08:00Z,view,16,pro
`
	opt := Options{Schema: map[string]event.Type{"price": event.TypeFloat}}
	evs, errs := readAll(t, openString(t, in, "bad.csv", opt))
	if len(evs) != 7 {
		t.Errorf("got %d events, want 7", len(evs))
	}
	if len(errs) != 2 {
		t.Fatalf("got %d row errors, want 2: %v", len(errs), errs)
	}
	if e := errs[0]; e.Pos != (event.Pos{File: "bad.csv", Line: 7}) || e.Field != "timestamp" || !strings.Contains(e.Msg, `"2021-13-01T10:05:00Z"`) || !strings.Contains(e.Msg, "month out of range") {
		t.Errorf("first error = %v", e)
	}
	if e := errs[1]; e.Pos.Line != 9 || e.Field != "price" || e.Msg != `expected float, found string "abc"` {
		t.Errorf("second error = %v", e)
	}
	if got := errs[1].Error(); got != `bad.csv:9: field "price": expected float, found string "abc"` {
		t.Errorf("rendered: %s", got)
	}
	last := evs[len(evs)-1]
	if last.UserID != "u3" || last.Pos.Line != 10 || prop(last, "price") != event.Float(16) {
		t.Errorf("last event = %+v", last)
	}
	if v := prop(evs[3], "price"); v.Type != event.TypeNone {
		t.Errorf("empty cell: %v, want not set", v)
	}
	if evs[0].Time != micros(t, "2021-05-01T10:00:00Z") || evs[0].Name != "view" {
		t.Errorf("first event = %+v", evs[0])
	}
}

func TestCSVInference(t *testing.T) {
	var b strings.Builder
	b.WriteString("user_id,timestamp,event,b,i,f,tm,s,zip,empty,mixed,epoch\n")
	for i := range InferRows {
		fmt.Fprintf(&b, "u%d,%d,e,%t,%d,%d.5,2021-05-%02d 10:00:00,x%d,0%d,,%d,%d\n", i, 1620000000+i, i%2 == 0, i-500, i, i%28+1, i, i, i, 1620000000+i)
	}
	// Past the sample: the float column gets an integer (fits), the int
	// column a float (does not fit), the empty column a word (string).
	b.WriteString("u,1620000000,e,true,7.5,8,2021-01-01,s,0,word,x,1620000000\n")
	b.WriteString("u,1620000000,e,false,7,8,2021-01-01,s,0,word,5,1\n")
	r := openString(t, b.String(), "infer.csv", Options{})
	want := []event.PropType{
		{Name: "b", Type: event.TypeBool}, {Name: "i", Type: event.TypeInt}, {Name: "f", Type: event.TypeFloat},
		{Name: "tm", Type: event.TypeTime}, {Name: "s", Type: event.TypeString}, {Name: "zip", Type: event.TypeString},
		{Name: "empty", Type: event.TypeString}, {Name: "mixed", Type: event.TypeInt}, {Name: "epoch", Type: event.TypeInt},
	}
	if got := r.(Typed).PropTypes(); !reflect.DeepEqual(got, want) {
		t.Errorf("types = %v\nwant %v", got, want)
	}
	evs, errs := readAll(t, r)
	if len(evs) != InferRows+1 || len(errs) != 1 {
		t.Fatalf("%d events, %d errors: %v", len(evs), len(errs), errs)
	}
	if e := errs[0]; e.Pos.Line != InferRows+2 || e.Field != "i" || e.Msg != `expected int, found string "7.5"` {
		t.Errorf("error = %v", e)
	}
	last := evs[len(evs)-1]
	if prop(last, "f") != event.Float(8) || prop(last, "empty") != event.String("word") || prop(last, "b") != event.Bool(false) {
		t.Errorf("last = %+v", last.Props)
	}
	if evs[0].Time != 1620000000e6 || prop(evs[0], "tm") != event.Time(micros(t, "2021-05-01T10:00:00Z")) || prop(evs[0], "zip") != event.String("00") {
		t.Errorf("first = %+v", evs[0])
	}
}

func TestCSVDeclaredSchemaAndLocation(t *testing.T) {
	const in = "uid,when,name,n,at\nu1,2021-05-01 09:00:00,e,42,2021-05-01 09:00:00\nu1,2021-05-01 09:00:00,e,x,2021-05-01\n"
	tokyo := time.FixedZone("JST", 9*3600)
	opt := Options{UserCol: "uid", TimeCol: "when", EventCol: "name", Loc: tokyo,
		Schema: map[string]event.Type{"n": event.TypeString, "at": event.TypeTime}}
	r := openString(t, in, "s.csv", opt)
	if got := r.(Typed).PropTypes(); got[0].Type != event.TypeString || got[1].Type != event.TypeTime {
		t.Errorf("types = %v", got)
	}
	evs, errs := readAll(t, r)
	if len(evs) != 2 || len(errs) != 0 {
		t.Fatalf("%d events, errors %v", len(evs), errs)
	}
	want := micros(t, "2021-05-01T00:00:00Z")
	if evs[0].Time != want || prop(evs[0], "at") != event.Time(want) || prop(evs[0], "n") != event.String("42") {
		t.Errorf("event = %+v", evs[0])
	}
	if prop(evs[1], "at") != event.Time(micros(t, "2021-04-30T15:00:00Z")) {
		t.Errorf("date in loc = %v", prop(evs[1], "at"))
	}
}

func TestCSVHeaderErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty CSV file"},
		{"user,timestamp,event\n", `no user id column "user_id" in the CSV header (columns: user, timestamp, event)`},
		{"user_id,ts,event\n", `no timestamp column "timestamp"`},
		{"user_id,timestamp,name\n", `no event name column "event"`},
		{"user_id,timestamp,event,a,a\n", `column "a" appears twice`},
		{"user_id,timestamp,event,,x\n", "column 4 has no name"},
		{"user_id,timestamp,\"event\n", "CSV header"},
	}
	for _, tc := range tests {
		_, err := NewReader(strings.NewReader(tc.in), "h.csv", Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "h.csv") {
			t.Errorf("header %q: error %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestCSVMalformedRows(t *testing.T) {
	const in = "\ufeffuser_id,timestamp,event,note\n" +
		"u1,2021-05-01,e,\"two\nlines\"\n" + // lines 2-3
		"u2,2021-05-01,e\n" + // line 4: too few fields
		"u3,2021-05-01,e,a\"b\n" + // line 5: bare quote
		"\n" + // line 6: blank, skipped
		",2021-05-01,e,x\n" + // line 7: empty user
		"u4,2021-05-01,,x\n" + // line 8: empty event
		"u5,,e,x\n" + // line 9: empty timestamp
		"u6,2021-05-01,e,\"ok\"\n" // line 10
	evs, errs := readAll(t, openString(t, in, "m.csv", Options{}))
	if len(evs) != 2 || evs[0].Pos.Line != 2 || prop(evs[0], "note") != event.String("two\nlines") || evs[1].Pos.Line != 10 {
		t.Errorf("events = %+v", evs)
	}
	want := []struct {
		line  int64
		field string
		msg   string
	}{
		{4, "", "row has 3 fields, the header has 4"},
		{5, "", `bare " in non-quoted-field`},
		{7, "user_id", "empty user id"},
		{8, "event", "empty event name"},
		{9, "timestamp", "empty timestamp"},
	}
	if len(errs) != len(want) {
		t.Fatalf("errors = %v", errs)
	}
	for i, w := range want {
		if e := errs[i]; e.Pos.Line != w.line || e.Field != w.field || !strings.Contains(e.Msg, w.msg) {
			t.Errorf("error %d = %v, want line %d field %q %q", i, e, w.line, w.field, w.msg)
		}
	}
}

func TestCSVUsers(t *testing.T) {
	const in = "user_id,plan,seen\nu1,pro,2021-05-01\nu2,,2021-05-02\n"
	evs, errs := readAll(t, openString(t, in, "users.csv", Options{Users: true, ImportTime: 77}))
	if len(evs) != 2 || len(errs) != 0 {
		t.Fatalf("events %v errors %v", evs, errs)
	}
	if evs[0].Name != "" || evs[0].Time != 77 || prop(evs[0], "plan") != event.String("pro") || prop(evs[0], "seen").Type != event.TypeTime {
		t.Errorf("user row = %+v", evs[0])
	}
	if len(evs[1].Props) != 1 {
		t.Errorf("empty plan should be not set: %+v", evs[1].Props)
	}
	// With a time column, rows take their time from it.
	evs, _ = readAll(t, openString(t, "user_id,timestamp,event\nu1,2021-05-01,x\n", "u.csv", Options{Users: true}))
	if evs[0].Time != micros(t, "2021-05-01") || prop(evs[0], "event") != event.String("x") {
		t.Errorf("users file with time: %+v", evs[0])
	}
}

func TestCSVInsertID(t *testing.T) {
	evs, _ := readAll(t, openString(t, "user_id,timestamp,event,insert_id\nu,1,e,abc\nu,1,e,\n", "i.csv", Options{}))
	if evs[0].InsertID != "abc" || evs[1].InsertID != "" || len(evs[0].Props) != 0 {
		t.Errorf("events = %+v", evs)
	}
	// An insert id that is not UTF-8 is a row error, as in JSON and
	// Parquet: stored, it could not be exported and read back.
	evs, errs := readAll(t, openString(t, "user_id,timestamp,event,insert_id\nu,1,e,a\xe9\nu,1,e,b\n", "i.csv", Options{}))
	if len(evs) != 1 || evs[0].InsertID != "b" || len(errs) != 1 || errs[0].Pos.Line != 2 || errs[0].Field != "insert_id" || errs[0].Msg != "value is not valid UTF-8" {
		t.Errorf("events %+v, errors %v", evs, errs)
	}
}

func TestCSVRowErrorIsRecoverable(t *testing.T) {
	r := openString(t, "user_id,timestamp,event\nu,bad,e\nu,1,e\n", "r.csv", Options{})
	defer r.Close()
	var ev event.Event
	var re *event.RowError
	if err := r.Next(&ev); !errors.As(err, &re) {
		t.Fatalf("want a RowError, got %v", err)
	}
	if err := r.Next(&ev); err != nil || ev.Time != 1e6 {
		t.Fatalf("after a row error: %v %+v", err, ev)
	}
}
