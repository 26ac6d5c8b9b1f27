package query

import (
	"context"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/storage"
)

// importText imports an NDJSON or CSV text (by name's extension) into app.
func importText(t *testing.T, st *storage.Store, app, name, text string) *storage.ImportReport {
	t.Helper()
	r, err := ingest.NewReader(strings.NewReader(text), name, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := st.Import(context.Background(), app, []storage.Source{r}, storage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestDollarPropertyNames: PostHog's property names (beginning with $)
// load and query like any other (docs/analytics.md §1); $any stays the event matcher.
func TestDollarPropertyNames(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importText(t, st, "p", "e.ndjson", `{"user_id":"u1","timestamp":"2021-01-01T00:00:00Z","event":"$pageview","$browser":"Firefox","$current_url":"/a","$time":5}
{"user_id":"u2","timestamp":"2021-01-01T01:00:00Z","event":"$pageview","$browser":"Chrome","$current_url":"/b"}
`)
	importText(t, st, "p", "e.csv", "user_id,timestamp,event,$browser\nu3,2021-01-01T02:00:00Z,$pageview,Firefox\n")
	eng := New(st, Config{Workers: 2})
	res := run(t, eng, `{"kind":"trend","app":"p","range":{"from":"2021-01-01","to":"2021-01-02"},
		"series":[{"event":"$pageview","where":[{"property":"$browser","op":"eq","value":"Firefox"}]},{"event":"$any","math":"sum","property":"$time"}],
		"breakdown":{"property":"$current_url"}}`).(*TrendResult)
	got := map[string]float64{}
	for _, s := range res.Series {
		got[s.Label+" "+*s.BreakdownValue] = s.Total
	}
	if got["$pageview /a"] != 1 || got["$pageview (none)"] != 1 || got["$any /a"] != 5 || len(res.Series) != 5 {
		t.Errorf("series %v", got)
	}
	// The store's own insert id column lives outside the property
	// namespace (docs/analytics.md §1): a "$insert_id" property is an ordinary one.
	importText(t, st, "p", "i.ndjson", `{"user_id":"u1","timestamp":"2021-01-01T05:00:00Z","event":"e","$insert_id":"x"}`+"\n")
	res = run(t, eng, `{"kind":"trend","app":"p","range":{"from":"2021-01-01","to":"2021-01-02"},
		"series":[{"event":"e","where":[{"property":"$insert_id","op":"eq","value":"x"}]}]}`).(*TrendResult)
	if res.Series[0].Total != 1 {
		t.Errorf("events with $insert_id \"x\": %v, want 1", res.Series[0].Total)
	}
}

// TestIntToFloatWidening: an int property that receives a non-integer
// number becomes float for the app (docs/analytics.md §1): in a later import, within
// one import (row by row and column by column), and the ints stored
// before read as floats in filters and maths, before and after a
// compaction.
func TestIntToFloatWidening(t *testing.T) {
	st := openStore(t, t.TempDir(), 1)
	importText(t, st, "w", "a.ndjson", `{"user_id":"u1","timestamp":"2021-01-01T00:00:00Z","event":"buy","qty":12}
{"user_id":"u2","timestamp":"2021-01-01T00:00:00Z","event":"buy","qty":9007199254740993}
`)
	// Row path: the widening event comes after an int in the same file.
	rep := importText(t, st, "w", "b.ndjson", `{"user_id":"u3","timestamp":"2021-01-01T01:00:00Z","event":"buy","qty":3}
{"user_id":"u4","timestamp":"2021-01-01T02:00:00Z","event":"buy","qty":12.5}
`)
	if rep.Rejected != 0 {
		t.Fatalf("rows rejected: %+v", rep)
	}
	// Column path: a CSV column of floats into the (now float) property,
	// and a second int property widened by a CSV column.
	importText(t, st, "w", "c.ndjson", `{"user_id":"u5","timestamp":"2021-01-01T03:00:00Z","event":"buy","n":1}`+"\n")
	importText(t, st, "w", "d.csv", "user_id,timestamp,event,qty,n\nu6,2021-01-01T04:00:00Z,buy,0.25,2.5\nu7,2021-01-01T05:00:00Z,buy,4,3\n")
	types := map[string]event.Type{}
	app, err := st.App("w")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range app.Current().EventProps {
		types[p.Name] = p.Type
	}
	if types["qty"] != event.TypeFloat || types["n"] != event.TypeFloat {
		t.Fatalf("types after widening: %v", types)
	}
	eng := New(st, Config{Workers: 1})
	check := func(when string) {
		t.Helper()
		res := run(t, eng, `{"kind":"trend","app":"w","range":{"from":"2021-01-01","to":"2021-01-02"},"series":[
			{"event":"buy","math":"sum","property":"qty"},
			{"event":"buy","math":"count","where":[{"property":"qty","op":"eq","value":12}]},
			{"event":"buy","math":"count","where":[{"property":"qty","op":"in","value":[3, 0.25]}]},
			{"event":"buy","math":"count","where":[{"property":"qty","op":"gt","value":12.25}]},
			{"event":"buy","math":"max","property":"n"}]}`).(*TrendResult)
		// 12 + 2^53+1 (read as the float 2^53: exact only up to 2^53) + 3 + 12.5 + 0.25 + 4
		want := []float64{12 + 9007199254740992 + 3 + 12.5 + 0.25 + 4, 1, 2, 2, 3}
		for i, s := range res.Series {
			if s.Total != want[i] {
				t.Errorf("%s: series %d total %v, want %v", when, i, s.Total, want[i])
			}
		}
	}
	check("before compaction")
	if _, err := st.Compact(context.Background(), "w", storage.CompactOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}
