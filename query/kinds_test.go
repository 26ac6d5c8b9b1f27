package query

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/storage"
)

// Queries of the new kinds on the generator's data, with their options.
const (
	genStickiness = `{"kind":"stickiness","app":"g","range":{"from":"2024-01-01","to":"2024-01-31"},"tz":"Europe/Berlin","interval":"day",
		"series":[{"event":"app_open"},{"event":"purchase","label":"buyers"}],"breakdown":{"property":"platform","source":"user","limit":2},
		"list":{"series":0,"intervals":2,"breakdown_value":"(other)","limit":5}}`
	genStickinessEvent = `{"kind":"stickiness","app":"g","range":{"from":"2024-01-03T12:00:00Z","to":"2024-02-20"},"interval":"week","week_start":"sunday",
		"series":[{"event":"$any","where":[{"property":"country","op":"in","value":["US","IN","BR"]}]}],"min_events":3,"cumulative":true,
		"breakdown":{"property":"country","limit":2},"list":{"series":0,"intervals":1}}`
	genLifecycle = `{"kind":"lifecycle","app":"g","range":{"from":"2024-01-08","to":"2024-03-04"},"interval":"week","event":"app_open",
		"breakdown":{"property":"channel","source":"user","limit":3},"list":{"bucket":"2024-01-20","status":"dormant","breakdown_value":"(other)"}}`
	genPaths = `{"kind":"paths","app":"g","range":{"from":"2024-01-01","to":"2024-02-01"},"steps":6,"item_property":"url",
		"start":{"event":"app_open"},"exclude":["scroll","click"],"max_edges":40,"list":{"source":"1_/","target":"2_/product/0"}}`
	genPathsEnd = `{"kind":"paths","app":"g","range":{"from":"2024-01-01","to":"2024-02-01"},"events":["view_item","add_to_cart","begin_checkout","purchase","app_open"],
		"start":{"event":"app_open"},"end":{"event":"purchase"},"steps":4,"session_gap":"1h","min_sessions":2}`
	genAttribution = `{"kind":"attribution","app":"g","range":{"from":"2024-01-15","to":"2024-02-15"},"conversion":{"event":"install"},
		"touchpoints":[{"event":"ad_click","lookback":"7d"},{"event":"ad_impression","lookback":"1d"}],"channel":"channel","model":"time_decay","half_life":"1d",
		"subsequent":{"event":"purchase","window":"30d","value":"revenue"},"interval":"week","breakdown":{"property":"platform","limit":2},
		"list":{"channel":"social","breakdown_value":"ios","limit":3}}`
	genAttributionFirst = `{"kind":"attribution","app":"g","range":{"from":"2024-01-15","to":"2024-02-15"},"conversion":{"event":"purchase"},"conversions":"first",
		"touchpoints":[{"event":"ad_click","lookback":"30d"}],"channel":"channel","model":"position_based","value":"revenue"}`
)

var genKindQueries = []string{genStickiness, genStickinessEvent, genLifecycle, genPaths, genPathsEnd, genAttribution, genAttributionFirst}

// TestKindsDeterministic: docs/analytics.md §8 for the new kinds — the same answer,
// bit for bit, for any parallelism and shard count, with every option.
func TestKindsDeterministic(t *testing.T) {
	cfg := gen.Config{Events: 60_000, Seed: 5}
	var want []string
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, shards := range []int{1, 16} {
		st := openStore(t, t.TempDir(), shards)
		importGen(t, st, "g", cfg)
		for _, workers := range []int{1, 3} {
			runtime.GOMAXPROCS(workers)
			eng := New(st, Config{Workers: workers})
			var got []string
			for _, js := range genKindQueries {
				res := run(t, eng, js)
				*StatsOf(res) = Stats{}
				b, _ := json.Marshal(res)
				got = append(got, string(b))
			}
			if want == nil {
				want = got
				checkKindsPlausible(t, eng)
				continue
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("shards %d workers %d query %d differs:\n%s\n%s", shards, workers, i, got[i], want[i])
				}
			}
		}
	}
}

// checkKindsPlausible checks that the generated data gives the new kinds
// something to show.
func checkKindsPlausible(t *testing.T, eng *Engine) {
	s := run(t, eng, genStickiness).(*StickinessResult)
	if len(s.Series) != 2*3 || s.Series[0].Users == 0 || s.Series[0].Counts[1] == 0 || *s.Series[2].BreakdownValue != otherLabel || s.List == nil {
		t.Fatalf("implausible stickiness: %+v", s)
	}
	if s.List.Users != s.Series[2].Counts[1] {
		t.Fatalf("stickiness list of %d users, count shown %d", s.List.Users, s.Series[2].Counts[1])
	}
	se := run(t, eng, genStickinessEvent).(*StickinessResult)
	for _, ser := range se.Series {
		for i := 1; i < len(ser.Counts); i++ {
			if ser.Counts[i] > ser.Counts[i-1] {
				t.Fatalf("cumulative stickiness not decreasing: %v", ser.Counts)
			}
		}
	}
	l := run(t, eng, genLifecycle).(*LifecycleResult)
	if l.Buckets[0].New == 0 || l.Buckets[1].Returning == 0 || l.Buckets[1].Dormant >= 0 || len(l.Breakdown) != 4 {
		t.Fatalf("implausible lifecycle: %+v", l)
	}
	if l.List.Users != -l.Breakdown[3].Buckets[1].Dormant || l.List.Users == 0 {
		t.Fatalf("lifecycle list of %d users, dormant shown %d", l.List.Users, l.Breakdown[3].Buckets[1].Dormant)
	}
	p := run(t, eng, genPaths).(*PathsResult)
	if len(p.Edges) == 0 || !strings.HasPrefix(p.Edges[0].Source, "1_") {
		t.Fatalf("implausible paths: %+v", p)
	}
	a := run(t, eng, genAttribution).(*AttributionResult)
	var conv float64
	var sub float64
	for _, c := range a.Channels {
		conv += c.Conversions
		sub += c.Subsequent.Events
	}
	if a.Total.Conversions == 0 || math.Abs(conv-float64(a.Total.Conversions)) > 1e-9*conv || math.Abs(sub-float64(a.Total.Subsequent.Events)) > 1e-9*sub {
		t.Fatalf("attribution: Σ channels %v, %v; totals %+v %+v", conv, sub, a.Total, a.Total.Subsequent)
	}
}

// TestLifecycleDormantNegative: dormant users are reported as a negative
// count (docs/analytics.md §14), and listed by their status.
func TestLifecycleDormantNegative(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	evs := []string{"u1 2024-01-01T10:00:00Z a", "u1 2024-01-02T10:00:00Z a", "u2 2024-01-02T10:00:00Z a"}
	importLines(t, st, evs)
	eng := New(st, Config{Workers: 2})
	res := run(t, eng, `{"kind":"lifecycle","app":"d","range":{"from":"2024-01-02","to":"2024-01-04"},"event":"a","now":"2024-02-01T00:00:00Z",
		"list":{"bucket":"2024-01-03","status":"dormant"}}`).(*LifecycleResult)
	want := []LifecycleBucket{
		{Start: "2024-01-02T00:00:00Z", New: 1, Returning: 1, Incomplete: true}, // past the end of the data
		{Start: "2024-01-03T00:00:00Z", Dormant: -2, Incomplete: true},
	}
	if !reflect.DeepEqual(res.Buckets, want) {
		t.Fatalf("buckets %+v, want %+v", res.Buckets, want)
	}
	if res.List.Users != 2 || !reflect.DeepEqual(res.List.UserIDs, []string{"u1", "u2"}) {
		t.Fatalf("dormant users %+v", res.List)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, res); err != nil || !strings.Contains(b.String(), "-2") {
		t.Fatalf("table %q: %v", b.String(), err)
	}
}

// importLines imports events "user RFC3339 name" into app "d".
func importLines(t *testing.T, st *storage.Store, lines []string) {
	t.Helper()
	var evs []testutil.Ev
	for _, l := range lines {
		f := strings.Fields(l)
		ts, err := time.Parse(time.RFC3339, f[1])
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, testutil.Ev{User: f[0], Time: ts.UnixMicro(), Name: f[2]})
	}
	if _, err := st.Import(context.Background(), "d", []storage.Source{&evSource{evs: evs}}, storage.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPathEdgeOrder pins the result's edge rules (docs/analytics.md §15): min_sessions,
// the max_edges heaviest with ties by source then target byte-wise, and
// only edges reachable from a position-1 node.
func TestPathEdgeOrder(t *testing.T) {
	e := func(pos int, s, d uint32, sessions int64) analysis.PathEdge {
		return analysis.PathEdge{Pos: pos, Source: s, Target: d, Sessions: sessions, Users: 1, Micros: sessions * 2e6}
	}
	all := []analysis.PathEdge{e(1, 0, 1, 5), e(1, 0, 2, 5), e(1, 1, 0, 5), e(2, 1, 3, 9), e(2, 2, 3, 1), e(3, 3, 0, 4), e(2, 3, 0, 7)}
	got := pathEdges(all, []string{"a", "b", "c", "d"}, 2, 5)
	var names []string
	for _, x := range got {
		names = append(names, x.Source+">"+x.Target)
	}
	// By sessions: 2_b>3_d (9), 2_d>3_a (7; its source 2_d is no position-1
	// target: dropped), then the ties at 5 by source, target: 1_a>2_b,
	// 1_a>2_c, 1_b>2_a; 3_d>4_a (4) is the sixth (max_edges 5); 2_c>3_d (1)
	// is under min_sessions.
	want := []string{"2_b>3_d", "1_a>2_b", "1_a>2_c", "1_b>2_a"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("edges %v, want %v", names, want)
	}
	if got[0].AvgSeconds != 2 || got[0].Sessions != 9 {
		t.Fatalf("edge %+v", got[0])
	}
}

// TestKindErrors: invalid queries of the new kinds name the field.
func TestKindErrors(t *testing.T) {
	st := openStore(t, t.TempDir(), 1)
	importGen(t, st, "g", gen.Config{Events: 3000, Seed: 1})
	eng := New(st, Config{})
	for _, c := range []struct{ js, field string }{
		{`{"kind":"stickiness","app":"g"}`, "series"},
		{`{"kind":"stickiness","app":"g","series":[{"event":"a","math":"users"}]}`, "series[0].math"},
		{`{"kind":"stickiness","app":"g","series":[{"event":"a"}],"min_events":-1}`, "min_events"},
		{`{"kind":"stickiness","app":"g","series":[{"event":"a"}],"list":{"series":3,"intervals":1}}`, "list.series"},
		{`{"kind":"stickiness","app":"g","series":[{"event":"a"}],"list":{"intervals":0}}`, "list.intervals"},
		{`{"kind":"stickiness","app":"g","series":[{"event":"a"}],"list":{"intervals":1,"status":"new"}}`, "list.status"},
		{`{"kind":"stickiness","app":"g","series":[{"event":"a"}],"list":{"intervals":1,"breakdown_value":"x"}}`, "list.breakdown_value"},
		{`{"kind":"lifecycle","app":"g"}`, "event"},
		{`{"kind":"lifecycle","app":"g","event":"install","breakdown":{"property":"platform"}}`, "breakdown.source"},
		{`{"kind":"lifecycle","app":"g","event":"install","list":{"bucket":"1999-01-01","status":"new"}}`, "list.bucket"},
		{`{"kind":"lifecycle","app":"g","event":"install","range":{"from":"2024-01-01","to":"2024-01-02"},"list":{"bucket":"2024-01-01","status":"old"}}`, "list.status"},
		{`{"kind":"lifecycle","app":"g","event":{"event":"install","bogus":1}}`, ""},
		{`{"kind":"paths","app":"g","steps":1}`, "steps"},
		{`{"kind":"paths","app":"g","steps":21}`, "steps"},
		{`{"kind":"paths","app":"g","session_gap":"0s"}`, "session_gap"},
		{`{"kind":"paths","app":"g","item_property":"session_id"}`, "item_property"},
		{`{"kind":"paths","app":"g","item_property":"nope"}`, "item_property"},
		{`{"kind":"paths","app":"g","events":[]}`, "events"},
		{`{"kind":"paths","app":"g","max_edges":0.5}`, "max_edges"},
		{`{"kind":"paths","app":"g","breakdown":{"property":"platform"}}`, "breakdown"},
		{`{"kind":"paths","app":"g","list":{"source":"1_a"}}`, "list"},
		{`{"kind":"attribution","app":"g","touchpoints":[{"event":"ad_click","lookback":"7d"}],"channel":"channel"}`, "conversion"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"channel":"channel"}`, "touchpoints"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"touchpoints":[{"event":"ad_click"}],"channel":"channel"}`, "touchpoints[0].lookback"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"touchpoints":[{"event":"ad_click","lookback":"7d"}]}`, "channel"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"touchpoints":[{"event":"ad_click","lookback":"7d"}],"channel":"nope"}`, "channel"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"touchpoints":[{"event":"ad_click","lookback":"7d"}],"channel":"channel","model":"u_shaped"}`, "model"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"touchpoints":[{"event":"ad_click","lookback":"7d"}],"channel":"channel","half_life":"0d"}`, "half_life"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"touchpoints":[{"event":"ad_click","lookback":"7d"}],"channel":"channel","conversions":"last"}`, "conversions"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"touchpoints":[{"event":"ad_click","lookback":"7d"}],"channel":"channel","value":"channel"}`, "value"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"touchpoints":[{"event":"ad_click","lookback":"7d"}],"channel":"channel","subsequent":{"event":"purchase"}}`, "subsequent.window"},
		{`{"kind":"attribution","app":"g","conversion":{"event":"install"},"touchpoints":[{"event":"ad_click","lookback":"7d"}],"channel":"channel","list":{}}`, "list.channel"},
	} {
		q, err := Parse([]byte(c.js))
		if err == nil {
			_, err = eng.Run(context.Background(), q)
		}
		qe, ok := err.(*Error)
		if !ok || qe.Code != CodeInvalidQuery || (c.field != "" && qe.Field != c.field) {
			t.Errorf("%s: error %v, want invalid_query on %q", c.js, err, c.field)
		}
	}
}

// TestKindTables: --table prints every new kind.
func TestKindTables(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 20_000, Seed: 2})
	eng := New(st, Config{})
	for _, c := range []struct{ js, want string }{
		{genStickiness, "users of series 0 active in exactly 2 days"},
		{genLifecycle, "resurrecting"},
		{genPaths, "1_/"},
		{genAttribution, "conversions by week"},
		{genAttributionFirst, "position_based"},
	} {
		var b bytes.Buffer
		if err := WriteTable(&b, run(t, eng, c.js)); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("table without %q:\n%s", c.want, b.String())
		}
	}
}

// TestPathsManyEventNames: with more event names than free matcher bits,
// paths read the names from a column (storage.ColEvent) and still equal
// the naive reference.
func TestPathsManyEventNames(t *testing.T) {
	var names []string
	for i := range 70 {
		names = append(names, fmt.Sprintf("e%02d", i))
	}
	evs := testutil.RandomEvents(7, testutil.RandomOptions{Users: 20, Events: 3000, Names: names, Props: true})
	st := openStore(t, t.TempDir(), 4)
	if _, err := st.Import(context.Background(), "d", []storage.Source{&evSource{evs: evs}}, storage.ImportOptions{BlockRows: 50}); err != nil {
		t.Fatal(err)
	}
	eng := New(st, Config{Workers: 2})
	from, to := at("2021-03-26T00:00:00Z"), at("2021-03-30T00:00:00Z")
	for _, js := range []string{
		`{"kind":"paths","app":"d","range":{"from":"2021-03-26","to":"2021-03-30"},"steps":4,"max_edges":10000,"session_gap":"1h"}`,
		`{"kind":"paths","app":"d","range":{"from":"2021-03-26","to":"2021-03-30"},"steps":6,"max_edges":10000,"item_property":"s","start":{"event":"e03"},"exclude":["x"]}`,
	} {
		q, _ := Parse([]byte(js))
		pq := testutil.PathsQuery{SessionGap: 3600e6, Steps: 4, From: from, To: to}
		if q.ItemProperty != "" {
			pq = testutil.PathsQuery{SessionGap: 30 * 60e6, Steps: 6, From: from, To: to, ItemProp: "s", Start: &testutil.Matcher{Event: "e03"}, Exclude: []string{"x"}}
		}
		want := testutil.PathsResultEdges(testutil.NaivePaths(testutil.Data{Events: evs}, pq), 0, 10000)
		res := run(t, eng, js).(*PathsResult)
		if len(res.Edges) != len(want) || len(want) == 0 {
			t.Fatalf("%s: %d edges, want %d", js, len(res.Edges), len(want))
		}
		for i, w := range want {
			e := res.Edges[i]
			if e.Source != w.Source || e.Target != w.Target || e.Sessions != w.Sessions || e.Users != int64(len(w.Users)) {
				t.Fatalf("%s: edge %d %+v, want %+v", js, i, e, w)
			}
		}
	}
}

func at(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMicro()
}

// TestKindsOrder: the kinds register from their files' init functions, yet
// Kinds and the "unknown kind" message list them in their fixed order.
func TestKindsOrder(t *testing.T) {
	want := []string{"trend", "funnel", "retention", "cohort", "stickiness", "lifecycle", "paths", "attribution"}
	if got := Kinds(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Kinds() = %v, want %v", got, want)
	}
	const msg = "trend, funnel, retention, cohort, stickiness, lifecycle, paths or attribution"
	if got := kindNameList(); got != msg {
		t.Fatalf("kindNameList() = %q, want %q", got, msg)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("register of a second trend kind did not panic")
		}
	}()
	register(kind{name: "trend", order: 99})
}
