// Package testutil holds test support shared by Spur's packages: a seeded
// random event generator with many timestamp ties, deliberately naive
// reference implementations of the analyses (spec/analytics.md §4-§6) that
// work directly on event lists, conversion of event lists to the analysis
// kernels' Trails, and a reader/writer for golden case files.
//
// The naive implementations follow the spec text literally and favour
// obviousness over speed; differential tests compare the kernels against
// them. Nothing here is for production paths.
package testutil

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/spurdb/spur/query/analysis"
)

// Ev is one event of a test data set. A slice of Ev is in arrival order:
// among events of one user with equal Time, the earlier element arrived
// first (spec §1 trail order).
type Ev struct {
	User string
	Time int64 // UTC microseconds
	Name string
}

// Any is the matcher name that matches every event (spec §3).
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
		evs = append(evs, Ev{User: u, Time: t, Name: opts.Names[r.IntN(len(opts.Names))]})
	}
	return evs
}

// UserTrail is one user's trail as the kernels see it.
type UserTrail struct {
	User  string
	Trail analysis.Trail
	// Index[i] is the position in the input slice (the arrival index) of
	// the event behind Trail.Times[i].
	Index []int
}

// BuildTrails groups evs by user (users in ascending order), orders each
// user's events by time then arrival, keeps the events matching at least
// one matcher and sets mask bit j when matchers[j] matches (see Match).
// Users without matching events are left out. All returned memory is newly
// allocated.
func BuildTrails(evs []Ev, matchers []string) []UserTrail {
	var out []UserTrail
	for _, user := range byUser(evs) {
		ut := UserTrail{User: evs[user[0]].User}
		for _, i := range user {
			var m uint64
			for b, mt := range matchers {
				if Match(mt, evs[i].Name) {
					m |= 1 << b
				}
			}
			if m != 0 {
				ut.Trail.Times = append(ut.Trail.Times, evs[i].Time)
				ut.Trail.Mask = append(ut.Trail.Mask, m)
				ut.Index = append(ut.Index, i)
			}
		}
		if len(ut.Index) > 0 {
			out = append(out, ut)
		}
	}
	return out
}

// byUser returns, per user in ascending user order, the positions in evs
// of the user's events ordered by time, then arrival (spec §1 trail
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
