package query

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/storage"
)

// TestThinnedScansAnswerAlike runs calendar retentions and users trends
// with row thinning (storage.Thin) and without on dense random trails —
// events minutes apart over a month, in blocks large enough for the
// vector row filter — over every period, criterion and type, time zones
// with daylight saving time, user property breakdowns and lists, and
// requires equal answers. On a CPU without AVX-512 both runs take the
// same path.
func TestThinnedScansAnswerAlike(t *testing.T) { runSeeds(t, 24, 6, thinSeed) }

func thinSeed(t *testing.T, seed int64) {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	start := int64(1616716800000000) // 2021-03-26T00:00:00Z
	evs := testutil.RandomEvents(seed, testutil.RandomOptions{
		Users: 5 + r.IntN(30), Events: 3000 + r.IntN(5000),
		Start: start, Span: 35 * 86400e6, Quantum: []int64{60e6, 420e6, 3600e6}[r.IntN(3)], TieRate: 0.1,
	})
	st := openStore(t, t.TempDir(), 1+r.IntN(2))
	if _, err := st.Import(context.Background(), "d", []storage.Source{&evSource{evs: evs}},
		storage.ImportOptions{BlockRows: 500 + r.IntN(4000), FlushRows: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	data := testutil.Data{Events: evs, Users: testutil.RandomUsers(seed, evs)}
	if _, err := st.Import(context.Background(), "d", []storage.Source{&userSource{ws: data.Users}},
		storage.ImportOptions{Kind: storage.KindUsers}); err != nil {
		t.Fatal(err)
	}
	workers := 1 + r.IntN(2)
	eng := New(st, Config{Workers: workers})
	full := New(st, Config{Workers: workers, NoThinning: true})
	for range 12 {
		tz := zones[r.IntN(len(zones))]
		from := start + r.Int64N(10)*86400e6 + r.Int64N(3)*3600e6
		rng := map[string]string{"from": fmtInstant(from), "to": fmtInstant(from + (1+r.Int64N(20))*86400e6)}
		var q map[string]any
		if r.IntN(2) == 0 {
			q = map[string]any{"kind": "retention", "app": "d", "range": rng, "tz": tz,
				"start":     map[string]any{"event": []string{"a", "b"}[r.IntN(2)]},
				"return":    map[string]any{"event": []string{"$any", "b", "c"}[r.IntN(3)]},
				"period":    []string{"hour", "day", "week", "month"}[r.IntN(4)],
				"periods":   1 + r.IntN(12),
				"type":      []string{"first_time", "recurring"}[r.IntN(2)],
				"criterion": []string{"on", "on_or_after"}[r.IntN(2)],
			}
		} else {
			series := []any{map[string]any{"event": []string{"$any", "b"}[r.IntN(2)], "math": "users"}}
			if r.IntN(2) == 0 {
				series = append(series, map[string]any{"event": "c", "math": []string{"count", "users"}[r.IntN(2)]})
			}
			q = map[string]any{"kind": "trend", "app": "d", "range": rng, "tz": tz,
				"interval": []string{"hour", "day", "week", "month"}[r.IntN(4)], "series": series}
		}
		if r.IntN(3) == 0 {
			q["breakdown"] = map[string]any{"property": "tier", "source": "user"}
		}
		thin := runJSON(t, eng, q)
		unthinned := runJSON(t, full, q)
		clearStats(thin)
		clearStats(unthinned)
		if !reflect.DeepEqual(thin, unthinned) {
			t.Fatalf("%s: thinned %+v\nwant %+v", js(q), thin, unthinned)
		}
	}
}

// clearStats zeroes the execution statistics of a result.
func clearStats(res Result) {
	switch r := res.(type) {
	case *RetentionResult:
		r.Stats = Stats{}
	case *TrendResult:
		r.Stats = Stats{}
	}
}
