package bin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDecoderReadsWhatWasWritten: every kind of field round-trips, in
// order, and the decoder ends with nothing left and no error.
func TestDecoderReadsWhatWasWritten(t *testing.T) {
	var b []byte
	b = append(b, 7)
	b = binary.LittleEndian.AppendUint16(b, 0xbeef)
	b = binary.LittleEndian.AppendUint32(b, 0xdeadbeef)
	b = binary.LittleEndian.AppendUint64(b, 1<<60+3)
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -5)
	b = append(b, "raw"...)
	b = binary.AppendUvarint(b, 2)
	b = append(b, "hi"...)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)

	d := NewDecoder(b, 100)
	if v := d.U8(); v != 7 {
		t.Errorf("U8 = %d", v)
	}
	if v := d.U16(); v != 0xbeef {
		t.Errorf("U16 = %#x", v)
	}
	if v := d.U32(); v != 0xdeadbeef {
		t.Errorf("U32 = %#x", v)
	}
	if v := d.U64(); v != 1<<60+3 {
		t.Errorf("U64 = %d", v)
	}
	if v := d.Uvarint(); v != 300 {
		t.Errorf("Uvarint = %d", v)
	}
	if v := d.Varint(); v != -5 {
		t.Errorf("Varint = %d", v)
	}
	if v := d.Raw(3); string(v) != "raw" {
		t.Errorf("Raw = %q", v)
	}
	if v := d.String("s"); v != "hi" {
		t.Errorf("String = %q", v)
	}
	if n := d.Count("things", 1, 10); n != 3 {
		t.Errorf("Count = %d", n)
	}
	d.SetPos(d.Pos() + 3)
	if d.Err() != nil || d.Left() != 0 {
		t.Fatalf("err %v, %d bytes left", d.Err(), d.Left())
	}
}

// TestDecoderErrorSticks: the first failure is kept with its file offset
// and the prefix, later reads return zero values and do not replace it,
// and the error matches ErrCorruption (not ErrNewerVersion).
func TestDecoderErrorSticks(t *testing.T) {
	d := NewDecoder([]byte{1, 2, 3}, 1000)
	d.Path, d.Prefix = "f.seg", "footer: "
	d.U8()
	if v := d.U32(); v != 0 {
		t.Fatalf("U32 past the end = %d", v)
	}
	if d.U8() != 0 || d.Uvarint() != 0 || d.String("s") != "" || d.Count("c", 1, 9) != 0 || d.Raw(1) != nil {
		t.Fatal("a read after the failure returned a value")
	}
	d.Fail("later")
	want := &CorruptionError{Path: "f.seg", Offset: 1001, Msg: "footer: ends early"}
	if got := d.Err(); got == nil || *got != *want {
		t.Fatalf("Err = %+v, want %+v", got, want)
	}
	var err error = d.Err()
	if !errors.Is(err, ErrCorruption) || errors.Is(err, ErrNewerVersion) {
		t.Fatalf("errors.Is: %v", err)
	}
	if !errors.Is(fmt.Errorf("open: %w", err), ErrCorruption) {
		t.Fatal("a wrapped CorruptionError does not match ErrCorruption")
	}
	if s := err.Error(); s != "corruption in f.seg at offset 1001: footer: ends early" {
		t.Fatalf("Error() = %q", s)
	}
}

// TestDecoderRejects: varints not in their shortest form or cut short,
// counts past their limit or the bytes left, and lengths past the end.
func TestDecoderRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		read func(d *Decoder)
		msg  string
		off  int64
	}{
		{"long uvarint", []byte{0x81, 0x00}, func(d *Decoder) { d.Uvarint() }, "bad uvarint", 0},
		{"long varint", []byte{0x82, 0x80, 0x00}, func(d *Decoder) { d.Varint() }, "bad varint", 0},
		{"cut uvarint", []byte{0x80}, func(d *Decoder) { d.Uvarint() }, "bad uvarint", 0},
		{"empty", nil, func(d *Decoder) { d.Uvarint() }, "bad uvarint", 0},
		{"count over limit", []byte{5, 0, 0, 0, 0, 0}, func(d *Decoder) { d.Count("rows", 1, 4) }, "rows 5 exceeds the limit 4 or the 5 bytes left", 1},
		{"count over bytes", []byte{3, 0, 0, 0, 0, 0}, func(d *Decoder) { d.Count("rows", 2, 99) }, "rows 3 exceeds the limit 99 or the 5 bytes left", 1},
		{"length over bytes", []byte{9, 'a'}, func(d *Decoder) { d.Bytes("name") }, "name length 9 exceeds the 1 bytes left", 1},
		{"negative raw", []byte{1}, func(d *Decoder) { d.Raw(-1) }, "ends early", 0},
		{"fail at", []byte{1, 2}, func(d *Decoder) { d.U16(); d.FailAt(1, "bad %s", "thing") }, "bad thing", 1},
	} {
		d := NewDecoder(c.b, 0)
		c.read(&d)
		if e := d.Err(); e == nil || e.Msg != c.msg || e.Offset != c.off {
			t.Errorf("%s: Err = %+v, want %q at %d", c.name, e, c.msg, c.off)
		}
	}
}

// FuzzDecoder: on any bytes, a run of reads never panics or reads past
// the end, a failure leaves the position within the bytes, and values
// written in shortest form read back.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{0x81, 0x00, 3, 'a', 'b', 'c'}, uint64(300))
	f.Add([]byte{}, uint64(0))
	f.Add([]byte{0x03}, uint64(1<<63))
	f.Fuzz(func(t *testing.T, b []byte, v uint64) {
		d := NewDecoder(b, 0)
		for d.Err() == nil && d.Left() > 0 {
			switch d.U8() % 6 {
			case 0:
				d.Uvarint()
			case 1:
				d.Varint()
			case 2:
				d.Bytes("b")
			case 3:
				d.Count("c", 1, 1<<20)
			case 4:
				d.U32()
			default:
				d.Raw(3)
			}
			if d.Pos() < 0 || d.Pos() > len(b) {
				t.Fatalf("position %d outside 0..%d", d.Pos(), len(b))
			}
		}
		e := NewDecoder(binary.AppendUvarint(nil, v), 0)
		if got := e.Uvarint(); got != v || e.Err() != nil || e.Left() != 0 {
			t.Fatalf("Uvarint of %d = %d, %v", v, got, e.Err())
		}
		e = NewDecoder(binary.AppendVarint(nil, int64(v)), 0)
		if got := e.Varint(); got != int64(v) || e.Err() != nil || e.Left() != 0 {
			t.Fatalf("Varint of %d = %d, %v", int64(v), got, e.Err())
		}
		// On any bytes, Varint reads what binary.Varint reads.
		e = NewDecoder(b, 0)
		got := e.Varint()
		if want, n := binary.Varint(b); e.Err() == nil && (got != want || e.Pos() != n) {
			t.Fatalf("Varint of % x = %d (%d bytes), binary.Varint %d (%d)", b, got, e.Pos(), want, n)
		}
	})
}
