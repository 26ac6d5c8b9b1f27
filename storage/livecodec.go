package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/spurdb/spur/event"
)

// The write-ahead-log record of one Ingest call (ingest.md §2): its
// accepted events, already coerced to the app's schema, and their user
// property writes, so that replaying the log applies exactly what was
// acknowledged. Layout (varints are encoding/binary's):
//
//	[1]    liveRecordVersion
//	uvarint events; per event:
//	       str user id, str event name, varint time (UTC µs), str insert id,
//	       uvarint properties; per property: str name, value
//	uvarint user writes; per write:
//	       uvarint event index, [1] once (0 or 1),
//	       uvarint properties; per property: str name, value
//
// where str is a uvarint length and the bytes, and value a type byte
// (event.TypeString … event.TypeTime) and a str (string), a varint (int,
// time), 8 little-endian bytes of the IEEE 754 bits (float) or a byte 0/1
// (bool). The log's own framing checksums each record.
const liveRecordVersion = 1

// liveBatch is a decoded record, its slices reused from record to record.
type liveBatch struct {
	evs   []event.Event
	users []liveUserWrite
}

// liveUserWrite is one user property write of a record: of the user and
// at the time of evs[ev].
type liveUserWrite struct {
	ev    int
	once  bool
	props []event.Prop
}

// appendLiveRecord appends the record of evs and users (UserWrite.Index
// into evs) to dst.
func appendLiveRecord(dst []byte, evs []event.Event, users []UserWrite) []byte {
	dst = append(dst, liveRecordVersion)
	dst = binary.AppendUvarint(dst, uint64(len(evs)))
	for i := range evs {
		ev := &evs[i]
		dst = appendStr(dst, ev.UserID)
		dst = appendStr(dst, ev.Name)
		dst = binary.AppendVarint(dst, ev.Time)
		dst = appendStr(dst, ev.InsertID)
		dst = appendRecordProps(dst, ev.Props)
	}
	dst = binary.AppendUvarint(dst, uint64(len(users)))
	for _, u := range users {
		dst = binary.AppendUvarint(dst, uint64(u.Index))
		once := byte(0)
		if u.Once {
			once = 1
		}
		dst = append(dst, once)
		dst = appendRecordProps(dst, u.Props)
	}
	return dst
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendRecordProps appends the properties that have a value (TypeNone ones are
// "not set" and skipped).
func appendRecordProps(dst []byte, props []event.Prop) []byte {
	n := 0
	for _, p := range props {
		if p.Value.Type != event.TypeNone {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, p := range props {
		v := p.Value
		if v.Type == event.TypeNone {
			continue
		}
		dst = appendStr(dst, p.Name)
		dst = append(dst, byte(v.Type))
		switch v.Type {
		case event.TypeString:
			dst = appendStr(dst, v.Str)
		case event.TypeFloat:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Float))
		case event.TypeBool:
			dst = append(dst, byte(v.Int&1))
		default: // int, time
			dst = binary.AppendVarint(dst, v.Int)
		}
	}
	return dst
}

// errLiveRecord is wrapped by every decoding error: a record the log's
// checksum passed but this build cannot read (a bug, or a newer version).
var errLiveRecord = errors.New("bad live record")

// recordDecoder reads one record.
type recordDecoder struct {
	b   []byte
	err error
}

func (d *recordDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errLiveRecord, fmt.Sprintf(format, args...))
	}
}

func (d *recordDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%s: bad varint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("%s: bad varint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items taking at least min bytes each.
func (d *recordDecoder) count(what string, min int) int {
	n := d.uvarint(what)
	if d.err == nil && n > uint64(len(d.b)/min) {
		d.fail("%s: %d items in %d bytes", what, n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *recordDecoder) str(what string) string {
	n := d.uvarint(what)
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("%s: %d bytes, %d left", what, n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *recordDecoder) byte1(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("%s: truncated", what)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *recordDecoder) props(dst []event.Prop) []event.Prop {
	n := d.count("properties", 2)
	dst = dst[:0]
	for range n {
		p := event.Prop{Name: d.str("property name")}
		switch t := event.Type(d.byte1("property type")); t {
		case event.TypeString:
			p.Value = event.String(d.str("string value"))
		case event.TypeInt, event.TypeTime:
			p.Value = event.Value{Type: t, Int: d.varint("int value")}
		case event.TypeFloat:
			if len(d.b) < 8 {
				d.fail("float value: truncated")
				return dst
			}
			p.Value = event.Value{Type: t, Float: math.Float64frombits(binary.LittleEndian.Uint64(d.b))}
			d.b = d.b[8:]
		case event.TypeBool:
			b := d.byte1("bool value")
			if b > 1 {
				d.fail("bool value %d", b)
			}
			p.Value = event.Value{Type: t, Int: int64(b)}
		default:
			d.fail("property type %d", t)
		}
		if d.err != nil {
			return dst
		}
		dst = append(dst, p)
	}
	return dst
}

// decodeLiveRecord decodes rec into lb (reusing its slices). Errors wrap
// errLiveRecord.
func decodeLiveRecord(rec []byte, lb *liveBatch) error {
	d := recordDecoder{b: rec}
	if v := d.byte1("version"); d.err == nil && v != liveRecordVersion {
		return fmt.Errorf("%w: version %d (this build reads %d)", errLiveRecord, v, liveRecordVersion)
	}
	n := d.count("events", 5)
	lb.evs = resizeEvents(lb.evs, n)
	for i := range n {
		ev := &lb.evs[i]
		ev.UserID = d.str("user id")
		ev.Name = d.str("event name")
		ev.Time = d.varint("time")
		ev.InsertID = d.str("insert id")
		ev.Props = d.props(ev.Props)
		ev.Pos = event.Pos{}
	}
	m := d.count("user writes", 3)
	if cap(lb.users) < m {
		lb.users = append(lb.users[:cap(lb.users)], make([]liveUserWrite, m-cap(lb.users))...)
	}
	lb.users = lb.users[:m]
	for i := range m {
		u := &lb.users[i]
		idx := d.uvarint("user write event")
		if d.err == nil && idx >= uint64(n) {
			d.fail("user write of event %d of %d", idx, n)
		}
		u.ev = int(idx)
		switch d.byte1("user write once") {
		case 0:
			u.once = false
		case 1:
			u.once = true
		default:
			d.fail("user write once flag")
		}
		u.props = d.props(u.props)
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

// resizeEvents returns evs with n elements, keeping the Props slices of
// those it had.
func resizeEvents(evs []event.Event, n int) []event.Event {
	if cap(evs) < n {
		evs = append(evs[:cap(evs)], make([]event.Event, n-cap(evs))...)
	}
	return evs[:n]
}
