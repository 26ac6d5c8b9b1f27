package export

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// sliceSource is a storage.Source over events.
type sliceSource struct {
	evs []event.Event
	i   int
}

func (s *sliceSource) Next(ev *event.Event) error {
	if s.i == len(s.evs) {
		return io.EOF
	}
	*ev = s.evs[s.i]
	s.i++
	return nil
}

// userStream adapts gen.UserStream to storage.Source.
type userStream struct{ s *gen.UserStream }

func (s userStream) Next(ev *event.Event) error {
	if !s.s.Next(ev) {
		return io.EOF
	}
	return nil
}

const day = 86_400_000_000

// buildApp makes app "a" of st: a generated app (events and users) plus
// two more imports of every property type — a bool, a time, an int that a
// later float widens, insert ids with a duplicate across imports, an
// event at the generated span's last microsecond, and user properties of
// every type — so that shards hold several runs.
func buildApp(t *testing.T, st *storage.Store) {
	t.Helper()
	ctx := context.Background()
	importGen(t, st, "a", gen.Config{Events: 20000, Seed: 11, Days: 60})
	t0 := gen.DefaultStart + 3*day + 123_457
	mk := func(user, name string, tm int64, iid string, props ...event.Prop) event.Event {
		return event.Event{UserID: user, Name: name, Time: tm, InsertID: iid, Props: props}
	}
	p := func(name string, v event.Value) event.Prop { return event.Prop{Name: name, Value: v} }
	first := []event.Event{
		mk("x1", "purchase", t0, "i-1", p("qty", event.Int(3)), p("gift", event.Bool(true)), p("shipped", event.Time(t0+1))),
		mk("x1", "purchase", t0, "i-2", p("qty", event.Int(-7)), p("note", event.String("tab\t\"quote\" ünï"))),
		mk("x2", "view_item", t0+5, "", p("gift", event.Bool(false))),
		mk("x3", "install", gen.DefaultStart+60*day-1, "i-9"),
	}
	second := []event.Event{
		mk("x1", "purchase", t0, "i-1", p("qty", event.Float(2.5))), // a duplicate of the first i-1
		mk("x1", "purchase", t0+1, "", p("qty", event.Float(4)), p("big", event.Int(1<<62))),
		mk("x2", "view_item", t0-9, "i-3"),
	}
	for _, evs := range [][]event.Event{first, second} {
		if _, err := st.Import(ctx, "a", []storage.Source{&sliceSource{evs: evs}}, storage.ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	users := []event.Event{
		mk("x1", "", t0, "", p("vip", event.Bool(true)), p("score", event.Float(0.1)), p("seen", event.Time(t0-day)), p("platform", event.String("ios"))),
		mk("x2", "", t0, "", p("score", event.Float(-0))),
		mk("x1", "", t0+1, "", p("score", event.Float(1e300))),
	}
	if _, err := st.Import(ctx, "a", []storage.Source{&sliceSource{evs: users}}, storage.ImportOptions{Kind: storage.KindUsers}); err != nil {
		t.Fatal(err)
	}
}

// importGen imports cfg's generated events, then its users, into app.
func importGen(t *testing.T, st *storage.Store, app string, cfg gen.Config) {
	t.Helper()
	ctx := context.Background()
	g, err := gen.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(ctx, app, []storage.Source{gen.Source{G: g}}, storage.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	us, err := gen.NewUserStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(ctx, app, []storage.Source{userStream{us}}, storage.ImportOptions{Kind: storage.KindUsers}); err != nil {
		t.Fatal(err)
	}
}

// withVersion calls fn with app's current version, released when fn
// returns.
func withVersion(t *testing.T, st *storage.Store, app string, fn func(*storage.Version)) {
	t.Helper()
	a, err := st.App(app)
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	fn(v)
}

func openStore(t *testing.T) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.Config{Dir: t.TempDir(), Shards: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// exportApp exports app of st as opt says.
func exportApp(t *testing.T, st *storage.Store, app string, opt Options) []byte {
	t.Helper()
	var b bytes.Buffer
	var stats Stats
	var err error
	withVersion(t, st, app, func(v *storage.Version) { stats, err = Write(context.Background(), v, &b, opt) })
	if err != nil {
		t.Fatalf("export %s %+v: %v", app, opt, err)
	}
	if stats.Bytes != int64(b.Len()) || stats.Rows == 0 {
		t.Fatalf("export %s %+v: stats %+v for %d bytes", app, opt, stats, b.Len())
	}
	return b.Bytes()
}

// importFile imports data (a file named name) into app as spur import
// does with no column flags; schema is NDJSON's --schema for time
// properties.
func importFile(t *testing.T, st *storage.Store, app, name string, data []byte, users bool, schema map[string]event.Type) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ingest.Open(path, ingest.Options{Users: users, Schema: schema, ImportTime: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	kind := storage.KindEvents
	if users {
		kind = storage.KindUsers
	}
	if _, err := st.Import(context.Background(), app, []storage.Source{r}, storage.ImportOptions{Kind: kind}); err != nil {
		t.Fatalf("import %s into %s: %v", name, app, err)
	}
}

// roundTripQueries: a trend, a funnel, retention, breakdowns by a user
// property and by an event property, on the generated data and the
// added properties.
var roundTripQueries = []string{
	`{"kind":"trend","range":{"from":"2024-01-01","to":"2024-03-01"},"tz":"UTC","interval":"day","series":[{"event":"purchase","math":"count"},{"event":"purchase","math":"users"}],"breakdown":{"property":"platform","source":"user"}}`,
	`{"kind":"trend","range":{"from":"2024-01-01","to":"2024-03-01"},"tz":"UTC","interval":"week","series":[{"event":"$any","math":"count"},{"event":"purchase","math":"sum","property":"price"}],"breakdown":{"property":"url"}}`,
	`{"kind":"trend","range":{"from":"2024-01-01","to":"2024-03-01"},"tz":"UTC","interval":"day","series":[{"event":"purchase","math":"sum","property":"qty"}],"breakdown":{"property":"gift"}}`,
	`{"kind":"funnel","range":{"from":"2024-01-01","to":"2024-03-01"},"tz":"UTC","steps":[{"event":"view_item"},{"event":"add_to_cart"},{"event":"begin_checkout"},{"event":"purchase"}],"window":"7d","breakdown":{"property":"channel","source":"user"}}`,
	`{"kind":"retention","range":{"from":"2024-01-01","to":"2024-03-01"},"tz":"UTC","start":{"event":"install"},"return":{"event":"$any"},"period":"day","periods":31,"type":"first_time","windows":"calendar","criterion":"on"}`,
	`{"kind":"trend","range":{"from":"2024-01-01","to":"2024-03-01"},"tz":"UTC","interval":"month","series":[{"event":"$any","math":"users"}],"breakdown":{"property":"vip","source":"user"}}`,
}

// answers runs roundTripQueries on app.
func answers(t *testing.T, st *storage.Store, app string) []string {
	t.Helper()
	e := query.New(st, query.Config{})
	var out []string
	for _, s := range roundTripQueries {
		q, err := query.Parse([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		q.App = app
		res, err := e.Run(context.Background(), q)
		if err != nil {
			t.Fatalf("app %s: %s: %v", app, s, err)
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any // without its stats (times, blocks read)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "stats")
		b, _ = json.Marshal(m)
		out = append(out, string(b))
	}
	return out
}

// TestRoundTrip: export → import into a new app gives the same answers on
// the bench-style queries, the new app exports the same bytes (so every
// event, property, type and microsecond came back), and two exports of
// one version are byte-identical; in both formats, events and users.
func TestRoundTrip(t *testing.T) {
	st := openStore(t)
	buildApp(t, st)
	want := answers(t, st, "a")
	timeSchema := map[string]event.Type{"shipped": event.TypeTime, "seen": event.TypeTime, "signup_time": event.TypeTime}
	for _, f := range []Format{NDJSON, Parquet} {
		t.Run(string(f), func(t *testing.T) {
			var schema map[string]event.Type
			if f == NDJSON {
				schema = timeSchema // NDJSON has no time type (docs/storage.md §8)
			}
			evs := exportApp(t, st, "a", Options{Format: f})
			users := exportApp(t, st, "a", Options{Format: f, Users: true})
			if again := exportApp(t, st, "a", Options{Format: f}); !bytes.Equal(again, evs) {
				t.Fatal("two exports of the events differ")
			}
			if again := exportApp(t, st, "a", Options{Format: f, Users: true}); !bytes.Equal(again, users) {
				t.Fatal("two exports of the users differ")
			}
			b := "b-" + string(f)
			importFile(t, st, b, "events."+string(f), evs, false, schema)
			importFile(t, st, b, "users."+string(f), users, true, schema)
			got := answers(t, st, b)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("query %d: app a answers\n%s\napp %s answers\n%s", i, want[i], b, got[i])
				}
			}
			if again := exportApp(t, st, b, Options{Format: f}); !bytes.Equal(again, evs) {
				t.Error("the re-imported app exports other events")
			}
			if again := exportApp(t, st, b, Options{Format: f, Users: true}); !bytes.Equal(again, users) {
				t.Error("the re-imported app exports other users")
			}
		})
	}
}

// TestNDJSONEventsParser: every exported line is accepted by the events
// endpoint's parser and reads back as the stored event: user, name,
// timestamp to the microsecond, insert id, each property with its type
// (time properties as RFC 3339 strings, which NDJSON cannot type).
func TestNDJSONEventsParser(t *testing.T) {
	st := openStore(t)
	buildApp(t, st)
	body := exportApp(t, st, "a", Options{Format: NDJSON})
	lines := strings.Count(string(body), "\n")
	p := ingest.NewEventsParser()
	bt, err := p.Parse(context.Background(), bytes.NewReader(body), ingest.EventsOptions{NDJSON: true, MaxFuture: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(bt.Rejected) > 0 || len(bt.Events) != lines || bt.Total != lines {
		t.Fatalf("%d lines: %d events, %d rejected (first %+v)", lines, len(bt.Events), len(bt.Rejected), bt.Rejected)
	}
	a, _ := st.App("a")
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	i := 0
	err = v.ExportEvents(context.Background(), -1<<63, 1<<63-1, func(e *storage.ExportEvent) error {
		got := bt.Events[i]
		i++
		if got.UserID != string(e.UserID) || got.Name != e.Event || got.Time != e.Time || got.InsertID != e.InsertID || len(got.Props) != len(e.Props) {
			t.Fatalf("event %d: parsed %+v, stored %+v", i, got, e)
		}
		for j, sp := range e.Props {
			want := sp.Value
			if want.Type == event.TypeTime {
				want = event.String(want.String())
			}
			if gp := got.Props[j]; gp.Name != sp.Name || gp.Value != want {
				t.Fatalf("event %d property %d: parsed %+v, stored %+v", i, j, gp, sp)
			}
		}
		return nil
	})
	if err != nil || i != lines {
		t.Fatalf("%d of %d events compared: %v", i, lines, err)
	}
}

// TestExportRangeAndCancel: From/To bound the events; a cancelled context
// stops the export with its error.
func TestExportRangeAndCancel(t *testing.T) {
	st := openStore(t)
	buildApp(t, st)
	a, _ := st.App("a")
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	from, to := gen.DefaultStart+3*day, gen.DefaultStart+4*day
	var b bytes.Buffer
	stats, err := Write(context.Background(), v, &b, Options{Format: NDJSON, From: from, To: to})
	if err != nil || stats.Rows == 0 {
		t.Fatalf("%+v, %v", stats, err)
	}
	bt, err := ingest.NewEventsParser().Parse(context.Background(), &b, ingest.EventsOptions{NDJSON: true, MaxFuture: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range bt.Events {
		if ev.Time < from || ev.Time >= to {
			t.Fatalf("event at %d outside [%d, %d)", ev.Time, from, to)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Write(ctx, v, io.Discard, Options{Format: Parquet}); err == nil || ctx.Err() == nil {
		t.Fatalf("a cancelled export: %v", err)
	}
	if _, err := Write(context.Background(), v, io.Discard, Options{Format: "csv"}); err == nil {
		t.Fatal("an unknown format was accepted")
	}
}
