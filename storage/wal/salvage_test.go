package wal

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/vfs"
)

// salvaged is the directory tests salvage into.
const salvaged = "salvaged"

// multiLog writes a log of several files (rotated at 200 bytes) holding
// 30 records — single appends and batches of three, payloads of 0 to 90
// bytes — and closes it. It returns the filesystem, every record and the
// files' names.
func multiLog(t testing.TB) (*crashfs.FS, []rec, []string) {
	t.Helper()
	fsys := crashfs.New()
	l := openLog(t, fsys, Options{SegmentSize: 200})
	r := rand.New(rand.NewPCG(5, 6))
	var want []rec
	for i := 0; len(want) < 30; i++ {
		if i%4 != 3 {
			size := r.IntN(91)
			want = append(want, appendAll(t, l, payload(5, i, size)[:size])...)
			continue
		}
		want = append(want, appendBatch(t, l, payload(6, i, 40), nil, payload(7, i, 20))...)
	}
	l.Close()
	names := logNames(t, fsys)
	if len(names) < 5 {
		t.Fatalf("multiLog: %d files", len(names))
	}
	return fsys, want, names
}

// snapshot returns every file of dir but the lock file, by name.
func snapshot(t testing.TB, fsys vfs.FS, d string) map[string]string {
	t.Helper()
	names, err := fsys.List(d)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		if n != lockName {
			b, err := vfs.ReadFile(fsys, filepath.Join(d, n))
			if err != nil {
				t.Fatal(err)
			}
			out[n] = string(b)
		}
	}
	return out
}

// runSalvage is trySalvage that fails the test on Salvage's error.
func runSalvage(t testing.TB, fsys vfs.FS, after uint64) (*SalvageReport, []rec) {
	t.Helper()
	rep, kept, err := trySalvage(t, fsys, after)
	if err != nil {
		t.Fatalf("salvage: %v", err)
	}
	return rep, kept
}

// trySalvage salvages dir into salvaged (files rotated at 150 bytes) and
// checks what every salvage must do: dir unchanged; after an error, no
// salvaged directory; else the kept records strictly increasing, after
// after, each an intact record of dir; every seq up to the last kept one
// kept, skipped or in a lost range; the new log opening without a
// repair, replaying exactly the kept records from after on, and taking
// the next append at the seq after the last. It returns the report and
// the kept records, or Salvage's error.
func trySalvage(t testing.TB, fsys vfs.FS, after uint64) (*SalvageReport, []rec, error) {
	t.Helper()
	before := snapshot(t, fsys, dir)
	rep, err := Salvage(context.Background(), fsys, dir, salvaged, SalvageOptions{After: after, SegmentSize: 150})
	if after := snapshot(t, fsys, dir); !mapsEqual(before, after) {
		t.Fatal("salvage changed the damaged log")
	}
	if err != nil {
		if ok, _ := vfs.Exists(fsys, salvaged); ok {
			t.Fatalf("salvage failed (%v) and left %s", err, salvaged)
		}
		return nil, nil, err
	}
	l, err := Open(fsys, salvaged, Options{FirstSeq: after + 1})
	if err != nil {
		t.Fatalf("open the salvaged log: %v (report %+v)", err, rep)
	}
	defer l.Close()
	if r, ok := l.Repair(); ok {
		t.Fatalf("the salvaged log needed a repair: %+v", r)
	}
	kept := replayAll(t, l, after)
	intact := intactRecords(t, fsys, dir)
	for i, r := range kept {
		if r.seq <= after || i > 0 && r.seq <= kept[i-1].seq {
			t.Fatalf("kept seq %d after %d (after %d)", r.seq, kept[max(i-1, 0)].seq, after)
		}
		if !intact[r] {
			t.Fatalf("kept record %d (%q) is no intact record of the damaged log", r.seq, r.data)
		}
	}
	next := after + 1
	if n := len(kept); n > 0 {
		next = kept[n-1].seq + 1
		if rep.Records != uint64(n) || rep.FirstSeq != kept[0].seq || rep.LastSeq != kept[n-1].seq {
			t.Fatalf("report: %d records, seqs %d..%d; replayed %d, seqs %d..%d", rep.Records, rep.FirstSeq, rep.LastSeq, n, kept[0].seq, kept[n-1].seq)
		}
	} else if rep.Records != 0 || rep.FirstSeq != 0 || rep.LastSeq != 0 {
		t.Fatalf("report: %d records, seqs %d..%d; replayed none", rep.Records, rep.FirstSeq, rep.LastSeq)
	}
	checkAccounted(t, rep, kept)
	if got := appendAll(t, l, []byte("next")); got[0].seq != next {
		t.Fatalf("the salvaged log's next seq is %d, want %d", got[0].seq, next)
	}
	return rep, kept, nil
}

// checkAccounted: every seq from After+1 to the last kept one is kept or
// in a lost range, and no lost range holds a kept seq.
func checkAccounted(t testing.TB, rep *SalvageReport, kept []rec) {
	t.Helper()
	lost := func(seq uint64) bool {
		for _, r := range rep.Lost {
			if r.FirstSeq > 0 && seq >= r.FirstSeq && (r.ToEnd || seq <= r.LastSeq) {
				return true
			}
		}
		return false
	}
	k := 0
	for seq := rep.After + 1; seq <= rep.LastSeq; seq++ {
		isKept := k < len(kept) && kept[k].seq == seq
		if isKept {
			k++
		}
		if isLost := lost(seq); isKept == isLost {
			t.Fatalf("seq %d: kept %v, in a lost range %v (lost %v)", seq, isKept, isLost, rep.Lost)
		}
	}
}

// intactRecords returns every intact record found at any offset of any
// log file of d: whatever Salvage keeps must be one.
func intactRecords(t testing.TB, fsys vfs.FS, d string) map[rec]bool {
	t.Helper()
	out := map[rec]bool{}
	for name := range snapshot(t, fsys, d) {
		if _, ok := parseName(name); !ok {
			continue
		}
		w, f, err := openWindow(fsys, filepath.Join(d, name))
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < w.size; off++ {
			h, b, why, err := readRecord(w, off)
			if err != nil {
				t.Fatal(err)
			}
			if why == "" {
				out[rec{h.seq, string(b[recordHeaderSize:])}] = true
			}
		}
		f.Close()
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// without returns the records of want not in the lost ranges.
func without(want []rec, lost []LostRange) []rec {
	return slices.DeleteFunc(slices.Clone(want), func(r rec) bool {
		for _, l := range lost {
			if l.FirstSeq > 0 && r.seq >= l.FirstSeq && (l.ToEnd || r.seq <= l.LastSeq) {
				return true
			}
		}
		return false
	})
}

// sameRanges compares lost ranges but for their reasons, which must be
// given.
func sameRanges(got, want []LostRange) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g := got[i]
		if g.Reason == "" {
			return false
		}
		g.Reason = want[i].Reason
		if g != want[i] {
			return false
		}
	}
	return true
}

// firstSeq returns the first seq a log file's name carries.
func firstSeq(name string) uint64 {
	first, _ := parseName(name)
	return first
}

// TestSalvageUndamaged: a log without damage salvages to the same
// records, with nothing lost; so does the salvaged log.
func TestSalvageUndamaged(t *testing.T) {
	base, want, _ := multiLog(t)
	fsys := base.Crash(0, nil)
	rep, kept := runSalvage(t, fsys, 0)
	if !slices.Equal(kept, want) || len(rep.Lost) != 0 || rep.Gaps != 0 || rep.Skipped != 0 {
		t.Fatalf("kept %d of %d records, lost %v", len(kept), len(want), rep.Lost)
	}
	if rep.Files != len(logNames(t, fsys)) || rep.Bytes <= 0 {
		t.Fatalf("report: %d files, %d bytes", rep.Files, rep.Bytes)
	}
	if n := len(snapshot(t, fsys, salvaged)); n < 3 {
		t.Fatalf("the salvaged log has %d files; rotated at 150 bytes it needs more", n)
	}
	for _, after := range []uint64{1, 12, 29, 30, 40} {
		t.Run(fmt.Sprint("after ", after), func(t *testing.T) {
			rep, kept := runSalvage(t, base.Crash(0, nil), after)
			if w := want[min(after, 30):]; !slices.Equal(kept, w) || len(rep.Lost) != 0 || rep.Skipped != min(after, 30) {
				t.Fatalf("kept %d records, want %d; skipped %d; lost %v", len(kept), len(w), rep.Skipped, rep.Lost)
			}
		})
	}
}

// TestSalvageFlipEveryByte changes every byte of the first, a middle and
// the last file in turn: Salvage keeps every other record and reports
// exactly the damaged record (or header) lost.
func TestSalvageFlipEveryByte(t *testing.T) {
	base, want, names := multiLog(t)
	if testing.Short() {
		names = names[len(names)-1:]
	}
	for _, name := range []string{names[0], names[len(names)/2], names[len(names)-1]} {
		data := readFile(t, base, name)
		pos := positions(data)
		path := filepath.Join(dir, name)
		for i := range data {
			var lost LostRange
			if i < fileHeaderSize {
				lost = LostRange{File: path, Start: 0, End: fileHeaderSize}
			} else {
				for j, p := range pos {
					if int64(i) >= p.off && int64(i) < p.end {
						lost = LostRange{File: path, Start: p.off, End: p.end, FirstSeq: p.seq, LastSeq: p.seq}
						if name == names[len(names)-1] && j == len(pos)-1 {
							lost.LastSeq, lost.ToEnd = 0, true // the end of the log: a tear or damage
						}
					}
				}
			}
			fsys := base.Crash(0, nil)
			writeFile(t, fsys, name, flip(data, i))
			rep, kept := runSalvage(t, fsys, 0)
			if !sameRanges(rep.Lost, []LostRange{lost}) || !slices.Equal(kept, without(want, rep.Lost)) {
				t.Fatalf("%s byte %d: lost %v, want %v; kept %d records", name, i, rep.Lost, lost, len(kept))
			}
		}
	}
}

// TestSalvageDamage: damage of several shapes, each with the records kept
// and the ranges lost; the salvaged log salvages again to the same
// records, its gap files reported.
func TestSalvageDamage(t *testing.T) {
	base, want, names := multiLog(t)
	path := func(i int) string { return filepath.Join(dir, names[i]) }
	data := func(i int) []byte { return readFile(t, base, names[i]) }
	pos := func(i int) []recordPos { return positions(data(i)) }
	size := func(i int) int64 { return int64(len(data(i))) }
	last := len(names) - 1
	lastSeq := want[len(want)-1].seq
	for _, tc := range []struct {
		name   string
		damage func(fsys vfs.FS)
		lost   []LostRange
		after  uint64
	}{
		{
			name:   "a middle file cut inside a record",
			damage: func(fsys vfs.FS) { writeFile(t, fsys, names[2], data(2)[:pos(2)[1].off+30]) },
			lost:   []LostRange{{File: path(2), Start: pos(2)[1].off, End: pos(2)[1].off + 30, FirstSeq: pos(2)[1].seq, LastSeq: firstSeq(names[3]) - 1}},
		},
		{
			name:   "a middle file cut at a record's start",
			damage: func(fsys vfs.FS) { writeFile(t, fsys, names[2], data(2)[:pos(2)[1].off]) },
			lost:   []LostRange{{File: path(2), Start: pos(2)[1].off, End: pos(2)[1].off, FirstSeq: pos(2)[1].seq, LastSeq: firstSeq(names[3]) - 1}},
		},
		{
			name: "a middle file removed",
			damage: func(fsys vfs.FS) {
				if err := fsys.Remove(path(2)); err != nil {
					t.Fatal(err)
				}
			},
			lost: []LostRange{{File: path(1), Start: size(1), End: size(1), FirstSeq: firstSeq(names[2]), LastSeq: firstSeq(names[3]) - 1}},
		},
		{
			name: "the first file removed",
			damage: func(fsys vfs.FS) {
				if err := fsys.Remove(path(0)); err != nil {
					t.Fatal(err)
				}
			},
			lost: []LostRange{{File: path(1), FirstSeq: 1, LastSeq: firstSeq(names[1]) - 1}},
		},
		{
			name: "a range zeroed across records",
			damage: func(fsys vfs.FS) {
				b := data(1)
				clear(b[pos(1)[0].off+5 : pos(1)[1].end-3])
				writeFile(t, fsys, names[1], b)
			},
			lost: []LostRange{{File: path(1), Start: pos(1)[0].off, End: pos(1)[2].off, FirstSeq: pos(1)[0].seq, LastSeq: pos(1)[1].seq}},
		},
		{
			name: "a whole file zeroed",
			damage: func(fsys vfs.FS) {
				writeFile(t, fsys, names[2], make([]byte, size(2)))
			},
			lost: []LostRange{
				{File: path(2), Start: 0, End: fileHeaderSize},
				{File: path(2), Start: fileHeaderSize, End: size(2), FirstSeq: firstSeq(names[2]), LastSeq: firstSeq(names[3]) - 1},
			},
		},
		{
			name: "two damaged records in one file",
			damage: func(fsys vfs.FS) {
				writeFile(t, fsys, names[1], flip(flip(data(1), int(pos(1)[0].off)+2), int(pos(1)[2].off)+recordHeaderSize))
			},
			lost: []LostRange{
				{File: path(1), Start: pos(1)[0].off, End: pos(1)[0].end, FirstSeq: pos(1)[0].seq, LastSeq: pos(1)[0].seq},
				{File: path(1), Start: pos(1)[2].off, End: pos(1)[2].end, FirstSeq: pos(1)[2].seq, LastSeq: pos(1)[2].seq},
			},
		},
		{
			name: "the last file damaged before its last group (not a tear)",
			damage: func(fsys vfs.FS) {
				writeFile(t, fsys, names[last], flip(data(last), int(pos(last)[0].off)+recordHeaderSize))
			},
			lost: []LostRange{{File: path(last), Start: pos(last)[0].off, End: pos(last)[0].end, FirstSeq: pos(last)[0].seq, LastSeq: pos(last)[0].seq}},
		},
		{
			name: "the last file torn",
			damage: func(fsys vfs.FS) {
				writeFile(t, fsys, names[last], data(last)[:size(last)-1])
			},
			lost: []LostRange{{File: path(last), Start: pos(last)[len(pos(last))-1].off, End: size(last) - 1, FirstSeq: lastSeq, ToEnd: true}},
		},
		{
			name: "junk after the last file's records",
			damage: func(fsys vfs.FS) {
				writeFile(t, fsys, names[last], append(data(last), strings.Repeat("junk", 100)...))
			},
			lost: []LostRange{{File: path(last), Start: size(last), End: size(last) + 400, FirstSeq: lastSeq + 1, ToEnd: true}},
		},
		{
			name: "damage before After, and after it",
			damage: func(fsys vfs.FS) {
				writeFile(t, fsys, names[0], flip(data(0), int(pos(0)[0].off)+recordHeaderSize))
				writeFile(t, fsys, names[3], flip(data(3), int(pos(3)[0].off)+recordHeaderSize))
			},
			after: pos(3)[0].seq - 1,
			lost: []LostRange{
				{File: path(0), Start: pos(0)[0].off, End: pos(0)[0].end, FirstSeq: 1, LastSeq: 1},
				{File: path(3), Start: pos(3)[0].off, End: pos(3)[0].end, FirstSeq: pos(3)[0].seq, LastSeq: pos(3)[0].seq},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := base.Crash(0, nil)
			tc.damage(fsys)
			rep, kept := runSalvage(t, fsys, tc.after)
			if !sameRanges(rep.Lost, tc.lost) {
				t.Fatalf("lost %v\nwant %v", rep.Lost, tc.lost)
			}
			wantKept := slices.DeleteFunc(without(want, tc.lost), func(r rec) bool { return r.seq <= tc.after })
			if !slices.Equal(kept, wantKept) {
				t.Fatalf("kept %d records, want %d", len(kept), len(wantKept))
			}
			gaps := 0
			for i, r := range tc.lost {
				if !r.ToEnd && r.FirstSeq > tc.after && (i == 0 || tc.lost[i-1].LastSeq+1 != r.FirstSeq) {
					gaps++
				}
			}
			if rep.Gaps != gaps {
				t.Fatalf("%d gap files, want %d", rep.Gaps, gaps)
			}
			// Salvaging the salvaged log (runSalvage appended a record)
			// keeps the same records and reports its gap files, nothing
			// else.
			if err := fsys.Rename(dir, dir+".damaged"); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Rename(salvaged, dir); err != nil {
				t.Fatal(err)
			}
			rep2, kept2 := runSalvage(t, fsys, tc.after)
			if n := len(kept2) - 1; n < 0 || !slices.Equal(kept2[:n], kept) || kept2[n].data != "next" || len(rep2.Lost) != rep.Gaps {
				t.Fatalf("salvaged again: kept %d records (want %d), lost %v", len(kept2), len(kept), rep2.Lost)
			}
			for _, r := range rep2.Lost {
				if !strings.Contains(r.Reason, "a gap file") || r.Start != 0 || r.End != gapFileSize {
					t.Fatalf("salvaged again: lost %v", r)
				}
			}
		})
	}
}

// TestSalvageStructure: intact records that break the sequence — a second
// copy, records missing without damage, a failed commit's records that
// the next file supersedes.
func TestSalvageStructure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[uint64][]byte // first seq → records
		raw   map[uint64][]byte // first seq → the whole file
		want  []rec
		lost  []LostRange
	}{
		{
			name:  "a gap file",
			files: map[uint64][]byte{1: frame(1, 0, 0, "a"), 4: frame(4, 0, 0, "d")},
			raw:   map[uint64][]byte{2: appendGapFile(nil, 2, 4)},
			want:  []rec{{1, "a"}, {4, "d"}},
			lost:  []LostRange{{File: filepath.Join(dir, fileName(2)), Start: 0, End: gapFileSize, FirstSeq: 2, LastSeq: 3}},
		},
		{
			name:  "a damaged gap file",
			files: map[uint64][]byte{1: frame(1, 0, 0, "a"), 4: frame(4, 0, 0, "d")},
			raw:   map[uint64][]byte{2: flip(appendGapFile(nil, 2, 4), 12)},
			want:  []rec{{1, "a"}, {4, "d"}},
			lost: []LostRange{
				{File: filepath.Join(dir, fileName(2)), Start: 0, End: fileHeaderSize},
				{File: filepath.Join(dir, fileName(2)), Start: fileHeaderSize, End: gapFileSize, FirstSeq: 2, LastSeq: 3},
			},
		},
		{
			name:  "a second copy",
			files: map[uint64][]byte{1: slices.Concat(frame(1, 0, 0, "a"), frame(1, 0, 0, "A"), frame(2, 0, 0, "b"))},
			want:  []rec{{1, "a"}, {2, "b"}},
			lost:  []LostRange{{File: filepath.Join(dir, fileName(1)), Start: 45, End: 70}},
		},
		{
			name:  "records missing",
			files: map[uint64][]byte{1: slices.Concat(frame(1, 0, 0, "a"), frame(4, 1, 0, "d"))},
			want:  []rec{{1, "a"}, {4, "d"}},
			lost:  []LostRange{{File: filepath.Join(dir, fileName(1)), Start: 45, End: 45, FirstSeq: 2, LastSeq: 3}},
		},
		{
			name:  "a superseded failed commit",
			files: map[uint64][]byte{1: slices.Concat(frame(1, 0, 0, "a"), frame(2, 0, 0, "b")), 2: frame(2, 0, 0, "B")},
			want:  []rec{{1, "a"}, {2, "B"}},
		},
		{
			name:  "damage, then a superseded record",
			files: map[uint64][]byte{1: slices.Concat(frame(1, 0, 0, "a"), flip(frame(2, 0, 0, "b"), 24), frame(3, 0, 0, "c")), 3: frame(3, 0, 0, "C")},
			want:  []rec{{1, "a"}, {3, "C"}},
			lost:  []LostRange{{File: filepath.Join(dir, fileName(1)), Start: 45, End: 70, FirstSeq: 2, LastSeq: 2}},
		},
		{
			name:  "a batch cut by damage",
			files: map[uint64][]byte{1: slices.Concat(frame(1, 0, 2, "a"), flip(frame(2, 1, 1, "b"), 24), frame(3, 2, 0, "c"), frame(4, 0, 0, "d"))},
			want:  []rec{{1, "a"}, {3, "c"}, {4, "d"}},
			lost:  []LostRange{{File: filepath.Join(dir, fileName(1)), Start: 45, End: 70, FirstSeq: 2, LastSeq: 2}},
		},
		{
			name: "a damaged header, intact records",
			files: map[uint64][]byte{
				1: slices.Concat(frame(1, 0, 0, "a"), frame(2, 0, 0, "b")),
				3: frame(3, 0, 0, "c"),
			},
			want: []rec{{1, "a"}, {2, "b"}, {3, "c"}},
			lost: []LostRange{{File: filepath.Join(dir, fileName(3)), Start: 0, End: fileHeaderSize}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := crashfs.New()
			if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for first, recs := range tc.files {
				head := appendFileHeader(nil, first)
				if strings.Contains(tc.name, "header") && first == 3 {
					head = flip(head, 9)
				}
				writeFile(t, fsys, fileName(first), append(head, recs...))
			}
			for first, b := range tc.raw {
				writeFile(t, fsys, fileName(first), b)
			}
			rep, kept := runSalvage(t, fsys, 0)
			if !slices.Equal(kept, tc.want) || !sameRanges(rep.Lost, slices.Concat([]LostRange{}, tc.lost)) {
				t.Fatalf("kept %v, lost %v; want %v, %v", kept, rep.Lost, tc.want, tc.lost)
			}
		})
	}
}

// TestSalvageRefuses: a log another Log holds, a destination that is not
// new or lies inside the log, a newer format, a cancelled context and a
// full disk are errors, and a failed salvage leaves no destination behind.
func TestSalvageRefuses(t *testing.T) {
	base, _, names := multiLog(t)
	salvage := func(fsys vfs.FS, dst string) error {
		_, err := Salvage(context.Background(), fsys, dir, dst, SalvageOptions{})
		return err
	}
	gone := func(t *testing.T, fsys vfs.FS) {
		t.Helper()
		if ok, err := vfs.Exists(fsys, salvaged); ok || err != nil {
			t.Fatalf("a failed salvage left %s (%v)", salvaged, err)
		}
	}
	t.Run("log open", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		openLog(t, fsys, Options{})
		if err := salvage(fsys, salvaged); !errors.Is(err, vfs.ErrLocked) {
			t.Fatalf("got %v, want ErrLocked", err)
		}
	})
	t.Run("destination not empty", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		if err := vfs.MkdirAllSync(fsys, "other", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(fsys, "other", "x", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := salvage(fsys, "other"); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("destination inside the log", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		for _, dst := range []string{dir, filepath.Join(dir, "new")} {
			if err := salvage(fsys, dst); err == nil || !strings.Contains(err.Error(), "outside") {
				t.Fatalf("into %s: %v", dst, err)
			}
		}
	})
	t.Run("newer format", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		writeFile(t, fsys, names[2], newerVersion(readFile(t, fsys, names[2]), fileHeaderSize))
		if err := salvage(fsys, salvaged); !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("got %v", err)
		}
		gone(t, fsys)
	})
	t.Run("cancelled", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := Salvage(ctx, fsys, dir, salvaged, SalvageOptions{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
		gone(t, fsys)
	})
	t.Run("disk full", func(t *testing.T) {
		for _, space := range []int64{0, 100, 1000} {
			mem := base.Crash(0, nil)
			fsys := &faultFS{FS: mem, space: space}
			if err := salvage(fsys, salvaged); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("space %d: got %v", space, err)
			}
			gone(t, fsys)
		}
	})
}

// TestGapFiles: Open accepts a gap file between log files and at the
// start, Replay skips its seqs, Release removes it like any file, and a
// gap file that is damaged, last, or does not end where the next file
// starts is damage.
func TestGapFiles(t *testing.T) {
	write := func(t *testing.T, files map[uint64][]byte) vfs.FS {
		fsys := crashfs.New()
		if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for first, b := range files {
			writeFile(t, fsys, fileName(first), b)
		}
		return fsys
	}
	walFile := func(first, n uint64) []byte {
		b := appendFileHeader(nil, first)
		for s := first; s < first+n; s++ {
			b = append(b, frame(s, 0, 0, fmt.Sprint(s))...)
		}
		return b
	}
	t.Run("between files", func(t *testing.T) {
		fsys := write(t, map[uint64][]byte{1: walFile(1, 3), 4: appendGapFile(nil, 4, 8), 8: walFile(8, 3)})
		l := openLog(t, fsys, Options{})
		want := []rec{{1, "1"}, {2, "2"}, {3, "3"}, {8, "8"}, {9, "9"}, {10, "10"}}
		for _, after := range []uint64{0, 2, 3, 5, 7, 9} {
			if got := replayAll(t, l, after); !slices.Equal(got, slices.DeleteFunc(slices.Clone(want), func(r rec) bool { return r.seq <= after })) {
				t.Fatalf("replay after %d: %v", after, got)
			}
		}
		if st := l.Stats(); st.FirstSeq != 1 || st.LastSeq != 10 || st.Files != 3 {
			t.Fatalf("stats %+v", st)
		}
		appendAll(t, l, []byte("11"))
		if err := l.Release(7); err != nil {
			t.Fatal(err)
		}
		if n := logNames(t, fsys); !slices.Equal(n, []string{fileName(8), fileName(11)}) {
			t.Fatalf("after release: %v", n)
		}
		if got := replayAll(t, l, 7); len(got) != 4 || got[0].seq != 8 {
			t.Fatalf("replay after the release: %v", got)
		}
	})
	t.Run("at the start", func(t *testing.T) {
		fsys := write(t, map[uint64][]byte{1: appendGapFile(nil, 1, 5), 5: walFile(5, 2)})
		l := openLog(t, fsys, Options{})
		if got := replayAll(t, l, 0); !slices.Equal(got, []rec{{5, "5"}, {6, "6"}}) {
			t.Fatalf("replay: %v", got)
		}
	})
	for _, tc := range []struct {
		name  string
		files map[uint64][]byte
		msg   string
	}{
		{"last", map[uint64][]byte{1: walFile(1, 3), 4: appendGapFile(nil, 4, 8)}, "last file"},
		{"ends early", map[uint64][]byte{1: appendGapFile(nil, 1, 4), 5: walFile(5, 1)}, "next file starts at seq 5"},
		{"damaged", map[uint64][]byte{1: flip(appendGapFile(nil, 1, 5), 12), 5: walFile(5, 1)}, "checksum mismatch"},
		{"cut", map[uint64][]byte{1: appendGapFile(nil, 1, 5)[:20], 5: walFile(5, 1)}, "a gap file of 20 bytes"},
		{"named for another seq", map[uint64][]byte{2: appendGapFile(nil, 1, 5), 5: walFile(5, 1)}, "the file name's 2"},
		{"a file before it cut", map[uint64][]byte{1: walFile(1, 2), 4: appendGapFile(nil, 4, 5), 5: walFile(5, 1)}, "records are missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(write(t, tc.files), dir, Options{})
			var ce *CorruptionError
			if !errors.As(err, &ce) || !strings.Contains(ce.Msg, tc.msg) {
				t.Fatalf("got %v, want corruption (%q)", err, tc.msg)
			}
		})
	}
	t.Run("newer format", func(t *testing.T) {
		b := newerVersion(appendGapFile(nil, 1, 5), gapFileSize)
		if _, err := Open(write(t, map[uint64][]byte{1: b, 5: walFile(5, 1)}), dir, Options{}); !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("damaged after open", func(t *testing.T) {
		fsys := write(t, map[uint64][]byte{1: appendGapFile(nil, 1, 5), 5: walFile(5, 1)})
		l := openLog(t, fsys, Options{})
		writeFile(t, fsys, fileName(1), flip(appendGapFile(nil, 1, 5), 20))
		var ce *CorruptionError
		if err := l.Replay(0, func(uint64, []byte) error { return nil }); !errors.As(err, &ce) {
			t.Fatalf("replay: %v", err)
		}
	})
}
