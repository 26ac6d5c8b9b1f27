package analysis

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/spurdb/spur/trail"
)

// MaxRetentionPeriods bounds RetentionSpec.Periods (a sanity limit: ten
// years of days).
const MaxRetentionPeriods = 3660

// RetentionSpec is a validated retention query for the kernel (docs/analytics.md §6).
// Trail bit 0 is the start matcher A, bit 1 the return matcher B.
type RetentionSpec struct {
	// Bounds are calendar boundaries (UTC µs, strictly increasing) in the
	// query's time zone: those covering [From, To) (the cohort buckets),
	// extended by Periods more, i.e.
	// timebucket.Extend(timebucket.Bounds(From, To, …), Periods, …). The
	// cohort buckets are the C buckets that start before To.
	Bounds []int64
	// Periods is N ≥ 1: cells k = 0..N-1 per cohort (cell 0 = size).
	Periods   int
	Type      RetentionType
	Windows   RetentionWindows
	Criterion RetentionCriterion
	// Period is the rolling period length |P| in µs (timebucket
	// Interval.Rolling); required > 0 when Windows is rolling, ignored
	// otherwise.
	Period int64
	// From, To (UTC µs): the range for cohort entry.
	From, To int64
	// Breakdown is where an entry's key comes from: KeyEvent reads the
	// column on the entry's start event, KeyUser the user's property.
	Breakdown KeySource
	// List, if not nil, selects a cell whose users are listed.
	List *RetentionList
}

// RetentionList selects the users of one cell: cohort bucket Cohort
// (0-based index into the cohort buckets) retained at period Period (0:
// every entry of the cohort). Keep is the number of ids kept per group
// (offset + limit of the page).
type RetentionList struct {
	Cohort, Period, Keep int
}

// RetentionCohort is one cohort row of a RetentionResult.
type RetentionCohort struct {
	Start int64 // UTC µs, the cohort bucket's calendar start (may be < From)
	Size  int64 // cohort entries (users; recurring: users with an entry in this bucket)
	// Retained[k] is the number of entries retained at period k,
	// k = 0..N-1; Retained[0] = Size.
	Retained []int64
}

// RetentionGroup is the table of one breakdown key: one row per cohort
// bucket in time order, including empty ones.
type RetentionGroup struct {
	Key     Key
	Cohorts []RetentionCohort
	// List holds the users of the listed cell in this group (nil without
	// a list); a merged copy owned by the caller.
	List *UserList
}

// RetentionResult is the result of a Retention: the groups by Key
// (without a breakdown exactly one, with the zero Key; with one, the keys
// that have entries). Incompleteness flags and the mean row are the query
// layer's (see Mean).
type RetentionResult struct {
	Groups []RetentionGroup
}

// retGroup is the state of one breakdown key.
type retGroup struct {
	key      Key
	sizes    []int64
	retained []int64 // retained[c*n+k]
	list     UserList
}

// Retention accumulates a retention table per breakdown key. Create it
// with NewRetention; it is owned by one goroutine.
type Retention struct {
	spec RetentionSpec
	n    int // periods
	nc   int // cohort buckets
	nb   int // buckets in spec.Bounds
	retentionState
	idx   bucketIndex // over spec.Bounds
	bytes int64
	// the current user's state between the chunks of their trail: their
	// entries (at most one per cohort bucket) and a few words
	entries []retEntry
	u       retUser
	bbuf    []int32 // per-chunk scratch: calendar return buckets
	// firstOn: first_time with criterion on and no list, where a whole
	// trail takes addFirstOn
	firstOn bool
}

// retentionState is the mergeable state of a Retention: what Merge
// combines and AppendBinary writes. The current user's entries and words
// (entries, u, bbuf) are its scratch, apart.
type retentionState struct {
	groups []retGroup
	table  slotTable // key → index in groups
}

// retEntry is one cohort entry of the current user.
type retEntry struct {
	c     int32 // cohort bucket
	g     int32 // group
	i     int   // index of the start event in the user's whole trail
	tms   int64 // start time
	lastK int32 // rolling on: the last period counted (0: none)
	hit   bool  // on: retained at the listed period
}

// retEntrySize is the size of a retEntry in bytes.
const retEntrySize = 32

// retUser is the current user's state between chunks, besides entries.
type retUser struct {
	found   bool  // first_time: the user's first start event was seen
	c       int   // recurring: bucket of the last entry (-1: none yet)
	next    int64 // recurring: end of bucket c
	ug      int32 // the group of the user's key (-1: not looked up yet)
	act     int   // on: entries[:act] can count no later return event
	retNext int64 // calendar on: end of the last return bucket counted
	last    int64 // on_or_after: time of the latest return event (if hasLast)
	hasLast bool
}

// NewRetention validates spec and returns an empty accumulator. It copies
// spec.Bounds. Errors: empty range, boundaries not increasing or not
// covering [From, To), Periods outside [1, MaxRetentionPeriods], calendar
// boundaries not extended by Periods-1 buckets after the cohort buckets,
// unknown type/windows/criterion, rolling Period ≤ 0, a list cell out of
// range.
func NewRetention(spec RetentionSpec) (*Retention, error) {
	if err := checkBounds("retention", spec.Bounds, spec.From, spec.To); err != nil {
		return nil, err
	}
	if spec.Periods < 1 || spec.Periods > MaxRetentionPeriods {
		return nil, fmt.Errorf("analysis: retention: %d periods, want 1 to %d", spec.Periods, MaxRetentionPeriods)
	}
	if spec.Type > TypeRecurring || spec.Windows > WindowsRolling || spec.Criterion > CriterionOnOrAfter {
		return nil, fmt.Errorf("analysis: retention: invalid type %v, windows %v or criterion %v", spec.Type, spec.Windows, spec.Criterion)
	}
	if spec.Windows == WindowsRolling && spec.Period <= 0 {
		return nil, fmt.Errorf("analysis: retention: rolling period %dµs, want > 0", spec.Period)
	}
	nb := len(spec.Bounds) - 1
	nc := sort.Search(nb, func(b int) bool { return spec.Bounds[b] >= spec.To })
	if spec.Windows == WindowsCalendar && nb < nc+spec.Periods-1 {
		return nil, fmt.Errorf("analysis: retention: %d buckets for %d cohorts and %d periods, want bounds extended by the periods", nb, nc, spec.Periods)
	}
	if l := spec.List; l != nil && (l.Cohort < 0 || l.Cohort >= nc || l.Period < 0 || l.Period >= spec.Periods || l.Keep < 0 || l.Keep > MaxListKeep) {
		return nil, fmt.Errorf("analysis: retention: list cell (%d, %d) or keep %d out of range", l.Cohort, l.Period, l.Keep)
	}
	spec.Bounds = append([]int64(nil), spec.Bounds...)
	r := &Retention{spec: spec, n: spec.Periods, nc: nc, nb: nb, idx: newBucketIndex(spec.Bounds)}
	r.firstOn = spec.Type == TypeFirstTime && spec.Criterion == CriterionOn && spec.List == nil
	if spec.Breakdown.From == KeyNone {
		r.group(Key{})
	}
	return r, nil
}

// group returns the group of key k, creating it.
func (r *Retention) group(k Key) int32 {
	if g, ok := r.table.get(k); ok {
		return g
	}
	g := int32(len(r.groups))
	r.groups = append(r.groups, retGroup{key: k, sizes: make([]int64, r.nc), retained: make([]int64, r.nc*r.n)})
	if r.spec.List != nil {
		r.groups[g].list.Keep = r.spec.List.Keep
	}
	r.table.put(k, g)
	r.bytes += int64(r.nc*(r.n+1))*8 + 96
	return g
}

// bucketOf returns the bucket index of t ≥ Bounds[0] (nb at or after
// the last boundary).
func (r *Retention) bucketOf(t int64) int { return r.idx.of(t) }

// Add accumulates one chunk of a user's trail (package trail: a user's
// chunks come one after the other, the first with Offset 0, all but the
// last with More). For first_time the trail must hold the user's start
// events from all stored data before To (the earliest one decides the
// cohort), and return events up to the end of the last period. Entries
// are counted as their start events come; a return event is counted
// against the entries before it, and on_or_after periods and the list
// are settled after the last chunk. Between chunks the accumulator keeps
// the user's entries (at most one per cohort bucket) and a few words.
// The trail is borrowed only for the call. Cost: O(events + entries ×
// Periods); no allocation once the scratch has grown to the user's number
// of entries.
func (r *Retention) Add(tr *trail.Trail) {
	times := tr.Times
	masks := tr.Mask[:len(times)]
	if r.firstOn && tr.Offset == 0 && !tr.More {
		r.addFirstOn(tr, times, masks)
		return
	}
	if tr.Offset == 0 { // a new user
		r.entries = r.entries[:0]
		r.u = retUser{c: -1, ug: -1, retNext: math.MinInt64}
	}
	had := len(r.entries)
	r.findEntries(times, masks, tr.Offset)
	if len(r.entries) == 0 {
		return
	}
	if len(r.entries) > had {
		r.enter(tr, r.entries[had:])
	}
	// Return events before the user's first entry count for nothing.
	j0 := 0
	if had == 0 {
		j0 = r.entries[0].i - tr.Offset
	}
	switch {
	case r.spec.Criterion == CriterionOnOrAfter:
		r.lastReturn(times, masks, j0)
	case r.spec.Windows == WindowsCalendar:
		r.calendarOn(times, masks, j0)
	default:
		r.rollingOn(times, masks, j0)
	}
	if !tr.More && (r.spec.Criterion == CriterionOnOrAfter || r.spec.List != nil) {
		r.finish(tr)
	}
}

// addFirstOn is Add for a whole trail when the retention is first_time
// with criterion on and lists nobody (the analysis of
// bench/queries/retention_install_daily.json): the user has at most one
// entry, the first start event, so there is no entry list to keep, and
// the return events are read from it only up to the end of its last
// period. It counts what findEntries, enter and calendarOn or rollingOn
// count for such a trail (TestDiffRetention compares it with them through
// chunked trails). On the 100M-event bench store it cut that query's CPU
// by 15 % (bench/ab.sh, 6 rounds: 605 → 516 ms).
func (r *Retention) addFirstOn(tr *trail.Trail, times []int64, masks []uint64) {
	i := 0
	for i < len(masks) && masks[i]&1 == 0 {
		i++
	}
	if i == len(masks) {
		return
	}
	s := times[i]
	if s < r.spec.From || s >= r.spec.To {
		return
	}
	bd := r.spec.Breakdown
	if !bd.check(tr) {
		panic("analysis: Retention.Add: trail lacks the breakdown column")
	}
	var gi int32
	switch bd.From {
	case KeyUser:
		gi = r.group(bd.user(tr))
	case KeyEvent:
		gi = r.group(bd.event(tr, i))
	}
	n, c := r.n, r.bucketOf(s)
	g := &r.groups[gi]
	g.sizes[c]++
	row := g.retained[c*n : c*n+n]
	row[0]++
	if r.spec.Windows == WindowsCalendar {
		// Period k ≥ 1 is bucket c+k; a return event counts once per
		// bucket (next is the end of the last counted one) and none
		// after bucket c+n-1 does (c+n ≤ nb: the bounds are extended by
		// the periods).
		next, end := r.spec.Bounds[c+1], c+n
		for j := i; j < len(times); j++ {
			if masks[j]&2 == 0 || times[j] < next {
				continue
			}
			b := r.bucketOf(times[j])
			if b >= end {
				break
			}
			row[b-c]++
			next = r.spec.Bounds[b+1]
		}
		return
	}
	// Rolling: period k = ⌊(t-s)/P⌋ ≥ 1, each counted once.
	period, last := r.spec.Period, int64(0)
	for j := i; j < len(times); j++ {
		if masks[j]&2 == 0 || times[j]-s < period {
			continue
		}
		k := (times[j] - s) / period
		if k >= int64(n) {
			break
		}
		if k != last {
			row[k]++
			last = k
		}
	}
}

// findEntries appends the user's entries by the start events of the
// chunk at Offset off.
func (r *Retention) findEntries(times []int64, masks []uint64, off int) {
	from, to := r.spec.From, r.spec.To
	if r.spec.Type == TypeFirstTime {
		if r.u.found {
			return
		}
		for i, m := range masks {
			if m&1 == 0 {
				continue
			}
			r.u.found = true
			if s := times[i]; s >= from && s < to {
				r.entries = append(r.entries, retEntry{c: int32(r.bucketOf(s)), i: off + i, tms: s})
			}
			return
		}
		return
	}
	i := 0
	if len(times) > 0 && times[0] < from {
		i = sort.Search(len(times), func(j int) bool { return times[j] >= from })
	}
	c, next := r.u.c, r.u.next
	for ; i < len(times); i++ {
		if masks[i]&1 == 0 {
			continue
		}
		s := times[i]
		if s >= to {
			break
		}
		if c < 0 {
			c = r.bucketOf(s)
			next = r.spec.Bounds[c+1]
		} else if s >= next {
			for s >= next {
				c++
				next = r.spec.Bounds[c+1]
			}
		} else {
			continue // same bucket: the first start event counts
		}
		r.entries = append(r.entries, retEntry{c: int32(c), i: off + i, tms: s})
	}
	r.u.c, r.u.next = c, next
}

// enter gives the entries es (at least one), found in chunk tr, their
// group and counts them (size, period 0).
func (r *Retention) enter(tr *trail.Trail, es []retEntry) {
	bd := r.spec.Breakdown
	if !bd.check(tr) {
		panic("analysis: Retention.Add: trail lacks the breakdown column")
	}
	if r.u.ug < 0 {
		switch bd.From {
		case KeyNone:
			r.u.ug = 0 // made by NewRetention
		case KeyUser:
			r.u.ug = r.group(bd.user(tr))
		}
	}
	for a := range es {
		e := &es[a]
		e.g = r.u.ug
		if bd.From == KeyEvent {
			e.g = r.group(bd.event(tr, e.i-tr.Offset))
		}
		g := &r.groups[e.g]
		g.sizes[e.c]++
		g.retained[int(e.c)*r.n]++
	}
}

// lastReturn records the chunk's last return event at or after index j0
// (on_or_after: only the latest return event matters).
func (r *Retention) lastReturn(times []int64, masks []uint64, j0 int) {
	for j := len(times) - 1; j >= j0; j-- {
		if masks[j]&2 != 0 {
			r.u.last, r.u.hasLast = times[j], true
			return
		}
	}
}

// calendarOn counts calendar periods with criterion on, for the chunk's
// return events from index j0. For k ≥ 1, bucket(t) > bucket(s) implies
// t > s, so only the distinct buckets of return events matter, and every
// entry that counts a return bucket came before it; a return event after
// the last boundary is given bucket nb, an index ≥ N for every cohort.
func (r *Retention) calendarOn(times []int64, masks []uint64, j0 int) {
	bb := r.bbuf[:0]
	// next is the end of the last recorded bucket: a return event before
	// it adds nothing. The loop reads every event once; the branch on
	// next is taken for all but one event per bucket. (BenchmarkRetention's
	// any-return case: galloping over each bucket's events with skipBelow
	// took 6.8 ms, this loop 4.9 ms, a branch-free loop that looked up
	// every event's bucket 11.6 ms.)
	next := r.u.retNext
	for j := j0; j < len(times); j++ {
		if masks[j]&2 == 0 || times[j] < next {
			continue
		}
		cur := r.bucketOf(times[j])
		bb = append(bb, int32(cur))
		if cur == r.nb {
			next = math.MaxInt64 // every later event falls after the last boundary too
			break
		}
		next = r.spec.Bounds[cur+1]
	}
	r.bbuf, r.u.retNext = bb, next
	if len(bb) == 0 {
		return
	}
	n, lc, lp := r.n, int32(-1), -1
	if l := r.spec.List; l != nil {
		lc, lp = int32(l.Cohort), l.Period
	}
	p := 0
	for a := r.u.act; a < len(r.entries); a++ {
		e := &r.entries[a]
		c := int(e.c)
		for p < len(bb) && int(bb[p]) <= c {
			p++
		}
		if p == len(bb) {
			break // this and later entries start at or after every bucket
		}
		row := r.groups[e.g].retained[c*n : c*n+n]
		for q := p; q < len(bb) && int(bb[q]) < c+n; q++ {
			k := int(bb[q]) - c
			row[k]++
			if e.c == lc && k == lp {
				e.hit = true
			}
		}
	}
	// Later return buckets are past the periods of entries up to here.
	for last := int(bb[len(bb)-1]); r.u.act < len(r.entries) && int(r.entries[r.u.act].c)+n-1 <= last; {
		r.u.act++
	}
}

// rollingOn counts rolling periods ⌊(t-s)/P⌋ ≥ 1 of the chunk's return
// events from index j0 with criterion on. Each return event at t counts
// for the entries that started at s ≤ t-P, an entry's periods once each,
// and retires the entries it finds past their last period: the events
// are read once, not once per entry (BenchmarkRetention/recurring/rolling:
// 6.4 ms of CPU per op, 7.6 ms when each entry read the user's events).
func (r *Retention) rollingOn(times []int64, masks []uint64, j0 int) {
	n, period := int64(r.n), r.spec.Period
	lc, lp := int32(-1), int64(-1)
	if l := r.spec.List; l != nil {
		lc, lp = int32(l.Cohort), int64(l.Period)
	}
	es, act := r.entries, r.u.act
	for j := j0; j < len(times) && act < len(es); j++ {
		if masks[j]&2 == 0 {
			continue
		}
		t := times[j]
		for a := act; a < len(es) && es[a].tms <= t-period; a++ {
			e := &es[a]
			k := (t - e.tms) / period
			if k >= n {
				act = a + 1 // so are the entries before it
				continue
			}
			if k != int64(e.lastK) {
				e.lastK = int32(k)
				r.groups[e.g].retained[int(e.c)*r.n+int(k)]++
				if e.c == lc && k == lp {
					e.hit = true
				}
			}
		}
	}
	r.u.act = act
}

// finish settles the user's on_or_after periods and the listed cell
// after their last chunk.
func (r *Retention) finish(tr *trail.Trail) {
	n, l := r.n, r.spec.List
	if r.spec.Criterion == CriterionOnOrAfter && r.u.hasLast {
		// Retained at k ≥ 1 when the latest return event has index ≥ k.
		for a := range r.entries {
			e := &r.entries[a]
			var last int64
			if r.spec.Windows == WindowsRolling {
				last = (r.u.last - e.tms) / r.spec.Period
			} else {
				last = int64(r.bucketOf(r.u.last) - int(e.c))
			}
			row := r.groups[e.g].retained[int(e.c)*n : int(e.c)*n+n]
			for k := min(last, int64(n-1)); k >= 1; k-- {
				row[k]++
			}
			e.hit = l != nil && last >= int64(l.Period)
		}
	}
	if l == nil {
		return
	}
	for _, e := range r.entries {
		if int(e.c) == l.Cohort && (l.Period == 0 || e.hit) {
			g := &r.groups[e.g]
			before := g.list.Bytes()
			g.list.Add(tr.ID)
			r.bytes += g.list.Bytes() - before
		}
	}
}

// Merge adds the counts of o, created from an equal spec (or decoded with
// DecodeRetention), into r. o is not modified. A spec that differs is an
// error wrapping ErrState, and r is left unchanged.
func (r *Retention) Merge(o *Retention) error {
	if err := r.sameSpec(o); err != nil {
		return err
	}
	for i := range o.groups {
		og := &o.groups[i]
		mergeRetGroup(&r.groups[r.group(og.key)], og)
	}
	return nil
}

func mergeRetGroup(dst, o *retGroup) {
	for i, v := range o.sizes {
		dst.sizes[i] += v
	}
	for i, v := range o.retained {
		dst.retained[i] += v
	}
	dst.list.Merge(&o.list)
}

// Bytes returns the memory the accumulator holds (group tables, listed
// ids, scratch), for the query's memory budget.
func (r *Retention) Bytes() int64 {
	return r.bytes + r.table.bytes() + int64(cap(r.entries))*retEntrySize + int64(cap(r.bbuf))*4
}

// Result returns one table per group, in newly allocated slices owned by
// the caller. group, if not nil, maps each key to the group it is
// reported under (retention counts merge exactly: each entry has one
// key). r stays usable.
func (r *Retention) Result(group func(Key) Key) RetentionResult {
	byKey := map[Key]*retGroup{}
	var gs []*retGroup
	for i := range r.groups {
		g := &r.groups[i]
		k := g.key
		if group != nil {
			k = group(k)
		}
		dst := byKey[k]
		if dst == nil {
			dst = &retGroup{key: k, sizes: make([]int64, r.nc), retained: make([]int64, r.nc*r.n)}
			dst.list.Keep = g.list.Keep
			byKey[k] = dst
			gs = append(gs, dst)
		}
		mergeRetGroup(dst, g)
	}
	slices.SortFunc(gs, func(a, b *retGroup) int { return compareKeys(a.key, b.key) })
	var res RetentionResult
	for _, g := range gs {
		rg := RetentionGroup{Key: g.key, Cohorts: make([]RetentionCohort, r.nc)}
		for c := range r.nc {
			rg.Cohorts[c] = RetentionCohort{
				Start:    r.spec.Bounds[c],
				Size:     g.sizes[c],
				Retained: append([]int64(nil), g.retained[c*r.n:c*r.n+r.n]...),
			}
		}
		if r.spec.List != nil {
			rg.List = &g.list
		}
		res.Groups = append(res.Groups, rg)
	}
	return res
}

// Mean returns the summary row of docs/analytics.md §6: for each period k, the
// user-weighted mean retention rate over the cohorts whose cell k is
// complete, Σ retained[c][k] / Σ sizes[c] over those cohorts (0 when
// there is none or their size is 0). sizes[c], retained[c] and
// complete[c] describe cohort c; the result has the length of the longest
// retained row and is newly allocated.
func Mean(sizes []int64, retained [][]int64, complete [][]bool) []float64 {
	n := 0
	for _, row := range retained {
		n = max(n, len(row))
	}
	out := make([]float64, n)
	for k := range n {
		var num, den int64
		for c := range sizes {
			if c < len(retained) && c < len(complete) && k < len(retained[c]) && k < len(complete[c]) && complete[c][k] {
				num += retained[c][k]
				den += sizes[c]
			}
		}
		out[k] = ratio(num, den)
	}
	return out
}
