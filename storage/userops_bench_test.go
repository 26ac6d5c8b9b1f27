package storage

import (
	"context"
	"slices"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/storage/segment"
)

// BenchmarkUserOpsBreakdown measures the scan of a query broken down by
// two user properties (platform, a string; logins, an int) over 1M
// generated events whose users have a set of both, then in a second
// users import for every user two adds to logins and, for half of them,
// an unset of platform and a set-once of it after ("ops": each user on
// the exact fold's path), or the same rows as sets ("sets": the fast
// fold, for comparison); as imported (two users segments per shard) and
// compacted. events/s counts all rows.
func BenchmarkUserOpsBreakdown(b *testing.B) {
	const n = 1_000_000
	for _, c := range []struct {
		name         string
		ops, compact bool
	}{{"sets", false, false}, {"ops", true, false}, {"sets-compacted", false, true}, {"ops-compacted", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			st := genStore(b, n, 4, ImportOptions{})
			gu, _ := gen.NewUserStream(gen.Config{Events: n, Seed: 1})
			var sets, ops []event.Event
			var ev event.Event
			for gu.Next(&ev) {
				u := ev
				u.Props = append(slices.Clone(ev.Props), event.Prop{Name: "logins", Value: event.Int(1)})
				sets = append(sets, u)
				t := ev.Time
				ops = append(ops, event.Event{UserID: ev.UserID, Time: t + 1, Name: AddEvent, Props: []event.Prop{{Name: "logins", Value: event.Int(2)}}},
					event.Event{UserID: ev.UserID, Time: t + 2, Name: AddEvent, Props: []event.Prop{{Name: "logins", Value: event.Int(3)}}})
				if len(ops)%4 == 0 {
					ops = append(ops, event.Event{UserID: ev.UserID, Time: t + 3, Name: UnsetEvent, Props: []event.Prop{{Name: gen.PropPlatform, Value: event.String("")}}},
						event.Event{UserID: ev.UserID, Time: t + 4, Name: SetOnceEvent, Props: []event.Prop{{Name: gen.PropPlatform, Value: event.String("web")}}})
				}
			}
			ctx := context.Background()
			if _, err := st.Import(ctx, "g", []Source{&sliceSource{evs: sets}}, ImportOptions{Kind: KindUsers}); err != nil {
				b.Fatal(err)
			}
			if !c.ops {
				for i := range ops {
					ops[i].Name = SetEvent
				}
			}
			if _, err := st.Import(ctx, "g", []Source{&sliceSource{evs: ops}}, ImportOptions{Kind: KindUsers}); err != nil {
				b.Fatal(err)
			}
			if c.compact {
				if _, err := st.Compact(ctx, "g", CompactOptions{Force: true}); err != nil {
					b.Fatal(err)
				}
			}
			a, _ := st.App("g")
			snap := snapOf(b, a)
			events := []string{"view_item", "add_to_cart", "begin_checkout", "purchase"}
			compileUsers := func(_ SegmentRef, m *segment.Meta) (*UserSegmentPlan, error) {
				up := &UserSegmentPlan{}
				for _, name := range []string{gen.PropPlatform, "logins"} {
					i := slices.IndexFunc(m.Props, func(p segment.PropMeta) bool { return p.Name == name })
					src := ColumnSource{Prop: -1}
					if i >= 0 {
						src.Prop = len(up.Props)
						up.Props = append(up.Props, i)
						if m.Props[i].Type == event.TypeString {
							src.Kind, src.Remap = ColString, make([]uint32, len(m.Props[i].Dict))
							for k := range src.Remap {
								src.Remap[k] = uint32(k)
							}
						}
					}
					up.Cols = append(up.Cols, src)
				}
				return up, nil
			}
			benchScan(b, snap, ScanSpec{From: 0, To: 1 << 62, Masks: nameMasks(events), UserProps: 2, CompileUsers: compileUsers}, n)
		})
	}
}
