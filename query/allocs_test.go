package query

import (
	"context"
	"testing"

	"github.com/spurdb/spur/gen"
)

// TestQueryAllocationsDoNotScaleWithEvents: a query with every per-event
// feature — a string filter decided per row, property columns for a
// breakdown and a property math, user property values for a cohort and a
// user breakdown — allocates per query and per breakdown value, not per
// event: ten times the events (and users) cost far less than ten times the
// allocations (the remaining growth is amortised appends of per-user
// values).
func TestQueryAllocationsDoNotScaleWithEvents(t *testing.T) {
	queries := []string{
		`{"kind":"funnel","app":"g","range":{"from":"2024-01-01","to":"2024-04-01"},"steps":[{"event":"view_item","where":[{"property":"platform","op":"eq","value":"ios"}]},{"event":"add_to_cart"},{"event":"purchase"}],"breakdown":{"property":"country"},"cohort":{"and":[{"performed":{"event":"app_open"},"count":{"op":"gte","value":2}},{"user_property":{"property":"channel","op":"neq","value":"email"}}]}}`,
		`{"kind":"trend","app":"g","range":{"from":"2024-01-01","to":"2024-04-01"},"interval":"week","series":[{"event":"purchase","math":"sum","property":"price"},{"event":"$any","math":"users","where":[{"property":"channel","op":"in","value":["organic","paid_search"],"source":"user"}]}],"breakdown":{"property":"platform","source":"user"}}`,
		`{"kind":"retention","app":"g","range":{"from":"2024-01-01","to":"2024-03-01"},"start":{"event":"install"},"return":{"event":"app_open","where":[{"property":"country","op":"neq","value":"US"}]},"period":"week","periods":6,"breakdown":{"property":"platform"}}`,
	}
	allocs := func(events int64) []float64 {
		st := openStore(t, t.TempDir(), 2)
		importGen(t, st, "g", gen.Config{Events: events, Seed: 7})
		eng := New(st, Config{Workers: 2})
		var out []float64
		for _, js := range queries {
			q, err := Parse([]byte(js))
			if err != nil {
				t.Fatal(err)
			}
			runq := func() {
				if _, err := eng.Run(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			}
			runq() // open and verify the segments
			out = append(out, testing.AllocsPerRun(3, runq))
		}
		return out
	}
	small, large := allocs(20_000), allocs(200_000)
	for i := range queries {
		if large[i] > 3*small[i] {
			t.Errorf("query %d: %v allocations at 20k events, %v at 200k: they grow with the data", i, small[i], large[i])
		}
		t.Logf("query %d: %v allocations at 20k events, %v at 200k", i, small[i], large[i])
	}
}
