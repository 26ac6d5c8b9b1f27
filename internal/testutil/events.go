// Package testutil holds test support shared by Spur's packages: a seeded
// random event generator with many timestamp ties, deliberately naive
// reference implementations of the analyses (docs/analytics.md §4-§6) that
// work directly on event lists, conversion of event lists to the analysis
// kernels' Trails, and a reader/writer for golden case files.
//
// The naive implementations follow the spec text literally and favour
// obviousness over speed; differential tests compare the kernels against
// them. Nothing here is for production paths.
package testutil

import (
	"cmp"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/trail"
)

// Ev is one event of a test data set. A slice of Ev is in arrival order:
// among events of one user with equal Time, the earlier element arrived
// first (docs/analytics.md §1 trail order). Props holds the set properties (nil or
// missing: not set).
type Ev struct {
	User  string
	Time  int64 // UTC microseconds
	Name  string
	Props map[string]event.Value
}

// UserWrite is one write of user properties (a row of a users file): at
// Time the user's properties in Props are set — or, by Op (the users
// row's event name, docs/identity.md §3), set once ("$set_once"), unset
// ("$unset": Props' values only mark the names), added to ("$add":
// numbers) or all deleted ("$delete": Props ignored). A slice of
// UserWrite is in arrival order.
type UserWrite struct {
	User  string
	Time  int64 // UTC microseconds
	Props map[string]event.Value
	Op    string // "" (or "$set"), "$set_once", "$unset", "$add", "$delete"
}

// WithUserOps returns a copy of ws (RandomUsers') where about half the
// writes after each user's first have another operation: set once, unset
// (the same names, their values mere marks), add (to the write's number
// properties, "age" int and "score" float; an int delta to an int) or
// delete (no properties). Drawn from seed.
func WithUserOps(seed int64, ws []UserWrite) []UserWrite {
	r := rand.New(rand.NewPCG(uint64(seed), 0x0b5))
	out := make([]UserWrite, len(ws))
	seen := map[string]bool{}
	for i, w := range ws {
		w.Props = maps.Clone(w.Props)
		first := !seen[w.User]
		seen[w.User] = true
		if !first && r.IntN(2) == 0 {
			switch k := r.IntN(8); {
			case k < 2:
				w.Op = "$set_once"
			case k < 4:
				w.Op = "$unset"
			case k < 7:
				w.Op = "$add"
				for n := range w.Props {
					switch n {
					case "age":
						w.Props[n] = event.Int(int64(r.IntN(7) - 3))
					case "score":
						w.Props[n] = event.Float(float64(r.IntN(17)-8) / 4)
					default:
						delete(w.Props, n)
					}
				}
			default:
				w.Op, w.Props = "$delete", nil
			}
		}
		out[i] = w
	}
	return out
}

// Data is a test data set: events and user property writes, each in
// arrival order.
type Data struct {
	Events []Ev
	Users  []UserWrite
}

// Any is the matcher name that matches every event (docs/analytics.md §3).
const Any = "$any"

// Match reports whether the event name matches matcher: Any matches
// everything; otherwise matcher is a "|"-separated list of event names
// ("a|b" matches a and b).
func Match(matcher, name string) bool {
	if matcher == Any {
		return true
	}
	for m := range strings.SplitSeq(matcher, "|") {
		if m == name {
			return true
		}
	}
	return false
}

// RandomOptions shapes RandomEvents. Zero fields take the defaults noted.
type RandomOptions struct {
	Users  int      // number of users, default 12
	Events int      // number of events, default 300
	Names  []string // event names, default a, b, c, d
	// Start (UTC µs) and Span (µs): event times lie in about
	// [Start, Start+Span). Default: 2021-03-26T00:00:00Z and 4 days, which
	// covers the Europe/Berlin DST change of 2021-03-28.
	Start, Span int64
	// Quantum (µs): times are multiples of Quantum after Start, sometimes
	// shifted by ±1 µs, so that conversion windows and bucket edges are hit
	// exactly and just missed. Default 30 minutes.
	Quantum int64
	// TieRate is the probability that an event copies the time of an
	// earlier event of the same user (timestamp ties), default 0.3.
	TieRate float64
	// Props gives events random properties (see EventProps), each set
	// with probability 3/4.
	Props bool
}

// EventProps are the event properties RandomEvents sets with
// RandomOptions.Props, by type: s string (values x, y, z, w), n int
// (-3..20), f float (-2.5..5 in steps of 0.25, with -0 for 0), b bool.
var EventProps = map[string]event.Type{"s": event.TypeString, "n": event.TypeInt, "f": event.TypeFloat, "b": event.TypeBool}

// UserProps are the user properties RandomUsers writes: tier string
// (gold, silver, bronze), age int (18..30), vip bool, score float.
var UserProps = map[string]event.Type{"tier": event.TypeString, "age": event.TypeInt, "vip": event.TypeBool, "score": event.TypeFloat}

// randomProps draws a property map over names; each set with p 3/4, or
// every one when all.
func randomProps(r *rand.Rand, names []string, all bool) map[string]event.Value {
	m := map[string]event.Value{}
	for _, n := range names {
		if r.IntN(4) == 0 && !all {
			continue
		}
		switch n {
		case "s":
			m[n] = event.String([]string{"x", "y", "z", "w"}[r.IntN(4)])
		case "n":
			m[n] = event.Int(int64(r.IntN(24) - 3))
		case "f":
			v := float64(r.IntN(31)-10) / 4
			if v == 0 && r.IntN(2) == 0 {
				v = math.Copysign(0, -1)
			}
			m[n] = event.Float(v)
		case "b", "vip":
			m[n] = event.Bool(r.IntN(2) == 0)
		case "tier":
			m[n] = event.String([]string{"gold", "silver", "bronze"}[r.IntN(3)])
		case "age":
			m[n] = event.Int(int64(18 + r.IntN(13)))
		case "score":
			m[n] = event.Float(float64(r.IntN(100)) / 8)
		}
	}
	return m
}

// RandomUsers returns user property writes for the users of evs: for
// about 4/5 of them 1 to 3 writes of random UserProps at random times
// around the events' span, sometimes at equal times (the later arrival
// wins); one write sets every property, so that each exists in the app.
// The slice is newly allocated, in arrival order.
func RandomUsers(seed int64, evs []Ev) []UserWrite {
	r := rand.New(rand.NewPCG(uint64(seed), 0x0eed))
	var users []string
	seen := map[string]bool{}
	var lo, hi int64
	for i, e := range evs {
		if !seen[e.User] {
			seen[e.User] = true
			users = append(users, e.User)
		}
		if i == 0 || e.Time < lo {
			lo = e.Time
		}
		if i == 0 || e.Time > hi {
			hi = e.Time
		}
	}
	users = append(users, "uOnlyProps") // a user without events
	names := []string{"tier", "age", "vip", "score"}
	var out []UserWrite
	for _, u := range users {
		if r.IntN(5) == 0 {
			continue
		}
		var last int64
		for w := range 1 + r.IntN(3) {
			t := lo + r.Int64N(hi-lo+1)
			if w > 0 && r.IntN(3) == 0 {
				t = last
			}
			last = t
			out = append(out, UserWrite{User: u, Time: t, Props: randomProps(r, names, len(out) == 0)})
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (o *RandomOptions) defaults() {
	if o.Users <= 0 {
		o.Users = 12
	}
	if o.Events <= 0 {
		o.Events = 300
	}
	if len(o.Names) == 0 {
		o.Names = []string{"a", "b", "c", "d"}
	}
	if o.Start == 0 {
		o.Start = time.Date(2021, 3, 26, 0, 0, 0, 0, time.UTC).UnixMicro()
	}
	if o.Span <= 0 {
		o.Span = 4 * 86400 * 1e6
	}
	if o.Quantum <= 0 {
		o.Quantum = 30 * 60 * 1e6
	}
	if o.TieRate == 0 {
		o.TieRate = 0.3
	}
}

// RandomEvents returns a deterministic pseudo-random data set for seed:
// few users with many events each, few event names, many timestamp ties
// and repeated events, times on a coarse grid with occasional ±1 µs
// offsets. The slice is newly allocated, in arrival order (which differs
// from time order).
func RandomEvents(seed int64, opts RandomOptions) []Ev {
	opts.defaults()
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	users := make([]string, opts.Users)
	for i := range users {
		users[i] = "u" + string(rune('A'+i%26)) + strings.Repeat("x", i/26)
	}
	slots := max(opts.Span/opts.Quantum, 1)
	byUser := make(map[string][]int64, opts.Users)
	evs := make([]Ev, 0, opts.Events)
	for range opts.Events {
		u := users[r.IntN(len(users))]
		prev := byUser[u]
		var t int64
		if len(prev) > 0 && r.Float64() < opts.TieRate {
			t = prev[r.IntN(len(prev))]
		} else {
			t = opts.Start + r.Int64N(slots)*opts.Quantum
			switch r.IntN(10) {
			case 0:
				t++
			case 1:
				t--
			}
		}
		byUser[u] = append(prev, t)
		ev := Ev{User: u, Time: t, Name: opts.Names[r.IntN(len(opts.Names))]}
		if opts.Props {
			ev.Props = randomProps(r, []string{"s", "n", "f", "b"}, false)
		}
		evs = append(evs, ev)
	}
	return evs
}

// UserTrail is one user's trail as the kernels see it.
type UserTrail struct {
	User  string
	Trail trail.Trail
	// Index[i] is the position in the input slice (the arrival index) of
	// the event behind Trail.Times[i].
	Index []int
}

// BuildTrails groups evs by user (users in ascending order), orders each
// user's events by time then arrival, keeps the events matching at least
// one matcher and sets mask bit j when matchers[j] matches (see Match).
// Users without matching events are left out. Trail.ID is the user id.
// All returned memory is newly allocated.
func BuildTrails(evs []Ev, matchers []string) []UserTrail {
	ms := make([]Matcher, len(matchers))
	for i, m := range matchers {
		ms[i] = Matcher{Event: m}
	}
	trails, _ := BuildTrailsWith(Data{Events: evs}, TrailSpec{Matchers: ms})
	return trails
}

// TrailSpec says what BuildTrailsWith puts in the trails: mask bit j for
// Matchers[j] (with its filters, user filters on the current user
// values), the event properties Cols as Trail.Cols and the user
// properties UserCols as Trail.User.
type TrailSpec struct {
	Matchers []Matcher
	Cols     []string
	UserCols []string
}

// Dicts maps each string property (by name) to its dictionary: the sorted
// distinct values in the data. String values are encoded in trails as
// indexes into it, as the query layer encodes them.
type Dicts map[string][]string

// Encode returns the kernels' form of v (spec: trail.Value).
func (d Dicts) Encode(name string, v event.Value) trail.Value {
	switch v.Type {
	case event.TypeNone:
		return trail.Value{}
	case event.TypeString:
		i, _ := slices.BinarySearch(d[name], v.Str)
		return trail.Value{Set: true, Bits: uint64(i)}
	case event.TypeFloat:
		return trail.Value{Set: true, Bits: math.Float64bits(v.Float + 0)}
	}
	return trail.Value{Set: true, Bits: uint64(v.Int)}
}

// BuildTrailsWith is BuildTrails with filters, property columns and user
// values (see TrailSpec); it also returns the string dictionaries of the
// data's event and user properties (user properties under "user:NAME").
func BuildTrailsWith(d Data, spec TrailSpec) ([]UserTrail, Dicts) {
	dicts := Dicts{}
	for _, e := range d.Events {
		for n, v := range e.Props {
			if v.Type == event.TypeString {
				dicts[n] = append(dicts[n], v.Str)
			}
		}
	}
	for _, w := range d.Users {
		for n, v := range w.Props {
			if v.Type == event.TypeString {
				dicts["user:"+n] = append(dicts["user:"+n], v.Str)
			}
		}
	}
	for n, vs := range dicts {
		slices.Sort(vs)
		dicts[n] = slices.Compact(vs)
	}
	current := CurrentUsers(d.Users)
	evs := d.Events
	var out []UserTrail
	for _, user := range byUser(evs) {
		id := evs[user[0]].User
		props := current[id]
		ut := UserTrail{User: id}
		ut.Trail.ID = []byte(id)
		ut.Trail.Cols = make([]trail.Column, len(spec.Cols))
		for _, c := range spec.UserCols {
			ut.Trail.User = append(ut.Trail.User, dicts.Encode("user:"+c, props[c]))
		}
		for _, i := range user {
			var m uint64
			for b, mt := range spec.Matchers {
				if mt.Matches(evs[i], props) {
					m |= 1 << b
				}
			}
			if m == 0 {
				continue
			}
			ut.Trail.Times = append(ut.Trail.Times, evs[i].Time)
			ut.Trail.Mask = append(ut.Trail.Mask, m)
			ut.Index = append(ut.Index, i)
			for j, c := range spec.Cols {
				v := dicts.Encode(c, evs[i].Props[c])
				col := &ut.Trail.Cols[j]
				col.Set = append(col.Set, v.Set)
				col.Bits = append(col.Bits, v.Bits)
			}
		}
		if len(ut.Index) > 0 {
			out = append(out, ut)
		}
	}
	return out, dicts
}

// byUser returns, per user in ascending user order, the positions in evs
// of the user's events ordered by time, then arrival (docs/analytics.md §1 trail
// order).
func byUser(evs []Ev) [][]int {
	idx := make([]int, len(evs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(strings.Compare(evs[a].User, evs[b].User), cmp.Compare(evs[a].Time, evs[b].Time))
	})
	var out [][]int
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && evs[idx[j]].User == evs[idx[i]].User {
			j++
		}
		out = append(out, idx[i:j])
		i = j
	}
	return out
}
