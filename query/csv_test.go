package query

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/spurdb/spur/gen"
)

// TestWriteCSVEqualsResult: every CSV row of every kind carries the
// result's numbers, read back with encoding/csv.
func TestWriteCSVEqualsResult(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 30_000, Seed: 3})
	eng := New(st, Config{Workers: 2})
	read := func(res Result, header []string) [][]string {
		t.Helper()
		var b bytes.Buffer
		if err := WriteCSV(&b, res); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&b).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) < 1 || !slices.Equal(rows[0], header) {
			t.Fatalf("header %v, want %v (%d rows)", rows[0], header, len(rows))
		}
		return rows[1:]
	}
	f := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tr := run(t, eng, genTrendAll).(*TrendResult)
	rows := read(tr, trendCSV)
	n := 0
	for _, s := range tr.Series {
		for _, b := range s.Buckets {
			r := rows[n]
			n++
			if r[0] != strconv.Itoa(s.Series) || r[1] != s.Label || r[3] != s.Math || r[5] != *s.BreakdownValue || r[6] != b.Start ||
				f(r[7]) != b.Value || r[8] != strconv.FormatBool(b.Incomplete) || f(r[9]) != s.Total {
				t.Fatalf("trend row %d: %v for %+v %+v", n, r, s, b)
			}
		}
	}
	if n != len(rows) {
		t.Fatalf("%d trend rows, %d points", len(rows), n)
	}
	fr := run(t, eng, genFunnel).(*FunnelResult)
	rows = read(fr, funnelCSV)
	for i, s := range fr.Steps {
		r := rows[i]
		if r[0] != "" || r[1] != strconv.Itoa(s.Step) || r[2] != s.Label || r[3] != *s.Event || f(r[4]) != float64(s.Users) || f(r[5]) != s.Conversion ||
			(s.AvgSeconds == nil) != (r[7] == "") || s.AvgSeconds != nil && f(r[7]) != *s.AvgSeconds {
			t.Fatalf("funnel row %d: %v for %+v", i, r, s)
		}
	}
	rr := run(t, eng, genRet).(*RetentionResult)
	rows = read(rr, retentionCSV)
	n = 0
	for _, c := range rr.Cohorts {
		for k := range c.Retained {
			r := rows[n]
			n++
			if r[0] != c.Start || f(r[2]) != float64(c.Size) || r[3] != strconv.Itoa(k) || f(r[4]) != float64(c.Retained[k]) || f(r[5]) != c.Rates[k] {
				t.Fatalf("retention row %d: %v for %+v", n, r, c)
			}
		}
	}
	cr := run(t, eng, `{"kind":"cohort","app":"g","cohort":{"performed":{"event":"purchase"}},"list":{"limit":50}}`).(*CohortResult)
	rows = read(cr, usersCSV)
	if len(rows) != len(cr.UserIDs) || len(rows) == 0 || rows[0][0] != cr.UserIDs[0] {
		t.Fatalf("cohort rows %v, ids %v", rows, cr.UserIDs)
	}
	fl := run(t, eng, genFunnelAll).(*FunnelResult)
	if rows = read(fl, usersCSV); len(rows) != len(fl.List.UserIDs) {
		t.Fatalf("funnel list: %d rows, %d ids", len(rows), len(fl.List.UserIDs))
	}

	// Trend formulas with compare: the series rows of both periods, then
	// the formula rows.
	tc := run(t, eng, `{"kind":"trend","app":"g","range":{"from":"2024-02-01","to":"2024-02-15"},"compare":"previous","formula":"B / A",
		"series":[{"event":"app_open","math":"users"},{"event":"purchase","math":"users"}]}`).(*TrendResult)
	rows = read(tc, trendCSV)
	fr0 := rows[len(rows)-len(tc.Formulas[0].Buckets)*len(tc.Formulas)]
	if want := 2 * 2 * 14; len(tc.Series) != 4 || len(rows) != want+len(tc.Formulas)*14 || len(tc.Formulas) != 2 ||
		fr0[0] != "" || fr0[3] != "formula" || fr0[10] != "current" || fr0[7] != fnump(tc.Formulas[0].Buckets[0].Value) || rows[0][10] != "current" {
		t.Fatalf("trend with formula and compare: %d rows, first formula row %v", len(rows), fr0)
	}
	// The funnel views.
	ft := run(t, eng, `{"kind":"funnel","app":"g","range":{"from":"2024-01-01","to":"2024-03-01"},"view":"trends","interval":"week",
		"steps":[{"event":"view_item"},{"event":"purchase"}],"breakdown":{"property":"platform","source":"user"}}`).(*FunnelResult)
	rows = read(ft, funnelTrendsCSV)
	n = len(ft.Buckets)
	for _, b := range ft.Breakdown {
		n += len(b.Buckets)
	}
	if b := ft.Buckets[1]; len(rows) != n || rows[1][1] != b.Start || f(rows[1][2]) != float64(b.Entered) || f(rows[1][3]) != float64(b.Converted) {
		t.Fatalf("funnel trends: %d rows, want %d; row 1 %v for %+v", len(rows), n, rows[1], b)
	}
	fh := run(t, eng, `{"kind":"funnel","app":"g","range":{"from":"2024-01-01","to":"2024-03-01"},"view":"time_to_convert","bins":7,
		"steps":[{"event":"view_item"},{"event":"purchase"}]}`).(*FunnelResult)
	rows = read(fh, funnelTimesCSV)
	if b := fh.Histogram[3]; len(rows) != 7 || f(rows[3][1]) != float64(b.FromSeconds) || f(rows[3][3]) != float64(b.Users) {
		t.Fatalf("time to convert: %v for %+v", rows, fh.Histogram)
	}
	// The analyses of docs/analytics.md §10, §13-§15, without their lists.
	for _, js := range genKindQueries {
		var q map[string]any
		if err := json.Unmarshal([]byte(js), &q); err != nil {
			t.Fatal(err)
		}
		delete(q, "list")
		b, _ := json.Marshal(q)
		switch res := run(t, eng, string(b)).(type) {
		case *StickinessResult:
			rows = read(res, stickinessCSV)
			s := res.Series[0]
			if r := rows[1]; r[0] != s.Label || r[3] != "2" || f(r[4]) != float64(s.Counts[1]) {
				t.Fatalf("stickiness row %v for %+v", r, s)
			}
		case *LifecycleResult:
			rows = read(res, lifecycleCSV)
			b := res.Buckets[2]
			if r := rows[2*4+3]; len(rows) != 4*len(res.Buckets)*(1+len(res.Breakdown)) || r[1] != b.Start || r[2] != "dormant" || f(r[3]) != float64(b.Dormant) {
				t.Fatalf("lifecycle: %d rows, row %v for %+v", len(rows), r, b)
			}
		case *PathsResult:
			rows = read(res, pathsCSV)
			e := res.Edges[0]
			if len(rows) != len(res.Edges) || rows[0][0] != e.Source || rows[0][1] != e.Target || f(rows[0][2]) != float64(e.Sessions) || f(rows[0][4]) != e.AvgSeconds {
				t.Fatalf("paths: %d rows, first %v for %+v", len(rows), rows[0], e)
			}
		case *AttributionResult:
			rows = read(res, attributionCSV)
			c := res.Channels[0]
			nb := 0
			for _, c := range res.Channels {
				nb += len(c.Buckets)
			}
			if r := rows[0]; len(rows) != len(res.Channels)+nb || r[0] != c.Channel || r[2] != "" || f(r[3]) != c.Conversions || f(r[5]) != c.Value {
				t.Fatalf("attribution: %d rows, first %v for %+v", len(rows), r, c)
			}
		default:
			t.Fatalf("%T", res)
		}
	}
}
