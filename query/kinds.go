package query

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// AnalysisQuery holds the request fields of the stickiness (docs/analytics.md §13),
// lifecycle (§14), paths (§15) and attribution (§10) kinds; it is
// embedded in Query, so its fields are top-level JSON fields.
type AnalysisQuery struct {
	// stickiness: per bucket, the matching events a bucket needs (default
	// 1); cumulative counts users with at least n buckets.
	MinEvents  int  `json:"min_events,omitempty"`
	Cumulative bool `json:"cumulative,omitempty"`
	// lifecycle: the activity matcher ({"event", "where"}, or an event
	// name).
	Event *NamedMatcher `json:"event,omitempty"`
	// paths: item_property, the events ("$any" or names), items to
	// exclude, the session gap (default "30m"), end matcher (the start
	// matcher is Query.Start), minimum sessions and maximum edges of the
	// result (default 50). The step limit is PathSteps (JSON "steps",
	// which funnels use for their steps: Parse reads it for paths).
	ItemProperty string     `json:"item_property,omitempty"`
	Events       *EventList `json:"events,omitempty"`
	Exclude      []string   `json:"exclude,omitempty"`
	SessionGap   string     `json:"session_gap,omitempty"`
	End          *Matcher   `json:"end,omitempty"`
	MinSessions  int64      `json:"min_sessions,omitempty"`
	MaxEdges     int        `json:"max_edges,omitempty"`
	PathSteps    int        `json:"-"`
	// attribution: conversion matcher, touchpoints in priority order,
	// the credited touchpoint property, model, half-life (time_decay,
	// default "7d"), conversions "all" (default) or "first", the
	// conversion's value property, subsequent events.
	Conversion  *Matcher     `json:"conversion,omitempty"`
	Touchpoints []Touchpoint `json:"touchpoints,omitempty"`
	Channel     string       `json:"channel,omitempty"`
	Model       string       `json:"model,omitempty"`
	HalfLife    string       `json:"half_life,omitempty"`
	Conversions string       `json:"conversions,omitempty"`
	Value       string       `json:"value,omitempty"`
	Subsequent  *Subsequent  `json:"subsequent,omitempty"`
}

// NamedMatcher is a matcher given as an object ({"event", "where"}) or as
// an event name alone.
type NamedMatcher Matcher

// UnmarshalJSON accepts "name" or {"event": "name", "where": [...]}.
func (m *NamedMatcher) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		*m = NamedMatcher{}
		return json.Unmarshal(b, &m.Event)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*Matcher)(m))
}

// EventList is the events of a paths query: "$any" or a list of names.
type EventList []string

// UnmarshalJSON accepts a string ("$any" or one name) or an array of
// names.
func (l *EventList) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*l = EventList{s}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(l))
}

// Touchpoint is one touchpoint matcher of an attribution with its
// lookback (a duration, required).
type Touchpoint struct {
	Event    string   `json:"event"`
	Where    []Filter `json:"where,omitempty"`
	Lookback string   `json:"lookback"`
}

// Subsequent is the subsequent-events matcher of an attribution: the
// events credited through the latest conversion at most Window (required)
// before them, with an optional value property.
type Subsequent struct {
	Event  string   `json:"event"`
	Where  []Filter `json:"where,omitempty"`
	Window string   `json:"window"`
	Value  string   `json:"value,omitempty"`
}

// pathsJSON decodes a paths query: its "steps" is a number, which
// shadows Query.Steps (the funnel's steps).
type pathsJSON struct {
	*Query
	Steps int `json:"steps,omitempty"`
}

// kindOf returns the "kind" of a JSON query object ("" when it has none
// or is not an object).
func kindOf(data []byte) string {
	var k struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(data, &k)
	return k.Kind
}

// decodeTarget returns what Parse decodes data into for q: q itself, or
// for a paths query a wrapper that reads "steps" as a number; done copies
// the number into q.
func decodeTarget(data []byte, q *Query) (target any, done func()) {
	if kindOf(data) != "paths" {
		return q, func() {}
	}
	pj := &pathsJSON{Query: q}
	return pj, func() { q.PathSteps = pj.Steps }
}

// kernel is the accumulator shape of the analysis kernels that take
// chunked trails.
type kernel[A any] interface {
	Add(*trail.Trail)
	Merge(A) error
	Bytes() int64
}

// multi is several accumulators fed by one scan (one per series of a
// second pass that recomputes "(other)"). It costs one more call per trail
// than one accumulator, only in those passes.
type multi[A kernel[A]] []A

func (m multi[A]) Add(t *trail.Trail) {
	for _, a := range m {
		a.Add(t)
	}
}

// merge merges o's accumulators into m's, one by one (scanMerge's
// merge).
func (m multi[A]) merge(o multi[A]) error {
	for i, a := range m {
		if err := mergeOf(a, o[i]); err != nil {
			return err
		}
	}
	return nil
}

func (m multi[A]) Bytes() int64 {
	var n int64
	for _, a := range m {
		n += a.Bytes()
	}
	return n
}

// prepareFor builds the plan's dictionaries for a scan of [from, to)
// before the scan, for analyses that need them to build their kernel
// (paths items, attribution list channels).
func (p *plan) prepareFor(from, to int64) error {
	if p.prepared {
		return nil
	}
	from, to = p.scanRange(from, to)
	if err := p.prepare(from, to); err != nil {
		return err
	}
	p.prepared = true
	return nil
}

// groupBy returns a Group mapping the keys r keeps to themselves and the
// others to otherKey.
func groupBy(r *ranked) groupFunc {
	return &analysis.KeyGroup{Kept: r.order, Other: otherKey}
}

// listGroup returns the group key a list's breakdown_value names under
// ranking r: otherKey for "(other)", a kept key with that label, or false
// when no value has it.
func (p *plan) listGroup(bd *breakdown, r *ranked) (analysis.Key, bool) {
	want := *p.q.List.BreakdownValue
	if want == otherLabel && r.other {
		return otherKey, true
	}
	for _, k := range r.order {
		if p.label(bd, k) == want {
			return k, true
		}
	}
	return analysis.Key{}, false
}

// checkList validates that the query's list uses only the given
// coordinates (names as in JSON) and returns the ids to keep.
func (p *plan) checkList(allowed ...string) (int, error) {
	l := p.q.List
	if l.BreakdownValue != nil && p.q.Breakdown == nil {
		return 0, invalid("list.breakdown_value", "the query has no breakdown")
	}
	for _, c := range []struct {
		name string
		used bool
	}{{"step", l.Step != 0}, {"dropped", l.Dropped}, {"cohort_start", l.CohortStart != ""}, {"period", l.Period != 0},
		{"series", l.Series != 0}, {"intervals", l.Intervals != 0}, {"bucket", l.Bucket != ""}, {"status", l.Status != ""},
		{"source", l.Source != ""}, {"target", l.Target != ""}, {"channel", l.Channel != nil}} {
		if c.used && !slices.Contains(allowed, c.name) {
			return 0, invalid("list."+c.name, "a %s list takes %s, not %s", p.q.Kind, strings.Join(allowed, ", "), c.name)
		}
	}
	return listKeep(l)
}

// columnDict returns the dictionary column c has in a segment: the event
// names for the event-name column, else the property's dictionary (false
// when the segment lacks the property).
func columnDict(meta *segment.Meta, c *column) ([]string, bool) {
	if c.event {
		return meta.EventNames, true
	}
	if mi := propIndex(meta, c.name); mi >= 0 {
		return meta.Props[mi].Dict, true
	}
	return nil, false
}

// groupFunc maps a raw breakdown key to the key it is counted under
// (or drops it); the kernels' Group.
type groupFunc = *analysis.KeyGroup

// passRunner returns a function that runs one scan of p over [from, to)
// with the kernel mk makes from a spec and returns result of the merged
// accumulator.
func passRunner[S any, A kernel[A], R any](ctx context.Context, e *Engine, p *plan, from, to int64, mk func(S) (A, error), result func(A) R) func(S) (R, error) {
	return func(spec S) (R, error) {
		acc, err := scanMerge(ctx, e, p, span{from: from, to: to}, func(int) (A, error) { return mk(spec) }, mergeOf[A])
		if err != nil {
			var zero R
			return zero, err
		}
		return result(acc), nil
	}
}

// kindList renders the users of the query's list. Without a breakdown
// they are main's (the main pass listed them). With one, a pass of its
// own runs spec as set(spec, source, group, key) makes it: over all users
// (no breakdown) when the list has no breakdown_value, else under the
// value's group of ranking r, listing the group key (no one when no
// value has that label).
func kindList[S, R any](p *plan, bd *breakdown, r *ranked, main *analysis.UserList, spec S,
	set func(S, analysis.KeySource, groupFunc, analysis.Key) S, run func(S) (R, error), list func(R) *analysis.UserList) (*ListResult, error) {
	l := main
	switch {
	case bd == nil:
	case p.q.List.BreakdownValue == nil:
		res, err := run(set(spec, analysis.KeySource{}, nil, analysis.Key{}))
		if err != nil {
			return nil, err
		}
		l = list(res)
	default:
		l = &analysis.UserList{}
		if gk, ok := p.listGroup(bd, r); ok {
			res, err := run(set(spec, bd.src, groupBy(r), gk))
			if err != nil {
				return nil, err
			}
			l = list(res)
		}
	}
	return listResult(p.q.List, l, p.snap.Persons()), nil
}

// MarshalJSON renders q as Parse reads it: a paths query's step limit as
// "steps" (PathSteps is not a JSON field of its own).
func (q Query) MarshalJSON() ([]byte, error) {
	type plain Query // without this method
	if q.Kind != "paths" || q.PathSteps == 0 {
		return json.Marshal(plain(q))
	}
	return json.Marshal(struct {
		plain
		Steps int `json:"steps"`
	}{plain(q), q.PathSteps})
}
