package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"

	"github.com/spurdb/spur/event"
)

// parquetBatchRows is the number of rows decoded per column per batch.
const parquetBatchRows = 4096

// parquetReader reads flat Parquet files column by column: each batch
// decodes up to parquetBatchRows values of every column straight from
// parquet-go's decoded pages into the typed slices of a Batch (the strings
// of a page share one allocation, dictionary-coded strings become codes
// into a Dict built once per column chunk), so per row there is no
// interface value and no allocation. Column kinds without a typed page
// decoder here (BOOLEAN, INT96, FIXED_LEN_BYTE_ARRAY) are read through the
// page's parquet.Value reader. Columns map by name: the named columns of
// Options, every other top-level column is a property. Nested (group) and
// repeated columns are rejected when the file is opened.
//
// Column types: BOOLEAN → bool; INT32/INT64 (also INT(8..64) signed or
// unsigned) → int; FLOAT/DOUBLE → float; BYTE_ARRAY (STRING, ENUM, JSON or
// unannotated, must be UTF-8) → string; DECIMAL → float; TIMESTAMP (any
// unit), DATE and INT96 → time; TIME → int microseconds since midnight;
// UUID → string in 8-4-4-4-12 form. Nulls are "not set". The timestamp
// column may be a TIMESTAMP, DATE or INT96 column, an integer or float
// (epoch magnitude rule) or a string (event.ParseTime). TIMESTAMPs with
// isAdjustedToUTC=false are wall clock times in Options.Loc.
//
// Rows are read with Next (one event at a time, from an internal Batch) or
// with NextBatch (ColumnReader). Both report the same rows and the same row
// errors: NextBatch checks the columns for the conditions fill rejects and
// runs fill itself on the rows that meet one, so a bad row's error comes
// from the same code either way.
//
// parquet-go panics on some malformed files; the reader turns such a panic
// into a fatal error naming the file.
type parquetReader struct {
	*source
	opt       Options
	file      *parquet.File
	groups    []parquet.RowGroup
	group     int // current row group
	groupLeft int64
	cols      []*pqCol // all columns
	user      *pqCol
	time      *pqCol
	event     *pqCol
	insert    *pqCol
	props     []*pqCol
	done      int64 // rows decoded before the current batch (cur or a NextBatch)

	cur  event.Batch // the batch Next reads from
	n, i int         // rows in cur, next row of cur

	suspect []bool      // NextBatch: per row, whether fill must look at it
	scratch event.Event // NextBatch: fill's output for suspect rows
}

// pqKind is how a column's values are decoded.
type pqKind uint8

const (
	pqBool pqKind = iota
	pqInt
	pqUint32
	pqUint64
	pqFloat32
	pqFloat64
	pqString
	pqTimestamp // INT64 TIMESTAMP, scaled by div/mul
	pqDate      // INT32 days
	pqInt96     // INT96 timestamp
	pqTimeOfDay // INT32/INT64 TIME, scaled by div/mul
	pqDecimal   // INT32/INT64 DECIMAL
	pqDecimalBytes
	pqUUID
)

// pqCol is one column: how to decode it and where its reading stands.
type pqCol struct {
	name   string
	index  int // leaf column index
	pos    int // position in parquetReader.cols and Batch.cols
	kind   pqKind
	phys   parquet.Kind // physical type
	maxDef byte         // definition level of a non-null value (0: required column)
	typ    event.Type   // property type of the decoded values
	decl   event.Type   // declared type (Options.Schema) or TypeNone
	role   role
	mul    int64   // pqTimestamp/pqTimeOfDay: µs = v*mul/div
	div    int64   //
	local  bool    // TIMESTAMP not adjusted to UTC
	scale  float64 // decimals: value = unscaled / scale

	pages    parquet.Pages // of the current row group's chunk
	page     parquet.Page  // current page, nil before the first
	pageRows int           // rows in page
	pageOff  int           // rows of page decoded
	valOff   int           // non-null values of page decoded
	typed    bool          // page is decoded from its typed data (else vr)
	vr       parquet.ValueReader
	vals     []parquet.Value // generic decoding scratch
	raw      []int64         // typed decoding scratch
	rawF     []float64       //
	dictOf   parquet.Dictionary
	dict     *event.Dict // built from dictOf
}

func newParquetReader(ra io.ReaderAt, size int64, src *source, opt Options) (_ *parquetReader, err error) {
	defer recoverParquet(src.name, &err)
	if err := checkFooter(ra, size); err != nil {
		return nil, fmt.Errorf("%s: open Parquet: %w", src.name, err)
	}
	f, err := parquet.OpenFile(ra, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("%s: open Parquet: %w", src.name, err)
	}
	r := &parquetReader{source: src, opt: opt, file: f, groups: f.RowGroups(), group: -1}
	for _, c := range f.Root().Columns() {
		if err := r.addColumn(c); err != nil {
			return nil, err
		}
	}
	var names []string
	for _, c := range r.cols {
		names = append(names, c.name)
	}
	missing := func(what, col string) error {
		return fmt.Errorf("%s: no %s column %q in the Parquet schema (columns: %v)", src.name, what, col, names)
	}
	if r.user == nil {
		return nil, missing("user id", opt.UserCol)
	}
	if !opt.Users {
		if r.time == nil {
			return nil, missing("timestamp", opt.TimeCol)
		}
		if r.event == nil {
			return nil, missing("event name", opt.EventCol)
		}
	}
	return r, nil
}

// checkFooter validates the file's trailer ("PAR1", footer length,
// "PAR1"-terminated) before parquet-go allocates a buffer of the footer
// length it finds there, which could be 4 GiB in a corrupt file.
func checkFooter(ra io.ReaderAt, size int64) error {
	var tail [8]byte
	if size < 12 {
		return errors.New("not a Parquet file: too short")
	}
	if _, err := ra.ReadAt(tail[:], size-8); err != nil {
		return err
	}
	if string(tail[4:]) != "PAR1" && string(tail[4:]) != "PARE" {
		return errors.New("not a Parquet file: no PAR1 magic at the end")
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 {
		return fmt.Errorf("corrupt Parquet file: footer length %d exceeds the file size %d", n, size)
	}
	return nil
}

// recoverParquet turns a panic inside parquet-go into an error.
func recoverParquet(name string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%s: corrupt or unsupported Parquet file: %v", name, p)
	}
}

// addColumn classifies one top-level column.
func (r *parquetReader) addColumn(c *parquet.Column) error {
	name := c.Name()
	fail := func(why string) error {
		return fmt.Errorf("%s: Parquet column %q: %s", r.name, name, why)
	}
	if !c.Leaf() {
		return fail("nested groups are not supported; flatten the schema")
	}
	if c.Repeated() || c.MaxRepetitionLevel() > 0 {
		return fail("repeated columns are not supported")
	}
	t := c.Type()
	col := &pqCol{name: name, index: c.Index(), pos: len(r.cols), phys: t.Kind(), maxDef: byte(c.MaxDefinitionLevel()),
		role: r.opt.roleOf(name), mul: 1, div: 1}
	var lt any
	if l := t.LogicalType(); l != nil {
		lt = l.Value
	}
	kind := t.Kind()
	unsupported := func() error {
		return fail("unsupported type " + t.String())
	}
	switch kind {
	case parquet.Boolean:
		col.kind, col.typ = pqBool, event.TypeBool
	case parquet.Int32, parquet.Int64:
		col.kind, col.typ = pqInt, event.TypeInt
		switch l := lt.(type) {
		case nil:
		case *format.IntType:
			if !l.IsSigned {
				col.kind = pqUint32
				if kind == parquet.Int64 {
					col.kind = pqUint64
				}
			}
		case *format.TimestampType:
			if kind != parquet.Int64 {
				return unsupported()
			}
			col.kind, col.typ, col.local = pqTimestamp, event.TypeTime, !l.IsAdjustedToUTC
			if err := setUnit(col, l.Unit); err != nil {
				return fail(err.Error())
			}
		case *format.DateType:
			col.kind, col.typ = pqDate, event.TypeTime
		case *format.TimeType:
			col.kind = pqTimeOfDay
			if err := setUnit(col, l.Unit); err != nil {
				return fail(err.Error())
			}
		case *format.DecimalType:
			col.kind, col.typ, col.scale = pqDecimal, event.TypeFloat, math.Pow10(int(l.Scale))
		default:
			return unsupported()
		}
	case parquet.Int96:
		col.kind, col.typ = pqInt96, event.TypeTime
	case parquet.Float:
		col.kind, col.typ = pqFloat32, event.TypeFloat
	case parquet.Double:
		col.kind, col.typ = pqFloat64, event.TypeFloat
	case parquet.ByteArray, parquet.FixedLenByteArray:
		switch l := lt.(type) {
		case *format.DecimalType:
			col.kind, col.typ, col.scale = pqDecimalBytes, event.TypeFloat, math.Pow10(int(l.Scale))
		case *format.UUIDType:
			col.kind, col.typ = pqUUID, event.TypeString
		case nil, *format.StringType, *format.EnumType, *format.JsonType:
			if kind != parquet.ByteArray {
				return unsupported()
			}
			col.kind, col.typ = pqString, event.TypeString
		default:
			return unsupported()
		}
	default:
		return unsupported()
	}
	switch col.role {
	case roleEvent:
		if col.kind != pqString {
			return fail("want a string column, found " + t.String())
		}
	case roleUser, roleInsertID:
		switch col.kind {
		case pqString, pqUUID, pqInt, pqUint32, pqUint64:
		default:
			return fail("want a string or integer column, found " + t.String())
		}
	case roleTime:
		if col.kind == pqBool || col.kind == pqUUID || col.kind == pqTimeOfDay || col.kind == pqDecimalBytes {
			return fail("want a timestamp, integer, float or string column, found " + t.String())
		}
	default:
		if err := event.ValidatePropName(name); err != nil {
			return fail(err.Error())
		}
		col.decl = r.opt.Schema[name]
	}
	r.cols = append(r.cols, col)
	switch col.role {
	case roleUser:
		r.user = col
	case roleTime:
		r.time = col
	case roleEvent:
		r.event = col
	case roleInsertID:
		r.insert = col
	default:
		r.props = append(r.props, col)
	}
	return nil
}

// setUnit sets the µs scaling of a TIMESTAMP or TIME column.
func setUnit(col *pqCol, u format.TimeUnit) error {
	switch u.Value.(type) {
	case *format.MilliSeconds:
		col.mul = 1000
	case *format.MicroSeconds:
	case *format.NanoSeconds:
		col.div = 1000
	default:
		return errors.New("unknown time unit")
	}
	return nil
}

// PropTypes implements Typed: the property columns in schema order with the
// types their values get (before any declared type is applied).
func (r *parquetReader) PropTypes() []event.PropType {
	out := make([]event.PropType, len(r.props))
	for i, c := range r.props {
		out[i] = event.PropType{Name: c.name, Type: c.typ}
	}
	return out
}

// Next implements Reader.
func (r *parquetReader) Next(ev *event.Event) error {
	for r.i >= r.n {
		r.n, r.i = 0, 0
		n, err := r.decodeBatch(&r.cur)
		if err != nil {
			return err
		}
		r.n = n
	}
	i := r.i
	r.i++
	return r.fill(&r.cur, ev, i)
}

// Rows implements ColumnReader: the row count of the file's footer.
func (r *parquetReader) Rows() int64 { return r.file.NumRows() }

// NextBatch implements ColumnReader.
func (r *parquetReader) NextBatch(b *event.Batch) error {
	if r.i < r.n {
		return fmt.Errorf("%s: NextBatch called with %d rows of the current batch not yet read by Next", r.name, r.n-r.i)
	}
	n, err := r.decodeBatch(b)
	if err != nil {
		return err
	}
	r.check(b, n)
	return nil
}

// decodeBatch decodes the next batch of rows of every column into b.Cols
// and returns its size; io.EOF at the end.
func (r *parquetReader) decodeBatch(b *event.Batch) (n int, err error) {
	defer recoverParquet(r.name, &err)
	for r.groupLeft == 0 {
		r.group++
		if r.group >= len(r.groups) {
			r.group = len(r.groups)
			return 0, io.EOF
		}
		g := r.groups[r.group]
		r.groupLeft = g.NumRows()
		chunks := g.ColumnChunks()
		for _, c := range r.cols {
			if err := c.closePages(); err != nil {
				return 0, fmt.Errorf("%s: Parquet column %q: %w", r.name, c.name, err)
			}
			c.pages = chunks[c.index].Pages()
		}
	}
	n = int(min(r.groupLeft, parquetBatchRows))
	if len(b.Cols) != len(r.cols) {
		b.Cols = make([]event.Column, len(r.cols))
	}
	for _, c := range r.cols {
		if err := r.decodeColumn(c, &b.Cols[c.pos], n); err != nil {
			return 0, err
		}
	}
	b.Rows = n
	b.Pos = r.pos(r.done + 1)
	r.groupLeft -= int64(n)
	r.done += int64(n)
	return n, nil
}

// closePages releases the column's page and closes its page reader.
func (c *pqCol) closePages() error {
	c.releasePage()
	var err error
	if c.pages != nil {
		err = c.pages.Close()
		c.pages = nil
	}
	return err
}

func (c *pqCol) releasePage() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page, c.vr = nil, nil
	}
}

// nextPage moves to the column chunk's next page.
func (c *pqCol) nextPage() error {
	c.releasePage()
	p, err := c.pages.ReadPage()
	if err != nil {
		return err
	}
	c.page, c.pageRows, c.pageOff, c.valOff = p, int(p.NumRows()), 0, 0
	c.typed = c.typedKind(p)
	return nil
}

// typedKind reports whether page p of c is decoded from its typed data:
// the column kind has a typed decoder and the page holds the physical type
// (or dictionary indexes) that decoder expects.
func (c *pqCol) typedKind(p parquet.Page) bool {
	var want encoding.Kind
	switch c.kind {
	case pqInt, pqUint32, pqUint64, pqTimestamp, pqTimeOfDay, pqDate, pqDecimal:
		want = encoding.Int64
		if c.phys == parquet.Int32 {
			want = encoding.Int32
		}
	case pqFloat32:
		want = encoding.Float
	case pqFloat64:
		want = encoding.Double
	case pqString:
		want = encoding.ByteArray
	default:
		return false
	}
	if c.maxDef > 1 || (c.maxDef == 0 && len(p.DefinitionLevels()) > 0) {
		return false
	}
	data := p.Data()
	if d := p.Dictionary(); d != nil {
		dd := d.Page().Data()
		return data.Kind() == encoding.Int32 && dd.Kind() == want
	}
	return data.Kind() == want
}

// arenaStrs reports whether c's strings are built row by row in the
// column's arena: UUIDs and integer user or insert ids.
func (c *pqCol) arenaStrs() bool {
	switch c.kind {
	case pqUUID:
		return true
	case pqInt, pqUint32, pqUint64:
		return c.strCol()
	}
	return false
}

// strCol reports whether an integer column is read as strings (user id or
// insert id given as numbers).
func (c *pqCol) strCol() bool { return c.role == roleUser || c.role == roleInsertID }

// decodeColumn reads exactly n values of c into col, page by page.
func (r *parquetReader) decodeColumn(c *pqCol, col *event.Column, n int) error {
	col.Name, col.Type, col.Dict, col.Fill.Nulls = c.name, c.typ, nil, 0
	col.Null = resize(col.Null, n)
	col.Fill.Bad = col.Fill.Bad[:0]
	switch {
	case c.typ == event.TypeFloat:
		col.Floats = resize(col.Floats, n)
	case c.typ == event.TypeString:
		col.Strs = resize(col.Strs, n)
		col.Codes = resize(col.Codes, n)
	default:
		col.Ints = resize(col.Ints, n)
	}
	if c.arenaStrs() {
		col.Type = event.TypeString
		col.Strs = resize(col.Strs, n)
		col.Fill.Offs = resize(col.Fill.Offs, n)
		col.Fill.Arena = col.Fill.Arena[:0]
	}
	fail := func(err error) error {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%s: Parquet column %q, row group %d: %w", r.name, c.name, r.group, err)
	}
	for got := 0; got < n; {
		if c.page == nil || c.pageOff >= c.pageRows {
			if err := c.nextPage(); err != nil {
				return fail(err)
			}
			continue
		}
		k := min(n-got, c.pageRows-c.pageOff)
		var err error
		if c.typed {
			err = r.decodeTyped(c, col, got, k)
		} else {
			err = r.decodeValues(c, col, got, k)
		}
		if err != nil {
			return fail(err)
		}
		got += k
		c.pageOff += k
	}
	if c.arenaStrs() {
		all := string(col.Fill.Arena)
		start := int32(0)
		for j := range n {
			col.Strs[j] = all[start:col.Fill.Offs[j]]
			start = col.Fill.Offs[j]
		}
	}
	return nil
}

var errCorruptPage = errors.New("corrupt page: fewer values than rows")

// decodeTyped decodes the next k rows of c's page into rows j0.. of col
// from the page's typed data.
func (r *parquetReader) decodeTyped(c *pqCol, col *event.Column, j0, k int) error {
	p := c.page
	nulls := col.Null[j0 : j0+k]
	nn := k // non-null values
	if defs := p.DefinitionLevels(); len(defs) > 0 {
		if len(defs) < c.pageOff+k {
			return errCorruptPage
		}
		nn = 0
		for t, d := range defs[c.pageOff : c.pageOff+k] {
			null := d != c.maxDef
			nulls[t] = null
			if !null {
				nn++
			}
		}
	} else {
		clear(nulls)
	}
	col.Fill.Nulls += k - nn
	v0 := c.valOff
	c.valOff += nn
	data := p.Data()
	dict := p.Dictionary()
	var idx []int32
	if dict != nil {
		if idx = data.Int32(); len(idx) < v0+nn {
			return errCorruptPage
		}
		idx = idx[v0 : v0+nn]
	}
	switch c.kind {
	case pqString:
		if dict != nil {
			d, err := c.dictFor(dict)
			if err != nil {
				return err
			}
			return decodeDictStrs(col, d, idx, j0, k)
		}
		return decodePlainStrs(col, &data, v0, nn, j0, k)
	case pqFloat32, pqFloat64:
		raw, err := c.rawFloats(&data, dict, idx, v0, nn)
		if err != nil {
			return err
		}
		out := col.Floats[j0 : j0+k]
		defer checkFinite(col, j0, out)
		if nn == k {
			copy(out, raw)
			return nil
		}
		v := 0
		for t := range out {
			if nulls[t] {
				out[t] = 0
				continue
			}
			out[t] = raw[v]
			v++
		}
		return nil
	}
	raw, err := c.rawInts(&data, dict, idx, v0, nn)
	if err != nil {
		return err
	}
	if nn == k && c.kind == pqInt && !c.strCol() {
		copy(col.Ints[j0:j0+k], raw) // plain integers: nothing to convert
		return nil
	}
	if nn == k && c.kind == pqTimestamp && c.mul == 1 && c.div == 1 && !c.local {
		out := col.Ints[j0 : j0+k] // microseconds: only the range to check
		copy(out, raw)
		for t, us := range out {
			if us < event.MinTime || us > event.MaxTime {
				col.SetBad(j0+t, errTimeRange)
			}
		}
		return nil
	}
	v := 0
	for t := range k {
		j := j0 + t
		if nulls[t] {
			r.setNull(c, col, j)
			continue
		}
		r.setInt(c, col, j, raw[v])
		v++
	}
	return nil
}

// rawInts returns the page's non-null values v0..v0+nn as int64 (INT32
// sign-extended, or zero-extended for unsigned columns), looked up in dict
// when the page holds dictionary indexes idx.
func (c *pqCol) rawInts(data *encoding.Values, dict parquet.Dictionary, idx []int32, v0, nn int) ([]int64, error) {
	c.raw = resize(c.raw, nn)
	raw := c.raw
	if dict != nil {
		dd := dict.Page().Data()
		if dd.Kind() == encoding.Int64 {
			vals := dd.Int64()
			for t, x := range idx {
				if uint(x) >= uint(len(vals)) {
					return nil, errBadIndex(x, len(vals))
				}
				raw[t] = vals[x]
			}
			return raw, nil
		}
		vals := dd.Int32()
		for t, x := range idx {
			if uint(x) >= uint(len(vals)) {
				return nil, errBadIndex(x, len(vals))
			}
			raw[t] = int64(vals[x])
		}
		if c.kind == pqUint32 {
			for t := range raw {
				raw[t] = int64(uint32(raw[t]))
			}
		}
		return raw, nil
	}
	if data.Kind() == encoding.Int64 {
		vals := data.Int64()
		if len(vals) < v0+nn {
			return nil, errCorruptPage
		}
		copy(raw, vals[v0:v0+nn])
		return raw, nil
	}
	vals := data.Int32()
	if len(vals) < v0+nn {
		return nil, errCorruptPage
	}
	if c.kind == pqUint32 {
		for t, x := range vals[v0 : v0+nn] {
			raw[t] = int64(uint32(x))
		}
	} else {
		for t, x := range vals[v0 : v0+nn] {
			raw[t] = int64(x)
		}
	}
	return raw, nil
}

// rawFloats is rawInts for FLOAT and DOUBLE columns.
func (c *pqCol) rawFloats(data *encoding.Values, dict parquet.Dictionary, idx []int32, v0, nn int) ([]float64, error) {
	c.rawF = resize(c.rawF, nn)
	raw := c.rawF
	if dict != nil {
		dd := dict.Page().Data()
		if dd.Kind() == encoding.Double {
			vals := dd.Double()
			for t, x := range idx {
				if uint(x) >= uint(len(vals)) {
					return nil, errBadIndex(x, len(vals))
				}
				raw[t] = vals[x]
			}
			return raw, nil
		}
		vals := dd.Float()
		for t, x := range idx {
			if uint(x) >= uint(len(vals)) {
				return nil, errBadIndex(x, len(vals))
			}
			raw[t] = float64(vals[x])
		}
		return raw, nil
	}
	if data.Kind() == encoding.Double {
		vals := data.Double()
		if len(vals) < v0+nn {
			return nil, errCorruptPage
		}
		copy(raw, vals[v0:v0+nn])
		return raw, nil
	}
	vals := data.Float()
	if len(vals) < v0+nn {
		return nil, errCorruptPage
	}
	for t, x := range vals[v0 : v0+nn] {
		raw[t] = float64(x)
	}
	return raw, nil
}

func errBadIndex(x int32, n int) error {
	return fmt.Errorf("corrupt page: dictionary index %d out of range (dictionary of %d values)", x, n)
}

// dictFor returns the Dict of parquet dictionary d, built on first use.
func (c *pqCol) dictFor(d parquet.Dictionary) (*event.Dict, error) {
	if c.dict != nil && c.dictOf == d {
		return c.dict, nil
	}
	dd := d.Page().Data()
	bytes, offs := dd.ByteArray()
	if len(offs) == 0 {
		offs = []uint32{0}
	}
	if int(offs[len(offs)-1]) > len(bytes) || offs[0] > offs[len(offs)-1] {
		return nil, errors.New("corrupt dictionary page: offsets out of range")
	}
	all := string(bytes[offs[0]:offs[len(offs)-1]])
	base := offs[0]
	dict := &event.Dict{Strs: make([]string, len(offs)-1)}
	for e := range dict.Strs {
		lo, hi := offs[e], offs[e+1]
		if lo > hi || hi > offs[len(offs)-1] {
			return nil, errors.New("corrupt dictionary page: offsets out of order")
		}
		s := all[lo-base : hi-base]
		if !utf8.ValidString(s) {
			if dict.Bad == nil {
				dict.Bad = make([]string, len(dict.Strs))
			}
			dict.Bad[e] = errNotUTF8
			s = ""
		}
		dict.Strs[e] = s
	}
	c.dictOf, c.dict = d, dict
	return dict, nil
}

const errNotUTF8 = "value is not valid UTF-8"

// decodeDictStrs decodes k rows of dictionary indexes idx (one per non-null
// row) into rows j0.. of col: as codes while the batch's rows so far use
// the same Dict, else as strings.
func decodeDictStrs(col *event.Column, d *event.Dict, idx []int32, j0, k int) error {
	if j0 > 0 && col.Dict != d {
		toStrs(col, j0)
	}
	if j0 == 0 {
		col.Dict = d
	}
	v := 0
	for t := range k {
		j := j0 + t
		if col.Null[j] {
			col.Codes[j], col.Strs[j] = 0, ""
			continue
		}
		x := idx[v]
		v++
		if uint(x) >= uint(len(d.Strs)) {
			return errBadIndex(x, len(d.Strs))
		}
		if col.Dict != nil {
			col.Codes[j] = uint32(x)
		} else {
			col.Strs[j] = d.Strs[x]
		}
		if d.Bad != nil && d.Bad[x] != "" {
			col.SetBad(j, d.Bad[x])
		}
	}
	return nil
}

// toStrs turns the first n rows of a dictionary-coded column into strings.
func toStrs(col *event.Column, n int) {
	if col.Dict == nil {
		return
	}
	for j := range n {
		col.Strs[j] = ""
		if !col.Null[j] {
			col.Strs[j] = col.Dict.Strs[col.Codes[j]]
		}
	}
	col.Dict = nil
}

// decodePlainStrs decodes k rows of plain byte arrays (values v0..v0+nn of
// data, one per non-null row) into rows j0.. of col as strings sharing one
// allocation.
func decodePlainStrs(col *event.Column, data *encoding.Values, v0, nn, j0, k int) error {
	toStrs(col, j0)
	bytes, offs := data.ByteArray()
	if len(offs) < v0+nn+1 {
		return errCorruptPage
	}
	offs = offs[v0 : v0+nn+1]
	lo, hi := offs[0], offs[nn]
	if lo > hi || int(hi) > len(bytes) {
		return errCorruptPage
	}
	all := string(bytes[lo:hi])
	ascii := isASCII(all)
	v := 0
	for t := range k {
		j := j0 + t
		if col.Null[j] {
			col.Strs[j] = ""
			continue
		}
		a, b := offs[v], offs[v+1]
		v++
		if a < lo || b < a || b > hi {
			return errCorruptPage
		}
		s := all[a-lo : b-lo]
		col.Strs[j] = s
		if !ascii && !utf8.ValidString(s) {
			col.SetBad(j, errNotUTF8)
		}
	}
	return nil
}

// isASCII reports whether s has no byte ≥ 0x80 (then every substring is
// valid UTF-8).
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if w&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// decodeValues decodes the next k rows of c's page into rows j0.. of col
// through the page's parquet.Value reader.
func (r *parquetReader) decodeValues(c *pqCol, col *event.Column, j0, k int) error {
	if c.vr == nil {
		c.vr = c.page.Values()
	}
	c.vals = resize(c.vals, k)
	for got := 0; got < k; {
		m, err := c.vr.ReadValues(c.vals[got:k])
		got += m
		if got < k {
			if err == nil && m == 0 {
				err = io.ErrNoProgress
			}
			if err != nil {
				return err
			}
		}
	}
	if c.typ == event.TypeString && !c.arenaStrs() {
		toStrs(col, j0)
	}
	for t, v := range c.vals[:k] {
		r.decodeValue(c, col, j0+t, v)
		if col.Null[j0+t] {
			col.Fill.Nulls++
		}
	}
	return nil
}

// errNotFinite is the row error of a NaN or ±Inf FLOAT/DOUBLE value: Spur
// stores finite floats only (like its CSV and NDJSON readers; sums and
// quantiles are defined on finite values).
const errNotFinite = "expected a finite float, found NaN or ±Inf"

// checkFinite marks the rows j0.. of col whose value in vals is NaN or
// ±Inf (x-x is 0 only for finite x). Nulls hold 0, so they pass.
func checkFinite(col *event.Column, j0 int, vals []float64) {
	for t, x := range vals {
		if x-x != 0 {
			col.SetBad(j0+t, errNotFinite)
		}
	}
}

// setNull marks row j of col not set.
func (r *parquetReader) setNull(c *pqCol, col *event.Column, j int) {
	col.Null[j] = true
	switch {
	case c.typ == event.TypeFloat:
		col.Floats[j] = 0
	case c.typ == event.TypeString:
		col.Strs[j], col.Codes[j] = "", 0
	default:
		col.Ints[j] = 0
	}
	if c.arenaStrs() {
		col.Fill.Offs[j] = int32(len(col.Fill.Arena))
	}
}

// decodeValue decodes value v into row j of col.
func (r *parquetReader) decodeValue(c *pqCol, col *event.Column, j int, v parquet.Value) {
	if v.IsNull() {
		r.setNull(c, col, j)
		return
	}
	col.Null[j] = false
	var raw int64
	switch c.kind {
	case pqBool:
		if v.Boolean() {
			raw = 1
		}
	case pqInt, pqTimestamp, pqTimeOfDay, pqDecimal:
		raw = v.Int64()
		if v.Kind() == parquet.Int32 {
			raw = int64(v.Int32())
		}
	case pqDate:
		raw = int64(v.Int32())
	case pqUint32:
		raw = int64(v.Uint32())
	case pqUint64:
		raw = int64(v.Uint64())
	case pqFloat32:
		col.Floats[j] = float64(v.Float())
		checkFinite(col, j, col.Floats[j:j+1])
		return
	case pqFloat64:
		col.Floats[j] = v.Double()
		checkFinite(col, j, col.Floats[j:j+1])
		return
	case pqString:
		s := string(v.ByteArray())
		if !utf8.ValidString(s) {
			col.SetBad(j, errNotUTF8)
		}
		col.Strs[j], col.Codes[j] = s, 0
		return
	case pqUUID:
		col.Fill.Arena = appendUUID(col.Fill.Arena, v.ByteArray())
		col.Fill.Offs[j] = int32(len(col.Fill.Arena))
		return
	case pqInt96:
		w := v.Int96()
		nanos := int64(uint64(w[1])<<32 | uint64(w[0]))
		days := int64(int32(w[2])) - 2440588 // Julian day 2440588 = 1970-01-01
		if days < event.MinTime/86400e6-1 || days > event.MaxTime/86400e6+1 {
			col.SetBad(j, errTimeRange) // and no overflow below
			days = 0
		}
		raw = days*86400e6 + floorDiv(nanos, 1000)
	case pqDecimalBytes:
		col.Floats[j] = bigEndianFloat(v.ByteArray()) / c.scale
		return
	}
	r.setInt(c, col, j, raw)
}

const errTimeRange = "timestamp out of range (years 0000-9999)"

// setInt converts the raw integer of a non-null row j (the stored INT32 or
// INT64 value; for INT96, microseconds) by c's kind and stores it.
func (r *parquetReader) setInt(c *pqCol, col *event.Column, j int, raw int64) {
	i := raw
	switch c.kind {
	case pqUint64:
		if raw < 0 {
			col.SetBad(j, "unsigned value "+strconv.FormatUint(uint64(raw), 10)+" out of the int64 range")
		}
	case pqTimestamp, pqTimeOfDay:
		i = floorDiv(raw, c.div)
		if c.mul != 1 {
			if i > math.MaxInt64/c.mul || i < math.MinInt64/c.mul {
				col.SetBad(j, "timestamp out of range")
			}
			i *= c.mul
		}
		if c.local {
			i = wallToUTC(i, r.opt.Loc)
		}
	case pqDate:
		if raw < event.MinTime/86400e6-1 || raw > event.MaxTime/86400e6+1 {
			col.SetBad(j, errTimeRange) // and no overflow below
			raw = 0
		}
		i = raw * 86400e6
	case pqDecimal:
		col.Floats[j] = float64(raw) / c.scale
		return
	}
	col.Ints[j] = i
	if c.arenaStrs() {
		col.Fill.Arena = strconv.AppendInt(col.Fill.Arena, i, 10)
		col.Fill.Offs[j] = int32(len(col.Fill.Arena))
	}
	if c.typ == event.TypeTime && (i < event.MinTime || i > event.MaxTime) {
		col.SetBad(j, errTimeRange)
	}
}

// floorDiv divides rounding towards negative infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// wallToUTC reads µs since the epoch of a local (not UTC-adjusted)
// timestamp as a wall clock time in loc.
func wallToUTC(us int64, loc *time.Location) int64 {
	if loc == nil || loc == time.UTC {
		return us
	}
	t := time.UnixMicro(us).UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc).UnixMicro()
}

// bigEndianFloat converts a big-endian two's complement integer to float64.
func bigEndianFloat(b []byte) float64 {
	var f float64
	for _, x := range b {
		f = f*256 + float64(x)
	}
	if len(b) > 0 && b[0]&0x80 != 0 {
		f -= math.Pow(2, float64(8*len(b)))
	}
	return f
}

// appendUUID appends the canonical 8-4-4-4-12 hex form of a 16-byte UUID.
func appendUUID(dst, u []byte) []byte {
	const hexd = "0123456789abcdef"
	for k, x := range u {
		if k == 4 || k == 6 || k == 8 || k == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexd[x>>4], hexd[x&15])
	}
	return dst
}

// fill converts row i of batch b into ev.
func (r *parquetReader) fill(b *event.Batch, ev *event.Event, i int) error {
	o := &r.opt
	pos := event.Pos{File: b.Pos.File, Line: b.Pos.Line + int64(i)}
	ev.Pos = pos
	str := func(c *pqCol, what string) (string, error) {
		col := &b.Cols[c.pos]
		if col.Null[i] {
			return "", rowErr(pos, c.name, "missing "+what)
		}
		if bad := col.BadAt(i); bad != "" {
			return "", rowErr(pos, c.name, bad)
		}
		return col.Str(i), nil
	}
	var err error
	if ev.UserID, err = str(r.user, "user id"); err != nil {
		return err
	}
	if err := o.checkUser(pos, ev.UserID); err != nil {
		return err
	}
	ev.Name = ""
	if r.event != nil {
		if ev.Name, err = str(r.event, "event name"); err != nil {
			return err
		}
		if err := o.checkEvent(pos, ev.Name); err != nil {
			return err
		}
	}
	ev.InsertID = ""
	if r.insert != nil && !b.Cols[r.insert.pos].Null[i] {
		if ev.InsertID, err = str(r.insert, "insert id"); err != nil {
			return err
		}
		if err := o.checkValue(pos, r.insert.name, event.String(ev.InsertID)); err != nil {
			return err
		}
	}
	ev.Time = o.ImportTime
	if c := r.time; c != nil {
		if ev.Time, err = r.timeOf(c, &b.Cols[c.pos], i, pos); err != nil {
			return err
		}
	}
	ev.Props = ev.Props[:0]
	for _, c := range r.props {
		col := &b.Cols[c.pos]
		if col.Null[i] {
			continue
		}
		if bad := col.BadAt(i); bad != "" {
			return rowErr(pos, c.name, bad)
		}
		v := col.Value(i)
		if err := o.checkValue(pos, c.name, v); err != nil {
			return err
		}
		if c.decl != event.TypeNone && c.decl != v.Type {
			if v, err = event.CoerceIn(v, c.decl, o.Loc); err != nil {
				return rowErr(pos, c.name, err.Error())
			}
		}
		ev.Props = append(ev.Props, event.Prop{Name: c.name, Value: v})
	}
	return nil
}

// timeOf returns the timestamp of row i from the time column.
func (r *parquetReader) timeOf(c *pqCol, col *event.Column, i int, pos event.Pos) (int64, error) {
	if col.Null[i] {
		return 0, rowErr(pos, c.name, "missing timestamp")
	}
	if bad := col.BadAt(i); bad != "" {
		return 0, rowErr(pos, c.name, bad)
	}
	us, err := r.micros(c, col, i)
	if err != nil {
		return 0, rowErr(pos, c.name, err.Error())
	}
	return us, nil
}

// micros converts row i of the (not null, not bad) time column to UTC µs.
func (r *parquetReader) micros(c *pqCol, col *event.Column, i int) (int64, error) {
	switch c.kind {
	case pqString:
		return event.ParseTime(col.Str(i), r.opt.Loc)
	case pqInt, pqUint32, pqUint64:
		return event.EpochToMicros(col.Ints[i])
	case pqFloat32, pqFloat64, pqDecimal:
		return event.EpochFloatToMicros(col.Floats[i])
	}
	return col.Ints[i], nil // TIMESTAMP, DATE, INT96: already µs
}

// check completes a decoded batch for NextBatch: the views of b, the
// timestamps, the declared-type conversions and the row errors. A row is
// suspect when one of its columns meets a condition fill rejects (a null
// or bad value, an out-of-limits user id or event name, a time or declared
// type that does not convert); fill runs on the suspect rows only and its
// error, if any, is the row's.
func (r *parquetReader) check(b *event.Batch, n int) {
	r.suspect = resize(r.suspect, n)
	suspect := r.suspect
	clear(suspect)
	b.Errs = resize(b.Errs, n)
	clear(b.Errs)
	b.Time = resize(b.Time, n)

	// nullOrBad marks the rows where col is null (unless only bad) or bad.
	nullOrBad := func(col *event.Column, null bool) {
		if null && col.Fill.Nulls > 0 {
			for j, isNull := range col.Null[:n] {
				if isNull {
					suspect[j] = true
				}
			}
		}
		if len(col.Fill.Bad) > 0 {
			for j, bad := range col.Fill.Bad[:n] {
				if bad != "" && !col.Null[j] {
					suspect[j] = true
				}
			}
		}
	}
	// lengths marks the rows whose string is empty (when empty is bad)
	// or longer than max.
	lengths := func(col *event.Column, empty bool, max int) {
		if d := col.Dict; d != nil {
			for j, code := range col.Codes[:n] {
				if l := len(d.Strs[code]); (empty && l == 0) || l > max {
					suspect[j] = true
				}
			}
			return
		}
		for j, s := range col.Strs[:n] {
			if l := len(s); (empty && l == 0) || l > max {
				suspect[j] = true
			}
		}
	}
	strs := func(c *pqCol, max int) *event.Column {
		col := &b.Cols[c.pos]
		nullOrBad(col, true)
		lengths(col, true, max)
		return col
	}
	b.User = strs(r.user, event.MaxUserIDBytes)
	b.Event = nil
	if r.event != nil {
		b.Event = strs(r.event, event.MaxEventNameBytes)
	}
	b.InsertID = nil
	if r.insert != nil {
		b.InsertID = &b.Cols[r.insert.pos]
		nullOrBad(b.InsertID, false)
		lengths(b.InsertID, false, r.opt.MaxPropertyBytes)
	}
	if c := r.time; c != nil {
		col := &b.Cols[c.pos]
		if c.kind == pqTimestamp || c.kind == pqDate || c.kind == pqInt96 {
			copy(b.Time, col.Ints[:n]) // already µs
			nullOrBad(col, true)
		} else {
			for j := range n {
				if col.Null[j] || col.BadAt(j) != "" {
					suspect[j] = true
					continue
				}
				us, err := r.micros(c, col, j)
				if err != nil {
					suspect[j] = true
				}
				b.Time[j] = us
			}
		}
	} else {
		for j := range n {
			b.Time[j] = r.opt.ImportTime
		}
	}
	if len(b.Conv) != len(r.props) {
		b.Conv = make([]event.Column, len(r.props))
	}
	b.Props = b.Props[:0]
	for k, c := range r.props {
		col := &b.Cols[c.pos]
		nullOrBad(col, false)
		if col.Type == event.TypeString {
			lengths(col, false, r.opt.MaxPropertyBytes)
		}
		if c.decl != event.TypeNone && c.decl != col.Type {
			// Bad rows are suspect already; rows that do not convert become so.
			raw := col
			col = raw.ConvertTo(&b.Conv[k], c.decl, r.opt.Loc, func(j int) bool { return raw.BadAt(j) != "" }, suspect)
		}
		b.Props = append(b.Props, col)
	}
	for j := range n {
		if !suspect[j] {
			continue
		}
		if err := r.fill(b, &r.scratch, j); err != nil {
			b.Errs[j] = err.(*event.RowError)
			continue
		}
		b.Time[j] = r.scratch.Time
	}
}

// Close implements Reader.
func (r *parquetReader) Close() error {
	var err error
	for _, c := range r.cols {
		if cerr := c.closePages(); err == nil {
			err = cerr
		}
	}
	if cerr := r.source.Close(); err == nil {
		err = cerr
	}
	return err
}
