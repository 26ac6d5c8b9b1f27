package testutil

import (
	"cmp"
	"math"
	"math/big"
	"slices"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// AttributionQuery is a query-time attribution for NaiveAttribution (docs/analytics.md
// §10). Touchpoints[i] has lookback Lookbacks[i] (µs); Subsequent is nil
// for none; Interval 0 means no buckets.
type AttributionQuery struct {
	Conversion  Matcher
	Touchpoints []Matcher
	Lookbacks   []int64
	Channel     string
	Model       analysis.AttributionModel
	HalfLife    int64 // µs
	First       bool
	Value       string // conversion value property, "" none
	Subsequent  *Matcher
	SubWindow   int64  // µs
	SubValue    string // subsequent value property, "" none
	Interval    timebucket.Interval
	WeekStart   timebucket.WeekStart
	From, To    int64 // range, UTC µs
	Common
}

// AttributionCell is the credit of one naive channel row (or bucket):
// sums of shares and share × value, the users with a positive
// conversion share (sorted).
type AttributionCell struct {
	Conversions, Value, SubEvents, SubValue float64
	Users                                   []string
}

// AttributionRow is one channel × breakdown value of a naive attribution.
type AttributionRow struct {
	Channel, Value string
	Total          AttributionCell
	Buckets        []AttributionCell
}

// AttributionTotals are the plain counts of a naive attribution.
type AttributionTotals struct {
	Conversions, Users, SubEvents int64
	Value, SubValue               float64
}

// naiveShare is one touchpoint's (or the unattributed) share.
type naiveShare struct {
	channel string
	share   float64
}

// NaiveAttribution attributes every conversion and subsequent event of
// every user by re-reading the user's events for each (docs/analytics.md §10 word by
// word): eligible touchpoints are the events before or at the
// conversion's instant matching a touchpoint matcher (the first one that
// matches decides the lookback) and not the conversion matcher; shares by
// the model's formula; sums over conversions exact (big.Float). Rows are
// ordered by breakdown value (ranked by conversions, descending, then
// value; "(other)" last), then by conversions descending, subsequent
// events descending, channel.
func NaiveAttribution(d Data, q AttributionQuery) ([]AttributionRow, AttributionTotals) {
	loc := q.loc()
	users := CurrentUsers(d.Users)
	conv := q.matcher(q.Conversion.Event, q.Conversion.Where)
	var sub Matcher
	if q.Subsequent != nil {
		sub = q.matcher(q.Subsequent.Event, q.Subsequent.Where)
	}
	var bounds []int64
	if q.Interval != 0 {
		bounds = timebucket.Bounds(q.From, q.To, q.Interval, loc, q.WeekStart)
	}
	// credit is one credited share: a conversion's (sub false) or a
	// subsequent event's.
	type credit struct {
		user, channel, label string
		share, value         float64
		sub                  bool
		bucket               int
	}
	var credits []credit
	var tot AttributionTotals
	totValue, totSub := new(big.Float).SetPrec(4096), new(big.Float).SetPrec(4096)
	for u, evs := range q.userEvents(d) {
		props := users[u]
		sharesAt := func(c Ev) []naiveShare {
			type tp struct {
				e    Ev
				prio int
			}
			var el []tp
			for _, e := range evs {
				if e.Time > c.Time || conv.Matches(e, props) {
					continue
				}
				for p, m := range q.Touchpoints {
					if q.matcher(m.Event, m.Where).Matches(e, props) {
						if c.Time-e.Time <= q.Lookbacks[p] {
							el = append(el, tp{e, p})
						}
						break
					}
				}
			}
			ch := func(e Ev) string { return Render(e.Props[q.Channel], loc) }
			n := len(el)
			if n == 0 {
				return []naiveShare{{"(unattributed)", 1}}
			}
			var out []naiveShare
			switch q.Model {
			case analysis.LastTouch:
				best := el[0]
				for _, x := range el {
					if x.prio < best.prio || (x.prio == best.prio && x.e.Time >= best.e.Time) {
						best = x
					}
				}
				out = []naiveShare{{ch(best.e), 1}}
			case analysis.FirstTouch:
				out = []naiveShare{{ch(el[0].e), 1}}
			case analysis.Linear:
				for _, x := range el {
					out = append(out, naiveShare{ch(x.e), 1 / float64(n)})
				}
			case analysis.PositionBased:
				for k, x := range el {
					s := 0.2 / float64(n-2)
					switch {
					case n == 1:
						s = 1
					case n == 2:
						s = 0.5
					case k == 0 || k == n-1:
						s = 0.4
					}
					out = append(out, naiveShare{ch(x.e), s})
				}
			case analysis.TimeDecay:
				// 2^(−age/half-life), normalised; the common factor
				// 2^(−youngest age/half-life) cancels, and dividing it out
				// keeps old touchpoints from underflowing to 0/0.
				youngest := el[n-1].e.Time
				var ws []float64
				var sum float64
				for _, x := range el {
					w := math.Exp2(-float64(youngest-x.e.Time) / float64(q.HalfLife))
					ws = append(ws, w)
					sum += w
				}
				for k, x := range el {
					out = append(out, naiveShare{ch(x.e), ws[k] / sum})
				}
			}
			// one share per channel
			byCh := map[string]float64{}
			var order []string
			for _, s := range out {
				if _, ok := byCh[s.channel]; !ok {
					order = append(order, s.channel)
				}
				byCh[s.channel] += s.share
			}
			out = out[:0]
			for _, c := range order {
				out = append(out, naiveShare{c, byCh[c]})
			}
			return out
		}
		var convs []Ev
		for _, e := range evs {
			if conv.Matches(e, props) {
				convs = append(convs, e)
				if q.First {
					break
				}
			}
		}
		bucket := func(t int64) int {
			for b := 0; b+1 < len(bounds); b++ {
				if t >= bounds[b] && t < bounds[b+1] {
					return b
				}
			}
			return -1
		}
		num := func(e Ev, prop string) float64 {
			v := e.Props[prop]
			switch v.Type {
			case event.TypeFloat:
				return v.Float + 0
			case event.TypeInt:
				return float64(v.Int)
			}
			return 0
		}
		counted := false
		for _, c := range convs {
			if c.Time < q.From || c.Time >= q.To {
				continue
			}
			v := num(c, q.Value)
			tot.Conversions++
			totValue.Add(totValue, new(big.Float).SetFloat64(v))
			if !counted {
				counted = true
				tot.Users++
			}
			for _, s := range sharesAt(c) {
				credits = append(credits, credit{user: u, channel: s.channel, label: q.label(c, users), share: s.share, value: s.share * v, bucket: bucket(c.Time)})
			}
		}
		if q.Subsequent == nil {
			continue
		}
		for _, e := range evs {
			if e.Time < q.From || e.Time >= q.To || !sub.Matches(e, props) {
				continue
			}
			v := num(e, q.SubValue)
			tot.SubEvents++
			totSub.Add(totSub, new(big.Float).SetFloat64(v))
			var latest *Ev
			for i := range convs {
				if convs[i].Time <= e.Time {
					latest = &convs[i]
				}
			}
			shares := []naiveShare{{"(unattributed)", 1}}
			if latest != nil && e.Time-latest.Time <= q.SubWindow {
				shares = sharesAt(*latest)
			}
			for _, s := range shares {
				credits = append(credits, credit{user: u, channel: s.channel, label: q.label(e, users), share: s.share, value: s.share * v, sub: true, bucket: bucket(e.Time)})
			}
		}
	}
	tot.Value, _ = totValue.Float64()
	tot.SubValue, _ = totSub.Float64()
	// cell sums credits exactly.
	cell := func(keep func(credit) bool) AttributionCell {
		sums := [4]*big.Float{}
		for i := range sums {
			sums[i] = new(big.Float).SetPrec(4096)
		}
		seen := map[string]bool{}
		for _, c := range credits {
			if !keep(c) {
				continue
			}
			i := 0
			if c.sub {
				i = 2
			}
			sums[i].Add(sums[i], new(big.Float).SetFloat64(c.share))
			sums[i+1].Add(sums[i+1], new(big.Float).SetFloat64(c.value))
			if !c.sub && c.share > 0 {
				seen[c.user] = true
			}
		}
		var out AttributionCell
		f := [4]*float64{&out.Conversions, &out.Value, &out.SubEvents, &out.SubValue}
		for i, s := range sums {
			*f[i], _ = s.Float64()
			*f[i] += 0
		}
		for u := range seen {
			out.Users = append(out.Users, u)
		}
		slices.Sort(out.Users)
		return out
	}
	rowsOf := func(value string, inGroup func(string) bool) []AttributionRow {
		channels := map[string]bool{}
		for _, c := range credits {
			if inGroup(c.label) {
				channels[c.channel] = true
			}
		}
		var rows []AttributionRow
		for ch := range channels {
			r := AttributionRow{Channel: ch, Value: value,
				Total: cell(func(c credit) bool { return c.channel == ch && inGroup(c.label) })}
			for b := 0; b+1 < len(bounds); b++ {
				r.Buckets = append(r.Buckets, cell(func(c credit) bool { return c.channel == ch && inGroup(c.label) && c.bucket == b }))
			}
			rows = append(rows, r)
		}
		slices.SortFunc(rows, func(a, b AttributionRow) int {
			return cmp.Or(cmp.Compare(b.Total.Conversions, a.Total.Conversions), cmp.Compare(b.Total.SubEvents, a.Total.SubEvents), cmp.Compare(a.Channel, b.Channel))
		})
		return rows
	}
	if q.Breakdown == nil {
		return rowsOf("", func(string) bool { return true }), tot
	}
	totals := map[string]float64{}
	for _, c := range credits {
		if _, ok := totals[c.label]; !ok {
			totals[c.label] = cell(func(x credit) bool { return x.label == c.label }).Conversions
		}
	}
	kept, other := rankLabels(totals, q.Breakdown.Limit)
	var out []AttributionRow
	for _, l := range kept {
		out = append(out, rowsOf(l, func(x string) bool { return x == l })...)
	}
	if other {
		out = append(out, rowsOf(Other, func(x string) bool { return !slices.Contains(kept, x) })...)
	}
	return out, tot
}
