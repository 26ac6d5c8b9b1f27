package segment

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"os"
	"time"

	"github.com/spurdb/spur/event"
)

// File is what a Writer writes a segment to: an *os.File, or a file of
// the store's filesystem seam. The Writer owns it from NewWriter on and
// closes it in Close or Abort.
type File interface {
	io.Writer
	Sync() error
	Close() error
}

// PropSpec declares one property column of a segment being written: a
// non-empty name, unique in the segment, and a type (event.TypeInt …
// event.TypeTime). For a string column, Strings may estimate how many
// distinct strings the column will hold (0: unknown; values above
// MaxStringsHint count as MaxStringsHint): the writer sizes its
// dictionary for them at once instead of growing it by doubling, which
// rehashes every string seen so far (a column of unique strings, such as
// insert ids, spent a tenth of live ingestion's CPU in those rehashes).
// An estimate too high costs memory (counted by Writer.Bytes), one too
// low only the growth.
type PropSpec struct {
	Name    string
	Type    event.Type
	Strings int
}

// MaxStringsHint caps PropSpec.Strings: a dictionary sized for 1 Mi
// strings takes about 32 MiB before it holds any.
const MaxStringsHint = 1 << 20

// hintSlotBytes estimates the memory of one entry a dictionary was sized
// for ahead (PropSpec.Strings) and does not hold yet: the code map's slot.
const hintSlotBytes = 32

// WriterOptions configures a Writer (and Write).
type WriterOptions struct {
	// BlockRows is the target number of rows per block (0 means
	// DefaultBlockRows; at most MaxBlockRows). A block takes whole users
	// while it stays within BlockRows rows.
	BlockRows int
	// SplitRows is the most rows of one block: a user with more rows
	// than fit continues in the next block (BlockMeta.Continued). 0
	// means BlockRows, so that no block exceeds BlockRows rows; else it
	// must lie in [BlockRows, MaxBlockRows], and a user with more than
	// BlockRows rows gets blocks of its own of up to SplitRows rows.
	// Write sets it to MaxBlockRows when 0: the block layout of format
	// version 3, for readers that do not yet follow continued users.
	SplitRows int
	// MinZstdRatio is how many times smaller zstd must make a chunk (than
	// the chunk's smallest uncompressed encoding) for the chunk to be
	// stored compressed: 0 means DefaultMinZstdRatio; it must otherwise be
	// ≥ 1. Lower values give smaller files that decode slower (e.g. 1.07
	// compresses whenever that saves 1/16).
	MinZstdRatio float64
	// FastZstd compresses chunks with zstd's fastest level (SpeedFastest)
	// instead of SpeedBetterCompression: for segments that are rewritten
	// soon, the live layer's in-memory ones, where the better level took
	// 8 % of live ingestion's CPU. Readers do not know the difference.
	FastZstd bool
	// Identity is written to the footer (Meta.Identity; see Identity for
	// the ranges). The zero Identity writes a segment without one, which
	// a store cannot recover from its footer: storage passes one.
	Identity Identity
	// Created is the creation time written to the footer (Meta.Created),
	// UTC microseconds; 0 means the time NewWriter runs.
	Created int64
	// Props declares the property columns, in chunk order (Meta.Props).
	// Every declared column is written, with no value on the rows that
	// got none. Write takes them from its Input and requires this empty.
	Props []PropSpec

	// pforBitmapRatio, for tests, chooses the times' exception layout
	// (encoder.pforBitmapRatio): 0 means the default, negative the index
	// gaps always, +Inf the bitmap always.
	pforBitmapRatio float64
}

// DefaultMinZstdRatio is the default WriterOptions.MinZstdRatio: with it,
// bit-packed times and event codes stay uncompressed on typical data and
// decode at several hundred million rows per second, while
// low-cardinality and repetitive columns are still compressed.
const DefaultMinZstdRatio = 2

// Info describes a written segment: Bytes is the file size in bytes, Rows
// and Users the counts (users distinct), MinTime and MaxTime the row time
// range in UTC microseconds, FirstHash and LastHash the first and last
// user's hash (all 0 for an empty segment).
type Info struct {
	Bytes               int64
	Rows                int64
	Users               int64
	MinTime             int64
	MaxTime             int64
	FirstHash, LastHash uint64
}

// minCompress is the smallest raw chunk worth trying to compress.
const minCompress = 64

// minKeysZstdRatio is how many times smaller zstd must make a users
// chunk's keys section (WriterOptions.MinZstdRatio if larger) for it to
// be stored compressed. Keys are decoded by every scan that joins user
// properties or lists users, for each user: at 2.1x (ids "u0000000") their
// decompression took 17 % of the CPU of a 100M-event funnel broken down
// by a user property, which ran x1.20 against the keys stored raw.
const minKeysZstdRatio = 4

// writeBuffer is the Writer's buffering of the file: blocks are written
// through it chunk by chunk.
const writeBuffer = 1 << 20

// memWriteBuffer is the buffering of a MemFile (which is memory already).
const memWriteBuffer = 4 << 10

// dictEntryBytes estimates the memory of one dictionary entry beyond its
// string bytes, for Writer.Bytes: the string header in the dictionary
// slice and the entry of the code map.
const dictEntryBytes = 64

// Writer writes one segment a block at a time, the footer last (format
// version Version), holding in memory only the block being built, the
// dictionaries (event names and string property values, codes assigned
// in the order the writer first meets them) and the footer records of
// the blocks written.
//
// Rows arrive user by user in (user hash, user id, time, arrival) order:
// StartUser names the next user and AppendBlockRows adds its rows, or
// AppendInput adds whole runs of users. A user's rows may come in several
// calls, and a user with more rows than a block holds continues in the
// next block (see WriterOptions.SplitRows). Order is checked: rows out of
// order are an error naming the user, never a corrupt file. A Writer is
// not safe for concurrent use.
//
// After an error every later call returns it: Abort the Writer and remove
// the file. Close completes the segment.
type Writer struct {
	f   File
	bw  *bufio.Writer
	err error // sticky
	// done: Close or Abort ran
	done bool

	blockRows, splitRows int
	minRatio             float64

	meta    Meta              // identity, totals and dictionaries; no Blocks
	evCode  map[string]uint32 // event name → code
	props   []writerProp      // per column of meta.Props
	propIdx map[string]int    // column name → index
	dictMem int64             // dictionary bytes, estimated (see dictEntryBytes)

	blk  blockBuf
	n    int  // rows in blk
	cont bool // blk's first user continues the previous block's last
	// the current user: named (has), with rows in blk (inBlk), its key
	// and the time of its last row (last, when rows > 0)
	cur struct {
		has, inBlk bool
		hash       uint64
		id         []byte
		last       int64
		rows       int64
	}

	off       int64 // file offset of the next byte
	nBlocks   int
	records   []byte // footer records of the blocks written
	firstHash uint64
	lastHash  uint64
	evSet     []uint64    // the block's event codes (bitset)
	chunks    []chunkMeta // the block's chunk records
	enc       encoder

	in       rowSource // AppendInput's source
	remapMem int64     // bytes of the Remaps made by NewRemap
}

// writerProp is one property column being written: its string dictionary.
type writerProp struct {
	dict []string
	code map[string]uint32
	hint int // the entries code was sized for (PropSpec.Strings)
}

// blockBuf holds the rows of the block being built, row-indexed from 0.
// User i (of len(hashes)) has hash hashes[i], id ids[idOff[i]:idOff[i+1]]
// and rows [starts[i], starts[i+1]) (the last user's rows end at the
// Writer's n; starts gets that end only while a block is encoded).
type blockBuf struct {
	hashes []uint64
	idOff  []int
	ids    []byte
	starts []int
	times  []int64
	events []uint32 // the writer's codes
	props  []propBuf
}

// id returns user i's id bytes.
func (b *blockBuf) id(i int) []byte { return b.ids[b.idOff[i]:b.idOff[i+1]] }

// propBuf is one property column of the block being built. Bits of
// present at or past the block's rows are 0; values of absent rows are
// unspecified.
type propBuf struct {
	present []uint64
	ints    []int64
	floats  []float64
	strs    []uint32 // the writer's codes
}

// NewWriter starts a segment on f: it writes the header and returns the
// Writer, which owns f from then on. It returns an error, without
// writing, for options out of range (the error names the option).
func NewWriter(f File, opt WriterOptions) (*Writer, error) {
	w, err := newWriter(opt)
	if err != nil {
		return nil, err
	}
	w.f = f
	size := writeBuffer
	if _, ok := f.(*MemFile); ok {
		size = memWriteBuffer // the buffer would only copy
	}
	w.bw = bufio.NewWriterSize(f, size)
	var hdr [headerSize]byte
	hdr[0] = Version
	copy(hdr[1:], headerMagic)
	w.write(hdr[:])
	return w, w.err
}

// newWriter checks opt and returns a Writer without a file.
func newWriter(opt WriterOptions) (*Writer, error) {
	w := &Writer{blockRows: cmp.Or(opt.BlockRows, DefaultBlockRows), minRatio: cmp.Or(opt.MinZstdRatio, DefaultMinZstdRatio)}
	w.splitRows = cmp.Or(opt.SplitRows, w.blockRows)
	w.enc.pforBitmapRatio = opt.pforBitmapRatio
	if opt.FastZstd {
		w.enc.zstd = fastZstdEncoder()
	}
	switch {
	case w.blockRows < 1 || w.blockRows > MaxBlockRows:
		return nil, fmt.Errorf("segment writer: BlockRows %d outside [1, %d]", opt.BlockRows, MaxBlockRows)
	case w.splitRows < w.blockRows || w.splitRows > MaxBlockRows:
		return nil, fmt.Errorf("segment writer: SplitRows %d outside [BlockRows %d, %d]", opt.SplitRows, w.blockRows, MaxBlockRows)
	case !(w.minRatio >= 1):
		return nil, fmt.Errorf("segment writer: MinZstdRatio %v is below 1", opt.MinZstdRatio)
	}
	if err := opt.Identity.check(); err != nil {
		return nil, fmt.Errorf("segment writer: %w", err)
	}
	created := opt.Created
	if created == 0 {
		created = time.Now().UnixMicro()
	}
	if created <= 0 || created >= maxCreated {
		return nil, fmt.Errorf("segment writer: Created %d µs is outside (0, %d)", opt.Created, int64(maxCreated))
	}
	w.meta = Meta{Version: Version, Identity: opt.Identity, Created: created, Props: make([]PropMeta, len(opt.Props))}
	w.evCode = map[string]uint32{}
	w.props = make([]writerProp, len(opt.Props))
	w.propIdx = make(map[string]int, len(opt.Props))
	w.blk.props = make([]propBuf, len(opt.Props))
	for j, p := range opt.Props {
		if p.Name == "" {
			return nil, fmt.Errorf("segment writer: property %d has an empty name", j)
		}
		if _, dup := w.propIdx[p.Name]; dup {
			return nil, fmt.Errorf("segment writer: property %q appears twice", p.Name)
		}
		if p.Type == event.TypeNone || p.Type > event.TypeTime {
			return nil, fmt.Errorf("segment writer: property %q has invalid type %v", p.Name, p.Type)
		}
		w.propIdx[p.Name] = j
		w.meta.Props[j] = PropMeta{Name: p.Name, Type: p.Type}
		if p.Type == event.TypeString {
			hint := min(max(p.Strings, 0), MaxStringsHint)
			w.props[j].code, w.props[j].hint = make(map[string]uint32, hint), hint
		}
	}
	return w, nil
}

// Rows returns the number of rows appended so far.
func (w *Writer) Rows() int64 { return w.meta.Rows + int64(w.n) }

// Bytes returns the memory the Writer holds, in bytes: the block being
// built (its capacity), the dictionaries (estimated), the footer records,
// the Remaps made by NewRemap, the encoding scratch and the write buffer.
// A caller bounds a segment's memory by ending it (Close, then a new
// Writer) when this grows past its budget: the dictionaries and records
// grow with the segment, not with the block.
func (w *Writer) Bytes() int64 {
	b := &w.blk
	n := int64(cap(b.hashes)+cap(b.idOff)+cap(b.starts)+cap(b.times))*8 + int64(cap(b.ids)) + int64(cap(b.events))*4
	for i := range b.props {
		p := &b.props[i]
		n += int64(cap(p.present)+cap(p.ints)+cap(p.floats))*8 + int64(cap(p.strs))*4
	}
	e := &w.enc
	n += int64(cap(e.u64)+cap(e.exc)+cap(e.exc2)+cap(e.f64))*8 + int64(cap(e.raw)+cap(e.raw2)+cap(e.comp)+cap(e.comp2))
	n += w.dictMem + int64(cap(w.meta.EventRows))*8 + int64(cap(w.records)) + int64(cap(w.evSet))*8 + w.remapMem
	n += int64(cap(w.in.evMap)) * 4
	for i := range w.props {
		p := &w.props[i]
		n += int64(max(p.hint-len(p.dict), 0)) * hintSlotBytes
	}
	for _, c := range w.in.cols {
		n += int64(cap(c.strMap)) * 4
	}
	return n + int64(w.bw.Size())
}

// fail records err as the Writer's sticky error and returns it.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// ok returns the sticky error, or an error after Close or Abort.
func (w *Writer) ok() error {
	if w.err == nil && w.done {
		return errors.New("segment writer: used after Close or Abort")
	}
	return w.err
}

// write writes b to the file at w.off.
func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.bw.Write(b); err != nil {
		w.fail(fmt.Errorf("segment writer: %w", err))
		return
	}
	w.off += int64(len(b))
}

// StartUser names the next user: hash (the caller's; storage uses
// UserHash(id)) and id (at most event.MaxUserIDBytes bytes, copied). Its
// key must be after the previous user's by (hash, id bytes); a user
// without rows is not written. The rows follow with AppendBlockRows.
func (w *Writer) StartUser(hash uint64, id []byte) error {
	if err := w.ok(); err != nil {
		return err
	}
	if len(id) > event.MaxUserIDBytes {
		return w.fail(fmt.Errorf("segment writer: user id %q is %d bytes, longer than %d", id, len(id), event.MaxUserIDBytes))
	}
	if w.cur.has && cmp.Or(cmp.Compare(hash, w.cur.hash), bytes.Compare(id, w.cur.id)) <= 0 {
		return w.fail(fmt.Errorf("segment writer: user (%#x %q) is not after user (%#x %q) by (hash, id)", hash, id, w.cur.hash, w.cur.id))
	}
	w.cur.has, w.cur.inBlk, w.cur.hash, w.cur.id, w.cur.rows = true, false, hash, append(w.cur.id[:0], id...), 0
	return nil
}

// eventCode returns the writer's code of event name s, assigning the next
// one at its first sighting.
func (w *Writer) eventCode(s string) (uint32, error) {
	if c, ok := w.evCode[s]; ok {
		return c, nil
	}
	c := len(w.meta.EventNames)
	if c == MaxEventNames {
		return 0, fmt.Errorf("segment writer: more than %d distinct event names", MaxEventNames)
	}
	w.evCode[s] = uint32(c)
	w.meta.EventNames = append(w.meta.EventNames, s)
	w.meta.EventRows = append(w.meta.EventRows, 0)
	w.dictMem += int64(len(s)) + dictEntryBytes
	return uint32(c), nil
}

// stringCode returns the writer's code of value s of string column j,
// assigning the next one at its first sighting.
func (w *Writer) stringCode(j int, s string) uint32 {
	p := &w.props[j]
	if c, ok := p.code[s]; ok {
		return c
	}
	c := uint32(len(p.dict))
	p.code[s] = c
	p.dict = append(p.dict, s)
	w.dictMem += int64(len(s)) + dictEntryBytes
	return c
}

// rowSource is where rows are copied from into the block: an Input
// (AppendInput) or decoded blocks of one segment (a Remap), with the
// translation of its codes into the writer's, filled in at each code's
// first use.
type rowSource struct {
	times  []int64
	events []uint32
	names  []string // the source's event names
	evMap  []uint32 // source event code → writer code + 1; 0: not yet seen
	cols   []srcCol
}

// srcCol is one property column of a rowSource.
type srcCol struct {
	prop    int // the writer's column
	typ     event.Type
	widen   bool // an int column into a float one (typ is TypeInt)
	present []uint64
	ints    []int64
	floats  []float64
	strs    []uint32
	dict    []string
	strMap  []uint32 // string code → writer code + 1; 0: not yet seen
}

// Remap translates the codes of one segment's decoded blocks (event names
// and string property values) into a Writer's, for AppendBlockRows. Its
// tables are filled at each code's first use, so appending rows costs a
// table lookup per code and no map lookup or allocation. A Remap belongs
// to the Writer that made it.
type Remap struct {
	w   *Writer
	src rowSource
}

// NewRemap returns the Remap of segment m's blocks as decoded with the
// property columns props (indexes into m.Props, the props of ReadBlock:
// Block.Props[j] is m.Props[props[j]]). Each of those columns must be a
// column of the Writer (WriterOptions.Props) with the same name and
// type, or an int column of a float one of the Writer: its values are
// converted (exact up to 2^53), for a property widened from int to float
// after m was written (docs/analytics.md §1). Its tables take 4 bytes per event name and dictionary entry of m,
// counted in Bytes.
func (w *Writer) NewRemap(m *Meta, props []int) (*Remap, error) {
	if err := w.ok(); err != nil {
		return nil, err
	}
	rm := &Remap{w: w, src: rowSource{names: m.EventNames, evMap: make([]uint32, len(m.EventNames)), cols: make([]srcCol, len(props))}}
	mem := int64(len(m.EventNames))
	for j, p := range props {
		if p < 0 || p >= len(m.Props) {
			return nil, fmt.Errorf("segment writer: remap property %d out of range [0, %d)", p, len(m.Props))
		}
		pm := &m.Props[p]
		k, ok := w.propIdx[pm.Name]
		widen := ok && pm.Type == event.TypeInt && w.meta.Props[k].Type == event.TypeFloat
		if !ok || (w.meta.Props[k].Type != pm.Type && !widen) {
			return nil, fmt.Errorf("segment writer: property %q (%v) of the input is not a column of the segment", pm.Name, pm.Type)
		}
		c := &rm.src.cols[j]
		c.prop, c.typ, c.dict, c.widen = k, pm.Type, pm.Dict, widen
		if pm.Type == event.TypeString {
			c.strMap = make([]uint32, len(pm.Dict))
			mem += int64(len(pm.Dict))
		}
	}
	w.remapMem += 4 * mem
	return rm, nil
}

// AppendBlockRows appends rows [s, e) of b, a block of the segment rm was
// made for, decoded by ReadBlock with rm's props (times summed, values
// row-indexed), to the current user (StartUser): the rows must all be
// that user's, in time order and not before its rows appended so far
// (else an error names the user). Codes are translated through rm. It
// does not allocate in steady state, apart from the dictionaries' growth.
func (w *Writer) AppendBlockRows(b *Block, s, e int, rm *Remap) error {
	if err := w.ok(); err != nil {
		return err
	}
	switch {
	case rm.w != w:
		return w.fail(errors.New("segment writer: AppendBlockRows with another Writer's Remap"))
	case !w.cur.has:
		return w.fail(errors.New("segment writer: AppendBlockRows before StartUser"))
	case s < 0 || s > e || e > b.Rows || len(b.Times) != b.Rows || len(b.Events) != b.Rows || len(b.Props) != len(rm.src.cols):
		return w.fail(fmt.Errorf("segment writer: AppendBlockRows of rows [%d, %d) of a block of %d rows, %d times and %d of %d property columns", s, e, b.Rows, len(b.Times), len(b.Props), len(rm.src.cols)))
	case s == e:
		return nil
	}
	ts := b.Times[s:e]
	bad := w.cur.rows > 0 && ts[0] < w.cur.last
	for i := 1; i < len(ts); i++ {
		bad = bad || ts[i] < ts[i-1]
	}
	if bad {
		return w.fail(fmt.Errorf("segment writer: user (%#x %q): rows [%d, %d) of the block are not in time order after the user's last time %d µs", w.cur.hash, w.cur.id, s, e, w.cur.last))
	}
	src := &rm.src
	src.times, src.events = b.Times, b.Events
	for j := range src.cols {
		c, pd := &src.cols[j], &b.Props[j]
		if len(pd.Ranks) != 0 {
			return w.fail(fmt.Errorf("segment writer: AppendBlockRows of a compact property column (ReadBlockPacked)"))
		}
		c.present, c.ints, c.floats, c.strs = pd.Present, pd.Ints, pd.Floats, pd.Strs
	}
	return w.appendRun(src, s, e)
}

// AppendInput appends the rows of in, user by user. in must satisfy the
// Input contract; its first user may be the current user (same hash and
// id), whose rows it continues, else it must come after it; its property
// columns must be columns of the Writer (same name and type), and the
// Writer's other columns get no value on its rows. A violation is
// reported, naming the user, row or property, before anything is
// appended. The codes of in are translated into the Writer's (a table
// lookup per row after each code's first use). It does not retain in.
func (w *Writer) AppendInput(in *Input) error {
	if err := w.ok(); err != nil {
		return err
	}
	if err := checkInput(in); err != nil {
		return fmt.Errorf("segment writer: invalid input: %w", err)
	}
	return w.appendInput(in)
}

// appendInput is AppendInput for an in that satisfies the Input
// contract.
func (w *Writer) appendInput(in *Input) error {
	if len(in.Users) == 0 {
		return nil
	}
	u0 := &in.Users[0]
	continues := w.cur.has && u0.Hash == w.cur.hash && u0.ID == string(w.cur.id)
	if continues && w.cur.rows > 0 && in.Times[0] < w.cur.last {
		return fmt.Errorf("segment writer: invalid input: user 0 (%q) continues the current user at time %d µs, before its last row's %d µs", u0.ID, in.Times[0], w.cur.last)
	}
	if !continues && w.cur.has && cmp.Or(cmp.Compare(u0.Hash, w.cur.hash), bytes.Compare([]byte(u0.ID), w.cur.id)) <= 0 {
		return fmt.Errorf("segment writer: invalid input: user 0 (%#x %q) is not after the current user (%#x %q) by (hash, id)", u0.Hash, u0.ID, w.cur.hash, w.cur.id)
	}
	src := &w.in
	src.times, src.events, src.names = in.Times, in.Events, in.EventNames
	src.evMap = grow(src.evMap, len(in.EventNames))
	clear(src.evMap)
	src.cols = grow(src.cols, len(in.Props))
	for j := range in.Props {
		col := &in.Props[j]
		k, ok := w.propIdx[col.Name]
		if !ok || w.meta.Props[k].Type != col.Type {
			return fmt.Errorf("segment writer: invalid input: property %q (%v) is not a column of the segment", col.Name, col.Type)
		}
		c := &src.cols[j]
		strMap := grow(c.strMap, len(col.Dict))
		clear(strMap)
		*c = srcCol{prop: k, typ: col.Type, present: col.Present, ints: col.Ints, floats: col.Floats, strs: col.Strs, dict: col.Dict, strMap: strMap}
	}
	w.reserve(min(w.n+len(in.Times), w.blockRows))
	row := 0
	for i := 0; i < len(in.Users); {
		u := &in.Users[i]
		if i == 0 && continues {
			if err := w.appendRun(src, row, row+u.Rows); err != nil {
				return err
			}
			row, i = row+u.Rows, i+1
			continue
		}
		// The whole users that fit the block: one copy.
		if k, rows := w.fitting(in.Users[i:]); k > 0 {
			b := &w.blk
			if len(b.idOff) == 0 {
				b.idOff = append(b.idOff, 0)
			}
			at := w.n // the users' rows follow from w.n
			for _, u := range in.Users[i : i+k] {
				b.hashes = append(b.hashes, u.Hash)
				b.ids = append(b.ids, u.ID...)
				b.idOff = append(b.idOff, len(b.ids))
				b.starts = append(b.starts, at)
				at += u.Rows
			}
			if err := w.copyRows(src, row, rows); err != nil {
				return w.fail(err)
			}
			last := &in.Users[i+k-1]
			w.n += rows
			w.cur.has, w.cur.inBlk, w.cur.hash, w.cur.id = true, true, last.Hash, append(w.cur.id[:0], last.ID...)
			w.cur.rows, w.cur.last = int64(last.Rows), w.blk.times[w.n-1]
			row, i = row+rows, i+k
			continue
		}
		// A user that does not fit the block starts the next one (a
		// larger one has blocks of its own).
		if w.n > 0 && w.n+u.Rows > w.blockRows {
			w.flushAll(false)
		}
		w.cur.has, w.cur.inBlk, w.cur.hash, w.cur.id, w.cur.rows = true, false, u.Hash, append(w.cur.id[:0], u.ID...), 0
		if err := w.appendRun(src, row, row+u.Rows); err != nil {
			return err
		}
		row, i = row+u.Rows, i+1
	}
	return w.err
}

// fitting returns how many of users (none of them in the block yet) fit
// the block whole, and their rows.
func (w *Writer) fitting(users []User) (k, rows int) {
	room, slots := w.blockRows-w.n, MaxBlockUsers-len(w.blk.hashes)
	for k < len(users) && k < slots && rows+users[k].Rows <= room {
		rows += users[k].Rows
		k++
	}
	return k, rows
}

// reserve gives the block's row arrays room for rows rows, so that an
// append does not grow them step by step.
func (w *Writer) reserve(rows int) {
	b := &w.blk
	if cap(b.times) >= rows {
		return
	}
	b.times = growKeep(b.times, rows)[:w.n]
	b.events = growKeep(b.events, rows)[:w.n]
}

// appendRun appends rows [lo, hi) of src, in time order and not before
// the current user's earlier rows, to the current user, writing blocks as
// they fill: a block takes whole users up to blockRows rows, and a user
// that fills splitRows rows alone continues in the next block.
func (w *Writer) appendRun(src *rowSource, lo, hi int) error {
	b := &w.blk
	for lo < hi {
		if !w.cur.inBlk {
			if w.n >= w.blockRows || len(b.hashes) == MaxBlockUsers {
				w.flushAll(false)
			}
			w.addUser()
		}
		s := b.starts[len(b.starts)-1] // the current user's first row in blk
		limit := w.splitRows
		if s > 0 {
			limit = w.blockRows
		}
		if w.n >= limit {
			if s > 0 {
				w.flushPrefix()
			} else {
				w.flushAll(true)
			}
			if w.err != nil {
				return w.err
			}
			continue
		}
		k := min(hi-lo, limit-w.n)
		if err := w.copyRows(src, lo, k); err != nil {
			return w.fail(err)
		}
		w.n += k
		lo += k
		w.cur.rows += int64(k)
		w.cur.last = b.times[w.n-1]
	}
	return w.err
}

// addUser adds the current user to blk, its rows starting at row n.
func (w *Writer) addUser() {
	b := &w.blk
	if len(b.idOff) == 0 {
		b.idOff = append(b.idOff, 0)
	}
	b.hashes = append(b.hashes, w.cur.hash)
	b.ids = append(b.ids, w.cur.id...)
	b.idOff = append(b.idOff, len(b.ids))
	b.starts = append(b.starts, w.n)
	w.cur.inBlk = true
}

// copyRows copies rows [lo, lo+k) of src to rows [n, n+k) of the block,
// translating codes; the Writer's columns src lacks get no value there.
func (w *Writer) copyRows(src *rowSource, lo, k int) error {
	b, n := &w.blk, w.n
	end := n + k
	b.times = growKeep(b.times, end)
	copy(b.times[n:], src.times[lo:lo+k])
	b.events = growKeep(b.events, end)
	ev := b.events[n:end]
	for i, c := range src.events[lo : lo+k] {
		oc := src.evMap[c]
		if oc == 0 {
			code, err := w.eventCode(src.names[c])
			if err != nil {
				return err
			}
			oc = code + 1
			src.evMap[c] = oc
		}
		ev[i] = oc - 1
	}
	words := (end + 63) / 64
	for j := range b.props {
		p := &b.props[j]
		old := len(p.present)
		p.present = growKeep(p.present, words)
		clear(p.present[old:]) // rows past n had no bits: only new words
	}
	for j := range src.cols {
		c := &src.cols[j]
		p := &b.props[c.prop]
		if !orBits(p.present, n, c.present, lo, k) {
			continue
		}
		switch {
		case c.widen:
			p.floats = growKeep(p.floats, end)
			for i, v := range c.ints[lo : lo+k] {
				p.floats[n+i] = float64(v)
			}
		case c.typ == event.TypeFloat:
			p.floats = growKeep(p.floats, end)
			copy(p.floats[n:], c.floats[lo:lo+k])
		case c.typ == event.TypeString:
			p.strs = growKeep(p.strs, end)
			for d := range eachBit(p.present, n, end) {
				code := c.strs[lo+d-n]
				oc := c.strMap[code]
				if oc == 0 {
					oc = w.stringCode(c.prop, c.dict[code]) + 1
					c.strMap[code] = oc
				}
				p.strs[d] = oc - 1
			}
		default:
			p.ints = growKeep(p.ints, end)
			copy(p.ints[n:], c.ints[lo:lo+k])
		}
	}
	return nil
}

// flushPrefix writes the block's users before the current one as a
// block and moves the current user's rows to the front.
func (w *Writer) flushPrefix() {
	b := &w.blk
	last := len(b.hashes) - 1
	s := b.starts[last]
	w.writeBlock(last, s)
	hash, id := b.hashes[last], b.id(last)
	b.hashes = append(b.hashes[:0], hash)
	b.ids = b.ids[:copy(b.ids, id)]
	b.idOff = append(b.idOff[:0], 0, len(b.ids))
	b.starts = append(b.starts[:0], 0)
	m := w.n - s
	copy(b.times, b.times[s:w.n])
	copy(b.events, b.events[s:w.n])
	for j := range b.props {
		p := &b.props[j]
		p.ints, p.floats, p.strs = moveFront(p.ints, s, w.n), moveFront(p.floats, s, w.n), moveFront(p.strs, s, w.n)
		p.present = shiftBits(p.present, s, w.n)
	}
	w.n = m
	w.cont = false
}

// flushAll writes the whole block. With split, the current user's rows
// go on in the next block (Continued).
func (w *Writer) flushAll(split bool) {
	b := &w.blk
	w.writeBlock(len(b.hashes), w.n)
	b.hashes, b.ids, b.idOff, b.starts = b.hashes[:0], b.ids[:0], b.idOff[:0], b.starts[:0]
	for j := range b.props {
		p := &b.props[j]
		clear(p.present)
		p.present = p.present[:0]
	}
	w.n = 0
	w.cont = split
	w.cur.inBlk = false
	if split {
		w.addUser()
	}
}

// writeBlock encodes users [0, k) of blk, rows [0, m), as the next block:
// its chunks go to the file, its footer record to w.records.
func (w *Writer) writeBlock(k, m int) {
	if w.err != nil {
		return
	}
	b := &w.blk
	names := len(w.meta.EventNames)
	words := (names + 63) / 64
	if (w.nBlocks+1)*words > maxBitsetWords {
		w.fail(fmt.Errorf("segment writer: %d blocks of %d event names would need more than %d MiB of event bitsets: end the segment earlier (Writer.Bytes)", w.nBlocks+1, names, maxBitsetWords/(1<<17)))
		return
	}
	// The block's view of blk: its users and their row starts. (With
	// k < len(b.starts), b.starts[k] is m already: the append leaves
	// b.starts as it is.)
	starts := append(b.starts[:k], m)
	view := blockBuf{hashes: b.hashes[:k], idOff: b.idOff[:k+1], ids: b.ids, starts: starts}
	bm := BlockMeta{
		Rows: m, Users: k, FirstHash: view.hashes[0], LastHash: view.hashes[k-1],
		MinTime: b.times[0], MaxTime: b.times[0], Continued: w.cont,
	}
	for u := range k {
		bm.MinTime = min(bm.MinTime, b.times[starts[u]])
		bm.MaxTime = max(bm.MaxTime, b.times[starts[u+1]-1])
	}
	w.evSet = grow(w.evSet, words)
	clear(w.evSet)
	rowsByCode := w.meta.EventRows
	for _, c := range b.events[:m] {
		w.evSet[c>>6] |= 1 << (c & 63)
		rowsByCode[c]++
	}
	bm.Events = w.evSet

	e := &w.enc
	cs := grow(w.chunks, colProps+len(b.props))
	w.chunks = cs
	var uenc uint8
	e.raw, uenc = e.encodeUsers(e.raw[:0], &view, max(w.minRatio, minKeysZstdRatio))
	if uenc == encUsersIDs {
		// Compressed inside (the keys only): stored as it is.
		cs[colUsers] = w.store(uenc, e.raw)
	} else {
		cs[colUsers] = w.emit(uenc, e.raw, 0, nil)
	}
	var enc uint8
	e.raw, e.raw2, enc = e.encodeTimes(e.raw[:0], e.raw2[:0], b.times[:m], starts)
	if len(e.raw2) > len(e.raw)-len(e.raw)/8 {
		// PFOR decodes several times faster than uvarints (the scan
		// profile at 100M events: 8 % of the rows in uvarint blocks took
		// as long as the 92 % in PFOR blocks), so the uvarint candidate
		// competes only when it is at least 1/8 smaller.
		e.raw2 = e.raw2[:0]
	}
	cs[colTimes] = w.emit(enc, e.raw, encTimesUvarint, e.raw2)
	e.raw, e.raw2 = e.encodeEvents(e.raw[:0], e.raw2[:0], b.events[:m])
	cs[colEvents] = w.emit(encEvents, e.raw, encEvents, e.raw2)
	for j := range b.props {
		var enc uint8
		e.raw, enc = e.encodeProp(e.raw[:0], &b.props[j], w.meta.Props[j].Type, m)
		cs[colProps+j] = w.emit(enc, e.raw, 0, nil)
	}
	w.records = appendBlockRecord(w.records, Version, &bm, cs)

	if w.nBlocks == 0 {
		w.firstHash, w.meta.MinTime, w.meta.MaxTime = bm.FirstHash, bm.MinTime, bm.MaxTime
	}
	w.nBlocks++
	w.lastHash = bm.LastHash
	w.meta.MinTime, w.meta.MaxTime = min(w.meta.MinTime, bm.MinTime), max(w.meta.MaxTime, bm.MaxTime)
	w.meta.Rows += int64(m)
	w.meta.Users += int64(k)
	if bm.Continued {
		w.meta.Users--
	}
}

// emit chooses how to store a chunk given one or two candidate encodings
// (raw2 empty when there is one), writes the stored bytes and returns the
// chunk record. The smallest candidate is stored as is unless zstd makes
// some candidate at least w.minRatio times smaller than that: zstd
// decoding costs more CPU than the bit-unpacking of the encodings, so it
// must earn its keep.
func (w *Writer) emit(enc uint8, raw []byte, enc2 uint8, raw2 []byte) chunkMeta {
	if len(raw2) > 0 && len(raw2) < len(raw) {
		enc, raw, enc2, raw2 = enc2, raw2, enc, raw
	}
	c := chunkMeta{off: w.off, raw: len(raw), enc: enc, comp: compNone}
	stored := raw
	limit := float64(len(raw)) / w.minRatio
	if len(raw) >= minCompress {
		w.enc.comp = w.enc.zstdEncoder().EncodeAll(raw, w.enc.comp[:0])
		if float64(len(w.enc.comp)) <= limit {
			stored, c.comp, limit = w.enc.comp, compZstd, float64(len(w.enc.comp))-1
		}
	}
	if len(raw2) >= minCompress {
		w.enc.comp2 = w.enc.zstdEncoder().EncodeAll(raw2, w.enc.comp2[:0])
		if float64(len(w.enc.comp2)) <= limit {
			stored, c.comp, c.enc, c.raw = w.enc.comp2, compZstd, enc2, len(raw2)
		}
	}
	return w.put(c, stored)
}

// store writes a chunk of encoding enc uncompressed.
func (w *Writer) store(enc uint8, raw []byte) chunkMeta {
	return w.put(chunkMeta{off: w.off, raw: len(raw), enc: enc, comp: compNone}, raw)
}

// put writes a chunk's stored bytes and completes its record c.
func (w *Writer) put(c chunkMeta, stored []byte) chunkMeta {
	c.stored, c.crc = len(stored), crc(stored)
	w.write(stored)
	return c
}

// Close writes the last block, the footer and the trailer, syncs and
// closes the file, and returns the segment's Info. On an error (the
// Writer's sticky error included) it closes the file and returns the
// error; the caller removes the file.
func (w *Writer) Close() (Info, error) {
	if err := w.ok(); err != nil {
		w.Abort()
		return Info{}, err
	}
	if w.n > 0 {
		w.flushAll(false)
	}
	m := &w.meta
	for j := range m.Props {
		m.Props[j].Dict = w.props[j].dict
	}
	if words := (len(m.EventNames) + 63) / 64; w.nBlocks*words > maxBitsetWords {
		w.fail(fmt.Errorf("segment writer: %d blocks of %d event names would need more than %d MiB of event bitsets: end the segment earlier (Writer.Bytes)", w.nBlocks, len(m.EventNames), maxBitsetWords/(1<<17)))
	}
	head := appendFooterHead(nil, m, w.nBlocks)
	// The checksum is taken before the writes: a writer may not modify
	// what it is given, but pebble's MemFS does in its invariants mode.
	footCRC := crc32.Update(crc(head), castagnoli, w.records)
	footOff := w.off
	w.write(head)
	w.write(w.records)
	footLen := w.off - footOff
	var tr [trailerSize]byte
	binary.LittleEndian.PutUint64(tr[0:], uint64(footOff))
	binary.LittleEndian.PutUint64(tr[8:], uint64(footLen))
	binary.LittleEndian.PutUint32(tr[16:], footCRC)
	binary.LittleEndian.PutUint32(tr[20:], crc(tr[:20]))
	tr[24] = Version
	copy(tr[25:], trailerMagic)
	w.write(tr[:])
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.fail(fmt.Errorf("segment writer: %w", err))
		}
	}
	if w.err == nil {
		if err := w.f.Sync(); err != nil {
			w.fail(fmt.Errorf("segment writer: sync: %w", err))
		}
	}
	w.done = true
	if err := w.f.Close(); err != nil {
		w.fail(fmt.Errorf("segment writer: close: %w", err))
	}
	if w.err != nil {
		return Info{}, w.err
	}
	info := Info{Bytes: w.off, Rows: m.Rows, Users: m.Users, MinTime: m.MinTime, MaxTime: m.MaxTime}
	if w.nBlocks > 0 {
		info.FirstHash, info.LastHash = w.firstHash, w.lastHash
	}
	return info, nil
}

// Abort closes the file without completing the segment (the caller
// removes it) and returns the close error. It does nothing after Close
// or Abort.
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.fail(errors.New("segment writer: aborted"))
	return w.f.Close()
}

// Write writes in as a new segment file at path: it creates the file
// (failing if it exists), writes it with a Writer (opt as for NewWriter;
// the property columns are in.Props, and SplitRows 0 means MaxBlockRows),
// fsyncs and closes it. in must satisfy the Input contract; a violation
// is reported (naming the user, row or property) before the file is
// created. On any error after creation the partial file is removed. Write
// does not retain in.
func Write(path string, in *Input, opt WriterOptions) (Info, error) {
	if in == nil {
		return Info{}, fmt.Errorf("write segment %s: nil input", path)
	}
	if len(opt.Props) > 0 {
		return Info{}, fmt.Errorf("write segment %s: WriterOptions.Props given: Write takes the columns of its Input", path)
	}
	opt.SplitRows = cmp.Or(opt.SplitRows, MaxBlockRows)
	opt.Props = in.PropSpecs()
	if err := checkInput(in); err != nil {
		return Info{}, fmt.Errorf("write segment %s: invalid input: %w", path, err)
	}
	if _, err := newWriter(opt); err != nil {
		return Info{}, fmt.Errorf("write segment %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return Info{}, fmt.Errorf("write segment: %w", err)
	}
	w, err := NewWriter(f, opt)
	if err == nil {
		err = w.appendInput(in)
	}
	var info Info
	if err == nil {
		info, err = w.Close()
	} else if w != nil {
		w.Abort()
	} else {
		f.Close()
	}
	if err != nil {
		return Info{}, errors.Join(fmt.Errorf("write segment %s: %w", path, err), os.Remove(path))
	}
	return info, nil
}

// growKeep returns s extended to n elements, keeping its contents (the
// new ones unspecified), reallocating with room to grow (doubling) when
// its capacity is too small.
func growKeep[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	t := make([]T, n, max(n, 2*cap(s), 256))
	copy(t, s)
	return t
}

// moveFront moves the values of rows [s, n) of v (those it holds) to the
// front and returns v resliced to them.
func moveFront[T any](v []T, s, n int) []T {
	if len(v) <= s {
		return v[:0]
	}
	return v[:copy(v, v[s:min(len(v), n)])]
}

// orBits ORs the n bits of bitmap src starting at bit s into bitmap dst
// starting at bit d (bit i of a bitmap is bit i%64 of word i/64), a word
// at a time, and reports whether any of those source bits is set. dst
// must hold bit d+n-1 and src bit s+n-1.
func orBits(dst []uint64, d int, src []uint64, s, n int) bool {
	set := false
	for n > 0 {
		k := min(n, 64)
		sw, sb := s>>6, uint(s&63)
		v := src[sw] >> sb
		if sb != 0 && sw+1 < len(src) {
			v |= src[sw+1] << (64 - sb)
		}
		if k < 64 {
			v &= 1<<uint(k) - 1
		}
		if v != 0 {
			set = true
			dw, db := d>>6, uint(d&63)
			dst[dw] |= v << db
			if db != 0 && int(64-db) < k {
				dst[dw+1] |= v >> (64 - db)
			}
		}
		s, d, n = s+k, d+k, n-k
	}
	return set
}

// shiftBits moves bits [s, n) of bm to [0, n-s), clearing the rest, and
// returns bm resliced to the words of n-s bits.
func shiftBits(bm []uint64, s, n int) []uint64 {
	m := n - s
	words := (m + 63) / 64
	for j := range words {
		sw, sb := s/64+j, uint(s%64)
		v := bm[sw] >> sb
		if sb != 0 && sw+1 < len(bm) {
			v |= bm[sw+1] << (64 - sb)
		}
		bm[j] = v
	}
	if m%64 != 0 {
		bm[words-1] &= 1<<(m%64) - 1
	}
	clear(bm[words:])
	return bm[:words]
}

// eachBit returns an iterator over the set bits of bm in [a, b).
func eachBit(bm []uint64, a, b int) func(yield func(int) bool) {
	return func(yield func(int) bool) {
		if a >= b {
			return
		}
		for wi := a >> 6; wi <= (b-1)>>6; wi++ {
			v := bm[wi]
			lo := wi << 6
			if lo < a {
				v &= ^uint64(0) << uint(a-lo)
			}
			if b-lo < 64 {
				v &= 1<<uint(b-lo) - 1
			}
			for ; v != 0; v &= v - 1 {
				if !yield(lo + bits.TrailingZeros64(v)) {
					return
				}
			}
		}
	}
}
