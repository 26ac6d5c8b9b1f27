package query

import (
	"bytes"
	"encoding/csv"
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
	read := func(res any, header []string) [][]string {
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
		if r[0] != "" || r[1] != strconv.Itoa(s.Step) || f(r[3]) != float64(s.Users) || f(r[4]) != s.Conversion ||
			(s.AvgSeconds == nil) != (r[6] == "") || s.AvgSeconds != nil && f(r[6]) != *s.AvgSeconds {
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
}
