package export

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// buildPersonsApp makes app "a" of st: generated events with persons
// (gen.Config.Persons, joined by their $identify rows when imported), then
// operations of every outcome: forced merges of ids no identify names (an
// unidentified person of three ids), an identify without an anonymous id
// (an identified person of one id), a refused identify, an alias, and a
// merge through the admin path (storage.Store.MergePersons).
func buildPersonsApp(t *testing.T, st *storage.Store) {
	t.Helper()
	ctx := context.Background()
	importGen(t, st, "a", gen.Config{Events: 40000, Seed: 5, Persons: 0.2})
	var anon, acct string // an anonymous id of an identified person, and that person's id
	withVersion(t, st, "a", func(v *storage.Version) {
		v.Persons().Persons(func(p *identity.Person) bool {
			for _, d := range p.DistinctIDs {
				if strings.HasPrefix(d, "anon-") {
					anon, acct = d, p.ID
					return false
				}
			}
			return true
		})
	})
	if anon == "" {
		t.Fatal("the generated app has no person with an anonymous id")
	}
	t0 := gen.DefaultStart + 5*day
	p := func(name, v string) event.Prop { return event.Prop{Name: name, Value: event.String(v)} }
	evs := []event.Event{
		{UserID: "m1", Name: "view_item", Time: t0},
		{UserID: "m2", Name: "add_to_cart", Time: t0 + 1},
		{UserID: "m3", Name: "begin_checkout", Time: t0 + 2},
		{UserID: "m4", Name: "purchase", Time: t0 + 3},
		{UserID: "m1", Name: storage.MergeEvent, Time: t0 + 4, Props: []event.Prop{p("alias", "m2")}},
		{UserID: "m3", Name: storage.MergeEvent, Time: t0 + 5, Props: []event.Prop{p("alias", "m1")}},
		{UserID: "solo", Name: storage.IdentifyEvent, Time: t0 + 6},
		{UserID: "thief", Name: storage.IdentifyEvent, Time: t0 + 7, Props: []event.Prop{p("$anon_distinct_id", anon)}},
		{UserID: "al1", Name: storage.CreateAliasEvent, Time: t0 + 8, Props: []event.Prop{p("alias", "al2")}},
		{UserID: "al2", Name: "purchase", Time: t0 + 9},
	}
	rep, err := st.Import(ctx, "a", []storage.Source{&sliceSource{evs: evs}}, storage.ImportOptions{})
	if err != nil || rep.IdentityOps != 5 {
		t.Fatalf("import of the operations: %v, %+v", err, rep)
	}
	if err := st.MergePersons(ctx, "a", "m4", "m2"); err != nil {
		t.Fatal(err)
	}
	if got := personOf(t, st, "a", "m4"); got.ID != "m1" || got.Identified || len(got.DistinctIDs) != 4 {
		t.Fatalf("m4's person: %+v", got)
	}
	if got := personOf(t, st, "a", "thief"); got.ID != "thief" || !got.Identified || len(got.DistinctIDs) != 1 {
		t.Fatalf("thief's person: %+v", got)
	}
	if got := personOf(t, st, "a", anon); got.ID != acct {
		t.Fatalf("%s's person: %+v, want %s", anon, got, acct)
	}
}

// personOf returns the person of distinct id id in app (as `spur persons
// show` answers it: a person of its own when the graph lacks the id).
func personOf(t *testing.T, st *storage.Store, app, id string) identity.Person {
	t.Helper()
	out := identity.Person{ID: id, DistinctIDs: []string{id}}
	withVersion(t, st, app, func(v *storage.Version) {
		if ps := v.Persons(); ps != nil {
			if p := ps.LookupString(id); p != nil {
				out = identity.Person{ID: p.ID, DistinctIDs: p.DistinctIDs, Identified: p.Identified}
			}
		}
	})
	return out
}

// benchAnswers runs every bench/queries/*.json on app, each answer without
// its stats.
func benchAnswers(t *testing.T, st *storage.Store, app string) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../bench/queries/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("bench queries: %v, %d files", err, len(files))
	}
	e := query.New(st, query.Config{})
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		q, err := query.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		q.App = app
		res, err := e.Run(context.Background(), q)
		if err != nil {
			t.Fatalf("app %s: %s: %v", app, f, err)
		}
		b, _ = json.Marshal(res)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "stats")
		b, _ = json.Marshal(m)
		out[filepath.Base(f)] = string(b)
	}
	return out
}

// importWithPersons imports the events file and the persons file (bytes
// named by their format) into app as `spur import --persons` does.
func importWithPersons(t *testing.T, st *storage.Store, app string, f Format, evs, persons []byte) *storage.ImportReport {
	t.Helper()
	dir := t.TempDir()
	ep, pp := filepath.Join(dir, "events."+string(f)), filepath.Join(dir, "persons."+string(f))
	if err := os.WriteFile(ep, evs, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pp, persons, 0o644); err != nil {
		t.Fatal(err)
	}
	pr, err := OpenPersons(pp)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	er, err := ingest.Open(ep, ingest.Options{ImportTime: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer er.Close()
	rep, err := st.Import(context.Background(), app, []storage.Source{er}, storage.ImportOptions{Persons: pr})
	if err != nil {
		t.Fatalf("import into %s: %v", app, err)
	}
	return rep
}

// TestPersonsRoundTrip: an app with persons of every kind (generated
// identifies, forced merges, an identify of one id, a refusal, an alias,
// an admin merge) exported — events and persons — and imported with the
// persons file into a new app answers every bench query as the original,
// has the same person (id, distinct ids, identified) for every distinct id
// of the graph, and exports the same persons and events bytes; in both
// formats.
func TestPersonsRoundTrip(t *testing.T) {
	st := openStore(t)
	buildPersonsApp(t, st)
	want := benchAnswers(t, st, "a")
	for _, f := range []Format{NDJSON, Parquet} {
		t.Run(string(f), func(t *testing.T) {
			evs := exportApp(t, st, "a", Options{Format: f})
			persons := exportApp(t, st, "a", Options{Format: f, Persons: true})
			if again := exportApp(t, st, "a", Options{Format: f, Persons: true}); !bytes.Equal(again, persons) {
				t.Fatal("two exports of the persons differ")
			}
			b := "b-" + string(f)
			rep := importWithPersons(t, st, b, f, evs, persons)
			var schema map[string]event.Type
			if f == NDJSON {
				schema = map[string]event.Type{"signup_time": event.TypeTime} // NDJSON has no time type
			}
			importFile(t, st, b, "users."+string(f), exportApp(t, st, "a", Options{Format: f, Users: true}), true, schema)
			if rep.IdentityOps == 0 {
				t.Fatalf("the import applied no identity operation: %+v", rep)
			}
			got := benchAnswers(t, st, b)
			for name, w := range want {
				if got[name] != w {
					t.Errorf("%s: app a answers\n%s\napp %s answers\n%s", name, w, b, got[name])
				}
			}
			n := 0
			withVersion(t, st, "a", func(v *storage.Version) {
				v.Persons().Persons(func(p *identity.Person) bool {
					for _, d := range p.DistinctIDs {
						n++
						if g := personOf(t, st, b, d); g.ID != p.ID || g.Identified != p.Identified || !slices.Equal(g.DistinctIDs, p.DistinctIDs) {
							t.Fatalf("distinct id %s: app a's person %s %v identified %v, app %s's %s %v identified %v",
								d, p.ID, p.DistinctIDs, p.Identified, b, g.ID, g.DistinctIDs, g.Identified)
						}
					}
					return true
				})
			})
			if n < 100 {
				t.Fatalf("only %d distinct ids in persons", n)
			}
			if again := exportApp(t, st, b, Options{Format: f, Persons: true}); !bytes.Equal(again, persons) {
				t.Error("the re-imported app exports other persons")
			}
			if again := exportApp(t, st, b, Options{Format: f}); !bytes.Equal(again, evs) {
				t.Error("the re-imported app exports other events")
			}
		})
	}
	nd := exportApp(t, st, "a", Options{Format: NDJSON, Persons: true})
	if !bytes.Contains(nd, []byte(`{"distinct_id":"m2","person_id":"m1","identified":false}`+"\n")) ||
		!bytes.Contains(nd, []byte(`{"distinct_id":"solo","person_id":"solo","identified":true}`+"\n")) {
		t.Fatalf("the NDJSON persons file lacks the expected rows:\n%.2000s", nd)
	}
}

// TestImportPersonsAlone: with a persons file the events' operation rows
// are plain events — an empty persons file leaves the new app without
// persons (so the persons of the round trip came from the file), while
// every event, the $identify rows included, is stored.
func TestImportPersonsAlone(t *testing.T) {
	st := openStore(t)
	buildPersonsApp(t, st)
	evs := exportApp(t, st, "a", Options{Format: NDJSON})
	rep := importWithPersons(t, st, "c", NDJSON, evs, nil)
	if rep.IdentityOps != 0 || rep.Applied != int64(bytes.Count(evs, []byte("\n"))) {
		t.Fatalf("import with an empty persons file: %+v", rep)
	}
	if p := personOf(t, st, "c", "m2"); p.ID != "m2" || len(p.DistinctIDs) != 1 {
		t.Fatalf("m2 in app c: %+v", p)
	}
	if again := exportApp(t, st, "c", Options{Format: NDJSON}); !bytes.Equal(again, evs) {
		t.Error("app c exports other events")
	}
	withVersion(t, st, "c", func(v *storage.Version) {
		var b bytes.Buffer
		if st, err := Write(context.Background(), v, &b, Options{Format: NDJSON, Persons: true}); err != nil || st.Rows != 0 || b.Len() != 0 {
			t.Fatalf("persons export of an app without persons: %+v %v %q", st, err, b.String())
		}
		if _, err := Write(context.Background(), v, &b, Options{Format: NDJSON, Persons: true, Users: true}); err == nil {
			t.Fatal("users and persons together were accepted")
		}
	})
}

// TestPersonsFileErrors: a persons file that is not a partition of
// distinct ids into persons, or names no person id, fails the import with
// the row, and the store is unchanged; so do a persons file with an
// anonymous-id column and in a users import.
func TestPersonsFileErrors(t *testing.T) {
	st := openStore(t)
	row := func(d, p string, ident bool) string {
		b, _ := json.Marshal(map[string]any{"distinct_id": d, "person_id": p, "identified": ident})
		return string(b) + "\n"
	}
	good := row("a", "a", true) + row("b", "a", true)
	for _, c := range []struct{ name, file, want string }{
		{"twice", good + row("a", "c", false), `persons.ndjson:3: distinct_id "a" is on an earlier row too`},
		{"identified disagrees", good + row("c", "a", false), `persons.ndjson:3: person "a" is identified on an earlier row`},
		{"no own row", good + row("x", "y", false), `person "y" has no row of its own id`},
		{"no person id", good + `{"distinct_id":"z"}` + "\n", "persons.ndjson:3: no person_id"},
		{"empty person id", good + row("z", "", false), "empty id"},
		{"identified not a bool", good + `{"distinct_id":"z","person_id":"z","identified":"maybe"}` + "\n", "persons.ndjson:3"},
	} {
		path := filepath.Join(t.TempDir(), "persons.ndjson")
		os.WriteFile(path, []byte(c.file), 0o644)
		pr, err := OpenPersons(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Import(context.Background(), "e", []storage.Source{&sliceSource{}}, storage.ImportOptions{Persons: pr})
		pr.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if _, err := st.App("e"); err == nil {
		t.Error("a failed import created the app")
	}
	for _, opt := range []storage.ImportOptions{{Persons: &sliceSource{}, AnonymousID: "anon"}, {Persons: &sliceSource{}, Kind: storage.KindUsers}} {
		if _, err := st.Import(context.Background(), "e", []storage.Source{&sliceSource{}}, opt); err == nil {
			t.Errorf("%+v was accepted", opt)
		}
	}
}
