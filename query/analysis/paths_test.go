package analysis_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/trail"
)

// pathsCase is a paths query turned into kernel input as the query layer
// builds it: trails with the included matchers' bits, then start and end,
// an event-name item column and the item property's column, and the
// item dictionary (event names and property values, sorted; "..." last).
type pathsCase struct {
	trails []testutil.UserTrail
	spec   analysis.PathsSpec
	items  []string
}

// newPathsCase builds the kernel input of q over d: with byBits one
// matcher bit per event name (the listed events, or every name of the
// data), else one included matcher and an event-name column.
func newPathsCase(d testutil.Data, q testutil.PathsQuery, byBits bool) *pathsCase {
	names := map[string]bool{}
	for _, e := range d.Events {
		names[e.Name] = true
	}
	var ms []testutil.Matcher
	spec := analysis.PathsSpec{From: q.From, To: q.To, SessionGap: q.SessionGap, Steps: q.Steps, NameCol: -1, PropCol: -1}
	var bitName []string
	switch {
	case byBits:
		bitName = q.Events
		if q.Events == nil {
			for n := range names {
				bitName = append(bitName, n)
			}
			slices.Sort(bitName)
		}
		for _, n := range bitName {
			spec.Include |= 1 << len(ms)
			ms = append(ms, testutil.Matcher{Event: n})
		}
		spec.NameBits = spec.Include
	case q.Events == nil:
		ms, spec.Include = []testutil.Matcher{{Event: testutil.Any}}, 1
	default:
		for _, n := range q.Events {
			spec.Include |= 1 << len(ms)
			ms = append(ms, testutil.Matcher{Event: n})
		}
	}
	if q.Start != nil {
		spec.Start = 1 << len(ms)
		ms = append(ms, *q.Start)
	}
	if q.End != nil {
		spec.End = 1 << len(ms)
		ms = append(ms, *q.End)
	}
	ts := testutil.TrailSpec{Matchers: ms, Cols: []string{"_name"}}
	if !byBits {
		spec.NameCol = 0
	}
	if q.ItemProp != "" {
		ts.Cols = append(ts.Cols, q.ItemProp)
		spec.PropCol = 1
	}
	trails, dicts := testutil.BuildTrailsWith(d, ts)
	var items []string
	for n := range names {
		items = append(items, n)
	}
	items = append(items, dicts[q.ItemProp]...)
	slices.Sort(items)
	items = slices.Compact(items)
	id := func(s string) uint32 {
		i, _ := slices.BinarySearch(items, s)
		return uint32(i)
	}
	for i := range trails {
		c := &trails[i].Trail.Cols[0]
		for j, ix := range trails[i].Index {
			c.Set[j], c.Bits[j] = true, uint64(id(d.Events[ix].Name))
		}
	}
	for b, n := range bitName {
		spec.BitItem[b] = id(n)
	}
	for _, v := range dicts[q.ItemProp] {
		spec.PropItem = append(spec.PropItem, id(v))
	}
	spec.Exclude = make([]bool, len(items))
	for _, x := range q.Exclude {
		if i, ok := slices.BinarySearch(items, x); ok {
			spec.Exclude[i] = true
		}
	}
	spec.Ellipsis = uint32(len(items))
	items = append(items, "...")
	return &pathsCase{trails: trails, spec: spec, items: items}
}

// node renders position pos of item id.
func (c *pathsCase) node(pos int, item uint32) string {
	return fmt.Sprintf("%d_%s", pos, c.items[item])
}

// pathsRows is a paths result in comparable form.
type pathsRows struct {
	Edges []testutil.PathEdge // with Users left nil (counted in NUsers)
	Users []int64
	IDs   []string
	N     int64
}

func (c *pathsCase) result(r analysis.PathsResult) pathsRows {
	var out pathsRows
	for _, e := range r.Edges {
		out.Edges = append(out.Edges, testutil.PathEdge{Source: c.node(e.Pos, e.Source), Target: c.node(e.Pos+1, e.Target), Sessions: e.Sessions, Micros: e.Micros})
		out.Users = append(out.Users, e.Users)
	}
	if r.List != nil {
		out.N, out.IDs = r.List.Count(), r.List.Page(0, analysis.MaxListKeep)
	}
	return out
}

// naiveRows renders NaivePaths in the kernel's order (position, then
// item ids: the items are sorted, so byte order of the items).
func naivePathRows(c *pathsCase, es []testutil.PathEdge) pathsRows {
	var out pathsRows
	pos := func(n string) (int, uint32) {
		var p int
		var item string
		fmt.Sscanf(n, "%d_", &p)
		item = n[len(fmt.Sprint(p))+1:]
		i := slices.Index(c.items, item)
		return p, uint32(i)
	}
	slices.SortFunc(es, func(a, b testutil.PathEdge) int {
		pa, sa := pos(a.Source)
		pb, sb := pos(b.Source)
		_, ta := pos(a.Target)
		_, tb := pos(b.Target)
		switch {
		case pa != pb:
			return pa - pb
		case sa != sb:
			return int(sa) - int(sb)
		}
		return int(ta) - int(tb)
	})
	for _, e := range es {
		out.Edges = append(out.Edges, testutil.PathEdge{Source: e.Source, Target: e.Target, Sessions: e.Sessions, Micros: e.Micros})
		out.Users = append(out.Users, int64(len(e.Users)))
	}
	return out
}

// runPaths runs q over evs with event names from a column and from mask
// bits, checks that both agree with the naive reference and returns the
// result.
func runPaths(t *testing.T, evs []testutil.Ev, q testutil.PathsQuery) pathsRows {
	t.Helper()
	var out pathsRows
	for _, byBits := range []bool{false, true} {
		c := newPathsCase(testutil.Data{Events: evs}, q, byBits)
		acc, err := analysis.NewPaths(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.trails {
			acc.Add(&c.trails[i].Trail)
		}
		out = c.result(acc.Result())
		if want := naivePathRows(c, testutil.NaivePaths(testutil.Data{Events: evs}, q)); !reflect.DeepEqual(out, want) {
			t.Fatalf("names by bits %v: kernel %+v\nnaive  %+v", byBits, out, want)
		}
	}
	return out
}

// edgesOf renders a result as "source>target:sessions/users/seconds".
func edgesOf(r pathsRows) []string {
	var out []string
	for i, e := range r.Edges {
		out = append(out, fmt.Sprintf("%s>%s:%d/%d/%g", e.Source, e.Target, e.Sessions, r.Users[i], float64(e.Micros)/float64(e.Sessions)/1e6))
	}
	return out
}

// TestPathsSpec pins docs/analytics.md §15's words.
func TestPathsSpec(t *testing.T) {
	base := at("2021-05-01T10:00:00Z")
	seq := func(u string, items ...any) []testutil.Ev {
		// items: names, with a number before a name giving its offset in
		// seconds from base (default: 60 s after the previous event)
		var evs []testutil.Ev
		ts := base - 60e6
		for i := 0; i < len(items); i++ {
			if s, ok := items[i].(int); ok {
				ts = base + int64(s)*1e6
				i++
			} else {
				ts += 60e6
			}
			evs = append(evs, testutil.Ev{User: u, Time: ts, Name: items[i].(string)})
		}
		return evs
	}
	q := testutil.PathsQuery{SessionGap: 30 * 60e6, Steps: 5, From: base, To: base + 86400e6}
	check := func(name string, evs []testutil.Ev, q testutil.PathsQuery, want ...string) {
		t.Helper()
		got := runPaths(t, evs, q)
		if g := edgesOf(got); !slices.Equal(g, want) {
			t.Errorf("%s: edges %q, want %q", name, g, want)
		}
	}
	// Sessions split where the gap is ≥ session_gap: 30 min exactly
	// splits, 30 min − 1 s does not.
	check("session split", slices.Concat(seq("u1", 0, "a", 1800, "b", 3599, "c")), q,
		"1_b>2_c:1/1/1799")
	// Consecutive repeats collapse into the last one (its time counts).
	check("repeats", seq("u1", "a", "a", "a", "b", "b", "a"), q,
		"1_a>2_b:1/1/120", "2_b>3_a:1/1/60")
	// steps truncates the path; two users, one edge.
	check("steps", slices.Concat(seq("u1", "a", "b", "c"), seq("u2", "a", "b")), testutil.PathsQuery{SessionGap: q.SessionGap, Steps: 2, From: q.From, To: q.To},
		"1_a>2_b:2/2/60")
	// start: from the first start item; end: up to the first end item
	// after it, keeping the last `steps` items.
	start := &testutil.Matcher{Event: "s"}
	end := &testutil.Matcher{Event: "e"}
	long := seq("u1", "x", "s", "a", "b", "c", "d", "f", "e", "g", "e")
	qs := q
	qs.Start = start
	check("start", long, qs, "1_s>2_a:1/1/60", "2_a>3_b:1/1/60", "3_b>4_c:1/1/60", "4_c>5_d:1/1/60")
	qe := q
	qe.End = end
	check("end", long, qe, "1_b>2_c:1/1/60", "2_c>3_d:1/1/60", "3_d>4_f:1/1/60", "4_f>5_e:1/1/60")
	// Both, longer than steps: ⌈4/2⌉ items, "...", ⌊4/2⌋ items; the
	// "..." takes the time of the first item it stands for (b).
	qb := qs
	qb.End = end
	check("start and end", long, qb, "1_s>2_a:1/1/60", "2_a>3_...:1/1/60", "3_...>4_f:1/1/180", "4_f>5_e:1/1/60")
	qb.Steps = 4 // ⌈3/2⌉ = 2 items, "...", ⌊3/2⌋ = 1 item
	check("start and end, steps 4", long, qb, "1_s>2_a:1/1/60", "2_a>3_...:1/1/60", "3_...>4_e:1/1/240")
	qb.Steps = 20
	check("start and end, short", seq("u1", "s", "a", "e"), qb, "1_s>2_a:1/1/60", "2_a>3_e:1/1/60")
	// Sessions without the start (or end) item are dropped.
	check("no start", seq("u1", "a", "b"), qs)
	check("no end", seq("u1", "a", "b"), qe)
	// Item property: events with it use its value, the others their name;
	// exclusions apply to items.
	withURL := seq("u1", "a", "a", "b", "c")
	withURL[0].Props = map[string]event.Value{"url": event.String("/home")}
	withURL[2].Props = map[string]event.Value{"url": event.String("/cart")}
	qu := q
	qu.ItemProp = "url"
	check("item property", withURL, qu, "1_/home>2_a:1/1/60", "2_a>3_/cart:1/1/60", "3_/cart>4_c:1/1/60")
	qu.Exclude = []string{"a"}
	check("exclude", withURL, qu, "1_/home>2_/cart:1/1/120", "2_/cart>3_c:1/1/60")
	// Events list: only the listed events are path events (gaps are
	// measured between them).
	qn := q
	qn.Events = []string{"a", "c"}
	check("events", seq("u1", "a", "b", "c"), qn, "1_a>2_c:1/1/120")
}

// randomPathsQuery draws a paths query for diff case d: session gaps,
// steps, listed events or all, an item property, exclusions, start and
// end matchers.
func randomPathsQuery(d *diffCase) testutil.PathsQuery {
	gaps := []int64{1, 30 * 60e6, 30*60e6 + 1, 3600e6, 6 * 3600e6, 86400e6}
	from, to := d.rangeIn()
	q := testutil.PathsQuery{SessionGap: gaps[d.r.IntN(len(gaps))], Steps: 2 + d.r.IntN(7), From: from, To: to}
	if d.r.IntN(3) == 0 {
		q.Events = []string{"a", "b", "c", "d"}[:2+d.r.IntN(2)]
	}
	if d.r.IntN(2) == 0 {
		q.ItemProp = "s"
	}
	for _, x := range []string{"a", "x", "zz"} {
		if d.r.IntN(4) == 0 {
			q.Exclude = append(q.Exclude, x)
		}
	}
	if d.r.IntN(2) == 0 {
		q.Start = &testutil.Matcher{Event: diffMatchers[d.r.IntN(len(diffMatchers))]}
	}
	if d.r.IntN(2) == 0 {
		q.End = &testutil.Matcher{Event: diffMatchers[d.r.IntN(len(diffMatchers))]}
	}
	return q
}

// TestDiffPaths compares the kernel with NaivePaths on random data: event
// lists, an item property, exclusions, start and end matchers, session
// gaps and steps, lists of random edges; trails fed whole and in chunks
// of every size over 1-3 accumulators.
func TestDiffPaths(t *testing.T) {
	edges := 0
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		q := randomPathsQuery(d)
		c := newPathsCase(d.data, q, d.r.IntN(2) == 0)
		naive := testutil.NaivePaths(d.data, q)
		var listed []string
		if len(naive) > 0 {
			e := naive[d.r.IntN(len(naive))]
			var pos int
			fmt.Sscanf(e.Source, "%d_", &pos)
			src := slices.Index(c.items, e.Source[len(fmt.Sprint(pos))+1:])
			dst := slices.Index(c.items, e.Target[len(fmt.Sprint(pos+1))+1:])
			c.spec.List = &analysis.PathsList{Pos: pos, Source: uint32(src), Target: uint32(dst), Keep: analysis.MaxListKeep}
			listed = e.Users
		}
		acc := sameForEveryChunking(t, c.trails, d.plan, d.r, func() (*analysis.Paths, error) { return analysis.NewPaths(c.spec) },
			func(a *analysis.Paths) pathsRows { return c.result(a.Result()) })
		got := c.result(acc.Result())
		want := naivePathRows(c, naive)
		want.N, want.IDs = int64(len(listed)), listed
		edges += len(want.Edges)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: paths %+v\nkernel %+v\nnaive  %+v", seed, q, got, want)
		}
	}
	if edges < diffSeeds {
		t.Errorf("only %d edges over %d seeds", edges, diffSeeds)
	}
}

// TestPathsAllocs checks that Add does not allocate once the edges exist.
func TestPathsAllocs(t *testing.T) {
	d := newDiffCase(7)
	q := testutil.PathsQuery{SessionGap: 3600e6, Steps: 6, From: at("2021-03-26T00:00:00Z"), To: at("2021-03-30T00:00:00Z"), ItemProp: "s",
		Start: &testutil.Matcher{Event: "a"}, End: &testutil.Matcher{Event: "c"}}
	c := newPathsCase(d.data, q, true)
	acc, err := analysis.NewPaths(c.spec)
	if err != nil {
		t.Fatal(err)
	}
	noAllocs(t, len(c.trails), func(i int) { acc.Add(&c.trails[i].Trail) })
	acc.Add(&trail.Trail{Cols: make([]trail.Column, 2)})
}
