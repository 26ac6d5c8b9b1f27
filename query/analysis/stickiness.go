package analysis

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"

	"github.com/spurdb/spur/trail"
)

// MaxStickinessEvents bounds StickinessSpec.MinEvents.
const MaxStickinessEvents = 1 << 30

// StickinessSpec is a validated stickiness query for the kernel (docs/analytics.md §13,
// PostHog's stickiness): per series, the number of users who have at
// least MinEvents matching events in exactly n of the range's calendar
// buckets, n = 1..N.
type StickinessSpec struct {
	// Bounds are the calendar boundaries of the range's buckets (UTC µs,
	// strictly increasing, timebucket.Bounds(From, To, …)); N =
	// len(Bounds)-1 buckets, the first and last possibly extending past
	// the range.
	Bounds []int64
	// From, To (UTC µs): only events in [From, To) count, also in a first
	// or last bucket that extends past the range (docs/analytics.md §2).
	From, To int64
	// Series[i] is the trail mask bit of series i's matcher; bits are
	// distinct, 0..63.
	Series []int
	// MinEvents is the number of matching events (≥ 1) a bucket needs to
	// count for the user.
	MinEvents int
	// Breakdown is where a key comes from: an event's column (a user then
	// counts under each key with the buckets of that key's events only),
	// the user's property, or none.
	Breakdown KeySource
	// Group, if set, gives the key each breakdown key is counted under
	// (or drops its events; see KeyGroup), so that a second pass counts a
	// merged "(other)" exactly.
	Group *KeyGroup
	// List, if not nil, selects users to list.
	List *StickinessList
}

// StickinessList selects the users of one stickiness count: series Series
// (index into StickinessSpec.Series), users with exactly Intervals
// buckets (with AtLeast: Intervals or more, the cumulative count), counted
// under group key Key (the zero Key without a breakdown). Keep is the
// number of ids kept (offset + limit of the page).
type StickinessList struct {
	Series, Intervals int
	AtLeast           bool
	Key               Key
	Keep              int
}

// StickinessRow is the table of one series and breakdown key.
type StickinessRow struct {
	Series int // index into StickinessSpec.Series
	Key    Key
	// Counts[i] is the number of users with exactly i+1 active buckets,
	// i = 0..N-1 (not cumulative).
	Counts []int64
	Users  int64 // users with at least one active bucket: Σ Counts
}

// StickinessResult is the result of a Stickiness: rows by series, then by
// key (compareKeys). Without a breakdown each series has exactly one row
// (zero Key); with one, keys under which the series counted no user are
// left out.
type StickinessResult struct {
	Rows []StickinessRow
	List *UserList // the listed users (nil without a list), owned by the caller
}

// stickMark is the current user's state in one (group, series).
type stickMark struct {
	gen    uint32 // user generation that last touched the mark
	bucket int32  // bucket of cnt
	cnt    int32  // matching events in bucket, capped at MinEvents
	n      int32  // buckets that reached MinEvents
}

// stickState is the mergeable state of a Stickiness: what Merge combines
// and AppendBinary writes (the marks and the current user's words are
// scratch).
type stickState struct {
	groups keyGroups
	counts [][]int64 // per group: [series*nb + n-1]
	list   UserList
}

// Stickiness accumulates stickiness counts per series and breakdown key.
// Create it with NewStickiness; it is owned by one goroutine. Add takes a
// user's trail in one or more chunks (package trail); between chunks it
// keeps one mark per (group, series) the user touched.
type Stickiness struct {
	spec       StickinessSpec
	ns, nb     int
	seriesMask uint64
	bitSeries  [64]int8
	idx        bucketIndex
	stickState
	bytes int64

	// current user (scratch)
	marks   []stickMark // [group*ns + series]
	gen     uint32
	ug      int32   // the user's group (user or no breakdown)
	touched []int32 // group*ns+series marks the user touched
}

// NewStickiness validates spec and returns an empty accumulator. It copies
// spec.Bounds and spec.Series. Errors: empty range, boundaries not
// increasing or not covering [From, To), no series or duplicate or
// out-of-range bits, MinEvents outside [1, MaxStickinessEvents], a list
// out of range.
func NewStickiness(spec StickinessSpec) (*Stickiness, error) {
	if err := checkBounds("stickiness", spec.Bounds, spec.From, spec.To); err != nil {
		return nil, err
	}
	if len(spec.Series) == 0 || len(spec.Series) > 64 {
		return nil, fmt.Errorf("analysis: stickiness: %d series, want 1 to 64", len(spec.Series))
	}
	if spec.MinEvents < 1 || spec.MinEvents > MaxStickinessEvents {
		return nil, fmt.Errorf("analysis: stickiness: min events %d, want 1 to %d", spec.MinEvents, MaxStickinessEvents)
	}
	s := &Stickiness{ns: len(spec.Series), nb: len(spec.Bounds) - 1}
	for i, b := range spec.Series {
		if b < 0 || b > 63 || s.seriesMask&(1<<b) != 0 {
			return nil, fmt.Errorf("analysis: stickiness: series %d: bit %d out of range or shared", i, b)
		}
		s.seriesMask |= 1 << b
		s.bitSeries[b] = int8(i)
	}
	if l := spec.List; l != nil && (l.Series < 0 || l.Series >= s.ns || l.Intervals < 1 || l.Intervals > s.nb || l.Keep < 0 || l.Keep > MaxListKeep) {
		return nil, fmt.Errorf("analysis: stickiness: list (series %d, %d intervals, keep %d) out of range", l.Series, l.Intervals, l.Keep)
	}
	spec.Bounds = slices.Clone(spec.Bounds)
	spec.Series = slices.Clone(spec.Series)
	s.spec = spec
	s.idx = newBucketIndex(spec.Bounds)
	s.groups.group = newKeyGrouper(spec.Group)
	if spec.List != nil {
		s.list.Keep = spec.List.Keep
	}
	if spec.Breakdown.From == KeyNone && spec.Group == nil {
		s.group(Key{})
	}
	return s, nil
}

// group returns the group of raw key k (-1: dropped), creating its state.
func (s *Stickiness) group(k Key) int32 {
	g := s.groups.of(k)
	if g >= 0 {
		s.ensure(g)
	}
	return g
}

// ensure creates the state of group g if it is new.
func (s *Stickiness) ensure(g int32) {
	if int(g) == len(s.counts) {
		s.counts = append(s.counts, make([]int64, s.ns*s.nb))
		s.marks = append(s.marks, make([]stickMark, s.ns)...)
		s.bytes += int64(s.ns*s.nb)*8 + int64(s.ns)*16 + 24
	}
}

// Add accumulates one chunk of a user's trail (package trail: a user's
// chunks come one after the other, the first with Offset 0, the last
// with More false). The chunk is borrowed only for the call. Cost:
// O(log n) to find From, then O(matching events × their series); no
// allocation except new breakdown groups and the growth of the user's
// touched marks.
func (s *Stickiness) Add(tr *trail.Trail) {
	if !s.spec.Breakdown.check(tr) {
		panic("analysis: Stickiness.Add: trail lacks the breakdown column")
	}
	if tr.Offset == 0 {
		s.beginUser(tr)
	}
	times := tr.Times
	masks := tr.Mask[:len(times)]
	from, to := s.spec.From, s.spec.To
	i := 0
	if len(times) > 0 && times[0] < from {
		i = sort.Search(len(times), func(j int) bool { return times[j] >= from })
	}
	perEvent := s.spec.Breakdown.From == KeyEvent
	g := s.ug
	if !perEvent && g < 0 {
		i = len(times) // the group function dropped the user's key
	}
	ns, gen, minEv, all := int32(s.ns), s.gen, int32(s.spec.MinEvents), s.seriesMask
	b, next := int32(0), int64(minTime)
	var reached uint64 // series whose bucket b counts (one group only)
	for ; i < len(times); i++ {
		t := times[i]
		if t >= to {
			break
		}
		m := masks[i] & all
		if m == 0 {
			continue
		}
		if t >= next {
			b = int32(s.idx.of(t))
			next = s.spec.Bounds[b+1]
			reached = 0
		}
		if perEvent {
			if g = s.group(s.spec.Breakdown.event(tr, i)); g < 0 {
				continue
			}
		}
		for ; m != 0; m &= m - 1 {
			bit := bits.TrailingZeros64(m)
			ix := g*ns + int32(s.bitSeries[bit])
			mk := &s.marks[ix]
			if mk.gen != gen {
				*mk = stickMark{gen: gen, bucket: -1}
				s.touched = append(s.touched, ix)
			}
			if mk.bucket != b {
				mk.bucket, mk.cnt = b, 0
			}
			if mk.cnt < minEv {
				mk.cnt++
				if mk.cnt == minEv {
					mk.n++
				}
			}
			if mk.cnt == minEv {
				reached |= 1 << bit
			}
		}
		if reached == all && !perEvent {
			// Every series counts bucket b: its other events change
			// nothing.
			i = skipBelow(times, i, next) - 1
		}
	}
	if !tr.More {
		s.endUser(tr)
	}
}

// minTime is the smallest instant.
const minTime = -1 << 63

// beginUser starts a new user: a new mark generation and the user's
// group.
func (s *Stickiness) beginUser(tr *trail.Trail) {
	s.gen++
	if s.gen == 0 { // wrapped: reset every mark
		clear(s.marks)
		s.gen = 1
	}
	s.touched = s.touched[:0]
	switch s.spec.Breakdown.From {
	case KeyUser:
		s.ug = s.group(s.spec.Breakdown.user(tr))
	case KeyNone:
		s.ug = s.group(Key{})
	}
}

// endUser counts the user under every (group, series) they touched.
func (s *Stickiness) endUser(tr *trail.Trail) {
	l := s.spec.List
	listed := false
	for _, ix := range s.touched {
		mk := &s.marks[ix]
		if mk.n == 0 {
			continue
		}
		g, si := int(ix)/s.ns, int(ix)%s.ns
		s.counts[g][si*s.nb+int(mk.n)-1]++
		if l != nil && !listed && si == l.Series && s.groups.keys[g] == l.Key &&
			(int(mk.n) == l.Intervals || (l.AtLeast && int(mk.n) > l.Intervals)) {
			s.list.Add(tr.ID)
			listed = true
		}
	}
	s.touched = s.touched[:0]
}

// Merge adds the counts of o, created from an equal spec (or decoded with
// DecodeStickiness), into s. o is not modified. A spec that differs is an
// error wrapping ErrState, and s is left unchanged.
func (s *Stickiness) Merge(o *Stickiness) error {
	if err := s.sameSpec(o); err != nil {
		return err
	}
	for og, k := range o.groups.keys {
		g := s.groups.add(k)
		s.ensure(g)
		for i, v := range o.counts[og] {
			s.counts[g][i] += v
		}
	}
	return s.list.Merge(&o.list)
}

// Bytes returns the memory the accumulator holds (counts, marks, group
// tables, listed ids, the user's touched marks), for the query's budget.
func (s *Stickiness) Bytes() int64 {
	return s.bytes + s.groups.bytes() + int64(cap(s.touched))*4 + s.list.Bytes()
}

// Result returns the rows in newly allocated slices owned by the caller;
// s stays usable.
func (s *Stickiness) Result() StickinessResult {
	var res StickinessResult
	order := s.groups.sorted()
	for si := range s.ns {
		for _, g := range order {
			row := StickinessRow{Series: si, Key: s.groups.keys[g], Counts: slices.Clone(s.counts[g][si*s.nb : (si+1)*s.nb])}
			for _, c := range row.Counts {
				row.Users += c
			}
			if row.Users == 0 && s.spec.Breakdown.From != KeyNone {
				continue
			}
			res.Rows = append(res.Rows, row)
		}
	}
	if s.spec.List != nil {
		res.List = &s.list
	}
	return res
}
