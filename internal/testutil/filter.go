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

// CurrentUsers returns every user's current properties (docs/analytics.md §1,
// docs/identity.md §3): the writes applied in (time, arrival) order — a
// set replaces, a set-once sets if unset, an unset clears, an add adds to
// a number (from 0 when unset; int + int is an int, with a float a
// float; to a value not a number it is ignored), a delete clears every
// property. With sets only: per property, the write with the latest
// time, equal times to the later arrival.
func CurrentUsers(ws []UserWrite) map[string]map[string]event.Value {
	sorted := slices.Clone(ws)
	slices.SortStableFunc(sorted, func(a, b UserWrite) int { return cmp.Compare(a.Time, b.Time) })
	out := map[string]map[string]event.Value{}
	for _, w := range sorted {
		p := out[w.User]
		if p == nil {
			p = map[string]event.Value{}
			out[w.User] = p
		}
		if w.Op == "$delete" {
			clear(p)
			continue
		}
		for n, v := range w.Props {
			if v.Type == event.TypeNone {
				continue
			}
			cur, ok := p[n]
			switch w.Op {
			case "", "$set":
				p[n] = v
			case "$set_once":
				if !ok {
					p[n] = v
				}
			case "$unset":
				delete(p, n)
			case "$add":
				switch {
				case !ok:
					p[n] = v
				case cur.Type == event.TypeInt && v.Type == event.TypeInt:
					p[n] = event.Int(cur.Int + v.Int)
				case (cur.Type == event.TypeInt || cur.Type == event.TypeFloat) && (v.Type == event.TypeInt || v.Type == event.TypeFloat):
					p[n] = event.Float(num(cur) + num(v) + 0)
				}
			}
		}
	}
	return out
}

// num is an int or float value as a float64.
func num(v event.Value) float64 {
	if v.Type == event.TypeInt {
		return float64(v.Int)
	}
	return v.Float
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
