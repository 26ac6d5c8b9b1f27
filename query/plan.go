package query

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// AnyEvent is the matcher event name that matches every event.
const AnyEvent = "$any"

// plan is a validated query: resolved zone and range, matchers numbered by
// their bit in the per-event mask with their compiled filters, the event
// columns and user values the trails carry, the cohort filter, and the
// query's memory budget.
type plan struct {
	q    *Query
	snap *storage.Version
	loc  *time.Location
	now  int64 // UTC µs

	from, to int64 // query range [from, to), UTC µs
	// calendar: from and to are local midnights by construction (dates,
	// a relative range in days, weeks, months or years, or the default
	// range), so a "previous" comparison counts calendar days.
	calendar  bool
	dataStart int64 // earliest stored event, UTC µs
	dataEnd   int64 // latest stored event + 1 µs; 0 when the app has no events
	hasData   bool

	global   []*filter  // the query's global "where"
	matchers []*matcher // by mask bit
	cols     []*column  // event property columns of the trails
	ucols    []*column  // user property values of the trails

	cohort      *analysis.CohortCond // nil without a cohort filter
	cohortFlags []*userFlag          // user_property leaves of the cohort, by flag bit
	userPreds   bool                 // some matcher has a user property filter (set by prepare)
	cohortFrom  int64                // events the cohort needs: [cohortFrom, cohortTo)
	cohortTo    int64

	// thin is the row thinning the analysis allows its scans (zero:
	// none; see thinning)
	thin storage.Thin

	budget   *budget
	prepared bool // prepare has run
	stats    Stats
}

// matcher is one event matcher (docs/analytics.md §3): an event name and filters.
type matcher struct {
	event  string
	field  string    // JSON path of the matcher ("series[0]", "steps[1]"), for warnings
	efs    []*filter // event property filters, compiled per segment
	ufs    []*filter // user property filters, evaluated per user
	upreds []pred    // ufs compiled against the query-wide dictionaries
}

// column is an event property carried in the trails (Trail.Cols) or a
// user property value (Trail.User).
type column struct {
	name  string
	user  bool
	event bool // the event name (paths items), typ string: its dict holds event names
	typ   event.Type
	// dict is the query-wide dictionary of a string property: the sorted
	// union of the dictionaries of the segments read; remap maps each
	// segment's codes to it, by segment file.
	dict  []string
	remap map[string][]uint32
}

// userFlag is a user_property leaf of a cohort: a user filter.
type userFlag struct {
	f  *filter
	pr pred
}

// newPlan validates the common fields of q against snap; the query's
// memory budget is memory bytes.
func (e *Engine) newPlan(q *Query, snap *storage.Version, memory int64) (*plan, error) {
	if q.Kind == "" {
		return nil, invalid("kind", "kind is required: %s", kindNameList())
	}
	if _, ok := kindNamed(q.Kind); !ok {
		return nil, invalid("kind", "unknown kind %s: want %s", event.Quote(q.Kind), kindNameList())
	}
	p := &plan{q: q, snap: snap, budget: newBudget(memory)}
	tz := q.TZ
	if tz == "" {
		tz = snap.TZ
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := event.LoadZone(tz)
	if err != nil {
		return nil, invalid("tz", "%v", err)
	}
	p.loc = loc
	if q.Now != "" {
		if p.now, err = event.ParseDateTime(q.Now, loc); err != nil {
			return nil, invalid("now", "want an instant: %v", err)
		}
	} else {
		p.now = e.cfg.Now().UnixMicro()
	}
	if lo, hi, ok := snap.TimeRange(storage.KindEvents); ok {
		p.dataStart, p.dataEnd, p.hasData = lo, hi+1, true
	}
	if err := p.resolveRange(q.Range); err != nil {
		return nil, err
	}
	for i, f := range q.Where {
		pf, err := p.parseFilter(f, fieldIdx("where", i))
		if err != nil {
			return nil, err
		}
		p.global = append(p.global, pf)
	}
	return p, nil
}

// resolveRange sets the plan's [from, to) from the query's range: absolute
// bounds, a relative range (docs/analytics.md §2, at the plan's now) or, without one,
// the app's data by day.
func (p *plan) resolveRange(r *Range) error {
	loc := p.loc
	switch {
	case r == nil:
		if !p.hasData {
			p.from, p.to = p.now, p.now+1
			return nil
		}
		p.from = timebucket.Floor(p.dataStart, timebucket.Day, loc, timebucket.Monday)
		p.to = timebucket.Next(p.dataEnd-1, timebucket.Day, loc, timebucket.Monday)
		p.calendar = true
	case r.Last != "":
		if r.From != "" || r.To != "" {
			return invalid("range", "a range is either {\"from\", \"to\"} or {\"last\"}, not both")
		}
		from, to, err := relativeRange(r.Last, p.now, loc)
		if err != nil {
			return invalid("range.last", "%v", err)
		}
		d, _ := ParseDurationSpec(r.Last, false)
		p.from, p.to, p.calendar = from, to, d.Calendar()
	default:
		var ok, fromDate, toDate bool
		if p.from, fromDate, ok = parseBound(r.From, loc); !ok {
			return invalid("range.from", "want a date YYYY-MM-DD or an RFC 3339 instant, found %s", event.Quote(r.From))
		}
		if p.to, toDate, ok = parseBound(r.To, loc); !ok {
			return invalid("range.to", "want a date YYYY-MM-DD or an RFC 3339 instant, found %s", event.Quote(r.To))
		}
		if p.to <= p.from {
			return invalid("range", "range.to (%s) must be after range.from (%s)", r.To, r.From)
		}
		p.calendar = fromDate && toDate
	}
	return nil
}

// propType returns the type of an event (user false) or user property.
func (p *plan) propType(name string, user bool) (event.Type, bool) {
	props := p.snap.EventProps
	if user {
		props = p.snap.UserProps
	}
	for _, pt := range props {
		if pt.Name == name {
			return pt.Type, true
		}
	}
	return event.TypeNone, false
}

// unknownProp is the invalid_query error for a property the app does not
// have, listing the ones it has.
func (p *plan) unknownProp(field, name string, user bool) *Error {
	kind, props := "event", p.snap.EventProps
	if user {
		kind, props = "user", p.snap.UserProps
	}
	var names []string
	for _, pt := range props {
		if pt.Name != storage.InsertIDProp {
			names = append(names, pt.Name)
		}
	}
	have := "it has none"
	if len(names) > 0 {
		if len(names) > 30 {
			names = append(names[:30], "…")
		}
		have = "it has " + strings.Join(names, ", ")
	}
	in := ""
	if p.q.App != "" {
		in = fmt.Sprintf(" in app %q", p.q.App)
	}
	return invalid(field, "unknown %s property %s%s (%s)", kind, event.Quote(name), in, have)
}

// addMatcher validates m (at JSON path field), adds the global filters
// when withGlobal, and gives it the next mask bit.
func (p *plan) addMatcher(m Matcher, field string, withGlobal bool) (bit int, err error) {
	if m.Event == "" {
		return 0, invalid(field+".event", "event is required (an event name, or %q for every event)", AnyEvent)
	}
	if len(p.matchers) == 64 {
		return 0, invalid(field, "a query may have at most 64 matchers (steps, series, cohort conditions)")
	}
	pm := &matcher{event: m.Event, field: field}
	fs := slices.Clone(m.Where)
	for i, f := range fs {
		pf, err := p.parseFilter(f, fieldIdx(field+".where", i))
		if err != nil {
			return 0, err
		}
		pm.add(p, pf)
	}
	if withGlobal {
		for _, pf := range p.global {
			pm.add(p, pf)
		}
	}
	p.matchers = append(p.matchers, pm)
	return len(p.matchers) - 1, nil
}

func (m *matcher) add(p *plan, f *filter) {
	if f.user {
		f.ucol = p.addCol(f.prop, true)
		m.ufs = append(m.ufs, f)
	} else {
		m.efs = append(m.efs, f)
	}
}

// addCol returns the index of the trail column (user false) or user value
// for a property, adding it. The property must exist.
func (p *plan) addCol(name string, user bool) int {
	cols := &p.cols
	if user {
		cols = &p.ucols
	}
	for i, c := range *cols {
		if c.name == name {
			return i
		}
	}
	t, _ := p.propType(name, user)
	*cols = append(*cols, &column{name: name, user: user, typ: t})
	return len(*cols) - 1
}

// prepare readies the plan for scans of events in [from, to): it builds
// the query-wide dictionaries of string columns and compiles the user
// filters against them. Its memory is charged to the budget.
func (p *plan) prepare(from, to int64) error {
	var refs []storage.SegmentRef
	for _, ref := range p.snap.Segments {
		if ref.Kind == storage.KindUsers || (ref.Rows > 0 && ref.MaxTime >= from && ref.MinTime < to) {
			refs = append(refs, ref)
		}
	}
	for _, c := range slices.Concat(p.cols, p.ucols) {
		if c.typ != event.TypeString {
			continue
		}
		kind := storage.KindEvents
		if c.user {
			kind = storage.KindUsers
		}
		dicts := map[string][]string{}
		var all []string
		for _, ref := range refs {
			if ref.Kind != kind {
				continue
			}
			r, err := p.snap.Reader(ref)
			if err != nil {
				return err
			}
			if d, ok := columnDict(r.Meta(), c); ok {
				dicts[ref.File] = d
				all = append(all, d...)
			}
		}
		slices.Sort(all)
		c.dict = slices.Compact(all)
		c.remap = map[string][]uint32{}
		var n int64
		for file, d := range dicts {
			m := make([]uint32, len(d))
			for i, s := range d {
				j, _ := slices.BinarySearch(c.dict, s)
				m[i] = uint32(j)
			}
			c.remap[file] = m
			n += int64(len(m)) * 4
		}
		if err := p.budget.charge(n + int64(len(c.dict))*16); err != nil {
			return err
		}
	}
	p.userPreds = false
	for _, m := range p.matchers {
		m.upreds = m.upreds[:0]
		for _, f := range m.ufs {
			m.upreds = append(m.upreds, p.userPred(f))
		}
		p.userPreds = p.userPreds || len(m.upreds) > 0
	}
	for _, uf := range p.cohortFlags {
		uf.pr = p.userPred(uf.f)
	}
	return nil
}

// userPred compiles a user filter against its value's dictionary.
func (p *plan) userPred(f *filter) pred {
	return compilePred(f, p.ucols[f.ucol].dict)
}

func propIndex(meta *segment.Meta, name string) int {
	for i := range meta.Props {
		if meta.Props[i].Name == name {
			return i
		}
	}
	return -1
}

// absentHolds reports whether a filter holds for an event without the
// property (docs/analytics.md §3: neq, not_in, not_contains and is_not_set do).
func absentHolds(op string) bool {
	switch op {
	case "neq", "not_in", "not_contains", "is_not_set":
		return true
	}
	return false
}

// condMatcher is a matcher whose filters are decided per row in one
// segment.
type condMatcher struct {
	bit   uint64
	preds []pred
}

// compileSegment is the scan's ScanSpec.Compile: the plan's matchers and
// columns compiled for one events segment. Event-name matching becomes a
// table per event code; each event filter is compiled against the
// segment's dictionary (a string filter becomes a bitset over codes); a
// filter that no row of the segment can pass removes its matcher from the
// segment (so a string equality on a value absent from the dictionary
// skips the segment's blocks), and one that every row passes is dropped.
func (p *plan) compileSegment(ref storage.SegmentRef, meta *segment.Meta) (*storage.SegmentPlan, error) {
	sp := &storage.SegmentPlan{Masks: make([]uint64, len(meta.EventNames))}
	pos := map[int]int{} // meta property index → index into sp.Props
	need := func(mi int) int {
		if j, ok := pos[mi]; ok {
			return j
		}
		pos[mi] = len(sp.Props)
		sp.Props = append(sp.Props, mi)
		return len(sp.Props) - 1
	}
	var conds []condMatcher
	for bit, m := range p.matchers {
		var codes []int
		for code, name := range meta.EventNames {
			if m.event == AnyEvent || m.event == name {
				codes = append(codes, code)
			}
		}
		if len(codes) == 0 {
			continue
		}
		preds, dead, err := segmentPreds(m.efs, ref.File, meta, need)
		if err != nil {
			return nil, err
		}
		if dead {
			continue
		}
		if len(preds) == 0 {
			for _, c := range codes {
				sp.Masks[c] |= 1 << bit
			}
			continue
		}
		if sp.Cond == nil {
			sp.Cond = make([]uint64, len(meta.EventNames))
		}
		for _, c := range codes {
			sp.Cond[c] |= 1 << bit
		}
		conds = append(conds, condMatcher{bit: 1 << bit, preds: preds})
	}
	for _, c := range p.cols {
		src := storage.ColumnSource{Prop: -1, Kind: columnKind(c.typ), Remap: c.remap[ref.File]}
		if mi := propIndex(meta, c.name); mi >= 0 {
			if meta.Props[mi].Type != c.typ && !widenedCol(meta.Props[mi].Type, c.typ) {
				return nil, fmt.Errorf("segment %s: property %q is %s, the app schema says %s", ref.File, c.name, meta.Props[mi].Type, c.typ)
			}
			src.Prop = need(mi)
			if meta.Props[mi].Type != c.typ {
				src.Kind = storage.ColIntFloat
			}
		}
		if c.event {
			src.Kind = storage.ColEvent
		}
		sp.Cols = append(sp.Cols, src)
	}
	if len(conds) > 0 {
		masks, cond := sp.Masks, sp.Cond
		sp.Rows = func(b *segment.Block, rm []uint64) {
			codes := b.Events[:b.Rows]
			for r, c := range codes {
				rm[r] = masks[c]
			}
			for i := range conds {
				cm := &conds[i]
				for r, c := range codes {
					if cond[c]&cm.bit == 0 {
						continue
					}
					ok := true
					for j := range cm.preds {
						pr := &cm.preds[j]
						if !pr.test(&b.Props[pr.col], r) {
							ok = false
							break
						}
					}
					if ok {
						rm[r] |= cm.bit
					}
				}
			}
		}
	}
	return sp, nil
}

// segmentPreds compiles the event filters fs for one events segment
// (file names it in errors): one pred per filter that some but not every
// row can pass, its column given by col(meta property index); dead when
// no row can pass them all (a filter on a property the segment lacks
// that needs it, or on a string value absent from its dictionary).
func segmentPreds(fs []*filter, file string, meta *segment.Meta, col func(mi int) int) (preds []pred, dead bool, err error) {
	for _, f := range fs {
		mi := propIndex(meta, f.prop)
		if mi < 0 {
			if !absentHolds(f.op) {
				return nil, true, nil
			}
			continue
		}
		if meta.Props[mi].Type != f.typ && !widenedCol(meta.Props[mi].Type, f.typ) {
			return nil, false, fmt.Errorf("segment %s: property %q is %s, the app schema says %s", file, f.prop, meta.Props[mi].Type, f.typ)
		}
		pr := compilePred(f, meta.Props[mi].Dict)
		if meta.Props[mi].Type != f.typ {
			pr.widen()
		}
		if pr.none {
			return nil, true, nil
		}
		if pr.all {
			continue
		}
		pr.col = col(mi)
		preds = append(preds, pr)
	}
	return preds, false, nil
}

// compileUsers is the scan's ScanSpec.CompileUsers: where each user value
// comes from in one users segment.
func (p *plan) compileUsers(ref storage.SegmentRef, meta *segment.Meta) (*storage.UserSegmentPlan, error) {
	up := &storage.UserSegmentPlan{}
	for _, c := range p.ucols {
		src := storage.ColumnSource{Prop: -1, Kind: columnKind(c.typ), Remap: c.remap[ref.File]}
		if mi := propIndex(meta, c.name); mi >= 0 {
			if meta.Props[mi].Type != c.typ && !widenedCol(meta.Props[mi].Type, c.typ) {
				return nil, fmt.Errorf("users segment %s: property %q is %s, the app schema says %s", ref.File, c.name, meta.Props[mi].Type, c.typ)
			}
			if meta.Props[mi].Type != c.typ {
				src.Kind = storage.ColIntFloat
			}
			src.Prop = len(up.Props)
			up.Props = append(up.Props, mi)
		}
		up.Cols = append(up.Cols, src)
	}
	return up, nil
}

// widenedCol reports whether a segment's column of type seg holds a
// property the app now types app after docs/analytics.md §1's widening: ints of a
// property that became float.
func widenedCol(seg, app event.Type) bool { return seg == event.TypeInt && app == event.TypeFloat }

func columnKind(t event.Type) storage.ColumnKind {
	switch t {
	case event.TypeString:
		return storage.ColString
	case event.TypeFloat:
		return storage.ColFloat
	}
	return storage.ColInt
}

// admission applies the per-user parts of the plan to one worker's
// trails before an analysis sees them: matchers whose user filters fail
// lose their bit on every event, and a user outside the cohort is
// rejected. A trail may come in chunks (package trail); the cohort is
// then decided on the chunks shown to prepass first (storage's
// PrepassVisitor). An admission is owned by one goroutine.
type admission struct {
	p      *plan
	cohort *analysis.CohortState // nil without a cohort filter
	// For a user whose trail comes in chunks: prepassed reports that
	// prepass has seen the last chunk, in that the user passes the
	// cohort filter (decided at the first chunk's admit).
	prepassed, in bool
}

func newAdmission(p *plan) admission {
	a := admission{p: p}
	if p.cohort != nil {
		a.cohort = analysis.NewCohortState(p.cohort)
	}
	return a
}

// admit reports whether the user of t, a whole trail or one of its
// chunks, passes the cohort filter, after clearing the bits of the
// matchers whose user filters fail. It panics on the first chunk of a
// user with a cohort filter that prepass has not seen (a scan that
// ignores storage.PrepassVisitor).
func (a *admission) admit(t *trail.Trail) bool {
	if !a.p.userPreds && a.cohort == nil {
		return true // the common case: nothing per user to apply (inlined)
	}
	return a.apply(t)
}

// apply is admit for a plan with user filters or a cohort filter.
func (a *admission) apply(t *trail.Trail) bool {
	p := a.p
	if p.userPreds {
		p.userMask(t)
	}
	if p.cohort == nil {
		return true
	}
	switch {
	case t.Offset == 0 && !t.More: // the whole trail
		a.cohort.Add(t)
		return a.cohort.In(p.userFlags(t))
	case t.Offset == 0:
		if !a.prepassed {
			panic("query: a chunked trail visited before its prepass")
		}
		a.prepassed = false
		a.in = a.cohort.In(p.userFlags(t))
	}
	return a.in
}

// prepass feeds one chunk of a user's trail to the cohort filter; the
// user is decided when admit sees the first chunk again.
func (a *admission) prepass(t *trail.Trail) {
	if a.p.userPreds {
		a.p.userMask(t)
	}
	a.cohort.Add(t)
	a.prepassed = !t.More
}

// userMask clears, on every event of t, the bits of the matchers whose
// user filters the user fails.
func (p *plan) userMask(t *trail.Trail) {
	keep := ^uint64(0)
	for bit, m := range p.matchers {
		for i := range m.upreds {
			if !m.upreds[i].testValue(t.User[m.ufs[i].ucol]) {
				keep &^= 1 << bit
				break
			}
		}
	}
	if keep != ^uint64(0) {
		for i := range t.Mask[:len(t.Times)] {
			t.Mask[i] &= keep
		}
	}
}

// userFlags returns the results of the cohort's user_property leaves for
// the user of t (bit i: leaf i holds).
func (p *plan) userFlags(t *trail.Trail) uint64 {
	var flags uint64
	for i, uf := range p.cohortFlags {
		if uf.pr.testValue(t.User[uf.f.ucol]) {
			flags |= 1 << i
		}
	}
	return flags
}

// scanRange widens an analysis' scan range [from, to) by the cohort's.
func (p *plan) scanRange(from, to int64) (int64, int64) {
	if p.cohort != nil {
		from, to = min(from, p.cohortFrom), max(to, p.cohortTo)
	}
	return from, to
}

func fieldIdx(name string, i int) string { return fmt.Sprintf("%s[%d]", name, i) }

func (p *plan) resolvedRange() ResolvedRange {
	return ResolvedRange{From: formatTime(p.from, p.loc), To: formatTime(p.to, p.loc)}
}

// incomplete reports whether a bucket ending at end (exclusive, UTC µs)
// extends past the end of the data or past now (docs/analytics.md §2).
func (p *plan) incomplete(end int64) bool {
	return !p.hasData || end > p.dataEnd || end > p.now
}

// noLimit is the open end of a scan range.
const (
	minTime = math.MinInt64
	maxTime = math.MaxInt64
)
