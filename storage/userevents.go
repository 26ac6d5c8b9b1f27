package storage

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/userfold"
	"github.com/spurdb/spur/storage/segment"
)

// Reading one user: the events of a user's trail and their current user
// properties, for the UI's drill-down and the user endpoints; and of one
// person (docs/identity.md §1), the same over several distinct ids. A user lives
// in one shard (hash of the id); of that shard's segments only the blocks
// whose user-hash range holds the user's hash are decoded, so the cost is
// a few blocks, not a scan.

// UserEvent is one event of a user's (or a person's) trail.
type UserEvent struct {
	Time       int64        // UTC microseconds
	Event      string       // event name
	InsertID   string       // the event's insert_id ("" when it had none)
	DistinctID string       // the distinct id the event was stored under (docs/identity.md §1): set by PersonEvents, "" from UserEvents
	Props      []event.Prop // the properties set on the event, by name (newly allocated)
}

// UserTrail is a page of one user's events in trail order (docs/analytics.md §1:
// timestamp, then arrival), or of a person's merged trail (PersonEvents).
type UserTrail struct {
	Total         int64       // the user's (person's) events in the snapshot
	Events        []UserEvent // events [offset, offset+limit) of the trail
	BlocksRead    int         // blocks decoded (both passes)
	SegmentsCount int         // segments of the user's shard whose hash range holds the user (summed over a person's ids)
}

// MaxUserTrailRows bounds the events of one user (or person) that
// UserEvents (PersonEvents) orders: it holds about 56 bytes per event to
// find a page, so at most 56 MiB.
const MaxUserTrailRows = 1 << 20

// userRow locates one of the user's events: its time, the index of its
// segment among those read (so arrival order between segments) and its
// row in that segment's block, and, in a person's trail, the index of its
// distinct id.
type userRow struct {
	time  int64
	seg   int32
	block int32
	row   int32
	part  int32  // index of the distinct id (PersonEvents)
	name  string // event name (the segment's dictionary string)
	iid   string // insert id, "" for none
}

// UserEvents returns the events [offset, offset+limit) of user id's trail
// in trail order, with their properties, and the number of the user's
// events. An unknown user has Total 0. It reads the user's shard only,
// and of its events segments (in arrival order) the blocks whose hash
// range holds the user: first without properties to order the rows, then
// with every property for the blocks of the page. Errors: offset or limit
// negative, a user with more than MaxUserTrailRows events, corruption
// (errors.Is(err, segment.ErrCorruption)), I/O errors, ctx.Err().
func (s *Version) UserEvents(ctx context.Context, id string, offset, limit int) (*UserTrail, error) {
	return s.personEvents(ctx, []string{id}, offset, limit, false)
}

// PersonEvents returns the events [offset, offset+limit) of the merged
// trail of the distinct ids ids (a person's, docs/identity.md §1; repeats are
// ignored), each with its DistinctID, and the number of their events. The
// merged trail is each id's trail (as UserEvents, copies dropped per id)
// ordered by (time, distinct id, position in its trail): the scan's order
// of a person's events (personscan.go), which depends neither on the
// arrival of identity operations nor on shards. It reads, per id, what
// UserEvents reads. Errors: as UserEvents, with MaxUserTrailRows bounding
// the events of all of ids together.
func (s *Version) PersonEvents(ctx context.Context, ids []string, offset, limit int) (*UserTrail, error) {
	return s.personEvents(ctx, ids, offset, limit, true)
}

// personEvents is PersonEvents, setting the events' DistinctID when tag.
func (s *Version) personEvents(ctx context.Context, ids []string, offset, limit int, tag bool) (*UserTrail, error) {
	if offset < 0 || limit < 0 {
		return nil, fmt.Errorf("storage: events of %d distinct ids: offset %d, limit %d: want ≥ 0", len(ids), offset, limit)
	}
	if len(ids) > 1 {
		ids = slices.Clone(ids)
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	out := &UserTrail{Events: []UserEvent{}}
	refs := make([][]SegmentRef, len(ids))
	var rows []userRow
	var blk segment.Block
	for k, id := range ids {
		refs[k] = s.userSegments(KindEvents, id)
		out.SegmentsCount += len(refs[k])
		var err error
		if rows, err = s.appendUserRows(ctx, rows, int32(k), len(ids) > 1, id, refs[k], &blk, out); err != nil {
			return nil, err
		}
	}
	if len(ids) > 1 {
		// Each id's rows are in trail order and the ids in order: a
		// stable sort by time gives (time, distinct id, position).
		slices.SortStableFunc(rows, func(a, b userRow) int { return cmp.Compare(a.time, b.time) })
	}
	out.Total = int64(len(rows))
	if offset >= len(rows) || limit == 0 {
		return out, nil
	}
	page := rows[offset:min(len(rows), offset+limit)]
	out.Events = make([]UserEvent, len(page))
	// where[seg][block] lists the page positions of each (segment, block)
	// of one id and their rows within the user.
	type at struct{ pos, row int }
	for k, id := range ids {
		where := map[[2]int32][]at{}
		for p, r := range page {
			if r.part == int32(k) {
				key := [2]int32{r.seg, r.block}
				where[key] = append(where[key], at{pos: p, row: int(r.row)})
			}
		}
		if len(where) == 0 {
			continue
		}
		err := s.eachUserBlock(ctx, refs[k], id, func(seg, block int) bool { return where[[2]int32{int32(seg), int32(block)}] != nil }, &blk,
			func(seg, block int, r *segment.Reader, b *segment.Block, from, _ int) error {
				out.BlocksRead++
				m := r.Meta()
				iid := insertIDColumn(m)
				for _, a := range where[[2]int32{int32(seg), int32(block)}] {
					i := from + a.row
					ev := UserEvent{Time: b.Times[i], Event: m.EventNames[b.Events[i]]}
					if tag {
						ev.DistinctID = id
					}
					for j := range m.Props {
						v, ok := propValue(&m.Props[j], &b.Props[j], i)
						switch {
						case !ok:
						case j == iid:
							ev.InsertID = v.Str
						default:
							ev.Props = append(ev.Props, event.Prop{Name: m.Props[j].Name, Value: v})
						}
					}
					slices.SortFunc(ev.Props, func(x, y event.Prop) int { return strings.Compare(x.Name, y.Name) })
					out.Events[a.pos] = ev
				}
				return nil
			})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// appendUserRows appends to rows the rows of user id's trail (its events
// segments refs) in trail order, copies dropped, each with part, and
// counts the blocks it reads in out; many says the rows are a person's
// (the error's words). Errors: rows passing MaxUserTrailRows,
// eachUserBlock's.
func (s *Version) appendUserRows(ctx context.Context, rows []userRow, part int32, many bool, id string, refs []SegmentRef, blk *segment.Block, out *UserTrail) ([]userRow, error) {
	start := len(rows)
	retained := s.RetainedFrom()
	all := func(int, int) bool { return true } // the insert ids too, for deduplication
	x := s.erasing()
	dels, delSeg := []rowDelete(nil), -1 // the pending events deletions of segment delSeg
	err := s.eachUserBlock(ctx, refs, id, all, blk, func(seg, block int, r *segment.Reader, b *segment.Block, from, to int) error {
		out.BlocksRead++
		if seg != delSeg {
			var err error
			if dels, err = x.eventDeletes(dels, &refs[seg], r.Meta(), func(mi int) int { return mi }); err != nil {
				return err
			}
			delSeg = seg
		}
		if len(rows)+to-from > MaxUserTrailRows {
			if many {
				return fmt.Errorf("storage: the person of distinct id %q has more than %d events: too many to order for a page", id, MaxUserTrailRows)
			}
			return fmt.Errorf("storage: user %q has more than %d events: too many to order for a page", id, MaxUserTrailRows)
		}
		m := r.Meta()
		iid := insertIDColumn(m)
		for i := from; i < to; i++ {
			if b.Times[i] < retained {
				continue // past the app's retention (docs/storage.md §7)
			}
			if len(dels) > 0 && deletedRow(dels, b, i) {
				continue // an events deletion pending in the segment deletes it
			}
			row := userRow{time: b.Times[i], seg: int32(seg), block: int32(block), row: int32(i - from), part: part, name: m.EventNames[b.Events[i]]}
			if iid >= 0 {
				if v, ok := propValue(&m.Props[iid], &b.Props[iid], i); ok {
					row.iid = v.Str
				}
			}
			rows = append(rows, row)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Segments were read in arrival order and a user's rows within one
	// block are in trail order: a stable sort by time gives trail order.
	own := rows[start:]
	slices.SortStableFunc(own, func(a, b userRow) int { return cmp.Compare(a.time, b.time) })
	own = dedupUserRows(own)
	return rows[:start+len(own)], nil
}

// dedupUserRows drops the later copies of an event from rows (one user's,
// in trail order): two events with equal timestamp, event name and
// insert id are one, the first stored wins (docs/ingest.md §3). Copies are in
// different segments until compaction merges them; events without an
// insert id are never copies.
func dedupUserRows(rows []userRow) []userRow {
	out := rows[:0]
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].time == rows[i].time {
			j++
		}
		start := len(out)
		for _, r := range rows[i:j] {
			dup := false
			if r.iid != "" {
				for _, k := range out[start:] {
					if k.iid == r.iid && k.name == r.name {
						dup = true
						break
					}
				}
			}
			if !dup {
				out = append(out, r)
			}
		}
		i = j
	}
	return out
}

// UserProperties returns user id's current user properties
// (docs/identity.md §3: the user's writes folded in (timestamp, arrival)
// order — a set replaces, a set-once sets if unset, an unset clears, an
// add adds to a number, a delete clears every property; with sets and
// set-onces only: the latest set wins, a tie to the later arrival, else
// the earliest set-once, a tie to the earlier), sorted by name, newly
// allocated; empty for a user without any. It reads the users segments
// of the user's shard, the blocks whose hash range holds the user.
// Errors: corruption, I/O errors, ctx.Err().
func (s *Version) UserProperties(ctx context.Context, id string) ([]event.Prop, error) {
	return s.PersonProperties(ctx, []string{id})
}

// PersonProperties returns the current properties of the person of
// distinct ids ids (docs/identity.md §3: a fold over the writes made under
// all of them): the writes of all the ids folded in (timestamp, distinct
// id, arrival) order, as UserProperties folds one id's. Between ids at
// one instant the order is the ids' (as the scan's person join,
// personscan.go, docs/decisions.md): a set of the greater distinct id
// wins and a set-once of the smaller, so that the answer depends neither
// on arrival nor on where the ids are stored. Sorted by name, newly
// allocated. Errors: as UserProperties.
func (s *Version) PersonProperties(ctx context.Context, ids []string) ([]event.Prop, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	pw := personWrites{props: map[string][]userfold.Write[event.Value]{}}
	var blk segment.Block
	for i, id := range ids {
		if err := s.userWrites(ctx, id, int64(i)<<personRankShift, &pw, &blk); err != nil {
			return nil, err
		}
	}
	out := make([]event.Prop, 0, len(pw.props))
	for name, ws := range pw.props {
		ws = append(ws, pw.deletes...)
		if v, ok := userfold.Fold(ws, addValues); ok {
			out = append(out, event.Prop{Name: name, Value: v})
		}
	}
	slices.SortFunc(out, func(x, y event.Prop) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// personWrites gathers the user property writes of a person: by
// property name, and the deletes (which apply to every property).
type personWrites struct {
	props   map[string][]userfold.Write[event.Value]
	deletes []userfold.Write[event.Value]
}

// addValues is userfold's add for event values: two ints add as int64,
// numbers with a float as float64; anything else is not a number.
func addValues(cur, d event.Value) (event.Value, bool) {
	switch {
	case cur.Type == event.TypeInt && d.Type == event.TypeInt:
		return event.Int(cur.Int + d.Int), true
	case (cur.Type == event.TypeInt || cur.Type == event.TypeFloat) && (d.Type == event.TypeInt || d.Type == event.TypeFloat):
		f := func(v event.Value) float64 {
			if v.Type == event.TypeInt {
				return float64(v.Int)
			}
			return v.Float
		}
		return event.Float(f(cur) + f(d) + 0), true
	}
	return cur, false
}

// userWrites adds user id's users rows to pw, each write ranked base
// plus its arrival order within the id, reading blocks into blk.
func (s *Version) userWrites(ctx context.Context, id string, base int64, pw *personWrites, blk *segment.Block) error {
	rank := base
	return s.eachUserBlock(ctx, s.userSegments(KindUsers, id), id, nil, blk, func(_, _ int, r *segment.Reader, b *segment.Block, from, to int) error {
		m := r.Meta()
		ops := make([]userfold.Op, len(m.EventNames))
		for c, name := range m.EventNames {
			ops[c] = UserSet
			if k := slices.Index(userOpEvents[:], name); k >= 0 {
				ops[c] = UserOp(k)
			}
		}
		// Later segments and later rows arrive later.
		for i := from; i < to; i++ {
			if op := ops[b.Events[i]]; op == UserDelete {
				pw.deletes = append(pw.deletes, userfold.Write[event.Value]{Time: b.Times[i], Rank: rank + int64(i-from), Op: op})
			}
		}
		for j := range m.Props {
			for i := from; i < to; i++ {
				v, ok := propValue(&m.Props[j], &b.Props[j], i)
				if !ok {
					continue
				}
				name := m.Props[j].Name
				pw.props[name] = append(pw.props[name], userfold.Write[event.Value]{Time: b.Times[i], Rank: rank + int64(i-from), Op: ops[b.Events[i]], Value: v})
			}
		}
		rank += int64(to - from)
		return nil
	})
}

// userSegments returns the segments of kind in user id's shard whose
// user-hash range may hold the user (an unknown range may) and where no
// pending deletion hides it, in arrival (Seq) order.
func (s *Version) userSegments(kind SegmentKind, id string) []SegmentRef {
	h := UserHash(id)
	shard := ShardOfHash(h, s.Shards)
	x := s.erasing()
	var refs []SegmentRef
	for _, ref := range s.Segments {
		if ref.Kind != kind || ref.Shard != shard || ref.Rows == 0 || x.hides(ref.DelSeq, h, id) {
			continue
		}
		if ref.FirstHash != 0 || ref.LastHash != 0 {
			if h < ref.FirstHash || h > ref.LastHash {
				continue
			}
		}
		refs = append(refs, ref)
	}
	slices.SortStableFunc(refs, func(a, b SegmentRef) int { return cmp.Compare(a.SeqMax, b.SeqMax) })
	return refs
}

// eachUserBlock decodes, in each segment of refs, the blocks whose hash
// range holds user id (those want accepts, when not nil; with every
// property when want is set or the kind is users, else none) into blk, and
// calls f with the segment's and block's index and the user's rows
// [from, to) when the block holds the user.
func (s *Version) eachUserBlock(ctx context.Context, refs []SegmentRef, id string, want func(seg, block int) bool, blk *segment.Block,
	f func(seg, block int, r *segment.Reader, b *segment.Block, from, to int) error) error {
	bid := []byte(id)
	h := segment.UserHash(bid)
	var props []int
	for si, ref := range refs {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := s.Reader(ref)
		if err != nil {
			return fmt.Errorf("read user %q: %w", id, err)
		}
		m := r.Meta()
		props = props[:0]
		if want != nil || ref.Kind == KindUsers {
			for j := range m.Props {
				props = append(props, j)
			}
		}
		for bi := range m.Blocks {
			bm := &m.Blocks[bi]
			if h < bm.FirstHash || h > bm.LastHash || want != nil && !want(si, bi) {
				continue
			}
			if err := r.ReadBlock(bi, props, blk); err != nil {
				return fmt.Errorf("read user %q: %w", id, err)
			}
			for u := range len(blk.UserStarts) - 1 {
				if blockHash(blk, u) == h && bytes.Equal(blk.UserID(u), bid) {
					if err := f(si, bi, r, blk, int(blk.UserStarts[u]), int(blk.UserStarts[u+1])); err != nil {
						return err
					}
					break
				}
			}
		}
	}
	return nil
}

// propValue returns row i's value of property pm in column pd, and
// whether it is set.
func propValue(pm *segment.PropMeta, pd *segment.PropData, i int) (event.Value, bool) {
	if pd.Present[i>>6]>>(i&63)&1 == 0 {
		return event.Value{}, false
	}
	x := pd.Index(i)
	switch pm.Type {
	case event.TypeString:
		return event.String(pm.Dict[pd.Strs[x]]), true
	case event.TypeFloat:
		return event.Float(pd.Floats[x]), true
	case event.TypeInt, event.TypeBool, event.TypeTime:
		return event.Value{Type: pm.Type, Int: pd.Ints[x]}, true
	}
	return event.Value{}, false
}
