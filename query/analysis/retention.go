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

// RetentionSpec is a validated retention query for the kernel (spec §6).
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
	spec   RetentionSpec
	n      int // periods
	nc     int // cohort buckets
	nb     int // buckets in spec.Bounds
	groups []retGroup
	table  slotTable
	idx    bucketIndex // over spec.Bounds
	bytes  int64
	// per-Add scratch, reused
	entries []retEntry
	bbuf    []int32
}

type retEntry struct {
	c   int32 // cohort bucket
	i   int32 // trail index of the start event
	g   int32 // group
	tms int64 // start time
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

// Add accumulates one user's whole trail: for first_time it must contain
// the user's start events from all stored data before To (the earliest
// one decides the cohort), and return events up to the end of the last
// period. The trail is borrowed only for the call. Cost: O(events +
// entries × Periods); no allocation once the scratch has grown to the
// user's number of entries.
func (r *Retention) Add(tr *trail.Trail) {
	times := tr.Times
	masks := tr.Mask[:len(times)]
	if !r.findEntries(times, masks) {
		return
	}
	bd := r.spec.Breakdown
	if !bd.check(tr) {
		panic("analysis: Retention.Add: trail lacks the breakdown column")
	}
	ug := int32(0)
	if bd.From != KeyEvent {
		ug = r.group(bd.user(tr))
	}
	for i := range r.entries {
		e := &r.entries[i]
		e.g = ug
		if bd.From == KeyEvent {
			e.g = r.group(bd.event(tr, int(e.i)))
		}
	}
	if r.spec.Windows == WindowsCalendar {
		r.addCalendar(times, masks)
	} else {
		r.addRolling(times, masks)
	}
	if l := r.spec.List; l != nil {
		r.listUser(tr, times, masks, l)
	}
}

// listUser adds the user to the list of their group if their entry in
// the listed cohort is retained at the listed period.
func (r *Retention) listUser(tr *trail.Trail, times []int64, masks []uint64, l *RetentionList) {
	for _, e := range r.entries {
		if int(e.c) != l.Cohort {
			continue
		}
		if l.Period == 0 || r.retainedAt(e, l.Period, times, masks) {
			g := &r.groups[e.g]
			before := g.list.Bytes()
			g.list.Add(tr.ID)
			r.bytes += g.list.Bytes() - before
		}
	}
}

// retainedAt reports whether entry e is retained at period k ≥ 1: some
// return event at t ≥ s has index k (on) or ≥ k (on_or_after).
func (r *Retention) retainedAt(e retEntry, k int, times []int64, masks []uint64) bool {
	for j := int(e.i); j < len(times); j++ {
		if masks[j]&2 == 0 {
			continue
		}
		var idx int64
		if r.spec.Windows == WindowsRolling {
			idx = (times[j] - e.tms) / r.spec.Period
		} else {
			idx = int64(r.bucketOf(times[j]) - int(e.c))
		}
		if idx == int64(k) || (r.spec.Criterion == CriterionOnOrAfter && idx > int64(k)) {
			return true
		}
	}
	return false
}

// findEntries fills r.entries with the user's cohort entries in time order
// and reports whether there is any.
func (r *Retention) findEntries(times []int64, masks []uint64) bool {
	r.entries = r.entries[:0]
	from, to := r.spec.From, r.spec.To
	if r.spec.Type == TypeFirstTime {
		for i, m := range masks {
			if m&1 == 0 {
				continue
			}
			s := times[i]
			if s < from || s >= to {
				return false
			}
			r.entries = append(r.entries, retEntry{c: int32(r.bucketOf(s)), i: int32(i), tms: s})
			return true
		}
		return false
	}
	i := 0
	if len(times) > 0 && times[0] < from {
		i = sort.Search(len(times), func(j int) bool { return times[j] >= from })
	}
	c, next := -1, int64(0)
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
		r.entries = append(r.entries, retEntry{c: int32(c), i: int32(i), tms: s})
	}
	return len(r.entries) > 0
}

// addCalendar counts calendar periods. For k ≥ 1, bucket(t) > bucket(s)
// implies t > s, so only the distinct buckets of return events matter; a
// return event after the last boundary is given bucket nb, an index ≥ N
// for every cohort (it counts for on_or_after only).
func (r *Retention) addCalendar(times []int64, masks []uint64) {
	bb := r.bbuf[:0]
	first := r.entries[0]
	// next is the end of the last recorded bucket: a return event before
	// it adds nothing. The loop reads every event once; the branch on
	// next is taken for all but one event per bucket. (BenchmarkRetention's
	// any-return case: galloping over each bucket's events with skipBelow
	// took 6.8 ms, this loop 4.9 ms, a branch-free loop that looked up
	// every event's bucket 11.6 ms.)
	next := int64(math.MinInt64)
	for j := int(first.i); j < len(times); j++ {
		if masks[j]&2 == 0 || times[j] < next {
			continue
		}
		cur := r.bucketOf(times[j])
		bb = append(bb, int32(cur))
		if cur == r.nb {
			break // every later event falls after the last boundary too
		}
		next = r.spec.Bounds[cur+1]
	}
	r.bbuf = bb
	n := r.n
	p := 0
	for _, e := range r.entries {
		c := int(e.c)
		g := &r.groups[e.g]
		row := g.retained[c*n : c*n+n]
		g.sizes[c]++
		row[0]++
		if len(bb) == 0 {
			continue
		}
		if r.spec.Criterion == CriterionOn {
			for p < len(bb) && int(bb[p]) <= c {
				p++
			}
			for q := p; q < len(bb) && int(bb[q]) < c+n; q++ {
				row[int(bb[q])-c]++
			}
			continue
		}
		for k := min(int(bb[len(bb)-1])-c, n-1); k >= 1; k-- {
			row[k]++
		}
	}
}

// addRolling counts rolling periods ⌊(t-s)/P⌋ of return events at t ≥ s.
func (r *Retention) addRolling(times []int64, masks []uint64) {
	n, period := int64(r.n), r.spec.Period
	last := -1
	if r.spec.Criterion == CriterionOnOrAfter {
		for j := len(times) - 1; j >= 0; j-- {
			if masks[j]&2 != 0 {
				last = j
				break
			}
		}
	}
	for _, e := range r.entries {
		c := int(e.c)
		g := &r.groups[e.g]
		row := g.retained[c*r.n : c*r.n+r.n]
		g.sizes[c]++
		row[0]++
		s := e.tms
		if r.spec.Criterion == CriterionOnOrAfter {
			if last < 0 || times[last] < s {
				continue
			}
			for k := min((times[last]-s)/period, n-1); k >= 1; k-- {
				row[k]++
			}
			continue
		}
		lastK := int64(0)
		for j := int(e.i); j < len(times); j++ {
			if masks[j]&2 == 0 {
				continue
			}
			k := (times[j] - s) / period
			if k >= n {
				break
			}
			if k != lastK {
				row[k]++
				lastK = k
			}
		}
	}
}

// Merge adds the counts of o, created from an equal spec, into r. o is not
// modified. It panics if the shapes differ (a programmer error).
func (r *Retention) Merge(o *Retention) {
	if o.n != r.n || o.nc != r.nc {
		panic("analysis: Retention.Merge of accumulators with different specs")
	}
	for i := range o.groups {
		og := &o.groups[i]
		mergeRetGroup(&r.groups[r.group(og.key)], og)
	}
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
	return r.bytes + r.table.bytes() + int64(cap(r.entries))*24 + int64(cap(r.bbuf))*4
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

// Mean returns the summary row of spec §6: for each period k, the
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
