package segment

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/spurdb/spur/event"
)

// Fuzz targets: every decoder of the package (footer, each chunk kind, the
// whole file) must return an error, never panic, on arbitrary bytes; and
// every encoder must round-trip arbitrary values. Decoders are run both on
// a tight buffer (portable unpacking) and on one with spare capacity
// (vectorised unpacking) and must agree.

// padded returns a copy of b with unpackPadding bytes of spare capacity
// filled with garbage (unpack must ignore it).
func padded(b []byte) []byte {
	p := make([]byte, len(b), len(b)+unpackPadding)
	copy(p, b)
	for i := len(b); i < cap(p); i++ {
		p[:cap(p)][i] = 0xa5
	}
	return p
}

// tight returns a copy of b without spare capacity.
func tight(b []byte) []byte { return slices.Clip(slices.Clone(b)) }

// seedSegment writes in and returns the file bytes.
func seedSegment(f *testing.F, in *Input, opt WriterOptions) []byte {
	path := filepath.Join(f.TempDir(), "seed")
	if _, err := Write(path, in, opt); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return data
}

// seedSegments returns a few small valid segment files (small, because
// the fuzzer minimises every interesting input at ~1 ms per execution),
// among them one with an identity and users continued across blocks.
func seedSegments(f *testing.F) [][]byte {
	in := bytesInput([]byte("a few rows of arbitrary bytes to seed the fuzzer: \x00\x01\xff"))
	return [][]byte{
		seedSegment(f, realisticInput(11, 40), WriterOptions{BlockRows: 16, MinZstdRatio: 1.01}),
		seedSegment(f, in, WriterOptions{BlockRows: 2}),
		seedSegment(f, &Input{}, WriterOptions{}),
		seedSegment(f, realisticInput(12, 30), WriterOptions{BlockRows: 4, SplitRows: 4, Created: 1, Identity: Identity{Kind: KindUsers, Shard: 3, Shards: 4, Generation: 7, SeqMin: 2, SeqMax: 9}}),
	}
}

// splitFile returns the footer bytes and offset of a segment file, or
// ok=false when the trailer does not describe a footer inside the file.
func splitFile(data []byte) (footer []byte, off int64, ok bool) {
	if len(data) < headerSize+trailerSize {
		return nil, 0, false
	}
	tr := data[len(data)-trailerSize:]
	fo, fl := binary.LittleEndian.Uint64(tr), binary.LittleEndian.Uint64(tr[8:])
	end := uint64(len(data) - trailerSize)
	if fo < headerSize || fo > end || fl != end-fo {
		return nil, 0, false
	}
	return data[fo:end], int64(fo), true
}

// FuzzFooter decodes arbitrary footer bytes as a footer of format
// version 1 + version%Version at file offset headerSize + off%2^24: a
// footer that decodes must re-encode to the same bytes, which decode to
// the same Meta, and a failure must be a corruption error inside the
// footer.
func FuzzFooter(f *testing.F) {
	for _, seg := range seedSegments(f) {
		footer, off, _ := splitFile(seg)
		f.Add(footer, uint32(off-headerSize), uint8(Version-1))
	}
	f.Add([]byte{}, uint32(0), uint8(0))
	f.Add([]byte{0x80, 0x80, 0x80}, uint32(8), uint8(3))
	f.Fuzz(func(t *testing.T, footer []byte, off uint32, version uint8) {
		base := headerSize + int64(off%(1<<24))
		v := 1 + version%Version
		m, layouts, err := decodeFooter(footer, base, v)
		if err != nil {
			if m != nil || layouts != nil || err.Offset < base || err.Offset > base+int64(len(footer)) {
				t.Fatalf("failed decode returned meta or an offset %d outside the footer: %v", err.Offset, err)
			}
			return
		}
		// A decoded footer re-encodes to the same bytes (the decoder is
		// strict: it reads every value as the bytes say), which decode
		// identically.
		again := appendFooter(nil, m, layouts)
		if !bytes.Equal(again, footer) {
			t.Fatalf("footer re-encodes to other bytes:\n%x\n%x", footer, again)
		}
		m2, layouts2, err := decodeFooter(again, base, v)
		if err != nil {
			t.Fatalf("re-encoded footer does not decode: %v", err)
		}
		if !reflect.DeepEqual(m, m2) || !reflect.DeepEqual(layouts, layouts2) {
			t.Fatal("footer changed in a decode/encode/decode round trip")
		}
	})
}

// fixChecksums rebuilds a segment file around data's footer (if it
// decodes, ignoring its checksum) with correct chunk, footer and trailer
// checksums, so that the chunk decoders see data's chunk bytes. It returns
// nil when data has no decodable footer or declares blocks of more than
// 1<<16 rows (the reader's allocation is proportional to the rows the
// footer declares, up to MaxBlockRows; this bounds the fuzzer's memory).
func fixChecksums(data []byte) []byte {
	footer, off, ok := splitFile(data)
	if !ok {
		return nil
	}
	m, layouts, err := decodeFooter(footer, off, Version)
	if err != nil {
		return nil
	}
	for i := range m.Blocks {
		if m.Blocks[i].Rows > 1<<16 {
			return nil
		}
		for j := range layouts[i].chunks {
			c := &layouts[i].chunks[j]
			c.crc = crc(data[c.off : c.off+int64(c.stored)])
		}
	}
	out := slices.Clone(data[:off])
	out[0] = Version
	copy(out[1:], headerMagic)
	footer = appendFooter(nil, m, layouts)
	out = append(out, footer...)
	var tr [trailerSize]byte
	binary.LittleEndian.PutUint64(tr[0:], uint64(off))
	binary.LittleEndian.PutUint64(tr[8:], uint64(len(footer)))
	binary.LittleEndian.PutUint32(tr[16:], crc(footer))
	binary.LittleEndian.PutUint32(tr[20:], crc(tr[:20]))
	tr[24] = Version
	copy(tr[25:], trailerMagic)
	return append(out, tr[:]...)
}

// FuzzReadBlock opens arbitrary bytes as a segment (with fix, after
// fixChecksums: the footer of version Version, with checksums made right,
// so that the chunk decoders see the bytes), reads every block every way
// and verifies the file: errors must be corruption, never a panic, and
// the reads of a block that decodes must agree.
func FuzzReadBlock(f *testing.F) {
	for _, seg := range seedSegments(f) {
		f.Add(seg, false)
		f.Add(seg, true)
	}
	f.Add([]byte("\x01SPURSEG"), false)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			if data = fixChecksums(data); data == nil {
				return
			}
		}
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), "fuzz")
		if fix && err != nil {
			t.Fatalf("Open of a file with fixed checksums: %v", err)
		}
		if err != nil {
			if !isCorruption(err) && !errors.Is(err, ErrNewerVersion) {
				t.Fatalf("NewReader: %v, neither corruption nor a newer version", err)
			}
			return
		}
		defer r.Close()
		m := r.Meta()
		all := make([]int, len(m.Props))
		for j := range all {
			all[j] = j
		}
		var b Block
		for i := range m.Blocks {
			if err := r.ReadBlock(i, all, &b); err != nil {
				if !isCorruption(err) {
					t.Fatalf("ReadBlock %d: non-corruption error %v", i, err)
				}
				continue
			}
			checkBlockShape(t, m, i, all, &b)
			// The other reads of a block that decodes: the same outcome,
			// and the same times.
			var p, d Block
			keys := Keys(i % 3)
			if err := r.ReadBlockPacked(i, all, keys, &p); err != nil {
				t.Fatalf("ReadBlockPacked %d: %v after ReadBlock succeeded", i, err)
			}
			checkKeys(t, i, keys, &p, &b)
			if err := r.ReadBlockDeltas(i, all, &d); err != nil {
				t.Fatalf("ReadBlockDeltas %d: %v after ReadBlock succeeded", i, err)
			}
			for u := range len(b.UserStarts) - 1 {
				s, e := int(b.UserStarts[u]), int(b.UserStarts[u+1])
				if got, want := p.SumDeltas(s, e), d.SumDeltas(s, e); got != want {
					t.Fatalf("block %d user %d: packed deltas sum to %d, decoded to %d", i, u, got, want)
				}
			}
			if p.UnpackDeltas(); !slices.Equal(p.Deltas, d.Deltas) {
				t.Fatalf("block %d: UnpackDeltas differs from ReadBlockDeltas", i)
			}
			if err := r.ReadBlockNoTimes(i, all, KeysAll, &p); err != nil || !slices.Equal(p.Events, b.Events) {
				t.Fatalf("ReadBlockNoTimes %d: %v after ReadBlock succeeded", i, err)
			}
		}
		if err := r.Verify(); err != nil && !isCorruption(err) {
			t.Fatalf("Verify: non-corruption error %v", err)
		}
	})
}

// checkBlockShape checks the slice lengths and code ranges a successful
// ReadBlock promises.
func checkBlockShape(t *testing.T, m *Meta, i int, props []int, b *Block) {
	bm := &m.Blocks[i]
	if b.Rows != bm.Rows || len(b.UserHashes) != bm.Users || len(b.UserStarts) != bm.Users+1 || len(b.UserIDOffsets) != bm.Users+1 ||
		len(b.Times) != b.Rows || len(b.Events) != b.Rows || len(b.Props) != len(props) || int(b.UserStarts[bm.Users]) != b.Rows ||
		int(b.UserIDOffsets[bm.Users]) != len(b.UserIDBytes) {
		t.Fatalf("block %d: bad shape", i)
	}
	for _, c := range b.Events {
		if int(c) >= len(m.EventNames) {
			t.Fatalf("block %d: event code %d out of range", i, c)
		}
	}
	for j, p := range props {
		if pm := &m.Props[p]; pm.Type == event.TypeString {
			for r, c := range b.Props[j].Strs {
				if present(b.Props[j].Present, r) && int(c) >= len(pm.Dict) {
					t.Fatalf("block %d prop %q: code %d out of range", i, pm.Name, c)
				}
			}
		}
	}
}

// isCorruption reports whether err is a *CorruptionError.
func isCorruption(err error) bool {
	var ce *CorruptionError
	return errors.As(err, &ce)
}

// fuzzBlock returns a Block shaped as rows rows of users users (rows split
// evenly), as decodeUsers would leave it.
func fuzzBlock(rows, users int) *Block {
	b := &Block{Rows: rows, UserStarts: make([]int32, users+1)}
	for u := range users + 1 {
		b.UserStarts[u] = int32(u * rows / users)
	}
	return b
}

func FuzzDecodeUsers(f *testing.F) {
	users := []User{{Hash: 3, ID: "a", Rows: 2}, {Hash: 9, ID: "bb", Rows: 1}, {Hash: math.MaxUint64, ID: "", Rows: 300}}
	var e encoder
	raw, enc := e.encodeUsers(nil, usersBlock(users), DefaultMinZstdRatio)
	f.Add(raw, enc, uint32(303), uint32(3), uint64(3), uint64(math.MaxUint64))
	users = []User{{ID: "u1", Rows: 2}, {ID: "u0", Rows: 1}, {ID: "u2", Rows: 300}}
	for i := range users {
		users[i].Hash = UserHash([]byte(users[i].ID))
	}
	slices.SortFunc(users, func(a, b User) int { return cmp.Compare(a.Hash, b.Hash) })
	raw, enc = e.encodeUsers(nil, usersBlock(users), DefaultMinZstdRatio)
	f.Add(raw, enc, uint32(303), uint32(3), users[0].Hash, users[2].Hash)
	f.Add([]byte{}, uint8(encUsers), uint32(1), uint32(1), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, raw []byte, enc uint8, rows, users uint32, first, last uint64) {
		r, u := 1+int(rows%100000), 1+int(users%1000)
		if u > r || enc != encUsers && enc != encUsersIDs {
			return
		}
		var b1, b2, b3 Block
		err1 := decodeUsers(enc, tight(raw), r, u, first, last, &b1, KeysAll)
		err2 := decodeUsers(enc, padded(raw), r, u, first, last, &b2, KeysAll)
		if (err1 == nil) != (err2 == nil) || err1 == nil && (!slices.Equal(b1.UserHashes, b2.UserHashes) || !slices.Equal(b1.UserStarts, b2.UserStarts)) {
			t.Fatalf("padded and tight decodes differ: %v / %v", err1, err2)
		}
		if err1 == nil {
			for i := 1; i < u; i++ {
				if c := cmp.Or(cmp.Compare(b1.UserHashes[i-1], b1.UserHashes[i]), bytes.Compare(b1.UserID(i-1), b1.UserID(i))); c > 0 || c == 0 && enc == encUsersIDs {
					t.Fatalf("users %d and %d out of (hash, id) order", i-1, i)
				}
			}
			if enc == encUsersIDs && b1.UserHashes[u-1] != UserHash(b1.UserID(u-1)) {
				t.Fatalf("user %d hash %#x, want the id's", u-1, b1.UserHashes[u-1])
			}
		}
		// Without keys: the same row counts whenever the full decode
		// succeeds (it checks more, so it may fail where this does not).
		err3 := decodeUsers(enc, tight(raw), r, u, first, last, &b3, KeysNone)
		if err1 == nil && (err3 != nil || !slices.Equal(b1.UserStarts, b3.UserStarts) || len(b3.UserHashes) != 0) {
			t.Fatalf("decode without keys: %v, starts %v, want %v", err3, b3.UserStarts, b1.UserStarts)
		}
		// With the ids only: the same ids and starts (it checks less).
		var b4 Block
		if err4 := decodeUsers(enc, tight(raw), r, u, first, last, &b4, KeysIDs); err1 == nil {
			if err4 != nil {
				t.Fatalf("decode with ids: %v", err4)
			}
			checkKeys(t, 0, KeysIDs, &b4, &b1)
		}
	})
}

func FuzzDecodeTimes(f *testing.F) {
	var e encoder
	times := []int64{5e6, 9e6, 9e6, 1e6, math.MaxInt64}
	pfor, uv, enc := e.encodeTimes(nil, nil, times, []int{0, 3, 5})
	f.Add(pfor, enc, uint32(5), uint32(2))
	f.Add(uv, uint8(encTimesUvarint), uint32(5), uint32(2))
	f.Add([]byte{1, 0, 0, 1, 0xff, 0xff}, uint8(encTimesPFOR), uint32(3000), uint32(7))
	for _, ratio := range []float64{-1, math.Inf(1)} {
		e := encoder{pforBitmapRatio: ratio}
		pfor, _, enc := e.encodeTimes(nil, nil, times, []int{0, 3, 5})
		f.Add(pfor, enc, uint32(5), uint32(2))
	}
	f.Fuzz(func(t *testing.T, raw []byte, enc uint8, rows, users uint32) {
		r, u := 1+int(rows%100000), 1+int(users%1000)
		if u > r || enc != encTimesPFOR && enc != encTimesUvarint && enc != encTimesPFORBits {
			return
		}
		b1, b2 := fuzzBlock(r, u), fuzzBlock(r, u)
		err1 := decodeTimes(enc, tight(raw), b1)
		err2 := decodeTimes(enc, padded(raw), b2)
		if (err1 == nil) != (err2 == nil) || err1 == nil && !slices.Equal(b1.Times, b2.Times) {
			t.Fatalf("padded and tight decodes differ: %v / %v", err1, err2)
		}
		b3 := fuzzBlock(r, u)
		err3 := decodeDeltas(enc, padded(raw), b3)
		if (err1 == nil) != (err3 == nil) || err1 == nil && !slices.Equal(b1.Times, deltaTimes(b3)) {
			t.Fatalf("decodeDeltas disagrees with decodeTimes: %v / %v", err3, err1)
		}
	})
}

// deltaTimes sums a ReadBlockDeltas block's deltas into times, as the
// Block documentation defines them.
func deltaTimes(b *Block) []int64 {
	out := make([]int64, len(b.Deltas))
	for u := 0; u+1 < len(b.UserStarts); u++ {
		t := b.TimeBase
		for r := b.UserStarts[u]; r < b.UserStarts[u+1]; r++ {
			t += int64(b.Deltas[r] * b.TimeGCD)
			out[r] = t
		}
	}
	return out
}

func FuzzDecodeEvents(f *testing.F) {
	var e encoder
	tightEnc, aligned := e.encodeEvents(nil, nil, []uint32{0, 5, 2, 2, 7, 1, 0, 0, 3})
	f.Add(tightEnc, uint32(9), uint32(8))
	f.Add(aligned, uint32(9), uint32(6))
	f.Add([]byte{16, 0xff, 0xff}, uint32(1), uint32(65535))
	f.Add([]byte{11, 0xff, 0xff, 0xff}, uint32(2), uint32(1000))
	tightEnc, aligned = e.encodeEvents(nil, nil, []uint32{69999, 5, 1 << 17, 0})
	f.Add(tightEnc, uint32(4), uint32(70000))
	f.Add(aligned, uint32(4), uint32(1<<17+1))
	f.Add([]byte{32, 0xff, 0xff, 0xff, 0xff}, uint32(1), uint32(1<<31-2))
	f.Fuzz(func(t *testing.T, raw []byte, rows, names uint32) {
		r, n := 1+int(rows%100000), 1+int(names%MaxEventNames)
		b1, b2 := &Block{Rows: r}, &Block{Rows: r}
		err1 := decodeEvents(tight(raw), n, b1)
		err2 := decodeEvents(padded(raw), n, b2)
		if (err1 == nil) != (err2 == nil) || err1 == nil && !slices.Equal(b1.Events, b2.Events) {
			t.Fatalf("padded and tight decodes differ: %v / %v", err1, err2)
		}
		if err1 == nil {
			for _, c := range b1.Events {
				if int(c) >= n {
					t.Fatalf("code %d accepted with %d names", c, n)
				}
			}
		}
	})
}

func FuzzDecodeProp(f *testing.F) {
	var e encoder
	n := 100
	bm := make([]uint64, 2)
	ints := make([]int64, n)
	floats := make([]float64, n)
	strs := make([]uint32, n)
	for r := range n {
		if r%3 != 0 {
			bm[r/64] |= 1 << (r % 64)
		}
		ints[r], floats[r], strs[r] = int64(r*r)-50, float64(r)/4, uint32(r%7)
	}
	for _, col := range []struct {
		typ event.Type
		pb  propBuf
	}{
		{event.TypeInt, propBuf{present: bm, ints: ints}},
		{event.TypeFloat, propBuf{present: bm, floats: floats}},
		{event.TypeFloat, propBuf{present: allPresent(n), floats: append(floats[:n-1:n-1], math.NaN())}},
		{event.TypeString, propBuf{present: bm, strs: strs}},
		{event.TypeTime, propBuf{present: allPresent(n), ints: ints}},
	} {
		raw, enc := e.encodeProp(nil, &col.pb, col.typ, n)
		f.Add(raw, enc, uint8(col.typ), uint32(7), uint32(n))
	}
	f.Fuzz(func(t *testing.T, raw []byte, enc, typ uint8, dictLen, rows uint32) {
		r := 1 + int(rows%100000)
		ty := event.Type(1 + typ%5)
		if !validEnc(colProps, ty, enc) {
			return
		}
		var pd1, pd2 PropData
		var s1, s2 []uint64
		err1 := decodeProp(enc, tight(raw), ty, int(dictLen), r, &pd1, &s1, false)
		err2 := decodeProp(enc, padded(raw), ty, int(dictLen), r, &pd2, &s2, false)
		if (err1 == nil) != (err2 == nil) || err1 == nil && !reflect.DeepEqual(pd1, pd2) && !hasNaN(pd1.Floats) {
			t.Fatalf("padded and tight decodes differ: %v / %v", err1, err2)
		}
		// Compact (ReadBlockPacked): the same outcome, and every present
		// row's value at Index(r).
		var pc PropData
		var sc []uint64
		errC := decodeProp(enc, padded(raw), ty, int(dictLen), r, &pc, &sc, true)
		if (errC == nil) != (err1 == nil) {
			t.Fatalf("compact decode: %v, full decode: %v", errC, err1)
		}
		if errC != nil {
			return
		}
		if !slices.Equal(pc.Present, pd1.Present) {
			t.Fatalf("compact presence differs")
		}
		for row := range r {
			if pd1.Present[row>>6]>>(row&63)&1 == 0 {
				continue
			}
			i := pc.Index(row)
			if len(pd1.Ints) > 0 && pc.Ints[i] != pd1.Ints[row] || len(pd1.Strs) > 0 && pc.Strs[i] != pd1.Strs[row] ||
				len(pd1.Floats) > 0 && math.Float64bits(pc.Floats[i]) != math.Float64bits(pd1.Floats[row]) {
				t.Fatalf("row %d: compact value at %d differs", row, i)
			}
		}
	})
}

func hasNaN(fs []float64) bool { return slices.ContainsFunc(fs, math.IsNaN) }

func FuzzBitpack(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, uint8(3))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(64))
	f.Fuzz(func(t *testing.T, data []byte, width uint8) {
		w := uint(width % 65)
		vals := make([]uint64, len(data)/3)
		for i := range vals {
			vals[i] = binary.LittleEndian.Uint64(append(data[i*3:i*3+3:i*3+3], make([]byte, 5)...)) * 0x9e3779b97f4a7c15
		}
		packed := appendPacked(nil, vals, w)
		if len(packed) != packedLen(len(vals), w) {
			t.Fatalf("%d packed bytes, want %d", len(packed), packedLen(len(vals), w))
		}
		mask := uint64(1)<<w - 1
		for _, src := range [][]byte{tight(packed), padded(packed)} {
			got := make([]uint64, len(vals))
			unpack(got, src, w)
			got32 := make([]uint32, len(vals))
			if w <= 32 {
				unpack(got32, src, w)
			}
			for i, v := range vals {
				if got[i] != v&mask || w <= 32 && uint64(got32[i]) != v&mask {
					t.Fatalf("value %d at width %d: %#x / %#x, want %#x", i, w, got[i], got32[i], v&mask)
				}
			}
		}
	})
}

// FuzzRoundTrip builds an Input from arbitrary bytes and requires it to
// write, verify and read back exactly (this covers every encoder's choice
// on adversarial value distributions), with blocks of whole users or,
// when the top bit of blockRows is set, users continued across blocks.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("seed"), uint16(3))
	f.Add(make([]byte, 64), uint16(1))
	f.Add([]byte{0xff, 0xfe, 0x80, 0x7f, 0x00, 0x01, 0x02, 0x03, 0x04}, uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, blockRows uint16) {
		in := bytesInput(data)
		opt := WriterOptions{BlockRows: 1 + int(blockRows%300), MinZstdRatio: 1.01}
		if blockRows&0x8000 != 0 {
			opt.SplitRows = opt.BlockRows // users continue across blocks
		}
		roundTrip(t, in, opt)
	})
}

// bytesInput derives a valid Input from data: each 9-byte record is a row
// (user step, time delta, event, and values for an int, a float and a
// string column present on some rows).
func bytesInput(data []byte) *Input {
	var evs []testEvent
	user, t := 0, int64(0)
	for i := 0; i+9 <= len(data); i += 9 {
		d := data[i : i+9]
		if d[0]&3 == 0 {
			user++
			t = int64(binary.LittleEndian.Uint32(d[1:5])) << (d[0] >> 2 & 31)
		} else {
			t += int64(d[1]) << (d[2] % 48)
		}
		props := map[string]event.Value{}
		raw := int64(binary.LittleEndian.Uint64(d[1:9]))
		if d[0]&4 != 0 {
			props["i"] = event.Int(raw >> (d[8] % 64))
		}
		if d[0]&8 != 0 {
			props["f"] = event.Float(math.Float64frombits(uint64(raw)))
			if d[0]&16 != 0 {
				props["f"] = event.Float(float64(raw%100000) / 100)
			}
		}
		if d[0]&32 != 0 {
			props["s"] = event.String(string(d[5 : 5+d[4]%4]))
		}
		evs = append(evs, testEvent{user: string(rune('a' + user%26)), time: t, name: string(rune('A' + d[3]%40)), props: props})
	}
	return buildInput(evs, map[string]event.Type{"i": event.TypeInt, "f": event.TypeFloat, "s": event.TypeString}, hashID)
}

// checkKeys checks block i's keys as read with keys into got against
// want, read with KeysAll: none, or the same ids and starts with the same
// hashes or (KeysIDs) none but UserHash of each id.
func checkKeys(t *testing.T, i int, keys Keys, got, want *Block) {
	t.Helper()
	if !slices.Equal(got.UserStarts, want.UserStarts) {
		t.Fatalf("block %d keys %d: starts %v, want %v", i, keys, got.UserStarts, want.UserStarts)
	}
	if keys == KeysNone {
		if len(got.UserHashes)+len(got.UserIDOffsets)+len(got.UserIDBytes) != 0 {
			t.Fatalf("block %d: KeysNone read decoded hashes or ids", i)
		}
		return
	}
	if !slices.Equal(got.UserIDOffsets, want.UserIDOffsets) || !bytes.Equal(got.UserIDBytes, want.UserIDBytes) {
		t.Fatalf("block %d keys %d: ids differ from KeysAll's", i, keys)
	}
	if len(got.UserHashes) > 0 || keys == KeysAll {
		if !slices.Equal(got.UserHashes, want.UserHashes) {
			t.Fatalf("block %d keys %d: hashes differ from KeysAll's", i, keys)
		}
		return
	}
	for u := range want.UserHashes {
		if UserHash(got.UserID(u)) != want.UserHashes[u] {
			t.Fatalf("block %d: user %d's hash %#x is not UserHash of its id", i, u, want.UserHashes[u])
		}
	}
}
