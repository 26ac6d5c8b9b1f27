package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spurdb/spur/event"
)

// refEvents is a naive reference of the events body rules (the package
// doc of events.go) on encoding/json: it returns the accepted events and
// user writes rendered by render, the rejected positions with their
// fields, and whether the body cannot be parsed as a whole. Messages are
// not compared.
func refEvents(body []byte, opt EventsOptions) (accepted []string, rejected []string, whole bool) {
	var elems [][]byte
	if opt.NDJSON {
		lines := bytes.Split(body, []byte("\n"))
		if len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		for i, l := range lines {
			l = bytes.TrimSuffix(l, []byte("\r"))
			if i == 0 {
				l = bytes.TrimPrefix(l, []byte("\ufeff"))
			}
			if len(bytes.Trim(l, " \t\r")) > 0 {
				elems = append(elems, l)
			}
		}
	} else {
		b := bytes.TrimPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("\ufeff"))
		b = bytes.TrimLeft(b, " \t\r\n")
		if !json.Valid(b) || !utf8.Valid(b) || len(b) == 0 || (b[0] != '[' && b[0] != '{') {
			return nil, nil, true
		}
		if b[0] == '{' {
			elems = [][]byte{b}
		} else {
			var raws []json.RawMessage
			if err := json.Unmarshal(b, &raws); err != nil {
				panic(err)
			}
			for _, r := range raws {
				elems = append(elems, r)
			}
		}
	}
	for i, e := range elems {
		s, field, ok := refEvent(e, opt)
		if ok {
			accepted = append(accepted, s)
		} else {
			rejected = append(rejected, fmt.Sprintf("%d:%s", i, field))
		}
	}
	return accepted, rejected, false
}

// refEvent checks one event's text in the parser's order: syntax first,
// then the members in order, then the named fields.
func refEvent(e []byte, opt EventsOptions) (string, string, bool) {
	if !json.Valid(e) || !utf8.Valid(e) {
		return "", "", false
	}
	b := bytes.TrimLeft(e, " \t\r\n")
	if b[0] != '{' {
		return "", "", false
	}
	maxBytes := opt.MaxPropertyBytes
	if maxBytes == 0 {
		maxBytes = event.DefaultMaxPropertyBytes
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	dec.Token() // {
	seen := map[string]bool{}
	var ev event.Event
	var users []string
	var named = map[string]json.RawMessage{}
	for dec.More() {
		t, _ := dec.Token()
		key := t.(string)
		var raw json.RawMessage
		dec.Decode(&raw)
		switch key {
		case "user_id", "event", "timestamp", "insert_id", "properties", "user_properties", "user_properties_once",
			"user_properties_unset", "user_properties_add":
		default:
			return "", key, false
		}
		if seen[key] {
			return "", key, false
		}
		seen[key] = true
		c := raw[0]
		if key == "user_properties_unset" {
			if c == 'n' {
				continue
			}
			if c != '[' {
				return "", key, false
			}
			var elems []json.RawMessage
			json.Unmarshal(raw, &elems)
			var props []event.Prop
			for _, x := range elems {
				var name string
				if x[0] != '"' || json.Unmarshal(x, &name) != nil || event.ValidatePropName(name) != nil {
					return "", key, false
				}
				if !slices.ContainsFunc(props, func(q event.Prop) bool { return q.Name == name }) {
					props = append(props, event.Prop{Name: name})
				}
			}
			if len(props) > 0 {
				users = append(users, fmt.Sprintf("%s%v", key, props))
			}
			continue
		}
		switch key {
		case "properties", "user_properties", "user_properties_once", "user_properties_add":
			if c == 'n' {
				continue
			}
			if c != '{' {
				return "", key, false
			}
			props, field, ok := refProps(raw, key+".", maxBytes)
			if !ok {
				return "", field, false
			}
			if key == "user_properties_add" {
				for _, q := range props {
					if q.Value.Type != event.TypeInt && q.Value.Type != event.TypeFloat {
						return "", key + "." + q.Name, false
					}
				}
			}
			if key == "properties" {
				ev.Props = props
			} else if len(props) > 0 {
				users = append(users, fmt.Sprintf("%s%v", key, props))
			}
			continue
		}
		switch {
		case c == 'n':
			continue
		case c == '"':
		case key == "event" || key == "timestamp":
			if key == "event" || (c != '-' && (c < '0' || c > '9')) {
				return "", key, false
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if bytes.ContainsAny(raw, ".eE") {
				return "", key, false
			}
		default:
			return "", key, false
		}
		if key == "timestamp" && c != '"' {
			var n json.Number
			json.Unmarshal(raw, &n)
			var err error
			if bytes.ContainsAny(raw, ".eE") {
				var f float64
				if f, err = strconv.ParseFloat(string(n), 64); err == nil {
					ev.Time, err = event.EpochFloatToMicros(f)
				}
			} else {
				var i int64
				if i, err = strconv.ParseInt(string(n), 10, 64); err == nil {
					ev.Time, err = event.EpochToMicros(i)
				}
			}
			if err != nil {
				return "", key, false
			}
		}
		named[key] = raw
	}
	str := func(key string) (string, bool) {
		raw, ok := named[key]
		if !ok {
			return "", false
		}
		if raw[0] == '"' {
			var s string
			json.Unmarshal(raw, &s)
			return s, true
		}
		return string(raw), true
	}
	var ok bool
	if ev.UserID, ok = str("user_id"); !ok || event.ValidateUserID(ev.UserID) != nil {
		return "", "user_id", false
	}
	if ev.Name, ok = str("event"); !ok || event.ValidateEventName(ev.Name) != nil {
		return "", "event", false
	}
	if ev.InsertID, _ = str("insert_id"); len(ev.InsertID) > maxBytes {
		return "", "insert_id", false
	}
	if ts, ok := named["timestamp"]; !ok {
		ev.Time = opt.Now
	} else if ts[0] == '"' {
		s, _ := str("timestamp")
		var err error
		if ev.Time, err = event.ParseTime(s, nil); err != nil {
			return "", "timestamp", false
		}
	}
	if opt.MaxFuture >= 0 && ev.Time-opt.Now > opt.MaxFuture {
		return "", "timestamp", false
	}
	return fmt.Sprintf("%s|%s|%d|%s|%v|%v", ev.UserID, ev.Name, ev.Time, ev.InsertID, ev.Props, users), "", true
}

// refProps decodes a property object.
func refProps(raw json.RawMessage, prefix string, maxBytes int) ([]event.Prop, string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.Token()
	var props []event.Prop
	names := map[string]bool{}
	for dec.More() {
		t, _ := dec.Token()
		name := t.(string)
		var v json.RawMessage
		dec.Decode(&v)
		field := prefix + name
		if event.ValidatePropName(name) != nil {
			return nil, field, false
		}
		var val event.Value
		switch c := v[0]; {
		case c == 'n':
			continue
		case c == 't' || c == 'f':
			val = event.Bool(c == 't')
		case c == '"':
			var s string
			json.Unmarshal(v, &s)
			val = event.String(s)
		case c == '{' || c == '[':
			var cb bytes.Buffer
			json.Compact(&cb, v)
			val = event.String(cb.String())
		default:
			if bytes.ContainsAny(v, ".eE") {
				f, err := strconv.ParseFloat(string(v), 64)
				if err != nil || math.IsInf(f, 0) {
					return nil, field, false
				}
				val = event.Float(f)
			} else {
				i, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					return nil, field, false
				}
				val = event.Int(i)
			}
		}
		if val.Type == event.TypeString && len(val.Str) > maxBytes {
			return nil, field, false
		}
		if names[name] {
			return nil, field, false
		}
		names[name] = true
		props = append(props, event.Prop{Name: name, Value: val})
	}
	return props, "", true
}

// renderBatch renders a batch as refEvents does.
func renderBatch(b *EventsBatch) (accepted, rejected []string) {
	for i, ev := range b.Events {
		var users []string
		for _, u := range b.Users {
			if u.Event == i {
				key := "user_properties"
				switch {
				case u.Op == UserUnset:
					key = "user_properties_unset"
				case u.Op == UserAdd:
					key = "user_properties_add"
				case u.Once:
					key = "user_properties_once"
				}
				users = append(users, fmt.Sprintf("%s%v", key, u.Props))
			}
		}
		accepted = append(accepted, fmt.Sprintf("%s|%s|%d|%s|%v|%v", ev.UserID, ev.Name, ev.Time, ev.InsertID, ev.Props, users))
	}
	for _, r := range b.Rejected {
		rejected = append(rejected, fmt.Sprintf("%d:%s", r.Index, r.Field))
	}
	return accepted, rejected
}

// checkEventsBody parses body both ways the parser is reused and compares
// with the reference; it also checks the batch's own invariants.
func checkEventsBody(t *testing.T, p *EventsParser, body []byte, opt EventsOptions) {
	t.Helper()
	b, err := p.Parse(context.Background(), bytes.NewReader(body), opt)
	wantAcc, wantRej, wantWhole := refEvents(body, opt)
	var se *EventsSyntaxError
	switch {
	case err != nil && !errors.As(err, &se):
		if len(body) > MaxLineBytes {
			return
		}
		t.Fatalf("ndjson=%v %q: error %v", opt.NDJSON, body, err)
	case (err != nil) != wantWhole:
		t.Fatalf("ndjson=%v %q: error %v, reference says whole-body error %v", opt.NDJSON, body, err, wantWhole)
	case err != nil:
		if se.Offset < 0 || se.Offset > int64(len(body)) {
			t.Fatalf("%q: error offset %d of %d bytes", body, se.Offset, len(body))
		}
		return
	}
	acc, rej := renderBatch(b)
	if fmt.Sprint(acc) != fmt.Sprint(wantAcc) || fmt.Sprint(rej) != fmt.Sprint(wantRej) {
		t.Fatalf("ndjson=%v %q:\naccepted %q\n     want %q\nrejected %q\n     want %q", opt.NDJSON, body, acc, wantAcc, rej, wantRej)
	}
	if b.Total != len(b.Events)+len(b.Rejected) || len(b.Index) != len(b.Events) {
		t.Fatalf("%q: total %d, %d events, %d rejected, %d indexes", body, b.Total, len(b.Events), len(b.Rejected), len(b.Index))
	}
	for i, ev := range b.Events {
		if err := event.ValidateEvent(&ev); err != nil {
			t.Fatalf("%q: invalid event accepted: %v", body, err)
		}
		if i > 0 && b.Index[i] <= b.Index[i-1] {
			t.Fatalf("%q: index %v", body, b.Index)
		}
	}
}

// FuzzEventsParser compares the parser with the encoding/json reference
// on any body, as a JSON array and as NDJSON, plain and gzipped, with one
// parser reused across all of them.
func FuzzEventsParser(f *testing.F) {
	for _, s := range []string{
		`[{"user_id": "u42", "event": "purchase", "timestamp": "2026-11-24T09:30:00.123Z", "insert_id": "9f1c", "properties": {"price": 12.5, "plan": "pro"}, "user_properties": {"country": "KR"}, "user_properties_once": {"first_seen_plan": "free"}}]`,
		"{\"user_id\": 7, \"event\": \"e\", \"timestamp\": 1795512600.5}\n{\"user_id\": \"a\"}\n\n[1]\n",
		`[{"user_id": "u", "event": "e", "properties": {"t": [1, {"a": " b"}], "a": 1, "a": 2}}, {"event": "x", "userId": 1}]`,
		`{"user_id": "u", "event": "e", "timestamp": "1990-01-01", "insert_id": 12, "properties": null}`,
		`[{"user_id": "\ud800\u0041", "event": "\u00e9", "timestamp": 99999999999999999}, "x", null]`,
		`[{"user_id": "u", "event": "e", "properties": {"$x": 1, "n": 1e400, "m": 123456789012345678901}}]`,
		`[{"user_id": "u", "event": "e", "user_properties_unset": ["a", "b", "a"], "user_properties_add": {"n": 1, "f": -0.5}}, {"user_id": "u", "event": "e", "user_properties_unset": [1]}, {"user_id": "u", "event": "e", "user_properties_add": {"s": "1"}}, {"user_id": "u", "event": "e", "user_properties_unset": {"a": 1}}]`,
		"\ufeff[{\"user_id\": \"u\", \"event\": \"e\"} ,\r\n {\"user_id\":\"v\",\"event\":\"e\",\"timestamp\":\"2126-01-01T00:00:00Z\"}]",
	} {
		f.Add([]byte(s))
	}
	p := NewEventsParser()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, nd := range []bool{false, true} {
			opt := EventsOptions{NDJSON: nd, Now: now, MaxFuture: 86_400_000_000, MaxPropertyBytes: 64}
			checkEventsBody(t, p, body, opt)
			// gzipped, the same answer.
			plain, perr := p.Parse(context.Background(), bytes.NewReader(body), opt)
			var a1, r1 []string
			if perr == nil {
				a1, r1 = renderBatch(plain)
			}
			zb, zerr := p.Parse(context.Background(), bytes.NewReader(gz(t, body)), opt)
			if (perr == nil) != (zerr == nil) && !(len(body) == 0 && nd) {
				t.Fatalf("%q: plain %v, gzip %v", body, perr, zerr)
			}
			if zerr == nil {
				if a2, r2 := renderBatch(zb); fmt.Sprint(a1, r1) != fmt.Sprint(a2, r2) {
					t.Fatalf("%q: gzip differs", body)
				}
			}
		}
	})
}

// TestEventsReference runs the reference comparison over the round trip
// of generated events and over hand-made bodies.
func TestEventsReference(t *testing.T) {
	p := NewEventsParser()
	nd := benchBody(2000, 3)
	for _, b := range [][]byte{nd, toArray(nd)} {
		for _, ndjson := range []bool{true, false} {
			opt := EventsOptions{NDJSON: ndjson, Now: benchNow, MaxFuture: -1}
			checkEventsBody(t, p, b, opt)
		}
	}
	// The round trip: what AppendEventJSON writes reads back equal.
	bt, err := p.Parse(context.Background(), bytes.NewReader(nd), EventsOptions{NDJSON: true, Now: benchNow, MaxFuture: -1})
	if err != nil || len(bt.Events) != 2000 || len(bt.Rejected) != 0 {
		t.Fatalf("%v %v", err, bt.Rejected)
	}
	lines := strings.Split(strings.TrimSuffix(string(nd), "\n"), "\n")
	var ub int
	for i := range bt.Events {
		var user, once []event.Prop
		for ; ub < len(bt.Users) && bt.Users[ub].Event == i; ub++ {
			if bt.Users[ub].Once {
				once = bt.Users[ub].Props
			} else {
				user = bt.Users[ub].Props
			}
		}
		// (A time property comes back as its RFC 3339 string, which the
		// app's schema types; written again it is the same text.)
		if got := string(AppendEventJSON(nil, &bt.Events[i], user, once)); got != lines[i] {
			t.Fatalf("round trip:\n%s\n%s", got, lines[i])
		}
	}
}
