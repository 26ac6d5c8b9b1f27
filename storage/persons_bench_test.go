package storage

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/storage/segment"
)

// BenchmarkScanPersonsUserProps measures the scan of a query broken down
// by a user property (platform) over 1M generated events whose users
// have one set write each, with one user in five joined to the next
// (`$identify` events, imported): the persons join folds the platform of
// each joined person from its ids' writes. events/s counts all rows.
func BenchmarkScanPersonsUserProps(b *testing.B) {
	const n = 1_000_000
	st := genStore(b, n, 4, ImportOptions{})
	ctx := context.Background()
	gu, _ := gen.NewUserStream(gen.Config{Events: n, Seed: 1})
	if _, err := st.Import(ctx, "g", []Source{gen.UserSource{S: gu}}, ImportOptions{Kind: KindUsers}); err != nil {
		b.Fatal(err)
	}
	gu, _ = gen.NewUserStream(gen.Config{Events: n, Seed: 1})
	var ids []string
	var ev event.Event
	for gu.Next(&ev) {
		ids = append(ids, ev.UserID)
	}
	var joins []event.Event
	for i := 0; i+1 < len(ids); i += 5 {
		joins = append(joins, event.Event{UserID: ids[i], Name: "$identify", Time: 1_700_000_000_000_000,
			InsertID: fmt.Sprint("j", i), Props: []event.Prop{{Name: "$anon_distinct_id", Value: event.String(ids[i+1])}}})
	}
	if _, err := st.Import(ctx, "g", []Source{&sliceSource{evs: joins}}, ImportOptions{}); err != nil {
		b.Fatal(err)
	}
	a, _ := st.App("g")
	snap := snapOf(b, a)
	compileUsers := func(_ SegmentRef, m *segment.Meta) (*UserSegmentPlan, error) {
		i := slices.IndexFunc(m.Props, func(p segment.PropMeta) bool { return p.Name == gen.PropPlatform })
		if i < 0 {
			return &UserSegmentPlan{Cols: []ColumnSource{{Prop: -1}}}, nil
		}
		remap := make([]uint32, len(m.Props[i].Dict))
		for k := range remap {
			remap[k] = uint32(k)
		}
		return &UserSegmentPlan{Props: []int{i}, Cols: []ColumnSource{{Prop: 0, Kind: ColString, Remap: remap}}}, nil
	}
	events := []string{"view_item", "add_to_cart", "begin_checkout", "purchase"}
	benchScan(b, snap, ScanSpec{From: 0, To: 1 << 62, Masks: nameMasks(append(events, "$identify")), UserProps: 1, CompileUsers: compileUsers}, n)
}
