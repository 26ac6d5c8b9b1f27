package query

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage"
)

// sliceEvents feeds events to an import.
type sliceEvents struct {
	evs []event.Event
	i   int
}

func (s *sliceEvents) Next(ev *event.Event) error {
	if s.i == len(s.evs) {
		return io.EOF
	}
	*ev = s.evs[s.i]
	s.i++
	return nil
}

// TestFunnelByPersonsAndByIDs: a signup funnel viewed anonymously and
// finished logged in converts once the identify joins the ids — over
// persons (the default); with "persons": false it counts the two ids
// apart, as before the merge. Lists show the person id, and with
// distinct_ids its ids.
func TestFunnelByPersonsAndByIDs(t *testing.T) {
	st := openStore(t, t.TempDir(), 8)
	t0 := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC).UnixMicro()
	evs := []event.Event{
		{UserID: "anon-1", Name: "view", Time: t0},
		{UserID: "alice", Name: "signup", Time: t0 + 60e6},
		{UserID: "alice", Name: storage.IdentifyEvent, Time: t0 + 61e6, Props: []event.Prop{{Name: "$anon_distinct_id", Value: event.String("anon-1")}}},
		{UserID: "alice", Name: "purchase", Time: t0 + 120e6},
		{UserID: "anon-2", Name: "view", Time: t0},
	}
	if _, err := st.Import(context.Background(), "p", []storage.Source{&sliceEvents{evs: evs}}, storage.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	eng := New(st, Config{})
	q := `{"kind":"funnel","app":"p","range":{"from":"2024-01-01","to":"2024-01-02"},"steps":[{"event":"view"},{"event":"signup"},{"event":"purchase"}]`
	users := func(js string) []int64 {
		var out []int64
		for _, s := range run(t, eng, js).(*FunnelResult).Steps {
			out = append(out, s.Users)
		}
		return out
	}
	if got := users(q + `}`); len(got) != 3 || got[0] != 2 || got[1] != 1 || got[2] != 1 {
		t.Errorf("by persons: %v, want [2 1 1]", got)
	}
	if got := users(q + `,"persons":false}`); len(got) != 3 || got[0] != 2 || got[1] != 0 {
		t.Errorf("by distinct ids: %v, want [2 0 0]", got)
	}
	res := run(t, eng, q+`,"list":{"step":3,"distinct_ids":true}}`).(*FunnelResult)
	b, err := json.Marshal(res.List)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"user_ids":[{"id":"alice","distinct_ids":["alice","anon-1"]}]`; !strings.Contains(string(b), want) {
		t.Errorf("list: %s, want %s in it", b, want)
	}
}
