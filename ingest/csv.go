package ingest

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spurdb/spur/event"
)

// InferRows is the number of data rows a CSV reader buffers to infer the
// type of each property column not declared in Options.Schema.
const InferRows = 1000

// csvReader reads CSV with a header row (RFC 4180 as implemented by
// encoding/csv: quoted fields may span lines; every row must have as many
// fields as the header).
type csvReader struct {
	*source
	opt    Options
	cr     *csv.Reader
	header []string
	// indexes of the named columns in a record; -1 = absent
	user, time, event, insert int
	props                     []csvProp
	sample                    []csvRow // rows read for inference, not yet returned
}

type csvProp struct {
	idx  int
	name string
	typ  event.Type
}

// csvRow is a buffered record, or the row error for a malformed record.
type csvRow struct {
	rec  []string
	line int64
	err  error
}

func newCSVReader(in io.Reader, src *source, opt Options) (*csvReader, error) {
	cr := csv.NewReader(in)
	cr.ReuseRecord = true
	r := &csvReader{source: src, opt: opt, cr: cr, user: -1, time: -1, event: -1, insert: -1}
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty CSV file: want a header row", src.name)
	}
	if err != nil {
		return nil, readError(src.name, "CSV header", err)
	}
	r.header = slices.Clone(header)
	r.header[0] = strings.TrimPrefix(r.header[0], "\ufeff") // UTF-8 byte order mark
	if err := r.mapColumns(); err != nil {
		return nil, err
	}
	if err := r.infer(); err != nil {
		return nil, err
	}
	return r, nil
}

// mapColumns assigns the header's columns to roles and properties.
func (r *csvReader) mapColumns() error {
	o := &r.opt
	for i, name := range r.header {
		if name == "" {
			return fmt.Errorf("%s: CSV header: column %d has no name", r.name, i+1)
		}
		if slices.Index(r.header, name) != i {
			return fmt.Errorf("%s: CSV header: column %q appears twice", r.name, name)
		}
		switch o.roleOf(name) {
		case roleUser:
			r.user = i
		case roleTime:
			r.time = i
		case roleEvent:
			r.event = i
		case roleInsertID:
			r.insert = i
		default:
			if err := event.ValidatePropName(name); err != nil {
				return fmt.Errorf("%s: CSV header: column %d: %w", r.name, i+1, err)
			}
			r.props = append(r.props, csvProp{idx: i, name: name, typ: o.Schema[name]})
		}
	}
	missing := func(what, col string) error {
		return fmt.Errorf("%s: no %s column %q in the CSV header (columns: %s)", r.name, what, col, strings.Join(r.header, ", "))
	}
	if r.user < 0 {
		return missing("user id", o.UserCol)
	}
	if !o.Users {
		if r.time < 0 {
			return missing("timestamp", o.TimeCol)
		}
		if r.event < 0 {
			return missing("event name", o.EventCol)
		}
	}
	return nil
}

// read reads the next record: its fields and physical line, or a
// *event.RowError for a malformed record, io.EOF, or a fatal error.
func (r *csvReader) read() ([]string, int64, error) {
	rec, err := r.cr.Read()
	if err == nil {
		line, _ := r.cr.FieldPos(0)
		return rec, int64(line), nil
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		pos := r.pos(int64(pe.StartLine))
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			return nil, 0, rowErr(pos, "", fmt.Sprintf("row has %d fields, the header has %d", len(rec), len(r.header)))
		}
		return nil, 0, rowErr(pos, "", fmt.Sprintf("malformed CSV (line %d, column %d): %v", pe.Line, pe.Column, pe.Err))
	}
	if err == io.EOF {
		return nil, 0, io.EOF
	}
	return nil, 0, readError(r.name, "read CSV", err)
}

// infer buffers up to InferRows rows and gives each undeclared property
// column the narrowest type that fits all its non-empty sampled values:
// bool, else int, else float, else time (all values timestamps with a date
// part), else string. A column with no value in the sample is a string.
func (r *csvReader) infer() error {
	for len(r.sample) < InferRows {
		rec, line, err := r.read()
		if err == io.EOF {
			break
		}
		var re *event.RowError
		if err != nil && !errors.As(err, &re) {
			return err
		}
		r.sample = append(r.sample, csvRow{rec: slices.Clone(rec), line: line, err: err})
	}
	for i := range r.props {
		p := &r.props[i]
		if p.typ != event.TypeNone {
			continue
		}
		isBool, isInt, isFloat, isTime, seen := true, true, true, true, false
		for _, row := range r.sample {
			if row.err != nil {
				continue
			}
			s := row.rec[p.idx]
			if s == "" {
				continue
			}
			seen = true
			isBool = isBool && fits(s, event.TypeBool, &r.opt)
			isInt = isInt && fits(s, event.TypeInt, &r.opt)
			isFloat = isFloat && fits(s, event.TypeFloat, &r.opt)
			isTime = isTime && fits(s, event.TypeTime, &r.opt)
		}
		switch {
		case !seen:
			p.typ = event.TypeString
		case isBool:
			p.typ = event.TypeBool
		case isInt:
			p.typ = event.TypeInt
		case isFloat:
			p.typ = event.TypeFloat
		case isTime:
			p.typ = event.TypeTime
		default:
			p.typ = event.TypeString
		}
	}
	return nil
}

// fits reports whether a sampled value supports inferring type t. Numbers
// with a redundant leading zero ("007", a zip code) or a sign "+" stay
// strings; times need a date part ("2019-10-01…"), not an epoch number.
func fits(s string, t event.Type, o *Options) bool {
	switch t {
	case event.TypeInt, event.TypeFloat:
		d := strings.TrimPrefix(s, "-")
		if d == "" || d[0] == '+' || (len(d) > 1 && d[0] == '0' && d[1] >= '0' && d[1] <= '9') {
			return false
		}
	case event.TypeTime:
		if len(s) < 10 || s[4] != '-' {
			return false
		}
	}
	_, err := event.CoerceIn(event.String(s), t, o.Loc)
	return err == nil
}

// PropTypes implements Typed: the property columns in header order with
// their declared or inferred types.
func (r *csvReader) PropTypes() []event.PropType {
	out := make([]event.PropType, len(r.props))
	for i, p := range r.props {
		out[i] = event.PropType{Name: p.name, Type: p.typ}
	}
	return out
}

// Next implements Reader.
func (r *csvReader) Next(ev *event.Event) error {
	var rec []string
	var line int64
	var err error
	if len(r.sample) > 0 {
		row := r.sample[0]
		r.sample[0] = csvRow{}
		r.sample = r.sample[1:]
		if len(r.sample) == 0 {
			r.sample = nil
		}
		rec, line, err = row.rec, row.line, row.err
	} else {
		rec, line, err = r.read()
	}
	if err != nil {
		return err
	}
	return r.fill(ev, rec, line)
}

// fill converts one record into ev.
func (r *csvReader) fill(ev *event.Event, rec []string, line int64) error {
	o := &r.opt
	pos := r.pos(line)
	ev.Pos = pos
	ev.UserID = rec[r.user]
	if err := o.checkUser(pos, ev.UserID); err != nil {
		return err
	}
	ev.Name = ""
	if r.event >= 0 {
		ev.Name = rec[r.event]
		if err := o.checkEvent(pos, ev.Name); err != nil {
			return err
		}
	}
	ev.InsertID = ""
	if r.insert >= 0 {
		ev.InsertID = rec[r.insert]
		if err := o.checkValue(pos, o.InsertIDCol, event.String(ev.InsertID)); err != nil {
			return err
		}
		if !utf8.ValidString(ev.InsertID) { // as the JSON and Parquet readers refuse it
			return rowErr(pos, o.InsertIDCol, "value is not valid UTF-8")
		}
	}
	ev.Time = o.ImportTime
	if r.time >= 0 {
		s := rec[r.time]
		if s == "" {
			return rowErr(pos, o.TimeCol, "empty timestamp")
		}
		us, err := event.ParseTime(s, o.Loc)
		if err != nil {
			return rowErr(pos, o.TimeCol, err.Error())
		}
		ev.Time = us
	}
	ev.Props = ev.Props[:0]
	for i := range r.props {
		p := &r.props[i]
		s := rec[p.idx]
		if s == "" {
			continue // not set
		}
		v := event.String(s)
		if err := o.checkValue(pos, p.name, v); err != nil {
			return err
		}
		if p.typ == event.TypeString {
			if !utf8.ValidString(s) {
				return rowErr(pos, p.name, "value is not valid UTF-8")
			}
		} else {
			var err error
			if v, err = event.CoerceIn(v, p.typ, o.Loc); err != nil {
				return rowErr(pos, p.name, err.Error())
			}
		}
		ev.Props = append(ev.Props, event.Prop{Name: p.name, Value: v})
	}
	return nil
}
