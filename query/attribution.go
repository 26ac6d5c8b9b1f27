package query

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
)

// defaultHalfLife is time_decay's half-life when the query gives none
// (docs/analytics.md §10).
const defaultHalfLife = "7d"

// unattributedLabel renders analysis.Unattributed.
const unattributedLabel = "(unattributed)"

// AttributionResult is the result of an attribution query (docs/analytics.md §10).
type AttributionResult struct {
	Kind     string               `json:"kind"` // "attribution"
	Range    ResolvedRange        `json:"range"`
	TZ       string               `json:"tz"`
	Model    string               `json:"model"`
	Interval string               `json:"interval,omitempty"`
	Total    AttributionTotal     `json:"total"`
	Channels []AttributionChannel `json:"channels"`
	List     *ListResult          `json:"list,omitempty"`     // the users credited in list.channel, when asked
	Warnings []Warning            `json:"warnings,omitempty"` // notes on the query (docs/analytics.md §9): unknown events and values
	Stats    Stats                `json:"stats"`
}

// ResultKind returns "attribution".
func (r *AttributionResult) ResultKind() string { return "attribution" }

func (r *AttributionResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
}

// AttributionTotal holds the plain counts: conversions counted, users with
// one, the sum of their values, and the subsequent events and their value
// (null without subsequent). Σ over channels equals them.
type AttributionTotal struct {
	Conversions int64                `json:"conversions"`
	Users       int64                `json:"users"`
	Value       float64              `json:"value"`
	Subsequent  *AttributionSubTotal `json:"subsequent,omitempty"`
}

// AttributionSubTotal counts the subsequent events and their value.
type AttributionSubTotal struct {
	Events int64   `json:"events"`
	Value  float64 `json:"value"`
}

// AttributionSub is the credit of subsequent events: Σ inherited shares
// and Σ share × value.
type AttributionSub struct {
	Events float64 `json:"events"`
	Value  float64 `json:"value"`
}

// AttributionChannel is the credit of one channel value (× breakdown
// value): Conversions the sum of the conversions' shares, Users those with
// a positive share, Value Σ share × value, Subsequent the subsequent
// events' credit (null without subsequent), Buckets per interval bucket
// (without interval: none).
type AttributionChannel struct {
	Channel        string              `json:"channel"`
	BreakdownValue *string             `json:"breakdown_value"` // null without a breakdown
	Conversions    float64             `json:"conversions"`
	Users          int64               `json:"users"`
	Value          float64             `json:"value"`
	Subsequent     *AttributionSub     `json:"subsequent,omitempty"`
	Buckets        []AttributionBucket `json:"buckets,omitempty"`
}

// AttributionBucket is a channel's credit in one bucket (conversions by
// their time, subsequent events by theirs).
type AttributionBucket struct {
	Start       string          `json:"start"`
	Conversions float64         `json:"conversions"`
	Users       int64           `json:"users"`
	Value       float64         `json:"value"`
	Subsequent  *AttributionSub `json:"subsequent,omitempty"`
	Incomplete  bool            `json:"incomplete"`
}

// valueCol returns the trail column of a numeric event property named at
// field (none for "").
func (p *plan) valueCol(name, field string) (analysis.ValueCol, error) {
	if name == "" {
		return analysis.ValueCol{Col: -1}, nil
	}
	t, ok := p.propType(name, false)
	if !ok {
		return analysis.ValueCol{}, p.unknownProp(field, name, false)
	}
	if t != event.TypeInt && t != event.TypeFloat {
		return analysis.ValueCol{}, invalid(field, "a value is an int or float property; %q is %s", name, t)
	}
	return analysis.ValueCol{Col: p.addCol(name, false), Float: t == event.TypeFloat}, nil
}

// attribution is a compiled attribution query (docs/analytics.md §10; Airbridge's
// default model, Mixpanel's and Airbridge's models): per channel value
// (and breakdown value, bucket) the conversions' shares, users, value and
// subsequent events. A breakdown's "(other)" is recomputed by a second
// pass so users stay distinct.
type attribution struct {
	e          *Engine
	p          *plan
	spec       analysis.AttributionSpec
	channelCol *column
	bounds     []int64 // interval buckets; nil without interval
	bd         *breakdown
	list       *analysis.AttributionList
	scanFrom   int64
	run        func(analysis.AttributionSpec) (analysis.AttributionResult, error) // one pass
	kr         analysis.AttributionResult                                         // the main pass's answer
}

func init() { register(kind{name: "attribution", order: 8, compile: compileAttribution}) }

// compileAttribution checks and compiles an attribution query.
func compileAttribution(ctx context.Context, e *Engine, p *plan) (compiled, error) {
	q := p.q
	a := &attribution{e: e, p: p, spec: analysis.AttributionSpec{From: p.from, To: p.to, Subsequent: -1}}
	if err := a.compileModel(); err != nil {
		return nil, err
	}
	var err error
	if q.Conversion == nil {
		return nil, invalid("conversion", "attribution needs a conversion matcher, e.g. {\"event\": \"install\"}")
	}
	if a.spec.Conversion, err = p.addMatcher(*q.Conversion, "conversion", true); err != nil {
		return nil, err
	}
	maxLook, err := a.compileTouchpoints()
	if err != nil {
		return nil, err
	}
	if err := a.compileValues(); err != nil {
		return nil, err
	}
	if q.Interval != "" {
		if _, _, a.bounds, err = p.calendarBounds(ctx, ""); err != nil {
			return nil, err
		}
		a.spec.Bounds = a.bounds
	}
	if a.bd, err = p.parseBreakdown(); err != nil {
		return nil, err
	}
	if a.bd != nil {
		a.spec.Breakdown = a.bd.src
	}
	if q.List != nil {
		keep, err := p.checkList("channel")
		if err != nil {
			return nil, err
		}
		if q.List.Channel == nil {
			return nil, invalid("list.channel", "an attribution list takes the channel whose users to list, as the result renders it")
		}
		a.list = &analysis.AttributionList{Keep: keep}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	// Touchpoints reach back a lookback before the conversions, and
	// subsequent events inherit conversions up to a window before them;
	// with first conversions, every user's trail from the beginning.
	a.scanFrom = p.from - maxLook
	if a.spec.Subsequent >= 0 {
		a.scanFrom -= a.spec.SubsequentWindow
	}
	if a.spec.First {
		a.scanFrom = minTime
	}
	return a, nil
}

// compileModel reads the model, its half-life and the conversions
// counted.
func (a *attribution) compileModel() error {
	q := a.p.q
	var err error
	if a.spec.Model, err = analysis.ParseAttributionModel(q.Model); err != nil {
		return invalid("model", "%v", err)
	}
	hl := q.HalfLife
	if hl == "" {
		hl = defaultHalfLife
	}
	if a.spec.HalfLife, err = ParseDuration(hl); err != nil || a.spec.HalfLife <= 0 {
		return invalid("half_life", "want a positive duration such as \"7d\", found %q", q.HalfLife)
	}
	switch q.Conversions {
	case "", "all":
	case "first":
		a.spec.First = true
	default:
		return invalid("conversions", "want \"all\" or \"first\", found %q", q.Conversions)
	}
	return nil
}

// compileTouchpoints compiles the touchpoint matchers and returns the
// longest lookback.
func (a *attribution) compileTouchpoints() (int64, error) {
	q, p := a.p.q, a.p
	if n := len(q.Touchpoints); n == 0 || n > analysis.MaxTouchpoints {
		return 0, invalid("touchpoints", "want 1 to %d touchpoint matchers in priority order, e.g. [{\"event\": \"ad_click\", \"lookback\": \"7d\"}], found %d", analysis.MaxTouchpoints, n)
	}
	var maxLook int64
	for i, tp := range q.Touchpoints {
		f := fieldIdx("touchpoints", i)
		lb, err := ParseDuration(tp.Lookback)
		if err != nil {
			return 0, invalid(f+".lookback", "want a lookback duration such as \"7d\" (required), found %q", tp.Lookback)
		}
		bit, err := p.addMatcher(Matcher{Event: tp.Event, Where: tp.Where}, f, true)
		if err != nil {
			return 0, err
		}
		a.spec.Touchpoints = append(a.spec.Touchpoints, analysis.Touchpoint{Bit: bit, Lookback: lb})
		maxLook = max(maxLook, lb)
	}
	return maxLook, nil
}

// compileValues compiles the channel property, the conversion's value
// and the subsequent events.
func (a *attribution) compileValues() error {
	q, p := a.p.q, a.p
	if q.Channel == "" {
		return invalid("channel", "attribution needs the touchpoint property to credit, e.g. \"channel\"")
	}
	if _, ok := p.propType(q.Channel, false); !ok {
		return p.unknownProp("channel", q.Channel, false)
	}
	a.spec.Channel = p.addCol(q.Channel, false)
	a.channelCol = p.cols[a.spec.Channel]
	var err error
	if a.spec.Value, err = p.valueCol(q.Value, "value"); err != nil {
		return err
	}
	a.spec.SubsequentValue = analysis.ValueCol{Col: -1}
	if s := q.Subsequent; s != nil {
		if a.spec.SubsequentWindow, err = ParseDuration(s.Window); err != nil {
			return invalid("subsequent.window", "want a window duration such as \"30d\" (required), found %q", s.Window)
		}
		if a.spec.Subsequent, err = p.addMatcher(Matcher{Event: s.Event, Where: s.Where}, "subsequent", true); err != nil {
			return err
		}
		if a.spec.SubsequentValue, err = p.valueCol(s.Value, "subsequent.value"); err != nil {
			return err
		}
	}
	return nil
}

// passes runs the main pass.
func (a *attribution) passes(ctx context.Context) (err error) {
	a.run = passRunner(ctx, a.e, a.p, a.scanFrom, a.p.to, analysis.NewAttribution, (*analysis.Attribution).Result)
	a.kr, err = a.run(a.spec)
	return err
}

// channelLabel renders a channel key.
func (a *attribution) channelLabel(k analysis.Key) string {
	if k == analysis.Unattributed {
		return unattributedLabel
	}
	return renderValue(k, a.channelCol.typ, a.channelCol.dict, a.p.loc)
}

// finalize ranks the breakdown values (recomputing "(other)"), renders
// the channels and lists the users.
func (a *attribution) finalize(ctx context.Context) (Result, error) {
	p, kr := a.p, a.kr
	merge := timer()
	res := &AttributionResult{Kind: "attribution", Range: p.resolvedRange(), TZ: p.loc.String(), Model: a.spec.Model.String(),
		Total: AttributionTotal{Conversions: kr.Conversions, Users: kr.Users, Value: kr.Value}}
	if p.q.Interval != "" {
		res.Interval = p.q.Interval
	}
	if a.spec.Subsequent >= 0 {
		res.Total.Subsequent = &AttributionSubTotal{Events: kr.SubEvents, Value: kr.SubValue}
	}
	rows := kr.Rows
	var r ranked
	rank := map[analysis.Key]int{} // breakdown value → position
	if a.bd != nil {
		var err error
		if rows, r, err = a.rankRows(ctx, rows, rank); err != nil {
			return nil, err
		}
	}
	res.Channels = a.channels(rows, rank)
	p.stats.MergeMS += merge()
	if a.list != nil {
		var err error
		if res.List, err = a.listUsers(&r); err != nil {
			return nil, err
		}
	}
	res.Stats = p.stats
	return res, nil
}

// rankRows ranks the breakdown values by conversions, keeps the rows of
// the kept values and recomputes "(other)" by a pass of its own; rank
// gets each value's position.
func (a *attribution) rankRows(ctx context.Context, rows []analysis.AttributionRow, rank map[analysis.Key]int) ([]analysis.AttributionRow, ranked, error) {
	var keys []analysis.Key
	var totals []float64
	idx := map[analysis.Key]int{}
	for _, row := range rows {
		i, ok := idx[row.Key]
		if !ok {
			i = len(keys)
			idx[row.Key] = i
			keys, totals = append(keys, row.Key), append(totals, 0)
		}
		totals[i] += row.Total.Conversions
	}
	r, err := a.p.rank(ctx, a.bd, keys, totals)
	if err != nil {
		return nil, r, err
	}
	for i, k := range r.order {
		rank[k] = i
	}
	rank[otherKey] = len(r.order)
	rows = slices.DeleteFunc(slices.Clone(rows), func(row analysis.AttributionRow) bool { return !r.kept[row.Key] })
	if r.other {
		gs := a.spec
		gs.Group = &analysis.KeyGroup{Kept: r.order, Other: otherKey, DropKept: true}
		or, err := a.run(gs)
		if err != nil {
			return nil, r, err
		}
		rows = append(rows, or.Rows...)
	}
	return rows, r, nil
}

// channels renders rows: breakdown values in rank order; within one,
// conversions descending, then subsequent events descending, then
// channel.
func (a *attribution) channels(rows []analysis.AttributionRow, rank map[analysis.Key]int) []AttributionChannel {
	p := a.p
	labels := make([]string, len(rows))
	for i, row := range rows {
		labels[i] = a.channelLabel(row.Channel)
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		x, y := &rows[i], &rows[j]
		return cmp.Or(cmp.Compare(rank[x.Key], rank[y.Key]), cmp.Compare(y.Total.Conversions, x.Total.Conversions),
			cmp.Compare(y.Total.SubEvents, x.Total.SubEvents), strings.Compare(labels[i], labels[j]))
	})
	sub := a.spec.Subsequent >= 0
	out := []AttributionChannel{}
	for _, i := range order {
		row := rows[i]
		ch := AttributionChannel{Channel: labels[i], Conversions: row.Total.Conversions, Users: row.Total.Users, Value: row.Total.Value}
		if a.bd != nil {
			ch.BreakdownValue = ptr(p.label(a.bd, row.Key))
		}
		if sub {
			ch.Subsequent = &AttributionSub{Events: row.Total.SubEvents, Value: row.Total.SubValue}
		}
		for b, c := range row.Buckets {
			bk := AttributionBucket{Start: formatTime(a.bounds[b], p.loc), Conversions: c.Conversions, Users: c.Users, Value: c.Value,
				Incomplete: p.incomplete(a.bounds[b+1])}
			if sub {
				bk.Subsequent = &AttributionSub{Events: c.SubEvents, Value: c.SubValue}
			}
			ch.Buckets = append(ch.Buckets, bk)
		}
		out = append(out, ch)
	}
	return out
}

// listUsers runs the list's own pass, once the channel's key is known (no
// one when no channel has that label); r is the breakdown's ranking.
func (a *attribution) listUsers(r *ranked) (*ListResult, error) {
	q := a.p.q
	var chKey *analysis.Key
	for _, row := range a.kr.Rows {
		if a.channelLabel(row.Channel) == *q.List.Channel {
			chKey = &row.Channel
			break
		}
	}
	if chKey == nil {
		return listResult(q.List, &analysis.UserList{}, a.p.snap.Persons()), nil
	}
	list := a.list
	list.Channel = *chKey
	set := func(s analysis.AttributionSpec, src analysis.KeySource, g groupFunc, k analysis.Key) analysis.AttributionSpec {
		s.Breakdown, s.Group, s.List, list.Key = src, g, list, k
		return s
	}
	if a.bd == nil { // no main-pass list: the channel's key was unknown before it
		lr, err := a.run(set(a.spec, a.spec.Breakdown, nil, analysis.Key{}))
		if err != nil {
			return nil, err
		}
		return listResult(q.List, lr.List, a.p.snap.Persons()), nil
	}
	return kindList(a.p, a.bd, r, nil, a.spec, set, a.run,
		func(r analysis.AttributionResult) *analysis.UserList { return r.List })
}

// writeTable prints one row per channel (and breakdown value), the
// totals, and with an interval the conversions per bucket.
func (r *AttributionResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "attribution %s .. %s (%s), model %s\n", r.Range.From, r.Range.To, r.TZ, r.Model)
	sub := r.Total.Subsequent != nil
	hdr := "channel\tconversions\tusers\tvalue\t"
	if sub {
		hdr += "subsequent\tsubsequent value\t"
	}
	fmt.Fprintln(w, hdr)
	for _, c := range r.Channels {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t", seriesName(c.Channel, c.BreakdownValue), num(c.Conversions), c.Users, num(c.Value))
		if c.Subsequent != nil {
			fmt.Fprintf(w, "%s\t%s\t", num(c.Subsequent.Events), num(c.Subsequent.Value))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "total\t%d\t%d\t%s\t", r.Total.Conversions, r.Total.Users, num(r.Total.Value))
	if sub {
		fmt.Fprintf(w, "%d\t%s\t", r.Total.Subsequent.Events, num(r.Total.Subsequent.Value))
	}
	fmt.Fprintln(w)
	if r.Interval != "" && len(r.Channels) > 0 {
		fmt.Fprintf(w, "conversions by %s; * = incomplete\n", r.Interval)
		var h strings.Builder
		h.WriteString("bucket\t")
		for _, c := range r.Channels {
			fmt.Fprintf(&h, "%s\t", seriesName(c.Channel, c.BreakdownValue))
		}
		fmt.Fprintln(w, h.String())
		for b, bk := range r.Channels[0].Buckets {
			mark := ""
			if bk.Incomplete {
				mark = "*"
			}
			fmt.Fprintf(w, "%s%s\t", label(bk.Start), mark)
			for _, c := range r.Channels {
				fmt.Fprintf(w, "%s\t", num(c.Buckets[b].Conversions))
			}
			fmt.Fprintln(w)
		}
	}
	if l := r.List; l != nil {
		writeList(w, fmt.Sprintf("users credited in channel %s", *l.Channel), l)
	}
}

// attributionCSV are the CSV columns of a attribution result (WriteCSV; docs/queries.md).
var attributionCSV = []string{"channel", "breakdown_value", "bucket", "conversions", "users", "value", "subsequent_events", "subsequent_value", "incomplete"}

// writeCSV writes one row per channel × breakdown value, then per channel
// × breakdown value × bucket.
func (r *AttributionResult) writeCSV(cw *csv.Writer) {
	cw.Write(attributionCSV)
	sub := func(s *AttributionSub) (string, string) {
		if s == nil {
			return "", ""
		}
		return fnum(s.Events), fnum(s.Value)
	}
	for _, c := range r.Channels {
		se, sv := sub(c.Subsequent)
		cw.Write([]string{c.Channel, strp(c.BreakdownValue), "", fnum(c.Conversions), inum(c.Users), fnum(c.Value), se, sv, ""})
	}
	for _, c := range r.Channels {
		for _, b := range c.Buckets {
			se, sv := sub(b.Subsequent)
			cw.Write([]string{c.Channel, strp(c.BreakdownValue), b.Start, fnum(b.Conversions), inum(b.Users), fnum(b.Value), se, sv,
				strconv.FormatBool(b.Incomplete)})
		}
	}
}
