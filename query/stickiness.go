package query

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// StickinessResult is the result of a stickiness query (docs/analytics.md §13).
type StickinessResult struct {
	Kind       string             `json:"kind"` // "stickiness"
	Range      ResolvedRange      `json:"range"`
	TZ         string             `json:"tz"`
	Interval   string             `json:"interval"`
	Cumulative bool               `json:"cumulative"`
	Series     []StickinessSeries `json:"series"`
	List       *ListResult        `json:"list,omitempty"`     // the users of list.series and list.intervals, when asked
	Warnings   []Warning          `json:"warnings,omitempty"` // notes on the query (docs/analytics.md §9): unknown events and values
	Stats      Stats              `json:"stats"`
}

// ResultKind returns "stickiness".
func (r *StickinessResult) ResultKind() string { return "stickiness" }

func (r *StickinessResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
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

// stickiness is a compiled stickiness query (docs/analytics.md §13, PostHog's
// stickiness): per series and breakdown value (each series keeping its
// own top values; "(other)" recomputed by a second pass so users stay
// distinct), the users by number of active buckets; with a list, the
// users of one count.
type stickiness struct {
	e      *Engine
	p      *plan
	spec   analysis.StickinessSpec
	iv     timebucket.Interval
	bounds []int64
	bd     *breakdown
	list   *analysis.StickinessList
	run    func(analysis.StickinessSpec) (analysis.StickinessResult, error) // one pass
	kr     analysis.StickinessResult                                        // the main pass's answer
}

func init() { register(kind{name: "stickiness", order: 5, compile: compileStickiness}) }

// compileStickiness checks and compiles a stickiness query.
func compileStickiness(ctx context.Context, e *Engine, p *plan) (compiled, error) {
	q := p.q
	st := &stickiness{e: e, p: p}
	var err error
	if st.iv, _, st.bounds, err = p.calendarBounds(ctx, "day"); err != nil {
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
	st.spec = analysis.StickinessSpec{Bounds: st.bounds, From: p.from, To: p.to, MinEvents: minEvents}
	for i, s := range q.Series {
		f := fieldIdx("series", i)
		if s.Math != "" || s.Property != "" {
			return nil, invalid(f+".math", "stickiness series take no math or property: they count users by active %ss", st.iv)
		}
		bit, err := p.addMatcher(Matcher{Event: s.Event, Where: s.Where}, f, true)
		if err != nil {
			return nil, err
		}
		st.spec.Series = append(st.spec.Series, bit)
	}
	if st.bd, err = p.parseBreakdown(); err != nil {
		return nil, err
	}
	if st.bd != nil {
		st.spec.Breakdown = st.bd.src
	}
	if q.List != nil {
		if st.list, err = st.compileList(q.List); err != nil {
			return nil, err
		}
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
	if minEvents == 1 && (st.bd == nil || st.bd.src.From != analysis.KeyEvent) {
		for i, s := range q.Series {
			if s.Event == AnyEvent && len(s.Where) == 0 {
				p.thin = e.thinning(st.spec.Series[i], st.bounds, p.from, p.to)
				break
			}
		}
	}
	return st, nil
}

// compileList checks a list's series and count and returns the kernel's
// list.
func (st *stickiness) compileList(l *List) (*analysis.StickinessList, error) {
	q := st.p.q
	keep, err := st.p.checkList("series", "intervals")
	if err != nil {
		return nil, err
	}
	if l.Series < 0 || l.Series >= len(q.Series) {
		return nil, invalid("list.series", "want a series index from 0 to %d, found %d", len(q.Series)-1, l.Series)
	}
	if l.Intervals < 1 || l.Intervals > len(st.bounds)-1 {
		return nil, invalid("list.intervals", "want 1 to %d %ss, found %d", len(st.bounds)-1, st.iv, l.Intervals)
	}
	return &analysis.StickinessList{Series: l.Series, Intervals: l.Intervals, AtLeast: q.Cumulative, Keep: keep}, nil
}

// passes runs the main pass (listing the users when there is no
// breakdown).
func (st *stickiness) passes(ctx context.Context) (err error) {
	st.run = passRunner(ctx, st.e, st.p, st.p.from, st.p.to, analysis.NewStickiness, (*analysis.Stickiness).Result)
	main := st.spec
	if st.bd == nil {
		main.List = st.list
	}
	st.kr, err = st.run(main)
	return err
}

// finalize ranks each series' breakdown values (recomputing "(other)"),
// renders the series and lists the users.
func (st *stickiness) finalize(ctx context.Context) (Result, error) {
	p, q := st.p, st.p.q
	merge := timer()
	rows := make([][]analysis.StickinessRow, len(q.Series)) // per series, in result order
	for _, row := range st.kr.Rows {
		rows[row.Series] = append(rows[row.Series], row)
	}
	ranks := make([]ranked, len(q.Series))
	if st.bd != nil {
		if err := st.rankRows(ctx, rows, ranks); err != nil {
			return nil, err
		}
	}
	res := &StickinessResult{Kind: "stickiness", Range: p.resolvedRange(), TZ: p.loc.String(), Interval: st.iv.String(), Cumulative: q.Cumulative}
	res.Series = st.render(rows)
	p.stats.MergeMS += merge()
	if list := st.list; list != nil {
		set := func(s analysis.StickinessSpec, src analysis.KeySource, g groupFunc, k analysis.Key) analysis.StickinessSpec {
			s.Breakdown, s.Group, s.List, list.Key = src, g, list, k
			return s
		}
		var err error
		if res.List, err = kindList(p, st.bd, &ranks[list.Series], st.kr.List, st.spec, set, st.run,
			func(r analysis.StickinessResult) *analysis.UserList { return r.List }); err != nil {
			return nil, err
		}
	}
	res.Stats = p.stats
	return res, nil
}

// rankRows ranks each series' values by users, keeps rows (per series)
// in rank order and recomputes the "(other)" rows by a second pass.
func (st *stickiness) rankRows(ctx context.Context, rows [][]analysis.StickinessRow, ranks []ranked) error {
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
		if ranks[s], err = st.p.rank(ctx, st.bd, keys, totals); err != nil {
			return err
		}
		rows[s] = rows[s][:0]
		for _, k := range ranks[s].order {
			rows[s] = append(rows[s], byKey[k])
		}
		if ranks[s].other {
			recompute = append(recompute, s)
		}
	}
	if len(recompute) == 0 {
		return nil
	}
	// One single-series accumulator per series, counting only the values
	// not kept, under otherKey.
	accs, err := scanMerge(ctx, st.e, st.p, span{from: st.p.from, to: st.p.to}, func(int) (multi[*analysis.Stickiness], error) {
		var m multi[*analysis.Stickiness]
		for _, s := range recompute {
			one := st.spec
			one.Series = st.spec.Series[s : s+1]
			r := &ranks[s]
			one.Group = &analysis.KeyGroup{Kept: r.order, Other: otherKey, DropKept: true}
			a, err := analysis.NewStickiness(one)
			if err != nil {
				return nil, err
			}
			m = append(m, a)
		}
		return m, nil
	}, multi[*analysis.Stickiness].merge)
	if err != nil {
		return err
	}
	for j, s := range recompute {
		other := analysis.StickinessRow{Series: s, Key: otherKey, Counts: make([]int64, len(st.bounds)-1)}
		for _, row := range accs[j].Result().Rows {
			other.Counts, other.Users = row.Counts, row.Users
		}
		rows[s] = append(rows[s], other)
	}
	return nil
}

// render renders the rows of each series (cumulated when the query asks).
func (st *stickiness) render(rows [][]analysis.StickinessRow) []StickinessSeries {
	p, q := st.p, st.p.q
	var out []StickinessSeries
	for s, srows := range rows {
		for _, row := range srows {
			ss := StickinessSeries{Label: q.Series[s].Label, Event: q.Series[s].Event, Counts: row.Counts, Users: row.Users}
			if ss.Label == "" {
				ss.Label = ss.Event
			}
			if st.bd != nil {
				ss.BreakdownValue = ptr(p.label(st.bd, row.Key))
			}
			if q.Cumulative {
				for i := len(ss.Counts) - 2; i >= 0; i-- {
					ss.Counts[i] += ss.Counts[i+1]
				}
			}
			out = append(out, ss)
		}
	}
	return out
}

// writeTable prints one row per number of active buckets and one
// column per series (and breakdown value).
func (r *StickinessResult) writeTable(w io.Writer) {
	how := "users active in exactly n"
	if r.Cumulative {
		how = "users active in at least n"
	}
	fmt.Fprintf(w, "stickiness %s .. %s (%s): %s %ss\n", r.Range.From, r.Range.To, r.TZ, how, r.Interval)
	var hdr strings.Builder
	fmt.Fprintf(&hdr, "%ss\t", r.Interval)
	for _, s := range r.Series {
		fmt.Fprintf(&hdr, "%s\t", seriesName(s.Label, s.BreakdownValue))
	}
	fmt.Fprintln(w, hdr.String())
	if len(r.Series) > 0 {
		for i := range r.Series[0].Counts {
			fmt.Fprintf(w, "%d\t", i+1)
			for _, s := range r.Series {
				fmt.Fprintf(w, "%d\t", s.Counts[i])
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprint(w, "users\t")
	for _, s := range r.Series {
		fmt.Fprintf(w, "%d\t", s.Users)
	}
	fmt.Fprintln(w)
	if l := r.List; l != nil {
		n := "exactly"
		if r.Cumulative {
			n = "at least"
		}
		writeList(w, fmt.Sprintf("users of series %d active in %s %d %ss", l.Series, n, l.Intervals, r.Interval), l)
	}
}

// stickinessCSV are the CSV columns of a stickiness result (WriteCSV; docs/queries.md).
var stickinessCSV = []string{"label", "event", "breakdown_value", "intervals", "users"}

// writeCSV writes one row per series × breakdown value × number of
// active intervals.
func (r *StickinessResult) writeCSV(cw *csv.Writer) {
	cw.Write(stickinessCSV)
	for _, s := range r.Series {
		for i, n := range s.Counts {
			cw.Write([]string{s.Label, s.Event, strp(s.BreakdownValue), strconv.Itoa(i + 1), inum(n)})
		}
	}
}
