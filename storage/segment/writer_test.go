package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
)

// memFile is an in-memory File.
type memFile struct {
	bytes.Buffer
	synced, closed bool
}

func (f *memFile) Sync() error  { f.synced = true; return nil }
func (f *memFile) Close() error { f.closed = true; return nil }

// testIdentity is a valid identity with every field set.
var testIdentity = Identity{Kind: KindEvents, Shard: 5, Shards: 16, Generation: 1 << 40, SeqMin: 3, SeqMax: 1 << 35}

// streamWrite writes a segment with a Writer of opt into memory, appending
// with fill, and returns a Reader of it and the Info.
func streamWrite(t testing.TB, opt WriterOptions, fill func(w *Writer) error) (*Reader, Info) {
	t.Helper()
	f := &memFile{}
	w, err := NewWriter(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := fill(w); err != nil {
		t.Fatal(err)
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !f.synced || !f.closed || info.Bytes != int64(f.Len()) {
		t.Fatalf("file synced %v, closed %v, %d bytes; Info.Bytes %d", f.synced, f.closed, f.Len(), info.Bytes)
	}
	r, err := NewReader(bytes.NewReader(f.Bytes()), int64(f.Len()), "mem")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return r, info
}

// specsOf returns the column declarations of in's property columns.
func specsOf(in *Input) []PropSpec {
	var ps []PropSpec
	for _, p := range in.Props {
		ps = append(ps, PropSpec{Name: p.Name, Type: p.Type})
	}
	return ps
}

// TestWriterIdentity writes each kind of identity (and none) and reads it
// back, with the creation time given or the writer's clock, and Info's
// first and last hash.
func TestWriterIdentity(t *testing.T) {
	in := realisticInput(3, 3000)
	for _, id := range []Identity{{}, testIdentity, {Kind: KindUsers, Shard: 0, Shards: 1}, {Kind: KindEvents, Shard: MaxShards - 1, Shards: MaxShards, Generation: math.MaxUint64, SeqMin: math.MaxInt64, SeqMax: math.MaxInt64}} {
		for _, created := range []int64{0, 1, maxCreated - 1} {
			opt := WriterOptions{Identity: id, Created: created, Props: specsOf(in), BlockRows: 700}
			r, info := streamWrite(t, opt, func(w *Writer) error { return w.AppendInput(in) })
			m := r.Meta()
			if m.Identity != id || created != 0 && m.Created != created || m.Created <= 0 {
				t.Fatalf("identity %+v created %d read back as %+v created %d", id, created, m.Identity, m.Created)
			}
			if info.FirstHash != in.Users[0].Hash || info.LastHash != in.Users[len(in.Users)-1].Hash {
				t.Fatalf("Info hashes %#x..%#x, want %#x..%#x", info.FirstHash, info.LastHash, in.Users[0].Hash, in.Users[len(in.Users)-1].Hash)
			}
			opt.Props, opt.SplitRows = nil, MaxBlockRows
			compareSegment(t, in, r, opt)
		}
	}
}

// TestWriterOptionsChecked: NewWriter refuses options out of range, naming
// the option, before writing anything.
func TestWriterOptionsChecked(t *testing.T) {
	for _, c := range []struct {
		opt  WriterOptions
		want string
	}{
		{WriterOptions{BlockRows: -1}, "BlockRows"},
		{WriterOptions{BlockRows: MaxBlockRows + 1}, "BlockRows"},
		{WriterOptions{BlockRows: 100, SplitRows: 99}, "SplitRows"},
		{WriterOptions{SplitRows: MaxBlockRows + 1}, "SplitRows"},
		{WriterOptions{MinZstdRatio: 0.5}, "MinZstdRatio"},
		{WriterOptions{MinZstdRatio: math.NaN()}, "MinZstdRatio"},
		{WriterOptions{Created: -1}, "Created"},
		{WriterOptions{Created: maxCreated}, "Created"},
		{WriterOptions{Identity: Identity{Kind: 3, Shards: 1}}, "kind 3"},
		{WriterOptions{Identity: Identity{Kind: KindEvents}}, "shard count 0"},
		{WriterOptions{Identity: Identity{Kind: KindEvents, Shards: 3}}, "shard count 3"},
		{WriterOptions{Identity: Identity{Kind: KindEvents, Shards: 2 * MaxShards}}, "shard count"},
		{WriterOptions{Identity: Identity{Kind: KindEvents, Shards: 4, Shard: 4}}, "shard 4 is outside"},
		{WriterOptions{Identity: Identity{Kind: KindEvents, Shards: 4, Shard: -1}}, "shard -1 is outside"},
		{WriterOptions{Identity: Identity{Kind: KindUsers, Shards: 4, SeqMin: 2, SeqMax: 1}}, "seq range 2..1"},
		{WriterOptions{Identity: Identity{Kind: KindUsers, Shards: 4, SeqMin: -1}}, "seq range -1"},
		{WriterOptions{Identity: Identity{Shards: 4}}, "without a kind"},
		{WriterOptions{Identity: Identity{Generation: 9}}, "without a kind"},
		{WriterOptions{Props: []PropSpec{{Name: "", Type: event.TypeInt}}}, "empty name"},
		{WriterOptions{Props: []PropSpec{{Name: "a", Type: event.TypeInt}, {Name: "a", Type: event.TypeFloat}}}, "appears twice"},
		{WriterOptions{Props: []PropSpec{{Name: "a", Type: event.TypeTime + 1}}}, "invalid type"},
	} {
		f := &memFile{}
		if _, err := NewWriter(f, c.opt); err == nil || !strings.Contains(err.Error(), c.want) || f.Len() != 0 {
			t.Errorf("NewWriter(%+v): %v (%d bytes written), want an error containing %q", c.opt, err, f.Len(), c.want)
		}
	}
}

// rebuildFooter decodes the footer of segment data, lets edit change its
// Meta and layouts, and returns the file with the footer re-encoded (in
// the version of data) and every checksum right, so that the decoder's
// own checks, not the CRC, must catch what edit broke.
func rebuildFooter(t *testing.T, data []byte, edit func(m *Meta, l []blockLayout)) []byte {
	t.Helper()
	footer, off, ok := splitFile(data)
	if !ok {
		t.Fatal("no footer")
	}
	m, layouts, err := decodeFooter(footer, off, data[0])
	if err != nil {
		t.Fatal(err)
	}
	edit(m, layouts)
	return withFooter(data[:off], appendFooter(nil, m, layouts), data[0])
}

// withFooter returns body (header and chunks) followed by footer and a
// trailer of version v with right checksums.
func withFooter(body, footer []byte, v uint8) []byte {
	out := append(slices.Clone(body), footer...)
	var tr [trailerSize]byte
	putTrailer(&tr, len(body), footer, v)
	return append(out, tr[:]...)
}

// putTrailer fills a trailer for a footer at offset off.
func putTrailer(tr *[trailerSize]byte, off int, footer []byte, v uint8) {
	le := func(b []byte, x uint64, n int) {
		for i := range n {
			b[i] = byte(x >> (8 * i))
		}
	}
	le(tr[0:], uint64(off), 8)
	le(tr[8:], uint64(len(footer)), 8)
	le(tr[16:], uint64(crc(footer)), 4)
	le(tr[20:], uint64(crc(tr[:20])), 4)
	tr[24] = v
	copy(tr[25:], trailerMagic)
}

// openBytes opens segment bytes with NewReader and verifies them.
func openBytes(data []byte) (*Reader, error) {
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), "edited")
	if err != nil {
		return nil, err
	}
	return r, r.Verify()
}

// TestIdentityStrict rewrites the footer's identity and creation time with
// values out of range, every checksum right: each is corruption naming
// the field, never a value read as zero or clamped.
func TestIdentityStrict(t *testing.T) {
	in := realisticInput(8, 500)
	r, _ := streamWrite(t, WriterOptions{Identity: testIdentity, Created: 12345, Props: specsOf(in), BlockRows: 100}, func(w *Writer) error { return w.AppendInput(in) })
	data := readAll(t, r)
	for _, c := range []struct {
		name string
		edit func(m *Meta)
		want string
	}{
		{"kind", func(m *Meta) { m.Identity.Kind = 3 }, "kind 3"},
		{"kind none with shard", func(m *Meta) { m.Identity.Kind = KindNone }, "without a kind"},
		{"shards 0", func(m *Meta) { m.Identity.Shards = 0 }, "shard count 0"},
		{"shards not a power of two", func(m *Meta) { m.Identity.Shards = 12 }, "shard count 12"},
		{"shards too many", func(m *Meta) { m.Identity.Shards = 2 * MaxShards }, "identity out of range"},
		{"shard out of range", func(m *Meta) { m.Identity.Shard = 16 }, "shard 16 is outside"},
		{"seq order", func(m *Meta) { m.Identity.SeqMin = m.Identity.SeqMax + 1 }, "seq range"},
		{"seq negative", func(m *Meta) { m.Identity.SeqMin, m.Identity.SeqMax = -1, -1 }, "identity out of range"},
		{"created 0", func(m *Meta) { m.Created = 0 }, "creation time 0"},
		{"created too late", func(m *Meta) { m.Created = maxCreated }, "creation time"},
		{"created negative", func(m *Meta) { m.Created = -5 }, "creation time"},
	} {
		bad := rebuildFooter(t, data, func(m *Meta, _ []blockLayout) { c.edit(m) })
		_, err := openBytes(bad)
		var ce *CorruptionError
		if !errors.As(err, &ce) || !strings.Contains(ce.Msg, c.want) {
			t.Errorf("%s: %v, want corruption %q", c.name, err, c.want)
		}
	}
	// The unchanged footer, rebuilt, still reads.
	if _, err := openBytes(rebuildFooter(t, data, func(*Meta, []blockLayout) {})); err != nil {
		t.Fatal(err)
	}
}

// TestFooterFlipsStrict flips each of the first 300 bytes of a footer
// (the identity, the totals, the dictionaries) with every mask, the
// footer checksum made right each time: the decoder must report
// corruption, or decode a footer that re-encodes to exactly the flipped
// bytes (a value it read is the value the bytes say, never a default or
// an overlong varint's).
func TestFooterFlipsStrict(t *testing.T) {
	in := realisticInput(8, 300)
	r, _ := streamWrite(t, WriterOptions{Identity: testIdentity, Created: 1 << 50, Props: specsOf(in), BlockRows: 64, SplitRows: 64}, func(w *Writer) error { return w.AppendInput(in) })
	data := readAll(t, r)
	footer, off, _ := splitFile(data)
	var corrupt, differs int
	for i := range min(len(footer), 300) {
		for mask := 1; mask < 256; mask++ {
			f := slices.Clone(footer)
			f[i] ^= byte(mask)
			m2, layouts2, err := decodeFooter(f, off, Version)
			if err != nil {
				corrupt++
				continue
			}
			if again := appendFooter(nil, m2, layouts2); !bytes.Equal(again, f) {
				t.Fatalf("footer byte %d ^ %#02x decodes to a footer that re-encodes otherwise", i, mask)
			}
			differs++
		}
	}
	t.Logf("%d flips rejected, %d decoded to the flipped values", corrupt, differs)
}

// readAll returns the bytes of a Reader made by streamWrite.
func readAll(t *testing.T, r *Reader) []byte {
	t.Helper()
	data := make([]byte, r.Size())
	if err := r.readAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return data
}

// continuedInput returns users whose rows span blocks of blockRows rows:
// a user of 10·blockRows+3 rows with runs of equal times (some across the
// block boundaries), between small users, and a last user of exactly
// 2·blockRows rows.
func continuedInput(blockRows int) *Input {
	var evs []testEvent
	add := func(user string, rows int, t0 int64) {
		for r := range rows {
			evs = append(evs, testEvent{user: user, time: t0 + int64(r/7)*1e6, name: fmt.Sprintf("e%d", r%5), props: map[string]event.Value{"n": event.Int(int64(r))}})
		}
	}
	add("small-1", 5, 1e12)
	add("big", 10*blockRows+3, 2e12)
	add("small-2", 3, 3e12)
	add("exact", 2*blockRows, 4e12)
	return buildInput(evs, map[string]event.Type{"n": event.TypeInt}, func(id string) uint64 {
		return map[string]uint64{"small-1": 1, "big": 2, "small-2": 3, "exact": 4}[id]
	})
}

// TestContinuedUsers writes users with more rows than a block holds: they
// span consecutive blocks of at most BlockRows rows, every block after
// the first of such a user Continued, equal times across the boundaries,
// and read back exactly, through Write and through a Writer fed in
// pieces that split users between AppendInput calls.
func TestContinuedUsers(t *testing.T) {
	for _, blockRows := range []int{7, 64, 100} {
		in := continuedInput(blockRows)
		opt := WriterOptions{BlockRows: blockRows, SplitRows: blockRows, Identity: testIdentity}
		r := roundTrip(t, in, opt)
		continued := 0
		for i, bm := range r.Meta().Blocks {
			if bm.Rows > blockRows {
				t.Fatalf("block %d of %d rows, over %d", i, bm.Rows, blockRows)
			}
			if bm.Continued {
				continued++
			}
		}
		if want := 10 + 1; continued != want {
			t.Errorf("%d continued blocks, want %d", continued, want)
		}
		// The same rows fed in pieces of 13 rows (users split between
		// calls).
		opt.Props = specsOf(in)
		rs, _ := streamWrite(t, opt, func(w *Writer) error {
			for lo := 0; lo < len(in.Times); lo += 13 {
				if err := w.AppendInput(sliceInput(in, lo, min(lo+13, len(in.Times)))); err != nil {
					return err
				}
			}
			return nil
		})
		opt.Props = nil
		compareSegment(t, in, rs, opt)
	}
}

// sliceInput returns rows [lo, hi) of in as an Input (users cut at the
// ends), sharing in's dictionaries.
func sliceInput(in *Input, lo, hi int) *Input {
	out := &Input{Times: in.Times[lo:hi], Events: in.Events[lo:hi], EventNames: in.EventNames}
	row := 0
	for _, u := range in.Users {
		s, e := max(row, lo), min(row+u.Rows, hi)
		if s < e {
			out.Users = append(out.Users, User{Hash: u.Hash, ID: u.ID, Rows: e - s})
		}
		row += u.Rows
	}
	n := hi - lo
	for _, p := range in.Props {
		q := PropColumn{Name: p.Name, Type: p.Type, Present: make([]uint64, (n+63)/64), Dict: p.Dict}
		orBits(q.Present, 0, p.Present, lo, n)
		switch p.Type {
		case event.TypeFloat:
			q.Floats = p.Floats[lo:hi]
		case event.TypeString:
			q.Strs = p.Strs[lo:hi]
		default:
			q.Ints = p.Ints[lo:hi]
		}
		out.Props = append(out.Props, q)
	}
	return out
}

// TestContinuedCorruption: the footer's and Verify's checks of continued
// blocks, on files whose checksums are right.
func TestContinuedCorruption(t *testing.T) {
	in := continuedInput(8)
	r, _ := streamWrite(t, WriterOptions{BlockRows: 8, Props: specsOf(in)}, func(w *Writer) error { return w.AppendInput(in) })
	data := readAll(t, r)
	m := r.Meta()
	first := slices.IndexFunc(m.Blocks, func(b BlockMeta) bool { return b.Continued })
	plain := slices.IndexFunc(m.Blocks[1:], func(b BlockMeta) bool { return !b.Continued && b.FirstHash != m.Blocks[0].LastHash }) + 1
	if first < 1 || plain < 1 {
		t.Fatalf("blocks %+v: no continued block or no plain one", m.Blocks)
	}
	for _, c := range []struct {
		name string
		edit func(m *Meta)
		want string
	}{
		{"first block continued", func(m *Meta) { m.Blocks[0].Continued = true }, "flags 0x01 invalid"},
		{"continued, another hash", func(m *Meta) { m.Blocks[plain].Continued = true; m.Users++ }, "flags 0x01 invalid"},
		{"continued, users count", func(m *Meta) { m.Blocks[first].Continued = false }, "users"},
		{"not continued, users fixed", func(m *Meta) { m.Blocks[first].Continued = false; m.Users++ }, "not after"},
	} {
		_, err := openBytes(rebuildFooter(t, data, func(m *Meta, _ []blockLayout) { c.edit(m) }))
		var ce *CorruptionError
		if !errors.As(err, &ce) || !strings.Contains(ce.Msg, c.want) {
			t.Errorf("%s: %v, want corruption %q", c.name, err, c.want)
		}
	}
	// An unknown flag bit.
	footer, off, _ := splitFile(data)
	dm, _, _ := decodeFooter(footer, off, Version)
	flag := len(appendFooterHead(nil, dm, len(dm.Blocks))) + 2 // rows and users of block 0 are one byte each
	if footer[flag] != 0 {
		t.Fatalf("byte %d of the footer is %#x, not block 0's flags", flag, footer[flag])
	}
	bad := slices.Clone(footer)
	bad[flag] = 2
	if _, err := openBytes(withFooter(data[:off], bad, Version)); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "flags 0x02 invalid") {
		t.Errorf("unknown flag: %v", err)
	}

	// Equal hashes, other ids: marked continued, Verify finds another
	// user (the footer cannot tell).
	coarse := &Input{Users: []User{{Hash: 7, ID: "a", Rows: 8}, {Hash: 7, ID: "b", Rows: 3}}, Times: make([]int64, 11), Events: make([]uint32, 11), EventNames: []string{"e"}}
	r2, _ := streamWrite(t, WriterOptions{BlockRows: 8}, func(w *Writer) error { return w.AppendInput(coarse) })
	d2 := readAll(t, r2)
	_, err := openBytes(rebuildFooter(t, d2, func(m *Meta, _ []blockLayout) { m.Blocks[1].Continued = true; m.Users-- }))
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "does not continue") {
		t.Errorf("continued block of another id: %v", err)
	}

	// A continued user whose rows go back in time across the boundary:
	// block 1's times chunk rewritten to earlier times of the same
	// encoded size.
	back := &Input{Users: []User{{Hash: 7, ID: "a", Rows: 4}}, Times: []int64{1000, 1001, 1002, 1003}, Events: make([]uint32, 4), EventNames: []string{"e"}}
	r3, _ := streamWrite(t, WriterOptions{BlockRows: 2}, func(w *Writer) error { return w.AppendInput(back) })
	d3 := readAll(t, r3)
	c := r3.layouts[1].chunks[colTimes]
	var e encoder
	earlier, uv, _ := e.encodeTimes(nil, nil, []int64{900, 901}, []int{0, 2})
	if c.enc == encTimesUvarint {
		earlier = uv
	}
	if c.comp != compNone || len(earlier) != c.stored {
		t.Fatalf("times chunk of %d stored bytes (comp %d), the earlier times take %d", c.stored, c.comp, len(earlier))
	}
	copy(d3[c.off:], earlier)
	fixed := fixChecksums(d3)
	fixed = rebuildFooter(t, fixed, func(m *Meta, _ []blockLayout) {
		m.Blocks[1].MinTime, m.Blocks[1].MaxTime = 900, 901
		m.MinTime, m.MaxTime = minBlockTime(m.Blocks), maxBlockTime(m.Blocks)
	})
	if _, err := openBytes(fixed); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "does not continue") {
		t.Errorf("continued user back in time: %v", err)
	}
}

// TestWriterOrder: rows out of (hash, id, time) order are an error naming
// the user, not a file, and the Writer's error is sticky.
func TestWriterOrder(t *testing.T) {
	src := realisticInput(2, 200)
	path, _ := writeSeg(t, src, WriterOptions{})
	r := openSeg(t, path)
	var b Block
	all := []int{0, 1, 2}
	if err := r.ReadBlock(0, all, &b); err != nil {
		t.Fatal(err)
	}
	newW := func() (*Writer, *Remap) {
		w, err := NewWriter(&memFile{}, WriterOptions{Props: specsOf(src)})
		if err != nil {
			t.Fatal(err)
		}
		rm, err := w.NewRemap(r.Meta(), all)
		if err != nil {
			t.Fatal(err)
		}
		return w, rm
	}
	w, rm := newW()
	if err := w.AppendBlockRows(&b, 0, 1, rm); err == nil || !strings.Contains(err.Error(), "before StartUser") {
		t.Errorf("rows before StartUser: %v", err)
	}
	w, rm = newW()
	must(t, w.StartUser(5, []byte("b")))
	for _, k := range []struct {
		hash uint64
		id   string
	}{{5, "b"}, {5, "a"}, {4, "z"}} {
		w2, _ := newW()
		must(t, w2.StartUser(5, []byte("b")))
		if err := w2.StartUser(k.hash, []byte(k.id)); err == nil || !strings.Contains(err.Error(), "is not after") {
			t.Errorf("StartUser(%d, %q) after (5, b): %v", k.hash, k.id, err)
		}
		if err := w2.StartUser(9, []byte("z")); err == nil || !strings.Contains(err.Error(), "is not after") {
			t.Errorf("sticky error lost: %v", err)
		}
		w2.Abort()
	}
	// Times: rows of a user back in time within a call and across calls.
	u0 := int(b.UserStarts[1]) // user 0's rows
	if u0 < 2 || b.Times[0] == b.Times[u0-1] {
		t.Fatalf("user 0 has %d rows over one time", u0)
	}
	must(t, w.AppendBlockRows(&b, 1, u0, rm))
	if err := w.AppendBlockRows(&b, 0, 1, rm); err == nil || !strings.Contains(err.Error(), "not in time order") {
		t.Errorf("a row before the user's last: %v", err)
	}
	w.Abort()
	w, rm = newW()
	must(t, w.StartUser(5, []byte("b")))
	bb := b
	bb.Times = slices.Clone(b.Times)
	bb.Times[0], bb.Times[1] = bb.Times[1]+1, bb.Times[0]
	if err := w.AppendBlockRows(&bb, 0, 2, rm); err == nil || !strings.Contains(err.Error(), "not in time order") {
		t.Errorf("rows out of order within a call: %v", err)
	}
	if _, err := w.Close(); err == nil {
		t.Error("Close after an error succeeded")
	}
	// AppendInput: a first user before the current one, or a continued
	// one back in time, is refused before anything is appended.
	w, _ = newW()
	must(t, w.AppendInput(sliceInput(src, 0, 10)))
	if err := w.AppendInput(sliceInput(src, 0, 1)); err == nil || !strings.Contains(err.Error(), "not after the current user") && !strings.Contains(err.Error(), "before its last row") {
		t.Errorf("AppendInput of earlier rows: %v", err)
	}
	w.Abort()
	if err := w.AppendInput(src); err == nil {
		t.Error("AppendInput after Abort succeeded")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriterFirstUseDictionaries: codes are assigned at first sighting,
// across AppendInput calls whose inputs have dictionaries of their own
// (other orders, unused and repeated entries): the segment's
// dictionaries are in first-use order and every row reads back its own
// strings.
func TestWriterFirstUseDictionaries(t *testing.T) {
	ins := []*Input{
		{Users: []User{{Hash: 1, ID: "a", Rows: 3}}, Times: []int64{1, 2, 3}, Events: []uint32{2, 0, 2}, EventNames: []string{"x", "unused", "y"},
			Props: []PropColumn{{Name: "s", Type: event.TypeString, Present: []uint64{0b101}, Strs: []uint32{1, 7, 0}, Dict: []string{"p", "q"}}}},
		{Users: []User{{Hash: 2, ID: "b", Rows: 4}}, Times: []int64{1, 1, 1, 1}, Events: []uint32{0, 1, 2, 1}, EventNames: []string{"y", "z", "x"},
			Props: []PropColumn{{Name: "s", Type: event.TypeString, Present: []uint64{0b1111}, Strs: []uint32{0, 1, 2, 2}, Dict: []string{"r", "q", "p"}}}},
	}
	r, _ := streamWrite(t, WriterOptions{Props: []PropSpec{{Name: "s", Type: event.TypeString}}}, func(w *Writer) error {
		for _, in := range ins {
			if err := w.AppendInput(in); err != nil {
				return err
			}
		}
		return nil
	})
	m := r.Meta()
	if !slices.Equal(m.EventNames, []string{"y", "x", "z"}) || !slices.Equal(m.Props[0].Dict, []string{"q", "p", "r"}) {
		t.Fatalf("dictionaries %q and %q, want first-use order", m.EventNames, m.Props[0].Dict)
	}
	var b Block
	must(t, r.ReadBlock(0, []int{0}, &b))
	var evs, strs []string
	for i := range b.Rows {
		evs = append(evs, m.EventNames[b.Events[i]])
		if present(b.Props[0].Present, i) {
			strs = append(strs, m.Props[0].Dict[b.Props[0].Strs[i]])
		}
	}
	if !slices.Equal(evs, []string{"y", "x", "y", "y", "z", "x", "z"}) || !slices.Equal(strs, []string{"q", "p", "r", "q", "p", "p"}) {
		t.Fatalf("rows read back as %q and %q", evs, strs)
	}
}

// TestWriterRemapMerge merges random segments as a compaction does, with
// a Remap per input and AppendBlockRows per run of a user, and compares
// the output with the naive merge of their rows: users by (hash, id),
// each user's rows by (time, input).
func TestWriterRemapMerge(t *testing.T) {
	for seed := range uint64(25) {
		rng := rand.New(rand.NewPCG(seed, 5))
		// One hash for all inputs: ids, or coarse ones that collide.
		hash := hashID
		if seed%2 == 1 {
			hash = func(id string) uint64 { return hashID(id) >> 61 }
		}
		types := map[string]event.Type{"i": event.TypeInt, "f": event.TypeFloat, "s": event.TypeString, "b": event.TypeBool, "t": event.TypeTime}
		var readers []*Reader
		var evs []testEvent
		for k := range 1 + rng.IntN(4) {
			in := buildInput(inputEvents(randomInput(rand.New(rand.NewPCG(seed, uint64(k))))), types, hash)
			path, _ := writeSeg(t, in, WriterOptions{BlockRows: 1 + rng.IntN(200), MinZstdRatio: 1.01})
			readers = append(readers, openSeg(t, path))
			evs = append(evs, inputEvents(in)...)
		}
		want := buildInput(evs, types, hash)
		blockRows := 1 + rng.IntN(300)
		opt := WriterOptions{BlockRows: blockRows, SplitRows: blockRows, Props: specsOf(want), Identity: testIdentity}
		out, _ := streamWrite(t, opt, func(w *Writer) error { return mergeSegments(w, readers) })
		opt.Props = nil
		compareSegment(t, want, out, opt)
	}
}

// inputEvents returns the rows of in as events, in row order.
func inputEvents(in *Input) []testEvent {
	var evs []testEvent
	row := 0
	for _, u := range in.Users {
		for r := row; r < row+u.Rows; r++ {
			e := testEvent{user: u.ID, time: in.Times[r], name: in.EventNames[in.Events[r]], props: map[string]event.Value{}}
			for _, p := range in.Props {
				if !present(p.Present, r) {
					continue
				}
				switch p.Type {
				case event.TypeFloat:
					e.props[p.Name] = event.Float(p.Floats[r])
				case event.TypeString:
					e.props[p.Name] = event.String(p.Dict[p.Strs[r]])
				default:
					e.props[p.Name] = event.Value{Type: p.Type, Int: p.Ints[r]}
				}
			}
			evs = append(evs, e)
		}
		row += u.Rows
	}
	return evs
}

// mergeSegments appends the rows of rs to w as a compaction would: a
// cursor per input at its current user, the smallest key first, a user's
// runs from several inputs merged by time (ties to the earlier input).
// Each input's blocks are read whole, one at a time.
func mergeSegments(w *Writer, rs []*Reader) error {
	type cursor struct {
		r     *Reader
		rm    *Remap
		b     Block
		block int
		user  int
	}
	var cs []*cursor
	next := func(c *cursor) (bool, error) {
		for c.user++; c.user >= len(c.b.UserHashes); c.user = 0 {
			if c.block++; c.block >= len(c.r.Meta().Blocks) {
				return false, nil
			}
			all := make([]int, len(c.r.Meta().Props))
			for j := range all {
				all[j] = j
			}
			if err := c.r.ReadBlock(c.block, all, &c.b); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	for _, r := range rs {
		all := make([]int, len(r.Meta().Props))
		for j := range all {
			all[j] = j
		}
		rm, err := w.NewRemap(r.Meta(), all)
		if err != nil {
			return err
		}
		c := &cursor{r: r, rm: rm, block: -1, user: -1}
		if ok, err := next(c); err != nil {
			return err
		} else if ok {
			cs = append(cs, c)
		}
	}
	key := func(c *cursor) (uint64, string) { return c.b.UserHashes[c.user], string(c.b.UserID(c.user)) }
	for len(cs) > 0 {
		h, id := key(cs[0])
		for _, c := range cs[1:] {
			if ch, cid := key(c); ch < h || ch == h && cid < id {
				h, id = ch, cid
			}
		}
		if err := w.StartUser(h, []byte(id)); err != nil {
			return err
		}
		var group []*cursor
		for _, c := range cs {
			if ch, cid := key(c); ch == h && cid == id {
				group = append(group, c)
			}
		}
		// Runs: the part with the earliest head row gives rows up to the
		// next part's head (ties to the earlier input).
		pos := make([]int, len(group))
		for k, c := range group {
			pos[k] = int(c.b.UserStarts[c.user])
		}
		for {
			best := -1
			for k, c := range group {
				if pos[k] < int(c.b.UserStarts[c.user+1]) && (best < 0 || c.b.Times[pos[k]] < group[best].b.Times[pos[best]]) {
					best = k
				}
			}
			if best < 0 {
				break
			}
			c := group[best]
			end := pos[best] + 1
			for end < int(c.b.UserStarts[c.user+1]) {
				stop := false
				for k, o := range group {
					if k != best && pos[k] < int(o.b.UserStarts[o.user+1]) {
						if t := o.b.Times[pos[k]]; c.b.Times[end] > t || c.b.Times[end] == t && k < best {
							stop = true
						}
					}
				}
				if stop {
					break
				}
				end++
			}
			if err := w.AppendBlockRows(&c.b, pos[best], end, c.rm); err != nil {
				return err
			}
			pos[best] = end
		}
		// A user continued in an input's next block: take its rows there
		// too (the merge would; here blocks of whole users never do).
		kept := cs[:0]
		for _, c := range cs {
			if ch, cid := key(c); ch == h && cid == id {
				ok, err := next(c)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
			}
			kept = append(kept, c)
		}
		cs = kept
	}
	return nil
}

// TestWriterBigUser writes one user with 20M events (more than the 16 Mi
// rows a block may hold, and a user of version 3 could have), fed 1M rows
// per AppendInput call, and reads every row back: blocks of at most
// BlockRows rows, all after the first Continued, and the writer's memory
// bounded by its block whatever the rows.
func TestWriterBigUser(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes and reads 20M rows")
	}
	const rows, piece = 20_000_000, 1 << 20
	names := []string{"view", "click", "buy"}
	in := &Input{Times: make([]int64, piece), Events: make([]uint32, piece), EventNames: names,
		Props: []PropColumn{{Name: "n", Type: event.TypeInt, Present: make([]uint64, piece/64), Ints: make([]int64, piece)}}}
	timeOf := func(r int) int64 { return 1.7e15 + int64(r/3)*1e6 }
	var maxBytes int64
	r, info := streamWrite(t, WriterOptions{Props: specsOf(in), Identity: testIdentity}, func(w *Writer) error {
		for lo := 0; lo < rows; lo += piece {
			k := min(piece, rows-lo)
			in.Users = []User{{Hash: UserHash([]byte("whale")), ID: "whale", Rows: k}}
			in.Times, in.Events, in.Props[0].Ints = in.Times[:k], in.Events[:k], in.Props[0].Ints[:k]
			in.Props[0].Present = in.Props[0].Present[:(k+63)/64]
			for i := range k {
				in.Times[i], in.Events[i], in.Props[0].Ints[i] = timeOf(lo+i), uint32((lo+i)%3), int64(lo+i)
				if i%64 == 0 {
					in.Props[0].Present[i/64] = 0x5555555555555555
				}
			}
			if k%64 != 0 {
				in.Props[0].Present[k/64] &= 1<<(k%64) - 1
			}
			if err := w.AppendInput(in); err != nil {
				return err
			}
			maxBytes = max(maxBytes, w.Bytes())
		}
		return nil
	})
	m := r.Meta()
	if info.Rows != rows || m.Users != 1 || len(m.Blocks) != (rows+DefaultBlockRows-1)/DefaultBlockRows {
		t.Fatalf("%d rows, %d users, %d blocks", info.Rows, m.Users, len(m.Blocks))
	}
	if maxBytes > 16<<20 {
		t.Errorf("the writer held up to %d bytes for blocks of %d rows", maxBytes, DefaultBlockRows)
	}
	var b Block
	row := 0
	for i, bm := range m.Blocks {
		if bm.Continued != (i > 0) || bm.Users != 1 {
			t.Fatalf("block %d: continued %v, %d users", i, bm.Continued, bm.Users)
		}
		must(t, r.ReadBlock(i, []int{0}, &b))
		for k := range b.Rows {
			if b.Times[k] != timeOf(row) || b.Events[k] != uint32(row%3) || present(b.Props[0].Present, k) != (row%2 == 0) || row%2 == 0 && b.Props[0].Ints[k] != int64(row) {
				t.Fatalf("row %d (block %d row %d) reads back wrong", row, i, k)
			}
			row++
		}
	}
	t.Logf("20M rows of one user: %d blocks, %d bytes, writer memory up to %d bytes", len(m.Blocks), info.Bytes, maxBytes)
}

// TestWriterBytes: the Writer's memory grows with its dictionaries, not
// with the rows, and Bytes counts both.
func TestWriterBytes(t *testing.T) {
	w, err := NewWriter(&memFile{}, WriterOptions{BlockRows: 1000, Props: []PropSpec{{Name: "s", Type: event.TypeString}}})
	must(t, err)
	defer w.Abort()
	in := &Input{Times: make([]int64, 1000), Events: make([]uint32, 1000), EventNames: []string{"e"},
		Props: []PropColumn{{Name: "s", Type: event.TypeString, Present: allPresent(1000), Strs: make([]uint32, 1000), Dict: []string{"same"}}}}
	var after []int64
	for k := range 30 {
		in.Users = []User{{Hash: uint64(k), ID: fmt.Sprint(k), Rows: 1000}}
		must(t, w.AppendInput(in))
		after = append(after, w.Bytes())
	}
	// Each block adds its footer record (about 60 bytes here) and no more.
	if grown := after[29] - after[2]; grown > 27*100 {
		t.Errorf("Bytes grew from %d to %d with the rows alone", after[2], after[29])
	}
	dict := make([]string, 1000)
	for i := range dict {
		dict[i] = fmt.Sprintf("value %d, a little long to count", i)
		in.Props[0].Strs[i] = uint32(i)
	}
	in.Props[0].Dict = dict
	in.Users = []User{{Hash: 100, ID: "x", Rows: 1000}}
	must(t, w.AppendInput(in))
	if grown := w.Bytes() - after[29]; grown < 1000*(30+dictEntryBytes) {
		t.Errorf("1,000 new strings grew Bytes by %d", grown)
	}
}

// TestWriterNoAllocs: appending rows allocates nothing in steady state,
// for AppendBlockRows (a compaction) and AppendInput (an import flush).
func TestWriterNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	src := realisticInput(4, 20_000)
	path, _ := writeSeg(t, src, WriterOptions{BlockRows: 4096})
	r := openSeg(t, path)
	w, err := NewWriter(&memFile{}, WriterOptions{BlockRows: 4096, Props: specsOf(src)})
	must(t, err)
	defer w.Abort()
	rm, err := w.NewRemap(r.Meta(), []int{0, 1, 2})
	must(t, err)
	var b Block
	must(t, r.ReadBlock(0, []int{0, 1, 2}, &b))
	hash := uint64(0)
	appendUsers := func() {
		for u := range len(b.UserHashes) {
			hash++
			if err := w.StartUser(hash, b.UserID(u)); err != nil {
				t.Fatal(err)
			}
			if err := w.AppendBlockRows(&b, int(b.UserStarts[u]), int(b.UserStarts[u+1]), rm); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 20 { // warm up: grow the buffers and write blocks
		appendUsers()
	}
	if allocs := testing.AllocsPerRun(20, appendUsers); allocs != 0 {
		t.Errorf("AppendBlockRows of a block's users allocates %.1f times", allocs)
	}
	in := sliceInput(src, 0, 5000)
	base := uint64(1 << 40)
	appendInput := func() {
		base++
		for i := range in.Users {
			in.Users[i].Hash = base<<16 + uint64(i)
		}
		if err := w.AppendInput(in); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		appendInput()
	}
	if allocs := testing.AllocsPerRun(20, appendInput); allocs != 0 {
		t.Errorf("AppendInput of 5,000 rows allocates %.1f times", allocs)
	}
}
