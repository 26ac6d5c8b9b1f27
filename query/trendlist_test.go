package query

import (
	"fmt"
	"testing"

	"github.com/spurdb/spur/gen"
)

// TestTrendListsEqualCounts: docs/analytics.md §7 — the users listed for a trend point
// are the users counted there. For users, wau and mau the list's count is
// the point's value, per bucket, breakdown value ("(none)" and "(other)"
// included) and for the range total; for count and property maths it is
// the value of the users series of the same matcher (with the property
// set), which the test asks for separately.
func TestTrendListsEqualCounts(t *testing.T) {
	st := openStore(t, t.TempDir(), 4)
	importGenBlocks(t, st, "g", gen.Config{Events: 20_000, Seed: 11}, 500)
	eng := New(st, Config{Workers: 3})
	const trend = `{"kind":"trend","app":"g","range":{"from":"2024-01-03","to":"2024-02-10"},"tz":"Europe/Berlin","interval":"%s",
		"series":[{"event":"purchase","math":"users","label":"0"},{"event":"$any","math":"wau","label":"1"},{"event":"app_open","math":"mau","label":"2"},
		          {"event":"purchase","math":"count","label":"3"},{"event":"purchase","math":"users","where":[{"property":"price","op":"is_set"}],"label":"4"},
		          {"event":"purchase","math":"median","property":"price","label":"5"}]%s%s}`
	for _, c := range []struct{ iv, bd string }{{"week", ""}, {"month", ""}, {"day", ""},
		{"week", `,"breakdown":{"property":"platform","limit":2}`}, {"week", `,"breakdown":{"property":"channel","source":"user","limit":2}`}} {
		bd := c.bd
		base := run(t, eng, fmt.Sprintf(trend, c.iv, bd, "")).(*TrendResult)
		checked := 0
		for _, s := range base.Series {
			series := s.Series
			bvJSON := ""
			if s.BreakdownValue != nil {
				bvJSON = fmt.Sprintf(`,"breakdown_value":%q`, *s.BreakdownValue)
			}
			// count and median: compare with the users series of the
			// same matcher (index 4 has the property set, index 0 not).
			// Each series keeps its own top values, so "(other)" of
			// one is not that of another.
			want, ok := s, true
			switch series {
			case 3:
				want, ok = sameValue(base, 0, s.BreakdownValue)
			case 5:
				want, ok = sameValue(base, 4, s.BreakdownValue)
			}
			if !ok {
				continue
			}
			list := func(bucket string) *ListResult {
				b := ""
				if bucket != "" {
					b = fmt.Sprintf(`,"bucket":%q`, bucket)
				}
				return run(t, eng, fmt.Sprintf(trend, c.iv, bd, fmt.Sprintf(`,"list":{"series":%d%s%s,"limit":10000}`, series, b, bvJSON))).(*TrendResult).List
			}
			for b, bk := range s.Buckets {
				if l := list(bk.Start); float64(l.Users) != want.Buckets[b].Value || len(l.UserIDs) != int(l.Users) {
					t.Fatalf("breakdown %q series %d (%s) value %v bucket %s: listed %d users (%d ids), counted %v",
						bd, series, s.Math, s.BreakdownValue, bk.Start, l.Users, len(l.UserIDs), want.Buckets[b].Value)
				}
				checked++
			}
			if l := list(""); float64(l.Users) != want.Total {
				t.Fatalf("breakdown %q series %d (%s) value %v range total: listed %d, counted %v", bd, series, s.Math, s.BreakdownValue, l.Users, want.Total)
			}
		}
		if checked < 8 {
			t.Fatalf("breakdown %q: only %d points checked", bd, checked)
		}
	}
	for _, tc := range []struct{ list, field string }{
		{`{"series":6}`, "list.series"},
		{`{"series":0,"bucket":"2023-01-01"}`, "list.bucket"},
		{`{"series":0,"step":2}`, "list"},
		{`{"series":0,"breakdown_value":"ios"}`, "list.breakdown_value"},
	} {
		q, err := Parse([]byte(fmt.Sprintf(trend, "week", "", `,"list":`+tc.list)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = eng.Run(t.Context(), q)
		if qe, ok := err.(*Error); !ok || qe.Field != tc.field {
			t.Fatalf("list %s: error %v, want one on field %s", tc.list, err, tc.field)
		}
	}
}

// sameValue returns query series s's row for breakdown value bv (series
// are labelled by their index); not for "(other)".
func sameValue(res *TrendResult, s int, bv *string) (TrendSeries, bool) {
	for _, r := range res.Series {
		if r.Label == fmt.Sprint(s) && (bv == nil || *r.BreakdownValue == *bv && *bv != otherLabel) {
			return r, true
		}
	}
	return TrendSeries{}, false
}
