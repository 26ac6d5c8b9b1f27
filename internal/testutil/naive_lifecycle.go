package testutil

import (
	"slices"

	"github.com/spurdb/spur/query/timebucket"
)

// LifecycleQuery is a lifecycle analysis for NaiveLifecycle (docs/analytics.md §14):
// activity matcher Event (see Match) with filters Where. A breakdown must
// be by a user property.
type LifecycleQuery struct {
	Event     string
	Where     []Filter
	Interval  timebucket.Interval
	WeekStart timebucket.WeekStart
	From, To  int64 // range, UTC µs
	Common
}

// LifecycleBucket holds, sorted, the users of each status in one bucket;
// Status[0..3] are new, returning, resurrecting, dormant.
type LifecycleBucket struct {
	Start  int64
	Status [4][]string
}

// LifecycleRow is the lifecycle of one breakdown value.
type LifecycleRow struct {
	Value   string
	Buckets []LifecycleBucket
}

// NaiveLifecycle classifies every user in every bucket following docs/analytics.md §14
// word by word: active(b) is "a matching event in b" (in [From, To) for
// the range's buckets, anywhere in the bucket before the range), new is
// "active in b and b holds the user's first event of any kind" (over all
// of the user's events, unfiltered), and so on. Without a breakdown it
// returns one row (value ""); with one, rows ranked by the sum over
// buckets of new + returning + resurrecting, descending, then value, with
// "(other)" (the values not kept, merged) last; values without any status
// are left out.
func NaiveLifecycle(d Data, q LifecycleQuery) []LifecycleRow {
	loc := q.loc()
	floor := func(t int64) int64 { return timebucket.Floor(t, q.Interval, loc, q.WeekStart) }
	bounds := timebucket.Bounds(q.From, q.To, q.Interval, loc, q.WeekStart)
	nb := len(bounds) - 1
	hist := floor(bounds[0] - 1)
	users := CurrentUsers(d.Users)
	m := q.matcher(q.Event, q.Where)
	firstSeen := map[string]int64{}
	for _, positions := range byUser(d.Events) {
		e := d.Events[positions[0]]
		firstSeen[e.User] = e.Time
	}
	labels := map[string]string{}  // user → breakdown value
	status := map[string][]int{}   // user → status per bucket (-1 none)
	totals := map[string]float64{} // value → new + returning + resurrecting
	for u, evs := range q.userEvents(d) {
		active := func(start int64) bool {
			for _, e := range evs {
				if floor(e.Time) == start && m.Matches(e, users[u]) && (start == hist || (e.Time >= q.From && e.Time < q.To)) {
					return true
				}
			}
			return false
		}
		label := ""
		if q.Breakdown != nil {
			label = Render(users[u][q.Breakdown.Prop], loc)
		}
		st := make([]int, nb)
		some := false
		prev := hist
		for b := range nb {
			start := bounds[b]
			st[b] = -1
			switch {
			case active(start) && floor(firstSeen[u]) == start:
				st[b] = 0
			case active(start) && active(prev):
				st[b] = 1
			case active(start):
				st[b] = 2
			case active(prev):
				st[b] = 3
			}
			if st[b] >= 0 {
				some = true
				if st[b] < 3 {
					totals[label]++
				}
			}
			prev = start
		}
		if some {
			labels[u], status[u] = label, st
			if _, ok := totals[label]; !ok {
				totals[label] = 0
			}
		}
	}
	table := func(value string, keep func(string) bool) LifecycleRow {
		r := LifecycleRow{Value: value, Buckets: make([]LifecycleBucket, nb)}
		for b := range r.Buckets {
			r.Buckets[b].Start = bounds[b]
		}
		for u, st := range status {
			if !keep(labels[u]) {
				continue
			}
			for b, s := range st {
				if s >= 0 {
					r.Buckets[b].Status[s] = append(r.Buckets[b].Status[s], u)
				}
			}
		}
		for b := range r.Buckets {
			for s := range r.Buckets[b].Status {
				slices.Sort(r.Buckets[b].Status[s])
			}
		}
		return r
	}
	if q.Breakdown == nil {
		return []LifecycleRow{table("", func(string) bool { return true })}
	}
	kept, other := rankLabels(totals, q.Breakdown.Limit)
	var out []LifecycleRow
	for _, l := range kept {
		out = append(out, table(l, func(x string) bool { return x == l }))
	}
	if other {
		out = append(out, table(Other, func(x string) bool { return !slices.Contains(kept, x) }))
	}
	return out
}
