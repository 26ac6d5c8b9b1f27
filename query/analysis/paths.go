package analysis

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"sort"

	"github.com/spurdb/spur/trail"
)

// Limits of a paths query.
const (
	MaxPathSteps = 20      // largest PathsSpec.Steps
	MaxPathItems = 1 << 29 // item ids must be below this (three fit an edge key)
)

// PathsSpec is a validated paths query for the kernel (docs/analytics.md §15, PostHog's
// paths). Items are dense ids the query layer assigns to event names and
// property values (equal rendered strings share an id).
type PathsSpec struct {
	// From, To (UTC µs): only events in [From, To) are path events.
	From, To int64
	// Include is the mask of the included events' matchers: an event with
	// any of these bits is a path event.
	Include uint64
	// Start and End are the masks of the start and end matchers (0: none).
	Start, End uint64
	// An event's name is its item unless the item property is set. With
	// NameBits, each name has a mask bit of its own (an included event has
	// exactly one of them) and BitItem[bit] is its item; without, NameCol
	// is the trail column holding each event's item as an event name
	// (always set). PropCol, if ≥ 0, is the column of the item property
	// (string value ids), whose value, when set, is the event's item
	// through PropItem.
	NameBits         uint64
	BitItem          [64]uint32
	NameCol, PropCol int
	PropItem         []uint32
	// Exclude[item], when true, drops the item's events (a nil or short
	// slice excludes nothing beyond its length).
	Exclude []bool
	// Ellipsis is the item id of the "..." node of truncated paths.
	Ellipsis uint32
	// SessionGap (µs, > 0): consecutive path events at least this far
	// apart belong to different sessions.
	SessionGap int64
	// Steps is the path length limit, 2..MaxPathSteps.
	Steps int
	// List, if not nil, selects the users of one edge.
	List *PathsList
	// Items, if set, names the items (item i as the Key {Bits: i, Set:
	// true}), so that an encoded state (AppendBinary) carries item names
	// rather than this query's ids and a decoder maps them into the
	// receiving query's ids; nil sends the ids. Read only to encode and
	// decode.
	Items KeyDict
}

// PathsList selects the users who took the edge from position Pos (1-based)
// item Source to position Pos+1 item Target. Keep is the number of ids
// kept.
type PathsList struct {
	Pos            int
	Source, Target uint32
	Keep           int
}

// PathEdge is one edge of the paths: from item Source at position Pos
// (1-based) to item Target at Pos+1, taken by Sessions path occurrences of
// Users distinct users, with Micros the sum over those occurrences of the
// time between the two events (µs).
type PathEdge struct {
	Pos            int
	Source, Target uint32
	Sessions       int64
	Users          int64
	Micros         int64
}

// PathsResult is the result of a Paths: every edge, ordered by position,
// source, target (the query layer filters and ranks them).
type PathsResult struct {
	Edges []PathEdge
	List  *UserList // the listed users (nil without a list); points into the accumulator
}

// pathNode is a path item with the time of its (last) event.
type pathNode struct {
	item uint32
	t    int64
}

// pathEdge is the mergeable state of one edge.
type pathEdge struct {
	key      uint64 // pos<<58 | source<<29 | target
	sessions int64
	users    int64
	micros   int64
}

// Paths accumulates path edges. Create it with NewPaths; it is owned by one
// goroutine. Add takes a user's trail in one or more chunks (package
// trail); between chunks it keeps the open session's state, at most
// 2·Steps nodes.
type Paths struct {
	spec PathsSpec
	pathsState
	bytes int64
	path  [MaxPathSteps]pathNode // scratch of a finished path

	// current user
	gens   []uint32 // [edge] user generation that last counted the edge's users
	gen    uint32
	listed bool
	// current session
	open    bool     // a path event was seen
	lastT   int64    // time of the last path event
	run     pathNode // the pending run of one item (its last event's time)
	runFl   uint64   // start/end bits seen in the run
	hasRun  bool
	started bool // the start item was committed (or there is no start)
	done    bool // the session's path is complete
	n       int  // items committed since the start
	prev    pathNode
	head    [MaxPathSteps]pathNode // the first Steps items (start and end)
	ring    [MaxPathSteps]pathNode // the last Steps items (end)
}

// pathsState is the mergeable state of a Paths: what Merge combines and
// AppendBinary writes (the current user's and session's state is
// scratch).
type pathsState struct {
	edges []pathEdge
	table slotTable // edge key → index
	list  UserList
}

// NewPaths validates spec and returns an empty accumulator. It copies
// spec.PropItem and spec.Exclude. Errors: empty range, no included bit,
// included bits without a name bit (with NameBits) or no name column,
// Steps outside [2, MaxPathSteps], SessionGap ≤ 0, item ids out of range,
// a list out of range.
func NewPaths(spec PathsSpec) (*Paths, error) {
	if spec.From >= spec.To {
		return nil, fmt.Errorf("analysis: paths: empty range [%d, %d)", spec.From, spec.To)
	}
	if spec.Include == 0 {
		return nil, fmt.Errorf("analysis: paths: no included events")
	}
	if spec.NameBits != 0 && spec.Include&^spec.NameBits != 0 || spec.NameBits == 0 && spec.NameCol < 0 {
		return nil, fmt.Errorf("analysis: paths: included events without a name bit or a name column")
	}
	if spec.Steps < 2 || spec.Steps > MaxPathSteps {
		return nil, fmt.Errorf("analysis: paths: %d steps, want 2 to %d", spec.Steps, MaxPathSteps)
	}
	if spec.SessionGap <= 0 {
		return nil, fmt.Errorf("analysis: paths: session gap %dµs, want > 0", spec.SessionGap)
	}
	tooBig := func(i uint32) bool { return i >= MaxPathItems }
	if tooBig(spec.Ellipsis) || slices.ContainsFunc(spec.PropItem, tooBig) || slices.ContainsFunc(spec.BitItem[:], tooBig) {
		return nil, fmt.Errorf("analysis: paths: item ids must be below %d", MaxPathItems)
	}
	if l := spec.List; l != nil && (l.Pos < 1 || l.Pos >= spec.Steps || l.Source >= MaxPathItems || l.Target >= MaxPathItems || l.Keep < 0 || l.Keep > MaxListKeep) {
		return nil, fmt.Errorf("analysis: paths: list (position %d, keep %d) out of range", l.Pos, l.Keep)
	}
	spec.PropItem = slices.Clone(spec.PropItem)
	spec.Exclude = slices.Clone(spec.Exclude)
	p := &Paths{spec: spec}
	if spec.List != nil {
		p.list.Keep = spec.List.Keep
	}
	p.resetSession()
	return p, nil
}

// Add accumulates one chunk of a user's trail (package trail). The chunk
// is borrowed only for the call. Cost: O(log n) to find From, then O(1)
// per path event and O(Steps) per finished path; no allocation except new
// edges.
func (p *Paths) Add(tr *trail.Trail) {
	sp := &p.spec
	if len(tr.Cols) <= sp.NameCol || len(tr.Cols) <= sp.PropCol {
		panic("analysis: Paths.Add: trail lacks the item columns")
	}
	if tr.Offset == 0 {
		p.gen++
		if p.gen == 0 { // wrapped: forget every edge's last user
			clear(p.gens)
			p.gen = 1
		}
		p.listed = false
		p.resetSession()
	}
	times := tr.Times
	masks := tr.Mask[:len(times)]
	i := 0
	if len(times) > 0 && times[0] < sp.From {
		i = sort.Search(len(times), func(j int) bool { return times[j] >= sp.From })
	}
	var names []uint64
	if sp.NameBits == 0 {
		names = tr.Cols[sp.NameCol].Bits
	}
	var propSet []bool
	var propBits []uint64
	if sp.PropCol >= 0 {
		propSet, propBits = tr.Cols[sp.PropCol].Set, tr.Cols[sp.PropCol].Bits
	}
	marks := sp.Start | sp.End
	for ; i < len(times); i++ {
		t := times[i]
		if t >= sp.To {
			break
		}
		m := masks[i]
		if m&sp.Include == 0 {
			continue
		}
		var item uint32
		if names != nil {
			item = uint32(names[i])
		} else {
			item = sp.BitItem[bits.TrailingZeros64(m&sp.NameBits)]
		}
		if propSet != nil && propSet[i] {
			item = sp.PropItem[propBits[i]]
		}
		if int(item) < len(sp.Exclude) && sp.Exclude[item] {
			continue
		}
		if p.open && t-p.lastT >= sp.SessionGap {
			p.endSession(tr)
		}
		p.open, p.lastT = true, t
		if p.hasRun && p.run.item == item {
			p.run.t = t // repeats collapse into the last one
			p.runFl |= m & marks
			continue
		}
		if p.hasRun {
			p.commit(tr, p.run, p.runFl)
		}
		p.run, p.runFl, p.hasRun = pathNode{item: item, t: t}, m&marks, true
	}
	if !tr.More {
		p.endSession(tr)
	}
}

// resetSession forgets the open session.
func (p *Paths) resetSession() {
	p.open, p.hasRun, p.done, p.n = false, false, false, 0
	p.started = p.spec.Start == 0
}

// endSession commits the pending run and closes the session.
func (p *Paths) endSession(tr *trail.Trail) {
	if p.hasRun {
		p.commit(tr, p.run, p.runFl)
	}
	p.resetSession()
}

// commit adds a collapsed item to the session's path. Without an end
// matcher the path's edges are emitted as it grows; with one, the path is
// emitted when the end item arrives (docs/analytics.md §15).
func (p *Paths) commit(tr *trail.Trail, nd pathNode, fl uint64) {
	sp := &p.spec
	if p.done {
		return
	}
	if !p.started {
		if fl&sp.Start == 0 {
			return
		}
		p.started = true
	}
	steps := sp.Steps
	if sp.End == 0 {
		if p.n > 0 {
			p.edge(tr, p.n, p.prev, nd)
		}
		p.prev = nd
		p.n++
		p.done = p.n == steps
		return
	}
	if p.n < steps {
		p.head[p.n] = nd
	}
	p.ring[p.n%steps] = nd
	p.n++
	if fl&sp.End == 0 {
		return
	}
	p.done = true
	path := p.path[:0]
	switch {
	case sp.Start == 0: // end only: the last Steps items
		k := min(p.n, steps)
		for j := p.n - k; j < p.n; j++ {
			path = append(path, p.ring[j%steps])
		}
	case p.n <= steps:
		path = append(path, p.head[:p.n]...)
	default: // start and end, too long: first half, "...", last half
		h, k := steps/2, (steps-1)/2 // ⌈(steps−1)/2⌉ and ⌊(steps−1)/2⌋
		path = append(path, p.head[:h]...)
		path = append(path, pathNode{item: sp.Ellipsis, t: p.head[h].t})
		for j := p.n - k; j < p.n; j++ {
			path = append(path, p.ring[j%steps])
		}
	}
	for j := 1; j < len(path); j++ {
		p.edge(tr, j, path[j-1], path[j])
	}
}

// edge counts one occurrence of the edge from a at position pos to b.
func (p *Paths) edge(tr *trail.Trail, pos int, a, b pathNode) {
	ix := p.edgeAt(uint64(pos)<<58 | uint64(a.item)<<29 | uint64(b.item))
	e := &p.edges[ix]
	e.sessions++
	e.micros += b.t - a.t
	if p.gens[ix] != p.gen {
		p.gens[ix] = p.gen
		e.users++
	}
	if l := p.spec.List; l != nil && !p.listed && pos == l.Pos && a.item == l.Source && b.item == l.Target {
		p.list.Add(tr.ID)
		p.listed = true
	}
}

// edgeAt returns the index of the edge with key, creating it.
func (p *Paths) edgeAt(key uint64) int32 {
	k := Key{Bits: key, Set: true}
	ix, ok := p.table.get(k)
	if !ok {
		ix = int32(len(p.edges))
		before := cap(p.edges)
		p.edges = append(p.edges, pathEdge{key: key})
		p.gens = append(p.gens, 0)
		p.bytes += int64(cap(p.edges)-before) * 48 // with gens
		p.table.put(k, ix)
	}
	return ix
}

// Merge adds the edges of o, created from an equal spec (or decoded with
// DecodePaths), into p. o is not modified. A spec that differs is an
// error wrapping ErrState, and p is left unchanged.
func (p *Paths) Merge(o *Paths) error {
	if err := p.sameSpec(o); err != nil {
		return err
	}
	for _, oe := range o.edges {
		e := &p.edges[p.edgeAt(oe.key)]
		e.sessions += oe.sessions
		e.users += oe.users
		e.micros += oe.micros
	}
	return p.list.Merge(&o.list)
}

// Bytes returns the memory the accumulator holds (edges, their table,
// listed ids), for the query's budget.
func (p *Paths) Bytes() int64 { return p.bytes + p.table.bytes() + p.list.Bytes() }

// Result returns every edge in a newly allocated slice owned by the
// caller; p stays usable.
func (p *Paths) Result() PathsResult {
	res := PathsResult{Edges: make([]PathEdge, len(p.edges))}
	for i, e := range p.edges {
		res.Edges[i] = PathEdge{Pos: int(e.key >> 58), Source: uint32(e.key >> 29 & (MaxPathItems - 1)),
			Target: uint32(e.key & (MaxPathItems - 1)), Sessions: e.sessions, Users: e.users, Micros: e.micros}
	}
	slices.SortFunc(res.Edges, func(a, b PathEdge) int {
		return cmp.Or(cmp.Compare(a.Pos, b.Pos), cmp.Compare(a.Source, b.Source), cmp.Compare(a.Target, b.Target))
	})
	if p.spec.List != nil {
		res.List = &p.list
	}
	return res
}
