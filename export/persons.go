package export

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/storage"
)

// writePersons writes the persons of v's id graph (Options.Persons) to w
// in format f: one row per distinct id, in the graph's person order, a
// person's ids sorted. It checks ctx every 4 Ki persons.
func writePersons(ctx context.Context, v *storage.Version, w *bufio.Writer, f Format, st *Stats) error {
	var row func(d, pid string, identified bool) error
	var finish func() error
	switch f {
	case NDJSON:
		var line []byte
		row = func(d, pid string, identified bool) error {
			line = append(line[:0], `{"`+storage.PersonsDistinctIDColumn+`":`...)
			line = ingest.AppendJSONString(line, d)
			line = append(line, `,"`+storage.PersonsPersonIDColumn+`":`...)
			line = ingest.AppendJSONString(line, pid)
			if identified {
				line = append(line, `,"`+storage.PersonsIdentifiedColumn+`":true}`+"\n"...)
			} else {
				line = append(line, `,"`+storage.PersonsIdentifiedColumn+`":false}`+"\n"...)
			}
			_, err := w.Write(line)
			return err
		}
		finish = func() error { return nil }
	default:
		row, finish = parquetPersons(w)
	}
	var err error
	n := 0
	if snap := v.Persons(); snap != nil {
		snap.Persons(func(p *identity.Person) bool {
			if n++; n&0xfff == 0 {
				if err = ctx.Err(); err != nil {
					return false
				}
			}
			for _, d := range p.DistinctIDs {
				if err = row(d, p.ID, p.Identified); err != nil {
					return false
				}
				st.Rows++
			}
			return true
		})
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = finish()
	}
	return err
}

// parquetPersons returns the row and finish functions of a Parquet
// persons file written to w: columns distinct_id and person_id (strings)
// and identified (boolean), none optional.
func parquetPersons(w io.Writer) (row func(d, pid string, identified bool) error, finish func() error) {
	schema := parquet.NewSchema("spur_persons", parquet.Group{
		storage.PersonsDistinctIDColumn: parquet.String(),
		storage.PersonsPersonIDColumn:   parquet.String(),
		storage.PersonsIdentifiedColumn: parquet.Leaf(parquet.BooleanType),
	})
	cols := map[string]int{}
	for i, path := range schema.Columns() {
		cols[path[0]] = i
	}
	dc, pc, ic := cols[storage.PersonsDistinctIDColumn], cols[storage.PersonsPersonIDColumn], cols[storage.PersonsIdentifiedColumn]
	pw := newParquetWriter(w, schema)
	r := &parquetRows{w: pw, null: make(parquet.Row, len(cols))}
	row = func(d, pid string, identified bool) error {
		pr := r.row()
		pr[dc] = r.str(d).Level(0, 0, dc)
		pr[pc] = r.str(pid).Level(0, 0, pc)
		pr[ic] = parquet.BooleanValue(identified).Level(0, 0, ic)
		return r.flush(false)
	}
	finish = func() error {
		if err := r.flush(true); err != nil {
			return err
		}
		if err := pw.Close(); err != nil {
			return fmt.Errorf("export: close the Parquet file: %w", err)
		}
		return nil
	}
	return row, finish
}

// OpenPersons opens a persons file (what Write writes with
// Options.Persons; NDJSON, Parquet or CSV by its name, .gz read
// transparently) as the source storage.ImportOptions.Persons reads: the
// distinct id as the user id, person_id read as a string and identified as
// a bool whatever they look like. The caller closes the reader.
func OpenPersons(path string) (ingest.Reader, error) {
	r, err := ingest.Open(path, personsReadOptions())
	if err != nil {
		return nil, fmt.Errorf("persons file: %w", err)
	}
	return r, nil
}

// personsReadOptions are the reader options of a persons file.
func personsReadOptions() ingest.Options {
	return ingest.Options{Users: true, UserCol: storage.PersonsDistinctIDColumn, ImportTime: 1,
		Schema: map[string]event.Type{storage.PersonsPersonIDColumn: event.TypeString, storage.PersonsIdentifiedColumn: event.TypeBool}}
}
