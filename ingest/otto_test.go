package ingest

import (
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
)

func TestOTTOExcerpt(t *testing.T) {
	r, err := Open("testdata/otto_train.jsonl", Options{Format: FormatOTTO})
	if err != nil {
		t.Fatal(err)
	}
	evs, errs := readAll(t, r)
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	counts := map[string]int{}
	for _, e := range evs {
		counts[e.Name]++
	}
	if len(evs) != 51 || counts["clicks"] != 45 || counts["carts"] != 5 || counts["orders"] != 1 {
		t.Errorf("%d events, counts %v; want 51: 45 clicks, 5 carts, 1 order", len(evs), counts)
	}
	// First line: {"session":4,"events":[{"aid":613619,"ts":1659304800119,"type":"clicks"},…
	e := evs[0]
	if e.UserID != "4" || e.Time != 1659304800119e3 || e.Name != "clicks" || e.Pos.Line != 1 ||
		len(e.Props) != 1 || e.Props[0] != (event.Prop{Name: OTTOAidProp, Value: event.Int(613619)}) {
		t.Errorf("first event = %+v", e)
	}
	if last := evs[len(evs)-1]; last.UserID != "12899770" || last.Pos.Line != 6 {
		t.Errorf("last event = %+v", last)
	}
}

func TestOTTOErrors(t *testing.T) {
	lines := []struct{ in, field, msg string }{
		{`{"events":[]}`, "session", "missing session id"},
		{`{"session":1}`, "events", "missing events array"},
		{`{"session":"1","events":[]}`, "session", "expected an integer"},
		{`{"session":1.5,"events":[]}`, "session", "expected an integer, found 1.5"},
		{`{"session":1,"events":{}}`, "events", "expected an array"},
		{`{"session":1,"events":[1]}`, "events", "expected an object"},
		{`{"session":1,"events":[{"aid":1,"ts":1659304800119}]}`, "type", "missing event type"},
		{`{"session":1,"events":[{"aid":1,"type":"clicks"}]}`, "ts", "missing timestamp"},
		{`{"session":1,"events":[{"ts":1659304800119,"type":"clicks"}]}`, "aid", "missing article id"},
		{`{"session":1,"events":[{"aid":1,"ts":1659304800119,"type":""}]}`, "type", "empty event name"},
		{`{"session":1,"events":[{"aid":1,"ts":1659304800119,"type":3}]}`, "type", "expected a string"},
		{`{"session":1,"events":[{"aid":1,"ts":1659304800119000000,"type":"clicks"}]}`, "ts", "out of range"},
		{`{"session":1,"events":[{"aid":1,"ts":1659304800119,"type":"clicks"}`, "", "expected ',' or ']'"},
		{`{"session":1,"events":[]} {}`, "", "unexpected data"},
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.in + "\n")
	}
	// Unknown keys (nested values included) are skipped; "ts" in seconds
	// follows the epoch magnitude rule.
	b.WriteString(`{"extra":{"a":[1,{"b":null}]},"session":7,"events":[{"aid":2,"ts":1659304800,"type":"carts","x":"y"},{"type":"orders","ts":1659304800000,"aid":3}]}` + "\n")
	evs, errs := readAll(t, openString(t, b.String(), "o.jsonl", Options{Format: FormatOTTO}))
	if len(errs) != len(lines) {
		t.Fatalf("%d errors, want %d: %v", len(errs), len(lines), errs)
	}
	for i, l := range lines {
		if e := errs[i]; e.Pos.Line != int64(i+1) || e.Field != l.field || !strings.Contains(e.Msg, l.msg) {
			t.Errorf("line %d %s: error %v, want field %q %q", i+1, l.in, e, l.field, l.msg)
		}
	}
	if len(evs) != 2 || evs[0].UserID != "7" || evs[0].Name != "carts" || evs[0].Time != 1659304800e6 ||
		evs[1].Name != "orders" || evs[1].Time != 1659304800e6 || evs[1].Props[0].Value != event.Int(3) || evs[1].Pos.Line != int64(len(lines)+1) {
		t.Errorf("events = %+v", evs)
	}
}

func TestOTTOUsersRejected(t *testing.T) {
	if _, err := NewReader(strings.NewReader(""), "x.jsonl", Options{Format: FormatOTTO, Users: true}); err == nil {
		t.Errorf("otto users file accepted")
	}
}
