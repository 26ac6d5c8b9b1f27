package storage

// The scan over persons (docs/persons.md): events are stored by distinct
// id, so the trail of a person with several distinct ids has parts in
// several places, possibly several shards. When the version's id graph
// joins some ids (identity.Snapshot.Joined), each scan worker's visitor
// is wrapped: the trail of a distinct id that belongs to a joined person
// is copied aside instead of visited; every other trail passes through
// untouched (one radix-tree lookup per trail, none per event). Once
// every shard is scanned, the parts are grouped by person, merged into
// one trail per person and visited, in parallel, by the same visitors, with
// the person id as the trail's id. An app that never applied an identity
// operation pays nothing.

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"

	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/trail"
)

// personPart is the trail of one distinct id of a joined person, copied.
type personPart struct {
	person *identity.Person
	id     string
	times  []int64
	mask   []uint64
	cols   []trail.Column
	// user values of the distinct id, and when each was written: setAt
	// for a SetEvent write (math.MinInt64: none, or unknown), onceAt for
	// the value of a SetOnceEvent write (math.MaxInt64: none).
	user          []trail.Value
	setAt, onceAt []int64
}

// joinVisitor wraps one scan worker's visitor (see the file comment).
type joinVisitor struct {
	inner Visitor
	// passEmpty: the scan's visitors asked for users without passing
	// rows (ScanSpec.AllUsers); else such trails, visited only for their
	// user values (personJoin.prepare), are dropped.
	passEmpty bool
	snap      *identity.Snapshot
	sc        *shardScanner // the worker's scanner: the user values' write times
	grow      func(int64) error
	parts     []personPart
	cur       *personPart // the part receiving the current user's chunks; nil: pass through
	err       error       // the first refusal of grow
}

// joinPrepassVisitor is a joinVisitor whose inner visitor is a
// PrepassVisitor.
type joinPrepassVisitor struct{ *joinVisitor }

func (j joinPrepassVisitor) Prepass(u UserKey, t *trail.Trail) {
	if j.person(u.ID) != nil {
		return // every chunk: visited whole once joined
	}
	j.inner.(PrepassVisitor).Prepass(u, t)
}

// person returns the joined person distinct id belongs to, nil when it is
// a person of its own.
func (j *joinVisitor) person(id []byte) *identity.Person {
	p := j.snap.Lookup(id)
	if p == nil || len(p.DistinctIDs) < 2 {
		return nil
	}
	return p
}

// Visit passes the trail through, or copies it into a part.
func (j *joinVisitor) Visit(u UserKey, t *trail.Trail) {
	if t.Offset == 0 {
		j.cur = nil
		if p := j.person(u.ID); p != nil {
			j.parts = append(j.parts, personPart{person: p, id: string(u.ID)})
			j.cur = &j.parts[len(j.parts)-1]
			j.userValues(j.cur, t)
		} else if len(t.Times) == 0 && !j.passEmpty {
			return
		}
	}
	pt := j.cur
	if pt == nil {
		j.inner.Visit(u, t)
		return
	}
	before := partBytes(pt)
	pt.times = append(pt.times, t.Times...)
	pt.mask = append(pt.mask, t.Mask[:len(t.Times)]...)
	if len(pt.cols) != len(t.Cols) {
		pt.cols = make([]trail.Column, len(t.Cols))
	}
	for k, c := range t.Cols {
		pt.cols[k].Set = append(pt.cols[k].Set, c.Set...)
		pt.cols[k].Bits = append(pt.cols[k].Bits, c.Bits...)
	}
	if j.grow != nil && j.err == nil {
		j.err = j.grow(partBytes(pt) - before)
	}
}

// userValues copies the user values of t and their write times.
func (j *joinVisitor) userValues(pt *personPart, t *trail.Trail) {
	if len(t.User) == 0 {
		return
	}
	sc := j.sc
	pt.user = slices.Clone(t.User)
	pt.setAt = make([]int64, len(t.User))
	pt.onceAt = make([]int64, len(t.User))
	for k := range t.User {
		pt.setAt[k], pt.onceAt[k] = math.MinInt64, math.MaxInt64
		if k < len(sc.ubest) && sc.ubest[k] != math.MinInt64 {
			pt.setAt[k] = sc.ubest[k]
		} else if t.User[k].Set && k < len(sc.uonceAt) {
			pt.onceAt[k] = sc.uonceAt[k]
		}
	}
}

// partBytes is the memory a part holds, bytes.
func partBytes(pt *personPart) int64 {
	n := int64(cap(pt.times))*8 + int64(cap(pt.mask))*8
	for _, c := range pt.cols {
		n += int64(cap(c.Set)) + int64(cap(c.Bits))*8
	}
	return n
}

// personJoin is the join of one scan.
type personJoin struct {
	snap      *identity.Snapshot
	workers   []*joinVisitor
	passEmpty bool // the scan's spec asked for ScanSpec.AllUsers
}

// prepare adjusts the scan's spec for the join: every trail's id is
// read (the join looks it up), and when the trails carry user values
// every user is visited (ScanSpec.AllUsers), also a distinct id without
// passing rows, whose writes still count in its person's values
// (identity.md §3: a fold over the writes of all of the person's ids);
// the join drops such trails of ids that are persons of their own, and
// persons without passing rows, unless the spec asked for all users.
func (pj *personJoin) prepare(spec *ScanSpec) {
	spec.NoIDs = false
	pj.passEmpty = spec.AllUsers
	if spec.UserProps > 0 {
		spec.AllUsers = true
	}
}

// newPersonJoin returns the join of a scan of a version whose graph is
// snap, or nil when it joins nothing.
func newPersonJoin(snap *identity.Snapshot) *personJoin {
	if snap == nil || !snap.Joined() {
		return nil
	}
	return &personJoin{snap: snap}
}

// wrap returns the scan's visitors wrapped, and the wrappers (whose sc
// each worker sets to its scanner).
func (pj *personJoin) wrap(vs []Visitor, grow func(int64) error) []Visitor {
	out := make([]Visitor, len(vs))
	for w, v := range vs {
		j := &joinVisitor{inner: v, snap: pj.snap, grow: grow, passEmpty: pj.passEmpty}
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
func (pj *personJoin) visit(ctx context.Context, chunkEvents int) error {
	var parts []personPart
	var held int64
	for _, j := range pj.workers {
		if j.err != nil {
			return j.err
		}
		parts = append(parts, j.parts...)
		j.parts, j.cur = nil, nil
	}
	for i := range parts {
		held += partBytes(&parts[i])
	}
	if g := pj.workers[0].grow; g != nil && held > 0 {
		defer g(-held) // the parts are garbage once visited
	}
	slices.SortFunc(parts, func(a, b personPart) int {
		return cmp.Or(cmp.Compare(a.person.Key, b.person.Key), cmp.Compare(a.id, b.id))
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
			m := personMerge{passEmpty: pj.passEmpty}
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

// personMerge holds the buffers of one worker's merged trails.
type personMerge struct {
	passEmpty bool // visit persons without events (personJoin.passEmpty)
	t         trail.Trail
	chunk     trail.Trail
	order     []int32 // event positions in the parts' concatenation, merged
	src       []int32 // the part of each concatenated event
	at        []int32 // its index in that part
}

// visit merges one person's parts (sorted by distinct id) into one trail
// ordered by (time, distinct id, position in the part) — an order that
// depends on neither the arrival of the operations nor the shards — and
// visits it in chunks that never split a group of equal times.
func (m *personMerge) visit(v Visitor, parts []personPart, chunkEvents int) {
	p := parts[0].person
	m.src, m.at, m.order = m.src[:0], m.at[:0], m.order[:0]
	for i := range parts {
		for k := range parts[i].times {
			m.order = append(m.order, int32(len(m.src)))
			m.src = append(m.src, int32(i))
			m.at = append(m.at, int32(k))
		}
	}
	slices.SortStableFunc(m.order, func(a, b int32) int {
		return cmp.Compare(parts[m.src[a]].times[m.at[a]], parts[m.src[b]].times[m.at[b]])
	})
	n := len(m.order)
	if n == 0 && !m.passEmpty {
		return // parts visited for their user values only
	}
	t := &m.t
	t.Times, t.Mask = slices.Grow(t.Times[:0], n), slices.Grow(t.Mask[:0], n)
	ncols := len(parts[0].cols)
	if len(t.Cols) != ncols {
		t.Cols = make([]trail.Column, ncols)
	}
	for k := range t.Cols {
		t.Cols[k].Set, t.Cols[k].Bits = t.Cols[k].Set[:0], t.Cols[k].Bits[:0]
	}
	for _, e := range m.order {
		pt, i := &parts[m.src[e]], m.at[e]
		t.Times = append(t.Times, pt.times[i])
		t.Mask = append(t.Mask, pt.mask[i])
		for k := range pt.cols {
			t.Cols[k].Set = append(t.Cols[k].Set, pt.cols[k].Set[i])
			t.Cols[k].Bits = append(t.Cols[k].Bits, pt.cols[k].Bits[i])
		}
	}
	t.User = foldUserValues(t.User[:0], parts)
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
// (sorted by distinct id; identity.md §3: a fold over the writes of all of
// its ids): per property the latest SetEvent write across the parts, else
// the earliest SetOnceEvent write. Writes of two distinct ids at one
// instant: the SetEvent write of the greater distinct id wins, the
// SetOnceEvent write of the smaller (docs/decisions.md): an order that
// depends neither on where the parts are stored nor on the arrival of
// the operations. (A value's bits cannot decide: a string's are a
// query-wide id given in the order the scan meets the strings.)
func foldUserValues(dst []trail.Value, parts []personPart) []trail.Value {
	nu := 0
	for i := range parts {
		nu = max(nu, len(parts[i].user))
	}
	for k := range nu {
		var best trail.Value
		bestAt, onceAt := int64(math.MinInt64), int64(math.MaxInt64)
		var once trail.Value
		for i := range parts {
			pt := &parts[i]
			if k >= len(pt.user) || !pt.user[k].Set {
				continue
			}
			v := pt.user[k]
			switch {
			case pt.setAt[k] != math.MinInt64 || pt.onceAt[k] == math.MaxInt64:
				at := pt.setAt[k]
				if !best.Set || at >= bestAt {
					best, bestAt = v, at
				}
			case pt.onceAt[k] < onceAt:
				once, onceAt = v, pt.onceAt[k]
			}
		}
		if !best.Set {
			best = once
		}
		dst = append(dst, best)
	}
	return dst
}
