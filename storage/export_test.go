package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
)

// TestExportMatchesUserReads: over imports split into many segments and
// small blocks (insert-id duplicates across them, a property widened from
// int to float), ExportEvents hands out each user's events as one group,
// shards in ascending order, equal to what UserEvents reads for the user
// (another read path: time order, ties by arrival, duplicates dropped,
// every property), and ExportUsers each user's UserProperties.
func TestExportMatchesUserReads(t *testing.T) {
	ctx := context.Background()
	for seed := range 6 {
		r := rand.New(rand.NewPCG(uint64(seed), 29))
		st := openTest(t, 1<<r.IntN(3))
		t0 := int64(1_600_000_000_000_000)
		for imp := range 3 {
			evs := randomEvents(r, 50+r.IntN(300), 1+r.IntN(30), t0)
			for i := range evs {
				if r.IntN(4) == 0 {
					evs[i].InsertID = fmt.Sprintf("i%d", i%7)
				}
				v := event.Int(int64(i))
				if imp == 2 {
					v = event.Float(float64(i) + 0.5)
				}
				evs[i].Props = append(evs[i].Props, event.Prop{Name: "n", Value: v})
			}
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{FlushRows: 20 + r.IntN(200), BlockRows: 1 + r.IntN(40)}); err != nil {
				t.Fatal(err)
			}
		}
		var ws []event.Event
		for i := range 60 {
			ws = append(ws, event.Event{UserID: fmt.Sprintf("u%d", r.IntN(35)), Time: t0 + int64(r.IntN(3))*1e6,
				Props: []event.Prop{{Name: "tier", Value: event.String(fmt.Sprintf("t%d", i))}, {Name: "vip", Value: event.Bool(i%2 == 0)}}})
		}
		if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: ws}}, ImportOptions{Kind: KindUsers, FlushRows: 25}); err != nil {
			t.Fatal(err)
		}
		a, _ := st.App("app")
		v, err := a.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]UserEvent{}
		var order []string
		lastShard := 0
		err = v.ExportEvents(ctx, -1<<63, 1<<63-1, func(e *ExportEvent) error {
			id := string(e.UserID)
			if len(order) == 0 || order[len(order)-1] != id {
				if got[id] != nil {
					return fmt.Errorf("user %s comes in two groups", id)
				}
				if sh := ShardOf(id, v.Shards); sh < lastShard {
					return fmt.Errorf("user %s of shard %d after shard %d", id, sh, lastShard)
				} else {
					lastShard = sh
				}
				order = append(order, id)
			}
			got[id] = append(got[id], UserEvent{Time: e.Time, Event: e.Event, InsertID: e.InsertID, Props: slices.Clone(e.Props)})
			return nil
		})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, id := range order {
			tr, err := v.UserEvents(ctx, id, 0, MaxUserTrailRows)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tr.Events { // the trail keeps a segment's int; the export the app's float
				for j, p := range tr.Events[i].Props {
					if p.Name == "n" && p.Value.Type == event.TypeInt {
						tr.Events[i].Props[j].Value = event.Float(float64(p.Value.Int))
					}
				}
			}
			if !reflect.DeepEqual(got[id], tr.Events) {
				t.Fatalf("seed %d user %s: exported\n%+v\nread\n%+v", seed, id, got[id], tr.Events)
			}
		}
		users := 0
		err = v.ExportUsers(ctx, func(u *ExportUser) error {
			users++
			want, err := v.UserProperties(ctx, string(u.UserID))
			if err != nil || !reflect.DeepEqual(u.Props, want) || !slices.IsSortedFunc(u.Props, func(a, b event.Prop) int { return strings.Compare(a.Name, b.Name) }) {
				return fmt.Errorf("user %s: exported %+v, read %+v (%v)", u.UserID, u.Props, want, err)
			}
			return nil
		})
		v.Release()
		if err != nil || users == 0 {
			t.Fatalf("seed %d: %d users: %v", seed, users, err)
		}
	}
}
