package gen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/spurdb/spur/event"
)

// EventRow is one row of the events Parquet file written by WriteParquet:
// one event with its properties as columns. Price, Revenue and URL are nil
// (null) when the event has none. (A pointer, not a zero-means-null float64 with the
// optional tag: parquet-go v0.32 writes some such zeros as non-null 0.)
type EventRow struct {
	UserID    string   `parquet:"user_id"`
	Timestamp int64    `parquet:"timestamp,timestamp(microsecond:utc),delta"` // UTC µs
	Event     string   `parquet:"event,dict"`
	SessionID int64    `parquet:"session_id,delta"`
	Price     *float64 `parquet:"price,optional"`
	Platform  string   `parquet:"platform,dict"`
	Channel   string   `parquet:"channel,dict"`
	Country   string   `parquet:"country,dict"`
	Revenue   *float64 `parquet:"revenue,optional"`
	URL       *string  `parquet:"url,optional,dict"`
}

// PersonEventRow is one row of the events Parquet file WriteParquet writes
// when Config.Persons > 0: EventRow's columns and $anon_distinct_id, the
// anonymous id an $identify event joins to its user id (nil, null, on
// other events).
type PersonEventRow struct {
	EventRow
	AnonDistinctID *string `parquet:"$anon_distinct_id,optional"`
}

// base and setAnon give WriteParquet's generic batches their rows' columns.
func (r *EventRow) base() *EventRow            { return r }
func (r *EventRow) setAnon(*string)            {}
func (r *PersonEventRow) setAnon(anon *string) { r.AnonDistinctID = anon }

// eventRowPtr is a pointer to an EventRow or a PersonEventRow.
type eventRowPtr[R any] interface {
	*R
	base() *EventRow
	setAnon(*string)
}

// UserRow is one row of the users Parquet file written by
// WriteUsersParquet: a user's properties.
type UserRow struct {
	UserID     string `parquet:"user_id"`
	SignupTime int64  `parquet:"signup_time,timestamp(microsecond:utc)"` // UTC µs
	Platform   string `parquet:"platform,dict"`
	Channel    string `parquet:"channel,dict"`
	Country    string `parquet:"country,dict"`
}

// Parquet layout: rows per Write call, batches in flight between the
// generating and the writing goroutine, rows per row group, output buffer.
const (
	writeBatch   = 8192
	batchesAhead = 3
	rowGroupRows = 1 << 20
	bufferBytes  = 1 << 20
)

// writerOptions: zstd (fastest level), row groups of rowGroupRows, column
// chunk statistics, but no per-page statistics and no bounds on the
// dictionary-encoded string columns (together 35 % of the writing time in a
// CPU profile; readers prune by user_id and timestamp bounds, which stay).
func writerOptions(dictColumns ...string) []parquet.WriterOption {
	opts := []parquet.WriterOption{
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.MaxRowsPerRowGroup(rowGroupRows),
		parquet.CreatedBy("spur gen", "", ""),
		parquet.DataPageStatistics(false),
	}
	for _, c := range dictColumns {
		opts = append(opts, parquet.SkipPageBounds(c))
	}
	return opts
}

// eventBatch is a reusable batch of rows (EventRow or PersonEventRow);
// Price, Revenue and AnonDistinctID pointers point into prices, revenues
// and anons, URL pointers into urls.
type eventBatch[R any, P eventRowPtr[R]] struct {
	rows     []R
	prices   []float64
	revenues []float64
	anons    []string
	n        int
}

func newEventBatch[R any, P eventRowPtr[R]]() *eventBatch[R, P] {
	return &eventBatch[R, P]{rows: make([]R, writeBatch), prices: make([]float64, writeBatch),
		revenues: make([]float64, writeBatch), anons: make([]string, writeBatch)}
}

// fill fills b with up to len(b.rows) events of g.
func (b *eventBatch[R, P]) fill(g *Generator, ev *event.Event) {
	b.n = 0
	for b.n < len(b.rows) && g.Next(ev) {
		row := P(&b.rows[b.n])
		row.setAnon(nil)
		r := row.base()
		r.UserID = ev.UserID
		r.Timestamp = ev.Time
		r.Event = ev.Name
		r.Platform = ev.Props[0].Value.Str
		r.Channel = ev.Props[1].Value.Str
		r.Country = ev.Props[2].Value.Str
		r.SessionID = ev.Props[3].Value.Int
		r.Price, r.Revenue, r.URL = nil, nil, nil
		for k := 4; k < len(ev.Props); k++ {
			switch pr := &ev.Props[k]; pr.Name {
			case PropPrice:
				b.prices[b.n] = pr.Value.Float
				r.Price = &b.prices[b.n]
			case PropRevenue:
				b.revenues[b.n] = pr.Value.Float
				r.Revenue = &b.revenues[b.n]
			case PropURL:
				r.URL = &urls[g.evURL]
			case PropAnonDistinctID:
				b.anons[b.n] = pr.Value.Str
				row.setAnon(&b.anons[b.n])
			}
		}
		b.n++
	}
}

// WriteParquet writes the events of cfg to w as one Parquet file with the
// columns of EventRow, or PersonEventRow when cfg.Persons > 0 (zstd, row
// groups of 2²⁰ rows, rows in trail order).
// A second goroutine generates the rows while this one encodes them; it has
// ended when WriteParquet returns. progress, when not nil, is called (from
// the calling goroutine) after each batch of 8192 rows with the number of
// events written so far. It returns cfg's validation error or the first
// write error, wrapped.
func WriteParquet(w io.Writer, cfg Config, progress func(events int64)) error {
	g, err := New(cfg)
	if err != nil {
		return err
	}
	if g.p.cfg.Persons > 0 {
		return writeParquet[PersonEventRow](w, g, progress)
	}
	return writeParquet[EventRow](w, g, progress)
}

// writeParquet is WriteParquet with rows of type R.
func writeParquet[R any, P eventRowPtr[R]](w io.Writer, g *Generator, progress func(events int64)) error {
	bw := bufio.NewWriterSize(w, bufferBytes)
	pw := parquet.NewGenericWriter[R](bw, writerOptions("event", "platform", "channel", "country", "url")...)

	// free and full both have room for every batch, so sends never block.
	free := make(chan *eventBatch[R, P], batchesAhead)
	full := make(chan *eventBatch[R, P], batchesAhead)
	for range batchesAhead {
		free <- newEventBatch[R, P]()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(full)
		var ev event.Event
		for {
			var b *eventBatch[R, P]
			select {
			case b = <-free:
			case <-stop:
				return
			}
			b.fill(g, &ev)
			if b.n == 0 {
				return
			}
			full <- b
		}
	})
	defer wg.Wait()
	defer close(stop)

	var done int64
	for b := range full {
		if _, err := pw.Write(b.rows[:b.n]); err != nil {
			return fmt.Errorf("gen: write parquet events at row %d: %w", done, err)
		}
		done += int64(b.n)
		free <- b
		if progress != nil {
			progress(done)
		}
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("gen: close parquet events writer: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gen: flush parquet events: %w", err)
	}
	return nil
}

// WriteUsersParquet writes the users of cfg to w as one Parquet file with
// the columns of UserRow, in user order, agreeing with the events of
// WriteParquet for the same cfg. It returns cfg's validation error or the
// first write error, wrapped.
func WriteUsersParquet(w io.Writer, cfg Config) error {
	s, err := NewUserStream(cfg)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, bufferBytes)
	pw := parquet.NewGenericWriter[UserRow](bw, writerOptions("platform", "channel", "country")...)
	rows := make([]UserRow, writeBatch)
	var ev event.Event
	var done int64
	for {
		n := 0
		for n < len(rows) && s.Next(&ev) {
			rows[n] = UserRow{
				UserID:     ev.UserID,
				SignupTime: ev.Time,
				Platform:   ev.Props[0].Value.Str,
				Channel:    ev.Props[1].Value.Str,
				Country:    ev.Props[2].Value.Str,
			}
			n++
		}
		if n == 0 {
			break
		}
		if _, err := pw.Write(rows[:n]); err != nil {
			return fmt.Errorf("gen: write parquet users at row %d: %w", done, err)
		}
		done += int64(n)
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("gen: close parquet users writer: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gen: flush parquet users: %w", err)
	}
	return nil
}

// WriteParquetFile writes the events of cfg to a new file at path (created
// or truncated, mode 0644) as WriteParquet does, syncs and closes it. On
// error the partial file is removed and the error names the path.
func WriteParquetFile(path string, cfg Config, progress func(events int64)) error {
	return writeFile(path, func(w io.Writer) error { return WriteParquet(w, cfg, progress) })
}

// WriteUsersParquetFile writes the users of cfg to a new file at path as
// WriteUsersParquet does, with the error handling of WriteParquetFile.
func WriteUsersParquetFile(path string, cfg Config) error {
	return writeFile(path, func(w io.Writer) error { return WriteUsersParquet(w, cfg) })
}

func writeFile(path string, write func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gen: create %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			err = errors.Join(err, os.Remove(path))
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("gen: %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("gen: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gen: close %s: %w", path, err)
	}
	return nil
}
