package testutil

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		matcher, name string
		want          bool
	}{
		{"a", "a", true}, {"a", "b", false}, {Any, "zzz", true}, {"a|b", "b", true},
		{"a|b", "ab", false}, {"a|b", "a|b", false}, {"", "", true},
	} {
		if got := Match(c.matcher, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.matcher, c.name, got)
		}
	}
}

func TestRandomEvents(t *testing.T) {
	a := RandomEvents(3, RandomOptions{})
	b := RandomEvents(3, RandomOptions{})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("RandomEvents is not deterministic")
	}
	if reflect.DeepEqual(a, RandomEvents(4, RandomOptions{})) {
		t.Fatal("different seeds gave the same events")
	}
	if len(a) != 300 {
		t.Fatalf("%d events, want the default 300", len(a))
	}
	type key struct {
		user string
		t    int64
	}
	seen := map[key]int{}
	names := map[string]bool{}
	outOfOrder := 0
	for i, e := range a {
		seen[key{e.User, e.Time}]++
		names[e.Name] = true
		if i > 0 && e.Time < a[i-1].Time {
			outOfOrder++
		}
	}
	ties := 0
	for _, n := range seen {
		if n > 1 {
			ties += n
		}
	}
	if ties < len(a)/5 {
		t.Errorf("only %d of %d events share a user timestamp; want many ties", ties, len(a))
	}
	if len(names) != 4 || outOfOrder == 0 {
		t.Errorf("names %v, %d arrivals out of time order", names, outOfOrder)
	}
}

func TestBuildTrails(t *testing.T) {
	evs := []Ev{
		{User: "u2", Time: 30, Name: "a"}, {User: "u1", Time: 20, Name: "b"}, {User: "u1", Time: 10, Name: "c"},
		{User: "u1", Time: 20, Name: "a"}, {User: "u3", Time: 5, Name: "x"},
	}
	got := BuildTrails(evs, []string{"a", "a|b", Any})
	want := []UserTrail{
		{User: "u1", Trail: trail.Trail{Times: []int64{10, 20, 20}, Mask: []uint64{4, 6, 7}, Cols: []trail.Column{}, ID: []byte("u1")}, Index: []int{2, 1, 3}},
		{User: "u2", Trail: trail.Trail{Times: []int64{30}, Mask: []uint64{7}, Cols: []trail.Column{}, ID: []byte("u2")}, Index: []int{0}},
		{User: "u3", Trail: trail.Trail{Times: []int64{5}, Mask: []uint64{4}, Cols: []trail.Column{}, ID: []byte("u3")}, Index: []int{4}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BuildTrails =\n%+v\nwant\n%+v", got, want)
	}
	if got := BuildTrails(evs, []string{"a"}); len(got) != 2 {
		t.Errorf("users without matching events must be left out: %+v", got)
	}
}

func TestBuildTrailsWithColumnsAndFilters(t *testing.T) {
	d := Data{
		Events: []Ev{
			{User: "u1", Time: 10, Name: "a", Props: map[string]event.Value{"s": event.String("y"), "f": event.Float(math.Copysign(0, -1))}},
			{User: "u1", Time: 20, Name: "a", Props: map[string]event.Value{"s": event.String("x")}},
			{User: "u2", Time: 5, Name: "a"},
		},
		Users: []UserWrite{{User: "u1", Time: 1, Props: map[string]event.Value{"tier": event.String("gold")}}},
	}
	trails, dicts := BuildTrailsWith(d, TrailSpec{
		Matchers: []Matcher{{Event: "a", Where: []Filter{{Prop: "s", Op: "eq", Values: []event.Value{event.String("x")}}}},
			{Event: "a", Where: []Filter{{Prop: "tier", Op: "is_set", User: true}}}},
		Cols: []string{"s", "f"}, UserCols: []string{"tier"},
	})
	if !reflect.DeepEqual(dicts["s"], []string{"x", "y"}) || !reflect.DeepEqual(dicts["user:tier"], []string{"gold"}) {
		t.Fatalf("dicts %v", dicts)
	}
	u1 := trails[0].Trail
	if len(trails) != 1 || !reflect.DeepEqual(u1.Mask, []uint64{2, 3}) ||
		!reflect.DeepEqual(u1.Cols[0], trail.Column{Set: []bool{true, true}, Bits: []uint64{1, 0}}) ||
		!reflect.DeepEqual(u1.Cols[1], trail.Column{Set: []bool{true, false}, Bits: []uint64{0, 0}}) ||
		u1.User[0] != (trail.Value{Set: true, Bits: 0}) {
		t.Errorf("trails %+v", trails)
	}
}

func TestFilterHolds(t *testing.T) {
	i, s := event.Int, event.String
	for _, c := range []struct {
		f    Filter
		v    event.Value
		want bool
	}{
		{Filter{Op: "eq", Values: []event.Value{i(3)}}, i(3), true},
		{Filter{Op: "eq", Values: []event.Value{i(3)}}, event.Value{}, false},
		{Filter{Op: "neq", Values: []event.Value{i(3)}}, event.Value{}, true},
		{Filter{Op: "neq", Values: []event.Value{i(3)}}, i(3), false},
		{Filter{Op: "in", Values: []event.Value{s("a"), s("b")}}, s("b"), true},
		{Filter{Op: "not_in", Values: []event.Value{s("a"), s("b")}}, event.Value{}, true},
		{Filter{Op: "gt", Values: []event.Value{event.Float(1.5)}}, event.Float(1.5), false},
		{Filter{Op: "gte", Values: []event.Value{event.Float(1.5)}}, event.Float(1.5), true},
		{Filter{Op: "lt", Values: []event.Value{s("m")}}, s("a"), true},
		{Filter{Op: "lte", Values: []event.Value{i(-1)}}, i(0), false},
		{Filter{Op: "contains", Values: []event.Value{s("ar")}}, s("cardano"), true},
		{Filter{Op: "not_contains", Values: []event.Value{s("ar")}}, event.Value{}, true},
		{Filter{Op: "is_set"}, event.Bool(false), true},
		{Filter{Op: "is_not_set"}, event.Value{}, true},
	} {
		if got := c.f.Holds(c.v); got != c.want {
			t.Errorf("%+v.Holds(%v) = %v", c.f, c.v, got)
		}
	}
}

func TestCurrentUsersLatestWriteWins(t *testing.T) {
	ws := []UserWrite{
		{User: "u", Time: 20, Props: map[string]event.Value{"a": event.Int(1)}},
		{User: "u", Time: 10, Props: map[string]event.Value{"a": event.Int(2), "b": event.Int(3)}},
		{User: "u", Time: 20, Props: map[string]event.Value{"a": event.Int(4)}}, // same time, later arrival
	}
	got := CurrentUsers(ws)["u"]
	if got["a"] != event.Int(4) || got["b"] != event.Int(3) {
		t.Errorf("current = %v", got)
	}
	if a, b := RandomUsers(1, RandomEvents(1, RandomOptions{})), RandomUsers(1, RandomEvents(1, RandomOptions{})); !reflect.DeepEqual(a, b) || len(a) == 0 {
		t.Error("RandomUsers is not deterministic or empty")
	}
}

// TestNaiveSmall pins the reference implementations on tiny inputs whose
// results are obvious (the analysis package's golden files cover the rules
// in depth).
func TestNaiveSmall(t *testing.T) {
	const h = int64(3600e6)
	p := func(v float64) map[string]event.Value { return map[string]event.Value{"f": event.Float(v)} }
	evs := []Ev{{User: "u1", Time: 0, Name: "a", Props: p(1)}, {User: "u1", Time: h, Name: "b", Props: p(2)},
		{User: "u2", Time: 0, Name: "a", Props: p(4)}, {User: "u2", Time: 3 * h, Name: "b"}}
	d := Data{Events: evs, Users: []UserWrite{{User: "u2", Time: 0, Props: map[string]event.Value{"tier": event.String("gold")}}}}
	res, paths := NaiveFunnel(d, FunnelQuery{Steps: []string{"a", "b"}, Window: 2 * h, From: 0, To: 10 * h})
	if res.Steps[0].Users != 2 || res.Steps[1].Users != 1 || res.Steps[1].AvgSeconds != 3600 || !res.Steps[1].HasTime {
		t.Errorf("NaiveFunnel = %+v", res)
	}
	if p := paths["u1"]; p.Step != 2 || !reflect.DeepEqual(p.Times, []int64{0, h}) || p.First != 0 {
		t.Errorf("u1 path %+v", p)
	}
	q := FunnelQuery{Steps: []string{"a", "b"}, Window: 4 * h, From: 0, To: 10 * h,
		Common: Common{Breakdown: &Breakdown{Prop: "tier", User: true}}}
	_, paths = NaiveFunnel(d, q)
	groups := NaiveFunnelBreakdown(d, q, paths)
	if len(groups) != 2 || groups[0].Value != "(none)" || groups[1].Value != "gold" || groups[1].Steps[1].Users != 1 ||
		!reflect.DeepEqual(FunnelUsers(paths, 1, true), []string(nil)) || !reflect.DeepEqual(FunnelUsers(paths, 2, false), []string{"u1", "u2"}) {
		t.Errorf("funnel breakdown %+v", groups)
	}
	tr := NaiveTrend(d, TrendQuery{Events: []string{Any, "b", "a", Any}, Props: []string{"", "", "f", "f"},
		Math:   []analysis.TrendMath{analysis.MathCount, analysis.MathUsers, analysis.MathAvg, analysis.MathMedian},
		Bounds: []int64{0, 2 * h, 4 * h}, From: 0, To: 4 * h})
	if !reflect.DeepEqual(tr[0][0].Buckets, []float64{3, 1}) || tr[0][0].Total != 4 || tr[1][0].Total != 2 ||
		tr[2][0].Total != 2.5 || tr[3][0].Total != 2 || !reflect.DeepEqual(tr[3][0].Buckets, []float64{2, 0}) {
		t.Errorf("NaiveTrend = %+v", tr)
	}
	day := int64(86400e6)
	rr := NaiveRetention(d, RetentionQuery{Start: "a", Return: "b", Interval: timebucket.Hour, Periods: 4, From: 0, To: day})
	if len(rr[0].Cohorts) != 24 || !reflect.DeepEqual(rr[0].Cohorts[0].Retained, []int64{2, 1, 0, 1}) {
		t.Errorf("NaiveRetention cohort 0 = %+v", rr[0].Cohorts[0])
	}
	in := CohortMembers(d, Cond{Op: "and", Kids: []Cond{
		{Op: "performed", Matcher: Matcher{Event: "b"}, CountOp: "gte", N: 1, From: 0, To: 2 * h},
		{Op: "not", Kids: []Cond{{Op: "user_property", Filter: Filter{Prop: "tier", Op: "eq", Values: []event.Value{event.String("gold")}, User: true}}}}}})
	if !reflect.DeepEqual(in, map[string]bool{"u1": true}) {
		t.Errorf("CohortMembers = %v", in)
	}
}

const sampleCases = `# header line

=== first
query a
ev 1
---
out 1

out 2

=== second
---
`

func TestParseCases(t *testing.T) {
	cf, err := ParseCases(sampleCases)
	if err != nil {
		t.Fatal(err)
	}
	if cf.Header != "# header line\n\n" || len(cf.Cases) != 2 {
		t.Fatalf("parsed %+v", cf)
	}
	c := cf.Cases[0]
	if c.Name != "first" || c.Line != 3 || !reflect.DeepEqual(c.Input, []string{"query a", "ev 1"}) || c.Expected != "out 1\n\nout 2\n" {
		t.Errorf("case 0 = %+v", c)
	}
	if c := cf.Cases[1]; c.Name != "second" || len(c.Input) != 0 || c.Expected != "" {
		t.Errorf("case 1 = %+v", c)
	}
	again, err := ParseCases(cf.Format())
	if err != nil || !reflect.DeepEqual(again, cf) {
		t.Errorf("Format does not round-trip: %v\n%q", err, cf.Format())
	}
	for _, bad := range []string{"=== a\nno separator\n", "=== \n---\n", "=== a\nx\n=== b\n---\n"} {
		if _, err := ParseCases(bad); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("ParseCases(%q) error %v, want a line-numbered error", bad, err)
		}
	}
}

func TestCaseFileIO(t *testing.T) {
	path := t.TempDir() + "/cases.txt"
	cf, _ := ParseCases(sampleCases)
	if err := WriteCaseFile(path, cf); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCaseFile(path)
	if err != nil || !reflect.DeepEqual(got, cf) {
		t.Errorf("ReadCaseFile = %+v, %v", got, err)
	}
	if _, err := ReadCaseFile(path + ".missing"); err == nil {
		t.Error("ReadCaseFile of a missing file succeeded")
	}
}

// FuzzParseCases: parsing never panics, and whatever parses re-formats to
// a text that parses to the same cases (Format is a fixed point after one
// round).
func FuzzParseCases(f *testing.F) {
	f.Add(sampleCases)
	f.Add("")
	f.Add("=== x\n---")
	f.Add("h\n=== a\n\n---\n\n\n=== b\n---\nz")
	f.Fuzz(func(t *testing.T, s string) {
		cf, err := ParseCases(s)
		if err != nil {
			return
		}
		out := cf.Format()
		cf2, err := ParseCases(out)
		if err != nil {
			t.Fatalf("formatted output does not parse: %v\n%q", err, out)
		}
		if out2 := cf2.Format(); out2 != out {
			t.Fatalf("Format not stable:\n%q\n%q", out, out2)
		}
	})
}

func TestChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for seed := range 200 {
		n := r.IntN(40)
		tr := trail.Trail{Times: make([]int64, n), Mask: make([]uint64, n), ID: []byte("u"),
			Cols: []trail.Column{{Set: make([]bool, n), Bits: make([]uint64, n)}}}
		var tm int64
		for i := range n {
			tm += int64(r.IntN(3)) // many ties
			tr.Times[i], tr.Mask[i], tr.Cols[0].Bits[i] = tm, uint64(i), uint64(i)
		}
		cs := Chunks(&tr, r, 1+r.IntN(6))
		off := 0
		for k, c := range cs {
			if c.Offset != off || c.More != (k < len(cs)-1) || (len(c.Times) == 0 && n > 0) {
				t.Fatalf("seed %d chunk %d: offset %d more %v len %d, want offset %d", seed, k, c.Offset, c.More, len(c.Times), off)
			}
			for i := range c.Times {
				if c.Mask[i] != uint64(off+i) || c.Cols[0].Bits[i] != uint64(off+i) {
					t.Fatalf("seed %d chunk %d: event %d is not event %d", seed, k, i, off+i)
				}
			}
			if k > 0 && len(c.Times) > 0 && c.Times[0] == tr.Times[off-1] {
				t.Fatalf("seed %d: chunk %d splits the tie group at %d", seed, k, c.Times[0])
			}
			off += len(c.Times)
		}
		if off != n {
			t.Fatalf("seed %d: chunks hold %d events, want %d", seed, off, n)
		}
	}
}
