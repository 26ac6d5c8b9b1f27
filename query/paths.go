package query

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/storage"
)

// Paths defaults and limits (docs/analytics.md §15).
const (
	defaultPathSteps  = 5
	defaultSessionGap = "30m"
	DefaultMaxEdges   = 50
	MaxPathEdges      = 10_000
	ellipsisItem      = "..."
)

// PathsResult is the result of a paths query (docs/analytics.md §15): the edges kept,
// by sessions descending, then source and target (byte-wise).
type PathsResult struct {
	Kind     string        `json:"kind"` // "paths"
	Range    ResolvedRange `json:"range"`
	TZ       string        `json:"tz"`
	Edges    []PathEdge    `json:"edges"`
	List     *ListResult   `json:"list,omitempty"`     // the users of the edge list.source → list.target, when asked
	Warnings []Warning     `json:"warnings,omitempty"` // notes on the query (docs/analytics.md §9): unknown events and values
	Stats    Stats         `json:"stats"`
}

// ResultKind returns "paths".
func (r *PathsResult) ResultKind() string { return "paths" }

func (r *PathsResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
}

// PathEdge is one edge: nodes "{position}_{item}", the path occurrences
// (sessions) that take it, their distinct users and the mean time between
// the two events in seconds.
type PathEdge struct {
	Source     string  `json:"source"`
	Target     string  `json:"target"`
	Sessions   int64   `json:"sessions"`
	Users      int64   `json:"users"`
	AvgSeconds float64 `json:"avg_seconds"`
}

// addEventCol returns the trail column of the events' names, adding it.
// Its name is empty (no property has that name), so it is never read
// from a property; its dictionary is the event names (columnDict).
func (p *plan) addEventCol() int {
	for i, c := range p.cols {
		if c.event {
			return i
		}
	}
	p.cols = append(p.cols, &column{event: true, typ: event.TypeString})
	return len(p.cols) - 1
}

// paths is a compiled paths query (docs/analytics.md §15, PostHog's paths).
type paths struct {
	e        *Engine
	p        *plan
	spec     analysis.PathsSpec
	maxEdges int
	items    []string // the sorted item dictionary
	acc      *analysis.Paths
}

func init() { register(kind{name: "paths", order: 7, compile: compilePaths}) }

// compilePaths checks and compiles a paths query: its limits, matchers,
// items (the plan's dictionaries are built first) and list.
func compilePaths(_ context.Context, e *Engine, p *plan) (compiled, error) {
	q := p.q
	pa := &paths{e: e, p: p}
	if err := pa.compileLimits(); err != nil {
		return nil, err
	}
	var listed []string // the events' names; nil for "$any"
	if q.Events != nil {
		if len(*q.Events) == 0 {
			return nil, invalid("events", "want \"$any\" or a non-empty list of event names")
		}
		if !slices.Contains(*q.Events, AnyEvent) {
			listed = *q.Events
		}
	}
	if err := pa.compileMatchers(); err != nil {
		return nil, err
	}
	var keep int
	if q.List != nil {
		var err error
		if keep, err = p.checkList("source", "target"); err != nil {
			return nil, err
		}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	var bitName [64]string
	if err := pa.compileNames(listed, &bitName); err != nil {
		return nil, err
	}
	if err := p.prepareFor(p.from, p.to); err != nil {
		return nil, err
	}
	pa.items = p.pathItems(&pa.spec, &bitName)
	if len(pa.items) >= analysis.MaxPathItems {
		return nil, &Error{Code: CodeLimitExceeded, Message: fmt.Sprintf("%d distinct path items; at most %d", len(pa.items), analysis.MaxPathItems-1)}
	}
	pa.spec.Exclude = make([]bool, len(pa.items))
	for _, x := range q.Exclude {
		if i, ok := pa.itemID(x); ok {
			pa.spec.Exclude[i] = true
		}
	}
	if q.List != nil {
		pos, src, ok1 := parseNode(q.List.Source, pa.itemID)
		tpos, dst, ok2 := parseNode(q.List.Target, pa.itemID)
		switch {
		case q.List.Source == "" || q.List.Target == "":
			return nil, invalid("list", "a paths list takes the source and target of an edge, e.g. \"1_home\" and \"2_cart\"")
		case ok1 && ok2 && tpos == pos+1 && pos >= 1 && pos < pa.spec.Steps:
			pa.spec.List = &analysis.PathsList{Pos: pos, Source: src, Target: dst, Keep: keep}
		}
	}
	return pa, nil
}

// itemID returns the id of item s (false: no such item).
func (pa *paths) itemID(s string) (uint32, bool) {
	i, ok := slices.BinarySearch(pa.items, s)
	return uint32(i), ok
}

// compileLimits reads the breakdown (none allowed), steps, session gap,
// maximum edges and minimum sessions into the spec.
func (pa *paths) compileLimits() error {
	q := pa.p.q
	if q.Breakdown != nil {
		return invalid("breakdown", "paths take no breakdown")
	}
	steps := q.PathSteps
	if steps == 0 {
		steps = defaultPathSteps
	}
	if steps < 2 || steps > analysis.MaxPathSteps {
		return invalid("steps", "want a path length of 2 to %d steps, found %d", analysis.MaxPathSteps, q.PathSteps)
	}
	gapText := q.SessionGap
	if gapText == "" {
		gapText = defaultSessionGap
	}
	gap, err := ParseDuration(gapText)
	if err != nil || gap <= 0 {
		return invalid("session_gap", "want a positive duration such as \"30m\" or \"1h\", found %q", q.SessionGap)
	}
	pa.maxEdges = q.MaxEdges
	if pa.maxEdges == 0 {
		pa.maxEdges = DefaultMaxEdges
	}
	if pa.maxEdges < 1 || pa.maxEdges > MaxPathEdges {
		return invalid("max_edges", "want 1 to %d edges, found %d", MaxPathEdges, q.MaxEdges)
	}
	if q.MinSessions < 0 {
		return invalid("min_sessions", "want at least 0 sessions, found %d", q.MinSessions)
	}
	pa.spec = analysis.PathsSpec{From: pa.p.from, To: pa.p.to, SessionGap: gap, Steps: steps, NameCol: -1, PropCol: -1}
	return nil
}

// compileMatchers compiles the start and end matchers and the item
// property.
func (pa *paths) compileMatchers() error {
	q, p := pa.p.q, pa.p
	if q.Start != nil {
		bit, err := p.addMatcher(*q.Start, "start", true)
		if err != nil {
			return err
		}
		pa.spec.Start = 1 << bit
	}
	if q.End != nil {
		bit, err := p.addMatcher(*q.End, "end", true)
		if err != nil {
			return err
		}
		pa.spec.End = 1 << bit
	}
	if name := q.ItemProperty; name != "" {
		t, ok := p.propType(name, false)
		if !ok {
			return p.unknownProp("item_property", name, false)
		}
		if t != event.TypeString {
			return invalid("item_property", "path items are strings; %q is %s", name, t)
		}
		pa.spec.PropCol = p.addCol(name, false)
	}
	return nil
}

// compileNames compiles where the events' names come from. An event's
// name is its item unless its item property is set. With one matcher bit
// per name (the listed events, or every name of the range's segments
// when they fit in the free bits) the name comes from the event's mask
// (bitName[bit] names bit's event); otherwise from a column of names,
// which the scan gathers row by row (10M generated events, paths from
// screen_view: 188–200 ms with the column, 99–162 ms with bits, three
// interleaved runs of 7 on the shared 2-core box).
func (pa *paths) compileNames(listed []string, bitName *[64]string) error {
	p, spec := pa.p, &pa.spec
	names := listed
	if listed == nil {
		var err error
		if names, err = p.eventNames(p.from, p.to); err != nil {
			return err
		}
	}
	if listed != nil || (len(names) > 0 && len(names) <= 64-len(p.matchers)) {
		for i, name := range names {
			field := "events"
			if listed != nil {
				field = fieldIdx("events", i)
			}
			bit, err := p.addMatcher(Matcher{Event: name}, field, true)
			if err != nil {
				return err
			}
			spec.Include |= 1 << bit
			bitName[bit] = name
		}
		spec.NameBits = spec.Include
		return nil
	}
	bit, err := p.addMatcher(Matcher{Event: AnyEvent}, "events", true)
	if err != nil {
		return err
	}
	spec.Include = 1 << bit
	spec.NameCol = p.addEventCol()
	return nil
}

// passes runs the one pass.
func (pa *paths) passes(ctx context.Context) (err error) {
	pa.acc, err = scanMerge(ctx, pa.e, pa.p, span{from: pa.p.from, to: pa.p.to},
		func(int) (*analysis.Paths, error) { return analysis.NewPaths(pa.spec) }, mergeOf[*analysis.Paths])
	return err
}

// finalize renders the edges and the list.
func (pa *paths) finalize(context.Context) (Result, error) {
	p, q := pa.p, pa.p.q
	merge := timer()
	kr := pa.acc.Result()
	res := &PathsResult{Kind: "paths", Range: p.resolvedRange(), TZ: p.loc.String(), Edges: pathEdges(kr.Edges, pa.items, q.MinSessions, pa.maxEdges)}
	if q.List != nil {
		l := kr.List
		if l == nil {
			l = &analysis.UserList{}
		}
		res.List = listResult(q.List, l, p.snap.Persons())
	}
	p.stats.MergeMS += merge()
	res.Stats = p.stats
	return res, nil
}

// pathItems returns the sorted item dictionary of a paths query (the
// event names and the item property's values; "..." is among them) and
// points spec at it: the items of the name bits (bitName[bit] names bit's
// event), or the plan's event-name column, and PropItem.
func (p *plan) pathItems(spec *analysis.PathsSpec, bitName *[64]string) []string {
	items := []string{ellipsisItem}
	var names, prop *column
	if spec.NameCol >= 0 {
		names = p.cols[spec.NameCol]
		items = append(items, names.dict...)
	}
	for m := spec.NameBits; m != 0; m &= m - 1 {
		items = append(items, bitName[bits.TrailingZeros64(m)])
	}
	if spec.PropCol >= 0 {
		prop = p.cols[spec.PropCol]
		items = append(items, prop.dict...)
	}
	slices.Sort(items)
	items = slices.Compact(items)
	id := func(s string) uint32 {
		i, _ := slices.BinarySearch(items, s)
		return uint32(i)
	}
	for m := spec.NameBits; m != 0; m &= m - 1 {
		b := bits.TrailingZeros64(m)
		spec.BitItem[b] = id(bitName[b])
	}
	if names != nil {
		// The event-name column reads item ids straight from each
		// segment's event codes.
		for _, m := range names.remap {
			for i, v := range m {
				m[i] = id(names.dict[v])
			}
		}
	}
	if prop != nil {
		spec.PropItem = make([]uint32, len(prop.dict))
		for i, v := range prop.dict {
			spec.PropItem[i] = id(v)
		}
	}
	spec.Ellipsis = id(ellipsisItem)
	return items
}

// eventNames returns the sorted event names of the events segments a scan
// of [from, to) reads.
func (p *plan) eventNames(from, to int64) ([]string, error) {
	from, to = p.scanRange(from, to)
	var names []string
	for _, ref := range p.snap.Segments {
		if ref.Kind != storage.KindEvents || ref.Rows == 0 || ref.MaxTime < from || ref.MinTime >= to {
			continue
		}
		r, err := p.snap.Reader(ref)
		if err != nil {
			return nil, err
		}
		names = append(names, r.Meta().EventNames...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// parseNode parses a node "{position}_{item}".
func parseNode(s string, itemID func(string) (uint32, bool)) (int, uint32, bool) {
	ps, item, ok := strings.Cut(s, "_")
	if !ok {
		return 0, 0, false
	}
	pos, err := strconv.Atoi(ps)
	if err != nil {
		return 0, 0, false
	}
	id, ok := itemID(item)
	return pos, id, ok
}

// pathEdges renders the kernel's edges and keeps those of the result
// (docs/analytics.md §15, PostHog's paths): at least minSessions sessions, the
// maxEdges heaviest (ties: source, then target, byte-wise), and of those
// the ones reachable from a position-1 node.
func pathEdges(kes []analysis.PathEdge, items []string, minSessions int64, maxEdges int) []PathEdge {
	var es []PathEdge
	for _, ke := range kes {
		if ke.Sessions < minSessions {
			continue
		}
		es = append(es, PathEdge{Source: fmt.Sprintf("%d_%s", ke.Pos, items[ke.Source]), Target: fmt.Sprintf("%d_%s", ke.Pos+1, items[ke.Target]),
			Sessions: ke.Sessions, Users: ke.Users, AvgSeconds: float64(ke.Micros) / float64(ke.Sessions) / 1e6})
	}
	slices.SortFunc(es, func(a, b PathEdge) int {
		return cmp.Or(cmp.Compare(b.Sessions, a.Sessions), strings.Compare(a.Source, b.Source), strings.Compare(a.Target, b.Target))
	})
	es = es[:min(len(es), maxEdges)]
	// Reachability from the position-1 nodes over the kept edges (every
	// edge goes one position further, so one pass in position order
	// suffices).
	reached := map[string]bool{}
	byPos := slices.Clone(es)
	slices.SortStableFunc(byPos, func(a, b PathEdge) int { return cmp.Compare(nodePos(a.Source), nodePos(b.Source)) })
	for _, e := range byPos {
		if nodePos(e.Source) == 1 || reached[e.Source] {
			reached[e.Source], reached[e.Target] = true, true
		}
	}
	out := []PathEdge{}
	for _, e := range es {
		if reached[e.Source] {
			out = append(out, e)
		}
	}
	return out
}

// nodePos returns the position of a rendered node.
func nodePos(n string) int {
	ps, _, _ := strings.Cut(n, "_")
	pos, _ := strconv.Atoi(ps)
	return pos
}

// writeTable prints one row per edge.
func (r *PathsResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "paths %s .. %s (%s): %d edges\n", r.Range.From, r.Range.To, r.TZ, len(r.Edges))
	fmt.Fprintln(w, "source\ttarget\tsessions\tusers\tavg time\t")
	for _, e := range r.Edges {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t\n", e.Source, e.Target, e.Sessions, e.Users, dur(&e.AvgSeconds))
	}
	if l := r.List; l != nil {
		writeList(w, fmt.Sprintf("users of the edge %s → %s", l.Source, l.Target), l)
	}
}

// pathsCSV are the CSV columns of a paths result (WriteCSV; docs/queries.md).
var pathsCSV = []string{"source", "target", "sessions", "users", "avg_seconds"}

// writeCSV writes one row per edge.
func (r *PathsResult) writeCSV(cw *csv.Writer) {
	cw.Write(pathsCSV)
	for _, e := range r.Edges {
		cw.Write([]string{e.Source, e.Target, inum(e.Sessions), inum(e.Users), fnum(e.AvgSeconds)})
	}
}
