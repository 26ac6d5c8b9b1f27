package storage

// The scan over persons (docs/persons.md): events are stored by distinct
// id, so the trail of a person with several distinct ids has parts in
// several places, possibly several shards. When the version's id graph
// joins some ids (identity.Snapshot.Joined), each scan worker's visitor
// is wrapped: the trail of a distinct id that belongs to a joined person
// is copied aside instead of visited; every other trail passes through
// untouched (a Bloom filter read per trail, identity.Snapshot.MayBeJoined,
// and an index lookup for the ids it lets through; none per event). Once
// every shard is scanned, the parts are grouped by person, merged into
// one trail per person and visited, in parallel, by the same visitors, with
// the person id as the trail's id. An app that never applied an identity
// operation pays nothing.

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/internal/userfold"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// personPart is the trail of one distinct id of a joined person: its
// events are rows [start, end) of its worker's arena, its user values
// rows [user, user+UserProps) of the arena's user columns.
type personPart struct {
	person     *identity.Person
	idx        int32 // the distinct id's index in person.DistinctIDs (sorted by bytes)
	worker     int32
	start, end int32
	user       int32
}

// partArena holds the copied rows of one worker's parts, column by
// column, so that copying a part allocates nothing once the arena has
// grown: times, masks, the query's columns, and per part its user values
// (the distinct id's own) with what the person fold needs of them. When
// the version has no unset, add or delete writes (personJoin.ops false):
// when each was written (setAt for a SetEvent write, math.MinInt64 when
// none or unknown; onceAt for the value of a SetOnceEvent write,
// math.MaxInt64 when none). Else the id's writes of the property:
// ops[opsFrom[i]:opsTo[i]] for user value i, each with its time and its
// rank in the id's arrival order (shardScanner.uops).
type partArena struct {
	times          []int64
	mask           []uint64
	cols           []trail.Column
	user           []trail.Value
	setAt, onceAt  []int64
	opsFrom, opsTo []int32
	ops            []userfold.Write[ubits]
}

// reset empties the arena, keeping its memory.
func (a *partArena) reset() {
	a.times, a.mask, a.user, a.setAt, a.onceAt = a.times[:0], a.mask[:0], a.user[:0], a.setAt[:0], a.onceAt[:0]
	a.opsFrom, a.opsTo, a.ops = a.opsFrom[:0], a.opsTo[:0], a.ops[:0]
	for k := range a.cols {
		a.cols[k].Set, a.cols[k].Bits = a.cols[k].Set[:0], a.cols[k].Bits[:0]
	}
}

// bytes is the memory the arena holds.
func (a *partArena) bytes() int64 {
	n := int64(cap(a.times))*8 + int64(cap(a.mask))*8 + int64(cap(a.user))*16 + int64(cap(a.setAt)+cap(a.onceAt))*8 +
		int64(cap(a.opsFrom)+cap(a.opsTo))*4 + int64(cap(a.ops))*32
	for _, c := range a.cols {
		n += int64(cap(c.Set)) + int64(cap(c.Bits))*8
	}
	return n
}

// joinVisitor wraps one scan worker's visitor (see the file comment).
type joinVisitor struct {
	inner Visitor
	snap  *identity.Snapshot
	sc    *shardScanner // the worker's scanner: the user values' write times
	grow  func(int64) error
	ops   bool  // the join folds every write (personJoin.ops)
	w     int32 // the worker's index
	arena *partArena
	parts []personPart
	cur   bool  // the current user's chunks go to the last part
	pre   bool  // the current user's Prepass chunks are a joined id's (not passed on)
	held  int64 // arena bytes reported to grow
	err   error // the first refusal of grow
}

// joinPrepassVisitor is a joinVisitor whose inner visitor is a
// PrepassVisitor.
type joinPrepassVisitor struct{ *joinVisitor }

func (j joinPrepassVisitor) Prepass(u UserKey, t *trail.Trail) {
	if t.Offset == 0 {
		j.pre = j.person(u) != nil
	}
	if j.pre {
		return // every chunk of a joined id: its person is visited whole once joined
	}
	j.inner.(PrepassVisitor).Prepass(u, t)
}

// person returns the joined person of user u's distinct id, nil when it
// is a person of its own: one filter read for nearly every id, an index
// lookup for the ids in joined persons.
func (j *joinVisitor) person(u UserKey) *identity.Person {
	if !j.snap.MayBeJoined(u.Hash) {
		return nil
	}
	p := j.snap.LookupHash(u.Hash, u.ID)
	if p == nil || len(p.DistinctIDs) < 2 {
		return nil
	}
	return p
}

// Visit passes the trail through, or copies it into a part.
func (j *joinVisitor) Visit(u UserKey, t *trail.Trail) {
	a := j.arena
	if t.Offset == 0 {
		j.cur = false
		if p := j.person(u); p != nil {
			idx, _ := slices.BinarySearch(p.DistinctIDs, string(u.ID))
			n := int32(len(a.times))
			j.parts = append(j.parts, personPart{person: p, idx: int32(idx), worker: j.w, start: n, end: n, user: int32(len(a.user))})
			j.cur = true
			j.userValues(t)
		}
	}
	if !j.cur {
		j.inner.Visit(u, t)
		return
	}
	a.times = append(a.times, t.Times...)
	a.mask = append(a.mask, t.Mask[:len(t.Times)]...)
	if len(a.cols) != len(t.Cols) {
		a.cols = make([]trail.Column, len(t.Cols))
	}
	for k, c := range t.Cols {
		a.cols[k].Set = append(a.cols[k].Set, c.Set...)
		a.cols[k].Bits = append(a.cols[k].Bits, c.Bits...)
	}
	j.parts[len(j.parts)-1].end = int32(len(a.times))
	if j.grow != nil && j.err == nil {
		if b := a.bytes(); b > j.held {
			j.err = j.grow(b - j.held)
			j.held = b
		}
	}
}

// userValues appends the user values of t and their write times, or
// (j.ops) the writes they fold: the scanner collected them
// (shardScanner.startCollect: the id is a joined person's), or the id
// has none.
func (j *joinVisitor) userValues(t *trail.Trail) {
	a, sc := j.arena, j.sc
	if j.ops {
		for k, v := range t.User {
			a.user = append(a.user, v)
			a.opsFrom = append(a.opsFrom, int32(len(a.ops)))
			if sc.ucollect && k < len(sc.uops) {
				a.ops = append(a.ops, sc.uops[k]...)
			}
			a.opsTo = append(a.opsTo, int32(len(a.ops)))
		}
		return
	}
	for k, v := range t.User {
		setAt, onceAt := int64(math.MinInt64), int64(math.MaxInt64)
		if k < len(sc.ubest) && sc.ubest[k] != math.MinInt64 {
			setAt = sc.ubest[k]
		} else if v.Set && k < len(sc.uonceAt) {
			onceAt = sc.uonceAt[k]
		}
		a.user = append(a.user, v)
		a.setAt = append(a.setAt, setAt)
		a.onceAt = append(a.onceAt, onceAt)
	}
}

// personJoin is the join of one scan.
type personJoin struct {
	st      *Store
	v       *Version
	spec    *ScanSpec // the scan's (prepare)
	snap    *identity.Snapshot
	workers []*joinVisitor
	// ops: a users segment of the version holds unset, add or delete
	// writes (usersHaveOps), so user values fold every write of a
	// person's ids (userfold), not the latest set and earliest set-once
	// of each.
	ops bool
	// missing holds the user values of the distinct ids of visited
	// persons that no row of the scan reached (missingParts).
	missing partArena
}

// prepare adapts the scan's spec to the join: every trail's id is
// looked up, so ids are decoded.
func (pj *personJoin) prepare(spec *ScanSpec) {
	spec.NoIDs = false
	pj.spec = spec
}

// release gives the workers' arenas back to the store (once the scan no
// longer reads them) and their bytes back to the budget.
func (pj *personJoin) release() {
	for _, j := range pj.workers {
		if j.grow != nil && j.held > 0 {
			j.grow(-j.held)
		}
		if j.arena != nil {
			pj.st.putArena(j.arena)
		}
		j.parts, j.cur, j.arena, j.held = nil, false, nil, 0
	}
}

// usersHaveOps reports whether a users segment of v holds writes the
// latest-set, earliest-set-once fold cannot apply (UnsetEvent, AddEvent,
// DeleteEvent rows), reading the segments' footers (opened once per
// version). Errors: those of Version.Reader.
func usersHaveOps(v *Version) (bool, error) {
	for _, ref := range v.Segments {
		if ref.Kind != KindUsers || ref.Rows == 0 {
			continue
		}
		r, err := v.Reader(ref)
		if err != nil {
			return false, err
		}
		for _, name := range r.Meta().EventNames {
			if name == UnsetEvent || name == AddEvent || name == DeleteEvent {
				return true, nil
			}
		}
	}
	return false, nil
}

// newPersonJoin returns the join of a scan of a version whose graph is
// snap, or nil when it joins nothing.
func newPersonJoin(v *Version) *personJoin {
	snap := v.persons
	if snap == nil || !snap.Joined() {
		return nil
	}
	return &personJoin{st: v.app.store, v: v, snap: snap}
}

// wrap returns the scan's visitors wrapped, and the wrappers (whose sc
// each worker sets to its scanner).
func (pj *personJoin) wrap(vs []Visitor, grow func(int64) error) []Visitor {
	out := make([]Visitor, len(vs))
	for w, v := range vs {
		j := &joinVisitor{inner: v, snap: pj.snap, grow: grow, ops: pj.ops, w: int32(w), arena: pj.st.arenas.get()}
		pj.workers = append(pj.workers, j)
		out[w] = j
		if _, ok := v.(PrepassVisitor); ok {
			out[w] = joinPrepassVisitor{j}
		}
	}
	return out
}

// visit merges the parts of each joined person into one trail and visits
// it, the persons split among the workers' visitors, in parallel. It
// returns the first refusal of the memory budget, or ctx's error.
func (pj *personJoin) visit(ctx context.Context, chunkEvents int, nuser int) error {
	var parts []personPart
	arenas := make([]*partArena, len(pj.workers))
	for w, j := range pj.workers {
		if j.err != nil {
			return j.err
		}
		parts = append(parts, j.parts...)
		arenas[w] = j.arena
	}
	defer pj.release()
	if nuser > 0 {
		var err error
		if parts, err = pj.missingParts(ctx, parts, nuser); err != nil {
			return err
		}
		arenas = append(arenas, &pj.missing)
	}
	slices.SortFunc(parts, func(a, b personPart) int {
		return cmp.Or(cmp.Compare(a.person.Key, b.person.Key), cmp.Compare(a.idx, b.idx))
	})
	var groups [][]personPart
	for i := 0; i < len(parts); {
		k := i + 1
		for k < len(parts) && parts[k].person == parts[i].person {
			k++
		}
		groups = append(groups, parts[i:k])
		i = k
	}
	var wg sync.WaitGroup
	for w, j := range pj.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := personMerge{arenas: arenas, nuser: nuser, ncols: pj.spec.Cols, ops: pj.ops}
			for g := w; g < len(groups); g += len(pj.workers) {
				if ctx.Err() != nil {
					return
				}
				m.visit(j.inner, groups[g], chunkEvents)
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// missingParts adds to parts, for every visited person, a part without
// rows for each of its distinct ids the scan did not reach (no row
// passed, or their blocks were skipped), holding the id's user values: a
// person's user values fold the writes of all of its ids
// (docs/identity.md §3), and a scan visits only ids with passing rows.
// The values are read in one walk over the users segments of the shards
// of those ids, in arrival order: a block whose hash range holds none of
// them is not read, one that may is decoded without properties first
// (ids and times) and with the query's user properties only when it
// holds one. The parts' arena is pj.missing, at index len(pj.workers).
func (pj *personJoin) missingParts(ctx context.Context, parts []personPart, nuser int) ([]personPart, error) {
	slices.SortFunc(parts, func(a, b personPart) int {
		return cmp.Or(cmp.Compare(a.person.Key, b.person.Key), cmp.Compare(a.idx, b.idx))
	})
	type missing struct {
		hash uint64
		id   string
		part int // index in parts of its part
	}
	var miss []missing
	a := &pj.missing
	w := int32(len(pj.workers))
	add := func(p *identity.Person, idx int32) {
		id := p.DistinctIDs[idx]
		miss = append(miss, missing{hash: UserHash(id), id: id, part: len(parts)})
		base := int32(len(a.user))
		for range nuser {
			a.user = append(a.user, trail.Value{})
			a.setAt = append(a.setAt, math.MinInt64)
			a.onceAt = append(a.onceAt, math.MaxInt64)
			a.opsFrom = append(a.opsFrom, 0)
			a.opsTo = append(a.opsTo, 0)
		}
		parts = append(parts, personPart{person: p, idx: idx, worker: w, user: base})
	}
	n := len(parts)
	for i := 0; i < n; {
		p := parts[i].person
		next := int32(0) // the next index of p.DistinctIDs not seen
		for ; i < n && parts[i].person == p; i++ {
			for ; next < parts[i].idx; next++ {
				add(p, next)
			}
			next = parts[i].idx + 1
		}
		for ; int(next) < len(p.DistinctIDs); next++ {
			add(p, next)
		}
	}
	if len(miss) == 0 {
		return parts, nil
	}
	slices.SortFunc(miss, func(x, y missing) int { return cmp.Or(cmp.Compare(x.hash, y.hash), strings.Compare(x.id, y.id)) })
	v := pj.v
	var refs []SegmentRef
	for _, ref := range v.Segments {
		if ref.Kind == KindUsers && ref.Rows > 0 {
			refs = append(refs, ref)
		}
	}
	slices.SortStableFunc(refs, func(x, y SegmentRef) int { return cmp.Compare(x.SeqMax, y.SeqMax) }) // arrival order
	var keys, blk segment.Block
	// The writes met, tagged with their user value's index in a.user,
	// ranked in arrival order (refs are, a block's rows too).
	type ownedWrite struct {
		at int32
		w  userfold.Write[ubits]
	}
	var owned []ownedWrite
	var rank int64
	var once []trail.Value // without pj.ops: the earliest set-once values, beside a.user
	if !pj.ops {
		once = make([]trail.Value, len(a.user))
	}
	shards := v.Shards
	for _, ref := range refs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// The missing ids of this segment's shard and hash range.
		lo, _ := slices.BinarySearchFunc(miss, ref.FirstHash, func(m missing, h uint64) int { return cmp.Compare(m.hash, h) })
		hi := len(miss)
		if ref.LastHash != 0 || ref.FirstHash != 0 {
			hi, _ = slices.BinarySearchFunc(miss, ref.LastHash+1, func(m missing, h uint64) int { return cmp.Compare(m.hash, h) })
			if ref.LastHash == math.MaxUint64 {
				hi = len(miss)
			}
		}
		if lo >= hi {
			continue
		}
		r, err := v.Reader(ref)
		if err != nil {
			return nil, err
		}
		m := r.Meta()
		var plan *UserSegmentPlan
		codes := [...]int{slices.Index(m.EventNames, SetOnceEvent), slices.Index(m.EventNames, UnsetEvent),
			slices.Index(m.EventNames, AddEvent), slices.Index(m.EventNames, DeleteEvent)}
		for bi := range m.Blocks {
			bm := &m.Blocks[bi]
			k, _ := slices.BinarySearchFunc(miss[lo:hi], bm.FirstHash, func(x missing, h uint64) int { return cmp.Compare(x.hash, h) })
			k += lo
			found := false
			for j := k; j < hi && miss[j].hash <= bm.LastHash; j++ {
				if ShardOfHash(miss[j].hash, shards) == ref.Shard {
					found = true
					break
				}
			}
			if !found {
				continue
			}
			if err := r.ReadBlock(bi, nil, &keys); err != nil {
				return nil, err
			}
			decoded := false
			for j := k; j < hi && miss[j].hash <= bm.LastHash; j++ {
				x := &miss[j]
				if ShardOfHash(x.hash, shards) != ref.Shard {
					continue
				}
				users := len(keys.UserStarts) - 1
				u := sort.Search(users, func(u int) bool {
					h := blockHash(&keys, u)
					return h > x.hash || h == x.hash && string(keys.UserID(u)) >= x.id
				})
				if u == users || blockHash(&keys, u) != x.hash || string(keys.UserID(u)) != x.id {
					continue
				}
				if !decoded {
					if plan == nil {
						if plan, err = pj.spec.CompileUsers(ref, m); err != nil {
							return nil, err
						}
					}
					if err := r.ReadBlock(bi, plan.Props, &blk); err != nil {
						return nil, err
					}
					decoded = true
				}
				base := int(parts[x.part].user)
				from, to := int(blk.UserStarts[u]), int(blk.UserStarts[u+1])
				for c, src := range plan.Cols {
					if c >= nuser {
						continue
					}
					var pd *segment.PropData
					if src.Prop >= 0 {
						pd = &blk.Props[src.Prop]
					}
					if !pj.ops {
						if pd == nil {
							continue
						}
						for row := from; row < to; row++ {
							if pd.Present[row>>6]>>(row&63)&1 == 0 {
								continue
							}
							val := trail.Value{Set: true, Bits: columnBits(pd, src, row)}
							t := blk.Times[row]
							if codes[0] >= 0 && int(blk.Events[row]) == codes[0] {
								if t < a.onceAt[base+c] {
									a.onceAt[base+c], once[base+c] = t, val
								}
							} else if t >= a.setAt[base+c] {
								a.setAt[base+c], a.user[base+c] = t, val
							}
						}
						continue
					}
					for row := from; row < to; row++ {
						w := userfold.Write[ubits]{Time: blk.Times[row], Rank: rank + int64(row-from)}
						code := int(blk.Events[row])
						if code == codes[3] {
							w.Op = userfold.Delete
						} else if pd == nil || pd.Present[row>>6]>>(row&63)&1 == 0 {
							continue
						} else {
							w.Op = userfold.Set
							if k := slices.Index(codes[:3], code); k >= 0 {
								w.Op = [...]userfold.Op{userfold.SetOnce, userfold.Unset, userfold.Add}[k]
							}
							w.Value = ubits{bits: columnBits(pd, src, row), kind: src.Kind}
						}
						owned = append(owned, ownedWrite{at: int32(base + c), w: w})
					}
				}
				rank += int64(to - from)
			}
		}
	}
	if !pj.ops {
		// As the scan (userValues, finishUserValues): a set wins; else the
		// earliest set-once.
		for i, val := range a.user {
			if val.Set {
				a.onceAt[i] = math.MaxInt64
			} else if once[i].Set {
				a.user[i] = once[i]
			}
		}
		return parts, nil
	}
	// Each user value's writes, contiguous; its own value (the id's fold).
	slices.SortStableFunc(owned, func(x, y ownedWrite) int { return cmp.Compare(x.at, y.at) })
	for i := 0; i < len(owned); {
		k := i
		at := owned[i].at
		a.opsFrom[at] = int32(len(a.ops))
		for ; k < len(owned) && owned[k].at == at; k++ {
			a.ops = append(a.ops, owned[k].w)
		}
		a.opsTo[at] = int32(len(a.ops))
		v, set := userfold.Fold(a.ops[a.opsFrom[at]:a.opsTo[at]], addBits)
		a.user[at] = trail.Value{Set: set, Bits: v.bits}
		i = k
	}
	return parts, nil
}

// personMerge holds the buffers of one worker's merged trails.
type personMerge struct {
	arenas []*partArena
	nuser  int // user values per trail
	ncols  int // columns per trail
	t      trail.Trail
	chunk  trail.Trail
	heads  []int32                 // per part: its next row
	uops   []userfold.Write[ubits] // foldUserValues' scratch
	ops    bool                    // personJoin.ops
}

// visit merges one person's parts (sorted by distinct id) into one trail
// ordered by (time, distinct id, position in the part) — an order that
// depends on neither the arrival of the operations nor the shards — and
// visits it in chunks that never split a group of equal times.
func (m *personMerge) visit(v Visitor, parts []personPart, chunkEvents int) {
	p := parts[0].person
	t := &m.t
	ncols := m.ncols
	n := 0
	for _, pt := range parts {
		n += int(pt.end - pt.start)
	}
	t.Times, t.Mask = slices.Grow(t.Times[:0], n), slices.Grow(t.Mask[:0], n)
	if len(t.Cols) != ncols {
		t.Cols = make([]trail.Column, ncols)
	}
	for k := range t.Cols {
		t.Cols[k].Set, t.Cols[k].Bits = t.Cols[k].Set[:0], t.Cols[k].Bits[:0]
	}
	if len(parts) > maxLinearParts {
		m.sortMerge(parts, n)
	} else {
		m.linearMerge(parts, n)
	}
	t.User = m.foldUserValues(t.User[:0], parts)
	t.ID = []byte(p.ID)
	key := UserKey{Hash: UserHash(p.ID), ID: t.ID}
	if n <= chunkEvents {
		t.Offset, t.More = 0, false
		v.Visit(key, t)
		return
	}
	if pv, ok := v.(PrepassVisitor); ok {
		m.chunks(key, chunkEvents, pv.Prepass)
	}
	m.chunks(key, chunkEvents, v.Visit)
}

// maxLinearParts is the most parts linearMerge merges; beyond, the cost
// of its scan of every part per row passes sortMerge's.
const maxLinearParts = 16

// linearMerge appends the n rows of parts to m.t in merge order, taking
// each row from the part whose next row is earliest (ties to the smaller
// distinct id: parts are sorted by it).
func (m *personMerge) linearMerge(parts []personPart, n int) {
	m.heads = m.heads[:0]
	for _, pt := range parts {
		m.heads = append(m.heads, pt.start)
	}
	for range n {
		// The part whose next row is earliest; ties to the smaller distinct
		// id (parts are sorted by it). Persons have few parts.
		best := -1
		var bt int64
		for i, pt := range parts {
			if h := m.heads[i]; h < pt.end {
				if tm := m.arenas[pt.worker].times[h]; best < 0 || tm < bt {
					best, bt = i, tm
				}
			}
		}
		m.heads[best]++
		m.appendRow(m.arenas[parts[best].worker], m.heads[best]-1)
	}
}

// sortMerge is linearMerge for many parts: a stable sort by time of the
// rows in part order.
func (m *personMerge) sortMerge(parts []personPart, n int) {
	type row struct {
		time int64
		part int32
		r    int32
	}
	rows := make([]row, 0, n)
	for i, pt := range parts {
		a := m.arenas[pt.worker]
		for r := pt.start; r < pt.end; r++ {
			rows = append(rows, row{a.times[r], int32(i), r})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.time, b.time) })
	for _, x := range rows {
		m.appendRow(m.arenas[parts[x.part].worker], x.r)
	}
}

// appendRow appends row r of arena a to m.t.
func (m *personMerge) appendRow(a *partArena, r int32) {
	t := &m.t
	t.Times = append(t.Times, a.times[r])
	t.Mask = append(t.Mask, a.mask[r])
	for k := range t.Cols {
		t.Cols[k].Set = append(t.Cols[k].Set, a.cols[k].Set[r])
		t.Cols[k].Bits = append(t.Cols[k].Bits, a.cols[k].Bits[r])
	}
}

// chunks calls visit with the chunks of m.t.
func (m *personMerge) chunks(key UserKey, limit int, visit func(UserKey, *trail.Trail)) {
	t, c := &m.t, &m.chunk
	if len(c.Cols) != len(t.Cols) {
		c.Cols = make([]trail.Column, len(t.Cols))
	}
	c.User, c.ID = t.User, t.ID
	n := len(t.Times)
	for i := 0; i < n; {
		j := chunkEnd(t.Times, i, limit)
		c.Times, c.Mask = t.Times[i:j:j], t.Mask[i:j:j]
		for k := range t.Cols {
			c.Cols[k] = trail.Column{Set: t.Cols[k].Set[i:j:j], Bits: t.Cols[k].Bits[i:j:j]}
		}
		c.Offset, c.More = i, j < n
		visit(key, c)
		i = j
	}
}

// foldUserValues returns the person's user values from its parts'
// (sorted by distinct id; docs/identity.md §3: a fold over the writes of all of
// its ids): per property the writes of every part in (time, distinct id,
// arrival) order, folded (internal/userfold). Writes of two distinct ids
// at one instant apply in the order of the ids, so the set of the
// greater distinct id wins and the set-once of the smaller
// (docs/decisions.md): an order that depends neither on where the parts
// are stored nor on the arrival of the operations. (A value's bits
// cannot decide: a string's are a query-wide id given in the order the
// scan meets the strings.)
func (m *personMerge) foldUserValues(dst []trail.Value, parts []personPart) []trail.Value {
	if !m.ops {
		return m.foldLatest(dst, parts)
	}
	for k := range m.nuser {
		ws := m.uops[:0]
		for _, pt := range parts {
			a, r := m.arenas[pt.worker], int(pt.user)+k
			for _, w := range a.ops[a.opsFrom[r]:a.opsTo[r]] {
				w.Rank |= int64(pt.idx) << personRankShift
				ws = append(ws, w)
			}
		}
		v, set := userfold.Fold(ws, addBits)
		dst = append(dst, trail.Value{Set: set, Bits: v.bits})
		m.uops = ws
	}
	return dst
}

// foldLatest is foldUserValues for a version without unset, add or
// delete writes (personJoin.ops false), from each part's latest set and
// earliest set-once (the same answer, without sorting writes): per
// property the latest set across the parts, else the earliest set-once;
// at one instant the set of the greater distinct id wins, the set-once of
// the smaller.
func (m *personMerge) foldLatest(dst []trail.Value, parts []personPart) []trail.Value {
	for k := range m.nuser {
		var best, once trail.Value
		bestAt, onceAt := int64(math.MinInt64), int64(math.MaxInt64)
		for _, pt := range parts {
			a, r := m.arenas[pt.worker], int(pt.user)+k
			v := a.user[r]
			if !v.Set {
				continue
			}
			switch {
			case a.setAt[r] != math.MinInt64 || a.onceAt[r] == math.MaxInt64:
				if !best.Set || a.setAt[r] >= bestAt {
					best, bestAt = v, a.setAt[r]
				}
			case a.onceAt[r] < onceAt:
				once, onceAt = v, a.onceAt[r]
			}
		}
		if !best.Set {
			best = once
		}
		dst = append(dst, best)
	}
	return dst
}

// personRankShift places a write's distinct id (its index in the
// person's ids) above its arrival rank within the id in the person
// fold's rank: ids have fewer than 2^40 writes.
const personRankShift = 40
