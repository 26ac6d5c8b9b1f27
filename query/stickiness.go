package query

import (
	"context"

	"github.com/spurdb/spur/query/analysis"
)

// StickinessResult is the result of a stickiness query (spec §13).
type StickinessResult struct {
	Kind       string             `json:"kind"` // "stickiness"
	Range      ResolvedRange      `json:"range"`
	TZ         string             `json:"tz"`
	Interval   string             `json:"interval"`
	Cumulative bool               `json:"cumulative"`
	Series     []StickinessSeries `json:"series"`
	List       *ListResult        `json:"list,omitempty"`     // the users of list.series and list.intervals, when asked
	Warnings   []Warning          `json:"warnings,omitempty"` // notes on the query (spec §9): unknown events and values
	Stats      Stats              `json:"stats"`
}

// StickinessSeries is one series (× breakdown value) of a stickiness
// result: Counts[i] is the number of users with exactly i+1 active
// buckets (cumulative: at least i+1), i+1 = 1..N where N is the number of
// buckets the range touches; Users the users with at least one.
type StickinessSeries struct {
	Label          string  `json:"label"`
	Event          string  `json:"event"`
	BreakdownValue *string `json:"breakdown_value"` // null without a breakdown
	Counts         []int64 `json:"counts"`
	Users          int64   `json:"users"`
}

// runStickiness plans and runs a stickiness query (spec §13, PostHog's
// stickiness): per series and breakdown value (each series keeping its
// own top values; "(other)" recomputed by a second pass so users stay
// distinct), the users by number of active buckets; with a list, the
// users of one count.
func (e *Engine) runStickiness(ctx context.Context, p *plan) (*StickinessResult, error) {
	q := p.q
	iv, _, bounds, err := p.calendarBounds(ctx, "day")
	if err != nil {
		return nil, err
	}
	if len(q.Series) == 0 {
		return nil, invalid("series", "stickiness needs at least one series, e.g. [{\"event\": \"app_open\"}]")
	}
	minEvents := q.MinEvents
	if minEvents == 0 {
		minEvents = 1
	}
	if minEvents < 1 || minEvents > analysis.MaxStickinessEvents {
		return nil, invalid("min_events", "want 1 to %d events per bucket, found %d", analysis.MaxStickinessEvents, q.MinEvents)
	}
	spec := analysis.StickinessSpec{Bounds: bounds, From: p.from, To: p.to, MinEvents: minEvents}
	for i, s := range q.Series {
		f := fieldIdx("series", i)
		if s.Math != "" || s.Property != "" {
			return nil, invalid(f+".math", "stickiness series take no math or property: they count users by active %ss", iv)
		}
		bit, err := p.addMatcher(Matcher{Event: s.Event, Where: s.Where}, f, true)
		if err != nil {
			return nil, err
		}
		spec.Series = append(spec.Series, bit)
	}
	bd, err := p.parseBreakdown()
	if err != nil {
		return nil, err
	}
	if bd != nil {
		spec.Breakdown = bd.src
	}
	var list *analysis.StickinessList
	if l := q.List; l != nil {
		keep, err := p.checkList("series", "intervals")
		if err != nil {
			return nil, err
		}
		if l.Series < 0 || l.Series >= len(q.Series) {
			return nil, invalid("list.series", "want a series index from 0 to %d, found %d", len(q.Series)-1, l.Series)
		}
		if l.Intervals < 1 || l.Intervals > len(bounds)-1 {
			return nil, invalid("list.intervals", "want 1 to %d %ss, found %d", len(bounds)-1, iv, l.Intervals)
		}
		list = &analysis.StickinessList{Series: l.Series, Intervals: l.Intervals, AtLeast: q.Cumulative, Keep: keep}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	// With one event a bucket, the kernel only asks in which buckets a
	// user has an event of a series: rows of one series alone may be
	// thinned per bucket (unless each row's value is a key). Thinning
	// pays for dense matchers only: on 10M generated events by day, a
	// "$any" series took 56 ms unthinned and 48 ms thinned, an app_open
	// series (4 % of rows) 30 ms unthinned and 45 ms thinned (the
	// thinning row filter reads every row).
	if minEvents == 1 && (bd == nil || bd.src.From != analysis.KeyEvent) {
		for i, s := range q.Series {
			if s.Event == AnyEvent && len(s.Where) == 0 {
				p.thin = e.thinning(spec.Series[i], bounds, p.from, p.to)
				break
			}
		}
	}
	run := passRunner(ctx, e, p, p.from, p.to, analysis.NewStickiness, (*analysis.Stickiness).Result)
	main := spec
	if bd == nil {
		main.List = list
	}
	kr, err := run(main)
	if err != nil {
		return nil, err
	}
	merge := timer()
	rows := make([][]analysis.StickinessRow, len(q.Series)) // per series, in result order
	for _, row := range kr.Rows {
		rows[row.Series] = append(rows[row.Series], row)
	}
	ranks := make([]ranked, len(q.Series))
	if bd != nil {
		var recompute []int // series with an "(other)" row
		for s := range rows {
			keys := make([]analysis.Key, len(rows[s]))
			totals := make([]float64, len(rows[s]))
			byKey := map[analysis.Key]analysis.StickinessRow{}
			for i, row := range rows[s] {
				keys[i], totals[i] = row.Key, float64(row.Users)
				byKey[row.Key] = row
			}
			var err error
			if ranks[s], err = p.rank(ctx, bd, keys, totals); err != nil {
				return nil, err
			}
			rows[s] = rows[s][:0]
			for _, k := range ranks[s].order {
				rows[s] = append(rows[s], byKey[k])
			}
			if ranks[s].other {
				recompute = append(recompute, s)
			}
		}
		if len(recompute) > 0 {
			// One single-series accumulator per series, counting only the
			// values not kept, under otherKey.
			accs, err := runKernel(ctx, e, p, p.from, p.to, func() (multi[*analysis.Stickiness], error) {
				var m multi[*analysis.Stickiness]
				for _, s := range recompute {
					one := spec
					one.Series = spec.Series[s : s+1]
					r := &ranks[s]
					one.Group = &analysis.KeyGroup{Kept: r.order, Other: otherKey, DropKept: true}
					a, err := analysis.NewStickiness(one)
					if err != nil {
						return nil, err
					}
					m = append(m, a)
				}
				return m, nil
			})
			if err != nil {
				return nil, err
			}
			for j, s := range recompute {
				other := analysis.StickinessRow{Series: s, Key: otherKey, Counts: make([]int64, len(bounds)-1)}
				for _, row := range accs[j].Result().Rows {
					other.Counts, other.Users = row.Counts, row.Users
				}
				rows[s] = append(rows[s], other)
			}
		}
	}
	res := &StickinessResult{Kind: "stickiness", Range: p.resolvedRange(), TZ: p.loc.String(), Interval: iv.String(), Cumulative: q.Cumulative}
	for s, srows := range rows {
		for _, row := range srows {
			ss := StickinessSeries{Label: q.Series[s].Label, Event: q.Series[s].Event, Counts: row.Counts, Users: row.Users}
			if ss.Label == "" {
				ss.Label = ss.Event
			}
			if bd != nil {
				ss.BreakdownValue = ptr(p.label(bd, row.Key))
			}
			if q.Cumulative {
				for i := len(ss.Counts) - 2; i >= 0; i-- {
					ss.Counts[i] += ss.Counts[i+1]
				}
			}
			res.Series = append(res.Series, ss)
		}
	}
	p.stats.MergeMS = merge()
	if list != nil {
		set := func(s analysis.StickinessSpec, src analysis.KeySource, g groupFunc, k analysis.Key) analysis.StickinessSpec {
			s.Breakdown, s.Group, s.List, list.Key = src, g, list, k
			return s
		}
		if res.List, err = kindList(p, bd, &ranks[list.Series], kr.List, spec, set, run,
			func(r analysis.StickinessResult) *analysis.UserList { return r.List }); err != nil {
			return nil, err
		}
	}
	res.Stats = p.stats
	return res, nil
}
