// Package ingest reads input files into events: CSV, NDJSON, Parquet and the
// OTTO session JSONL format, each optionally gzip-compressed, plus users
// files (user id and user properties). Readers hand out one row at a time
// into a caller-owned event.Event, with positioned errors for bad rows
// (*event.RowError) so an import can skip them and go on.
//
// Timestamps follow docs/analytics.md §1 (event.ParseTime and the epoch magnitude rule);
// property types come from Options.Schema or, for CSV, from a sample of the
// data; the app's schema coerces them afterwards (event.Schema).
package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/spurdb/spur/event"
)

// Format names an input format.
type Format string

// Input formats. FormatOTTO is never detected from a file name.
const (
	FormatCSV     Format = "csv"     // RFC 4180 CSV with a header row
	FormatNDJSON  Format = "ndjson"  // one JSON object per line
	FormatParquet Format = "parquet" // Apache Parquet, flat columns
	FormatOTTO    Format = "otto"    // OTTO sessions: {"session", "events": [{"aid","ts","type"}]}
)

// ParseFormat parses a format name ("csv", "ndjson", "parquet", "otto").
// "jsonl" and "json" are accepted as "ndjson".
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case FormatCSV, FormatNDJSON, FormatParquet, FormatOTTO:
		return f, nil
	case "jsonl", "json":
		return FormatNDJSON, nil
	}
	return "", fmt.Errorf("unknown input format %q (want csv, ndjson, parquet or otto)", s)
}

// DetectFormat returns the format of a file from its name: a ".gz" suffix is
// stripped first, then ".csv" → csv, ".ndjson", ".jsonl", ".json" → ndjson,
// ".parquet" → parquet (case-insensitive). FormatOTTO is never detected.
func DetectFormat(name string) (Format, error) {
	base := strings.ToLower(filepath.Base(name))
	base = strings.TrimSuffix(base, ".gz")
	switch filepath.Ext(base) {
	case ".csv":
		return FormatCSV, nil
	case ".ndjson", ".jsonl", ".json":
		return FormatNDJSON, nil
	case ".parquet":
		return FormatParquet, nil
	}
	return "", fmt.Errorf("%s: cannot detect the input format from the file name (want .csv, .ndjson, .jsonl, .json or .parquet, optionally .gz); set the format", name)
}

// Options configures a reader. The zero value reads events with the default
// column names, inferred types and UTC.
type Options struct {
	// Format is the input format; "" detects it from the file name
	// (DetectFormat).
	Format Format
	// UserCol, TimeCol, EventCol and InsertIDCol name the columns (CSV,
	// Parquet) or keys (NDJSON) of the user id, timestamp, event name and
	// deduplication key. Defaults: "user_id", "timestamp", "event",
	// "insert_id". The insert id column is optional.
	UserCol, TimeCol, EventCol, InsertIDCol string
	// Schema declares property types (--schema name:type,...). A declared
	// column is converted to its type (event.CoerceIn) and overrides CSV
	// type inference; a value that does not convert is a row error.
	Schema map[string]event.Type
	// Loc is the time zone of timestamps without an offset; nil means UTC.
	Loc *time.Location
	// Users reads a users file: a user id and user properties per row, no
	// event column (Event.Name is empty). The time column is optional: when
	// the input has none, every row gets ImportTime.
	Users bool
	// ImportTime is the time, in UTC microseconds, of user-property writes
	// from a users file without a time column.
	ImportTime int64
	// MaxPropertyBytes bounds one string property value and the insert
	// id, in bytes: a longer one is a row error naming the field and the
	// limit. 0 means event.DefaultMaxPropertyBytes (64 KiB); negative
	// means no limit.
	MaxPropertyBytes int
	// MaxDecompressedBytes bounds what a compressed input decompresses
	// to, in bytes; past it the reader fails with a *DecompressError
	// wrapping ErrTooLarge (fatal: an import stores nothing). 0 or
	// negative means no limit. The bytes of an uncompressed input are
	// the caller's to bound (the server's request body limit).
	MaxDecompressedBytes int64
}

// withDefaults fills in the default column names and checks the options.
func (o Options) withDefaults() (Options, error) {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&o.UserCol, "user_id")
	def(&o.TimeCol, "timestamp")
	def(&o.EventCol, "event")
	def(&o.InsertIDCol, "insert_id")
	switch {
	case o.MaxPropertyBytes == 0:
		o.MaxPropertyBytes = event.DefaultMaxPropertyBytes
	case o.MaxPropertyBytes < 0:
		o.MaxPropertyBytes = math.MaxInt
	}
	for name, t := range o.Schema {
		if t == event.TypeNone || t > event.TypeTime {
			return o, fmt.Errorf("schema: property %q has invalid type %s", name, t)
		}
		if err := event.ValidatePropName(name); err != nil {
			return o, fmt.Errorf("schema: %w", err)
		}
	}
	if o.Users && o.Format == FormatOTTO {
		return o, errors.New("the otto format has no users files")
	}
	cols := []string{o.UserCol, o.TimeCol, o.InsertIDCol}
	if !o.Users {
		cols = append(cols, o.EventCol)
	}
	for i, c := range cols {
		for _, d := range cols[:i] {
			if c == d {
				return o, fmt.Errorf("column %q is given for two roles (user, time, event, insert id)", c)
			}
		}
	}
	return o, nil
}

// Reader reads rows one at a time. A Reader is not safe for concurrent use,
// except for the Progresser methods.
type Reader interface {
	// Next reads the next row into ev, reusing ev.Props' backing array.
	// Strings in ev are borrowed: they may share memory with the reader's
	// buffers and are valid until the next call; copy what you keep.
	// It returns io.EOF at the end. A *event.RowError reports a bad row
	// (position, field, what was expected and found): the reader stays
	// usable and the next call reads the following row. Any other error is
	// fatal (I/O, an unreadable or corrupt file).
	Next(ev *event.Event) error
	// Close releases the input; the reader must not be used afterwards.
	Close() error
}

// Progresser is implemented by every Reader of this package, so a CLI can
// show a progress bar as BytesRead()/Size().
type Progresser interface {
	// BytesRead returns the number of input bytes consumed so far: bytes of
	// the file as stored (compressed bytes for .gz), read ahead of the rows
	// returned by up to a buffer (a few hundred KiB). It is safe to call
	// from another goroutine while Next runs.
	BytesRead() int64
	// Size returns the input size in bytes (the file size for Open), or -1
	// when unknown (a stream given to NewReader).
	Size() int64
}

// Typed is implemented by the readers that know their property columns and
// types before the first row: CSV (declared or inferred from the first
// InferRows rows) and Parquet (from the file schema). NDJSON and OTTO
// readers do not implement it.
type Typed interface {
	// PropTypes returns the property columns in input order with their
	// types, in a newly allocated slice.
	PropTypes() []event.PropType
}

// Open opens the file at path and returns a reader for it. ".gz" files (and
// any gzip stream, by its magic bytes) are decompressed transparently;
// Parquet is read through the file's io.ReaderAt, or decompressed into
// memory when gzipped. The error names the file.
func Open(path string, opt Options) (Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open input: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open input: %w", err)
	}
	src := &source{name: path, size: st.Size(), closer: f}
	r, err := newReader(f, src, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// NewReader returns a reader for the stream r; name (a file name, "-" for
// standard input) is used in error positions and, when opt.Format is "", to
// detect the format. A gzip stream is decompressed transparently. A Parquet
// body is buffered in memory. Close does not close r.
func NewReader(r io.Reader, name string, opt Options) (Reader, error) {
	return newReader(r, &source{name: name, size: -1}, opt)
}

func newReader(r io.Reader, src *source, opt Options) (Reader, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.name, err)
	}
	if opt.Format == "" {
		if opt.Format, err = DetectFormat(src.name); err != nil {
			return nil, err
		}
	}
	if opt.Format, err = ParseFormat(string(opt.Format)); err != nil {
		return nil, fmt.Errorf("%s: %w", src.name, err)
	}
	if opt.Format == FormatParquet {
		if f, ok := src.closer.(*os.File); ok {
			var magic [2]byte
			if n, _ := f.ReadAt(magic[:], 0); n < 2 || magic != [2]byte{0x1f, 0x8b} {
				return newParquetReader(countingReaderAt{r: f, n: &src.n}, src.size, src, opt)
			}
		}
	}
	src.counter = countingReader{r: r, n: &src.n}
	br := bufio.NewReaderSize(&src.counter, 256<<10)
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz := &gzipLayer{src: src, br: br, max: opt.MaxDecompressedBytes}
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, gz.fail(err)
		}
		gz.zr, src.gz = zr, zr
		in = bufio.NewReaderSize(gz, 256<<10)
	}
	var rd Reader
	switch opt.Format {
	case FormatCSV:
		rd, err = newCSVReader(in, src, opt)
	case FormatNDJSON:
		rd, err = newNDJSONReader(in, src, opt)
	case FormatOTTO:
		rd, err = newOTTOReader(in, src, opt)
	case FormatParquet:
		var body []byte
		if body, err = io.ReadAll(in); err != nil {
			return nil, readError(src.name, "read Parquet", err)
		}
		rd, err = newParquetReader(bytes.NewReader(body), int64(len(body)), src, opt)
	}
	if err != nil {
		if src.gz != nil {
			src.gz.Close()
		}
		return nil, err
	}
	return rd, nil
}

// ErrTooLarge is wrapped by the error of a reader whose input decompresses
// to more than Options.MaxDecompressedBytes.
var ErrTooLarge = errors.New("input over its size limit")

// DecompressError is a fatal error of an input's compression layer: the
// stream is truncated or corrupt, or it decompresses past
// Options.MaxDecompressedBytes. It says which layer failed and where, so a
// truncated upload is not reported as a syntax error of the format inside.
type DecompressError struct {
	File   string // input name
	Layer  string // "gzip"
	Offset int64  // compressed bytes consumed when the error was met
	Out    int64  // bytes decompressed until then
	Limit  int64  // Options.MaxDecompressedBytes, when Err is ErrTooLarge
	// Err is io.ErrUnexpectedEOF for a truncated stream, ErrTooLarge, or
	// the decompressor's error (a corrupt stream, a bad checksum or
	// header).
	Err error
}

// Error renders the file, the layer, what happened and where:
// "x.csv.gz: gzip: truncated stream at compressed byte 60 (152 bytes
// decompressed)".
func (e *DecompressError) Error() string {
	switch {
	case errors.Is(e.Err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("%s: %s: truncated stream at compressed byte %d (%d bytes decompressed): the input was cut short", e.File, e.Layer, e.Offset, e.Out)
	case errors.Is(e.Err, ErrTooLarge):
		return fmt.Sprintf("%s: %s: decompresses to more than the limit of %d bytes (at compressed byte %d)", e.File, e.Layer, e.Limit, e.Offset)
	}
	return fmt.Sprintf("%s: %s: corrupt stream at compressed byte %d (%d bytes decompressed): %v", e.File, e.Layer, e.Offset, e.Out, e.Err)
}

// Unwrap returns Err.
func (e *DecompressError) Unwrap() error { return e.Err }

// gzipLayer reads the decompressed bytes of a gzip input, counts them
// against the limit and turns the decompressor's errors into a sticky
// *DecompressError positioned in the compressed stream.
type gzipLayer struct {
	zr  *gzip.Reader
	src *source
	br  *bufio.Reader // the compressed bytes; src.n - br.Buffered() are consumed
	max int64         // 0: no limit
	out int64         // decompressed bytes returned
	err error
}

func (g *gzipLayer) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.max > 0 && int64(len(p)) > g.max-g.out+1 {
		p = p[:g.max-g.out+1] // one byte past the limit tells
	}
	n, err := g.zr.Read(p)
	g.out += int64(n)
	if g.max > 0 && g.out > g.max {
		n -= int(g.out - g.max)
		g.out = g.max
		return n, g.fail(ErrTooLarge)
	}
	if err != nil && err != io.EOF {
		return n, g.fail(err)
	}
	return n, err
}

// fail records and returns the positioned error for err. A failure to
// read the compressed input itself (a request body over its limit or too
// slow, an I/O error) is not the layer's and is returned as it is.
func (g *gzipLayer) fail(err error) error {
	if g.src.counter.err != nil {
		g.err = g.src.counter.err
		return g.err
	}
	if err == io.EOF { // a header cut short
		err = io.ErrUnexpectedEOF
	}
	g.err = &DecompressError{File: g.src.name, Layer: "gzip", Offset: g.src.n.Load() - int64(g.br.Buffered()),
		Out: g.out, Limit: g.max, Err: err}
	return g.err
}

// readError wraps a fatal read error of the named input: a
// *DecompressError, which names the file and layer already, is returned as
// it is; any other error becomes "name: what: err".
func readError(name, what string, err error) error {
	var de *DecompressError
	if errors.As(err, &de) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", name, what, err)
}

// source is the state shared by every reader: the input's name and size,
// the byte counter for progress, and what Close releases.
type source struct {
	name    string
	size    int64
	n       atomic.Int64 // bytes consumed from the underlying input
	counter countingReader
	gz      *gzip.Reader
	closer  io.Closer // the file opened by Open, or nil
}

// BytesRead implements Progresser.
func (s *source) BytesRead() int64 { return s.n.Load() }

// Size implements Progresser.
func (s *source) Size() int64 { return s.size }

// Close releases the gzip reader and the file opened by Open.
func (s *source) Close() error {
	var err error
	if s.gz != nil {
		err = s.gz.Close()
		s.gz = nil
	}
	if s.closer != nil {
		if cerr := s.closer.Close(); err == nil {
			err = cerr
		}
		s.closer = nil
	}
	return err
}

func (s *source) pos(line int64) event.Pos { return event.Pos{File: s.name, Line: line} }

// countingReader counts the bytes read through it (per buffer refill, not
// per row) and keeps the first error other than io.EOF.
type countingReader struct {
	r   io.Reader
	n   *atomic.Int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// countingReaderAt counts the bytes read through ReadAt.
type countingReaderAt struct {
	r io.ReaderAt
	n *atomic.Int64
}

func (c countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// rowErr returns a *event.RowError.
func rowErr(pos event.Pos, field, msg string) error {
	return &event.RowError{Pos: pos, Field: field, Msg: msg}
}

// roles of the named columns, used by every format.
type role uint8

const (
	roleProp role = iota
	roleUser
	roleTime
	roleEvent
	roleInsertID
)

// roleOf returns the role of a top-level column or key name.
func (o *Options) roleOf(name string) role {
	switch name {
	case o.UserCol:
		return roleUser
	case o.TimeCol:
		return roleTime
	case o.InsertIDCol:
		return roleInsertID
	case o.EventCol:
		if !o.Users {
			return roleEvent
		}
	}
	return roleProp
}

// checkUser validates a user id, naming the user column in the error.
func (o *Options) checkUser(pos event.Pos, id string) error {
	if err := event.ValidateUserID(id); err != nil {
		return rowErr(pos, o.UserCol, err.Error())
	}
	return nil
}

// checkValue checks the size of a string property value or insert id
// against MaxPropertyBytes, naming the field in the row error.
func (o *Options) checkValue(pos event.Pos, field string, v event.Value) error {
	if err := event.CheckValueBytes(v, o.MaxPropertyBytes); err != nil {
		return rowErr(pos, field, err.Error())
	}
	return nil
}

// checkEvent validates an event name, naming the event column in the error.
func (o *Options) checkEvent(pos event.Pos, name string) error {
	if err := event.ValidateEventName(name); err != nil {
		return rowErr(pos, o.EventCol, err.Error())
	}
	return nil
}

// ColumnReader is a Reader that can also hand out its rows a batch at a
// time, column by column (event.BatchReader): the Parquet reader
// implements it.
type ColumnReader interface {
	Reader
	event.BatchReader
}

// resize returns s with length n, reusing its capacity.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
