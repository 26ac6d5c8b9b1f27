package testutil

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/spurdb/spur/event"
)

// Filter is a property filter of docs/analytics.md §3 in naive form: Values are typed
// constants of the property's type (one; several for in and not_in; none
// for is_set and is_not_set). User filters test the user's current value.
type Filter struct {
	Prop   string
	Op     string
	Values []event.Value
	User   bool
}

// Holds reports whether the filter holds for value v (TypeNone: not set),
// following docs/analytics.md §3 word by word: neq, not_in and not_contains are true
// when the property is not set; comparisons use the property's type.
func (f Filter) Holds(v event.Value) bool {
	if v.Type == event.TypeNone {
		switch f.Op {
		case "neq", "not_in", "not_contains", "is_not_set":
			return true
		}
		return false
	}
	switch f.Op {
	case "is_set":
		return true
	case "is_not_set":
		return false
	case "eq", "in":
		return slices.ContainsFunc(f.Values, func(c event.Value) bool { return compare(v, c) == 0 })
	case "neq", "not_in":
		return !slices.ContainsFunc(f.Values, func(c event.Value) bool { return compare(v, c) == 0 })
	case "contains":
		return strings.Contains(v.Str, f.Values[0].Str)
	case "not_contains":
		return !strings.Contains(v.Str, f.Values[0].Str)
	case "gt":
		return compare(v, f.Values[0]) > 0
	case "gte":
		return compare(v, f.Values[0]) >= 0
	case "lt":
		return compare(v, f.Values[0]) < 0
	case "lte":
		return compare(v, f.Values[0]) <= 0
	}
	panic("testutil: unknown filter op " + f.Op)
}

// compare orders two values of the same type.
func compare(a, b event.Value) int {
	switch a.Type {
	case event.TypeString:
		return strings.Compare(a.Str, b.Str)
	case event.TypeFloat:
		return cmp.Compare(a.Float, b.Float)
	}
	return cmp.Compare(a.Int, b.Int)
}

// Matcher is an event matcher of docs/analytics.md §3: an event name (see Match) and
// filters that must all hold.
type Matcher struct {
	Event string
	Where []Filter
}

// Matches reports whether e matches m, with user the current properties
// of e's user (for user filters).
func (m Matcher) Matches(e Ev, user map[string]event.Value) bool {
	if !Match(m.Event, e.Name) {
		return false
	}
	for _, f := range m.Where {
		v := e.Props[f.Prop]
		if f.User {
			v = user[f.Prop]
		}
		if !f.Holds(v) {
			return false
		}
	}
	return true
}

// CurrentUsers returns every user's current properties (docs/analytics.md §1: per
// property, the write with the latest time; equal times: the later
// arrival).
func CurrentUsers(ws []UserWrite) map[string]map[string]event.Value {
	type held struct {
		v event.Value
		t int64
	}
	best := map[string]map[string]held{}
	for _, w := range ws {
		if best[w.User] == nil {
			best[w.User] = map[string]held{}
		}
		for n, v := range w.Props {
			if v.Type == event.TypeNone {
				continue
			}
			if h, ok := best[w.User][n]; !ok || w.Time >= h.t {
				best[w.User][n] = held{v, w.Time}
			}
		}
	}
	out := map[string]map[string]event.Value{}
	for u, m := range best {
		out[u] = map[string]event.Value{}
		for n, h := range m {
			out[u][n] = h.v
		}
	}
	return out
}

// Render renders a property value as results show breakdown values:
// "(none)" when not set, times as RFC 3339 in loc, floats in the
// shortest form with -0 as 0, others as event.Value.String.
func Render(v event.Value, loc *time.Location) string {
	switch v.Type {
	case event.TypeNone:
		return "(none)"
	case event.TypeTime:
		return time.UnixMicro(v.Int).In(loc).Format(time.RFC3339Nano)
	case event.TypeFloat:
		return event.Float(v.Float + 0).String()
	}
	return v.String()
}
