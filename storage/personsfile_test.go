package storage

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"unsafe"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/internal/crashfs"
)

// borrowingSource passes src's rows on with their strings in one buffer
// that the next row overwrites, as ingest's readers lend them.
type borrowingSource struct {
	src Source
	buf []byte
}

func (b *borrowingSource) Next(ev *event.Event) error {
	if err := b.src.Next(ev); err != nil {
		return err
	}
	for i := range b.buf {
		b.buf[i] = '#'
	}
	b.buf = b.buf[:0]
	lend := func(s string) string {
		if cap(b.buf)-len(b.buf) < len(s) {
			b.buf = make([]byte, 0, 4096) // never in these tests: strings stay in one array
		}
		start := len(b.buf)
		b.buf = append(b.buf, s...)
		return unsafe.String(unsafe.SliceData(b.buf[start:]), len(s))
	}
	ev.UserID = lend(ev.UserID)
	props := slices.Clone(ev.Props)
	for i := range props {
		if props[i].Value.Type == event.TypeString {
			props[i].Value.Str = lend(props[i].Value.Str)
		}
	}
	ev.Props = props
	return nil
}

// TestImportPersonsFile: a persons file whose persons' rows interleave,
// a person's own id last, rebuilds each person with its person id and
// identified flag, in the file's person order; the events' operation rows
// are plain events (stored, not applied); the graph survives a reopen;
// the same file imported again records nothing.
func TestImportPersonsFile(t *testing.T) {
	fs := crashfs.New()
	cfg := Config{Dir: "store", FS: fs, Shards: 4, Logger: slog.New(slog.DiscardHandler)}
	st, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	ctx := context.Background()
	row := func(d, p string, identified bool) event.Event {
		return event.Event{UserID: d, Props: []event.Prop{
			{Name: PersonsPersonIDColumn, Value: event.String(p)}, {Name: PersonsIdentifiedColumn, Value: event.Bool(identified)}}}
	}
	persons := []event.Event{row("d1", "u1", true), row("m2", "m1", false), row("u1", "u1", true),
		row("m3", "m1", false), row("m1", "m1", false), row("s", "s", true)}
	alias := func(o string) []event.Prop { return []event.Prop{{Name: "alias", Value: event.String(o)}} }
	evs := []event.Event{
		{UserID: "d1", Name: "view", Time: 1},
		{UserID: "u1", Name: "signup", Time: 2},
		{UserID: "m2", Name: "view", Time: 3},
		{UserID: "m3", Name: "view", Time: 4},
		{UserID: "u9", Name: MergeEvent, Time: 5, Props: alias("d1")}, // a plain event
		{UserID: "s", Name: IdentifyEvent, Time: 6, Props: []event.Prop{{Name: anonIDProp, Value: event.String("m2")}}}, // a plain event
	}
	imp := func() *ImportReport {
		t.Helper()
		rep, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{Persons: &borrowingSource{src: &sliceSource{evs: persons}}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := imp(); rep.Applied != int64(len(evs)) || rep.IdentityOps != 5 {
		t.Fatalf("import: %+v", rep)
	}
	type person struct {
		id         string
		ids        []string
		identified bool
	}
	want := []person{{"u1", []string{"d1", "u1"}, true}, {"m1", []string{"m1", "m2", "m3"}, false}, {"s", []string{"s"}, true}}
	check := func(when string) uint64 {
		t.Helper()
		a, _ := st.App("app")
		v, err := a.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		var got []person
		v.Persons().Persons(func(p *identity.Person) bool {
			got = append(got, person{p.ID, p.DistinctIDs, p.Identified})
			return true
		})
		if !slices.EqualFunc(got, want, func(a, b person) bool {
			return a.id == b.id && a.identified == b.identified && slices.Equal(a.ids, b.ids)
		}) {
			t.Errorf("%s: persons %v, want %v", when, got, want)
		}
		trails := map[string][]int64{"u1": {1, 2}, "m1": {3, 4}, "u9": {5}, "s": {6}}
		if got := personTrails(t, v, false); !maps.EqualFunc(got, trails, slices.Equal) {
			t.Errorf("%s: trails %v, want %v", when, got, trails)
		}
		return v.Persons().Recorded()
	}
	rec := check("after the import")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	check("after a reopen")
	evs = nil
	if rep := imp(); rep.IdentityOps != 5 {
		t.Fatalf("second import: %+v", rep)
	}
	if again := check("after the same file again"); again != rec {
		t.Errorf("the same file again recorded %d operations, first %d", again-rec, rec)
	}
}
