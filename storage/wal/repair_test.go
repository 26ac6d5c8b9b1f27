package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/vfs"
)

// frame encodes one record.
func frame(seq uint64, index, rest uint32, payload string) []byte {
	var hdr [recordHeaderSize]byte
	putRecordHeader(&hdr, []byte(payload), seq, index, rest)
	return append(hdr[:], payload...)
}

// writeFile replaces dir/name with data, durably. It writes a copy:
// pebble's MemFS scribbles over written buffers in race builds.
func writeFile(t testing.TB, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	if err := vfs.WriteFileAtomic(fsys, dir, name, slices.Clone(data)); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, fsys vfs.FS, name string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordPos is where a record of a known-good file is.
type recordPos struct {
	off, end int64
	seq      uint64
	rest     uint32 // records after it in its batch
}

// positions walks a known-good file by its length fields.
func positions(b []byte) []recordPos {
	var out []recordPos
	for off := int64(fileHeaderSize); off < int64(len(b)); {
		h := parseRecordHeader(b[off:])
		end := off + recordHeaderSize + int64(h.n)
		out = append(out, recordPos{off, end, h.seq, h.rest})
		off = end
	}
	return out
}

// sampleLog writes a log of two files and closes it: the first holds
// seqs 1..10 (single records), the last 11..26 in commits of one record
// or of a batch of three, ending with a batch. It returns the filesystem
// and every record.
func sampleLog(t testing.TB) (*crashfs.FS, []rec) {
	t.Helper()
	fsys := crashfs.New()
	l := openLog(t, fsys, Options{})
	var want []rec
	for i := range 10 {
		want = append(want, appendAll(t, l, payload(0, i, 10+i*7))...)
	}
	l.Close()
	l = openLog(t, fsys, Options{})
	for i := range 8 {
		if i%2 == 0 {
			want = append(want, appendAll(t, l, payload(1, i, 5+i*11))...)
			continue
		}
		want = append(want, appendBatch(t, l, payload(2, i, 30), payload(3, i, 0)[:0], payload(4, i, 70))...)
	}
	l.Close()
	if n := logNames(t, fsys); !slices.Equal(n, []string{fileName(1), fileName(11)}) || len(want) != 26 {
		t.Fatalf("sample log: files %v, %d records", n, len(want))
	}
	return fsys, want
}

// reopenAll opens the log on fsys, replays it, checks it against want and
// that a second open repairs nothing, and appends one more record.
func reopenAll(t *testing.T, fsys vfs.FS, want []rec) (Repair, bool) {
	t.Helper()
	l, err := Open(fsys, dir, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	rep, repaired := l.Repair()
	got := replayAll(t, l, 0)
	l.Close()
	if !slices.Equal(got, want) {
		t.Fatalf("replay: %d records (last %v), want %d", len(got), got[len(got)-1].seq, len(want))
	}
	l, err = Open(fsys, dir, Options{})
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	defer l.Close()
	if r, again := l.Repair(); again {
		t.Fatalf("second open repaired again: %+v", r)
	}
	if got := replayAll(t, l, 0); !slices.Equal(got, want) {
		t.Fatalf("replay after the second open differs")
	}
	next := appendAll(t, l, []byte("next"))
	if wantSeq := uint64(len(want) + 1); next[0].seq != wantSeq {
		t.Fatalf("next seq %d, want %d", next[0].seq, wantSeq)
	}
	return rep, repaired
}

// TestTornTailAtEveryByte cuts the last file at every length: the log
// opens with the complete batches before the cut, and the cut is
// repaired.
func TestTornTailAtEveryByte(t *testing.T) {
	base, want := sampleLog(t)
	last := readFile(t, base, fileName(11))
	pos := positions(last)
	for cut := range len(last) + 1 {
		fsys := base.Crash(0, nil)
		writeFile(t, fsys, fileName(11), last[:cut])
		keep, end := 10, int64(fileHeaderSize) // records kept, and where they end
		for i, p := range pos {
			if p.end <= int64(cut) && p.rest == 0 {
				keep, end = 11+i, p.end
			}
		}
		if cut < fileHeaderSize {
			end = 0 // the header is rewritten
		}
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			rep, repaired := reopenAll(t, fsys, want[:keep])
			switch {
			case cut >= fileHeaderSize && int64(cut) == end:
				if repaired {
					t.Fatalf("cut %d at a batch boundary repaired: %+v", cut, rep)
				}
			case !repaired || rep.Offset != end || rep.Dropped != int64(cut)-end || rep.File != filepath.Join(dir, fileName(11)):
				t.Fatalf("cut %d: repair %+v (repaired %v), want offset %d", cut, rep, repaired, end)
			}
		})
	}
}

func TestTornTailGarbage(t *testing.T) {
	base, want := sampleLog(t)
	last := readFile(t, base, fileName(11))
	pos := positions(last)
	lastGroup := pos[len(pos)-3].off
	for _, tc := range []struct {
		name   string
		data   []byte
		keep   int   // records kept
		offset int64 // the repair's offset
	}{
		{"zeroes", append(slices.Clone(last), make([]byte, 5000)...), 26, int64(len(last))},
		{"junk", append(slices.Clone(last), strings.Repeat("\xa5junk", 1000)...), 26, int64(len(last))},
		{"a record's header and zeroes", append(slices.Clone(last), append(frame(27, 0, 0, "torn")[:recordHeaderSize], make([]byte, 100)...)...), 26, int64(len(last))},
		{"last group flipped", flip(last, len(last)-5), 23, lastGroup},
		{"last group's first record flipped", flip(last, int(lastGroup)+recordHeaderSize), 23, lastGroup},
		{"last group zeroed", append(slices.Clone(last[:lastGroup]), make([]byte, len(last)-int(lastGroup))...), 23, lastGroup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := base.Crash(0, nil)
			writeFile(t, fsys, fileName(11), tc.data)
			rep, repaired := reopenAll(t, fsys, want[:tc.keep])
			if !repaired || rep.Offset != tc.offset || rep.Dropped != int64(len(tc.data))-tc.offset {
				t.Fatalf("repair %+v (%v), want offset %d", rep, repaired, tc.offset)
			}
			if got := readFile(t, fsys, fileName(11)); int64(len(got)) < tc.offset || string(got[:tc.offset]) != string(last[:tc.offset]) {
				t.Fatal("the repaired file is not the intact prefix")
			}
		})
	}
	t.Run("torn header", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		writeFile(t, fsys, fileName(11), append(make([]byte, fileHeaderSize), last[fileHeaderSize:pos[1].off]...)) // only the first group
		if rep, repaired := reopenAll(t, fsys, want[:10]); !repaired || rep.Offset != 0 {
			t.Fatalf("repair %+v", rep)
		}
	})
}

// newerVersion changes b, a log file or a gap file whose checksummed
// header is its first n bytes (the checksum last), to name the format
// version after FormatVersion, and returns it.
func newerVersion(b []byte, n int) []byte {
	b[len(magic)] = FormatVersion + 1
	binary.LittleEndian.PutUint32(b[n-4:], crc32.Checksum(b[:n-4], castagnoli))
	return b
}

// flip returns a copy of b with the byte at i changed.
func flip(b []byte, i int) []byte {
	b = slices.Clone(b)
	b[i] ^= 0x10
	return b
}

// TestDamageDetected flips every byte of both files in turn: damage in
// the first file, or in the last file before its last commit group, is
// a *CorruptionError at the damaged record's offset, never a silent cut.
func TestDamageDetected(t *testing.T) {
	base, want := sampleLog(t)
	for _, name := range []string{fileName(1), fileName(11)} {
		data := readFile(t, base, name)
		pos := positions(data)
		lastGroup := int64(len(data)) + 1 // nothing is a tear in the first file
		if name == fileName(11) {
			lastGroup = pos[len(pos)-3].off
		}
		for i := range data {
			at := int64(0) // the damaged header or record
			for _, p := range pos {
				if int64(i) >= p.off {
					at = p.off
				}
			}
			fsys := base.Crash(0, nil)
			writeFile(t, fsys, name, flip(data, i))
			l, err := Open(fsys, dir, Options{})
			if at >= lastGroup {
				if err != nil {
					t.Fatalf("%s byte %d (last group): %v", name, i, err)
				}
				l.Close()
				continue
			}
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorruption) || ce.Path != filepath.Join(dir, name) || ce.Offset != at {
				t.Fatalf("%s byte %d: %v, want corruption at offset %d", name, i, err, at)
			}
		}
	}
	// The log was never changed by a refused open.
	reopenAll(t, base, want)
}

func TestDamageBetweenFiles(t *testing.T) {
	base, want := sampleLog(t)
	first := readFile(t, base, fileName(1))
	pos := positions(first)
	check := func(t *testing.T, fsys vfs.FS, file string, offset int64, msg string) {
		t.Helper()
		_, err := Open(fsys, dir, Options{})
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Path != filepath.Join(dir, file) || ce.Offset != offset || !strings.Contains(ce.Msg, msg) {
			t.Fatalf("got %v, want corruption in %s at %d (%q)", err, file, offset, msg)
		}
	}
	t.Run("first file cut at a record", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		writeFile(t, fsys, fileName(1), first[:pos[7].off])
		check(t, fsys, fileName(1), pos[7].off, "records are missing")
	})
	t.Run("first file cut inside a record", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		writeFile(t, fsys, fileName(1), first[:pos[9].off+3])
		check(t, fsys, fileName(1), pos[9].off, "incomplete record header")
	})
	t.Run("a file missing in the middle", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		l := openLog(t, fsys, Options{})
		appendAll(t, l, []byte("27"))
		l.Close()
		if err := fsys.Remove(filepath.Join(dir, fileName(11))); err != nil {
			t.Fatal(err)
		}
		check(t, fsys, fileName(1), int64(len(first)), "the next file (00000000000000000027.wal) starts at seq 27")
	})
	t.Run("header names another seq", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		writeFile(t, fsys, fileName(11), append(appendFileHeader(nil, 12), readFile(t, base, fileName(11))[fileHeaderSize:]...))
		check(t, fsys, fileName(11), 0, "first seq is 12")
	})
	t.Run("the first seq is not where the name says", func(t *testing.T) {
		fsys := base.Crash(0, nil)
		if err := fsys.Rename(filepath.Join(dir, fileName(11)), filepath.Join(dir, fileName(12))); err != nil {
			t.Fatal(err)
		}
		check(t, fsys, fileName(1), int64(len(first)), "records are missing")
	})
	t.Run("newer format", func(t *testing.T) {
		for _, name := range []string{fileName(1), fileName(11)} {
			fsys := base.Crash(0, nil)
			writeFile(t, fsys, name, newerVersion(readFile(t, base, name), fileHeaderSize))
			_, err := Open(fsys, dir, Options{})
			if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "format version 2: format version is newer than this build reads") {
				t.Fatalf("%s of version 2: %v", name, err)
			}
		}
	})
	reopenAll(t, base, want)
}

// TestStructureErrors: intact records that break the structure are
// damage even at the end of the last file (a tear cannot make them).
func TestStructureErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   []byte
		offset int64
		msg    string
	}{
		{"seq skipped", slices.Concat(frame(1, 0, 0, "a"), frame(3, 1, 0, "c")), 45, "seq 3, want 2"},
		{"group inside a batch", slices.Concat(frame(1, 0, 1, "a"), frame(2, 0, 0, "b")), 45, "commit group starts at seq 2 inside a batch"},
		{"group index jumps", slices.Concat(frame(1, 0, 0, "a"), frame(2, 2, 0, "b")), 45, "group index 2"},
		{"batch count jumps", slices.Concat(frame(1, 0, 2, "a"), frame(2, 1, 0, "b")), 45, "batch count 0"},
		{"a group that does not start", frame(1, 1, 0, "a"), 20, "group index 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := crashfs.New()
			if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, fsys, fileName(1), append(appendFileHeader(nil, 1), tc.data...))
			_, err := Open(fsys, dir, Options{})
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Offset != tc.offset || !strings.Contains(ce.Msg, tc.msg) {
				t.Fatalf("got %v, want corruption at %d (%q)", err, tc.offset, tc.msg)
			}
		})
	}
}

// TestSupersededTail: bytes after the seqs a non-last file must hold —
// what a failed commit left before the next file took its seqs over — are
// ignored, intact or not; a batch cut by the next file is damage.
func TestSupersededTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  []byte // the first file's records
		second []byte // the second file's (from seq 2)
		want   []rec
		err    string
	}{
		{"junk", slices.Concat(frame(1, 0, 0, "a"), []byte("junk")), frame(2, 0, 0, "B"), []rec{{1, "a"}, {2, "B"}}, ""},
		{"intact failed commit", slices.Concat(frame(1, 0, 0, "a"), frame(2, 0, 0, "b")), frame(2, 0, 0, "B"), []rec{{1, "a"}, {2, "B"}}, ""},
		{"header only next", slices.Concat(frame(1, 0, 0, "a"), frame(2, 0, 1, "b")), nil, []rec{{1, "a"}}, ""},
		{"batch cut", slices.Concat(frame(1, 0, 1, "a"), frame(2, 1, 0, "b")), nil, nil, "goes on past seq 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := crashfs.New()
			if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, fsys, fileName(1), append(appendFileHeader(nil, 1), tc.first...))
			writeFile(t, fsys, fileName(2), append(appendFileHeader(nil, 2), tc.second...))
			l, err := Open(fsys, dir, Options{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if got := replayAll(t, l, 0); !slices.Equal(got, tc.want) {
				t.Fatalf("replay %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLeftoverRepairFile: a crash during a repair leaves NAME.tmp, which
// the next Open removes.
func TestLeftoverRepairFile(t *testing.T) {
	fsys, want := sampleLog(t)
	writeFile(t, fsys, fileName(11)+".tmp", []byte("half a repair"))
	writeFile(t, fsys, "notes.txt", []byte("not the log's"))
	reopenAll(t, fsys, want)
	if _, err := fsys.Stat(filepath.Join(dir, fileName(11)+".tmp")); err == nil {
		t.Fatal("the leftover repair file is still there")
	}
	if _, err := fsys.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal("a file that is not the log's was touched")
	}
}

// TestReplayRechecks: Replay reads the files again; damage that appeared
// after Open is a *CorruptionError, not a short replay.
func TestReplayRechecks(t *testing.T) {
	fsys, _ := sampleLog(t)
	l := openLog(t, fsys, Options{})
	data := readFile(t, fsys, fileName(11))
	writeFile(t, fsys, fileName(11), flip(data, int(positions(data)[4].off)+recordHeaderSize))
	err := l.Replay(0, func(uint64, []byte) error { return nil })
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != positions(data)[4].off {
		t.Fatalf("replay of a file damaged after open: %v", err)
	}
	stop := errors.New("stop")
	if err := l.Replay(0, func(uint64, []byte) error { return stop }); err != stop {
		t.Fatalf("replay returned %v, want fn's error", err)
	}
}

// TestLongJunkTail: looking for a later commit group in megabytes of
// random bytes after a torn record stays cheap (a candidate must have a
// seq the bytes before it could have held; only then is its checksum
// computed).
func TestLongJunkTail(t *testing.T) {
	base, want := sampleLog(t)
	last := readFile(t, base, fileName(11))
	junk := make([]byte, 4<<20)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	fsys := base.Crash(0, nil)
	writeFile(t, fsys, fileName(11), append(slices.Clone(last), junk...))
	start := time.Now()
	rep, repaired := reopenAll(t, fsys, want)
	if !repaired || rep.Offset != int64(len(last)) {
		t.Fatalf("repair %+v", rep)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the repair took %v", took)
	}
}
