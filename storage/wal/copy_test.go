package wal

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
)

// TestCopy: Copy takes the records (After, UpTo] of a log that stays
// open and is appended to meanwhile, into a log that opens at After+1 and
// replays exactly them, across file rotations and batches; records
// released before it reads them give fs.ErrNotExist; UpTo 0 copies to the
// end of a closed log; a range the log does not reach is corruption.
func TestCopy(t *testing.T) {
	ctx := context.Background()
	fsys := crashfs.New()
	l := openLog(t, fsys, Options{SegmentSize: 4 << 10})
	var all []rec
	for i := range 60 {
		if i%7 == 3 {
			all = append(all, appendBatch(t, l, payload(1, i, 100), payload(2, i, 300), payload(3, i, 50))...)
			continue
		}
		all = append(all, appendAll(t, l, payload(0, i, 40+i*13))...)
	}
	for _, r := range [][2]uint64{{0, 10}, {5, 70}, {33, 34}, {0, uint64(len(all))}, {40, uint64(len(all))}} {
		dst := "copy"
		n, err := Copy(ctx, fsys, dir, dst, CopyOptions{After: r[0], UpTo: r[1], SegmentSize: 2 << 10})
		if err != nil || n != r[1]-r[0] {
			t.Fatalf("copy (%d, %d]: %d records, %v", r[0], r[1], n, err)
		}
		c, err := Open(fsys, dst, Options{FirstSeq: r[0] + 1})
		if err != nil {
			t.Fatal(err)
		}
		got := replayAll(t, c, r[0])
		c.Close()
		if want := all[r[0]:r[1]]; !slices.Equal(got, want) {
			t.Fatalf("copy (%d, %d]: replayed %d records, want %d", r[0], r[1], len(got), len(want))
		}
		removeAll(t, fsys, dst)
	}
	// The log goes on while a copy is read from it: still exact.
	more := appendAll(t, l, payload(9, 1, 500), payload(9, 2, 500))
	all = append(all, more...)

	// Released records.
	if err := l.Release(50); err != nil {
		t.Fatal(err)
	}
	if _, err := Copy(ctx, fsys, dir, "copy", CopyOptions{After: 2, UpTo: 60}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("copy of released records: %v", err)
	}
	if ok, _ := fsys.Stat("copy"); ok != nil {
		t.Fatal("a failed copy left its directory")
	}
	// Beyond the end of the log.
	if _, err := Copy(ctx, fsys, dir, "copy", CopyOptions{After: 60, UpTo: uint64(len(all)) + 5}); !errors.Is(err, ErrCorruption) {
		t.Fatalf("copy past the end: %v", err)
	}
	// To the end of a closed log.
	l.Close()
	n, err := Copy(ctx, fsys, dir, "copy", CopyOptions{After: 60})
	if err != nil || n != uint64(len(all))-60 {
		t.Fatalf("copy to the end: %d, %v", n, err)
	}
	// Nothing to copy: no directory.
	if n, err := Copy(ctx, fsys, dir, "none", CopyOptions{After: 7, UpTo: 7}); n != 0 || err != nil {
		t.Fatalf("an empty range: %d %v", n, err)
	}
	if _, err := fsys.Stat("none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("an empty copy made its directory")
	}
}

// removeAll removes directory d of fsys and its files.
func removeAll(t *testing.T, fsys *crashfs.FS, d string) {
	t.Helper()
	names, err := fsys.List(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := fsys.Remove(d + "/" + n); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Remove(d); err != nil {
		t.Fatal(err)
	}
}
