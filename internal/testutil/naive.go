package testutil

import (
	"cmp"
	"math/big"
	"slices"
	"sort"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// Breakdown is a naive breakdown (docs/analytics.md §4): by the event property Prop, or
// with User by the user's current property. Limit > 0 keeps the Limit
// values with the largest total and merges the rest into "(other)"; 0
// keeps every value.
type Breakdown struct {
	Prop  string
	User  bool
	Limit int
}

// Common holds the query parts every analysis shares.
type Common struct {
	Global    []Filter   // global filters, added to every matcher of the analysis
	Breakdown *Breakdown // nil: none
	Cohort    *Cond      // nil: every user
	// Loc renders time breakdown values; nil means UTC.
	Loc *time.Location
}

func (c *Common) loc() *time.Location {
	if c.Loc == nil {
		return time.UTC
	}
	return c.Loc
}

// matcher returns the matcher of name with its own and the global filters.
func (c *Common) matcher(name string, where []Filter) Matcher {
	return Matcher{Event: name, Where: slices.Concat(where, c.Global)}
}

// admitted returns the users the analysis sees: every user, or the
// cohort's members.
func (c *Common) admitted(d Data) func(string) bool {
	if c.Cohort == nil {
		return func(string) bool { return true }
	}
	in := CohortMembers(d, *c.Cohort)
	return func(u string) bool { return in[u] }
}

// label returns the breakdown value of event e (its user's for user
// breakdowns), rendered.
func (c *Common) label(e Ev, users map[string]map[string]event.Value) string {
	b := c.Breakdown
	if b == nil {
		return ""
	}
	if b.User {
		return Render(users[e.User][b.Prop], c.loc())
	}
	return Render(e.Props[b.Prop], c.loc())
}

// rankLabels orders labels by total descending, then label ascending, and
// returns the kept ones in that order and whether others remain.
func rankLabels(totals map[string]float64, limit int) (kept []string, other bool) {
	for l := range totals {
		kept = append(kept, l)
	}
	slices.SortFunc(kept, func(a, b string) int {
		return cmp.Or(cmp.Compare(totals[b], totals[a]), cmp.Compare(a, b))
	})
	if limit > 0 && len(kept) > limit {
		return kept[:limit], true
	}
	return kept, false
}

// Other is the label of the merged rest of a limited breakdown.
const Other = "(other)"

// TrendQuery is a trend for NaiveTrend: series i is matcher Events[i]
// (see Match) with filters Where[i] (optional) and math Math[i] over the
// property Props[i] (property maths).
type TrendQuery struct {
	Events []string
	Math   []analysis.TrendMath
	Where  [][]Filter
	Props  []string
	Bounds []int64 // bucket boundaries, UTC µs
	From   int64   // range [From, To), UTC µs
	To     int64
	Common
}

// TrendRow is one breakdown value of a naive trend series ("" without a
// breakdown).
type TrendRow struct {
	Value   string
	Buckets []float64
	Total   float64
}

// NaiveTrend computes a trend by filtering the events of every (series,
// value, bucket) afresh and applying the math's definition (docs/analytics.md §4): an
// event counts in bucket b when it matches and lies in [From, To) and in
// [Bounds[b], Bounds[b+1]); wau and mau count the users with a matching
// event in the 7 or 30 days ending at min(Bounds[b+1], To). Sums are
// exact (big.Float), percentiles sort the values. It returns, per series,
// the rows in result order: by total descending, then value; "(other)"
// last. Without a breakdown each series has one row.
func NaiveTrend(d Data, q TrendQuery) [][]TrendRow {
	users := CurrentUsers(d.Users)
	admit := q.admitted(d)
	var out [][]TrendRow
	for s, name := range q.Events {
		var where []Filter
		if s < len(q.Where) {
			where = q.Where[s]
		}
		m := q.matcher(name, where)
		math := q.Math[s]
		prop := ""
		if s < len(q.Props) {
			prop = q.Props[s]
		}
		start := q.From - math.Window()
		var evs []Ev
		for _, e := range d.Events {
			if admit(e.User) && m.Matches(e, users[e.User]) && e.Time >= start && e.Time < q.To {
				evs = append(evs, e)
			}
		}
		byLabel := map[string][]Ev{}
		for _, e := range evs {
			byLabel[q.label(e, users)] = append(byLabel[q.label(e, users)], e)
		}
		if q.Breakdown == nil {
			byLabel = map[string][]Ev{"": evs}
		}
		rows := map[string]TrendRow{}
		totals := map[string]float64{}
		for l, les := range byLabel {
			rows[l] = q.trendRow(l, les, math, prop)
			totals[l] = rows[l].Total
		}
		limit := 0
		if q.Breakdown != nil {
			limit = q.Breakdown.Limit
		}
		kept, other := rankLabels(totals, limit)
		var series []TrendRow
		for _, l := range kept {
			series = append(series, rows[l])
		}
		if other {
			var rest []Ev
			for _, e := range evs {
				if !slices.Contains(kept, q.label(e, users)) {
					rest = append(rest, e)
				}
			}
			series = append(series, q.trendRow(Other, rest, math, prop))
		}
		out = append(out, series)
	}
	return out
}

// trendRow applies the math to the events of one row.
func (q *TrendQuery) trendRow(label string, evs []Ev, math analysis.TrendMath, prop string) TrendRow {
	row := TrendRow{Value: label}
	var inRange []Ev
	for _, e := range evs {
		if e.Time >= q.From && e.Time < q.To {
			inRange = append(inRange, e)
		}
	}
	if w := math.Window(); w > 0 {
		all := map[string]bool{}
		for b := 0; b+1 < len(q.Bounds); b++ {
			end := min(q.Bounds[b+1], q.To)
			active := map[string]bool{}
			for _, e := range evs {
				if e.Time >= end-w && e.Time < end {
					active[e.User] = true
					all[e.User] = true
				}
			}
			row.Buckets = append(row.Buckets, float64(len(active)))
		}
		row.Total = float64(len(all))
		return row
	}
	for b := 0; b+1 < len(q.Bounds); b++ {
		var in []Ev
		for _, e := range inRange {
			if e.Time >= q.Bounds[b] && e.Time < q.Bounds[b+1] {
				in = append(in, e)
			}
		}
		row.Buckets = append(row.Buckets, mathOf(math, in, prop))
	}
	row.Total = mathOf(math, inRange, prop)
	return row
}

// mathOf applies a math (not wau/mau) to a set of events.
func mathOf(m analysis.TrendMath, evs []Ev, prop string) float64 {
	switch m {
	case analysis.MathCount:
		return float64(len(evs))
	case analysis.MathUsers:
		users := map[string]bool{}
		for _, e := range evs {
			users[e.User] = true
		}
		return float64(len(users))
	case analysis.MathCountPerUserAvg, analysis.MathCountPerUserMedian, analysis.MathCountPerUserMax:
		counts := map[string]float64{}
		for _, e := range evs {
			counts[e.User]++
		}
		var cs []float64
		var sum float64
		for _, c := range counts {
			cs = append(cs, c)
			sum += c
		}
		if len(cs) == 0 {
			return 0
		}
		slices.Sort(cs)
		switch m {
		case analysis.MathCountPerUserAvg:
			return sum / float64(len(cs))
		case analysis.MathCountPerUserMax:
			return cs[len(cs)-1]
		}
		return quantile(cs, 0.5)
	}
	// Property maths over the events that have the property set.
	var vals []event.Value
	for _, e := range evs {
		if v, ok := e.Props[prop]; ok && v.Type != event.TypeNone {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return 0
	}
	fs := make([]float64, len(vals))
	sum := new(big.Float).SetPrec(4096)
	for i, v := range vals {
		x := new(big.Float)
		if v.Type == event.TypeFloat {
			fs[i] = v.Float + 0
			x.SetFloat64(fs[i])
		} else {
			fs[i] = float64(v.Int)
			x.SetInt64(v.Int)
		}
		sum.Add(sum, x)
	}
	slices.Sort(fs)
	switch m {
	case analysis.MathSum:
		f, _ := sum.Float64()
		return f + 0
	case analysis.MathAvg:
		f, _ := new(big.Float).SetPrec(53).Quo(sum, new(big.Float).SetInt64(int64(len(vals)))).Float64()
		return f + 0
	case analysis.MathMin:
		return fs[0]
	case analysis.MathMax:
		return fs[len(fs)-1]
	}
	return quantile(fs, m.Level())
}

// quantile is docs/analytics.md §4's definition over sorted values: h = (n-1)q,
// x[⌊h⌋] + (h-⌊h⌋)(x[⌊h⌋+1]-x[⌊h⌋]).
func quantile(sorted []float64, q float64) float64 {
	h := float64(len(sorted)-1) * q
	lo := int(h)
	v := sorted[lo]
	if h > float64(lo) {
		v += (h - float64(lo)) * (sorted[lo+1] - v)
	}
	return v
}

// RetentionQuery is a retention analysis for NaiveRetention: start
// matcher Start (with filters StartWhere), return matcher Return (with
// ReturnWhere).
type RetentionQuery struct {
	Start, Return           string // matchers A and B (see Match)
	StartWhere, ReturnWhere []Filter
	Interval                timebucket.Interval
	WeekStart               timebucket.WeekStart
	Periods                 int
	Type                    analysis.RetentionType
	Windows                 analysis.RetentionWindows
	Criterion               analysis.RetentionCriterion
	From, To                int64 // cohort entry range, UTC µs
	Common
}

// RetentionEntry is one cohort entry of NaiveRetentionEntries: the user,
// the cohort bucket, the breakdown value (of the start event, or the
// user's), and per period k whether the entry is retained (Retained[0] is
// true).
type RetentionEntry struct {
	User     string
	Cohort   int
	Value    string
	Retained []bool
}

// RetentionGroup is one breakdown value of a naive retention table.
type RetentionGroup struct {
	Value   string
	Cohorts []analysis.RetentionCohort
}

// NaiveRetentionEntries computes every cohort entry following docs/analytics.md §6
// literally: for every entry it computes the period index of every return
// event at t ≥ s (calendar indices by stepping through the calendar from
// the start's bucket) and then checks each period k.
func NaiveRetentionEntries(d Data, q RetentionQuery) []RetentionEntry {
	loc := q.loc()
	floor := func(t int64) int64 { return timebucket.Floor(t, q.Interval, loc, q.WeekStart) }
	next := func(t int64) int64 { return timebucket.Next(t, q.Interval, loc, q.WeekStart) }
	cohorts := q.cohortStarts()
	index := func(s, t int64) int {
		if q.Windows == analysis.WindowsRolling {
			return int((t - s) / q.Interval.Rolling())
		}
		k := 0 // boundaries in (floor(s), t], counted up to Periods+1
		for b := next(floor(s)); b <= t && k <= q.Periods; b = next(b) {
			k++
		}
		return k
	}
	users := CurrentUsers(d.Users)
	admit := q.admitted(d)
	start := q.matcher(q.Start, q.StartWhere)
	ret := q.matcher(q.Return, q.ReturnWhere)
	var out []RetentionEntry
	for _, positions := range byUser(d.Events) {
		var user []Ev
		for _, i := range positions {
			user = append(user, d.Events[i])
		}
		u := user[0].User
		if !admit(u) {
			continue
		}
		var starts []Ev
		seenBucket := map[int64]bool{}
		for _, e := range user {
			if !start.Matches(e, users[u]) {
				continue
			}
			if q.Type == analysis.TypeFirstTime {
				if e.Time >= q.From && e.Time < q.To {
					starts = append(starts, e)
				}
				break // only the earliest start event counts
			}
			if e.Time >= q.From && e.Time < q.To && !seenBucket[floor(e.Time)] {
				seenBucket[floor(e.Time)] = true
				starts = append(starts, e)
			}
		}
		for _, se := range starts {
			s := se.Time
			c := sort.Search(len(cohorts), func(i int) bool { return cohorts[i] > s }) - 1
			entry := RetentionEntry{User: u, Cohort: c, Value: q.label(se, users), Retained: make([]bool, q.Periods)}
			entry.Retained[0] = true
			var idxs []int // period index of every return event at t ≥ s
			for _, e := range user {
				if ret.Matches(e, users[u]) && e.Time >= s {
					idxs = append(idxs, index(s, e.Time))
				}
			}
			for k := 1; k < q.Periods; k++ {
				for _, idx := range idxs {
					if idx == k || (q.Criterion == analysis.CriterionOnOrAfter && idx > k) {
						entry.Retained[k] = true
						break
					}
				}
			}
			out = append(out, entry)
		}
	}
	return out
}

func (q *RetentionQuery) cohortStarts() []int64 {
	b := timebucket.Bounds(q.From, q.To, q.Interval, q.loc(), q.WeekStart)
	return b[:len(b)-1]
}

// NaiveRetention computes the retention table per breakdown value from
// NaiveRetentionEntries: groups ranked by total cohort size descending,
// then value, with "(other)" last; without a breakdown one group "" with
// every cohort row.
func NaiveRetention(d Data, q RetentionQuery) []RetentionGroup {
	entries := NaiveRetentionEntries(d, q)
	table := func(keep func(RetentionEntry) bool) []analysis.RetentionCohort {
		var rows []analysis.RetentionCohort
		for _, start := range q.cohortStarts() {
			rows = append(rows, analysis.RetentionCohort{Start: start, Retained: make([]int64, q.Periods)})
		}
		for _, e := range entries {
			if !keep(e) {
				continue
			}
			rows[e.Cohort].Size++
			for k, r := range e.Retained {
				if r {
					rows[e.Cohort].Retained[k]++
				}
			}
		}
		return rows
	}
	if q.Breakdown == nil {
		return []RetentionGroup{{Cohorts: table(func(RetentionEntry) bool { return true })}}
	}
	totals := map[string]float64{}
	for _, e := range entries {
		totals[e.Value]++
	}
	kept, other := rankLabels(totals, q.Breakdown.Limit)
	var out []RetentionGroup
	for _, l := range kept {
		out = append(out, RetentionGroup{Value: l, Cohorts: table(func(e RetentionEntry) bool { return e.Value == l })})
	}
	if other {
		out = append(out, RetentionGroup{Value: Other, Cohorts: table(func(e RetentionEntry) bool { return !slices.Contains(kept, e.Value) })})
	}
	return out
}

// RetentionUsers returns, sorted, the users of the entries in cohort c
// retained at period k, restricted to breakdown value value unless it is
// nil ("(other)": the values not in kept).
func RetentionUsers(entries []RetentionEntry, c, k int, value *string, kept []string) []string {
	var out []string
	for _, e := range entries {
		if e.Cohort != c || !e.Retained[k] {
			continue
		}
		if value != nil && !(e.Value == *value || (*value == Other && !slices.Contains(kept, e.Value))) {
			continue
		}
		out = append(out, e.User)
	}
	slices.Sort(out)
	return out
}
