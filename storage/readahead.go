package storage

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/spurdb/spur/event"
)

// batchRows is how many rows the read-ahead stage hands over at a time.
const batchRows = 4096

// rowBatch is a batch of rows read from a Source and detached from the
// source's reused buffers: every string of the batch is a substring of one
// string built once per batch, so the batch costs a handful of allocations
// whatever its size. A batch read from an event.BatchReader has its rows
// in cols (and none in evs).
type rowBatch struct {
	cols *event.Batch // the rows of a column source, or nil

	evs    []event.Event
	props  []event.Prop
	errs   []*event.RowError // per row: nil, or the error the source returned for it
	counts []int32           // per row: number of props
	fatal  error             // a non-row error (or io.EOF at the end of all sources)

	buf  []byte
	refs []strRef
}

// strRef says which string field of the batch takes buf[off:off+n].
type strRef struct {
	kind     uint8 // refUser, refName, refInsertID, refPropName, refPropStr
	idx      int32 // row (user, name, insert id) or prop index
	off, len int32
}

const (
	refUser = iota
	refName
	refInsertID
	refPropName
	refPropStr
)

func (b *rowBatch) reset() {
	if b.cols != nil {
		b.cols.Rows = 0
	}
	b.evs, b.props, b.errs, b.counts, b.fatal = b.evs[:0], b.props[:0], b.errs[:0], b.counts[:0], nil
	b.buf, b.refs = b.buf[:0], b.refs[:0]
}

func (b *rowBatch) str(kind uint8, idx int, s string) {
	if s == "" {
		return
	}
	b.refs = append(b.refs, strRef{kind: kind, idx: int32(idx), off: int32(len(b.buf)), len: int32(len(s))})
	b.buf = append(b.buf, s...)
}

// add copies ev (borrowed from the source) into the batch; err is nil or
// the source's *event.RowError for this row (copied too).
func (b *rowBatch) add(ev *event.Event, err *event.RowError) {
	i := len(b.evs)
	b.evs = append(b.evs, event.Event{Time: ev.Time, Pos: ev.Pos})
	b.counts = append(b.counts, 0)
	if err != nil {
		b.errs = append(b.errs, &event.RowError{Pos: err.Pos, Field: strings.Clone(err.Field), Msg: strings.Clone(err.Msg)})
		return
	}
	b.errs = append(b.errs, nil)
	b.str(refUser, i, ev.UserID)
	b.str(refName, i, ev.Name)
	b.str(refInsertID, i, ev.InsertID)
	for _, p := range ev.Props {
		j := len(b.props)
		b.props = append(b.props, event.Prop{Value: event.Value{Type: p.Value.Type, Int: p.Value.Int, Float: p.Value.Float}})
		b.str(refPropName, j, p.Name)
		b.str(refPropStr, j, p.Value.Str)
	}
	b.counts[i] = int32(len(ev.Props))
}

// seal makes the batch's strings one allocation and points every row's
// fields at it.
func (b *rowBatch) seal() {
	all := string(b.buf)
	for _, r := range b.refs {
		s := all[r.off : r.off+r.len]
		switch r.kind {
		case refUser:
			b.evs[r.idx].UserID = s
		case refName:
			b.evs[r.idx].Name = s
		case refInsertID:
			b.evs[r.idx].InsertID = s
		case refPropName:
			b.props[r.idx].Name = s
		case refPropStr:
			b.props[r.idx].Value.Str = s
		}
	}
	off := 0
	for i := range b.evs {
		if b.errs[i] != nil {
			continue
		}
		n := int(b.counts[i])
		b.evs[i].Props = b.props[off : off+n : off+n]
		off += n
	}
}

// readAhead reads all sources in order on its own goroutine, so that
// parsing overlaps with validation and buffering. It sends full batches on
// the returned channel and finally a batch whose fatal is io.EOF or the
// first non-row error. Sources that implement event.BatchReader are read
// batch by batch into rowBatch.cols; the others row by row. Batches are
// recycled through free. It stops early when ctx is done.
func readAhead(ctx context.Context, srcs []Source) (<-chan *rowBatch, chan<- *rowBatch) {
	out := make(chan *rowBatch, 2)
	free := make(chan *rowBatch, 4)
	go func() {
		defer close(out)
		get := func() *rowBatch {
			select {
			case b := <-free:
				b.reset()
				return b
			default:
				return &rowBatch{}
			}
		}
		send := func(b *rowBatch) bool {
			b.seal()
			select {
			case out <- b:
				return true
			case <-ctx.Done():
				return false
			}
		}
		b := get() // the row batch being filled
		var ev event.Event
		for _, src := range srcs {
			if cr, ok := src.(event.BatchReader); ok {
				if len(b.evs) > 0 { // rows of an earlier row source go first
					if !send(b) {
						return
					}
					b = get()
				}
				for {
					cb := get()
					if cb.cols == nil {
						cb.cols = &event.Batch{}
					}
					err := cr.NextBatch(cb.cols)
					if err == io.EOF {
						break
					}
					if err != nil {
						cb.cols.Rows = 0
						cb.fatal = err
						send(cb)
						return
					}
					if !send(cb) {
						return
					}
				}
				continue
			}
			for {
				err := src.Next(&ev)
				if err == io.EOF {
					break
				}
				var re *event.RowError
				if err != nil && !errors.As(err, &re) {
					b.fatal = err
					send(b)
					return
				}
				b.add(&ev, re)
				if len(b.evs) == batchRows {
					if !send(b) {
						return
					}
					b = get()
				}
			}
		}
		b.fatal = io.EOF
		send(b)
	}()
	return out, free
}
