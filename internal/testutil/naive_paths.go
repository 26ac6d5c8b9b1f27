package testutil

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
)

// PathsQuery is a paths analysis for NaivePaths (docs/analytics.md §15).
type PathsQuery struct {
	Events     []string // included event names; nil: every event
	ItemProp   string   // string property whose value is the item; "": event names
	Exclude    []string // items dropped
	Start, End *Matcher // nil: none
	SessionGap int64    // µs
	Steps      int
	From, To   int64 // range, UTC µs
	Common
}

// PathEdge is one edge of a naive paths result: nodes "{position}_{item}",
// the path occurrences taking it, their users (sorted) and the sum of the
// times between the two events (µs).
type PathEdge struct {
	Source, Target string
	Sessions       int64
	Users          []string
	Micros         int64
}

// pathItem is a collapsed item of a naive session.
type pathItem struct {
	item       string
	t          int64 // time of the run's last event
	start, end bool  // some event of the run matches start / end
}

// NaivePaths computes every edge of docs/analytics.md §15 literally: per user, the
// included events of [From, To) in trail order become items (the item
// property's value, or the event name), excluded items are dropped, the
// rest are cut into sessions at gaps ≥ SessionGap, runs of one item are
// collapsed into their last event, each session's path is cut by start,
// end and Steps (with a "..." node taking the time of the first item it
// stands for), and every consecutive pair of nodes is an edge. Edges are
// returned ordered by source, then target.
func NaivePaths(d Data, q PathsQuery) []PathEdge {
	users := CurrentUsers(d.Users)
	type acc struct {
		sessions, micros int64
		users            map[string]bool
	}
	edges := map[[2]string]*acc{}
	for u, evs := range q.userEvents(d) {
		var sessions [][]pathItem
		var cur []pathItem
		var lastT int64
		for _, e := range evs {
			if e.Time < q.From || e.Time >= q.To || !q.matcher(Any, nil).Matches(e, users[u]) {
				continue
			}
			if q.Events != nil && !slices.Contains(q.Events, e.Name) {
				continue
			}
			item := e.Name
			if v, ok := e.Props[q.ItemProp]; ok && q.ItemProp != "" && v.Type == event.TypeString {
				item = v.Str
			}
			if slices.Contains(q.Exclude, item) {
				continue
			}
			if len(cur) > 0 && e.Time-lastT >= q.SessionGap {
				sessions = append(sessions, cur)
				cur = nil
			}
			lastT = e.Time
			it := pathItem{item: item, t: e.Time,
				start: q.Start != nil && q.matcher(q.Start.Event, q.Start.Where).Matches(e, users[u]),
				end:   q.End != nil && q.matcher(q.End.Event, q.End.Where).Matches(e, users[u])}
			if n := len(cur); n > 0 && cur[n-1].item == item {
				it.start = it.start || cur[n-1].start
				it.end = it.end || cur[n-1].end
				cur[n-1] = it
				continue
			}
			cur = append(cur, it)
		}
		if len(cur) > 0 {
			sessions = append(sessions, cur)
		}
		for _, s := range sessions {
			path := q.cut(s)
			for k := 1; k < len(path); k++ {
				key := [2]string{fmt.Sprintf("%d_%s", k, path[k-1].item), fmt.Sprintf("%d_%s", k+1, path[k].item)}
				a := edges[key]
				if a == nil {
					a = &acc{users: map[string]bool{}}
					edges[key] = a
				}
				a.sessions++
				a.micros += path[k].t - path[k-1].t
				a.users[u] = true
			}
		}
	}
	var out []PathEdge
	for k, a := range edges {
		e := PathEdge{Source: k[0], Target: k[1], Sessions: a.sessions, Micros: a.micros}
		for u := range a.users {
			e.Users = append(e.Users, u)
		}
		slices.Sort(e.Users)
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b PathEdge) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Target, b.Target))
	})
	return out
}

// cut returns a session's path: from its first start item, to its first
// end item at or after it, limited to Steps items (docs/analytics.md §15).
func (q *PathsQuery) cut(s []pathItem) []pathItem {
	first := 0
	if q.Start != nil {
		first = slices.IndexFunc(s, func(it pathItem) bool { return it.start })
		if first < 0 {
			return nil
		}
	}
	s = s[first:]
	if q.End == nil {
		return s[:min(len(s), q.Steps)]
	}
	last := slices.IndexFunc(s, func(it pathItem) bool { return it.end })
	if last < 0 {
		return nil
	}
	s = s[:last+1]
	if q.Start == nil {
		return s[max(0, len(s)-q.Steps):]
	}
	if len(s) <= q.Steps {
		return s
	}
	h := (q.Steps-1)/2 + (q.Steps-1)%2 // ⌈(steps−1)/2⌉
	k := (q.Steps - 1) / 2             // ⌊(steps−1)/2⌋
	out := slices.Clone(s[:h])
	out = append(out, pathItem{item: "...", t: s[h].t})
	return append(out, s[len(s)-k:]...)
}

// PathsResultEdges keeps the edges of a paths result (docs/analytics.md §15, PostHog's
// paths) from all of a query's edges: those with at least minSessions
// sessions, the maxEdges with the most sessions (ties: source, then
// target, byte-wise), and of those the ones whose source can be reached
// from a position-1 node along kept edges (a depth-first walk, as
// PostHog's validate_results). The result is ordered by sessions
// descending, source, target.
func PathsResultEdges(all []PathEdge, minSessions int64, maxEdges int) []PathEdge {
	var es []PathEdge
	for _, e := range all {
		if e.Sessions >= minSessions {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b PathEdge) int {
		return cmp.Or(cmp.Compare(b.Sessions, a.Sessions), cmp.Compare(a.Source, b.Source), cmp.Compare(a.Target, b.Target))
	})
	if len(es) > maxEdges {
		es = es[:maxEdges]
	}
	next := map[string][]string{}
	var stack []string
	for _, e := range es {
		next[e.Source] = append(next[e.Source], e.Target)
		if strings.HasPrefix(e.Source, "1_") {
			stack = append(stack, e.Source)
		}
	}
	seen := map[string]bool{}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		seen[n] = true
		for _, m := range next[n] {
			if !seen[m] {
				stack = append(stack, m)
			}
		}
	}
	out := []PathEdge{}
	for _, e := range es {
		if seen[e.Source] {
			out = append(out, e)
		}
	}
	return out
}
