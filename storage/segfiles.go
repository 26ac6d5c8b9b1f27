package storage

import (
	"fmt"
	"slices"

	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
)

// InsertIDProp is the column of a segment (format version 4 on) holding
// its events' insert ids (ingest.md §3). Its name is not valid UTF-8, so
// no property can have it: the store's own columns live outside the
// property namespace, and a property named "$insert_id" is an ordinary one
// (analytics.md §1).
const InsertIDProp = "\xffinsert_id"

// legacyInsertIDProp is the insert-id column of segments of format
// versions 1 to 3, which reserved the property name.
const legacyInsertIDProp = "$insert_id"

// insertIDColumn returns the index of the insert-id column in a segment's
// properties, or -1 when its events have none.
func insertIDColumn(m *segment.Meta) int {
	name := InsertIDProp
	if m.Version < 4 {
		name = legacyInsertIDProp
	}
	return slices.IndexFunc(m.Props, func(p segment.PropMeta) bool { return p.Name == name })
}

// PropColumn returns the index in a segment's columns of the event or user
// property name, or -1 when the segment has no such property. The store's
// own columns (the insert ids) are never a property's, in every format
// version.
func PropColumn(m *segment.Meta, name string) int {
	i := slices.IndexFunc(m.Props, func(p segment.PropMeta) bool { return p.Name == name })
	if i >= 0 && i == insertIDColumn(m) {
		return -1
	}
	return i
}

// segmentKind is the footer's name of a segment kind.
func (k SegmentKind) segmentKind() segment.Kind {
	if k == KindUsers {
		return segment.KindUsers
	}
	return segment.KindEvents
}

// identity returns the footer identity of a segment written for ref.
func (ref *SegmentRef) identity(shards int) segment.Identity {
	return segment.Identity{Kind: ref.Kind.segmentKind(), Shard: ref.Shard, Shards: shards,
		Generation: ref.Generation, SeqMin: ref.SeqMin, SeqMax: ref.SeqMax}
}

// openReader opens a segment reader over f (name names it in errors); the
// caller keeps owning f.
func openReader(f vfs.File, name string) (*segment.Reader, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", name, err)
	}
	return segment.NewReader(f, st.Size(), name)
}

// writeSegment creates segment file ref.File for write t and writes it
// with a streaming writer (a block at a time, footer last): fill appends
// the rows, opt gives the columns and block sizes, and the footer gets
// ref's identity. It returns ref completed from the written file (rows,
// users, time and hash ranges, bytes). On error the file is removed by t.
func (t *writeTxn) writeSegment(ref SegmentRef, opt segment.WriterOptions, fill func(w *segment.Writer) error) (SegmentRef, error) {
	f, err := t.create(ref.File)
	if err != nil {
		return SegmentRef{}, err
	}
	opt.Identity = ref.identity(t.base.Shards)
	w, err := segment.NewWriter(f, opt)
	if err != nil {
		f.Close()
		return SegmentRef{}, fmt.Errorf("write segment %s: %w", ref.File, err)
	}
	if err := fill(w); err != nil {
		w.Abort()
		return SegmentRef{}, fmt.Errorf("write segment %s: %w", ref.File, err)
	}
	info, err := w.Close()
	if err != nil {
		return SegmentRef{}, fmt.Errorf("write segment %s: %w", ref.File, err)
	}
	ref.Rows, ref.Users, ref.MinTime, ref.MaxTime, ref.Bytes = info.Rows, info.Users, info.MinTime, info.MaxTime, info.Bytes
	ref.FirstHash, ref.LastHash = info.FirstHash, info.LastHash
	return ref, nil
}

// inputProps returns the column declarations of an Input (its columns, in
// order).
func inputProps(in *segment.Input) []segment.PropSpec {
	out := make([]segment.PropSpec, len(in.Props))
	for i, p := range in.Props {
		out[i] = segment.PropSpec{Name: p.Name, Type: p.Type}
	}
	return out
}
