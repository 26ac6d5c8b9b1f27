package testutil

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
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
		{"u2", 30, "a"}, {"u1", 20, "b"}, {"u1", 10, "c"}, {"u1", 20, "a"}, {"u3", 5, "x"},
	}
	got := BuildTrails(evs, []string{"a", "a|b", Any})
	want := []UserTrail{
		{User: "u1", Trail: analysis.Trail{Times: []int64{10, 20, 20}, Mask: []uint64{4, 6, 7}}, Index: []int{2, 1, 3}},
		{User: "u2", Trail: analysis.Trail{Times: []int64{30}, Mask: []uint64{7}}, Index: []int{0}},
		{User: "u3", Trail: analysis.Trail{Times: []int64{5}, Mask: []uint64{4}}, Index: []int{4}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BuildTrails =\n%+v\nwant\n%+v", got, want)
	}
	if got := BuildTrails(evs, []string{"a"}); len(got) != 2 {
		t.Errorf("users without matching events must be left out: %+v", got)
	}
}

// TestNaiveSmall pins the reference implementations on tiny inputs whose
// results are obvious (the analysis package's golden files cover the rules
// in depth).
func TestNaiveSmall(t *testing.T) {
	const h = int64(3600e6)
	evs := []Ev{{"u1", 0, "a"}, {"u1", h, "b"}, {"u2", 0, "a"}, {"u2", 3 * h, "b"}}
	res, paths := NaiveFunnel(evs, FunnelQuery{Steps: []string{"a", "b"}, Window: 2 * h, From: 0, To: 10 * h})
	if res.Steps[0].Users != 2 || res.Steps[1].Users != 1 || res.Steps[1].AvgSeconds != 3600 || !res.Steps[1].HasTime {
		t.Errorf("NaiveFunnel = %+v", res)
	}
	if p := paths["u1"]; p.Step != 2 || !reflect.DeepEqual(p.Times, []int64{0, h}) || p.First != 0 {
		t.Errorf("u1 path %+v", p)
	}
	tr := NaiveTrend(evs, TrendQuery{Events: []string{Any, "b"}, Math: []analysis.TrendMath{analysis.MathCount, analysis.MathUsers},
		Bounds: []int64{0, 2 * h, 4 * h}, From: 0, To: 4 * h})
	if !reflect.DeepEqual(tr.Series[0].Buckets, []int64{3, 1}) || tr.Series[0].Total != 4 || tr.Series[1].Total != 2 {
		t.Errorf("NaiveTrend = %+v", tr)
	}
	day := int64(86400e6)
	rr := NaiveRetention(evs, RetentionQuery{Start: "a", Return: "b", Interval: timebucket.Hour, Loc: time.UTC,
		Periods: 4, From: 0, To: day})
	if len(rr.Cohorts) != 24 || !reflect.DeepEqual(rr.Cohorts[0].Retained, []int64{2, 1, 0, 1}) {
		t.Errorf("NaiveRetention cohort 0 = %+v", rr.Cohorts[0])
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
