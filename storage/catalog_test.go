package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
)

// buildApp imports events and user writes into app "app" of a store in a
// fresh directory, compacts part of it, and returns the directory and
// the app's trails.
func buildApp(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	st, err := Open(Config{Dir: dir, Shards: 4, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := rand.New(rand.NewPCG(11, 12))
	var ids idPool
	ctx := context.Background()
	for i := range 3 {
		evs := compactEvents(r, 300, 40, 1_600_000_000_000_000+int64(i)*60_000_000, &ids)
		if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{FlushRows: 120}); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if _, err := st.Compact(ctx, "app", CompactOptions{Force: true, MaxSegmentRows: 100}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: compactWrites(r, 50, 40, 1_600_000_000_000_000)}}, ImportOptions{Kind: KindUsers}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	return dir, recordTrails(t, snapOf(t, a))
}

// TestCatalogByteFlips flips every byte of the catalog and of the
// settings file, one at a time, over 1,000 flips (docs/storage.md §2; issue
// #15): a flipped catalog byte never gives an answer — the store refuses
// to open the app, or a query fails, with corruption naming the catalog,
// and verify reports it; a flipped settings byte leaves the answers (the
// catalog holds the same settings) and verify reports it. Writes refuse
// to run over a damaged catalog.
func TestCatalogByteFlips(t *testing.T) {
	dir, want := buildApp(t)
	appDir := filepath.Join(dir, "apps", "app")
	flips := 0
	for _, file := range []string{catalogName, settingsName} {
		path := filepath.Join(appDir, file)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, uint64(len(file))))
		n := 500
		for k := range n {
			off := k % len(orig) // every byte, then random bits again
			b := bytes.Clone(orig)
			b[off] ^= byte(1 << r.IntN(8))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			flips++
			st, err := Open(Config{Dir: dir, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			var answer map[string]string
			a, err := st.App("app")
			if err == nil {
				var v *Version
				if v, err = a.Acquire(); err == nil {
					answer, err = scanTrails(v)
					v.Release()
				}
			}
			switch {
			case file == catalogName && (err == nil || !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), catalogName)):
				t.Fatalf("catalog byte %d flipped: want a corruption error naming the catalog, got %v (answered: %v)", off, err, answer != nil)
			case file == settingsName && (err != nil || !maps.Equal(answer, want)):
				t.Fatalf("settings byte %d flipped: the answer changed (%v)", off, err)
			}
			rep, err := st.Verify(context.Background(), "app")
			if err != nil {
				t.Fatal(err)
			}
			kind := "catalog"
			if file == settingsName {
				kind = "settings"
			}
			if len(rep.Findings) == 0 || rep.Findings[0].Kind != kind {
				t.Fatalf("%s byte %d flipped: verify found %v, want a %s finding", file, off, rep.Findings, kind)
			}
			if file == catalogName {
				_, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: []event.Event{{UserID: "x", Name: "a", Time: 1}}}}, ImportOptions{})
				if err == nil || !strings.Contains(err.Error(), "spur recover") {
					t.Fatalf("catalog byte %d flipped: an import ran: %v", off, err)
				}
			}
			st.Close()
		}
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d byte flips, 0 silently wrong answers", flips)
}

// TestMissingCatalogRefusesWritesAndRecovers deletes the catalog
// (docs/storage.md §3): an import is refused and deletes nothing; recovery
// rebuilds a catalog that answers exactly as before, after which writes
// work again. Then a damaged segment and a lost settings file: recovery
// sets the damaged file aside (never deletes) and reports what it kept.
func TestMissingCatalogRefusesWritesAndRecovers(t *testing.T) {
	dir, want := buildApp(t)
	appDir := filepath.Join(dir, "apps", "app")
	files := func() []string {
		ents, _ := os.ReadDir(filepath.Join(appDir, segDir))
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	before := files()
	if err := os.Remove(filepath.Join(appDir, catalogName)); err != nil {
		t.Fatal(err)
	}
	st, err := Open(Config{Dir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.Import(context.Background(), "app", []Source{&sliceSource{evs: []event.Event{{UserID: "x", Name: "a", Time: 1}}}}, ImportOptions{})
	if !errors.Is(err, ErrNoCatalog) || !strings.Contains(err.Error(), "spur recover --app app") {
		t.Fatalf("import without a catalog: %v", err)
	}
	if _, err := st.Compact(context.Background(), "app", CompactOptions{Force: true}); err == nil {
		t.Fatal("a compaction ran without a catalog")
	}
	if got := files(); !slices.Equal(got, before) {
		t.Fatalf("segment files changed: %v, want %v", got, before)
	}
	rep, err := st.Recover(context.Background(), "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Kept) != len(before) || len(rep.SetAside) != 0 {
		t.Fatalf("recover kept %d of %d files, set aside %v", len(rep.Kept), len(before), rep.SetAside)
	}
	st.Close()
	st2, err := Open(Config{Dir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	a, err := st2.App("app")
	if err != nil {
		t.Fatal(err)
	}
	sameTrails(t, "after recovery", recordTrails(t, snapOf(t, a)), want)
	if vr, err := st2.Verify(context.Background(), "app"); err != nil || len(vr.Findings) != 0 {
		t.Fatalf("verify after recovery: %v %v", vr.Findings, err)
	}

	// A damaged segment and no settings: the segment is set aside, the
	// rest kept, with a warning about the settings.
	victim := before[len(before)/2]
	path := filepath.Join(appDir, segDir, victim)
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0x10
	os.WriteFile(path, b, 0o644)
	os.Remove(filepath.Join(appDir, settingsName))
	os.Remove(filepath.Join(appDir, catalogName))
	rep, err = st2.Recover(context.Background(), "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.SetAside) != 1 || !strings.HasSuffix(rep.SetAside[0].File, victim) || len(rep.Kept) != len(before)-1 || len(rep.Warnings) == 0 {
		t.Fatalf("recover with a damaged segment: kept %d, set aside %v, warnings %v", len(rep.Kept), rep.SetAside, rep.Warnings)
	}
	if _, err := os.Stat(rep.SetAside[0].Moved); err != nil {
		t.Fatalf("the damaged file is not where the report says: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the damaged file is still in the segment directory: %v", err)
	}

	// A segment whose name disagrees with its footer's identity (renamed
	// to another arrival range): set aside, not trusted.
	kept := rep.Kept[0]
	id, _ := identityFromName(kept)
	renamed := segmentName(id.ref.Kind, id.ref.Shard, id.ref.SeqMin+1000, id.ref.SeqMax+1000, id.ref.Generation, id.part)
	if err := os.Rename(filepath.Join(appDir, segDir, kept), filepath.Join(appDir, segDir, renamed)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(appDir, catalogName))
	rep, err = st2.Recover(context.Background(), "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.SetAside) != 1 || !strings.HasSuffix(rep.SetAside[0].File, renamed) || !strings.Contains(rep.SetAside[0].Reason, "its footer says") {
		t.Fatalf("recover with a renamed segment: set aside %v", rep.SetAside)
	}
}

// TestCatalogNewerVersion: a well-formed catalog of a newer format
// version is reported as such, not as corruption, and not recovered.
func TestCatalogNewerVersion(t *testing.T) {
	dir, _ := buildApp(t)
	path := filepath.Join(dir, "apps", "app", catalogName)
	b, _ := os.ReadFile(path)
	b[len(catalogMagic)] = CatalogFormatVersion + 1
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	os.WriteFile(path, b, 0o644)
	st, err := Open(Config{Dir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.App("app")
	if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), fmt.Sprintf("format version %d: format version is newer than this build reads", CatalogFormatVersion+1)) {
		t.Fatalf("newer catalog: %v", err)
	}
	if _, err := st.Recover(context.Background(), "app"); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("recover of a newer catalog: %v", err)
	}
}

// FuzzDecodeCatalog: no input makes the catalog or settings decoder
// panic or allocate beyond the input's size; what decodes re-encodes to a
// catalog that decodes equal.
func FuzzDecodeCatalog(f *testing.F) {
	c := &Catalog{App: "app", Generation: 3, Shards: 4, TZ: "Europe/Berlin", NextSeq: 9, LogSeq: 2,
		EventProps: []event.PropType{{Name: "price", Type: event.TypeFloat}, {Name: "$browser", Type: event.TypeString}},
		UserProps:  []event.PropType{{Name: "tier", Type: event.TypeString}},
		Segments: []SegmentRef{
			{File: segmentName(KindEvents, 1, 0, 4, 2, 0), Kind: KindEvents, Shard: 1, SeqMin: 0, SeqMax: 4, Generation: 2, Rows: 10, Users: 3, MinTime: 5, MaxTime: 9, Bytes: 100, FirstHash: 1, LastHash: 7},
			{File: segmentName(KindUsers, 3, 8, 8, 3, 0), Kind: KindUsers, Shard: 3, SeqMin: 8, SeqMax: 8, Generation: 3, Rows: 2, Users: 2, MinTime: 1, MaxTime: 1, Bytes: 50, DelSeq: 2},
		},
		DelSalt: strings.Repeat("ab", 16),
		Deletions: []Deletion{
			{Seq: 1, ID: "del-0123456789abcdef", Kind: DeletePerson, RequestedAt: 5, DoneAt: 6, Suppress: true, Hash: strings.Repeat("c", 64), Suppressed: []string{strings.Repeat("d", 64)}},
			{Seq: 2, ID: "del-1123456789abcdef", Kind: DeletePerson, RequestedAt: 7, IDs: []string{"u9", "anon-1", "anon-2"}},
		}}
	if c2, err := decodeCatalog("seed", encodeCatalog(c)); err != nil || !reflect.DeepEqual(c, c2) {
		f.Fatalf("the seed catalog does not round-trip: %v\n%+v\n%+v", err, c, c2)
	}
	f.Add(encodeCatalog(c))
	s := c.settings()
	f.Add(encodeSettings(&s))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := decodeCatalog("fuzz", b); err == nil {
			c2, err := decodeCatalog("fuzz", encodeCatalog(c))
			if err != nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("re-encoded catalog: %v\n%+v\n%+v", err, c, c2)
			}
		} else if !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("error is neither corruption nor a newer version: %v", err)
		}
		if s, err := decodeSettings("fuzz", b); err == nil {
			if s2, err := decodeSettings("fuzz", encodeSettings(s)); err != nil || !reflect.DeepEqual(s, s2) {
				t.Fatalf("re-encoded settings: %v", err)
			}
		}
	})
}

// TestStaleSettingsRewritten: a SETTINGS file left holding other
// settings than the catalog's (a crash between a publication's two
// writes) is a verify finding until the next publication, which rewrites
// it even though the settings did not change.
func TestStaleSettingsRewritten(t *testing.T) {
	st := openTest(t, 2)
	ctx := context.Background()
	evs := []event.Event{{UserID: "u", Name: "a", Time: 1_600_000_000_000_000}}
	if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	s := a.Current().settings()
	s.TZ = "Europe/Berlin" // what an unpublished write left
	dir := filepath.Join(st.Dir(), "apps", "app")
	if err := os.WriteFile(filepath.Join(dir, "SETTINGS"), encodeSettings(&s), 0o644); err != nil {
		t.Fatal(err)
	}
	if vr, err := st.Verify(ctx, "app"); err != nil || len(vr.Findings) == 0 {
		t.Fatalf("verify of a stale SETTINGS: %+v %v", vr, err)
	}
	if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if vr, err := st.Verify(ctx, "app"); err != nil || len(vr.Findings) > 0 {
		t.Fatalf("verify after the next publication: %+v %v", vr, err)
	}
}
