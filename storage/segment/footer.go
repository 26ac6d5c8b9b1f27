package segment

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/bin"
)

// PropMeta describes one property column of a segment. Dict is the
// string dictionary of a TypeString column (unique, every entry used by
// some row; in the order the writer first met the values since version
// 4, ascending before); nil for other types.
type PropMeta struct {
	Name string
	Type event.Type
	Dict []string
}

// BlockMeta describes one block: a run of users, of which the first may
// continue the previous block's last user (Continued) and the last may
// continue in the next block.
//
// Rows and Users count the block's rows and users (a continued user
// counts in every block it has rows in). FirstHash and LastHash are the
// hashes of its first and last user; MinTime and MaxTime the exact
// minimum and maximum row time (UTC microseconds); Events a bitset over
// event codes (bit c%64 of word c/64, (len(Meta.EventNames)+63)/64
// words) with a bit set for each code that occurs in the block.
// Continued (format version 4) reports that the block's first user is
// the previous block's last user (same hash and id), whose rows go on
// here in time order: a user with more rows than a block holds spans
// consecutive blocks.
type BlockMeta struct {
	Rows, Users         int
	FirstHash, LastHash uint64
	MinTime, MaxTime    int64
	Events              []uint64 // bitset over event codes present in the block
	Continued           bool
}

// ColumnStats is per-column storage accounting for spur inspect. Name is
// "$user", "$time", "$event" or a property name; Encoding lists the
// distinct chunk encodings used by the column's chunks, e.g.
// "gcd-delta-uvarint+zstd" ("+zstd" marks compressed chunks; several are
// separated by "; "). CompressedBytes is the bytes stored on disk and
// RawBytes the bytes after decompression (the encoded chunk), both summed
// over all blocks.
type ColumnStats struct {
	Name            string
	Encoding        string
	CompressedBytes int64
	RawBytes        int64
}

// Kind says what a segment holds (the footer's kind byte, format
// version 4).
type Kind uint8

const (
	// KindNone: the segment does not say (a file of format version 1 to
	// 3, or one written without an Identity).
	KindNone Kind = 0
	// KindEvents: events of one shard.
	KindEvents Kind = 1
	// KindUsers: user property writes ("$set" rows) of one shard.
	KindUsers Kind = 2
)

// String returns "events", "users" or "none".
func (k Kind) String() string {
	switch k {
	case KindEvents:
		return "events"
	case KindUsers:
		return "users"
	case KindNone:
		return "none"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MaxShards is the largest shard count an Identity may name.
const MaxShards = 1 << 16

// maxCreated bounds Meta.Created: the first microsecond of the year 10000
// (UTC).
const maxCreated = 253402300800 * 1e6

// Identity is what a segment says about its place in its app, so that a
// store can rebuild its catalog from the footers alone (docs/storage.md §3).
// The zero Identity (Kind KindNone) means none: files of format versions
// 1 to 3 and files written without one. Otherwise Kind is KindEvents or
// KindUsers; Shards is the app's shard count, a power of two in
// [1, MaxShards], and Shard the segment's shard index in [0, Shards);
// Generation is the catalog generation the writing operation intends to
// publish (any value); SeqMin ≤ SeqMax (both ≥ 0) are the arrival ranks of
// the segment's rows: equal for the output of one flush or import run, the
// range of its inputs' ranks for a compaction output.
type Identity struct {
	Kind           Kind
	Shard, Shards  int
	Generation     uint64
	SeqMin, SeqMax int64
}

// check returns an error naming the first field out of range, or nil.
func (id *Identity) check() error {
	if id.Kind == KindNone {
		if *id != (Identity{}) {
			return fmt.Errorf("identity without a kind has shard %d of %d, generation %d, seq %d..%d (want all 0)", id.Shard, id.Shards, id.Generation, id.SeqMin, id.SeqMax)
		}
		return nil
	}
	switch {
	case id.Kind > KindUsers:
		return fmt.Errorf("identity kind %d is not events (1) or users (2)", id.Kind)
	case id.Shards < 1 || id.Shards > MaxShards || id.Shards&(id.Shards-1) != 0:
		return fmt.Errorf("identity shard count %d is not a power of two in [1, %d]", id.Shards, MaxShards)
	case id.Shard < 0 || id.Shard >= id.Shards:
		return fmt.Errorf("identity shard %d is outside [0, %d)", id.Shard, id.Shards)
	case id.SeqMin < 0 || id.SeqMin > id.SeqMax:
		return fmt.Errorf("identity seq range %d..%d is not 0 ≤ min ≤ max", id.SeqMin, id.SeqMax)
	}
	return nil
}

// Meta is the decoded footer of a segment.
//
// Version is the file's format version. Identity and Created (UTC
// microseconds, when the writer started; > 0) are those the writer was
// given (format version 4; zero in older files). Rows and Users count
// rows and distinct users; MinTime and MaxTime are the exact minimum and
// maximum row time in UTC microseconds (both 0 for an empty segment).
// EventNames is the event dictionary (unique, each used; in the order
// the writer first met the names since version 4, ascending before):
// Block.Events holds codes into it, and EventRows[c] is the number of
// rows with code c. Props describes the property columns in chunk order
// (ReadBlock's props are indexes into it). Blocks describes the blocks in
// file order (non-decreasing user hash). Columns has one entry per
// column: "$user", "$time", "$event", then Props in order.
type Meta struct {
	Version          uint8
	Identity         Identity
	Created          int64
	Rows, Users      int64
	MinTime, MaxTime int64
	EventNames       []string
	EventRows        []int64
	Props            []PropMeta
	Blocks           []BlockMeta
	Columns          []ColumnStats
}

// chunkMeta is the footer record of one column chunk.
type chunkMeta struct {
	off    int64  // file offset of the stored bytes
	stored int    // bytes on disk
	raw    int    // bytes after decompression
	crc    uint32 // CRC-32C of the stored bytes
	enc    uint8  // encoding, see codec.go
	comp   uint8  // compNone or compZstd
}

// blockLayout is where a block's chunks are: chunks[colUsers], ...,
// chunks[colProps+j] for property j.
type blockLayout struct {
	chunks []chunkMeta
}

// Block record flags (format version 4).
const (
	flagContinued = 1 // BlockMeta.Continued
	knownFlags    = flagContinued
)

// appendFooter appends the footer encoding of m and its block layouts in
// format version m.Version (layout in doc.go). m.Columns is not stored:
// it follows from the chunk records.
func appendFooter(dst []byte, m *Meta, layouts []blockLayout) []byte {
	dst = appendFooterHead(dst, m, len(m.Blocks))
	for i := range m.Blocks {
		dst = appendBlockRecord(dst, m.Version, &m.Blocks[i], layouts[i].chunks)
	}
	return dst
}

// appendFooterHead appends the footer up to and including the block
// count nBlocks, in format version m.Version; the block records follow.
func appendFooterHead(dst []byte, m *Meta, nBlocks int) []byte {
	if m.Version >= 4 {
		id := &m.Identity
		dst = append(dst, byte(id.Kind))
		dst = binary.AppendUvarint(dst, uint64(id.Shards))
		dst = binary.AppendUvarint(dst, uint64(id.Shard))
		dst = binary.AppendUvarint(dst, id.Generation)
		dst = binary.AppendUvarint(dst, uint64(id.SeqMin))
		dst = binary.AppendUvarint(dst, uint64(id.SeqMax))
		dst = binary.AppendUvarint(dst, uint64(m.Created))
	}
	dst = binary.AppendUvarint(dst, uint64(m.Rows))
	dst = binary.AppendUvarint(dst, uint64(m.Users))
	dst = binary.AppendVarint(dst, m.MinTime)
	dst = binary.AppendVarint(dst, m.MaxTime)
	dst = binary.AppendUvarint(dst, uint64(len(m.EventNames)))
	for _, s := range m.EventNames {
		dst = appendString(dst, s)
	}
	for _, n := range m.EventRows {
		dst = binary.AppendUvarint(dst, uint64(n))
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Props)))
	for _, p := range m.Props {
		dst = appendString(dst, p.Name)
		dst = append(dst, byte(p.Type))
		dst = binary.AppendUvarint(dst, uint64(len(p.Dict)))
		for _, s := range p.Dict {
			dst = appendString(dst, s)
		}
	}
	return binary.AppendUvarint(dst, uint64(nBlocks))
}

// appendBlockRecord appends the footer record of block b with chunk
// records chunks in format version v.
func appendBlockRecord(dst []byte, v uint8, b *BlockMeta, chunks []chunkMeta) []byte {
	dst = binary.AppendUvarint(dst, uint64(b.Rows))
	dst = binary.AppendUvarint(dst, uint64(b.Users))
	if v >= 4 {
		var flags byte
		if b.Continued {
			flags |= flagContinued
		}
		dst = append(dst, flags)
	}
	dst = binary.LittleEndian.AppendUint64(dst, b.FirstHash)
	dst = binary.LittleEndian.AppendUint64(dst, b.LastHash)
	dst = binary.AppendVarint(dst, b.MinTime)
	dst = binary.AppendUvarint(dst, uint64(b.MaxTime-b.MinTime))
	dst = binary.AppendUvarint(dst, uint64(popcount(b.Events)))
	prev := -1
	for w, word := range b.Events {
		for ; word != 0; word &= word - 1 {
			c := 64*w + bits.TrailingZeros64(word)
			dst = binary.AppendUvarint(dst, uint64(c-prev-1))
			prev = c
		}
	}
	for _, c := range chunks {
		dst = append(dst, c.enc, c.comp)
		dst = binary.AppendUvarint(dst, uint64(c.stored))
		dst = binary.AppendUvarint(dst, uint64(c.raw))
		dst = binary.LittleEndian.AppendUint32(dst, c.crc)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// footerDecoder reads footer fields with a sticky error (bin.Decoder):
// after the first failure every read returns a zero value and Err keeps
// the first error, so decodeFooter checks it once per loop instead of
// after every field.
type footerDecoder struct {
	bin.Decoder
}

// dictStrings reads n strings that must be unique: in format version 4
// in any order, before strictly ascending (as the writers sorted them).
// The strings share one allocation (the dictionary's bytes, length
// prefixes included), so that a footer with a large dictionary, such as
// an insert-id column's, is not n small objects for the allocator and the
// garbage collector.
func (d *footerDecoder) dictStrings(what string, n int, version uint8) []string {
	start := d.Pos()
	for range n {
		d.Bytes(what) // the bounds, checked once
		if d.Err() != nil {
			return nil
		}
	}
	all := string(d.Buf()[start:d.Pos()])
	d.SetPos(start)
	out := make([]string, n)
	var seen map[string]struct{}
	if version >= 4 {
		seen = make(map[string]struct{}, n)
	}
	for i := range out {
		l := int(d.Uvarint()) // checked by the first pass
		off := d.Pos() - start
		d.SetPos(d.Pos() + l)
		out[i] = all[off : off+l]
		if version < 4 {
			if i > 0 && out[i-1] >= out[i] {
				d.Fail("%s %d (%q) not after %q", what, i, out[i], out[i-1])
				return nil
			}
			continue
		}
		if _, dup := seen[out[i]]; dup {
			d.Fail("%s %d (%q) repeats an earlier one", what, i, out[i])
			return nil
		}
		seen[out[i]] = struct{}{}
	}
	return out
}

// minBlockRecord is the fewest bytes one block record takes without its
// chunk records: rows, users, (flags,) two hashes, min time, time span,
// code count.
const minBlockRecord = 1 + 1 + 16 + 1 + 1 + 1

// minChunkRecord is the fewest bytes one chunk record takes.
const minChunkRecord = 1 + 1 + 1 + 1 + 4

// maxBitsetWords bounds the words of all blocks' event bitsets together
// (256 MiB), which decodeFooter allocates at once: blocks × (event names
// + 63)/64. The writer refuses to write a footer that needs more; with
// the default block size it takes millions of distinct event names in
// one segment, which a writer's dictionary memory (Writer.Bytes) makes
// its caller end long before.
const maxBitsetWords = 32 << 20

// decodeFooter decodes the footer bytes b, of format version version,
// that start at file offset base. The block data occupies file bytes
// [headerSize, base): chunk records must tile it exactly. It checks every
// count against the bytes left and every cross-field invariant (sums,
// orders, ranges, the identity), and returns a *CorruptionError (without
// Path) for the first violation.
func decodeFooter(b []byte, base int64, version uint8) (*Meta, []blockLayout, *CorruptionError) {
	d := &footerDecoder{bin.NewDecoder(b, base)}
	d.Prefix = "footer: "
	m := &Meta{Version: version}
	if version >= 4 {
		d.decodeIdentity(m)
	}
	rows, users := d.Uvarint(), d.Uvarint()
	m.MinTime, m.MaxTime = d.Varint(), d.Varint()
	if d.Err() == nil && (rows > 1<<62 || users > rows || m.MinTime > m.MaxTime || rows == 0 && (users != 0 || m.MinTime != 0 || m.MaxTime != 0)) {
		d.Fail("inconsistent totals: %d rows, %d users, time %d..%d", rows, users, m.MinTime, m.MaxTime)
	}
	m.Rows, m.Users = int64(rows), int64(users)

	nEvents := d.Count("event names", 1, MaxEventNames)
	m.EventNames = d.dictStrings("event name", nEvents, version)
	m.EventRows = make([]int64, nEvents)
	var sum uint64
	for c := range m.EventRows {
		n := d.Uvarint()
		if n == 0 || n > rows-sum {
			d.Fail("event %d row count %d does not fit %d rows", c, n, rows)
			break
		}
		sum += n
		m.EventRows[c] = int64(n)
	}
	if d.Err() == nil && sum != rows {
		d.Fail("event row counts sum to %d, not %d", sum, rows)
	}

	nProps := d.Count("properties", 3, math.MaxInt)
	m.Props = make([]PropMeta, nProps)
	names := make(map[string]bool, nProps)
	for i := range m.Props {
		p := &m.Props[i]
		p.Name = d.String("property name")
		p.Type = event.Type(d.U8())
		nDict := d.Count("dictionary size", 1, math.MaxInt)
		if d.Err() != nil {
			break
		}
		if p.Name == "" || names[p.Name] {
			d.Fail("property %d name %q empty or repeated", i, p.Name)
		}
		names[p.Name] = true
		if p.Type == event.TypeNone || p.Type > event.TypeTime || (p.Type != event.TypeString && nDict != 0) {
			d.Fail("property %q has type %v with %d dictionary entries", p.Name, p.Type, nDict)
		}
		if p.Type == event.TypeString {
			p.Dict = d.dictStrings("dictionary entry", nDict, version)
		}
	}

	cols := colProps + nProps
	recordBytes := minBlockRecord + cols*minChunkRecord
	if version >= 4 {
		recordBytes++ // flags
	}
	nBlocks := d.Count("blocks", recordBytes, math.MaxInt)
	words := (nEvents + 63) / 64
	if d.Err() == nil && nBlocks*words > maxBitsetWords {
		d.Fail("%d blocks of %d event names need %d bitset words, more than %d", nBlocks, nEvents, nBlocks*words, maxBitsetWords)
	}
	if d.Err() != nil {
		return nil, nil, d.Err()
	}
	m.Blocks = make([]BlockMeta, nBlocks)
	layouts := make([]blockLayout, nBlocks)
	bitsets := make([]uint64, nBlocks*words)
	chunks := make([]chunkMeta, nBlocks*cols)
	off := int64(headerSize)
	var sumRows, sumUsers, continued uint64
	for i := range m.Blocks {
		bm := &m.Blocks[i]
		br, bu := d.Uvarint(), d.Uvarint()
		var flags byte
		if version >= 4 {
			flags = d.U8()
		}
		bm.FirstHash, bm.LastHash = d.U64(), d.U64()
		bm.MinTime = d.Varint()
		span := d.Uvarint()
		if d.Err() != nil {
			break
		}
		bm.Continued = flags&flagContinued != 0
		if flags&^knownFlags != 0 || bm.Continued && (i == 0 || bm.FirstHash != m.Blocks[i-1].LastHash) {
			d.Fail("block %d: flags %#02x invalid (unknown, or a continued first user unlike the previous block's last)", i, flags)
			break
		}
		if bm.Continued {
			continued++
		}
		// Users counts distinct users: a continued one counts once.
		if br == 0 || br > MaxBlockRows || bu == 0 || bu > br || bu > MaxBlockUsers || br > rows-sumRows || bu > users+continued-sumUsers {
			d.Fail("block %d: %d rows, %d users do not fit", i, br, bu)
			break
		}
		sumRows += br
		sumUsers += bu
		bm.Rows, bm.Users = int(br), int(bu)
		if bm.MinTime < m.MinTime || bm.MinTime > m.MaxTime || span > uint64(m.MaxTime-bm.MinTime) || bm.FirstHash > bm.LastHash ||
			(bu == 1 && bm.FirstHash != bm.LastHash) || (i > 0 && bm.FirstHash < m.Blocks[i-1].LastHash) {
			d.Fail("block %d: hash range %#x..%#x or time range %d+%d out of order", i, bm.FirstHash, bm.LastHash, bm.MinTime, span)
			break
		}
		bm.MaxTime = bm.MinTime + int64(span) // ≤ m.MaxTime: no overflow
		bm.Events = bitsets[i*words : (i+1)*words : (i+1)*words]
		nCodes := d.Count("block event codes", 1, nEvents)
		code := -1
		for range nCodes {
			delta := d.Uvarint()
			if delta >= uint64(nEvents-code-1) {
				d.Fail("block %d: event code out of range", i)
				break
			}
			code += int(delta) + 1
			bm.Events[code>>6] |= 1 << (uint(code) & 63)
		}
		if d.Err() == nil && (nCodes == 0 || nCodes > bm.Rows) {
			d.Fail("block %d: %d event codes for %d rows", i, nCodes, bm.Rows)
		}
		layouts[i].chunks = chunks[i*cols : (i+1)*cols : (i+1)*cols]
		for col := range layouts[i].chunks {
			c := &layouts[i].chunks[col]
			c.enc, c.comp = d.U8(), d.U8()
			stored, raw := d.Uvarint(), d.Uvarint()
			c.crc = d.U32()
			if d.Err() != nil {
				break
			}
			var typ event.Type
			if col >= colProps {
				typ = m.Props[col-colProps].Type
			}
			if !validEnc(col, typ, c.enc) || c.comp > compZstd || raw > uint64(maxRawLen(col, bm.Rows, bm.Users)) ||
				(c.comp == compNone && stored != raw) || stored > uint64(base-off) {
				d.Fail("block %d column %d: bad chunk record (enc %d, comp %d, %d stored, %d raw bytes)", i, col, c.enc, c.comp, stored, raw)
				break
			}
			c.off, c.stored, c.raw = off, int(stored), int(raw)
			off += int64(stored)
		}
	}
	if d.Err() == nil {
		switch {
		case sumRows != rows || sumUsers-continued != users:
			d.Fail("blocks hold %d rows and %d users (%d continued), footer says %d and %d", sumRows, sumUsers, continued, rows, users)
		case off != base:
			d.Fail("chunks end at offset %d, footer starts at %d", off, base)
		case d.Pos() != len(b):
			d.Fail("%d trailing bytes", len(b)-d.Pos())
		case nBlocks > 0 && (m.MinTime != minBlockTime(m.Blocks) || m.MaxTime != maxBlockTime(m.Blocks)):
			d.Fail("time range %d..%d disagrees with the blocks", m.MinTime, m.MaxTime)
		}
	}
	if d.Err() != nil {
		return nil, nil, d.Err()
	}
	m.Columns = columnStats(m, layouts)
	return m, layouts, nil
}

// decodeIdentity reads the identity fields and the creation time of a
// version 4 footer into m, failing on any value out of range.
func (d *footerDecoder) decodeIdentity(m *Meta) {
	at := d.Pos()
	id := &m.Identity
	kind := d.U8()
	shards, shard := d.Uvarint(), d.Uvarint()
	id.Generation = d.Uvarint()
	seqMin, seqMax := d.Uvarint(), d.Uvarint()
	created := d.Uvarint()
	if d.Err() != nil {
		return
	}
	// Bounded before the conversions, so that the check sees the values
	// the file holds.
	if kind > uint8(KindUsers) || shards > MaxShards || shard > MaxShards || seqMin > math.MaxInt64 || seqMax > math.MaxInt64 {
		d.FailAt(at, "identity out of range: kind %d, shard %d of %d, seq %d..%d", kind, shard, shards, seqMin, seqMax)
		return
	}
	id.Kind, id.Shards, id.Shard, id.SeqMin, id.SeqMax = Kind(kind), int(shards), int(shard), int64(seqMin), int64(seqMax)
	if err := id.check(); err != nil {
		d.FailAt(at, "%v", err)
		return
	}
	if created == 0 || created >= maxCreated {
		d.Fail("creation time %d µs is outside (0, %d)", created, int64(maxCreated))
		return
	}
	m.Created = int64(created)
}

func minBlockTime(bs []BlockMeta) int64 {
	t := bs[0].MinTime
	for i := range bs {
		t = min(t, bs[i].MinTime)
	}
	return t
}

func maxBlockTime(bs []BlockMeta) int64 {
	t := bs[0].MaxTime
	for i := range bs {
		t = max(t, bs[i].MaxTime)
	}
	return t
}

// columnStats sums the chunk records of every column over the blocks.
func columnStats(m *Meta, layouts []blockLayout) []ColumnStats {
	cols := make([]ColumnStats, colProps+len(m.Props))
	cols[colUsers].Name, cols[colTimes].Name, cols[colEvents].Name = "$user", "$time", "$event"
	for j, p := range m.Props {
		cols[colProps+j].Name = p.Name
	}
	encs := make([][]string, len(cols))
	for _, l := range layouts {
		for col, c := range l.chunks {
			cs := &cols[col]
			cs.CompressedBytes += int64(c.stored)
			cs.RawBytes += int64(c.raw)
			if s := describeChunk(col, c.enc, c.comp); !slices.Contains(encs[col], s) {
				encs[col] = append(encs[col], s)
			}
		}
	}
	for col := range cols {
		cols[col].Encoding = strings.Join(encs[col], "; ")
	}
	return cols
}
