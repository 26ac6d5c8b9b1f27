package storage

import (
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/spurdb/spur/storage/segment"
)

// InsertIDProp is the column of a segment (format version 4 on) holding
// its events' insert ids (docs/ingest.md §3). Its name is not valid UTF-8, so
// no property can have it: the store's own columns live outside the
// property namespace, and a property named "$insert_id" is an ordinary one
// (docs/analytics.md §1).
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
func openReader(f Object, name string) (*segment.Reader, error) {
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", name, err)
	}
	var ra io.ReaderAt = f
	if fo, ok := f.(*fileObject); ok {
		ra = fo.File // the file itself: no wrapper call per read
	}
	return segment.NewReader(ra, size, name)
}

// segSink creates the files segments are written to: a write's segment
// directory (writeTxn: files removed unless published) or memory
// (memSink: the live layer's segments).
type segSink interface {
	createSegment(name string) (segment.File, error)
}

func (t *writeTxn) createSegment(name string) (segment.File, error) { return t.create(name) }

// memSink keeps the segments written to it in memory, by name. It is
// safe for concurrent use (parallel writers of one seal).
type memSink struct {
	mu    sync.Mutex
	files map[string]*segment.MemFile
}

func (m *memSink) createSegment(name string) (segment.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[string]*segment.MemFile{}
	}
	f := &segment.MemFile{}
	m.files[name] = f
	return f, nil
}

// take returns and forgets the bytes of segment name (nil if unknown).
func (m *memSink) take(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[name]
	delete(m.files, name)
	if f == nil {
		return nil
	}
	return f.Bytes()
}

// writeSegment creates segment ref.File in sink and writes it with a
// streaming writer (a block at a time, footer last): fill appends the
// rows, opt gives the columns and block sizes, and the footer gets ref's
// identity (in an app of shards shards). It returns ref completed from
// the written segment (rows, users, time and hash ranges, bytes). On
// error the file is left for the sink's owner to remove (a writeTxn does).
func writeSegment(sink segSink, shards int, ref SegmentRef, opt segment.WriterOptions, fill func(w *segment.Writer) error) (SegmentRef, error) {
	f, err := sink.createSegment(ref.File)
	if err != nil {
		return SegmentRef{}, err
	}
	opt.Identity = ref.identity(shards)
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
