package event

import (
	"time"
)

// BatchReader is an input that can hand out its rows a batch at a time,
// column by column, without an Event per row: the Parquet reader
// (package ingest) and the generator (package gen) implement it. A
// consumer that wants whole batches type-asserts a row source to
// BatchReader; the batches hold the rows its Next would return.
type BatchReader interface {
	// NextBatch fills b with the next batch of rows (up to a few thousand),
	// reusing b's memory; b's previous content is overwritten. It returns
	// io.EOF when no row is left, and any other error for a fatal failure
	// (I/O, a corrupt file); bad rows are not errors of NextBatch but
	// entries of b.Errs. The reader keeps no reference to b, so b may be
	// handed to another goroutine while the reader fills another Batch.
	// NextBatch returns an error if Next has returned some but not all rows
	// of its current batch: a reader is read either row by row or batch by
	// batch, or row by row up to a batch boundary.
	NextBatch(b *Batch) error
	// Rows returns the number of rows of the input (read or not), as
	// recorded in the file, for sizing buffers.
	Rows() int64
}

// Batch is a batch of consecutive input rows in columns, filled by
// BatchReader.NextBatch. Every row is either bad (Errs[i] != nil: the
// *RowError that Next would have returned for it) or good: then
// reading it with Next would have produced the event
//
//	{UserID: User.Str(i), Time: Time[i], Name: Event.Str(i) (or "" when
//	Event is nil), InsertID: InsertID.Str(i) (or "" when InsertID is nil or
//	InsertID.Null[i]), Props: (Props[k].Name, Props[k].Value(i)) for every k
//	in order with !Props[k].Null[i], Pos: {Pos.File, Pos.Line + i}}
//
// (Batch.Row materialises it). For good rows the reader guarantees what
// Next's rows guarantee: the user id passes ValidateUserID, the event
// name (if any) ValidateEventName, every string is valid UTF-8, and
// property names pass ValidatePropName.
//
// The strings of a Batch (Strs, Dict.Strs) are immutable and never reused
// by the reader: a consumer may keep them after the next NextBatch. The
// slices are owned by the Batch and overwritten by the next NextBatch into
// it.
type Batch struct {
	// Rows is the number of rows.
	Rows int
	// Pos is the input position of row 0; row i is at line Pos.Line+i.
	Pos Pos
	// Errs holds, per row, nil or the row's error.
	Errs []*RowError
	// User holds the user ids (strings) of the good rows.
	User *Column
	// Time holds the timestamps of the good rows in UTC microseconds (the
	// import time for users files without a time column).
	Time []int64
	// Event holds the event names (strings) of the good rows; nil for
	// users files.
	Event *Column
	// InsertID holds the insert ids (strings, Null when not set); nil
	// when the input has no insert id column.
	InsertID *Column
	// Props holds the property columns in input order, their values
	// converted to the declared types of Options.Schema.
	Props []*Column

	// Cols and Conv are the memory of the reader that fills the batch
	// (the Parquet reader: its decoded columns, and per property the
	// column converted to its declared type); consumers ignore them.
	Cols []Column
	Conv []Column
}

// Column is one column of a Batch: a name, a type and one value per row.
type Column struct {
	// Name is the column name (the property name for Props).
	Name string
	// Type is the type of the values: TypeString, TypeInt, TypeFloat,
	// TypeBool or TypeTime. User, Event and InsertID are TypeString.
	Type Type
	// Null[i] is true when row i has no value (not set).
	Null []bool
	// Ints holds the values of TypeInt, TypeBool (0 or 1) and TypeTime
	// (UTC microseconds) columns.
	Ints []int64
	// Floats holds the values of TypeFloat columns.
	Floats []float64
	// Strs holds the values of TypeString columns when Dict is nil.
	Strs []string
	// Codes holds the values of TypeString columns when Dict is not nil:
	// row i's value is Dict.Strs[Codes[i]] (0 for null rows).
	Codes []uint32
	// Dict is the dictionary of Codes, or nil.
	Dict *Dict

	// Fill is the state of the reader while it fills the column;
	// consumers ignore it.
	Fill ColumnFill
}

// ColumnFill is a column reader's working state (the Parquet reader's):
// null count, per-row conversion errors, and the bytes of strings built
// row by row.
type ColumnFill struct {
	Nulls int      // number of rows with Null set
	Bad   []string // per row: "" or why the value is bad; empty when no row is
	Arena []byte   // bytes of the strings built row by row (Offs)
	Offs  []int32  // per row: end offset of its string in Arena
}

// SetBad records a conversion error for row j (the reader's).
func (c *Column) SetBad(j int, msg string) {
	if len(c.Fill.Bad) == 0 {
		c.Fill.Bad = resize(c.Fill.Bad, len(c.Null))
		clear(c.Fill.Bad)
	}
	c.Fill.Bad[j] = msg
}

// BadAt returns row j's conversion error, or "".
func (c *Column) BadAt(j int) string {
	if len(c.Fill.Bad) == 0 {
		return ""
	}
	return c.Fill.Bad[j]
}

// Dict is a dictionary of string values, shared by the rows of one Parquet
// column chunk. A Dict is never modified once handed out, so a consumer may
// cache work per Dict, keyed by its address.
type Dict struct {
	// Strs are the values; an entry that is not valid UTF-8 is "" here and
	// only appears in bad rows.
	Strs []string
	// Bad holds, per entry, "" or why the entry is bad; nil when none is.
	Bad []string
}

// Columns returns n columns owned by b (their memory reused by the next
// fill of b), for a BatchReader to fill and point
// User, Event, InsertID and Props at; the Parquet reader has its own.
func (b *Batch) Columns(n int) []Column {
	if len(b.Cols) < n {
		b.Cols = append(b.Cols, make([]Column, n-len(b.Cols))...)
	}
	return b.Cols[:n]
}

// Str returns row i's string value of a TypeString column.
func (c *Column) Str(i int) string {
	if c.Dict != nil {
		return c.Dict.Strs[c.Codes[i]]
	}
	return c.Strs[i]
}

// Value returns row i's value (TypeNone when Null[i]).
func (c *Column) Value(i int) Value {
	if c.Null[i] {
		return Value{}
	}
	switch c.Type {
	case TypeString:
		return String(c.Str(i))
	case TypeFloat:
		return Float(c.Floats[i])
	}
	return Value{Type: c.Type, Int: c.Ints[i]}
}

// ConvertTo converts c's values to type to into out (its buffers reused)
// with CoerceIn in loc (nil: UTC), as a row's coercion would, and
// returns out. Rows that are null in c or for which skip(i) reports true
// are null in out; rows whose value does not convert are null in out and
// set in failed (len(c.Null) entries), for the caller to take the row path
// that reports them.
func (c *Column) ConvertTo(out *Column, to Type, loc *time.Location, skip func(i int) bool, failed []bool) *Column {
	n := len(c.Null)
	out.Name, out.Type, out.Dict = c.Name, to, nil
	out.Null = resize(out.Null, n)
	switch to {
	case TypeFloat:
		out.Floats = resize(out.Floats, n)
	case TypeString:
		out.Strs = resize(out.Strs, n)
	default:
		out.Ints = resize(out.Ints, n)
	}
	for i := range n {
		out.Null[i] = true
		if c.Null[i] || skip(i) {
			continue
		}
		v, err := CoerceIn(c.Value(i), to, loc)
		if err != nil {
			failed[i] = true
			continue
		}
		out.Null[i] = false
		switch to {
		case TypeFloat:
			out.Floats[i] = v.Float
		case TypeString:
			out.Strs[i] = v.Str
		default:
			out.Ints[i] = v.Int
		}
	}
	return out
}

// Row fills ev with good row i (see Batch), reusing ev.Props' backing
// array. The strings are the Batch's.
func (b *Batch) Row(ev *Event, i int) {
	ev.UserID = b.User.Str(i)
	ev.Time = b.Time[i]
	ev.Name = ""
	if b.Event != nil {
		ev.Name = b.Event.Str(i)
	}
	ev.InsertID = ""
	if b.InsertID != nil && !b.InsertID.Null[i] {
		ev.InsertID = b.InsertID.Str(i)
	}
	ev.Props = ev.Props[:0]
	for _, c := range b.Props {
		if !c.Null[i] {
			ev.Props = append(ev.Props, Prop{Name: c.Name, Value: c.Value(i)})
		}
	}
	ev.Pos = Pos{File: b.Pos.File, Line: b.Pos.Line + int64(i)}
}

// resize returns s with length n, reusing its capacity.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
