package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// Export: every event (or every user's current properties) of one version,
// typed and in a deterministic order, for `spur export` (docs/storage.md
// §8). It is a scan of all users with every property as a column: one
// worker, so shards come in ascending order, within a shard users in key
// order (user hash, then id), within a user trail order (time, then
// arrival), duplicates by insert id dropped as queries drop them. Memory is
// the scan's (bounded chunks of one trail) plus, per shard, a uint32 per
// dictionary string of its segments' string columns (the map from the
// scan's value ids back to strings); nothing grows with the app's events.

// ExportEvent is one exported event. UserID, the strings and Props are
// borrowed: valid until the callback returns.
type ExportEvent struct {
	UserID   []byte
	Time     int64        // UTC microseconds
	Event    string       // event name
	InsertID string       // "" when the event has none
	Props    []event.Prop // the properties set on the event, sorted by name
}

// ExportUser is one user's current properties (docs/analytics.md §1: the
// latest write wins). UserID and Props are borrowed: valid until the
// callback returns.
type ExportUser struct {
	UserID []byte
	Props  []event.Prop // the user's current properties, sorted by name (never empty)
}

// ExportProps returns the properties an export of kind writes, sorted by
// name, with their app types (the version's schema; the store's insert-id
// column is not a property), newly allocated.
func (s *Version) ExportProps(kind SegmentKind) []event.PropType {
	src := s.EventProps
	if kind == KindUsers {
		src = s.UserProps
	}
	out := make([]event.PropType, 0, len(src))
	for _, p := range src {
		if p.Name != InsertIDProp {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b event.PropType) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ExportEvents calls fn with every event of the version whose time is in
// [from, to), in export order (see the comment above: shard, user hash,
// user id, time, arrival), typed by the app's schema (an int stored before
// the property became float comes as a float). It stops at fn's first
// error and returns it; else corruption or I/O errors of the scan, or
// ctx.Err() (checked by the scan per user and per block).
func (s *Version) ExportEvents(ctx context.Context, from, to int64, fn func(*ExportEvent) error) error {
	props := s.ExportProps(KindEvents)
	tab := &exportStrings{}
	// Columns: the event name, the insert id, then props.
	const nameCol, iidCol, first = 0, 1, 2
	compile := func(ref SegmentRef, meta *segment.Meta) (*SegmentPlan, error) {
		tab.shard(ref.Shard)
		sp := &SegmentPlan{Masks: make([]uint64, len(meta.EventNames))}
		for c := range sp.Masks {
			sp.Masks[c] = 1
		}
		remap, err := tab.add(meta.EventNames)
		if err != nil {
			return nil, err
		}
		sp.Cols = append(sp.Cols, ColumnSource{Prop: -1, Kind: ColEvent, Remap: remap})
		src := ColumnSource{Prop: -1, Kind: ColString}
		if iid := insertIDColumn(meta); iid >= 0 {
			if src.Remap, err = tab.add(meta.Props[iid].Dict); err != nil {
				return nil, err
			}
			src.Prop = len(sp.Props)
			sp.Props = append(sp.Props, iid)
		}
		sp.Cols = append(sp.Cols, src)
		for _, p := range props {
			src, err := exportColumn(ref, meta, p, tab, &sp.Props)
			if err != nil {
				return nil, err
			}
			sp.Cols = append(sp.Cols, src)
		}
		return sp, nil
	}
	ev := &ExportEvent{}
	visit := func(u UserKey, t *trail.Trail) error {
		ev.UserID = u.ID
		for i, tm := range t.Times {
			ev.Time = tm
			ev.Event = tab.get(t.Cols[nameCol].Bits[i])
			ev.InsertID = ""
			if t.Cols[iidCol].Set[i] {
				ev.InsertID = tab.get(t.Cols[iidCol].Bits[i])
			}
			ev.Props = ev.Props[:0]
			for j, p := range props {
				if c := &t.Cols[first+j]; c.Set[i] {
					ev.Props = append(ev.Props, event.Prop{Name: p.Name, Value: exportValue(p.Type, c.Bits[i], tab)})
				}
			}
			if err := fn(ev); err != nil {
				return err
			}
		}
		return nil
	}
	return s.export(ctx, ScanSpec{Kind: KindEvents, From: from, To: to, Compile: compile, Cols: first + len(props)}, visit)
}

// ExportUsers calls fn with the current properties of every user of the
// version that has any, in export order (shard, user hash, user id),
// typed by the app's schema. Errors as for ExportEvents.
func (s *Version) ExportUsers(ctx context.Context, fn func(*ExportUser) error) error {
	props := s.ExportProps(KindUsers)
	if len(props) == 0 {
		return ctx.Err()
	}
	tab := &exportStrings{}
	compileUsers := func(ref SegmentRef, meta *segment.Meta) (*UserSegmentPlan, error) {
		tab.shard(ref.Shard)
		up := &UserSegmentPlan{}
		for _, p := range props {
			src, err := exportColumn(ref, meta, p, tab, &up.Props)
			if err != nil {
				return nil, err
			}
			up.Cols = append(up.Cols, src)
		}
		return up, nil
	}
	u := &ExportUser{}
	visit := func(k UserKey, t *trail.Trail) error {
		if t.Offset > 0 {
			return nil // a later chunk of a user: its values were on the first
		}
		u.UserID, u.Props = k.ID, u.Props[:0]
		for j, p := range props {
			if v := t.User[j]; v.Set {
				u.Props = append(u.Props, event.Prop{Name: p.Name, Value: exportValue(p.Type, v.Bits, tab)})
			}
		}
		if len(u.Props) == 0 {
			return nil
		}
		return fn(u)
	}
	// Events segments hold no user properties: a time range no event can
	// be in skips them all (ExportEvents' time bounds exclude MaxInt64).
	noMasks := func(meta *segment.Meta) []uint64 { return make([]uint64, len(meta.EventNames)) }
	spec := ScanSpec{Kind: KindEvents, From: math.MaxInt64, To: math.MaxInt64, Masks: noMasks,
		AllUsers: true, UserProps: len(props), CompileUsers: compileUsers}
	return s.export(ctx, spec, visit)
}

// export runs spec over the version with one visitor calling visit, and
// returns visit's first error (which stops the scan) or the scan's.
func (s *Version) export(ctx context.Context, spec ScanSpec, visit func(UserKey, *trail.Trail) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := &exportVisitor{visit: visit, cancel: cancel}
	// One worker; by distinct id (docs/identity.md §1: every stored event keeps
	// the distinct id it was sent with, for export): the person join would
	// also mix the shards' string tables.
	spec.Workers, spec.DistinctIDs = 1, true
	_, err := s.Scan(ctx, spec, []Visitor{v})
	if v.err != nil {
		return v.err
	}
	if err != nil {
		return fmt.Errorf("storage: export of app %q: %w", s.App().Name(), err)
	}
	return nil
}

// exportVisitor adapts a visit function that can fail to a Visitor: its
// first error is kept and cancels the scan.
type exportVisitor struct {
	visit  func(UserKey, *trail.Trail) error
	cancel context.CancelFunc
	err    error
}

func (v *exportVisitor) Visit(u UserKey, t *trail.Trail) {
	if v.err != nil {
		return
	}
	if err := v.visit(u, t); err != nil {
		v.err = err
		v.cancel()
	}
}

// exportColumn says where property p comes from in one segment, adding
// the column to decode to *decode; string columns get their dictionary
// registered in tab.
func exportColumn(ref SegmentRef, meta *segment.Meta, p event.PropType, tab *exportStrings, decode *[]int) (ColumnSource, error) {
	src := ColumnSource{Prop: -1, Kind: columnKindOf(p.Type)}
	mi := PropColumn(meta, p.Name)
	if mi < 0 {
		return src, nil
	}
	switch t := meta.Props[mi].Type; {
	case t == p.Type:
	case t == event.TypeInt && p.Type == event.TypeFloat:
		src.Kind = ColIntFloat // widened after the segment was written
	default:
		return src, fmt.Errorf("storage: export: segment %s: property %q is %s, the app schema says %s", ref.File, p.Name, t, p.Type)
	}
	if src.Kind == ColString {
		var err error
		if src.Remap, err = tab.add(meta.Props[mi].Dict); err != nil {
			return src, err
		}
	}
	src.Prop = len(*decode)
	*decode = append(*decode, mi)
	return src, nil
}

// columnKindOf is the scan's column kind for a property of type t.
func columnKindOf(t event.Type) ColumnKind {
	switch t {
	case event.TypeString:
		return ColString
	case event.TypeFloat:
		return ColFloat
	}
	return ColInt
}

// exportValue turns a scan value's bits back into a typed value.
func exportValue(t event.Type, bits uint64, tab *exportStrings) event.Value {
	switch t {
	case event.TypeString:
		return event.String(tab.get(bits))
	case event.TypeFloat:
		return event.Float(math.Float64frombits(bits))
	}
	return event.Value{Type: t, Int: int64(bits)}
}

// exportStrings maps the scan's string value ids back to strings: each
// registered dictionary (one per segment and string column) gets the ids
// [base, base+len). It holds the dictionaries of one shard only (the
// scan reads shards one after the other with one worker, and compiles a
// segment before it hands out any of its values): shard resets it. Only
// the scan's one goroutine uses it (compiling and visiting), so it takes
// no lock.
type exportStrings struct {
	cur   int
	bases []uint64
	dicts [][]string
	last  int // index of the dictionary of the last lookup
}

// errExportStrings: more dictionary strings in one shard than value ids.
var errExportStrings = errors.New("storage: export: more than 2^32 dictionary strings in one shard")

// shard starts shard sh's table if it is not the current one.
func (t *exportStrings) shard(sh int) {
	if sh != t.cur || t.bases == nil {
		t.cur, t.bases, t.dicts, t.last = sh, []uint64{}, nil, 0
	}
}

// add registers dict and returns its remap (code → value id).
func (t *exportStrings) add(dict []string) ([]uint32, error) {
	var base uint64
	if n := len(t.dicts); n > 0 {
		base = t.bases[n-1] + uint64(len(t.dicts[n-1]))
	}
	if base+uint64(len(dict)) > math.MaxUint32+1 {
		return nil, errExportStrings
	}
	remap := make([]uint32, len(dict))
	for i := range remap {
		remap[i] = uint32(base) + uint32(i)
	}
	t.bases = append(t.bases, base)
	t.dicts = append(t.dicts, dict)
	return remap, nil
}

// get returns the string of value id bits.
func (t *exportStrings) get(bits uint64) string {
	if l := t.last; l < len(t.dicts) && bits >= t.bases[l] && bits-t.bases[l] < uint64(len(t.dicts[l])) {
		return t.dicts[l][bits-t.bases[l]]
	}
	l := sort.Search(len(t.bases), func(i int) bool { return t.bases[i] > bits }) - 1
	t.last = l
	return t.dicts[l][bits-t.bases[l]]
}
