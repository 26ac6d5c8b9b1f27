package ingest

import (
	"io"
	"strconv"

	"github.com/spurdb/spur/event"
)

// OTTOAidProp is the property name under which the OTTO reader stores the
// article id ("aid") of each event.
const OTTOAidProp = "aid"

// ottoReader reads the OTTO Recommender Systems Dataset session format
// (github.com/otto-de/recsys-dataset, CC BY 4.0): one session per line,
//
//	{"session": 0, "events": [{"aid": 1517085, "ts": 1659304800025, "type": "clicks"}, …]}
//
// Each element becomes one Event: user id = the session as a decimal
// string, time = ts by the epoch magnitude rule (OTTO's ts is milliseconds;
// second-resolution copies of the data read correctly too), event name =
// type, and one int property OTTOAidProp. Unknown keys are skipped. All
// events of a line carry the line's position; a bad element rejects the
// whole line (one row error) before any of its events is returned.
type ottoReader struct {
	*source
	lines   *lineReader
	sc      scanner
	keyBuf  []byte
	names   []string // interned event types (OTTO has three)
	pending []ottoEvent
	next    int    // next pending event
	user    string // session id of the pending events
	line    int64
}

type ottoEvent struct {
	aid, us int64
	name    string
}

func newOTTOReader(in io.Reader, src *source, _ Options) (*ottoReader, error) {
	return &ottoReader{source: src, lines: newLineReader(in, src.name)}, nil
}

// Next implements Reader.
func (r *ottoReader) Next(ev *event.Event) error {
	for r.next >= len(r.pending) {
		line, err := r.lines.next()
		if err != nil {
			return err
		}
		if blank(line) {
			continue
		}
		r.pending, r.next, r.line = r.pending[:0], 0, r.lines.line
		if err := r.parse(line); err != nil {
			r.pending = r.pending[:0]
			return err
		}
	}
	e := &r.pending[r.next]
	r.next++
	ev.Pos = r.pos(r.line)
	ev.UserID = r.user
	ev.Time = e.us
	ev.Name = e.name
	ev.InsertID = ""
	ev.Props = append(ev.Props[:0], event.Prop{Name: OTTOAidProp, Value: event.Int(e.aid)})
	return nil
}

// parse reads one session line into r.pending and r.user.
func (r *ottoReader) parse(line []byte) error {
	pos := r.pos(r.line)
	s := &r.sc
	s.reset(line)
	syntax := func() error { return rowErr(pos, "", s.err()) }
	var session int64
	haveSession, haveEvents := false, false
	err := r.object(pos, "", "expected a JSON object per line", func(key []byte) error {
		switch string(key) {
		case "session":
			n, err := r.int("session", pos)
			if err != nil {
				return err
			}
			session, haveSession = n, true
		case "events":
			if err := r.events(pos); err != nil {
				return err
			}
			haveEvents = true
		default:
			if !s.skip(0) {
				return syntax()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !s.end() {
		return syntax()
	}
	if !haveSession {
		return rowErr(pos, "session", "missing session id")
	}
	if !haveEvents {
		return rowErr(pos, "events", "missing events array")
	}
	if len(r.pending) > 0 {
		r.user = strconv.FormatInt(session, 10)
	}
	return nil
}

// object parses the JSON object at the scanner: '{' (else the row error
// notObj for field), then for each key calls value(key), which must
// consume the key's value (key is r.keyBuf, which value may reuse), then
// '}'. Syntax errors are row errors at pos.
func (r *ottoReader) object(pos event.Pos, field, notObj string, value func(key []byte) error) error {
	s := &r.sc
	if s.ws() != '{' {
		return rowErr(pos, field, notObj)
	}
	s.i++
	if s.ws() == '}' {
		s.i++
		return nil
	}
	for {
		var ok bool
		if r.keyBuf, ok = s.str(r.keyBuf[:0]); !ok || !s.expect(':', "':' after an object key") {
			return rowErr(pos, "", s.err())
		}
		if err := value(r.keyBuf); err != nil {
			return err
		}
		if more, ok := s.more(); !ok {
			return rowErr(pos, "", s.err())
		} else if !more {
			return nil
		}
	}
}

// int parses an integer literal value of key field.
func (r *ottoReader) int(field string, pos event.Pos) (int64, error) {
	s := &r.sc
	if c := s.ws(); c != '-' && (c < '0' || c > '9') {
		return 0, rowErr(pos, field, "expected an integer")
	}
	raw, isInt, ok := s.number()
	if !ok {
		return 0, rowErr(pos, "", s.err())
	}
	if !isInt {
		return 0, rowErr(pos, field, "expected an integer, found "+string(raw))
	}
	n, err := parseInt(raw)
	if err != nil {
		return 0, rowErr(pos, field, err.Error())
	}
	return n, nil
}

// events parses the events array into r.pending.
func (r *ottoReader) events(pos event.Pos) error {
	s := &r.sc
	syntax := func() error { return rowErr(pos, "", s.err()) }
	if s.ws() != '[' {
		return rowErr(pos, "events", "expected an array")
	}
	s.i++
	if s.ws() == ']' {
		s.i++
		return nil
	}
	for {
		if err := r.element(pos); err != nil {
			return err
		}
		switch s.ws() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			s.fail(s.i, "expected ',' or ']'")
			return syntax()
		}
	}
}

// element parses one {"aid", "ts", "type"} object.
func (r *ottoReader) element(pos event.Pos) error {
	s := &r.sc
	syntax := func() error { return rowErr(pos, "", s.err()) }
	var e ottoEvent
	haveAid, haveTs := false, false
	err := r.object(pos, "events", "expected an object in the events array", func(key []byte) error {
		switch string(key) {
		case "aid":
			n, err := r.int("aid", pos)
			if err != nil {
				return err
			}
			e.aid, haveAid = n, true
		case "ts":
			n, err := r.int("ts", pos)
			if err != nil {
				return err
			}
			if e.us, err = event.EpochToMicros(n); err != nil {
				return rowErr(pos, "ts", err.Error())
			}
			haveTs = true
		case "type":
			if s.ws() != '"' {
				return rowErr(pos, "type", "expected a string")
			}
			var ok bool
			if r.keyBuf, ok = s.str(r.keyBuf[:0]); !ok {
				return syntax()
			}
			e.name = r.intern(r.keyBuf)
			if err := event.ValidateEventName(e.name); err != nil {
				return rowErr(pos, "type", err.Error())
			}
		default:
			if !s.skip(0) {
				return syntax()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case !haveAid:
		return rowErr(pos, "aid", "missing article id")
	case !haveTs:
		return rowErr(pos, "ts", "missing timestamp")
	case e.name == "":
		return rowErr(pos, "type", "missing event type")
	}
	r.pending = append(r.pending, e)
	return nil
}

// intern returns b as a string, reusing one of the last few distinct
// event types seen (a linear scan; OTTO has three).
func (r *ottoReader) intern(b []byte) string {
	for _, n := range r.names {
		if n == string(b) {
			return n
		}
	}
	n := string(b)
	if len(r.names) < 16 {
		r.names = append(r.names, n)
	}
	return n
}
