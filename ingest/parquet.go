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
	"github.com/parquet-go/parquet-go/format"

	"github.com/spurdb/spur/event"
)

// parquetBatchRows is the number of rows decoded per column per batch.
const parquetBatchRows = 4096

// parquetReader reads flat Parquet files column by column: each batch reads
// up to parquetBatchRows values of every column with parquet-go's column
// value readers and decodes them into typed slices (strings of a batch share
// one allocation), so per row there is no interface value and no
// allocation. Columns map by name: the named columns of Options, every
// other top-level column is a property. Nested (group) and repeated columns
// are rejected when the file is opened.
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
	n, i      int   // rows in the batch, next row
	rowBase   int64 // rows before the batch
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

// pqCol is one column and its decoded batch.
type pqCol struct {
	name  string
	index int // leaf column index
	kind  pqKind
	typ   event.Type // property type of the decoded values
	decl  event.Type // declared type (Options.Schema) or TypeNone
	role  role
	mul   int64   // pqTimestamp/pqTimeOfDay: µs = v*mul/div
	div   int64   //
	local bool    // TIMESTAMP not adjusted to UTC
	scale float64 // decimals: value = unscaled / scale

	vr   parquet.ColumnChunkValueReader
	vals []parquet.Value

	null   []bool
	ints   []int64
	floats []float64
	strs   []string
	bad    []string // per-row conversion error, nil when the batch has none
	arena  []byte
	offs   []int32 // string end offsets into arena
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
	col := &pqCol{name: name, index: c.Index(), role: r.opt.roleOf(name), mul: 1, div: 1}
	t := c.Type()
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
		if err := r.batch(); err != nil {
			return err
		}
	}
	i := r.i
	r.i++
	return r.fill(ev, i)
}

// batch decodes the next batch of rows of every column.
func (r *parquetReader) batch() (err error) {
	defer recoverParquet(r.name, &err)
	r.rowBase += int64(r.n)
	r.n, r.i = 0, 0
	for r.groupLeft == 0 {
		r.group++
		if r.group >= len(r.groups) {
			return io.EOF
		}
		g := r.groups[r.group]
		r.groupLeft = g.NumRows()
		chunks := g.ColumnChunks()
		for _, c := range r.cols {
			if c.vr != nil {
				c.vr.Close()
			}
			c.vr = parquet.NewColumnChunkValueReader(chunks[c.index])
		}
	}
	n := int(min(r.groupLeft, parquetBatchRows))
	for _, c := range r.cols {
		if err := r.decodeColumn(c, n); err != nil {
			return err
		}
	}
	r.groupLeft -= int64(n)
	r.n = n
	return nil
}

// decodeColumn reads exactly n values of c and decodes them. Byte-array
// values point into the current page, which the next ReadValues may
// release, so they are copied out after each call.
func (r *parquetReader) decodeColumn(c *pqCol, n int) error {
	if cap(c.vals) < n {
		c.vals = make([]parquet.Value, n)
		c.null = make([]bool, n)
		c.ints = make([]int64, n)
		c.floats = make([]float64, n)
		c.strs = make([]string, n)
		c.offs = make([]int32, n)
	}
	c.bad = c.bad[:0]
	c.arena = c.arena[:0]
	got := 0
	for got < n {
		k, err := c.vr.ReadValues(c.vals[got:n])
		for j := got; j < got+k; j++ {
			r.decodeValue(c, j, c.vals[j])
		}
		got += k
		if err != nil && got < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%s: Parquet column %q, row group %d: %w", r.name, c.name, r.group, err)
		}
	}
	if len(c.offs) > 0 && (c.kind == pqString || c.kind == pqUUID || c.strCol()) {
		all := string(c.arena)
		start := int32(0)
		for j := range n {
			c.strs[j] = all[start:c.offs[j]]
			start = c.offs[j]
		}
	}
	return nil
}

// strCol reports whether an integer column is read as strings (user id or
// insert id given as numbers).
func (c *pqCol) strCol() bool { return c.role == roleUser || c.role == roleInsertID }

// setBad records a conversion error for row j.
func (c *pqCol) setBad(j int, msg string) {
	if len(c.bad) == 0 {
		c.bad = make([]string, len(c.null))
	}
	c.bad[j] = msg
}

// decodeValue decodes value v into row j of c.
func (r *parquetReader) decodeValue(c *pqCol, j int, v parquet.Value) {
	c.null[j] = v.IsNull()
	if c.null[j] {
		c.offs[j] = int32(len(c.arena))
		return
	}
	var i int64
	switch c.kind {
	case pqBool:
		if v.Boolean() {
			i = 1
		}
	case pqInt:
		i = v.Int64()
		if v.Kind() == parquet.Int32 {
			i = int64(v.Int32())
		}
	case pqUint32:
		i = int64(v.Uint32())
	case pqUint64:
		u := v.Uint64()
		if u > math.MaxInt64 {
			c.setBad(j, "unsigned value "+strconv.FormatUint(u, 10)+" out of the int64 range")
		}
		i = int64(u)
	case pqFloat32:
		c.floats[j] = float64(v.Float())
	case pqFloat64:
		c.floats[j] = v.Double()
	case pqString:
		b := v.ByteArray()
		if !utf8.Valid(b) {
			c.setBad(j, "value is not valid UTF-8")
		}
		c.arena = append(c.arena, b...)
	case pqUUID:
		c.arena = appendUUID(c.arena, v.ByteArray())
	case pqTimestamp, pqTimeOfDay:
		raw := v.Int64()
		if v.Kind() == parquet.Int32 {
			raw = int64(v.Int32())
		}
		i = floorDiv(raw, c.div)
		if c.mul != 1 {
			if i > math.MaxInt64/c.mul || i < math.MinInt64/c.mul {
				c.setBad(j, "timestamp out of range")
			}
			i *= c.mul
		}
		if c.local {
			i = wallToUTC(i, r.opt.Loc)
		}
	case pqDate:
		i = int64(v.Int32()) * 86400e6
	case pqInt96:
		w := v.Int96()
		nanos := int64(uint64(w[1])<<32 | uint64(w[0]))
		i = (int64(int32(w[2]))-2440588)*86400e6 + floorDiv(nanos, 1000) // Julian day 2440588 = 1970-01-01
	case pqDecimal:
		raw := v.Int64()
		if v.Kind() == parquet.Int32 {
			raw = int64(v.Int32())
		}
		c.floats[j] = float64(raw) / c.scale
	case pqDecimalBytes:
		c.floats[j] = bigEndianFloat(v.ByteArray()) / c.scale
	}
	c.ints[j] = i
	if c.strCol() && (c.kind == pqInt || c.kind == pqUint32 || c.kind == pqUint64) {
		c.arena = strconv.AppendInt(c.arena, i, 10)
	}
	if c.typ == event.TypeTime && (i < event.MinTime || i > event.MaxTime) {
		c.setBad(j, "timestamp out of range (years 0000-9999)")
	}
	c.offs[j] = int32(len(c.arena))
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

// fill converts row i of the batch into ev.
func (r *parquetReader) fill(ev *event.Event, i int) error {
	o := &r.opt
	pos := r.pos(r.rowBase + int64(i) + 1)
	ev.Pos = pos
	str := func(c *pqCol, what string) (string, error) {
		if c.null[i] {
			return "", rowErr(pos, c.name, "missing "+what)
		}
		if len(c.bad) > 0 && c.bad[i] != "" {
			return "", rowErr(pos, c.name, c.bad[i])
		}
		return c.strs[i], nil
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
	if r.insert != nil && !r.insert.null[i] {
		if ev.InsertID, err = str(r.insert, "insert id"); err != nil {
			return err
		}
	}
	ev.Time = o.ImportTime
	if c := r.time; c != nil {
		if ev.Time, err = r.timeOf(c, i, pos); err != nil {
			return err
		}
	}
	ev.Props = ev.Props[:0]
	for _, c := range r.props {
		if c.null[i] {
			continue
		}
		if len(c.bad) > 0 && c.bad[i] != "" {
			return rowErr(pos, c.name, c.bad[i])
		}
		var v event.Value
		switch c.typ {
		case event.TypeString:
			v = event.String(c.strs[i])
		case event.TypeFloat:
			v = event.Float(c.floats[i])
		default:
			v = event.Value{Type: c.typ, Int: c.ints[i]}
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
func (r *parquetReader) timeOf(c *pqCol, i int, pos event.Pos) (int64, error) {
	if c.null[i] {
		return 0, rowErr(pos, c.name, "missing timestamp")
	}
	if len(c.bad) > 0 && c.bad[i] != "" {
		return 0, rowErr(pos, c.name, c.bad[i])
	}
	var us int64
	var err error
	switch c.kind {
	case pqString:
		us, err = event.ParseTime(c.strs[i], r.opt.Loc)
	case pqInt, pqUint32, pqUint64:
		us, err = event.EpochToMicros(c.ints[i])
	case pqFloat32, pqFloat64, pqDecimal:
		us, err = event.EpochFloatToMicros(c.floats[i])
	default: // TIMESTAMP, DATE, INT96: already µs
		us = c.ints[i]
	}
	if err != nil {
		return 0, rowErr(pos, c.name, err.Error())
	}
	return us, nil
}

// Close implements Reader.
func (r *parquetReader) Close() error {
	var err error
	for _, c := range r.cols {
		if c.vr != nil {
			if cerr := c.vr.Close(); err == nil {
				err = cerr
			}
			c.vr = nil
		}
	}
	if cerr := r.source.Close(); err == nil {
		err = cerr
	}
	return err
}
