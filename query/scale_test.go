package query

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage"
)

// scaleEvents is the size of the one-user test: SPUR_SCALE_EVENTS, default
// 2 Mi events (20 M for the figures of issue 15: SPUR_SCALE_EVENTS=20000000).
func scaleEvents(t *testing.T) int {
	if s := os.Getenv("SPUR_SCALE_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("SPUR_SCALE_EVENTS: %v", err)
		}
		return n
	}
	return 2 << 20
}

// genSource yields n events made by at(i) without holding them.
type genSource struct {
	n, i int
	at   func(i int, ev *event.Event)
}

func (g *genSource) Next(ev *event.Event) error {
	if g.i >= g.n {
		return io.EOF
	}
	*ev = event.Event{}
	g.at(g.i, ev)
	g.i++
	return nil
}

// TestOneUserOfMillions: one user with millions of events (a bot, a test
// account) among ordinary ones is imported, compacted and queried with
// bounded memory (docs/storage.md §5: the trail is read in chunks) and exact
// answers: every event counted once, the funnel and retention of the
// user right.
func TestOneUserOfMillions(t *testing.T) {
	if testing.Short() {
		t.Skip("millions of events")
	}
	n := scaleEvents(t)
	st := openStore(t, t.TempDir(), 4)
	const t0 = 1_704_067_200_000_000 // 2024-01-01T00:00:00Z
	step := int64(30*86400e6) / int64(n)
	names := []string{"a", "b", "c"}
	src := &genSource{n: n, at: func(i int, ev *event.Event) {
		// The whale's events over 30 days, a, b, c in turn; every 1000th
		// event is another user's.
		ev.UserID, ev.Name, ev.Time = "whale", names[i%3], t0+int64(i)*step
		if i%1000 == 999 {
			ev.UserID = fmt.Sprintf("u%d", i)
		}
		ev.Props = []event.Prop{{Name: "n", Value: event.Int(int64(i % 7))}}
	}}
	ctx := context.Background()
	if _, err := st.Import(ctx, "w", []storage.Source{src}, storage.ImportOptions{Memory: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	// Before compaction the whale's shard is many runs (one per import
	// flush), and the scan holds a decoded block per run; after it, one.
	eng := New(st, Config{Workers: 2, MemoryBudget: 128 << 20})
	check := func(when string) {
		t.Helper()
		tr := run(t, eng, `{"kind":"trend","app":"w","range":{"from":"2024-01-01","to":"2024-02-01"},"interval":"month",
			"series":[{"event":"$any"},{"event":"$any","math":"users"},{"event":"b","math":"sum","property":"n"}]}`).(*TrendResult)
		others := n / 1000
		var wantSum float64
		for i := 1; i < n; i += 3 {
			if i%1000 != 999 {
				wantSum += float64(i % 7)
			}
		}
		for i := 999; i < n; i += 1000 {
			if i%3 == 1 {
				wantSum += float64(i % 7)
			}
		}
		if got := tr.Series[0].Total; got != float64(n) {
			t.Fatalf("%s: %v events counted, want %d", when, got, n)
		}
		if got := tr.Series[1].Total; got != float64(others+1) {
			t.Fatalf("%s: %v users, want %d", when, got, others+1)
		}
		if got := tr.Series[2].Total; got != wantSum {
			t.Fatalf("%s: sum of n over b %v, want %v", when, got, wantSum)
		}
		fr := run(t, eng, `{"kind":"funnel","app":"w","range":{"from":"2024-01-01","to":"2024-02-01"},"window":"1h",
			"steps":[{"event":"a"},{"event":"b"},{"event":"c"}]}`).(*FunnelResult)
		// Step 1: the whale and the other users whose one event is an a;
		// only the whale goes on (its events are seconds apart).
		var aOthers int64
		for i := 999; i < n; i += 1000 {
			if i%3 == 0 {
				aOthers++
			}
		}
		if fr.Steps[0].Users != 1+aOthers || fr.Steps[1].Users != 1 || fr.Steps[2].Users != 1 {
			t.Fatalf("%s: funnel steps %+v, want %d, 1, 1", when, fr.Steps, 1+aOthers)
		}
		rr := run(t, eng, `{"kind":"retention","app":"w","range":{"from":"2024-01-01","to":"2024-01-08"},"start":{"event":"a"},"period":"day","periods":7}`).(*RetentionResult)
		whale := rr.Cohorts[0]
		if whale.Retained[6] < 1 {
			t.Fatalf("%s: the whale is not retained on day 6: %+v", when, whale)
		}
	}
	check("after the import")
	if _, err := st.Compact(ctx, "w", storage.CompactOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	eng = New(st, Config{Workers: 2, MemoryBudget: 48 << 20})
	check("after compaction")
}

// TestSeventyThousandEventNames: an app with 70,000 distinct event names
// (an SDK that puts ids in event names) imports, compacts and answers.
func TestSeventyThousandEventNames(t *testing.T) {
	if testing.Short() {
		t.Skip("70,000 event names")
	}
	const names = 70_000
	st := openStore(t, t.TempDir(), 2)
	const t0 = 1_704_067_200_000_000
	n := 3 * names
	src := &genSource{n: n, at: func(i int, ev *event.Event) {
		// Each name thrice, by three users (70,000 mod 4,999 = 14).
		ev.UserID, ev.Name, ev.Time = fmt.Sprintf("u%d", i%4999), fmt.Sprintf("event %d", i%names), t0+int64(i)*1e6
	}}
	ctx := context.Background()
	if _, err := st.Import(ctx, "n", []storage.Source{src}, storage.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	eng := New(st, Config{Workers: 2})
	check := func(when string) {
		tr := run(t, eng, `{"kind":"trend","app":"n","range":{"from":"2024-01-01","to":"2024-02-01"},"interval":"month",
			"series":[{"event":"$any"},{"event":"event 69999"},{"event":"event 12345","math":"users"}]}`).(*TrendResult)
		if tr.Series[0].Total != float64(n) || tr.Series[1].Total != 3 || tr.Series[2].Total != 3 {
			t.Fatalf("%s: totals %v %v %v", when, tr.Series[0].Total, tr.Series[1].Total, tr.Series[2].Total)
		}
		// Event 5's users (5+14j mod 4999) never do event 6 (6+14j).
		fr := run(t, eng, `{"kind":"funnel","app":"n","range":{"from":"2024-01-01","to":"2024-02-01"},"window":"30d",
			"steps":[{"event":"event 5"},{"event":"event 6"}]}`).(*FunnelResult)
		if fr.Steps[0].Users != 3 || fr.Steps[1].Users != 0 {
			t.Fatalf("%s: funnel %+v", when, fr.Steps)
		}
	}
	check("after the import")
	if _, err := st.Compact(ctx, "n", storage.CompactOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}
