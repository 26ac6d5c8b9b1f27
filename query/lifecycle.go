package query

import (
	"context"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// LifecycleResult is the result of a lifecycle query (spec §14): per
// bucket of the range, the users who are new, returning, resurrecting and
// dormant (a negative count), over all users and, with a breakdown, per
// value.
type LifecycleResult struct {
	Kind      string               `json:"kind"` // "lifecycle"
	Range     ResolvedRange        `json:"range"`
	TZ        string               `json:"tz"`
	Interval  string               `json:"interval"`
	Buckets   []LifecycleBucket    `json:"buckets"`
	Breakdown []LifecycleBreakdown `json:"breakdown,omitempty"` // by active users descending, "(other)" last
	List      *ListResult          `json:"list,omitempty"`      // the users of list.status in list.bucket, when asked
	Warnings  []Warning            `json:"warnings,omitempty"`  // notes on the query (spec §9): unknown events and values
	Stats     Stats                `json:"stats"`
}

// ResultKind returns "lifecycle".
func (r *LifecycleResult) ResultKind() string { return "lifecycle" }

func (r *LifecycleResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
}

// LifecycleBucket is one bucket's statuses; Dormant is ≤ 0.
type LifecycleBucket struct {
	Start        string `json:"start"`
	New          int64  `json:"new"`
	Returning    int64  `json:"returning"`
	Resurrecting int64  `json:"resurrecting"`
	Dormant      int64  `json:"dormant"`
	Incomplete   bool   `json:"incomplete"`
}

// LifecycleBreakdown is the lifecycle of one breakdown value.
type LifecycleBreakdown struct {
	Value   string            `json:"value"`
	Buckets []LifecycleBucket `json:"buckets"`
}

// runLifecycle plans and runs a lifecycle query (spec §14; PostHog's
// lifecycle, "new" meaning first seen). Every user's trail is read from
// their first event, so that "new" is the bucket of the first event of
// any kind.
func (e *Engine) runLifecycle(ctx context.Context, p *plan) (*LifecycleResult, error) {
	q := p.q
	iv, ws, bounds, err := p.calendarBounds(ctx, "day")
	if err != nil {
		return nil, err
	}
	if q.Event == nil {
		return nil, invalid("event", "lifecycle needs an event matcher, e.g. {\"event\": \"app_open\"}")
	}
	act := Matcher(*q.Event)
	active, err := p.addMatcher(act, "event", true)
	if err != nil {
		return nil, err
	}
	seen := active
	if act.Event != AnyEvent || len(act.Where) > 0 || len(p.global) > 0 {
		if seen, err = p.addMatcher(Matcher{Event: AnyEvent}, "event", false); err != nil {
			return nil, err
		}
	}
	nb := len(bounds) - 1
	spec := analysis.LifecycleSpec{Bounds: append([]int64{timebucket.Floor(bounds[0]-1, iv, p.loc, ws)}, bounds...),
		From: p.from, To: p.to, Active: active, Seen: seen}
	bd, err := p.parseBreakdown()
	if err != nil {
		return nil, err
	}
	if bd != nil {
		if bd.src.From == analysis.KeyEvent {
			return nil, invalid("breakdown.source", "a lifecycle breaks down by a user property (\"source\": \"user\"): a status belongs to a user, not an event")
		}
		spec.Breakdown = bd.src
	}
	var list *analysis.LifecycleList
	if l := q.List; l != nil {
		keep, err := p.checkList("bucket", "status")
		if err != nil {
			return nil, err
		}
		t, ok := parseInstant(l.Bucket, p.loc)
		if !ok || t < bounds[0] || t >= bounds[nb] {
			return nil, invalid("list.bucket", "want the date or instant of a bucket of the range (%s to %s), found %q",
				formatTime(bounds[0], p.loc), formatTime(bounds[nb], p.loc), l.Bucket)
		}
		st, err := analysis.ParseLifecycleStatus(l.Status)
		if err != nil {
			return nil, invalid("list.status", "%v", err)
		}
		b := 0
		for bounds[b+1] <= t {
			b++
		}
		list = &analysis.LifecycleList{Bucket: b, Status: st, Keep: keep}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	// The kernel asks for each user's first event and in which buckets
	// they are active: the rows of the first-seen matcher alone (or of
	// the activity matcher, when it is the same) may be thinned.
	p.thin = e.thinning(seen, spec.Bounds, p.from, p.to)
	run := passRunner(ctx, e, p, minTime, p.to, analysis.NewLifecycle, (*analysis.Lifecycle).Result)
	main := spec
	if bd == nil {
		main.List = list
	}
	kr, err := run(main)
	if err != nil {
		return nil, err
	}
	merge := timer()
	res := &LifecycleResult{Kind: "lifecycle", Range: p.resolvedRange(), TZ: p.loc.String(), Interval: iv.String()}
	sum := func(dst [][4]int64, src [][4]int64) [][4]int64 {
		if dst == nil {
			dst = make([][4]int64, nb)
		}
		for b := range src {
			for s := range dst[b] {
				dst[b][s] += src[b][s]
			}
		}
		return dst
	}
	buckets := func(c [][4]int64) []LifecycleBucket {
		out := make([]LifecycleBucket, nb)
		for b := range out {
			out[b] = LifecycleBucket{Start: formatTime(bounds[b], p.loc), New: c[b][0], Returning: c[b][1], Resurrecting: c[b][2],
				Dormant: -c[b][3], Incomplete: p.incomplete(bounds[b+1])}
		}
		return out
	}
	var all [][4]int64
	for _, g := range kr.Groups {
		all = sum(all, g.Counts)
	}
	res.Buckets = buckets(sum(all, nil))
	var r ranked
	if bd != nil {
		// Rank the values that have a status by the active users they
		// hold; the others merge exactly (a user has one value).
		var keys []analysis.Key
		var totals []float64
		byKey := map[analysis.Key][][4]int64{}
		for _, g := range kr.Groups {
			var active, dormant int64
			for _, c := range g.Counts {
				active += c[0] + c[1] + c[2]
				dormant += c[3]
			}
			if active+dormant == 0 {
				continue
			}
			keys, totals = append(keys, g.Key), append(totals, float64(active))
			byKey[g.Key] = g.Counts
		}
		var err error
		if r, err = p.rank(ctx, bd, keys, totals); err != nil {
			return nil, err
		}
		for _, k := range r.order {
			res.Breakdown = append(res.Breakdown, LifecycleBreakdown{Value: p.label(bd, k), Buckets: buckets(byKey[k])})
		}
		if r.other {
			var other [][4]int64
			for _, k := range keys {
				if !r.kept[k] {
					other = sum(other, byKey[k])
				}
			}
			res.Breakdown = append(res.Breakdown, LifecycleBreakdown{Value: otherLabel, Buckets: buckets(other)})
		}
	}
	p.stats.MergeMS += merge()
	if list != nil {
		set := func(s analysis.LifecycleSpec, src analysis.KeySource, g groupFunc, k analysis.Key) analysis.LifecycleSpec {
			s.Breakdown, s.Group, s.List, list.Key = src, g, list, k
			return s
		}
		if res.List, err = kindList(p, bd, &r, kr.List, spec, set, run,
			func(r analysis.LifecycleResult) *analysis.UserList { return r.List }); err != nil {
			return nil, err
		}
	}
	res.Stats = p.stats
	return res, nil
}
