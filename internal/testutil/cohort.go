package testutil

import "github.com/spurdb/spur/event"

// Cond is a cohort condition of docs/analytics.md §7 in naive form. Op is "and", "or",
// "not" (Kids), "performed" (Matcher, CountOp "gte"|"lte"|"eq" and N,
// window [From, To)), "first_performed" (Matcher, window) or
// "user_property" (Filter). not_performed is performed with "eq" 0.
type Cond struct {
	Op       string
	Kids     []Cond
	Matcher  Matcher
	CountOp  string
	N        int64
	From, To int64
	Filter   Filter
}

// CohortMembers returns the users of the cohort among every user with a
// stored event or user property write, by evaluating c on each user's
// events directly: performed counts the matching events in the window,
// first_performed finds the user's earliest matching event of all data,
// user_property tests the current value.
func CohortMembers(d Data, c Cond) map[string]bool {
	users := CurrentUsers(d.Users)
	byUserEvs := map[string][]Ev{}
	for _, positions := range byUser(d.Events) {
		for _, i := range positions {
			e := d.Events[i]
			byUserEvs[e.User] = append(byUserEvs[e.User], e)
		}
	}
	all := map[string]bool{}
	for u := range byUserEvs {
		all[u] = true
	}
	for _, w := range d.Users {
		all[w.User] = true
	}
	out := map[string]bool{}
	for u := range all {
		if c.holds(byUserEvs[u], users[u]) {
			out[u] = true
		}
	}
	return out
}

// holds evaluates c for one user: evs in trail order, props current.
func (c *Cond) holds(evs []Ev, props map[string]event.Value) bool {
	switch c.Op {
	case "and":
		for i := range c.Kids {
			if !c.Kids[i].holds(evs, props) {
				return false
			}
		}
		return true
	case "or":
		for i := range c.Kids {
			if c.Kids[i].holds(evs, props) {
				return true
			}
		}
		return false
	case "not":
		return !c.Kids[0].holds(evs, props)
	case "user_property":
		return c.Filter.Holds(props[c.Filter.Prop])
	case "first_performed":
		for _, e := range evs {
			if c.Matcher.Matches(e, props) {
				return e.Time >= c.From && e.Time < c.To
			}
		}
		return false
	case "performed":
		var n int64
		for _, e := range evs {
			if e.Time >= c.From && e.Time < c.To && c.Matcher.Matches(e, props) {
				n++
			}
		}
		switch c.CountOp {
		case "lte":
			return n <= c.N
		case "eq":
			return n == c.N
		}
		return n >= c.N
	}
	panic("testutil: unknown cohort op " + c.Op)
}
