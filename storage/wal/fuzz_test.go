package wal

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/vfs"
)

// fuzzSeeds are log files: valid ones of the writer, and damaged ones.
func fuzzSeeds(f *testing.F) [][]byte {
	base, _ := sampleLog(f)
	first, last := readFile(f, base, fileName(1)), readFile(f, base, fileName(11))
	renamed := append(appendFileHeader(nil, 1), last[fileHeaderSize:]...) // the last file's records as seqs from 1: a structure error
	return [][]byte{
		first,
		renamed,
		first[:len(first)-7],
		append(slices.Clone(first), make([]byte, 40)...),
		flip(first, 100),
		appendFileHeader(nil, 1),
		slices.Concat(appendFileHeader(nil, 1), frame(1, 0, 2, "a"), frame(2, 1, 1, ""), frame(3, 2, 0, "c"), frame(4, 0, 0, "d")),
	}
}

// FuzzScan runs the record decoder on arbitrary bytes: it must never
// panic, and what it accepts must be consistent with what it reports.
func FuzzScan(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < fileHeaderSize {
			return
		}
		w := &window{f: bytes.NewReader(data), path: "fuzz", size: int64(len(data))}
		var got []rec
		res, err := scanRecords(w, 1, math.MaxUint64, func(seq uint64, b []byte) error {
			got = append(got, rec{seq, string(b)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		end := int64(fileHeaderSize)
		for i, r := range got {
			if r.seq != uint64(i+1) {
				t.Fatalf("record %d has seq %d", i, r.seq)
			}
			if uint64(i) < res.count {
				end += recordHeaderSize + int64(len(r.data))
			}
		}
		switch {
		case res.count > uint64(len(got)) || end != res.end:
			t.Fatalf("count %d, end %d; records %d, their end %d", res.count, res.end, len(got), end)
		case res.bad < 0 && res.end != int64(len(data)):
			t.Fatalf("no damage reported, but the records end at %d of %d bytes", res.end, len(data))
		case res.bad >= 0 && (res.bad < res.end || res.bad > int64(len(data)) || res.why == ""):
			t.Fatalf("damage at %d (%q), records end at %d, %d bytes", res.bad, res.why, res.end, len(data))
		}
		if res.bad >= 0 {
			if off, _, found, err := nextIntact(w, res.bad, res.seq, true); err != nil || (found && off < res.bad) {
				t.Fatalf("nextIntact: %d, %v, %v", off, found, err)
			}
		}
	})
}

// FuzzOpen opens a log whose first file holds arbitrary bytes, alone (the
// last file: a torn tail is cut) or followed by a file for seq next (then
// it must hold exactly the seqs before next, or be a gap file declaring
// them lost). Open must refuse with a *CorruptionError or
// ErrUnsupportedVersion, or open a log that replays consecutive seqs,
// whose repaired file is the intact prefix, that opens again without a
// repair and takes the next append.
func FuzzOpen(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, uint8(0), false)
		f.Add(s, uint8(9), true)
	}
	f.Add(appendGapFile(nil, 1, 11), uint8(9), true)
	f.Add(appendGapFile(nil, 1, 11), uint8(0), false)
	f.Fuzz(func(t *testing.T, data []byte, k uint8, two bool) {
		fsys := crashfs.New()
		if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, fsys, fileName(1), data)
		next := uint64(k) + 2
		if two {
			writeFile(t, fsys, fileName(next), appendFileHeader(nil, next))
		}
		l, err := Open(fsys, dir, Options{})
		if err != nil {
			if !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("open failed with neither corruption nor a newer version: %v", err)
			}
			return
		}
		rep, repaired := l.Repair()
		got := replayAll(t, l, 0)
		l.Close()
		gap := two && bytes.Equal(data, appendGapFile(nil, 1, next)) // seqs 1..next-1 declared lost
		for i, r := range got {
			if r.seq != uint64(i+1) {
				t.Fatalf("record %d has seq %d", i, r.seq)
			}
		}
		after := readFile(t, fsys, fileName(1))
		switch {
		case two && (repaired || !gap && len(got) != int(next-1) || gap && len(got) != 0 || !bytes.Equal(after, data)):
			t.Fatalf("a non-last file: repaired %v, %d records (want %d), changed %v", repaired, len(got), next-1, !bytes.Equal(after, data))
		case !two && !repaired && !bytes.Equal(after, data):
			t.Fatal("the file changed without a repair")
		case repaired && rep.Offset == 0 && !bytes.Equal(after, appendFileHeader(nil, 1)):
			t.Fatal("a damaged header was not rewritten")
		case repaired && rep.Offset > 0 && (!bytes.Equal(after, data[:rep.Offset]) || rep.Dropped != int64(len(data))-rep.Offset):
			t.Fatalf("repair %+v is not a cut of the intact prefix", rep)
		}
		l, err = Open(fsys, dir, Options{})
		if err != nil {
			t.Fatalf("second open: %v", err)
		}
		defer l.Close()
		if _, again := l.Repair(); again {
			t.Fatal("second open repaired again")
		}
		if again := replayAll(t, l, 0); !slices.Equal(again, got) {
			t.Fatal("second open replays differently")
		}
		wantNext := uint64(len(got) + 1)
		if gap {
			wantNext = next
		}
		if n := appendAll(t, l, []byte("next")); n[0].seq != wantNext {
			t.Fatalf("next seq %d after %d records, want %d", n[0].seq, len(got), wantNext)
		}
	})
}

// FuzzSalvage damages the sample log (two files: seqs 1..10 and 11..26):
// data replaces the first or the last file (mode 0, 1), is XORed into one
// of them at offset at (mode 2, 3), or is a third file after them (mode
// 4). Salvage must not fail but for a file of a newer format, and
// trySalvage checks that it never keeps a record that is not intact in
// the damaged log, accounts for every seq, and writes a log that opens
// without a repair and replays what it kept. Besides, every record whose
// bytes the damage left alone is kept.
func FuzzSalvage(f *testing.F) {
	base, want := sampleLog(f)
	for i, s := range fuzzSeeds(f) {
		f.Add(s, uint8(i%5), uint16(i*37), uint8(i*3))
	}
	f.Add(appendGapFile(nil, 11, 27), uint8(1), uint16(0), uint8(0))
	f.Add([]byte{0xff, 0, 0, 0, 0x10}, uint8(2), uint16(fileHeaderSize+3), uint8(0))
	f.Add(bytes.Repeat([]byte{0x55}, 200), uint8(3), uint16(100), uint8(12))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8, at uint16, after uint8) {
		if len(data) > 4096 {
			return // intactRecords is quadratic in a file's size
		}
		fsys := base.Crash(0, nil)
		names := []string{fileName(1), fileName(11)}
		orig := [][]byte{readFile(t, fsys, names[0]), readFile(t, fsys, names[1])}
		changed := [2]func(off, end int64) bool{} // nil: the file is as written
		switch mode %= 5; mode {
		case 0, 1:
			writeFile(t, fsys, names[mode], data)
			changed[mode] = func(int64, int64) bool { return true }
		case 2, 3:
			b := slices.Clone(orig[mode-2])
			for i, x := range data {
				if j := int(at) + i; j < len(b) {
					b[j] ^= x
				}
			}
			writeFile(t, fsys, names[mode-2], b)
			changed[mode-2] = func(off, end int64) bool { return !bytes.Equal(b[off:end], orig[mode-2][off:end]) }
		case 4:
			writeFile(t, fsys, fileName(27), data)
		}
		_, kept, err := trySalvage(t, fsys, uint64(after%30))
		if err != nil {
			if !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("salvage: %v", err)
			}
			return
		}
		for i, name := range names {
			for _, p := range positions(orig[i]) {
				if p.seq > uint64(after%30) && (changed[i] == nil || !changed[i](p.off, p.end)) &&
					!slices.Contains(kept, want[p.seq-1]) {
					t.Fatalf("record %d of %s is undamaged but was not kept", p.seq, name)
				}
			}
		}
	})
}
