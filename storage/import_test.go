package storage

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/segment"
)

// rowOnly hides that a reader is an event.BatchReader, so Import reads
// it row by row: the reference the column path is compared with.
type rowOnly struct{ r ingest.Reader }

func (s rowOnly) Next(ev *event.Event) error { return s.r.Next(ev) }

// importRow is a row of the Parquet files of these tests: every column
// type, nulls, dictionary and plain strings, an insert id.
type importRow struct {
	User   string   `parquet:"user_id"`
	Ts     *int64   `parquet:"timestamp,optional,timestamp(microsecond)"`
	Event  string   `parquet:"event,dict"`
	Insert *string  `parquet:"insert_id,optional"`
	Plan   *string  `parquet:"plan,optional,dict"`
	Note   *string  `parquet:"note,optional"`
	N      *int64   `parquet:"n,optional"`
	P      *float64 `parquet:"p,optional"`
	B      *bool    `parquet:"b,optional"`
}

func ptrTo[T any](v T) *T { return &v }

// importRows returns n rows over users u0..; bad makes some of them bad (for
// the reader: empty user, invalid UTF-8, no timestamp) and gives some
// non-integral p (bad where the app has p as an int) and repeated insert
// ids.
func importRows(n, seed int, bad bool) []importRow {
	rows := make([]importRow, n)
	for i := range rows {
		k := i + seed
		r := &rows[i]
		r.User = fmt.Sprintf("u%d", (k/5)%(n/7+1))
		r.Ts = ptrTo(int64(1_600_000_000_000_000 + (k%1000)*1_000_000))
		r.Event = []string{"view", "cart", "buy"}[k%3]
		if k%4 == 0 {
			r.Insert = ptrTo(fmt.Sprintf("i%d", k/2))
		}
		if k%3 != 0 {
			r.Plan = ptrTo([]string{"free", "pro", "team"}[k%5%3])
		}
		if k%2 == 0 {
			r.Note = ptrTo(fmt.Sprintf("note %d", k%17))
		}
		if k%5 != 0 {
			r.N = ptrTo(int64(k % 11))
		}
		if k%3 == 0 {
			r.P = ptrTo(float64(k % 13))
			if bad && k%9 == 0 {
				*r.P += 0.5
			}
		}
		if k%7 == 0 {
			r.B = ptrTo(k%2 == 0)
		}
		if !bad {
			continue
		}
		switch k % 101 {
		case 3:
			r.User = ""
		case 4:
			r.Event = "bad \xff"
		case 5:
			r.Ts = nil
		case 6:
			r.Note = ptrTo("bad \xc3")
		}
	}
	return rows
}

// writeImportParquet writes rows to a file in dir and returns its path.
func writeImportParquet[T any](t *testing.T, dir, name string, rows []T, opts ...parquet.WriterOption) string {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, opts...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// importStep is one Import call: files (Parquet) read with opt, plus
// events from memory before them.
type importStep struct {
	files []string
	mem   []event.Event
	ropt  ingest.Options
	iopt  ImportOptions
}

// runImports runs steps into app "a" of a new store, reading the Parquet
// files batch by batch (columns) or row by row, and returns the reports,
// the errors and the app's content (dumpApp).
func runImports(t *testing.T, steps []importStep, columns bool) (reps []string, content []string) {
	t.Helper()
	st := openTest(t, 4)
	trails := false // flushes at other rows make other segments
	for _, s := range steps {
		trails = trails || s.iopt.FlushRows != 0
	}
	for _, s := range steps {
		var srcs []Source
		if s.mem != nil {
			srcs = append(srcs, &sliceSource{evs: s.mem})
		}
		for _, f := range s.files {
			r, err := ingest.Open(f, s.ropt)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, ok := r.(event.BatchReader); !ok {
				t.Fatalf("%s: not a ColumnReader", f)
			}
			if columns {
				srcs = append(srcs, r)
			} else {
				srcs = append(srcs, rowOnly{r})
			}
		}
		rep, err := st.Import(context.Background(), "a", srcs, s.iopt)
		var ie *ImportError
		if err != nil && !errors.As(err, &ie) {
			t.Fatalf("import: %v", err)
		}
		rep.Elapsed = 0
		if trails {
			rep.Segments, rep.Bytes = 0, 0
		}
		reps = append(reps, fmt.Sprintf("%+v err=%v", *rep, err))
		for _, e := range rep.Errors {
			reps = append(reps, e.Error())
		}
	}
	return reps, dumpApp(t, st, "a", trails)
}

// dumpApp renders app's schema and rows. With trails, rows are listed per
// user in trail order (time, then arrival), whatever the segments; else
// per segment in stored order.
func dumpApp(t *testing.T, st *Store, app string, trails bool) []string {
	t.Helper()
	a, err := st.App(app)
	if err != nil {
		return []string{"no app: " + err.Error()}
	}
	snap := snapOf(t, a)
	out := []string{fmt.Sprintf("events schema %v", snap.EventProps), fmt.Sprintf("users schema %v", snap.UserProps)}
	type row struct {
		user string
		t    int64
		s    string
	}
	var rows []row
	for _, kind := range []SegmentKind{KindEvents, KindUsers} {
		for _, ref := range snap.SegmentsOf(kind) {
			r, err := snap.Reader(ref)
			if err != nil {
				t.Fatal(err)
			}
			meta := r.Meta()
			cols := make([]int, len(meta.Props))
			for i := range cols {
				cols[i] = i
			}
			var blk segment.Block
			for b := range meta.Blocks {
				if err := r.ReadBlock(b, cols, &blk); err != nil {
					t.Fatal(err)
				}
				for u := range blk.UserHashes {
					id := string(blk.UserID(u))
					for i := blk.UserStarts[u]; i < blk.UserStarts[u+1]; i++ {
						var sb strings.Builder
						fmt.Fprintf(&sb, "%s %s t=%d %s", kind, id, blk.Times[i], meta.EventNames[blk.Events[i]])
						for j, p := range meta.Props {
							pd := &blk.Props[j]
							if pd.Present[i>>6]&(1<<(i&63)) == 0 {
								continue
							}
							switch p.Type {
							case event.TypeString:
								fmt.Fprintf(&sb, " %s=%q", p.Name, p.Dict[pd.Strs[i]])
							case event.TypeFloat:
								fmt.Fprintf(&sb, " %s=%v", p.Name, pd.Floats[i])
							default:
								fmt.Fprintf(&sb, " %s=%d", p.Name, pd.Ints[i])
							}
						}
						s := sb.String()
						if !trails {
							s = fmt.Sprintf("shard %d seq %d: %s", ref.Shard, ref.SeqMax, s)
						}
						rows = append(rows, row{string(kind) + " " + id, blk.Times[i], s})
					}
				}
			}
		}
	}
	if trails {
		slices.SortStableFunc(rows, func(a, b row) int {
			if c := strings.Compare(a.user, b.user); c != 0 {
				return c
			}
			return cmp.Compare(a.t, b.t)
		})
	}
	for _, r := range rows {
		out = append(out, r.s)
	}
	return out
}

// sameImports runs steps both ways and fails on the first difference.
func sameImports(t *testing.T, steps []importStep) []string {
	t.Helper()
	wantReps, want := runImports(t, steps, false)
	gotReps, got := runImports(t, steps, true)
	if !reflect.DeepEqual(wantReps, gotReps) {
		t.Fatalf("reports differ:\n rows    %v\n columns %v", wantReps, gotReps)
	}
	if len(want) != len(got) {
		t.Fatalf("rows: %d read row by row, %d by columns", len(want), len(got))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("line %d:\n rows    %s\n columns %s", i, want[i], got[i])
		}
	}
	return gotReps
}

func TestImportColumnsMatchRows(t *testing.T) {
	dir := t.TempDir()
	clean := writeImportParquet(t, dir, "clean.parquet", importRows(9000, 0, false))
	bad := writeImportParquet(t, dir, "bad.parquet", importRows(9000, 7, true), parquet.PageBufferSize(4096))
	again := writeImportParquet(t, dir, "again.parquet", importRows(5000, 2000, false), parquet.MaxRowsPerRowGroup(1500))
	type intP struct {
		User  string `parquet:"user_id"`
		Ts    int64  `parquet:"timestamp"`
		Event string `parquet:"event"`
		P     int64  `parquet:"p"`
		N     string `parquet:"n"`
		Plan  int64  `parquet:"plan"`
	}
	ints := make([]intP, 3000)
	for i := range ints {
		ints[i] = intP{User: fmt.Sprintf("w%d", i%50), Ts: 1_600_000_000 + int64(i), Event: "view", P: int64(i), N: fmt.Sprint(i % 3), Plan: int64(i)}
		if i%10 == 0 {
			ints[i].N = "x"
		}
	}
	intFile := writeImportParquet(t, dir, "ints.parquet", ints)
	type userRow struct {
		User string  `parquet:"user_id"`
		Plan *string `parquet:"plan,optional,dict"`
		Age  *int64  `parquet:"age,optional"`
	}
	users := make([]userRow, 2000)
	for i := range users {
		users[i] = userRow{User: fmt.Sprintf("u%d", i), Plan: ptrTo([]string{"free", "pro"}[i%2])}
		if i%3 == 0 {
			users[i].Age = ptrTo(int64(20 + i%50))
		}
		if i%333 == 1 {
			users[i].User = ""
		}
	}
	usersFile := writeImportParquet(t, dir, "users.parquet", users)
	mem := randomEvents(rand.New(rand.NewPCG(1, 2)), 500, 40, 1_600_000_000_000_000)
	g, err := gen.New(gen.Config{Events: 20000, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	genFile := filepath.Join(dir, "gen.parquet")
	f, err := os.Create(genFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.WriteParquet(f, g.Config(), nil); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, tc := range []struct {
		name  string
		steps []importStep
	}{
		{"gen", []importStep{{files: []string{genFile}}}},
		{"clean-then-duplicates", []importStep{{files: []string{clean}}, {files: []string{again, clean}}}},
		{"bad-aborts", []importStep{{files: []string{clean}}, {files: []string{bad}, iopt: ImportOptions{MaxErrors: 10}}}},
		{"bad-tolerated", []importStep{{files: []string{bad, clean}, iopt: ImportOptions{MaxErrors: 1 << 20}}}},
		{"schema-coercion", []importStep{{files: []string{clean}}, {files: []string{intFile, bad}, iopt: ImportOptions{MaxErrors: 1 << 20}}}},
		{"declared-types", []importStep{{files: []string{intFile, clean}, iopt: ImportOptions{MaxErrors: 1 << 20},
			ropt: ingest.Options{Schema: map[string]event.Type{"n": event.TypeInt, "plan": event.TypeString}}}}},
		{"memory-and-files", []importStep{{mem: mem, files: []string{clean, bad}, iopt: ImportOptions{MaxErrors: 1 << 20}}}},
		{"small-flushes", []importStep{{files: []string{clean, bad, again}, iopt: ImportOptions{MaxErrors: 1 << 20, FlushRows: 3000, BlockRows: 64}}}},
		{"users", []importStep{{files: []string{usersFile}, ropt: ingest.Options{Users: true, ImportTime: 7},
			iopt: ImportOptions{Kind: KindUsers, MaxErrors: 100}}}},
		{"users-from-events-file", []importStep{{files: []string{clean}, iopt: ImportOptions{Kind: KindUsers, MaxErrors: 1 << 20}}}},
		{"events-from-users-file", []importStep{{files: []string{usersFile}, ropt: ingest.Options{Users: true}, iopt: ImportOptions{MaxErrors: 1 << 20}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reps := sameImports(t, tc.steps)
			t.Log(reps[len(reps)-1])
		})
	}
}

func TestShardBufUserHashCollisions(t *testing.T) {
	// Users are keyed by their 64-bit hash; two ids with one hash stay two
	// users, in (hash, id) order in the segment input.
	sb := newShardBuf()
	for i, u := range []struct {
		id string
		h  uint64
	}{{"b", 7}, {"a", 7}, {"b", 7}, {"c", 3}, {"a", 7}, {"d", 7}} {
		sb.addUser(u.id, u.h)
		sb.times = append(sb.times, int64(i))
		sb.events = append(sb.events, 0)
	}
	if sb.userIndex("a", 7) != 1 || sb.userIndex("b", 7) != 0 || sb.userIndex("d", 7) != 3 || sb.userIndex("c", 3) != 2 {
		t.Fatalf("user indexes %d %d %d %d", sb.userIndex("a", 7), sb.userIndex("b", 7), sb.userIndex("d", 7), sb.userIndex("c", 3))
	}
	in := sb.build(&flushDicts{eventNames: []string{"e"}}, &builder{})
	var got []string
	for _, u := range in.Users {
		got = append(got, fmt.Sprintf("%d/%s/%d", u.Hash, u.ID, u.Rows))
	}
	if want := []string{"3/c/1", "7/a/2", "7/b/2", "7/d/1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("users %v, want %v", got, want)
	}
	if want := []int64{3, 1, 4, 0, 2, 5}; !reflect.DeepEqual(in.Times, want) {
		t.Fatalf("times %v, want %v", in.Times, want)
	}
}

// TestImportGeneratorColumnsMatchRows: the generator's batch path
// (gen.Source as an event.BatchReader) stores exactly what its row path
// stores: same reports, same schema, same segments row by row.
func TestImportGeneratorColumnsMatchRows(t *testing.T) {
	run := func(columns bool) ([]string, []string) {
		st := openTest(t, 4)
		g, err := gen.New(gen.Config{Events: 30_000, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		var src Source = gen.Source{G: g}
		if columns {
			if _, ok := src.(event.BatchReader); !ok {
				t.Fatal("gen.Source is not an event.BatchReader")
			}
		} else {
			src = rowOnly{gen.Source{G: g}}
		}
		rep, err := st.Import(context.Background(), "a", []Source{src}, ImportOptions{BlockRows: 500})
		if err != nil {
			t.Fatal(err)
		}
		rep.Elapsed = 0
		return []string{fmt.Sprintf("%+v", *rep)}, dumpApp(t, st, "a", false)
	}
	rowRep, rowApp := run(false)
	colRep, colApp := run(true)
	if !slices.Equal(rowRep, colRep) {
		t.Fatalf("reports differ:\nrows    %v\ncolumns %v", rowRep, colRep)
	}
	if len(rowApp) < 30_000 || !slices.Equal(rowApp, colApp) {
		t.Fatalf("stored content differs (%d vs %d lines)", len(rowApp), len(colApp))
	}
}

// TestImportRecomputedUserHashes: import hashes user ids as segment.UserHash
// does, so its segments store no hashes (the users encoding
// "uvarint-rows,ids"). Were the two hashes to differ, every block would
// silently fall back to stored hashes, half a byte per event at 100M.
func TestImportRecomputedUserHashes(t *testing.T) {
	st := openTest(t, 4)
	r := rand.New(rand.NewPCG(3, 4))
	if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: randomEvents(r, 500, 40, 1_600_000_000_000_000)}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	in, err := snapOf(t, a).Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if in.Columns[0].Name != "$user" || slices.Contains(in.Columns[0].Encodings, "hash-delta-bitpack") {
		t.Fatalf("users column %q encodings %q, want no stored hashes (hash-delta-bitpack)", in.Columns[0].Name, in.Columns[0].Encodings)
	}
}

// TestImportMemoryBound: an import whose rows and strings exceed a quarter
// of its memory (ImportOptions.Memory) flushes by bytes, not rows, with
// dictionaries started anew per flush, and stores the same data as an
// import with room to spare.
func TestImportMemoryBound(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	evs := make([]event.Event, 120_000)
	for i := range evs {
		evs[i] = event.Event{UserID: fmt.Sprintf("u%d", r.IntN(5000)), Name: names[r.IntN(len(names))],
			Time: 1_600_000_000_000_000 + int64(r.IntN(1e9)), InsertID: fmt.Sprintf("%016x", r.Uint64()),
			Props: []event.Prop{{Name: "tag", Value: event.String(fmt.Sprintf("/page/%d/%d", r.IntN(1e6), i))}, {Name: "n", Value: event.Int(int64(i))}}}
	}
	run := func(memory int64) (map[string]string, int) {
		st := openOn(t, crashfs.New(), 2)
		if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{Memory: memory}); err != nil {
			t.Fatal(err)
		}
		a, _ := st.App("app")
		return appTrails(t, st), len(a.Current().Segments)
	}
	small, segs := run(6 << 20)
	big, one := run(1 << 30)
	if one != 2 || segs < 6 {
		t.Fatalf("segments: %d with 6 MiB, %d with 1 GiB; want several flushes and one", segs, one)
	}
	t.Logf("%d segments with 6 MiB, %d with 1 GiB", segs, one)
	sameTrails(t, "6 MiB import", small, big)
}
