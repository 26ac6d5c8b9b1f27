package storage

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/crashfs"
)

// retentionNow is the fixed clock of the retention tests.
var retentionNow = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// daysAgo returns the UTC µs of d days (plus s seconds) before retentionNow.
func daysAgo(d, s int) int64 {
	return retentionNow.Add(-time.Duration(d)*24*time.Hour + time.Duration(s)*time.Second).UnixMicro()
}

// retentionEvents returns n events of users u0..u9, event i at at(i).
func retentionEvents(n int, at func(i int) int64) []event.Event {
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{UserID: "u" + string(rune('0'+i%10)), Name: names[i%len(names)], Time: at(i),
			Props: []event.Prop{{Name: "n", Value: event.Int(int64(i))}}}
	}
	return evs
}

// openRetentionStore opens a store of 2 shards on fs whose clock is
// retentionNow.
func openRetentionStore(t *testing.T, fs *crashfs.FS) *Store {
	t.Helper()
	st, err := Open(Config{Dir: "store", FS: fs, Shards: 2, Writer: true, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return retentionNow }})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// retainedEvents scans app's current version from the beginning of time
// and returns its events, checking that none is before from.
func retainedEvents(t *testing.T, st *Store, app string, from int64) int {
	t.Helper()
	got := ofCurrent(t, st, app, func(v *Version) map[string][]ev {
		got, _ := collect(t, v, math.MinInt64, math.MaxInt64, names, 2)
		return got
	})
	n := 0
	for u, evs := range got {
		for _, e := range evs {
			if e.t < from {
				t.Errorf("user %s: event at %s, before the retention's %s", u, time.UnixMicro(e.t).UTC(), time.UnixMicro(from).UTC())
			}
		}
		n += len(evs)
	}
	return n
}

func importEvents(t *testing.T, st *Store, app string, evs []event.Event) *ImportReport {
	t.Helper()
	rep, err := st.Import(context.Background(), app, []Source{&sliceSource{evs: evs}}, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestRetention: with a fixed clock, setting a retention hides older
// events from scans and a user's trail at once, persists across a
// reopen, makes imports skip older events with a count, and compaction
// drops a wholly expired segment (its file gone) and rewrites one that
// straddles the limit, leaving a store that verifies; none clears it.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	fs := crashfs.New()
	st := openRetentionStore(t, fs)
	importEvents(t, st, "app", retentionEvents(100, func(i int) int64 { return daysAgo(500, i) })) // wholly expired
	importEvents(t, st, "app", retentionEvents(100, func(i int) int64 { return daysAgo(10, i) }))  // kept
	straddling := retentionEvents(100, func(i int) int64 {
		if i%3 == 0 {
			return daysAgo(450, i)
		}
		return daysAgo(5, i)
	})
	// A user of expired events only, between kept ones: compaction writes
	// no row of it.
	straddling = append(straddling, event.Event{UserID: "u3x", Name: "a", Time: daysAgo(450, 0)})
	importEvents(t, st, "app", straddling)
	if n := retainedEvents(t, st, "app", math.MinInt64); n != 301 {
		t.Fatalf("%d events before any retention, want 301", n)
	}
	if _, err := st.SetRetention(ctx, "app", time.Minute); err == nil {
		t.Error("a retention of a minute was accepted")
	}
	if _, err := st.SetRetention(ctx, "nope", 400*24*time.Hour); err == nil {
		t.Error("the retention of a missing app was set")
	}
	c, err := st.SetRetention(ctx, "app", 400*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c.Retention != 400*24*time.Hour {
		t.Fatalf("published retention %v", c.Retention)
	}
	cut := daysAgo(400, 0)
	if n := retainedEvents(t, st, "app", cut); n != 166 {
		t.Errorf("%d events seen under a 400d retention, want 166", n)
	}
	a, _ := st.App("app")
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.RetainedFrom(); got < cut || got-cut >= int64(time.Minute/time.Microsecond) {
		t.Errorf("RetainedFrom %d, want the cutoff %d rounded up to a minute", got, cut)
	}
	tr, err := v.UserEvents(ctx, "u0", 0, 100)
	v.Release()
	if err != nil {
		t.Fatal(err)
	}
	if tr.Total != 16 { // u0: 10 kept, 6 of the straddling import's
		t.Errorf("u0 has %d events under retention, want 16", tr.Total)
	}

	// The setting persists, in the catalog and the settings copy.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openRetentionStore(t, fs)
	defer func() { st.Close() }()
	a, _ = st.App("app")
	if got := a.Current().Retention; got != 400*24*time.Hour {
		t.Fatalf("retention after reopening: %v", got)
	}
	set, err := a.ms.loadSettings()
	if err != nil || set.Retention != 400*24*time.Hour {
		t.Fatalf("settings copy: %+v, %v", set, err)
	}

	// Imports skip expired events with a count.
	rep := importEvents(t, st, "app", retentionEvents(40, func(i int) int64 {
		if i < 20 {
			return daysAgo(401, i)
		}
		return daysAgo(1, i)
	}))
	if rep.Expired != 20 || rep.Applied != 20 || rep.Rejected != 0 {
		t.Errorf("import under retention: %+v", rep)
	}
	if n := retainedEvents(t, st, "app", cut); n != 186 {
		t.Errorf("%d events after the import, want 186", n)
	}

	// Compaction: the wholly expired segment is dropped, the straddling
	// one rewritten without its expired rows.
	var expiredFiles []string
	for _, ref := range a.Current().Segments {
		if ref.Kind == KindEvents && ref.MaxTime < cut {
			expiredFiles = append(expiredFiles, ref.File)
		}
	}
	if len(expiredFiles) == 0 {
		t.Fatal("no wholly expired segment before compaction")
	}
	pinned, err := a.Acquire() // a query running across the compaction
	if err != nil {
		t.Fatal(err)
	}
	crep, err := st.Compact(ctx, "app", CompactOptions{Expire: true})
	if err != nil {
		t.Fatal(err)
	}
	if names, _ := a.bucket.List(ctx); !slices.Contains(names, expiredFiles[0]) {
		t.Errorf("the expired segment %s was removed while a version pins it", expiredFiles[0])
	}
	pinned.Release()
	if crep.Expired != len(expiredFiles) || crep.RowsExpired != 135 {
		t.Errorf("compaction expired %d segments, %d rows; want %d, 135", crep.Expired, crep.RowsExpired, len(expiredFiles))
	}
	c = a.Current()
	for _, ref := range c.Segments {
		if ref.Kind == KindEvents && ref.MinTime < cut {
			t.Errorf("segment %s still holds events from %s", ref.File, time.UnixMicro(ref.MinTime).UTC())
		}
	}
	if rows := c.Rows(KindEvents); rows != 186 {
		t.Errorf("catalog holds %d events after compaction, want 186", rows)
	}
	names, err := a.bucket.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range expiredFiles {
		if slices.Contains(names, f) {
			t.Errorf("the expired segment %s is still on disk after the compaction", f)
		}
	}
	if len(names) != len(c.Segments) {
		t.Errorf("%d files on disk, %d segments in the catalog: %v", len(names), len(c.Segments), names)
	}
	vr, err := st.Verify(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(vr.Findings) > 0 {
		t.Errorf("verify after the expiry: %+v", vr.Findings)
	}
	if n := retainedEvents(t, st, "app", cut); n != 186 {
		t.Errorf("%d events after compaction, want 186", n)
	}

	// none clears it: later imports keep everything.
	if c, err = st.SetRetention(ctx, "app", 0); err != nil || c.Retention != 0 {
		t.Fatalf("clear the retention: %v, %v", c, err)
	}
	rep = importEvents(t, st, "app", retentionEvents(10, func(i int) int64 { return daysAgo(900, i) }))
	if rep.Expired != 0 || rep.Applied != 10 {
		t.Errorf("import without retention: %+v", rep)
	}
	if n := retainedEvents(t, st, "app", math.MinInt64); n != 196 {
		t.Errorf("%d events without retention, want 196", n)
	}
}

// TestRetentionLive: live ingestion rejects an event older than the
// retention with field timestamp and takes the others; the server's
// background expiry drops a flushed segment wholly past it.
func TestRetentionLive(t *testing.T) {
	ctx := context.Background()
	var clock atomic.Int64 // µs: the background loop reads it
	clock.Store(retentionNow.UnixMicro())
	opt := quietLive
	opt.Now = func() time.Time { return time.UnixMicro(clock.Load()).UTC() }
	st := openLiveOn(t, crashfs.New(), 1, opt)
	old := []event.Event{{UserID: "u1", Name: "a", Time: daysAgo(30, 0)}, {UserID: "u2", Name: "a", Time: daysAgo(29, 0)}}
	if _, err := st.Ingest(ctx, "app", old, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetRetention(ctx, "app", 400*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	evs := []event.Event{
		{UserID: "u1", Name: "a", Time: daysAgo(401, 0)},
		{UserID: "u1", Name: "b", Time: daysAgo(1, 0)},
	}
	rep, err := st.Ingest(ctx, "app", evs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Accepted != 1 || len(rep.Rejected) != 1 || rep.Rejected[0].Index != 0 || rep.Rejected[0].Field != "timestamp" {
		t.Fatalf("ingest under retention: %+v", rep)
	}
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	// 380 days later the first flush's events are 410 days old: the
	// background expiry drops their segment; the second's (381 days) stay.
	a, _ := st.App("app")
	before := len(a.Current().SegmentsOf(KindEvents))
	clock.Add((380 * 24 * time.Hour).Microseconds())
	st.expireApps(ctx) // what the background loop does every minute
	segs := a.Current().SegmentsOf(KindEvents)
	if len(segs) != before-1 || segs[0].Rows != 1 {
		t.Errorf("events segments after the expiry: %d (before %d): %+v", len(segs), before, segs)
	}
}

// TestRetentionFormat: ParseRetention and FormatRetention, and catalogs
// and settings keep the retention while version 3 files still read (as
// none).
func TestRetentionFormat(t *testing.T) {
	for in, want := range map[string]time.Duration{"none": 0, "": 0, "400d": 400 * 24 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute} {
		got, err := ParseRetention(in)
		if err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v", in, got, err, want)
		}
		if in != "" && in != "90m" && FormatRetention(got) != in {
			t.Errorf("FormatRetention(%v) = %q, want %q", got, FormatRetention(got), in)
		}
	}
	for _, in := range []string{"0d", "-3d", "1.5d", "10s", "x", "40000d"} {
		if d, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) = %v, want an error", in, d)
		}
	}

	c := &Catalog{App: "app", Generation: 1, Shards: 1, Retention: 400 * 24 * time.Hour}
	got, err := decodeCatalog("CATALOG", encodeCatalog(c))
	if err != nil || got.Retention != c.Retention {
		t.Fatalf("catalog round trip: %+v, %v", got, err)
	}
	s := c.settings()
	gs, err := decodeSettings("SETTINGS", encodeSettings(&s))
	if err != nil || !gs.equal(&s) {
		t.Fatalf("settings round trip: %+v, %v", gs, err)
	}
	// A version 3 file: none of version 4's fields (the retention's
	// byte, the empty deletions section, and the catalog's empty list of
	// segment deletion numbers).
	c.Retention = 0
	v4 := 1 + len(appendDeletions(nil, "", nil))
	for i, b := range [][]byte{encodeCatalog(c), encodeSettings(ptr(c.settings()))} {
		n := v4
		if i == 0 {
			n += len(appendDelSeqs(nil, nil))
		}
		b = b[:len(b)-4-n] // the CRC and the version 4 fields
		binary.LittleEndian.PutUint16(b[8:], 3)
		binary.LittleEndian.PutUint32(b[10:], binary.LittleEndian.Uint32(b[10:])-uint32(n))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
		if string(b[:8]) == catalogMagic {
			if got, err := decodeCatalog("CATALOG", b); err != nil || got.Retention != 0 || got.App != "app" {
				t.Errorf("version 3 catalog: %+v, %v", got, err)
			}
		} else if got, err := decodeSettings("SETTINGS", b); err != nil || got.Retention != 0 || got.App != "app" {
			t.Errorf("version 3 settings: %+v, %v", got, err)
		}
	}
}
