package storage

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
)

// WhereFilter is the compiled "where" of an events deletion
// (EventMatch.Where), made by the registered WhereCompiler.
type WhereFilter interface {
	// Compile compiles the filter for one events segment. col(prop) says
	// which block column (index into segment.Block.Props) will hold
	// meta.Props[prop] — calling it asks for that property to be decoded.
	// test reports whether row r of a block decoded so passes; none that
	// no row of the segment can. test is used by one goroutine at a time.
	Compile(meta *segment.Meta, col func(prop int) int) (test func(b *segment.Block, r int) bool, none bool, err error)
}

// WhereCompiler compiles the filters of an events deletion (a JSON array
// of docs/analytics.md §2 event-property filters) against an app's event
// property types. Errors name the bad field ("where[0].value").
type WhereCompiler func(where string, props []event.PropType) (WhereFilter, error)

var whereCompiler atomic.Pointer[WhereCompiler]

// SetWhereCompiler registers the compiler of events deletions' filters.
// Package query registers its own in its init (the filter semantics of
// docs/analytics.md §2 live there); a store whose app has an events deletion
// with filters fails its scans and compactions until one is registered.
func SetWhereCompiler(c WhereCompiler) { whereCompiler.Store(&c) }

// errNoWhereCompiler is the error of an events deletion with filters when
// no WhereCompiler is registered.
var errNoWhereCompiler = errors.New("storage: events deletions with filters need package query's filter compiler (import github.com/spurdb/spur/query)")

// compileWhere compiles where ("" for none: a nil filter).
func compileWhere(where string, props []event.PropType) (WhereFilter, error) {
	if where == "" || where == "[]" {
		return nil, nil
	}
	c := whereCompiler.Load()
	if c == nil {
		return nil, errNoWhereCompiler
	}
	return (*c)(where, props)
}

// eventDeletion is a pending DeleteEvents request of a version, its
// filter compiled against the version's event properties.
type eventDeletion struct {
	seq   uint64
	match *EventMatch
	where WhereFilter // nil: no filter
	err   error       // the filter's compile error, reported by the scans it concerns
}

// rowDelete is one events deletion compiled for one segment.
type rowDelete struct {
	codes    []bool // per event code of the segment: its name matches
	from, to int64
	test     func(b *segment.Block, r int) bool // nil: every row of a matching name and time
}

// hit reports whether row r of b (with Times and Events decoded) is
// deleted.
func (d *rowDelete) hit(b *segment.Block, r int) bool {
	t := b.Times[r]
	return d.codes[b.Events[r]] && t >= d.from && t < d.to && (d.test == nil || d.test(b, r))
}

// deletedRow reports whether one of dels deletes row r of b.
func deletedRow(dels []rowDelete, b *segment.Block, r int) bool {
	for i := range dels {
		if dels[i].hit(b, r) {
			return true
		}
	}
	return false
}

// eventDeletes compiles the version's pending events deletions numbered
// above ref.DelSeq for events segment ref (footer meta) into dst[:0]:
// only those whose event occurs in the segment and whose range overlaps
// its time range. col is as WhereFilter.Compile's.
func (x *eraseIndex) eventDeletes(dst []rowDelete, ref *SegmentRef, meta *segment.Meta, col func(prop int) int) ([]rowDelete, error) {
	dst = dst[:0]
	if x == nil || ref.Kind != KindEvents {
		return dst, nil
	}
	for i := range x.events {
		d := &x.events[i]
		m := d.match
		if d.seq <= ref.DelSeq || m.To <= ref.MinTime || m.From > ref.MaxTime {
			continue
		}
		rd := rowDelete{codes: make([]bool, len(meta.EventNames)), from: m.From, to: m.To}
		any := false
		for c, name := range meta.EventNames {
			if m.Event == "$any" || m.Event == name {
				rd.codes[c], any = true, true
			}
		}
		if !any {
			continue
		}
		if d.err != nil {
			return dst, fmt.Errorf("deletion request: %w", d.err)
		}
		if d.where != nil {
			test, none, err := d.where.Compile(meta, col)
			if err != nil {
				return dst, fmt.Errorf("segment %s: deletion request filter: %w", ref.File, err)
			}
			if none {
				continue
			}
			rd.test = test
		}
		dst = append(dst, rd)
	}
	return dst, nil
}

// touches reports whether segment ref (of an app of shards shards) may
// hold rows a pending deletion hides: a person's (holds) or an events
// deletion's (holdsEvents). Erase rewrites the segments it reports.
func (x *eraseIndex) touches(ref *SegmentRef, shards int) bool {
	return x.holds(ref, shards) || x.holdsEvents(ref)
}

// holdsEvents reports whether segment ref may hold rows of a pending
// events deletion (by kind, deletion number and time range).
func (x *eraseIndex) holdsEvents(ref *SegmentRef) bool {
	if x == nil || ref.Kind != KindEvents {
		return false
	}
	return slices.ContainsFunc(x.events, func(d eventDeletion) bool {
		return d.seq > ref.DelSeq && d.match.To > ref.MinTime && d.match.From <= ref.MaxTime
	})
}

// deleteRows wraps plan p of cursor c's segment so that its rows that one
// of dels deletes get mask 0: the cursor computes every row's mask
// (rowWise) with the deletions' columns decoded after p's. It returns the
// plan to use (c.delPlan).
func (c *cursor) deleteRows(p *SegmentPlan, dels []rowDelete) *SegmentPlan {
	masks, rows := p.Masks, p.Rows
	c.delPlan = *p
	c.delPlan.Rows = func(b *segment.Block, rm []uint64) {
		if rows != nil {
			rows(b, rm)
		} else {
			for r, code := range b.Events[:b.Rows] {
				rm[r] = masks[code]
			}
		}
		for r := range b.Rows {
			if rm[r] != 0 && deletedRow(dels, b, r) {
				rm[r] = 0
			}
		}
	}
	return &c.delPlan
}
