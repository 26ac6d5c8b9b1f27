package ingest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/klauspost/compress/gzip"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/userfold"
)

// Events request bodies (docs/ingest.md §1): the body of POST
// /api/apps/{app}/events is a JSON array of events (or one event object),
// or NDJSON, one event per line; either may be gzip-compressed (sniffed by
// its magic bytes, as Content-Encoding: gzip sends it). An event is
//
//	{"user_id": "u42", "event": "purchase", "timestamp": "2026-11-24T09:30:00.123Z",
//	 "insert_id": "9f1c…", "properties": {"price": 12.5, "plan": "pro"},
//	 "user_properties": {"country": "KR"}, "user_properties_once": {"first_seen_plan": "free"}}
//
// Field rules, each a per-event rejection naming the field (the JSON path
// in this shape) when broken:
//
//   - user_id: required; a string or an integer literal; docs/analytics.md §1's
//     limits (event.ValidateUserID).
//   - event: required; a string (event.ValidateEventName).
//   - timestamp: optional; a string of event.ParseTime's forms (RFC 3339,
//     times without an offset read as UTC) or a JSON number, Unix epoch
//     seconds, milliseconds or microseconds by magnitude (fractions
//     floored to the microsecond); absent or null means the receive time
//     (EventsOptions.Now). A time more than EventsOptions.MaxFuture after
//     Now is rejected.
//   - insert_id: optional; a string or an integer literal of at most
//     MaxPropertyBytes bytes; "" and null mean none.
//   - anonymous_id: optional; the anonymous (device) id the event's
//     user_id was known by before (docs/identity.md §2: identify(user_id,
//     anonymous_id)); a string or an integer literal with user_id's
//     limits; null means none. Listed in EventsBatch.Anon.
//   - properties, user_properties, user_properties_once: optional objects
//     (null means none) of property name → value: strings, numbers
//     (an integer literal is an int, any other number a float; an integer
//     outside int64 is rejected), true/false, null (not set), and arrays
//     and objects kept as their JSON text without insignificant
//     whitespace (a string). Names follow event.ValidatePropName and may
//     not repeat within one object; a string value (or JSON text) is at
//     most MaxPropertyBytes bytes.
//   - any other key is rejected ("unknown field"): a misspelt "userId"
//     must not silently become an anonymous event.
//
// A JSON array whose text is not valid JSON cannot be parsed as a whole:
// that is an *EventsSyntaxError (nothing is stored), while an element
// that is valid JSON but not a valid event is a rejection. In NDJSON each
// line stands alone, so a line that is not valid JSON is a rejection of
// that event; blank lines are skipped and not counted.

// EventsOptions configures EventsParser.Parse.
type EventsOptions struct {
	// NDJSON reads one event per line (Content-Type:
	// application/x-ndjson); otherwise the body is a JSON array of events
	// or a single event object.
	NDJSON bool
	// Now is the receive time, UTC microseconds: the timestamp of events
	// that give none, and the reference of MaxFuture.
	Now int64
	// MaxFuture rejects an event whose timestamp is more than MaxFuture
	// microseconds after Now (docs/ingest.md §1: 24 h); negative means no
	// limit.
	MaxFuture int64
	// MaxPropertyBytes bounds one string value (property, user property,
	// JSON text of an array or object) and the insert id, bytes; 0 means
	// event.DefaultMaxPropertyBytes, negative no limit.
	MaxPropertyBytes int
	// MaxDecompressedBytes bounds what a gzip body decompresses to,
	// bytes: past it Parse fails with a *DecompressError wrapping
	// ErrTooLarge. 0 or negative means no limit.
	MaxDecompressedBytes int64
	// Reserve, when set, accounts the parse's memory (docs/storage.md §5): it
	// is called with EventsReserveStep before the first byte is read and
	// again each time the estimate of what the parse holds (its read
	// buffers, the events and their properties, their strings) passes
	// what was reserved. An error stops the parse; Parse returns it
	// wrapped. The caller releases the sum after it is done with the
	// batch.
	Reserve func(n int64) error
}

// EventsReserveStep is the unit of EventsOptions.Reserve, bytes.
const EventsReserveStep = 1 << 20

// EventsBatch is one parsed events request body. It is owned by the
// EventsParser that returned it and valid until that parser's next Parse:
// the Events slice, each event's Props and each UserProps' Props are
// reused by it. The strings are immutable and may be kept: each event's
// strings share one allocation of that event.
type EventsBatch struct {
	// Events are the events that passed every check, in request order,
	// with Pos {File: "event", Line: request index + 1}.
	Events []event.Event
	// Index[i] is the 0-based position of Events[i] in the request.
	Index []int
	// Users are the user property writes of Events (user_properties and
	// user_properties_once), in the order of their events; an event has
	// at most one of each.
	Users []UserProps
	// Anon are the anonymous ids of Events (field anonymous_id), in the
	// order of their events; an event has at most one.
	Anon []AnonID
	// Rejected are the events refused, in request order.
	Rejected []Rejection
	// Total is the number of events in the request (accepted and
	// rejected).
	Total int
	// Bytes is the body's size once decompressed.
	Bytes int64
}

// UserProps is one event's user property writes: user_properties, or
// with Once user_properties_once, of Events[Event] (whose user id and
// timestamp they take). Op, when not UserSet, is the operation instead
// (docs/identity.md §3; the capture decoders' $unset, $add, $delete…):
// UserUnset names the properties to clear in Props (values ignored),
// UserAdd gives the numbers to add, UserDelete clears every property
// (Props empty).
type UserProps struct {
	Event int
	Props []event.Prop
	Once  bool
	Op    UserOp
}

// UserOp is the operation of a UserProps (storage.UserOp).
type UserOp = userfold.Op

// The operations of a UserProps, as storage's UserWrite takes them.
const (
	UserSet     = userfold.Set
	UserSetOnce = userfold.SetOnce
	UserUnset   = userfold.Unset
	UserAdd     = userfold.Add
	UserDelete  = userfold.Delete
)

// AnonID is the anonymous id of Events[Event] (field anonymous_id),
// valid as a user id (event.ValidateUserID).
type AnonID struct {
	Event int
	ID    string
}

// Rejection is one event refused: its 0-based position in the request,
// the field (JSON path in the event shape: "user_id", "timestamp",
// "properties.price"; "" for an event that is not a JSON object or not
// valid JSON) and what was wrong.
type Rejection struct {
	Index   int    `json:"index"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// EventsSyntaxError is a body that cannot be parsed as a whole: not a
// JSON array of events, or not valid JSON. Offset is the byte offset in
// the (decompressed) body where it was found; Event the 0-based position
// of the event being read, or -1 outside any event.
type EventsSyntaxError struct {
	Offset int64
	Event  int
	Msg    string
}

func (e *EventsSyntaxError) Error() string {
	if e.Event >= 0 {
		return fmt.Sprintf("invalid JSON body at byte %d (event %d): %s", e.Offset, e.Event, e.Msg)
	}
	return fmt.Sprintf("invalid JSON body at byte %d: %s", e.Offset, e.Msg)
}

// eventsSizes are the accounted sizes of the parse's structures, bytes.
const (
	sizeofEvent     = int64(unsafe.Sizeof(event.Event{}))
	sizeofProp      = int64(unsafe.Sizeof(event.Prop{}))
	sizeofUserProps = int64(unsafe.Sizeof(UserProps{}))
	sizeofAnonID    = int64(unsafe.Sizeof(AnonID{}))
	// eventsFixed is the parse's fixed footprint: the body read buffer,
	// the line or element buffer and a gzip decoder's state.
	eventsFixed = 64<<10 + 256<<10 + 64<<10
)

// EventsParser parses events request bodies. It keeps its buffers, its
// gzip decoder and its interned property names between calls, so a
// server keeps a few (a sync.Pool) rather than making one per request.
// Not safe for concurrent use.
type EventsParser struct {
	opt   EventsOptions
	iopt  Options // names the columns for keyCache; MaxPropertyBytes
	src   source
	br    *bufio.Reader
	zr    *gzip.Reader
	gz    gzipLayer
	lines *lineReader
	arr   arrayReader
	sc    scanner
	keys  keyCache
	buf   []byte // scratch: a key
	arena []byte // the current event's string bytes
	row   apiRow
	batch EventsBatch

	// anonID is the current event's anonymous id (when row.anon.set),
	// set by finish.
	anonID string

	keyPos   int   // position of the next key in the event, for keyCache
	used     int64 // accounted bytes
	reserved int64 // reserved bytes

	// bad is the current event's rejection, set by the parse methods that
	// return false.
	bad struct {
		field, msg string
		syntax     bool // the event is not valid JSON
	}
}

// apiRow holds the named fields of the event being parsed: spans in the
// arena, and a numeric timestamp.
type apiRow struct {
	user, name, insert, timeStr span
	timeUS                      int64
	timeNum                     bool
	seen                        uint16 // seen* bits: fields given, to refuse repeats

	anon span // anonymous_id
}

const (
	seenUser uint16 = 1 << iota
	seenEvent
	seenTime
	seenInsert
	seenProps
	seenUserProps
	seenUserPropsOnce
	seenAnon
	seenUserPropsUnset
	seenUserPropsAdd
)

// NewEventsParser returns a parser with empty buffers.
func NewEventsParser() *EventsParser {
	// Smaller than the line reader's buffer, which bufio would otherwise
	// make the same reader (and gzip would read from itself).
	p := &EventsParser{br: bufio.NewReaderSize(nil, 64<<10)}
	p.iopt, _ = Options{}.withDefaults() // cannot fail: no schema
	p.keys.init(&p.iopt)
	return p
}

// Cap returns the bytes of buffers the parser keeps between calls (so a
// pool can drop a parser that grew large on one request).
func (p *EventsParser) Cap() int64 {
	n := int64(cap(p.arr.buf) + cap(p.arena))
	for _, ev := range p.batch.Events[:cap(p.batch.Events)] {
		n += sizeofEvent + int64(cap(ev.Props))*sizeofProp
	}
	for _, u := range p.batch.Users[:cap(p.batch.Users)] {
		n += sizeofUserProps + int64(cap(u.Props))*sizeofProp
	}
	if p.lines != nil {
		n += int64(cap(p.lines.long))
	}
	return n
}

// Parse reads body (an events request body, docs/ingest.md §1) and returns its
// events, owned by the parser until its next Parse. ctx is checked every
// 256 events. The error is fatal, nothing of the body is to be stored:
// an *EventsSyntaxError (the body is not a JSON array of events), a
// *DecompressError (a corrupt or truncated gzip stream, or one over
// MaxDecompressedBytes: errors.Is(err, ErrTooLarge)), body's read error
// (wrapped; a request body over its limit or too slow), Reserve's error
// (wrapped), or ctx's.
func (p *EventsParser) Parse(ctx context.Context, body io.Reader, opt EventsOptions) (*EventsBatch, error) {
	p.opt = opt
	switch {
	case opt.MaxPropertyBytes == 0:
		p.iopt.MaxPropertyBytes = event.DefaultMaxPropertyBytes
	case opt.MaxPropertyBytes < 0:
		p.iopt.MaxPropertyBytes = int(^uint(0) >> 1)
	default:
		p.iopt.MaxPropertyBytes = opt.MaxPropertyBytes
	}
	b := &p.batch
	b.Events, b.Index, b.Users, b.Rejected, b.Total, b.Bytes = b.Events[:0], b.Index[:0], b.Users[:0], b.Rejected[:0], 0, 0
	b.Anon = b.Anon[:0]
	p.used, p.reserved = eventsFixed, 0
	if err := p.account(0); err != nil {
		return nil, err
	}
	in, err := p.open(body)
	if err != nil {
		return nil, err
	}
	defer func() { p.src.counter.r = nil }() // drop the body
	bufAcc := p.bufCap()
	next := p.arr.next
	if opt.NDJSON {
		if p.lines == nil {
			p.lines = newLineReader(in, "body")
		} else {
			p.lines.reset(in)
		}
		next = p.nextLine
	} else {
		p.arr.reset(in)
	}
	for {
		if b.Total&255 == 255 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		elem, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if !p.event(elem) {
			if p.bad.syntax && !opt.NDJSON {
				return nil, &EventsSyntaxError{Offset: p.arr.elemOff + int64(p.sc.at), Event: b.Total, Msg: p.sc.msg}
			}
			b.Rejected = append(b.Rejected, Rejection{Index: b.Total, Field: p.bad.field, Message: p.bad.msg})
		}
		b.Total++
		if bc := p.bufCap(); bc > bufAcc {
			p.used += bc - bufAcc
			bufAcc = bc
		}
		if err := p.account(0); err != nil {
			return nil, err
		}
	}
	if opt.NDJSON {
		b.Bytes = p.lines.bytes
	} else {
		b.Bytes = p.arr.off + int64(p.arr.r)
	}
	return b, nil
}

// bufCap returns the bytes of the element buffers beyond their fixed
// sizes: a long NDJSON line, or an array element longer than the buffer.
func (p *EventsParser) bufCap() int64 {
	n := int64(max(cap(p.arr.buf)-arrStartBuf, 0))
	if p.lines != nil {
		n += int64(cap(p.lines.long))
	}
	return n
}

// open sets up the decompression of body and returns the decompressed
// stream.
func (p *EventsParser) open(body io.Reader) (io.Reader, error) {
	p.src = source{name: "body", size: -1}
	p.src.counter = countingReader{r: body, n: &p.src.n}
	p.br.Reset(&p.src.counter)
	magic, _ := p.br.Peek(2)
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		if p.src.counter.err != nil {
			return nil, fmt.Errorf("read body: %w", p.src.counter.err)
		}
		return p.br, nil
	}
	p.gz = gzipLayer{src: &p.src, br: p.br, max: p.opt.MaxDecompressedBytes}
	var err error
	if p.zr == nil {
		p.zr, err = gzip.NewReader(p.br)
	} else {
		err = p.zr.Reset(p.br)
	}
	if err != nil {
		return nil, p.gz.fail(err)
	}
	p.gz.zr = p.zr
	return &p.gz, nil
}

// account adds n bytes to the accounted use and reserves what it passes.
func (p *EventsParser) account(n int64) error {
	p.used += n
	for p.used > p.reserved {
		if p.opt.Reserve != nil {
			if err := p.opt.Reserve(EventsReserveStep); err != nil {
				return fmt.Errorf("events of the request: %w", err)
			}
		}
		p.reserved += EventsReserveStep
	}
	return nil
}

// nextLine returns the next non-blank NDJSON line.
func (p *EventsParser) nextLine() ([]byte, error) {
	for {
		line, err := p.lines.next()
		if err != nil {
			return nil, err
		}
		if !blank(line) {
			return line, nil
		}
	}
}

// reject records the current event's rejection and returns false.
func (p *EventsParser) reject(field, msg string) bool {
	p.bad.field, p.bad.msg, p.bad.syntax = field, msg, false
	return false
}

// syntaxErr records a JSON syntax error of the current event and returns
// false.
func (p *EventsParser) syntaxErr() bool {
	p.bad.field, p.bad.msg, p.bad.syntax = "", p.sc.err(), true
	return false
}

// event parses one event's JSON text b into the batch, or reports false
// with p.bad set (the batch unchanged).
func (p *EventsParser) event(b []byte) bool {
	bt := &p.batch
	n, nu := len(bt.Events), len(bt.Users)
	if n < cap(bt.Events) {
		bt.Events = bt.Events[:n+1]
	} else {
		bt.Events = append(bt.Events, event.Event{})
	}
	ev := &bt.Events[n]
	ev.Props = ev.Props[:0]
	ok := p.parseEvent(b, ev, n)
	if ok {
		ok = p.finish(ev, bt.Users[nu:])
	}
	if !ok {
		// A rejected event must still be valid JSON: else that is what
		// is wrong with it (and a JSON array cannot be parsed at all).
		if !p.bad.syntax {
			p.sc.reset(b)
			if !p.sc.skip(0) || !p.sc.end() {
				p.syntaxErr()
			}
		}
		bt.Events, bt.Users = bt.Events[:n], bt.Users[:nu]
		return false
	}
	ev.Pos = event.Pos{File: "event", Line: int64(bt.Total) + 1}
	bt.Index = append(bt.Index, bt.Total)
	sz := sizeofEvent + int64(len(ev.Props))*sizeofProp + int64(len(p.arena))
	for _, u := range bt.Users[nu:] {
		sz += sizeofUserProps + int64(len(u.Props))*sizeofProp
	}
	if p.row.anon.set {
		bt.Anon = append(bt.Anon, AnonID{Event: n, ID: p.anonID})
		sz += sizeofAnonID
	}
	p.used += sz
	return true
}

// parseEvent parses the members of the event object b into ev and the
// row, with user property writes appended to the batch for event n.
func (p *EventsParser) parseEvent(b []byte, ev *event.Event, n int) bool {
	s := &p.sc
	s.reset(b)
	p.arena = p.arena[:0]
	p.row = apiRow{}
	p.keyPos = 0
	if c := s.ws(); c != '{' {
		if c == 0 {
			return p.reject("", "empty event")
		}
		if !s.skip(0) || !s.end() {
			return p.syntaxErr()
		}
		return p.reject("", "expected an event object, found "+jsonKind(c))
	}
	s.i++
	if s.ws() == '}' {
		s.i++
	} else {
		for {
			var ok bool
			if p.buf, ok = s.str(p.buf[:0]); !ok || !s.expect(':', "':' after an object key") {
				return p.syntaxErr()
			}
			if !p.member(ev, n) {
				return false
			}
			if more, ok := s.more(); !ok {
				return p.syntaxErr()
			} else if !more {
				break
			}
		}
	}
	if !s.end() {
		return p.syntaxErr()
	}
	return true
}

// member parses the value of the top-level key in p.buf.
func (p *EventsParser) member(ev *event.Event, n int) bool {
	r := &p.row
	var bit uint16
	var sp *span
	field := ""
	switch string(p.buf) {
	case "user_id":
		bit, sp, field = seenUser, &r.user, "user_id"
	case "event":
		bit, sp, field = seenEvent, &r.name, "event"
	case "timestamp":
		bit, sp, field = seenTime, &r.timeStr, "timestamp"
	case "insert_id":
		bit, sp, field = seenInsert, &r.insert, "insert_id"
	case "anonymous_id":
		bit, sp, field = seenAnon, &r.anon, "anonymous_id"
	case "properties":
		bit, field = seenProps, "properties"
	case "user_properties":
		bit, field = seenUserProps, "user_properties"
	case "user_properties_once":
		bit, field = seenUserPropsOnce, "user_properties_once"
	case "user_properties_unset":
		bit, field = seenUserPropsUnset, "user_properties_unset"
	case "user_properties_add":
		bit, field = seenUserPropsAdd, "user_properties_add"
	default:
		return p.reject(string(p.buf), "unknown field (an event has user_id, event, timestamp, insert_id, anonymous_id, properties, user_properties, user_properties_once, user_properties_unset and user_properties_add; event properties go in \"properties\")")
	}
	if r.seen&bit != 0 {
		return p.reject(field, "given twice")
	}
	r.seen |= bit
	if sp != nil {
		return p.column(field, sp)
	}
	s := &p.sc
	open, want := byte('{'), "an object of property names and values"
	if bit == seenUserPropsUnset {
		open, want = '[', "an array of property names"
	}
	switch c := s.ws(); c {
	case open:
		s.i++
	case 'n':
		if _, ok := s.literal(); !ok {
			return p.syntaxErr()
		}
		return true
	default:
		if !s.skip(0) {
			return p.syntaxErr()
		}
		return p.reject(field, "expected "+want+", found "+jsonKind(c))
	}
	if bit == seenProps {
		return p.props(&ev.Props, "properties.")
	}
	bt := &p.batch
	k := len(bt.Users)
	if k < cap(bt.Users) {
		bt.Users = bt.Users[:k+1]
	} else {
		bt.Users = append(bt.Users, UserProps{})
	}
	u := &bt.Users[k]
	u.Event, u.Once, u.Op, u.Props = n, bit == seenUserPropsOnce, UserSet, u.Props[:0]
	switch bit {
	case seenUserPropsUnset:
		u.Op = UserUnset
		if !p.names(&u.Props, field) {
			return false
		}
	case seenUserPropsAdd:
		u.Op = UserAdd
		if !p.props(&u.Props, field+".") {
			return false
		}
		for _, q := range u.Props {
			if q.Value.Type != event.TypeInt && q.Value.Type != event.TypeFloat {
				return p.reject(field+"."+q.Name, "an add needs a number, found "+q.Value.Type.String())
			}
		}
	default:
		if !p.props(&u.Props, field+".") {
			return false
		}
	}
	if len(u.Props) == 0 {
		bt.Users = bt.Users[:k] // {} or only nulls: no write
	}
	return true
}

// column parses the value of user_id, event, timestamp or insert_id into
// sp (or, for a numeric timestamp, the row's time).
func (p *EventsParser) column(field string, sp *span) bool {
	s := &p.sc
	r := &p.row
	switch c := s.ws(); {
	case c == '"':
		start := len(p.arena)
		var ok bool
		if p.arena, ok = s.str(p.arena); !ok {
			return p.syntaxErr()
		}
		*sp = span{int32(start), int32(len(p.arena)), true}
		return true
	case c == 'n':
		if _, ok := s.literal(); !ok {
			return p.syntaxErr()
		}
		return true // null: as if absent
	case c == '-' || (c >= '0' && c <= '9'):
		raw, isInt, ok := s.number()
		if !ok {
			return p.syntaxErr()
		}
		switch sp {
		case &r.name:
			return p.reject(field, "expected a string, found a number")
		case &r.timeStr:
			us, err := epochNumber(raw, isInt)
			if err != nil {
				return p.reject(field, err.Error())
			}
			r.timeUS, r.timeNum = us, true
			return true
		}
		if !isInt {
			return p.reject(field, "expected a string or an integer, found a number with a fraction or exponent")
		}
		start := len(p.arena)
		p.arena = append(p.arena, raw...)
		*sp = span{int32(start), int32(len(p.arena)), true}
		return true
	default:
		if !s.skip(0) {
			return p.syntaxErr()
		}
		return p.reject(field, "expected a string, found "+jsonKind(c))
	}
}

// props parses the members of a property object (its '{' consumed) into
// *dst; prefix names the object in rejections ("properties.").
func (p *EventsParser) props(dst *[]event.Prop, prefix string) bool {
	s := &p.sc
	if s.ws() == '}' {
		s.i++
		return true
	}
	for {
		var ok bool
		if p.buf, ok = s.str(p.buf[:0]); !ok || !s.expect(':', "':' after an object key") {
			return p.syntaxErr()
		}
		k := p.keys.lookup(p.keyPos, p.buf)
		p.keyPos++
		if k.bad != "" {
			if !s.skip(0) {
				return p.syntaxErr()
			}
			return p.reject(prefix+k.name, k.bad)
		}
		v, ok := p.value(prefix, k.name)
		if !ok {
			return false
		}
		if v.Type != event.TypeNone {
			for _, q := range *dst {
				if q.Name == k.name {
					return p.reject(prefix+k.name, "property given twice")
				}
			}
			*dst = append(*dst, event.Prop{Name: k.name, Value: v})
		}
		if more, ok := s.more(); !ok {
			return p.syntaxErr()
		} else if !more {
			return true
		}
	}
}

// names parses the rest of an array of property names (after its '[')
// into dst, as properties without a value; a name given twice counts
// once.
func (p *EventsParser) names(dst *[]event.Prop, field string) bool {
	s := &p.sc
	if s.ws() == ']' {
		s.i++
		return true
	}
	for {
		if c := s.ws(); c != '"' {
			if !s.skip(0) {
				return p.syntaxErr()
			}
			return p.reject(field, "expected property names (strings), found "+jsonKind(c))
		}
		var ok bool
		if p.buf, ok = s.str(p.buf[:0]); !ok {
			return p.syntaxErr()
		}
		k := p.keys.lookup(p.keyPos, p.buf)
		p.keyPos++
		if k.bad != "" {
			return p.reject(field, k.bad)
		}
		if !slices.ContainsFunc(*dst, func(q event.Prop) bool { return q.Name == k.name }) {
			*dst = append(*dst, event.Prop{Name: k.name})
		}
		if more, ok := s.moreItems(); !ok {
			return p.syntaxErr()
		} else if !more {
			return true
		}
	}
}

// value parses a property value. A string's bytes go to the arena and
// its span is kept in Value.Int until finish; null is TypeNone.
func (p *EventsParser) value(prefix, name string) (event.Value, bool) {
	s := &p.sc
	max := p.iopt.MaxPropertyBytes
	switch c := s.ws(); {
	case c == '"':
		start := len(p.arena)
		var ok bool
		if p.arena, ok = s.str(p.arena); !ok {
			return event.Value{}, p.syntaxErr()
		}
		if len(p.arena)-start > max {
			return event.Value{}, p.reject(prefix+name, tooLong(len(p.arena)-start, max))
		}
		return event.Value{Type: event.TypeString, Int: packSpan(start, len(p.arena))}, true
	case c == 't' || c == 'f' || c == 'n':
		kind, ok := s.literal()
		if !ok {
			return event.Value{}, p.syntaxErr()
		}
		if kind == 'n' {
			return event.Value{}, true
		}
		return event.Bool(kind == 't'), true
	case c == '-' || (c >= '0' && c <= '9'):
		raw, isInt, ok := s.number()
		if !ok {
			return event.Value{}, p.syntaxErr()
		}
		if isInt {
			n, err := parseInt(raw)
			if err != nil {
				return event.Value{}, p.reject(prefix+name, err.Error())
			}
			return event.Int(n), true
		}
		f, err := parseFloat(raw)
		if err != nil {
			return event.Value{}, p.reject(prefix+name, err.Error())
		}
		return event.Float(f), true
	case c == '{' || c == '[':
		// Kept as its JSON text, whitespace outside strings removed.
		from := s.i
		if !s.skip(1) {
			return event.Value{}, p.syntaxErr()
		}
		start := len(p.arena)
		p.arena = compactJSON(p.arena, s.b[from:s.i])
		if len(p.arena)-start > max {
			return event.Value{}, p.reject(prefix+name, tooLong(len(p.arena)-start, max))
		}
		return event.Value{Type: event.TypeString, Int: packSpan(start, len(p.arena))}, true
	}
	s.fail(s.i, "expected a JSON value")
	return event.Value{}, p.syntaxErr()
}

// finish makes the event's strings (one allocation) and checks what needs
// them: the user id, event name, insert id and timestamp.
func (p *EventsParser) finish(ev *event.Event, users []UserProps) bool {
	var all string
	if len(p.arena) > 0 {
		all = string(p.arena)
	}
	sub := func(sp span) string { return all[sp.start:sp.end] }
	r := &p.row
	if !r.user.set {
		return p.reject("user_id", "missing user id")
	}
	ev.UserID = sub(r.user)
	if err := event.ValidateUserID(ev.UserID); err != nil {
		return p.reject("user_id", err.Error())
	}
	if !r.name.set {
		return p.reject("event", "missing event name")
	}
	ev.Name = sub(r.name)
	if err := event.ValidateEventName(ev.Name); err != nil {
		return p.reject("event", err.Error())
	}
	if r.anon.set {
		p.anonID = sub(r.anon)
		if err := event.ValidateUserID(p.anonID); err != nil {
			return p.reject("anonymous_id", err.Error())
		}
	}
	ev.InsertID = ""
	if r.insert.set {
		ev.InsertID = sub(r.insert)
		if len(ev.InsertID) > p.iopt.MaxPropertyBytes {
			return p.reject("insert_id", tooLong(len(ev.InsertID), p.iopt.MaxPropertyBytes))
		}
	}
	switch {
	case r.timeStr.set:
		us, err := event.ParseTime(sub(r.timeStr), nil)
		if err != nil {
			return p.reject("timestamp", err.Error())
		}
		ev.Time = us
	case r.timeNum:
		ev.Time = r.timeUS
	default:
		ev.Time = p.opt.Now
	}
	if p.opt.MaxFuture >= 0 && ev.Time-p.opt.Now > p.opt.MaxFuture {
		return p.reject("timestamp", fmt.Sprintf("%s is more than %s after the server's clock (%s): events from the future are refused",
			event.Time(ev.Time), time.Duration(p.opt.MaxFuture)*time.Microsecond, event.Time(p.opt.Now)))
	}
	fixStrings(ev.Props, all)
	for i := range users {
		fixStrings(users[i].Props, all)
	}
	return true
}

// fixStrings sets the string values of ps from their spans in all.
func fixStrings(ps []event.Prop, all string) {
	for i := range ps {
		if v := &ps[i].Value; v.Type == event.TypeString {
			v.Str = all[uint32(v.Int>>32):uint32(v.Int)]
			v.Int = 0
		}
	}
}

// packSpan packs a span of the arena into an int64 (start, end).
func packSpan(start, end int) int64 { return int64(start)<<32 | int64(uint32(end)) }

func tooLong(n, max int) string {
	return "value is " + strconv.Itoa(n) + " bytes long, over the limit of " + strconv.Itoa(max) + " bytes per value"
}

// jsonKind names the JSON value starting with c, for messages.
func jsonKind(c byte) string {
	switch {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	}
	return "a number"
}

// jsonString follows a byte-wise walk over JSON text in and out of
// strings, without decoding them.
type jsonString struct{ in, esc bool }

// step advances over byte c and reports whether c belongs to a string
// (its quotes included).
func (j *jsonString) step(c byte) bool {
	switch {
	case j.esc:
		j.esc = false
	case j.in:
		j.esc = c == '\\'
		j.in = c != '"'
	case c == '"':
		j.in = true
	default:
		return false
	}
	return true
}

// compactJSON appends src, a valid JSON value, to dst without the
// whitespace outside its strings.
func compactJSON(dst, src []byte) []byte {
	var st jsonString
	for _, c := range src {
		if !st.step(c) && (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// arrayReader splits a JSON array body into the text of its elements
// without decoding them, reading the body as it goes: it tracks strings
// and nesting only, the element parser checks the rest. A body that is
// one object is one element.
type arrayReader struct {
	in      io.Reader
	buf     []byte
	r, w    int   // unread bytes: buf[r:w]
	off     int64 // body offset of buf[0]
	elemOff int64 // body offset of the last element returned
	eof     bool
	err     error
	state   uint8
	n       int // elements returned
}

// arrayReader states.
const (
	arrStart    uint8 = iota // before the body's first value
	arrFirst                 // after '[': an element or ']'
	arrElem                  // after ',': an element
	arrAfter                 // after an element: ',' or ']'
	arrSingle                // the body is one object, returned
	arrEnd                   // after ']': only whitespace
	arrStartBuf = 64 << 10
)

func (a *arrayReader) reset(in io.Reader) {
	if a.buf == nil {
		a.buf = make([]byte, arrStartBuf)
	}
	*a = arrayReader{in: in, buf: a.buf}
}

// fill reads more of the body, keeping buf[keep:w] (moved to the front).
// It reports false at the end of the body or on an error (a.err).
func (a *arrayReader) fill(keep int) bool {
	if a.eof || a.err != nil {
		return false
	}
	if keep > 0 {
		copy(a.buf, a.buf[keep:a.w])
		a.off += int64(keep)
		a.w -= keep
		a.r -= keep
	}
	if a.w == len(a.buf) {
		a.buf = append(a.buf, make([]byte, len(a.buf))...)
	}
	for {
		n, err := a.in.Read(a.buf[a.w:])
		a.w += n
		if err == io.EOF {
			a.eof = true
			return n > 0
		}
		if err != nil {
			a.err = readError("body", "read", err)
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// ws skips whitespace (and a UTF-8 byte order mark at the start) and
// returns the next byte, or 0 at the end of the body.
func (a *arrayReader) ws() byte {
	for {
		for a.r < a.w {
			switch c := a.buf[a.r]; c {
			case ' ', '\t', '\r', '\n':
				a.r++
			default:
				if c == 0xef && a.off+int64(a.r) == 0 && a.w-a.r >= 3 && string(a.buf[:3]) == "\ufeff" {
					a.r += 3
					continue
				}
				return c
			}
		}
		if !a.fill(a.r) {
			return 0
		}
	}
}

// fail returns the syntax error msg at the current offset (in event ev,
// or -1), or the read error that stopped the body.
func (a *arrayReader) fail(ev int, msg string) error {
	if a.err != nil {
		return a.err
	}
	return &EventsSyntaxError{Offset: a.off + int64(a.r), Event: ev, Msg: msg}
}

// next returns the next element's text, valid until the next call; io.EOF
// after the array's end; an *EventsSyntaxError or the body's read error.
func (a *arrayReader) next() ([]byte, error) {
	for {
		c := a.ws()
		switch a.state {
		case arrStart:
			switch c {
			case '[':
				a.r++
				a.state = arrFirst
				continue
			case '{':
				a.state = arrSingle
				return a.elem()
			case 0:
				return nil, a.fail(-1, "empty body: want a JSON array of events")
			}
			return nil, a.fail(-1, "the body is not a JSON array of events (NDJSON needs Content-Type: application/x-ndjson)")
		case arrFirst, arrElem:
			switch c {
			case ']':
				if a.state == arrElem {
					return nil, a.fail(a.n, "expected an event after ','")
				}
				a.r++
				a.state = arrEnd
				continue
			case 0:
				return nil, a.fail(-1, "unexpected end of the body: the array is not closed")
			}
			a.state = arrAfter
			return a.elem()
		case arrAfter:
			switch c {
			case ',':
				a.r++
				a.state = arrElem
				continue
			case ']':
				a.r++
				a.state = arrEnd
				continue
			case 0:
				return nil, a.fail(-1, "unexpected end of the body: the array is not closed")
			}
			return nil, a.fail(-1, "expected ',' or ']' after an event")
		default: // arrSingle, arrEnd
			if c == 0 {
				if a.err != nil {
					return nil, a.err
				}
				return nil, io.EOF
			}
			if a.state == arrSingle {
				return nil, a.fail(-1, "data after the event object: send a JSON array of events, or NDJSON with Content-Type: application/x-ndjson")
			}
			return nil, a.fail(-1, "data after the array's end")
		}
	}
}

// elem returns the text of the value at a.r: an object or array up to its
// closing bracket, a string, or a scalar up to the next delimiter.
func (a *arrayReader) elem() ([]byte, error) {
	depth := 0
	var st jsonString
	i := a.r
	for {
		for ; i < a.w; i++ {
			c := a.buf[i]
			if was := st.in; st.step(c) {
				if was && !st.in && depth == 0 {
					return a.take(i + 1), nil // a string element
				}
				continue
			}
			switch c {
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					return a.take(i), nil // a scalar before the array's ']'
				}
				if depth--; depth == 0 {
					return a.take(i + 1), nil
				}
			case ',', ' ', '\t', '\r', '\n':
				if depth == 0 {
					return a.take(i), nil
				}
			}
		}
		r := a.r
		more := a.fill(a.r)
		i -= r - a.r // fill moved the unread bytes to the front
		if !more {
			if a.err == nil && depth == 0 && !st.in && i > a.r {
				return a.take(i), nil // a scalar at the end of the body
			}
			a.r = a.w
			return nil, a.fail(a.n, "unexpected end of the body inside an event")
		}
	}
}

// take returns buf[r:end] as the next element and consumes it.
func (a *arrayReader) take(end int) []byte {
	b := a.buf[a.r:end]
	a.elemOff = a.off + int64(a.r)
	a.r = end
	a.n++
	return b
}
