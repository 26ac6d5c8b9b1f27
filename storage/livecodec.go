package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/internal/bin"
	"github.com/spurdb/spur/internal/userfold"
)

// The write-ahead-log record of one Ingest call (docs/ingest.md §2): its
// accepted events, already coerced to the app's schema, and their user
// property writes, so that replaying the log applies exactly what was
// acknowledged. Layout (varints are encoding/binary's, in their shortest
// form: a longer one is an error):
//
//	[1]    liveRecordVersion
//	uvarint events; per event:
//	       str user id, str event name, varint time (UTC µs), str insert id,
//	       uvarint properties; per property: str name, value
//	uvarint user writes; per write:
//	       uvarint event index, [1] operation (UserOp: 0 set, 1 set-once;
//	       version ≥ 3 also 2 unset, 3 add, 4 delete),
//	       uvarint properties; per property: str name, value
//	(version ≥ 2) uvarint identity operations; per operation:
//	       [1] kind (identity.Kind), str T, str O, varint time (UTC µs)
//
// where str is a uvarint length and the bytes, and value a type byte
// (event.TypeString … event.TypeTime) and a str (string), a varint (int,
// time), 8 little-endian bytes of the IEEE 754 bits (float) or a byte 0/1
// (bool). The log's own framing checksums each record.
// Version 1 records (no identity operations) and version 2 ones (only
// set and set-once writes) are still read; a record whose writes are all
// set or set-once is written as version 2, so the records of inputs an
// older build accepted stay readable by it.
const liveRecordVersion = 3

// liveBatch is a decoded record, its slices reused from record to record.
type liveBatch struct {
	evs   []event.Event
	users []liveUserWrite
	ops   []identity.Op
}

// liveUserWrite is one user property write of a record: of the user and
// at the time of evs[ev].
type liveUserWrite struct {
	ev    int
	op    UserOp
	props []event.Prop
}

// appendLiveRecord appends the record of evs, users (UserWrite.Index
// into evs) and the identity operations ops to dst.
func appendLiveRecord(dst []byte, evs []event.Event, users []UserWrite, ops []identity.Op) []byte {
	v := byte(2)
	for i := range users {
		if !users[i].op().Simple() {
			v = liveRecordVersion
			break
		}
	}
	dst = append(dst, v)
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
	for i := range users {
		u := &users[i]
		dst = binary.AppendUvarint(dst, uint64(u.Index))
		dst = append(dst, byte(u.op()))
		dst = appendRecordProps(dst, u.Props)
	}
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for _, op := range ops {
		dst = append(dst, byte(op.Kind))
		dst = appendStr(dst, op.T)
		dst = appendStr(dst, op.O)
		dst = binary.AppendVarint(dst, op.Time)
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

// decodeLiveRecord decodes rec into lb (reusing its slices). Errors wrap
// errLiveRecord (not ErrCorruption: the log's checksum passed) and say
// the byte offset in the record.
func decodeLiveRecord(rec []byte, lb *liveBatch) error {
	d := bin.NewDecoder(rec, 0)
	v := d.U8()
	if d.Err() == nil && (v == 0 || v > liveRecordVersion) {
		return fmt.Errorf("%w: version %d (this build reads 1 to %d)", errLiveRecord, v, liveRecordVersion)
	}
	n := d.Count("events", 5, math.MaxInt)
	lb.evs = resizeEvents(lb.evs, n)
	for i := range n {
		ev := &lb.evs[i]
		ev.UserID = d.String("user id")
		ev.Name = d.String("event name")
		ev.Time = d.Varint()
		ev.InsertID = d.String("insert id")
		ev.Props = decodeRecordProps(&d, ev.Props)
		ev.Pos = event.Pos{}
	}
	m := d.Count("user writes", 3, math.MaxInt)
	if cap(lb.users) < m {
		lb.users = append(lb.users[:cap(lb.users)], make([]liveUserWrite, m-cap(lb.users))...)
	}
	lb.users = lb.users[:m]
	for i := range m {
		u := &lb.users[i]
		at := d.Pos()
		idx := d.Uvarint()
		if d.Err() == nil && idx >= uint64(n) {
			d.FailAt(at, "user write of event %d of %d", idx, n)
		}
		u.ev = int(idx)
		u.op = UserOp(d.U8())
		if d.Err() == nil && (u.op >= userfold.NumOps || v < 3 && !u.op.Simple()) {
			d.FailAt(d.Pos()-1, "user write operation %d (version %d)", u.op, v)
		}
		u.props = decodeRecordProps(&d, u.props)
	}
	if d.Err() == nil && v >= 3 && !slices.ContainsFunc(lb.users, func(u liveUserWrite) bool { return !u.op.Simple() }) {
		d.Fail("version %d record with only set and set-once writes (written as version 2)", v)
	}
	lb.ops = lb.ops[:0]
	if v >= 2 {
		k := d.Count("identity operations", 4, math.MaxInt)
		for range k {
			at := d.Pos()
			op := identity.Op{Kind: identity.Kind(d.U8())}
			op.T, op.O = d.String("identity T"), d.String("identity O")
			op.Time = d.Varint()
			if d.Err() != nil {
				break
			}
			if err := op.Validate(); err != nil {
				d.FailAt(at, "identity operation: %v", err)
				break
			}
			lb.ops = append(lb.ops, op)
		}
	}
	if d.Err() == nil && d.Left() > 0 {
		d.Fail("%d trailing bytes", d.Left())
	}
	if e := d.Err(); e != nil {
		return fmt.Errorf("%w: at byte %d: %s", errLiveRecord, e.Offset, e.Msg)
	}
	return nil
}

// decodeRecordProps reads a property list of a record into dst[:0] (the
// layout of appendRecordProps).
func decodeRecordProps(d *bin.Decoder, dst []event.Prop) []event.Prop {
	n := d.Count("properties", 2, math.MaxInt)
	dst = dst[:0]
	for range n {
		p := event.Prop{Name: d.String("property name")}
		at := d.Pos()
		switch t := event.Type(d.U8()); t {
		case event.TypeString:
			p.Value = event.String(d.String("string value"))
		case event.TypeInt, event.TypeTime:
			p.Value = event.Value{Type: t, Int: d.Varint()}
		case event.TypeFloat:
			p.Value = event.Value{Type: t, Float: math.Float64frombits(d.U64())}
		case event.TypeBool:
			b := d.U8()
			if b > 1 {
				d.FailAt(d.Pos()-1, "bool value %d", b)
			}
			p.Value = event.Value{Type: t, Int: int64(b)}
		default:
			d.FailAt(at, "property type %d", t)
		}
		if d.Err() != nil {
			return dst
		}
		dst = append(dst, p)
	}
	return dst
}

// resizeEvents returns evs with n elements, keeping the Props slices of
// those it had.
func resizeEvents(evs []event.Event, n int) []event.Event {
	if cap(evs) < n {
		evs = append(evs[:cap(evs)], make([]event.Event, n-cap(evs))...)
	}
	return evs[:n]
}
