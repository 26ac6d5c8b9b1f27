package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
)

// now is the receive time of the tests: 2026-11-24T09:30:00Z.
const now = int64(1795512600) * 1e6

// eventsOpt are the default options of the tests (24 h into the future).
func eventsOpt(ndjson bool) EventsOptions {
	return EventsOptions{NDJSON: ndjson, Now: now, MaxFuture: 24 * 3600 * 1e6}
}

func parseEvents(t testing.TB, body string, opt EventsOptions) (*EventsBatch, error) {
	t.Helper()
	return NewEventsParser().Parse(context.Background(), strings.NewReader(body), opt)
}

// parseOne parses body as a one-event array and as one NDJSON line, checks
// both agree, and returns the event or its rejection.
func parseOne(t *testing.T, obj string) (event.Event, []UserProps, *Rejection) {
	t.Helper()
	arr, err := parseEvents(t, "["+obj+"]", eventsOpt(false))
	if err != nil {
		t.Fatalf("array %s: %v", obj, err)
	}
	nd, err := parseEvents(t, strings.ReplaceAll(obj, "\n", " ")+"\n", eventsOpt(true))
	if err != nil {
		t.Fatalf("ndjson %s: %v", obj, err)
	}
	if arr.Total != 1 || nd.Total != 1 || len(arr.Events) != len(nd.Events) || len(arr.Rejected) != len(nd.Rejected) {
		t.Fatalf("%s: array %+v, ndjson %+v", obj, arr, nd)
	}
	if len(arr.Rejected) == 1 {
		if arr.Rejected[0] != nd.Rejected[0] {
			t.Fatalf("%s: array rejects %+v, ndjson %+v", obj, arr.Rejected[0], nd.Rejected[0])
		}
		return event.Event{}, nil, &arr.Rejected[0]
	}
	if fmt.Sprint(arr.Events[0]) != fmt.Sprint(nd.Events[0]) || fmt.Sprint(arr.Users) != fmt.Sprint(nd.Users) {
		t.Fatalf("%s: array %+v %+v, ndjson %+v %+v", obj, arr.Events[0], arr.Users, nd.Events[0], nd.Users)
	}
	return arr.Events[0], arr.Users, nil
}

func TestEventsFieldRules(t *testing.T) {
	ok := func(obj string, check func(event.Event, []UserProps) string) {
		t.Helper()
		ev, us, rej := parseOne(t, obj)
		if rej != nil {
			t.Errorf("%s: rejected: %+v", obj, *rej)
			return
		}
		if err := event.ValidateEvent(&ev); err != nil {
			t.Errorf("%s: invalid event accepted: %v", obj, err)
		}
		if msg := check(ev, us); msg != "" {
			t.Errorf("%s: %s (event %+v, users %+v)", obj, msg, ev, us)
		}
	}
	bad := func(obj, field, msg string) {
		t.Helper()
		_, _, rej := parseOne(t, obj)
		switch {
		case rej == nil:
			t.Errorf("%s: accepted, want a rejection of %q", obj, field)
		case rej.Field != field || !strings.Contains(rej.Message, msg) || rej.Index != 0:
			t.Errorf("%s: rejection %+v, want field %q and a message with %q", obj, *rej, field, msg)
		}
	}
	is := func(got, want any) string {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Sprintf("got %v, want %v", got, want)
		}
		return ""
	}

	// The full shape of docs/ingest.md §1.
	ok(`{"user_id": "u42", "event": "purchase", "timestamp": "2026-11-24T09:30:00.123Z",
	   "insert_id": "9f1c", "properties": {"price": 12.5, "plan": "pro", "n": 3, "vip": true, "gone": null},
	   "user_properties": {"country": "KR"}, "user_properties_once": {"first_seen_plan": "free"}}`,
		func(ev event.Event, us []UserProps) string {
			switch {
			case ev.UserID != "u42" || ev.Name != "purchase" || ev.InsertID != "9f1c":
				return "named fields"
			case ev.Time != now+123_000:
				return is(ev.Time, now+123_000)
			case len(ev.Props) != 4:
				return "want 4 properties (null is not set)"
			case prop(ev, "price") != event.Float(12.5) || prop(ev, "plan") != event.String("pro") ||
				prop(ev, "n") != event.Int(3) || prop(ev, "vip") != event.Bool(true):
				return "property values"
			case len(us) != 2 || us[0].Once || !us[1].Once || us[0].Event != 0 || us[1].Event != 0:
				return "user writes"
			case us[0].Props[0] != (event.Prop{Name: "country", Value: event.String("KR")}):
				return is(us[0].Props, "country KR")
			case us[1].Props[0] != (event.Prop{Name: "first_seen_plan", Value: event.String("free")}):
				return is(us[1].Props, "first_seen_plan free")
			}
			return ""
		})
	// Timestamps: absent or null is the receive time; epoch s, ms, µs by
	// magnitude; fractions floored; offsets; no offset is UTC.
	for ts, want := range map[string]int64{
		`null`:                             now,
		`1795512600`:                       now,
		`1795512600123`:                    now + 123_000,
		`1795512600123456`:                 now + 123_456,
		`1795512600.5`:                     now + 500_000,
		`"2026-11-24T18:30:00+09:00"`:      now,
		`"2026-11-24T09:30:00"`:            now,
		`"2026-11-24 09:30:00.000001"`:     now + 1,
		`"1795512600"`:                     now,
		`"1990-01-01T00:00:00Z"`:           631152000 * 1e6, // back-fill of any age
		`"2026-11-25T09:29:59Z"`:           now + 86_399e6,  // just within 24 h
		`"2026-11-24T09:30:00.123456789Z"`: now + 123_456,
	} {
		ok(`{"user_id": "u", "event": "e", "timestamp": `+ts+`}`, func(ev event.Event, _ []UserProps) string { return is(ev.Time, want) })
	}
	ok(`{"user_id": "u", "event": "e"}`, func(ev event.Event, _ []UserProps) string { return is(ev.Time, now) })
	// user_id and insert_id may be integer literals; "" insert id is none.
	ok(`{"user_id": 42, "event": "e", "insert_id": 7}`, func(ev event.Event, _ []UserProps) string {
		return is(ev.UserID+"/"+ev.InsertID, "42/7")
	})
	ok(`{"user_id": "u", "event": "e", "insert_id": ""}`, func(ev event.Event, _ []UserProps) string { return is(ev.InsertID, "") })
	// Arrays and objects are kept as compact JSON text; escapes decoded.
	ok(`{"user_id": "u\u00e9", "event": "e\n", "properties": {"tags": [ "a", {"b" : "x y"} ], "o": {}, "s": "q\"\\"}}`,
		func(ev event.Event, _ []UserProps) string {
			return is(ev.UserID+"|"+ev.Name+"|"+prop(ev, "tags").Str+"|"+prop(ev, "o").Str+"|"+prop(ev, "s").Str,
				"ué|e\n|[\"a\",{\"b\":\"x y\"}]|{}|q\"\\")
		})
	// Empty or all-null user property objects make no write; null objects
	// are none.
	ok(`{"user_id": "u", "event": "e", "properties": null, "user_properties": {}, "user_properties_once": {"a": null}}`,
		func(ev event.Event, us []UserProps) string { return is(len(ev.Props)+len(us), 0) })
	// Names beginning with $ are ordinary (docs/ingest.md §1: PostHog's $browser).
	ok(`{"user_id": "u", "event": "e", "properties": {"$browser": "Firefox"}, "user_properties_once": {"$x": 1}}`,
		func(ev event.Event, us []UserProps) string {
			return is([]any{prop(ev, "$browser"), len(us)}, []any{event.String("Firefox"), 1})
		})
	ok(`{"user_id": "u", "event": "e", "properties": {"big": -9223372036854775808, "f": 1e300, "z": -0.0}}`,
		func(ev event.Event, _ []UserProps) string {
			return is([]event.Value{prop(ev, "big"), prop(ev, "f")}, []event.Value{event.Int(-1 << 63), event.Float(1e300)})
		})

	bad(`{"event": "e"}`, "user_id", "missing user id")
	bad(`{"user_id": null, "event": "e"}`, "user_id", "missing user id")
	bad(`{"user_id": "", "event": "e"}`, "user_id", "empty user id")
	bad(`{"user_id": "`+strings.Repeat("x", 257)+`", "event": "e"}`, "user_id", "257 bytes long")
	bad(`{"user_id": 1.5, "event": "e"}`, "user_id", "found a number with a fraction")
	bad(`{"user_id": true, "event": "e"}`, "user_id", "expected a string, found a boolean")
	bad(`{"user_id": {"a": 1}, "event": "e"}`, "user_id", "found an object")
	bad(`{"user_id": "u"}`, "event", "missing event name")
	bad(`{"user_id": "u", "event": 3}`, "event", "expected a string, found a number")
	bad(`{"user_id": "u", "event": ""}`, "event", "empty event name")
	bad(`{"user_id": "u", "event": "e", "timestamp": "yesterday"}`, "timestamp", "want RFC 3339")
	bad(`{"user_id": "u", "event": "e", "timestamp": true}`, "timestamp", "found a boolean")
	bad(`{"user_id": "u", "event": "e", "timestamp": 1e30}`, "timestamp", "out of range")
	bad(`{"user_id": "u", "event": "e", "timestamp": "2026-11-25T09:30:00.000001Z"}`, "timestamp", "more than 24h0m0s after the server's clock")
	bad(`{"user_id": "u", "event": "e", "timestamp": 1895512600}`, "timestamp", "events from the future are refused")
	bad(`{"user_id": "u", "event": "e", "insert_id": [1]}`, "insert_id", "found an array")
	bad(`{"user_id": "u", "event": "e", "insert_id": "`+strings.Repeat("i", 64<<10+1)+`"}`, "insert_id", "over the limit of 65536 bytes")
	bad(`{"user_id": "u", "event": "e", "userId": "v"}`, "userId", "unknown field")
	bad(`{"user_id": "u", "event": "e", "price": 3}`, "price", `event properties go in "properties"`)
	bad(`{"user_id": "u", "user_id": "v", "event": "e"}`, "user_id", "given twice")
	bad(`{"user_id": "u", "event": "e", "properties": {}, "properties": {}}`, "properties", "given twice")
	bad(`{"user_id": "u", "event": "e", "properties": [1, 2]}`, "properties", "expected an object of property names and values, found an array")
	bad(`{"user_id": "u", "event": "e", "user_properties": "KR"}`, "user_properties", "found a string")
	bad(`{"user_id": "u", "event": "e", "properties": {"a": 1, "a": 2}}`, "properties.a", "property given twice")
	bad(`{"user_id": "u", "event": "e", "properties": {"": 1}}`, "properties.", "empty property name")
	bad(`{"user_id": "u", "event": "e", "properties": {"n": 99999999999999999999}}`, "properties.n", "out of the int64 range")
	bad(`{"user_id": "u", "event": "e", "properties": {"f": 1e999}}`, "properties.f", "out of the float64 range")
	bad(`{"user_id": "u", "event": "e", "properties": {"s": "`+strings.Repeat("s", 64<<10+1)+`"}}`, "properties.s", "65537 bytes long")
	bad(`{"user_id": "u", "event": "e", "user_properties": {"j": [`+strings.Repeat(`"abcdefgh",`, 8<<10)+`1]}}`, "user_properties.j", "over the limit")
	bad(`"just a string"`, "", "expected an event object, found a string")
	bad(`[{"user_id": "u", "event": "e"}]`, "", "expected an event object, found an array")
	bad(`42`, "", "found a number")
}

// TestEventsBatch: a batch keeps good events and lists every bad one with
// its position, the same as a JSON array and as NDJSON (blank lines not
// counted), and gzip changes nothing.
func TestEventsBatch(t *testing.T) {
	lines := []string{
		`{"user_id": "a", "event": "x", "timestamp": 1795512600000, "properties": {"k": 1}}`,
		`{"user_id": "", "event": "x"}`,
		`{"user_id": "b", "event": "y", "user_properties": {"plan": "pro"}}`,
		`{"event": "z"}`,
		`{"user_id": "c", "event": "z", "user_properties_once": {"first": true}, "user_properties": {"p": 1}}`,
	}
	check := func(what string, b *EventsBatch) {
		t.Helper()
		if b.Total != 5 || len(b.Events) != 3 || fmt.Sprint(b.Index) != "[0 2 4]" {
			t.Fatalf("%s: total %d, events %d, index %v", what, b.Total, len(b.Events), b.Index)
		}
		if fmt.Sprint(b.Rejected) != "[{1 user_id empty user id} {3 user_id missing user id}]" {
			t.Fatalf("%s: rejected %v", what, b.Rejected)
		}
		if len(b.Users) != 3 || b.Users[0].Event != 1 || b.Users[1].Event != 2 || !b.Users[1].Once || b.Users[2].Once {
			t.Fatalf("%s: users %+v", what, b.Users)
		}
		for i, ev := range b.Events {
			if ev.Pos.Line != int64(b.Index[i])+1 {
				t.Fatalf("%s: event %d at %v", what, i, ev.Pos)
			}
		}
	}
	p := NewEventsParser()
	parse := func(body []byte, ndjson bool) *EventsBatch {
		t.Helper()
		b, err := p.Parse(context.Background(), bytes.NewReader(body), eventsOpt(ndjson))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	arr := []byte("\ufeff[\n" + strings.Join(lines, ",\n") + "\n]\n")
	nd := []byte("\n" + strings.Join(lines, "\r\n\n") + "\n   \n")
	check("array", parse(arr, false))
	check("ndjson", parse(nd, true))
	check("gzip array", parse(gz(t, arr), false))
	b := parse(gz(t, nd), true)
	check("gzip ndjson", b)
	if b.Bytes != int64(len(nd)) {
		t.Fatalf("decompressed bytes %d, want %d", b.Bytes, len(nd))
	}

	// Reuse: the parser's next batch does not change the strings of the
	// last one's events (they are immutable), and holds only its own.
	first := parse(arr, false)
	u0 := first.Events[0].UserID
	second := parse([]byte(`[{"user_id": "zz", "event": "q"}]`), false)
	if u0 != "a" || len(second.Events) != 1 || second.Events[0].UserID != "zz" || len(second.Events[0].Props) != 0 || len(second.Users) != 0 {
		t.Fatalf("reuse: %q %+v", u0, second)
	}

	// One object is a one-event batch; an empty array and empty NDJSON
	// are batches of nothing.
	if b := parse([]byte(` {"user_id": "a", "event": "x"} `), false); len(b.Events) != 1 {
		t.Fatalf("single object: %+v", b)
	}
	if b := parse([]byte(" [ ] "), false); b.Total != 0 {
		t.Fatalf("empty array: %+v", b)
	}
	if b := parse(nil, true); b.Total != 0 {
		t.Fatalf("empty ndjson: %+v", b)
	}
	// An NDJSON line that is not JSON is that event's rejection.
	b = parse([]byte(lines[0]+"\n{\"user_id\": \"a\", \n"+lines[2]+"\n[1,2]\n"), true)
	if b.Total != 4 || len(b.Events) != 2 || len(b.Rejected) != 2 || b.Rejected[0].Index != 1 ||
		!strings.Contains(b.Rejected[0].Message, "invalid JSON at column") || b.Rejected[1].Index != 3 {
		t.Fatalf("bad lines: %+v", b)
	}
}

// TestEventsWholeBodyErrors: a JSON array body that is not valid JSON (or
// not an array) cannot be parsed as a whole; the error says where.
func TestEventsWholeBodyErrors(t *testing.T) {
	good := `{"user_id": "a", "event": "x"}`
	for body, want := range map[string]string{
		``:                               "byte 0: empty body",
		`   `:                            "empty body",
		`"x"`:                            "not a JSON array of events",
		`[` + good:                       "the array is not closed",
		`[` + good + `,]`:                "expected an event after ','",
		`[` + good + ` ` + good + `]`:    "expected ',' or ']' after an event",
		`[` + good + `] x`:               "data after the array's end",
		good + good:                      "data after the event object",
		`[{"user_id": "a", "event": "x"`: "inside an event",
		`[` + good + `, {"user_id": "b" "event": "y"}]`:             "(event 1): expected ',' or '}'",
		`[{"user_id": "a", "event": "x", "k": tru}]`:                "(event 0)",
		`[{"user_id": "a", "event": 5, "properties": {"a": 1,}}]`:   "byte 52 (event 0): expected a string",
		"[{\"user_id\": \"a\", \"event\": \"x\", \"p\": \"\x01\"}]": "control character",
		"[{\"user_id\": \"a\xff\", \"event\": \"x\"}]":              "invalid UTF-8",
		`[1, 2, x]`: "(event 2)",
	} {
		_, err := parseEvents(t, body, eventsOpt(false))
		var se *EventsSyntaxError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want a syntax error with %q", body, err, want)
		}
	}
	// A truncated gzip body, and one over the decompressed limit.
	body := gz(t, []byte("["+strings.Repeat(good+",", 1000)+good+"]"))
	var de *DecompressError
	if _, err := NewEventsParser().Parse(context.Background(), bytes.NewReader(body[:len(body)/2]), eventsOpt(false)); !errors.As(err, &de) {
		t.Errorf("truncated gzip: %v", err)
	}
	opt := eventsOpt(false)
	opt.MaxDecompressedBytes = 1000
	if _, err := NewEventsParser().Parse(context.Background(), bytes.NewReader(body), opt); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the decompressed limit: %v", err)
	}
	// A body read error (the server's body limit) is returned as it is.
	boom := errors.New("boom")
	if _, err := NewEventsParser().Parse(context.Background(), &failReader{b: []byte("[" + good + ","), err: boom}, eventsOpt(false)); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
	if _, err := NewEventsParser().Parse(context.Background(), &failReader{b: []byte(good + "\n"), err: boom}, eventsOpt(true)); !errors.Is(err, boom) {
		t.Errorf("ndjson read error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewEventsParser().Parse(ctx, strings.NewReader(strings.Repeat(good+"\n", 1000)), eventsOpt(true)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// failReader returns b, then err.
type failReader struct {
	b   []byte
	err error
}

func (r *failReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, r.err
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// TestEventsReserve: the parse reserves memory in steps as it grows, at
// least what its events hold, and stops when refused.
func TestEventsReserve(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 20000 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"user_id": "user-%d", "event": "view_item", "properties": {"a": "%0100d", "b": %d, "c": 1.5}}`, i, i, i)
	}
	sb.WriteString("]")
	var reserved int64
	opt := eventsOpt(false)
	opt.Reserve = func(n int64) error { reserved += n; return nil }
	b, err := parseEvents(t, sb.String(), opt)
	if err != nil {
		t.Fatal(err)
	}
	held := int64(0)
	for _, ev := range b.Events {
		held += sizeofEvent + int64(len(ev.Props))*sizeofProp + int64(len(ev.UserID)+len(ev.Name)+len(prop(ev, "a").Str))
	}
	if reserved < held+eventsFixed || reserved > held+eventsFixed+2*EventsReserveStep {
		t.Fatalf("reserved %d bytes for %d held", reserved, held)
	}
	refused := errors.New("no memory")
	reserved = 0
	opt.Reserve = func(n int64) error {
		if reserved+n > 4<<20 {
			return refused
		}
		reserved += n
		return nil
	}
	if _, err := parseEvents(t, sb.String(), opt); !errors.Is(err, refused) {
		t.Fatalf("refused reservation: %v", err)
	}
}

// TestEventsAllocs: a parse of a batch allocates one string per event
// and nothing else per event once the parser is warm.
func TestEventsAllocs(t *testing.T) {
	body := benchBody(1000, 0)
	p := NewEventsParser()
	opt := eventsOpt(true)
	opt.Now = benchNow
	parse := func() {
		b, err := p.Parse(context.Background(), bytes.NewReader(body), opt)
		if err != nil || len(b.Events) != 1000 {
			t.Fatal(err, len(b.Rejected))
		}
	}
	parse()
	if a := testing.AllocsPerRun(10, parse); a > 1000+20 {
		t.Fatalf("%v allocations for 1000 events", a)
	}
}

// TestAppendRFC3339: the fast path writes what time.AppendFormat writes,
// across the years, before the epoch and at the ends of the range.
func TestAppendRFC3339(t *testing.T) {
	layout := "2006-01-02T15:04:05.000000Z07:00"
	us := []int64{0, 1, -1, 999_999, -999_999, 1_704_067_200_123_456, event.MinTime, event.MaxTime, -62135596800000000, 253402300799999999}
	for x := int64(1); x < 1<<62; x = x*3 + 7 {
		us = append(us, x, -x)
	}
	for _, u := range us {
		want := time.UnixMicro(u).UTC().Format(layout)
		if got := string(appendRFC3339(nil, u)); got != want {
			t.Errorf("%d: %s, want %s", u, got, want)
		}
	}
}
