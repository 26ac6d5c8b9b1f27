package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// propCol is one property the differential tests generate and read back.
type propCol struct {
	name string
	typ  event.Type
}

var (
	compactEventCols = []propCol{{"tag", event.TypeString}, {"n", event.TypeInt}, {"price", event.TypeFloat},
		{"flag", event.TypeBool}, {"at", event.TypeTime}, {InsertIDProp, event.TypeString}}
	compactUserCols = []propCol{{"tier", event.TypeString}, {"score", event.TypeInt}, {"vip", event.TypeBool}, {"ltv", event.TypeFloat}}
)

// trailModel is the naive reference: every accepted row in arrival order.
type trailModel struct {
	events  []event.Event   // accepted events, in arrival order
	writes  []event.Event   // user property writes, in arrival order
	seenIDs map[string]bool // (user, event, time, insert_id) of the events kept
}

// addEvents applies an events import: an event equal to an earlier one
// (in the app or earlier in the import) in user, event name, timestamp
// and insert_id is dropped (docs/ingest.md §3: the first stored wins); it
// returns how many.
func (m *trailModel) addEvents(evs []event.Event) int64 {
	if m.seenIDs == nil {
		m.seenIDs = map[string]bool{}
	}
	var dups int64
	for _, e := range evs {
		if e.InsertID != "" {
			key := fmt.Sprintf("%s\x00%s\x00%d\x00%s", e.UserID, e.Name, e.Time, e.InsertID)
			if m.seenIDs[key] {
				dups++
				continue
			}
			m.seenIDs[key] = true
		}
		m.events = append(m.events, e)
	}
	return dups
}

// largestUser returns the most rows of one user of one kind in m.
func largestUser(m *trailModel) int64 {
	n := map[string]int64{}
	var most int64
	for _, e := range m.events {
		n["e"+e.UserID]++
		most = max(most, n["e"+e.UserID])
	}
	for _, w := range m.writes {
		n["u"+w.UserID]++
		most = max(most, n["u"+w.UserID])
	}
	return most
}

// trails renders every user's trail (rows stably sorted by time: ties in
// arrival order) and current user values (latest write by time, ties to the
// later arrival) in the form recordTrails produces.
func (m *trailModel) trails() map[string]string {
	byUser := map[string][]event.Event{}
	for _, e := range m.events {
		byUser[e.UserID] = append(byUser[e.UserID], e)
	}
	type best struct {
		t   int64
		val string
	}
	current := map[string][]best{}
	for _, w := range m.writes {
		cur := current[w.UserID]
		if cur == nil {
			cur = make([]best, len(compactUserCols))
			for j := range cur {
				cur[j].t = math.MinInt64
			}
			current[w.UserID] = cur
		}
		for j, c := range compactUserCols {
			for _, p := range w.Props {
				if p.Name == c.name && w.Time >= cur[j].t {
					cur[j] = best{w.Time, renderValue(p.Value)}
				}
			}
		}
	}
	out := map[string]string{}
	users := slices.Collect(maps.Keys(byUser))
	for u := range current {
		if _, ok := byUser[u]; !ok {
			users = append(users, u)
		}
	}
	for _, u := range users {
		evs := byUser[u]
		slices.SortStableFunc(evs, func(a, b event.Event) int { return cmp.Compare(a.Time, b.Time) })
		var b strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&b, "%d %s", e.Time, e.Name)
			for _, c := range compactEventCols {
				v := "-"
				if c.name == InsertIDProp {
					if e.InsertID != "" {
						v = renderValue(event.String(e.InsertID))
					}
				} else {
					for _, p := range e.Props {
						if p.Name == c.name {
							v = renderValue(p.Value)
						}
					}
				}
				b.WriteString(" " + v)
			}
			b.WriteString("\n")
		}
		b.WriteString("user:")
		for j := range compactUserCols {
			v := "-"
			if cur := current[u]; cur != nil && cur[j].t != math.MinInt64 {
				v = cur[j].val
			}
			b.WriteString(" " + v)
		}
		out[u] = b.String()
	}
	return out
}

func renderValue(v event.Value) string {
	switch v.Type {
	case event.TypeString:
		return fmt.Sprintf("%q", v.Str)
	case event.TypeFloat:
		return fmt.Sprint(v.Float)
	default: // int, bool (0/1), time (µs)
		return fmt.Sprint(v.Int)
	}
}

// recordTrails scans snap with every event and user property column, all
// users (also those with only user property writes) and two workers, and
// renders each user's trail and user values as trailModel.trails does.
func recordTrails(t *testing.T, snap *Version) map[string]string {
	t.Helper()
	got, err := scanTrails(snap)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// scanTrails is recordTrails for any goroutine: it returns its errors.
func scanTrails(snap *Version) (map[string]string, error) {
	return scanTrailsChunked(snap, 0, false)
}

// scanTrailsChunked is scanTrails with trails handed over in chunks of at
// most chunk events (0: the default), checked by chunkChecker, through
// Prepass and Visit with prepass.
func scanTrailsChunked(snap *Version, chunk int, prepass bool) (map[string]string, error) {
	return scanTrailsSpec(snap, chunk, prepass, true)
}

// scanTrailsSpec is scanTrailsChunked that visits only the users with
// events unless allUsers.
func scanTrailsSpec(snap *Version, chunk int, prepass, allUsers bool) (map[string]string, error) {
	allNames := append(slices.Clip(names), IdentifyEvent) // the crash test's identify events
	var mu sync.Mutex
	var strs []string
	ids := map[string]uint32{}
	intern := func(dict []string) []uint32 {
		mu.Lock()
		defer mu.Unlock()
		out := make([]uint32, len(dict))
		for i, s := range dict {
			id, ok := ids[s]
			if !ok {
				id = uint32(len(strs))
				ids[s] = id
				strs = append(strs, s)
			}
			out[i] = id
		}
		return out
	}
	sources := func(meta *segment.Meta, cols []propCol) ([]int, []ColumnSource, error) {
		var props []int
		var srcs []ColumnSource
		for _, c := range cols {
			src := ColumnSource{Prop: -1}
			if mi := slices.IndexFunc(meta.Props, func(p segment.PropMeta) bool { return p.Name == c.name }); mi >= 0 {
				if meta.Props[mi].Type != c.typ {
					return nil, nil, fmt.Errorf("property %s is %v, want %v", c.name, meta.Props[mi].Type, c.typ)
				}
				src.Prop = len(props)
				props = append(props, mi)
				switch c.typ {
				case event.TypeString:
					src.Kind, src.Remap = ColString, intern(meta.Props[mi].Dict)
				case event.TypeFloat:
					src.Kind = ColFloat
				}
			}
			srcs = append(srcs, src)
		}
		return props, srcs, nil
	}
	render := func(b []byte, c propCol, set bool, bits uint64) []byte {
		switch {
		case !set:
			return append(b, '-')
		case c.typ == event.TypeString:
			mu.Lock()
			defer mu.Unlock()
			return strconv.AppendQuote(b, strs[bits])
		case c.typ == event.TypeFloat:
			return strconv.AppendFloat(b, math.Float64frombits(bits), 'g', -1, 64)
		}
		return strconv.AppendInt(b, int64(bits), 10)
	}
	spec := ScanSpec{
		From: math.MinInt64, To: math.MaxInt64, AllUsers: allUsers, ChunkEvents: chunk,
		Cols: len(compactEventCols), UserProps: len(compactUserCols),
		Compile: func(ref SegmentRef, meta *segment.Meta) (*SegmentPlan, error) {
			sp := &SegmentPlan{Masks: make([]uint64, len(meta.EventNames))}
			for c, n := range meta.EventNames {
				i := slices.Index(allNames, n)
				if i < 0 {
					return nil, fmt.Errorf("unexpected event %q in %s", n, ref.File)
				}
				sp.Masks[c] = 1 << i
			}
			var err error
			sp.Props, sp.Cols, err = sources(meta, compactEventCols)
			return sp, err
		},
		CompileUsers: func(ref SegmentRef, meta *segment.Meta) (*UserSegmentPlan, error) {
			props, cols, err := sources(meta, compactUserCols)
			return &UserSegmentPlan{Props: props, Cols: cols}, err
		},
	}
	got := map[string]string{}
	var twice, errs []string
	var emu sync.Mutex
	vs := newChunkVisitors(2, prepass, &emu, &errs, func(u UserKey, tr *trail.Trail) {
		var b []byte
		for i, ts := range tr.Times {
			b = strconv.AppendInt(b, ts, 10)
			b = append(b, ' ')
			b = append(b, allNames[bitIndex(tr.Mask[i])]...)
			for j, c := range compactEventCols {
				b = append(b, ' ')
				b = render(b, c, tr.Cols[j].Set[i], tr.Cols[j].Bits[i])
			}
			b = append(b, '\n')
		}
		b = append(b, "user:"...)
		for j, c := range compactUserCols {
			b = append(b, ' ')
			b = render(b, c, tr.User[j].Set, tr.User[j].Bits)
		}
		mu.Lock()
		defer mu.Unlock()
		if _, dup := got[string(u.ID)]; dup {
			twice = append(twice, string(u.ID))
		}
		got[string(u.ID)] = string(b)
	})
	if _, err := snap.Scan(context.Background(), spec, vs); err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	if len(twice) > 0 {
		return nil, fmt.Errorf("users visited twice: %v", twice)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("chunks: %s", strings.Join(errs, "; "))
	}
	return got, nil
}

func sameTrails(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d users, want %d", what, len(got), len(want))
	}
	for u, w := range want {
		if got[u] != w {
			t.Fatalf("%s: user %s\n got:\n%s\nwant:\n%s", what, u, got[u], w)
		}
	}
}

// idPool hands out insert ids and remembers the events that carry them,
// so that test data can send an event again: a duplicate (docs/ingest.md §3)
// when user, name, time and insert_id repeat, whatever its properties.
type idPool struct {
	next   int
	issued []event.Event
}

// compactEvents returns n events over users u0..u(users-1) with every
// property type, times on a coarse grid (many ties, also across imports)
// and insert_ids on some rows: new ones, some events sent again (true
// duplicates, sometimes with other properties: the first stored wins),
// and some earlier ids on other events (not duplicates).
func compactEvents(r *rand.Rand, n, users int, t0 int64, ids *idPool) []event.Event {
	return spreadEvents(r, n, users, t0, 12, ids)
}

// spreadEvents is compactEvents with times on a grid of slots seconds.
func spreadEvents(r *rand.Rand, n, users int, t0 int64, slots int, ids *idPool) []event.Event {
	evs := randomEvents(r, n, users, t0)
	for i := range evs {
		e := &evs[i]
		e.Time = t0 + int64(r.IntN(slots))*1_000_000
		var ps []event.Prop
		if r.IntN(3) > 0 {
			ps = append(ps, event.Prop{Name: "tag", Value: event.String(fmt.Sprintf("t%d", r.IntN(1+r.IntN(40))))})
		}
		if r.IntN(2) == 0 {
			ps = append(ps, event.Prop{Name: "n", Value: event.Int(int64(r.IntN(1000) - 500))})
		}
		if r.IntN(2) == 0 {
			ps = append(ps, event.Prop{Name: "price", Value: event.Float(float64(r.IntN(400)) / 8)})
		}
		if r.IntN(4) == 0 {
			ps = append(ps, event.Prop{Name: "flag", Value: event.Bool(r.IntN(2) == 0)})
		}
		if r.IntN(5) == 0 {
			ps = append(ps, event.Prop{Name: "at", Value: event.Time(t0 + int64(r.IntN(1e9)))})
		}
		r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		e.Props = ps
		switch k := r.IntN(12); {
		case k < 4:
			e.InsertID = fmt.Sprintf("id%d", ids.next)
			ids.next++
			ids.issued = append(ids.issued, *e)
		case k < 6 && len(ids.issued) > 0:
			// The same event again: a retry (same properties) or a copy
			// with other properties.
			d := ids.issued[r.IntN(len(ids.issued))]
			e.UserID, e.Time, e.Name, e.InsertID = d.UserID, d.Time, d.Name, d.InsertID
			if k == 4 {
				e.Props = slices.Clone(d.Props)
			}
		case k == 6 && ids.next > 0:
			e.InsertID = fmt.Sprintf("id%d", r.IntN(ids.next)) // an id again, on another event
		}
	}
	return evs
}

// compactWrites returns n user property writes with conflicting values at
// equal times.
func compactWrites(r *rand.Rand, n, users int, t0 int64) []event.Event {
	ws := make([]event.Event, n)
	for i := range ws {
		var ps []event.Prop
		if r.IntN(3) > 0 {
			ps = append(ps, event.Prop{Name: "tier", Value: event.String([]string{"gold", "silver", "bronze"}[r.IntN(3)])})
		}
		if r.IntN(2) == 0 {
			ps = append(ps, event.Prop{Name: "score", Value: event.Int(int64(r.IntN(100)))})
		}
		if r.IntN(2) == 0 {
			ps = append(ps, event.Prop{Name: "vip", Value: event.Bool(r.IntN(2) == 0)})
		}
		if r.IntN(3) == 0 {
			ps = append(ps, event.Prop{Name: "ltv", Value: event.Float(float64(r.IntN(50)) / 4)})
		}
		ws[i] = event.Event{UserID: fmt.Sprintf("u%d", r.IntN(users)), Time: t0 + int64(r.IntN(4))*1_000_000,
			Props: ps, Pos: event.Pos{File: "users", Line: int64(i + 1)}}
	}
	return ws
}

// segFiles lists the files in the app's segment directory.
func segFiles(t *testing.T, a *App) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(a.dir, segDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// checkCompacted checks the outputs of a compaction: one run per shard
// and kind (a lone import segment is left as it is), all of Seq seqs[kind][shard], strictly ordered
// disjoint hash ranges that match the segments' first and last users, and
// at most maxRows rows unless one hash group (or the last user, at most
// slack rows, whose rows continue across an input's blocks); and that the segments' user
// counts add up to the distinct users of each kind.
func checkCompacted(t *testing.T, snap *Version, seqs map[SegmentKind][]int64, maxRows, slack int64, users map[SegmentKind]int64) {
	t.Helper()
	m := snap.Catalog
	for _, kind := range []SegmentKind{KindEvents, KindUsers} {
		for sh, runs := range m.ShardRuns(kind) {
			if runs > 1 {
				t.Fatalf("%s shard %d: %d runs after compaction", kind, sh, runs)
			}
		}
		byShard := make([][]SegmentRef, m.Shards)
		var userSum int64
		for _, ref := range snap.SegmentsOf(kind) {
			byShard[ref.Shard] = append(byShard[ref.Shard], ref)
			userSum += ref.Users
		}
		if userSum != users[kind] {
			t.Fatalf("%s: segments count %d users, want %d distinct", kind, userSum, users[kind])
		}
		for sh, refs := range byShard {
			if len(refs) == 1 && refs[0].FirstHash == 0 && refs[0].LastHash == 0 {
				continue // a single import segment: one run already, left alone
			}
			slices.SortFunc(refs, func(x, y SegmentRef) int { return cmp.Compare(x.FirstHash, y.FirstHash) })
			for i, ref := range refs {
				if ref.SeqMax != seqs[kind][sh] {
					t.Fatalf("%s: Seq %d, want the largest input Seq %d", ref.File, ref.SeqMax, seqs[kind][sh])
				}
				if i > 0 && refs[i-1].LastHash >= ref.FirstHash {
					t.Fatalf("%s and %s: hash ranges [%#x, %#x] and [%#x, %#x] overlap", refs[i-1].File, ref.File,
						refs[i-1].FirstHash, refs[i-1].LastHash, ref.FirstHash, ref.LastHash)
				}
				r, err := snap.Reader(ref)
				if err != nil {
					t.Fatal(err)
				}
				blocks := r.Meta().Blocks
				if blocks[0].FirstHash != ref.FirstHash || blocks[len(blocks)-1].LastHash != ref.LastHash {
					t.Fatalf("%s: catalog range [%#x, %#x], segment holds [%#x, %#x]", ref.File,
						ref.FirstHash, ref.LastHash, blocks[0].FirstHash, blocks[len(blocks)-1].LastHash)
				}
				if ref.Rows > maxRows+slack && ref.FirstHash != ref.LastHash {
					t.Fatalf("%s: %d rows over the cap of %d (+%d, the largest user) with more than one user hash", ref.File, ref.Rows, maxRows, slack)
				}
			}
		}
	}
}

// maxSeqs returns the largest Seq per kind and shard.
func maxSeqs(m *Catalog) map[SegmentKind][]int64 {
	out := map[SegmentKind][]int64{KindEvents: make([]int64, m.Shards), KindUsers: make([]int64, m.Shards)}
	for _, ref := range m.Segments {
		out[ref.Kind][ref.Shard] = max(out[ref.Kind][ref.Shard], ref.SeqMax)
	}
	return out
}

// TestCompactPreservesEveryTrail is the differential test of compaction:
// several imports (tiny flushes and blocks so users span segments and
// blocks, equal times across imports, insert_ids with duplicates, users
// segments with conflicting writes) are scanned with every column and user
// value before and after Compact, against a naive model. It also checks
// the outputs (one run per shard, disjoint ranges, Seq, the row cap, user
// counts), that a snapshot taken before the compaction and a reopened
// store still read the same trails, and that an import after the
// compaction deduplicates against the compacted insert_ids and orders its
// tied rows after the compacted ones.
func TestCompactPreservesEveryTrail(t *testing.T) {
	ctx := context.Background()
	for seed := range 10 {
		r := rand.New(rand.NewPCG(uint64(seed), 21))
		st := openTest(t, 1<<r.IntN(3))
		t0 := int64(1_700_000_000_000_000)
		var m trailModel
		var ids idPool
		users := 5 + r.IntN(40)
		for range 2 + r.IntN(3) {
			evs := compactEvents(r, 50+r.IntN(250), users, t0, &ids)
			dups := m.addEvents(evs)
			rep, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}},
				ImportOptions{FlushRows: 10 + r.IntN(100), BlockRows: 1 + r.IntN(32)})
			if err != nil || rep.Duplicates > dups {
				t.Fatalf("seed %d: import: %v (duplicates %d, model %d)", seed, err, rep.Duplicates, dups)
			}
		}
		for range 1 + r.IntN(3) {
			ws := compactWrites(r, 5+r.IntN(40), users+5, t0)
			m.writes = append(m.writes, ws...)
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: ws}},
				ImportOptions{Kind: KindUsers, FlushRows: 3 + r.IntN(20), BlockRows: 1 + r.IntN(8)}); err != nil {
				t.Fatalf("seed %d: users import: %v", seed, err)
			}
		}
		a, err := st.App("app")
		if err != nil {
			t.Fatal(err)
		}
		old, err := a.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		want := m.trails()
		before := recordTrails(t, old)
		sameTrails(t, fmt.Sprintf("seed %d before compaction", seed), before, want)

		opt := CompactOptions{BlockRows: 1 + r.IntN(32), Workers: 1 + r.IntN(3)}
		maxRows := int64(DefaultMaxSegmentRows)
		if seed%2 == 0 {
			opt.MaxSegmentRows = 15 + r.IntN(60)
			maxRows = int64(opt.MaxSegmentRows)
		}
		var planned int64
		for _, g := range first(planCompaction(old.Catalog, CompactOptions{MinRuns: 2})) {
			planned += g.rows
		}
		rep, err := a.Compact(ctx, opt)
		if err != nil {
			t.Fatalf("seed %d: compact: %v", seed, err)
		}
		snap := snapOf(t, a)
		if rep.Rows != planned ||
			snap.Rows(KindEvents) != old.Rows(KindEvents)-rep.Duplicates || snap.Rows(KindUsers) != old.Rows(KindUsers) ||
			snap.Generation != old.Generation+1 || snap.NextSeq != old.NextSeq ||
			rep.SegmentsAfter != len(snap.Segments) || rep.Written+rep.SegmentsBefore-rep.Replaced != rep.SegmentsAfter {
			t.Fatalf("seed %d: report %+v; rows %d/%d → %d/%d", seed, rep, old.Rows(KindEvents),
				old.Rows(KindUsers), snap.Rows(KindEvents), snap.Rows(KindUsers))
		}
		distinct := map[SegmentKind]int64{}
		seen := map[string]bool{}
		for _, e := range m.events {
			if !seen[e.UserID] {
				seen[e.UserID] = true
				distinct[KindEvents]++
			}
		}
		clear(seen)
		for _, w := range m.writes {
			if !seen[w.UserID] {
				seen[w.UserID] = true
				distinct[KindUsers]++
			}
		}
		checkCompacted(t, snap, maxSeqs(old.Catalog), maxRows, largestUser(&m), distinct)
		if seed%2 == 0 {
			// The cap splits: an output goes over it by one user's rows at
			// most (a user is never split between outputs, and one whose
			// rows continue across an input's blocks is not measured whole
			// before it is written).
			most := largestUser(&m)
			for _, ref := range snap.Segments {
				if ref.Rows > maxRows+most {
					t.Fatalf("seed %d %s: %d rows of %d users with a cap of %d (largest user %d rows)", seed, ref.File, ref.Rows, ref.Users, maxRows, most)
				}
			}
		}
		sameTrails(t, fmt.Sprintf("seed %d after compaction", seed), recordTrails(t, snap), before)
		got, _ := collect(t, snap, math.MinInt64, math.MaxInt64, names, 2)
		var imports [][]event.Event
		imports = append(imports, m.events)
		if w := expected(imports, math.MinInt64, math.MaxInt64, names); !maps.EqualFunc(got, w, slices.Equal) {
			t.Fatalf("seed %d: time-and-name trails differ after compaction", seed)
		}
		sameTrails(t, fmt.Sprintf("seed %d old snapshot after compaction", seed), recordTrails(t, old), before)

		// A fresh store reads the compacted catalog (hash ranges included).
		st2, err := Open(Config{Dir: st.cfg.Dir})
		if err != nil {
			t.Fatal(err)
		}
		a2, err := st2.App("app")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(snapOf(t, a2).Segments, snap.Segments) {
			t.Fatalf("seed %d: reopened catalog differs", seed)
		}
		sameTrails(t, fmt.Sprintf("seed %d reopened", seed), recordTrails(t, snapOf(t, a2)), before)
		st2.Close()

		// Nothing left to do: a no-op that publishes nothing.
		if rep, err := a.Compact(ctx, opt); err != nil || rep.Written != 0 || snapOf(t, a) != snap {
			t.Fatalf("seed %d: second compaction: %+v %v", seed, rep, err)
		}

		// An import after the compaction: events sent again are dropped by
		// the scan, and rows tied in time come after the compacted ones.
		evs := compactEvents(r, 100, users, t0, &ids)
		for i := range evs[:20] {
			d := ids.issued[r.IntN(len(ids.issued))]
			evs[i].UserID, evs[i].Time, evs[i].Name, evs[i].InsertID = d.UserID, d.Time, d.Name, d.InsertID
		}
		dups := m.addEvents(evs)
		rep2, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{FlushRows: 30})
		if err != nil || rep2.Duplicates > dups || dups < 20 {
			t.Fatalf("seed %d: import after compaction: %v (duplicates %d, model %d)", seed, err, rep2.Duplicates, dups)
		}
		sameTrails(t, fmt.Sprintf("seed %d import after compaction", seed), recordTrails(t, snapOf(t, a)), m.trails())
		// The old version, still pinned, reads the replaced inputs: they
		// leave the disk when it is released.
		sameTrails(t, fmt.Sprintf("seed %d old version after the compaction", seed), recordTrails(t, old), before)
		old.Release()
		assertNoOrphans(t, a)

		// Force rewrites a single run; MaxSegmentRows re-splits it.
		before = recordTrails(t, snapOf(t, a))
		prev := snapOf(t, a).Catalog
		if _, err := a.Compact(ctx, CompactOptions{Force: true, MaxSegmentRows: 25}); err != nil {
			t.Fatalf("seed %d: forced compaction: %v", seed, err)
		}
		distinct[KindEvents] = int64(len(m.trails())) - countOnlyWriters(&m)
		checkCompacted(t, snapOf(t, a), maxSeqs(prev), 25, largestUser(&m), distinct)
		// The replaced segments' files are closed (no version holds them).
		a.mu.Lock()
		for f := range a.files {
			if !slices.ContainsFunc(a.cur.Segments, func(r SegmentRef) bool { return r.File == f }) &&
				!slices.ContainsFunc(prev.Segments, func(r SegmentRef) bool { return r.File == f }) {
				t.Errorf("seed %d: file %s of no version still open", seed, f)
			}
		}
		a.mu.Unlock()
		sameTrails(t, fmt.Sprintf("seed %d forced", seed), recordTrails(t, snapOf(t, a)), before)
	}
}

// countOnlyWriters counts the users with property writes but no event.
func countOnlyWriters(m *trailModel) int64 {
	has := map[string]bool{}
	for _, e := range m.events {
		has[e.UserID] = true
	}
	only := map[string]bool{}
	for _, w := range m.writes {
		if !has[w.UserID] {
			only[w.UserID] = true
		}
	}
	return int64(len(only))
}

// TestCompactCancelledChangesNothing cancels a compaction before it starts
// and after its first output segment: the error is the cancellation, and
// the catalog and the segment directory are as before.
func TestCompactCancelledChangesNothing(t *testing.T) {
	st := openTest(t, 2)
	r := rand.New(rand.NewPCG(5, 6))
	var ids idPool
	for range 3 {
		evs := compactEvents(r, 300, 30, 1_700_000_000_000_000, &ids)
		if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{FlushRows: 100, BlockRows: 8}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := st.App("app")
	before, files := snapOf(t, a), segFiles(t, a)
	trails := recordTrails(t, before)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Compact(ctx, CompactOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("pre-cancelled: err = %v, want context.Canceled", err)
	}
	if snapOf(t, a) != before || !slices.Equal(segFiles(t, a), files) {
		t.Fatal("pre-cancelled compaction changed the store")
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	outputs := 0
	_, err := a.Compact(ctx, CompactOptions{Workers: 1, MaxSegmentRows: 40, BlockRows: 8, Progress: func(int64) {
		outputs++
		cancel()
	}})
	if !errors.Is(err, context.Canceled) || outputs != 1 {
		t.Fatalf("cancelled after the first output: err = %v after %d outputs", err, outputs)
	}
	if snapOf(t, a) != before || !slices.Equal(segFiles(t, a), files) {
		t.Fatalf("cancelled compaction changed the store: files %v, want %v", segFiles(t, a), files)
	}
	if _, err := a.Compact(context.Background(), CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	sameTrails(t, "after the cancelled and a full compaction", recordTrails(t, snapOf(t, a)), trails)
}

// TestCompactKeepsEqualHashesTogether compacts hand-written segments whose
// users share hashes (a collision xxhash will not produce on demand): the
// row cap must not split a hash group, so the outputs' ranges stay
// disjoint, and each user's rows merge in (time, Seq) order.
func TestCompactKeepsEqualHashesTogether(t *testing.T) {
	st := openTest(t, 1)
	if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: []event.Event{{UserID: "x", Time: 1, Name: "a"}}}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	type row struct {
		hash uint64
		id   string
		t    int64
		name uint32
	}
	write := func(file string, rows []row) SegmentRef {
		in := &segment.Input{EventNames: names}
		for _, rw := range rows {
			if n := len(in.Users); n == 0 || in.Users[n-1].ID != rw.id {
				in.Users = append(in.Users, segment.User{Hash: rw.hash, ID: rw.id})
			}
			in.Users[len(in.Users)-1].Rows++
			in.Times = append(in.Times, rw.t)
			in.Events = append(in.Events, rw.name)
		}
		info, err := segment.Write(filepath.Join(a.dir, segDir, file), in, segment.WriterOptions{BlockRows: 2})
		if err != nil {
			t.Fatal(err)
		}
		return SegmentRef{File: file, Kind: KindEvents, Rows: info.Rows, Users: info.Users,
			MinTime: info.MinTime, MaxTime: info.MaxTime, Bytes: info.Bytes}
	}
	s1 := write(segmentName(KindEvents, 0, 1, 1, 9, 0), []row{{5, "a", 10, 0}, {5, "a", 20, 0}, {5, "b", 10, 0}, {5, "c", 30, 0}, {9, "d", 10, 0}, {9, "d", 11, 0}})
	s2 := write(segmentName(KindEvents, 0, 2, 2, 9, 0), []row{{3, "z", 10, 1}, {5, "a", 10, 1}, {5, "a", 15, 1}, {5, "c", 5, 1}, {9, "d", 10, 1}, {12, "e", 10, 1}})
	s1.SeqMin, s1.SeqMax, s2.SeqMin, s2.SeqMax = 1, 1, 2, 2
	m := snapOf(t, a).Catalog.clone()
	m.Generation = 9
	m.NextSeq = 3
	m.Segments = []SegmentRef{s1, s2}
	if _, err := a.ms.publish(nil, m); err != nil {
		t.Fatal(err)
	}
	st2, err := Open(Config{Dir: st.cfg.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	a2, _ := st2.App("app")
	before, _ := collect(t, snapOf(t, a2), math.MinInt64, math.MaxInt64, names, 1)
	if _, err := a2.Compact(context.Background(), CompactOptions{MaxSegmentRows: 2, BlockRows: 2}); err != nil {
		t.Fatal(err)
	}
	snap := snapOf(t, a2)
	var ranges [][2]uint64
	for _, ref := range snap.Segments {
		ranges = append(ranges, [2]uint64{ref.FirstHash, ref.LastHash})
		if ref.SeqMax != 2 {
			t.Fatalf("%s: Seq %d, want 2", ref.File, ref.SeqMax)
		}
	}
	// z (3) alone; a, b, c (5: 7 rows) together over the cap; d (9: 3
	// rows) alone; e (12).
	if want := [][2]uint64{{3, 3}, {5, 5}, {9, 9}, {12, 12}}; !slices.Equal(ranges, want) {
		t.Fatalf("output ranges %v, want %v", ranges, want)
	}
	after, _ := collect(t, snap, math.MinInt64, math.MaxInt64, names, 1)
	if !maps.EqualFunc(after, before, slices.Equal) {
		t.Fatalf("trails changed:\n got %v\nwant %v", after, before)
	}
	wantA := []ev{{10, "a"}, {10, "b"}, {15, "b"}, {20, "a"}} // the tie at 10: Seq 1 first
	if !slices.Equal(after["a"], wantA) {
		t.Fatalf("user a: %v, want %v", after["a"], wantA)
	}
}

func TestStoreCompactUnknownApp(t *testing.T) {
	st := openTest(t, 2)
	if _, err := st.Compact(context.Background(), "nope", CompactOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

// TestShardRuns checks the run count against hand-made catalogs.
func TestShardRuns(t *testing.T) {
	seg := func(kind SegmentKind, shard int, seq int64, first, last uint64) SegmentRef {
		return SegmentRef{Kind: kind, Shard: shard, SeqMin: seq, SeqMax: seq, FirstHash: first, LastHash: last}
	}
	m := &Catalog{Shards: 2, Segments: []SegmentRef{
		seg(KindEvents, 0, 1, 0, 0),   // unknown: a run
		seg(KindEvents, 0, 2, 0, 0),   // unknown: a run
		seg(KindEvents, 1, 3, 1, 10),  // chain 1
		seg(KindEvents, 1, 3, 11, 20), // chain 1
		seg(KindEvents, 1, 4, 5, 12),  // overlaps both: chain 2
		seg(KindEvents, 1, 5, 21, 30), // after chain 1's end
		seg(KindUsers, 1, 6, 0, 0),
	}}
	if got := m.ShardRuns(KindEvents); !slices.Equal(got, []int{2, 2}) {
		t.Fatalf("events runs %v, want [2 2]", got)
	}
	if got := m.ShardRuns(KindUsers); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("users runs %v, want [0 1]", got)
	}
	plan, _ := planCompaction(m, CompactOptions{MinRuns: 2})
	if len(plan) != 2 || plan[0].kind != KindEvents || plan[1].kind != KindEvents || plan[0].seqMax != 2 && plan[1].seqMax != 2 {
		t.Fatalf("plan %+v", plan)
	}
	if plan, _ := planCompaction(m, CompactOptions{MinRuns: 3}); len(plan) != 0 {
		t.Fatalf("MinRuns 3: plan %+v, want none", plan)
	}
	if plan, _ := planCompaction(m, CompactOptions{MinRuns: 3, Force: true}); len(plan) != 3 {
		t.Fatalf("Force: %d groups, want 3", len(plan))
	}
}

// TestCompactFanInRounds: shards with more runs than CompactOptions.FanIn
// are compacted in rounds of consecutive batches (planCompaction,
// batchRanks) and end as one run each, with every trail as the naive
// model has it (duplicates across batches dropped, the first stored
// kept), and each round's groups merge at most FanIn arrival ranks.
func TestCompactFanInRounds(t *testing.T) {
	ctx := context.Background()
	for seed := range 6 {
		r := rand.New(rand.NewPCG(uint64(seed), 77))
		st := openTest(t, 1<<r.IntN(2))
		t0 := int64(1_700_000_000_000_000)
		var m trailModel
		var ids idPool
		users := 5 + r.IntN(30)
		imports := 9 + r.IntN(12)
		for range imports {
			evs := spreadEvents(r, 20+r.IntN(120), users, t0, 40, &ids)
			m.addEvents(evs)
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: 1 + r.IntN(16)}); err != nil {
				t.Fatalf("seed %d: import: %v", seed, err)
			}
		}
		a, err := st.App("app")
		if err != nil {
			t.Fatal(err)
		}
		fanIn := 2 + r.IntN(3)
		for _, groups := range [][]compactGroup{first(planCompaction(a.Current(), CompactOptions{MinRuns: 2, FanIn: fanIn}))} {
			for _, g := range groups {
				ranks := map[int64]bool{}
				for _, ref := range g.inputs {
					ranks[ref.SeqMax] = true
				}
				if len(ranks) > fanIn || len(ranks) < 2 {
					t.Fatalf("seed %d: a group of %d ranks with fan-in %d", seed, len(ranks), fanIn)
				}
			}
		}
		rep, err := st.Compact(ctx, "app", CompactOptions{MinRuns: 2, FanIn: fanIn, MaxSegmentRows: 20 + r.IntN(200)})
		if err != nil {
			t.Fatalf("seed %d: compact: %v", seed, err)
		}
		var total int64
		for _, ref := range a.Current().Segments {
			total += ref.Rows
		}
		if rep.Rows <= total {
			t.Fatalf("seed %d: %d imports with fan-in %d rewrote %d rows of %d: want more than one pass", seed, imports, fanIn, rep.Rows, total)
		}
		for sh, runs := range a.Current().ShardRuns(KindEvents) {
			if runs > 1 {
				t.Fatalf("seed %d: shard %d has %d runs after compaction", seed, sh, runs)
			}
		}
		sameTrails(t, fmt.Sprintf("seed %d fan-in %d", seed, fanIn), appTrails(t, st), m.trails())
	}
}

// TestDrainAheadTrails: a shard of several events runs — one holding most
// users, later ones a few (as a live layer beside a compacted run) — and
// users runs with property writes is scanned without all users, so that
// drainAhead takes the runs of users before the next other events
// cursor's user through drain's block-wide pass and joins their user
// values: every trail and user value as the naive model has them.
func TestDrainAheadTrails(t *testing.T) {
	ctx := context.Background()
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 91))
		st := openTest(t, 1<<r.IntN(2))
		t0 := int64(1_700_000_000_000_000)
		var m trailModel
		var ids idPool
		users := 300 + r.IntN(500)
		for i := range 2 + r.IntN(3) {
			n := 3000 + r.IntN(3000)
			if i > 0 {
				n = 20 + r.IntN(200) // a few events over all users: sparse
			}
			evs := compactEvents(r, n, users, t0, &ids)
			m.addEvents(evs)
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: 64 + r.IntN(512)}); err != nil {
				t.Fatalf("seed %d: import: %v", seed, err)
			}
		}
		for range 1 + r.IntN(2) {
			ws := compactWrites(r, 100+r.IntN(400), users+20, t0)
			m.writes = append(m.writes, ws...)
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: ws}}, ImportOptions{Kind: KindUsers, BlockRows: 8 + r.IntN(64)}); err != nil {
				t.Fatalf("seed %d: users import: %v", seed, err)
			}
		}
		a, err := st.App("app")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for u, tr := range m.trails() {
			if !strings.HasPrefix(tr, "user:") { // users with events only
				want[u] = tr
			}
		}
		got, err := scanTrailsSpec(snapOf(t, a), 0, seed%2 == 1, false)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		sameTrails(t, fmt.Sprintf("seed %d", seed), got, want)
	}
}

// TestCompactStringHintsBounded: however many string columns with large
// dictionaries a compaction's inputs have, the dictionaries its output
// writer sizes ahead take a bounded part of maxOutputMemory, so that an
// output does not end after its first user.
func TestCompactStringHintsBounded(t *testing.T) {
	specs := make([]segment.PropSpec, 40)
	total := 0
	for j := range specs {
		specs[j] = segment.PropSpec{Name: fmt.Sprintf("s%02d", j), Type: event.TypeString, Strings: compactStringsHint}
		total += compactStringsHint
	}
	capStringHints(specs, total)
	sum := 0
	for _, p := range specs {
		sum += p.Strings
	}
	if sum > compactStringsBudget {
		t.Fatalf("%d strings reserved, want at most %d", sum, compactStringsBudget)
	}
	w, err := segment.NewWriter(&segment.MemFile{}, segment.WriterOptions{Props: specs})
	if err != nil {
		t.Fatal(err)
	}
	if b := w.Bytes(); b > maxOutputMemory/2 {
		t.Errorf("writer holds %d bytes before any row, maxOutputMemory %d", b, maxOutputMemory)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
