// Package export writes an app's events, its users' current properties,
// or its persons, in the shapes `spur import` reads with no column flags
// (docs/storage.md §8): NDJSON in the events endpoint's shape
// (docs/ingest.md §1) and Parquet with the import's default column names.
// It reads one storage.Version (one consistent snapshot) through its
// export scan (storage.Version.ExportEvents, ExportUsers), streaming: the
// memory held is the scan's, an output buffer and, for Parquet, one row
// group.
//
// Order: shards ascending, within a shard users by user-id hash (then id),
// a user's events in trail order (time, then arrival). Persons come in
// the id graph's order (identity.Snapshot.Persons), a person's distinct
// ids sorted by bytes. Two exports of one version write the same bytes.
package export

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/storage"
)

// Format is an export format.
type Format string

// Export formats.
const (
	NDJSON  Format = "ndjson"  // one JSON object per line (ingest.AppendEventJSON, ingest.AppendUserJSON)
	Parquet Format = "parquet" // one flat Parquet file, zstd-compressed
)

// ParseFormat parses "ndjson" (or "jsonl") and "parquet".
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "ndjson", "jsonl":
		return NDJSON, nil
	case "parquet":
		return Parquet, nil
	}
	return "", fmt.Errorf("unknown export format %q: want ndjson or parquet", s)
}

// ContentType returns the MIME type of f's output.
func (f Format) ContentType() string {
	if f == Parquet {
		return "application/vnd.apache.parquet"
	}
	return "application/x-ndjson"
}

// Options says what Write exports.
type Options struct {
	Format Format
	// Users exports the users' current properties (one row per user with
	// any) instead of the events.
	Users bool
	// Persons exports the app's persons instead of the events: one row
	// {distinct_id, person_id, identified} per distinct id of every person
	// of the id graph (a person of two ids or more, or identified; an id
	// never named by an identity operation is a person of its own, not
	// identified, and has no row), which `spur import --persons` reads
	// (storage.ImportOptions.Persons). Not with Users.
	Persons bool
	// From and To bound the events exported to From <= time < To (UTC
	// µs); both 0 means every event. Ignored with Users.
	From, To int64
}

// Stats counts what Write wrote.
type Stats struct {
	Rows  int64 // events, users, or persons rows (distinct ids)
	Bytes int64 // bytes written to the output
}

// Parquet layout: rows per WriteRows call, rows per row group.
const (
	parquetBatch   = 1024
	parquetRowsRG  = 256 << 10
	outBufferBytes = 256 << 10
)

// Write exports v to w as opt says. It returns what it wrote and the
// first error: of the scan (corruption, I/O, ctx.Err()), of w, or a
// property whose name is one of the Parquet file's own columns (user_id,
// timestamp, event, insert_id; NDJSON carries such properties in its
// properties object). On an error the output is incomplete.
func Write(ctx context.Context, v *storage.Version, w io.Writer, opt Options) (Stats, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, outBufferBytes)
	var st Stats
	var err error
	switch {
	case opt.Users && opt.Persons:
		err = fmt.Errorf("export: users and persons: choose one")
	case opt.Persons && (opt.Format == NDJSON || opt.Format == Parquet):
		err = writePersons(ctx, v, bw, opt.Format, &st)
	case opt.Format == NDJSON:
		err = writeNDJSON(ctx, v, bw, opt, &st)
	case opt.Format == Parquet:
		err = writeParquet(ctx, v, bw, opt, &st)
	default:
		err = fmt.Errorf("export: unknown format %q: want ndjson or parquet", opt.Format)
	}
	if err == nil {
		err = bw.Flush()
	}
	st.Bytes = cw.n
	return st, err
}

// timeRange returns the scan bounds of opt: every event when both are 0.
func timeRange(opt Options) (int64, int64) {
	if opt.From == 0 && opt.To == 0 {
		return math.MinInt64, math.MaxInt64
	}
	return opt.From, opt.To
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// idCache turns the scan's borrowed user-id bytes into a string once per
// user, not once per event.
type idCache struct {
	b []byte
	s string
}

func (c *idCache) get(b []byte) string {
	if c.b == nil || !bytes.Equal(b, c.b) {
		c.s = string(b)
		c.b = append(c.b[:0], b...)
	}
	return c.s
}

func writeNDJSON(ctx context.Context, v *storage.Version, w *bufio.Writer, opt Options, st *Stats) error {
	var line []byte
	var ids idCache
	if opt.Users {
		return v.ExportUsers(ctx, func(u *storage.ExportUser) error {
			line = append(ingest.AppendUserJSON(line[:0], ids.get(u.UserID), u.Props), '\n')
			st.Rows++
			_, err := w.Write(line)
			return err
		})
	}
	var ev event.Event
	from, to := timeRange(opt)
	return v.ExportEvents(ctx, from, to, func(e *storage.ExportEvent) error {
		ev = event.Event{UserID: ids.get(e.UserID), Name: e.Event, Time: e.Time, InsertID: e.InsertID, Props: e.Props}
		line = append(ingest.AppendEventJSON(line[:0], &ev, nil, nil), '\n')
		st.Rows++
		_, err := w.Write(line)
		return err
	})
}

// parquetSchema is the Parquet file's schema for props: the fixed columns
// (user_id, timestamp and, for events, event and insert_id) and one
// optional column per property; cols[name] is each column's index
// (parquet-go orders a group's columns by name).
func parquetSchema(props []event.PropType, users bool) (*parquet.Schema, map[string]int, error) {
	g := parquet.Group{"user_id": parquet.String()}
	if !users {
		g["timestamp"] = parquet.Timestamp(parquet.Microsecond)
		g["event"] = parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
		g["insert_id"] = parquet.Optional(parquet.String())
	}
	for _, p := range props {
		if _, ok := g[p.Name]; ok {
			return nil, nil, fmt.Errorf("export: property %q has the name of a column of the Parquet file; export NDJSON, which keeps properties apart", p.Name)
		}
		var n parquet.Node
		switch p.Type {
		case event.TypeString:
			n = parquet.String()
		case event.TypeInt:
			n = parquet.Leaf(parquet.Int64Type)
		case event.TypeFloat:
			n = parquet.Leaf(parquet.DoubleType)
		case event.TypeBool:
			n = parquet.Leaf(parquet.BooleanType)
		case event.TypeTime:
			n = parquet.Timestamp(parquet.Microsecond)
		default:
			return nil, nil, fmt.Errorf("export: property %q has unknown type %s", p.Name, p.Type)
		}
		g[p.Name] = parquet.Optional(n)
	}
	s := parquet.NewSchema("spur", g)
	cols := map[string]int{}
	for i, path := range s.Columns() {
		cols[path[0]] = i
	}
	return s, cols, nil
}

// parquetRows batches rows for the Parquet writer; strings are copied into
// arena (values point into it; a grown arena leaves the earlier values on
// the old array, which they keep alive).
type parquetRows struct {
	w     *parquet.GenericWriter[any]
	rows  []parquet.Row
	arena []byte
	null  parquet.Row // every column null, at its index
}

// str returns a byte-array value of s, copied into the arena.
func (r *parquetRows) str(s string) parquet.Value {
	start := len(r.arena)
	r.arena = append(r.arena, s...)
	return parquet.ByteArrayValue(r.arena[start:len(r.arena):len(r.arena)])
}

// row returns the next row to fill, every column null.
func (r *parquetRows) row() parquet.Row {
	i := len(r.rows)
	if i < cap(r.rows) {
		r.rows = r.rows[:i+1]
	} else {
		r.rows = append(r.rows, nil)
	}
	row := append(r.rows[i][:0], r.null...)
	r.rows[i] = row
	return row
}

// flush writes the batched rows when full (or always, with force).
func (r *parquetRows) flush(force bool) error {
	if len(r.rows) < parquetBatch && !force {
		return nil
	}
	if _, err := r.w.WriteRows(r.rows); err != nil {
		return fmt.Errorf("export: write Parquet rows: %w", err)
	}
	r.rows, r.arena = r.rows[:0], r.arena[:0]
	return nil
}

// propValue is v as a present value of an optional column.
func (r *parquetRows) propValue(v event.Value, col int) parquet.Value {
	var pv parquet.Value
	switch v.Type {
	case event.TypeString:
		pv = r.str(v.Str)
	case event.TypeFloat:
		pv = parquet.DoubleValue(v.Float)
	case event.TypeBool:
		pv = parquet.BooleanValue(v.Int != 0)
	default: // int, time (µs)
		pv = parquet.Int64Value(v.Int)
	}
	return pv.Level(0, 1, col)
}

// newParquetWriter returns the writer of an export's Parquet file of
// schema to w: zstd (fastest), row groups of parquetRowsRG rows, no page
// statistics.
func newParquetWriter(w io.Writer, schema *parquet.Schema) *parquet.GenericWriter[any] {
	return parquet.NewGenericWriter[any](w, schema,
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.MaxRowsPerRowGroup(parquetRowsRG),
		parquet.CreatedBy("spur export", "", ""),
		parquet.DataPageStatistics(false))
}

func writeParquet(ctx context.Context, v *storage.Version, w io.Writer, opt Options, st *Stats) error {
	kind := storage.KindEvents
	if opt.Users {
		kind = storage.KindUsers
	}
	props := v.ExportProps(kind)
	schema, cols, err := parquetSchema(props, opt.Users)
	if err != nil {
		return err
	}
	pw := newParquetWriter(w, schema)
	r := &parquetRows{w: pw, null: make(parquet.Row, len(cols))}
	for c := range r.null {
		r.null[c] = parquet.NullValue().Level(0, 0, c)
	}
	propCol := make([]int, len(props))
	for i, p := range props {
		propCol[i] = cols[p.Name]
	}
	// fill sets the property columns of row (props sorted by name, as
	// ExportProps and the export's Props are).
	fill := func(row parquet.Row, ps []event.Prop) {
		j := 0
		for _, p := range ps {
			for props[j].Name != p.Name {
				j++
			}
			c := propCol[j]
			row[c] = r.propValue(p.Value, c)
		}
	}
	var ids idCache
	if opt.Users {
		uc := cols["user_id"]
		err = v.ExportUsers(ctx, func(u *storage.ExportUser) error {
			row := r.row()
			row[uc] = r.str(ids.get(u.UserID)).Level(0, 0, uc)
			fill(row, u.Props)
			st.Rows++
			return r.flush(false)
		})
	} else {
		uc, tc, ec, ic := cols["user_id"], cols["timestamp"], cols["event"], cols["insert_id"]
		from, to := timeRange(opt)
		err = v.ExportEvents(ctx, from, to, func(e *storage.ExportEvent) error {
			row := r.row()
			row[uc] = r.str(ids.get(e.UserID)).Level(0, 0, uc)
			row[tc] = parquet.Int64Value(e.Time).Level(0, 0, tc)
			row[ec] = r.str(e.Event).Level(0, 0, ec)
			if e.InsertID != "" {
				row[ic] = r.str(e.InsertID).Level(0, 1, ic)
			}
			fill(row, e.Props)
			st.Rows++
			return r.flush(false)
		})
	}
	if err == nil {
		err = r.flush(true)
	}
	if err == nil {
		if err = pw.Close(); err != nil {
			err = fmt.Errorf("export: close the Parquet file: %w", err)
		}
	}
	return err
}
