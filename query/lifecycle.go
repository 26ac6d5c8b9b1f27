package query

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// LifecycleResult is the result of a lifecycle query (docs/analytics.md §14): per
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
	Warnings  []Warning            `json:"warnings,omitempty"`  // notes on the query (docs/analytics.md §9): unknown events and values
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

// lifecycle is a compiled lifecycle query (docs/analytics.md §14; PostHog's
// lifecycle, "new" meaning first seen). Every user's trail is read from
// their first event, so that "new" is the bucket of the first event of
// any kind.
type lifecycle struct {
	e      *Engine
	p      *plan
	spec   analysis.LifecycleSpec
	iv     timebucket.Interval
	bounds []int64 // the range's buckets
	bd     *breakdown
	list   *analysis.LifecycleList
	run    func(analysis.LifecycleSpec) (analysis.LifecycleResult, error) // one pass
	kr     analysis.LifecycleResult                                       // the main pass's answer
}

func init() { register(kind{name: "lifecycle", order: 6, compile: compileLifecycle}) }

// compileLifecycle checks and compiles a lifecycle query.
func compileLifecycle(ctx context.Context, e *Engine, p *plan) (compiled, error) {
	q := p.q
	lc := &lifecycle{e: e, p: p}
	var ws timebucket.WeekStart
	var err error
	if lc.iv, ws, lc.bounds, err = p.calendarBounds(ctx, "day"); err != nil {
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
	lc.spec = analysis.LifecycleSpec{Bounds: append([]int64{timebucket.Floor(lc.bounds[0]-1, lc.iv, p.loc, ws)}, lc.bounds...),
		From: p.from, To: p.to, Active: active, Seen: seen}
	if lc.bd, err = p.parseBreakdown(); err != nil {
		return nil, err
	}
	if lc.bd != nil {
		if lc.bd.src.From == analysis.KeyEvent {
			return nil, invalid("breakdown.source", "a lifecycle breaks down by a user property (\"source\": \"user\"): a status belongs to a user, not an event")
		}
		lc.spec.Breakdown = lc.bd.src
	}
	if q.List != nil {
		if lc.list, err = lc.compileList(q.List); err != nil {
			return nil, err
		}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	// The kernel asks for each user's first event and in which buckets
	// they are active: the rows of the first-seen matcher alone (or of
	// the activity matcher, when it is the same) may be thinned.
	p.thin = e.thinning(seen, lc.spec.Bounds, p.from, p.to)
	return lc, nil
}

// compileList checks a list's bucket and status and returns the kernel's
// list.
func (lc *lifecycle) compileList(l *List) (*analysis.LifecycleList, error) {
	p, bounds := lc.p, lc.bounds
	nb := len(bounds) - 1
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
	return &analysis.LifecycleList{Bucket: b, Status: st, Keep: keep}, nil
}

// passes runs the main pass (listing the users when there is no
// breakdown).
func (lc *lifecycle) passes(ctx context.Context) (err error) {
	lc.run = passRunner(ctx, lc.e, lc.p, minTime, lc.p.to, analysis.NewLifecycle, (*analysis.Lifecycle).Result)
	main := lc.spec
	if lc.bd == nil {
		main.List = lc.list
	}
	lc.kr, err = lc.run(main)
	return err
}

// finalize renders the buckets over all users and per breakdown value,
// and lists the users.
func (lc *lifecycle) finalize(ctx context.Context) (Result, error) {
	p := lc.p
	merge := timer()
	res := &LifecycleResult{Kind: "lifecycle", Range: p.resolvedRange(), TZ: p.loc.String(), Interval: lc.iv.String()}
	var all [][4]int64
	for _, g := range lc.kr.Groups {
		all = lc.sum(all, g.Counts)
	}
	res.Buckets = lc.buckets(lc.sum(all, nil))
	var r ranked
	if lc.bd != nil {
		var err error
		if res.Breakdown, r, err = lc.breakdown(ctx); err != nil {
			return nil, err
		}
	}
	p.stats.MergeMS += merge()
	if list := lc.list; list != nil {
		set := func(s analysis.LifecycleSpec, src analysis.KeySource, g groupFunc, k analysis.Key) analysis.LifecycleSpec {
			s.Breakdown, s.Group, s.List, list.Key = src, g, list, k
			return s
		}
		var err error
		if res.List, err = kindList(p, lc.bd, &r, lc.kr.List, lc.spec, set, lc.run,
			func(r analysis.LifecycleResult) *analysis.UserList { return r.List }); err != nil {
			return nil, err
		}
	}
	res.Stats = p.stats
	return res, nil
}

// sum adds src's counts to dst's (a new one when dst is nil) and returns
// it.
func (lc *lifecycle) sum(dst [][4]int64, src [][4]int64) [][4]int64 {
	if dst == nil {
		dst = make([][4]int64, len(lc.bounds)-1)
	}
	for b := range src {
		for s := range dst[b] {
			dst[b][s] += src[b][s]
		}
	}
	return dst
}

// buckets renders one row of counts per bucket.
func (lc *lifecycle) buckets(c [][4]int64) []LifecycleBucket {
	p, bounds := lc.p, lc.bounds
	out := make([]LifecycleBucket, len(bounds)-1)
	for b := range out {
		out[b] = LifecycleBucket{Start: formatTime(bounds[b], p.loc), New: c[b][0], Returning: c[b][1], Resurrecting: c[b][2],
			Dormant: -c[b][3], Incomplete: p.incomplete(bounds[b+1])}
	}
	return out
}

// breakdown ranks the values that have a status by the active users they
// hold and renders them, then "(other)"; the others merge exactly (a
// user has one value).
func (lc *lifecycle) breakdown(ctx context.Context) ([]LifecycleBreakdown, ranked, error) {
	p := lc.p
	var keys []analysis.Key
	var totals []float64
	byKey := map[analysis.Key][][4]int64{}
	for _, g := range lc.kr.Groups {
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
	r, err := p.rank(ctx, lc.bd, keys, totals)
	if err != nil {
		return nil, r, err
	}
	var out []LifecycleBreakdown
	for _, k := range r.order {
		out = append(out, LifecycleBreakdown{Value: p.label(lc.bd, k), Buckets: lc.buckets(byKey[k])})
	}
	if r.other {
		var other [][4]int64
		for _, k := range keys {
			if !r.kept[k] {
				other = lc.sum(other, byKey[k])
			}
		}
		out = append(out, LifecycleBreakdown{Value: otherLabel, Buckets: lc.buckets(other)})
	}
	return out, r, nil
}

// writeTable prints one row per bucket (then per breakdown value).
func (r *LifecycleResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "lifecycle by %s %s .. %s (%s); * = incomplete\n", r.Interval, r.Range.From, r.Range.To, r.TZ)
	rows := func(bs []LifecycleBucket) {
		fmt.Fprintln(w, "bucket\tnew\treturning\tresurrecting\tdormant\t")
		for _, b := range bs {
			mark := ""
			if b.Incomplete {
				mark = "*"
			}
			fmt.Fprintf(w, "%s%s\t%d\t%d\t%d\t%d\t\n", label(b.Start), mark, b.New, b.Returning, b.Resurrecting, b.Dormant)
		}
	}
	rows(r.Buckets)
	for _, b := range r.Breakdown {
		fmt.Fprintf(w, "breakdown %s\n", b.Value)
		rows(b.Buckets)
	}
	if l := r.List; l != nil {
		writeList(w, fmt.Sprintf("%s users in the %s of %s", l.Status, r.Interval, l.Bucket), l)
	}
}

// lifecycleCSV are the CSV columns of a lifecycle result (WriteCSV; docs/queries.md).
var lifecycleCSV = []string{"breakdown_value", "bucket", "status", "users", "incomplete"}

// writeCSV writes one row per breakdown value (empty for all users) ×
// bucket × status.
func (r *LifecycleResult) writeCSV(cw *csv.Writer) {
	cw.Write(lifecycleCSV)
	writeLifecycleCSV(cw, "", r.Buckets)
	for _, b := range r.Breakdown {
		writeLifecycleCSV(cw, b.Value, b.Buckets)
	}
}

func writeLifecycleCSV(cw *csv.Writer, bv string, bs []LifecycleBucket) {
	for _, b := range bs {
		inc := strconv.FormatBool(b.Incomplete)
		cw.Write([]string{bv, b.Start, "new", inum(b.New), inc})
		cw.Write([]string{bv, b.Start, "returning", inum(b.Returning), inc})
		cw.Write([]string{bv, b.Start, "resurrecting", inum(b.Resurrecting), inc})
		cw.Write([]string{bv, b.Start, "dormant", inum(b.Dormant), inc})
	}
}
