package query

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
)

// defaultHalfLife is time_decay's half-life when the query gives none
// (spec §10).
const defaultHalfLife = "7d"

// unattributedLabel renders analysis.Unattributed.
const unattributedLabel = "(unattributed)"

// AttributionResult is the result of an attribution query (spec §10).
type AttributionResult struct {
	Kind     string               `json:"kind"` // "attribution"
	Range    ResolvedRange        `json:"range"`
	TZ       string               `json:"tz"`
	Model    string               `json:"model"`
	Interval string               `json:"interval,omitempty"`
	Total    AttributionTotal     `json:"total"`
	Channels []AttributionChannel `json:"channels"`
	List     *ListResult          `json:"list,omitempty"`     // the users credited in list.channel, when asked
	Warnings []Warning            `json:"warnings,omitempty"` // notes on the query (spec §9): unknown events and values
	Stats    Stats                `json:"stats"`
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

// runAttribution plans and runs a query-time attribution (spec §10;
// Airbridge's default model, Mixpanel's and Airbridge's models): per
// channel value (and breakdown value, bucket) the conversions' shares,
// users, value and subsequent events. A breakdown's "(other)" is
// recomputed by a second pass so users stay distinct.
func (e *Engine) runAttribution(ctx context.Context, p *plan) (*AttributionResult, error) {
	q := p.q
	spec := analysis.AttributionSpec{From: p.from, To: p.to, Subsequent: -1}
	var err error
	if spec.Model, err = analysis.ParseAttributionModel(q.Model); err != nil {
		return nil, invalid("model", "%v", err)
	}
	hl := q.HalfLife
	if hl == "" {
		hl = defaultHalfLife
	}
	if spec.HalfLife, err = ParseDuration(hl); err != nil || spec.HalfLife <= 0 {
		return nil, invalid("half_life", "want a positive duration such as \"7d\", found %q", q.HalfLife)
	}
	switch q.Conversions {
	case "", "all":
	case "first":
		spec.First = true
	default:
		return nil, invalid("conversions", "want \"all\" or \"first\", found %q", q.Conversions)
	}
	if q.Conversion == nil {
		return nil, invalid("conversion", "attribution needs a conversion matcher, e.g. {\"event\": \"install\"}")
	}
	if spec.Conversion, err = p.addMatcher(*q.Conversion, "conversion", true); err != nil {
		return nil, err
	}
	if n := len(q.Touchpoints); n == 0 || n > analysis.MaxTouchpoints {
		return nil, invalid("touchpoints", "want 1 to %d touchpoint matchers in priority order, e.g. [{\"event\": \"ad_click\", \"lookback\": \"7d\"}], found %d", analysis.MaxTouchpoints, n)
	}
	var maxLook int64
	for i, tp := range q.Touchpoints {
		f := fieldIdx("touchpoints", i)
		lb, err := ParseDuration(tp.Lookback)
		if err != nil {
			return nil, invalid(f+".lookback", "want a lookback duration such as \"7d\" (required), found %q", tp.Lookback)
		}
		bit, err := p.addMatcher(Matcher{Event: tp.Event, Where: tp.Where}, f, true)
		if err != nil {
			return nil, err
		}
		spec.Touchpoints = append(spec.Touchpoints, analysis.Touchpoint{Bit: bit, Lookback: lb})
		maxLook = max(maxLook, lb)
	}
	if q.Channel == "" {
		return nil, invalid("channel", "attribution needs the touchpoint property to credit, e.g. \"channel\"")
	}
	if _, ok := p.propType(q.Channel, false); !ok {
		return nil, p.unknownProp("channel", q.Channel, false)
	}
	spec.Channel = p.addCol(q.Channel, false)
	channelCol := p.cols[spec.Channel]
	if spec.Value, err = p.valueCol(q.Value, "value"); err != nil {
		return nil, err
	}
	spec.SubsequentValue = analysis.ValueCol{Col: -1}
	if s := q.Subsequent; s != nil {
		if spec.SubsequentWindow, err = ParseDuration(s.Window); err != nil {
			return nil, invalid("subsequent.window", "want a window duration such as \"30d\" (required), found %q", s.Window)
		}
		if spec.Subsequent, err = p.addMatcher(Matcher{Event: s.Event, Where: s.Where}, "subsequent", true); err != nil {
			return nil, err
		}
		if spec.SubsequentValue, err = p.valueCol(s.Value, "subsequent.value"); err != nil {
			return nil, err
		}
	}
	var bounds []int64
	if q.Interval != "" {
		if _, _, bounds, err = p.calendarBounds(ctx, ""); err != nil {
			return nil, err
		}
		spec.Bounds = bounds
	}
	bd, err := p.parseBreakdown()
	if err != nil {
		return nil, err
	}
	if bd != nil {
		spec.Breakdown = bd.src
	}
	var list *analysis.AttributionList
	if q.List != nil {
		keep, err := p.checkList("channel")
		if err != nil {
			return nil, err
		}
		if q.List.Channel == nil {
			return nil, invalid("list.channel", "an attribution list takes the channel whose users to list, as the result renders it")
		}
		list = &analysis.AttributionList{Keep: keep}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	// Touchpoints reach back a lookback before the conversions, and
	// subsequent events inherit conversions up to a window before them;
	// with first conversions, every user's trail from the beginning.
	scanFrom := p.from - maxLook
	if spec.Subsequent >= 0 {
		scanFrom -= spec.SubsequentWindow
	}
	if spec.First {
		scanFrom = minTime
	}
	run := passRunner(ctx, e, p, scanFrom, p.to, analysis.NewAttribution, (*analysis.Attribution).Result)
	kr, err := run(spec)
	if err != nil {
		return nil, err
	}
	merge := timer()
	channelLabel := func(k analysis.Key) string {
		if k == analysis.Unattributed {
			return unattributedLabel
		}
		return renderValue(k, channelCol.typ, channelCol.dict, p.loc)
	}
	res := &AttributionResult{Kind: "attribution", Range: p.resolvedRange(), TZ: p.loc.String(), Model: spec.Model.String(),
		Total: AttributionTotal{Conversions: kr.Conversions, Users: kr.Users, Value: kr.Value}}
	if q.Interval != "" {
		res.Interval = q.Interval
	}
	if spec.Subsequent >= 0 {
		res.Total.Subsequent = &AttributionSubTotal{Events: kr.SubEvents, Value: kr.SubValue}
	}
	rows := kr.Rows
	var r ranked
	rank := map[analysis.Key]int{} // breakdown value → position
	if bd != nil {
		// Rank the breakdown values by conversions; recompute "(other)".
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
		var err error
		if r, err = p.rank(ctx, bd, keys, totals); err != nil {
			return nil, err
		}
		for i, k := range r.order {
			rank[k] = i
		}
		rank[otherKey] = len(r.order)
		rows = slices.DeleteFunc(slices.Clone(rows), func(row analysis.AttributionRow) bool { return !r.kept[row.Key] })
		if r.other {
			gs := spec
			gs.Group = &analysis.KeyGroup{Kept: r.order, Other: otherKey, DropKept: true}
			or, err := run(gs)
			if err != nil {
				return nil, err
			}
			rows = append(rows, or.Rows...)
		}
	}
	// Breakdown values in rank order; within one, conversions
	// descending, then subsequent events descending, then channel.
	labels := make([]string, len(rows))
	for i, row := range rows {
		labels[i] = channelLabel(row.Channel)
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &rows[i], &rows[j]
		return cmp.Or(cmp.Compare(rank[a.Key], rank[b.Key]), cmp.Compare(b.Total.Conversions, a.Total.Conversions),
			cmp.Compare(b.Total.SubEvents, a.Total.SubEvents), strings.Compare(labels[i], labels[j]))
	})
	res.Channels = []AttributionChannel{}
	for _, i := range order {
		row := rows[i]
		ch := AttributionChannel{Channel: labels[i], Conversions: row.Total.Conversions, Users: row.Total.Users, Value: row.Total.Value}
		if bd != nil {
			ch.BreakdownValue = ptr(p.label(bd, row.Key))
		}
		if spec.Subsequent >= 0 {
			ch.Subsequent = &AttributionSub{Events: row.Total.SubEvents, Value: row.Total.SubValue}
		}
		for b, c := range row.Buckets {
			bk := AttributionBucket{Start: formatTime(bounds[b], p.loc), Conversions: c.Conversions, Users: c.Users, Value: c.Value,
				Incomplete: p.incomplete(bounds[b+1])}
			if spec.Subsequent >= 0 {
				bk.Subsequent = &AttributionSub{Events: c.SubEvents, Value: c.SubValue}
			}
			ch.Buckets = append(ch.Buckets, bk)
		}
		res.Channels = append(res.Channels, ch)
	}
	p.stats.MergeMS = merge()
	if list != nil {
		// The list's own pass, once the channel's key is known (no one
		// when no channel has that label).
		var chKey *analysis.Key
		for _, row := range kr.Rows {
			if channelLabel(row.Channel) == *q.List.Channel {
				chKey = &row.Channel
				break
			}
		}
		if chKey == nil {
			res.List = listResult(q.List, &analysis.UserList{})
		} else {
			list.Channel = *chKey
			set := func(s analysis.AttributionSpec, src analysis.KeySource, g groupFunc, k analysis.Key) analysis.AttributionSpec {
				s.Breakdown, s.Group, s.List, list.Key = src, g, list, k
				return s
			}
			if bd == nil { // no main-pass list: the channel's key was unknown before it
				lr, err := run(set(spec, spec.Breakdown, nil, analysis.Key{}))
				if err != nil {
					return nil, err
				}
				res.List = listResult(q.List, lr.List)
			} else if res.List, err = kindList(p, bd, &r, nil, spec, set, run,
				func(r analysis.AttributionResult) *analysis.UserList { return r.List }); err != nil {
				return nil, err
			}
		}
	}
	res.Stats = p.stats
	return res, nil
}
