package ingest

import (
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
)

func TestNDJSONShapes(t *testing.T) {
	const in = `{"user_id":"u1","timestamp":"2021-05-01T10:00:00Z","event":"view","insert_id":"a1","properties":{"price":4.5,"n":3,"ok":true,"brand":"acme","gone":null}}
{"user_id": 42, "timestamp": 1620000000000, "event": "buy", "price": 10, "s": "caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \n", "properties": null}

  {"event":"view","user_id":"u2","timestamp":1620000000.5,"properties":{},"x":-0.0,"e":1e2}
{"user_id":"u3","timestamp":"2021-05-01","event":"v","insert_id":7,"properties":"flat"}
`
	evs, errs := readAll(t, openString(t, in, "a.ndjson", Options{}))
	if len(errs) != 0 || len(evs) != 4 {
		t.Fatalf("%d events, errors %v", len(evs), errs)
	}
	e := evs[0]
	if e.UserID != "u1" || e.Name != "view" || e.InsertID != "a1" || e.Time != micros(t, "2021-05-01T10:00:00Z") || e.Pos.Line != 1 {
		t.Errorf("event 0 = %+v", e)
	}
	if prop(e, "price") != event.Float(4.5) || prop(e, "n") != event.Int(3) || prop(e, "ok") != event.Bool(true) ||
		prop(e, "brand") != event.String("acme") || len(e.Props) != 4 {
		t.Errorf("event 0 props = %+v", e.Props)
	}
	e = evs[1]
	if e.UserID != "42" || e.Time != 1620000000000e3 || prop(e, "price") != event.Int(10) || prop(e, "s") != event.String("café 😀 \"q\" \\ / \n") {
		t.Errorf("event 1 = %+v", e)
	}
	e = evs[2]
	if e.Pos.Line != 4 || e.Time != 1620000000500000 || prop(e, "x") != event.Float(0) || prop(e, "e") != event.Float(100) {
		t.Errorf("event 2 = %+v", e)
	}
	if e = evs[3]; e.InsertID != "7" || prop(e, "properties") != event.String("flat") {
		t.Errorf("event 3 = %+v", e)
	}
}

func TestNDJSONRowErrors(t *testing.T) {
	lines := []struct{ in, field, msg string }{
		{`{"user_id":"u","timestamp":1,"event":"e","p":{"a":1}}`, "p", "nested objects and arrays are not supported"},
		{`{"user_id":"u","timestamp":1,"event":"e","properties":{"p":[1]}}`, "p", "nested objects and arrays"},
		{`{"timestamp":1,"event":"e"}`, "user_id", "missing user id"},
		{`{"user_id":null,"timestamp":1,"event":"e"}`, "user_id", "missing user id"},
		{`{"user_id":"","timestamp":1,"event":"e"}`, "user_id", "empty user id"},
		{`{"user_id":1.5,"timestamp":1,"event":"e"}`, "user_id", "expected a string or an integer"},
		{`{"user_id":"u","timestamp":1}`, "event", "missing event name"},
		{`{"user_id":"u","timestamp":1,"event":3}`, "event", "expected a string, found a number"},
		{`{"user_id":"u","event":"e"}`, "timestamp", "missing timestamp"},
		{`{"user_id":"u","timestamp":"yesterday","event":"e"}`, "timestamp", `invalid timestamp "yesterday"`},
		{`{"user_id":"u","timestamp":true,"event":"e"}`, "timestamp", "found a boolean"},
		{`{"user_id":"u","timestamp":1659304800025000000,"event":"e"}`, "timestamp", "out of range"},
		{`{"user_id":"u","user_id":"v","timestamp":1,"event":"e"}`, "user_id", "given twice"},
		{`{"user_id":"u","timestamp":1,"timestamp":"2021-01-01","event":"e"}`, "timestamp", "given twice"},
		{`{"user_id":"u","timestamp":1,"event":"e","a":1,"properties":{"a":2}}`, "a", "property given twice"},
		{`{"user_id":"u","timestamp":1,"event":"e","n":99999999999999999999}`, "n", "out of the int64 range"},
		{`{"user_id":"u","timestamp":1,"event":"e","n":1e999}`, "n", "out of the float64 range"},
		{`{"user_id":"u","timestamp":1,"event":"e",}`, "", "invalid JSON at column 42: expected a string"},
		{`{"user_id":"u","timestamp":1,"event":"e"} x`, "", "unexpected data after the JSON value"},
		{`["u"]`, "", "expected a JSON object"},
		{`{"user_id":"u` + "\xff" + `","timestamp":1,"event":"e"}`, "", "invalid UTF-8"},
		{`{"user_id":"u` + "\t" + `","timestamp":1,"event":"e"}`, "", "control character"},
		{`{"user_id":"u\x","timestamp":1,"event":"e"}`, "", "invalid escape"},
		{`{"user_id":"u","timestamp":01,"event":"e"}`, "", "expected ',' or '}'"},
		{`{"user_id":"u","timestamp":1,"event":"e","b":tru}`, "", "invalid literal"},
		{`{"user_id":"u","timestamp":1,"event":"e","b":-}`, "", "invalid number"},
		{`{"user_id":"u","timestamp":1,"event":"e"`, "", "expected ',' or '}'"},
		{`{"user_id":"u`, "", "unterminated string"},
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.in + "\n")
	}
	b.WriteString(`{"user_id":"ok","timestamp":1,"event":"e"}` + "\n")
	evs, errs := readAll(t, openString(t, b.String(), "e.jsonl", Options{}))
	if len(evs) != 1 || evs[0].UserID != "ok" || evs[0].Pos.Line != int64(len(lines)+1) {
		t.Errorf("events = %+v", evs)
	}
	if len(errs) != len(lines) {
		t.Fatalf("%d errors, want %d: %v", len(errs), len(lines), errs)
	}
	for i, l := range lines {
		e := errs[i]
		if e.Pos.Line != int64(i+1) || e.Field != l.field || !strings.Contains(e.Msg, l.msg) {
			t.Errorf("line %d %s: error %v, want field %q %q", i+1, l.in, e, l.field, l.msg)
		}
	}
}

func TestNDJSONOptions(t *testing.T) {
	const in = `{"uid":"u1","ts":"2021-05-01 09:00:00","name":"v","n":"42","at":"2021-05-01 09:00:00","f":3}
{"uid":"u1","ts":"2021-05-01 09:00:00","name":"v","n":"x"}
`
	tokyo := time.FixedZone("JST", 9*3600)
	opt := Options{UserCol: "uid", TimeCol: "ts", EventCol: "name", Loc: tokyo,
		Schema: map[string]event.Type{"n": event.TypeInt, "at": event.TypeTime, "f": event.TypeFloat}}
	evs, errs := readAll(t, openString(t, in, "o.ndjson", opt))
	if len(evs) != 1 || len(errs) != 1 {
		t.Fatalf("events %v errors %v", evs, errs)
	}
	want := micros(t, "2021-05-01T00:00:00Z")
	if e := evs[0]; e.Time != want || prop(e, "n") != event.Int(42) || prop(e, "at") != event.Time(want) || prop(e, "f") != event.Float(3) {
		t.Errorf("event = %+v", e)
	}
	if e := errs[0]; e.Field != "n" || e.Msg != `expected int, found string "x"` {
		t.Errorf("error = %v", e)
	}
}

func TestNDJSONUsers(t *testing.T) {
	const in = `{"user_id":"u1","event":"not an event here","plan":"pro"}
{"user_id":"u2","timestamp":"2021-05-01","properties":{"plan":"free"}}
`
	evs, errs := readAll(t, openString(t, in, "users.ndjson", Options{Users: true, ImportTime: 5}))
	if len(evs) != 2 || len(errs) != 0 {
		t.Fatalf("events %v errors %v", evs, errs)
	}
	if e := evs[0]; e.Name != "" || e.Time != 5 || prop(e, "event") != event.String("not an event here") {
		t.Errorf("user 0 = %+v", e)
	}
	if e := evs[1]; e.Time != micros(t, "2021-05-01") || prop(e, "plan") != event.String("free") {
		t.Errorf("user 1 = %+v", e)
	}
}

func TestNDJSONLongLine(t *testing.T) {
	long := strings.Repeat("x", 600<<10) // longer than the line buffer
	in := `{"user_id":"u","timestamp":1,"event":"e","s":"` + long + `"}` + "\r\n" + `{"user_id":"v","timestamp":1,"event":"e"}`
	evs, errs := readAll(t, openString(t, in, "l.ndjson", Options{MaxPropertyBytes: -1}))
	if len(evs) != 2 || len(errs) != 0 || prop(evs[0], "s").Str != long || evs[1].Pos.Line != 2 {
		t.Fatalf("%d events, errors %v", len(evs), errs)
	}
}

func TestNDJSONAllocs(t *testing.T) {
	line := `{"user_id":"user-123","timestamp":"2021-05-01T10:00:00.123Z","event":"view","properties":{"price":4.5,"n":3,"ok":true,"brand":"acme"}}` + "\n"
	in := strings.Repeat(line, 300)
	r := openString(t, in, "a.ndjson", Options{})
	defer r.Close()
	var ev event.Event
	for range 10 { // warm up the key cache and buffers
		if err := r.Next(&ev); err != nil {
			t.Fatal(err)
		}
	}
	n := testing.AllocsPerRun(200, func() {
		if err := r.Next(&ev); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Errorf("%v allocs per row, want ≤ 1 (the row's strings)", n)
	}
}
