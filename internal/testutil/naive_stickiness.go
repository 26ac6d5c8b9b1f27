package testutil

import (
	"slices"

	"github.com/spurdb/spur/query/timebucket"
)

// userEvents returns the admitted users' events, per user in trail order.
func (c *Common) userEvents(d Data) map[string][]Ev {
	admit := c.admitted(d)
	out := map[string][]Ev{}
	for _, positions := range byUser(d.Events) {
		for _, i := range positions {
			if e := d.Events[i]; admit(e.User) {
				out[e.User] = append(out[e.User], e)
			}
		}
	}
	return out
}

// StickinessQuery is a stickiness analysis for NaiveStickiness (docs/analytics.md
// §13): series i is matcher Events[i] (see Match) with filters Where[i]
// (optional).
type StickinessQuery struct {
	Events    []string
	Where     [][]Filter
	Interval  timebucket.Interval
	WeekStart timebucket.WeekStart
	From, To  int64 // range, UTC µs
	MinEvents int   // per bucket; 0 means 1
	Common
}

// StickinessRow is one breakdown value of a naive stickiness series:
// Counts[i] users with exactly i+1 active buckets, and every counted
// user's number of active buckets.
type StickinessRow struct {
	Value  string
	Counts []int64
	Users  int64
	N      map[string]int
}

// NaiveStickiness computes stickiness by listing, for every user and
// breakdown value, the calendar bucket (timebucket.Floor in the query's
// zone) of each matching event in [From, To) and counting the buckets
// that hold at least MinEvents of them. Event breakdowns count a user
// under each value with that value's events; "(other)" is recomputed over
// the events of the values not kept. Per series, rows are ranked by users
// descending, then value, "(other)" last; values without users are left
// out.
func NaiveStickiness(d Data, q StickinessQuery) [][]StickinessRow {
	loc := q.loc()
	nb := len(timebucket.Bounds(q.From, q.To, q.Interval, loc, q.WeekStart)) - 1
	minEv := max(q.MinEvents, 1)
	users := CurrentUsers(d.Users)
	byUser := q.userEvents(d)
	var out [][]StickinessRow
	for s, name := range q.Events {
		var where []Filter
		if s < len(q.Where) {
			where = q.Where[s]
		}
		m := q.matcher(name, where)
		// label of each counted event, per user
		row := func(label string, keep func(string) bool) StickinessRow {
			r := StickinessRow{Value: label, Counts: make([]int64, nb), N: map[string]int{}}
			for u, evs := range byUser {
				perBucket := map[int64]int{}
				for _, e := range evs {
					if e.Time >= q.From && e.Time < q.To && m.Matches(e, users[u]) && keep(q.label(e, users)) {
						perBucket[timebucket.Floor(e.Time, q.Interval, loc, q.WeekStart)]++
					}
				}
				n := 0
				for _, c := range perBucket {
					if c >= minEv {
						n++
					}
				}
				if n > 0 {
					r.Counts[n-1]++
					r.Users++
					r.N[u] = n
				}
			}
			return r
		}
		if q.Breakdown == nil {
			out = append(out, []StickinessRow{row("", func(string) bool { return true })})
			continue
		}
		labels := map[string]bool{}
		for u, evs := range byUser {
			for _, e := range evs {
				if e.Time >= q.From && e.Time < q.To && m.Matches(e, users[u]) {
					labels[q.label(e, users)] = true
				}
			}
		}
		rows := map[string]StickinessRow{}
		totals := map[string]float64{}
		for l := range labels {
			if r := row(l, func(x string) bool { return x == l }); r.Users > 0 {
				rows[l], totals[l] = r, float64(r.Users)
			}
		}
		kept, other := rankLabels(totals, q.Breakdown.Limit)
		var series []StickinessRow
		for _, l := range kept {
			series = append(series, rows[l])
		}
		if other {
			series = append(series, row(Other, func(x string) bool { return !slices.Contains(kept, x) }))
		}
		out = append(out, series)
	}
	return out
}

// StickinessUsers returns, sorted, the users of a naive row with exactly
// n active buckets (atLeast: n or more).
func StickinessUsers(r StickinessRow, n int, atLeast bool) []string {
	var out []string
	for u, k := range r.N {
		if k == n || (atLeast && k > n) {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}
