package storage

import (
	"context"
	"slices"
	"testing"

	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/storage/segment"
)

// BenchmarkScanQueryShaped measures the scan of a filtered, broken-down
// query over 1M generated events (events/s counts all rows): the funnel's
// four matchers, of which view_item only on ios (a string filter decided
// per row by SegmentPlan.Rows), two property columns carried into the
// trails (price as float bits, country through a remap) and the users'
// current platform merged from the users segments. Compare with
// BenchmarkScan/funnel4 for the cost of those features; allocations stay
// per segment, not per event.
func BenchmarkScanQueryShaped(b *testing.B) {
	const n = 1_000_000
	st := genStore(b, n, 4, ImportOptions{})
	gu, _ := gen.NewUserStream(gen.Config{Events: n, Seed: 1})
	if _, err := st.Import(context.Background(), "g", []Source{gen.UserSource{S: gu}}, ImportOptions{Kind: KindUsers}); err != nil {
		b.Fatal(err)
	}
	a, _ := st.App("g")
	snap := snapOf(b, a)
	events := []string{"view_item", "add_to_cart", "begin_checkout", "purchase"}
	prop := func(m *segment.Meta, name string) int {
		return slices.IndexFunc(m.Props, func(p segment.PropMeta) bool { return p.Name == name })
	}
	identity := func(n int) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = uint32(i)
		}
		return out
	}
	compile := func(_ SegmentRef, m *segment.Meta) (*SegmentPlan, error) {
		sp := &SegmentPlan{Masks: make([]uint64, len(m.EventNames)), Cond: make([]uint64, len(m.EventNames))}
		for i, name := range m.EventNames {
			if j := slices.Index(events, name); j == 0 {
				sp.Cond[i] = 1 // view_item on ios only
			} else if j > 0 {
				sp.Masks[i] = 1 << j
			}
		}
		pi, ci, fi := prop(m, "platform"), prop(m, "country"), prop(m, "price")
		sp.Props = []int{pi, ci, fi}
		ios := uint32(slices.Index(m.Props[pi].Dict, "ios"))
		sp.Cols = []ColumnSource{{Prop: 2, Kind: ColFloat}, {Prop: 1, Kind: ColString, Remap: identity(len(m.Props[ci].Dict))}}
		sp.Rows = func(blk *segment.Block, rm []uint64) {
			pd := &blk.Props[0]
			for r, c := range blk.Events[:blk.Rows] {
				m := sp.Masks[c]
				if sp.Cond[c] != 0 && pd.Present[r>>6]>>(r&63)&1 != 0 && pd.Strs[r] == ios {
					m |= sp.Cond[c]
				}
				rm[r] = m
			}
		}
		return sp, nil
	}
	compileUsers := func(_ SegmentRef, m *segment.Meta) (*UserSegmentPlan, error) {
		pi := prop(m, "platform")
		return &UserSegmentPlan{Props: []int{pi}, Cols: []ColumnSource{{Prop: 0, Kind: ColString, Remap: identity(len(m.Props[pi].Dict))}}}, nil
	}
	benchScan(b, snap, ScanSpec{From: 0, To: 1 << 62, Compile: compile, Cols: 2, UserProps: 1, CompileUsers: compileUsers}, n)
}
