package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spurdb/spur/storage/segment"
)

// metaApp returns a store with an imported app "app".
func metaApp(t *testing.T) (*Store, *App) {
	t.Helper()
	st := openTest(t, 1)
	if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: randomEvents(rand.New(rand.NewPCG(1, 1)), 10, 2, 1e15)}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := st.App("app")
	if err != nil {
		t.Fatal(err)
	}
	return st, a
}

func TestCollectionLifecycle(t *testing.T) {
	_, a := metaApp(t)
	c, err := a.Collection("insights")
	if err != nil {
		t.Fatal(err)
	}
	if docs, err := c.List(); err != nil || len(docs) != 0 {
		t.Fatalf("empty collection: %v %v", docs, err)
	}
	body := `{"name": "Weekly <signups>", "query": {"kind": "trend", "range": {"last": "30d"}, "z": 1, "a": 2}}`
	d, err := c.Create("", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if !ValidDocID(d.ID) || d.Version != 1 || d.Created != d.Updated {
		t.Fatalf("created %+v", d)
	}
	// Stored as given: compact, key order and characters kept.
	if want := `{"name":"Weekly <signups>","query":{"kind":"trend","range":{"last":"30d"},"z":1,"a":2}}`; string(d.Body) != want {
		t.Fatalf("body %s, want %s", d.Body, want)
	}
	got, err := c.Get(d.ID)
	if err != nil || string(got.Body) != string(d.Body) || got.Version != 1 {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := c.Create(d.ID, []byte(`{}`)); !errors.Is(err, ErrConflict) {
		t.Fatalf("create of a taken id: %v", err)
	}
	u, err := c.Update(d.ID, 1, []byte(`{"name":"v2"}`))
	if err != nil || u.Version != 2 || u.Created != d.Created {
		t.Fatalf("Update = %+v, %v", u, err)
	}
	if _, err := c.Update(d.ID, 1, []byte(`{"name":"stale"}`)); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := c.Update("nope", 1, []byte(`{}`)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of a missing doc: %v", err)
	}
	if _, err := c.Create("Bad Id", []byte(`{}`)); err == nil {
		t.Fatal("bad id accepted")
	}
	if _, err := c.Create("x", []byte(`{not json`)); err == nil {
		t.Fatal("bad body accepted")
	}
	if _, err := c.Put("named", []byte(`[1,2]`)); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Put("named", []byte(`[3]`)); err != nil || p.Version != 2 {
		t.Fatalf("Put again = %+v, %v", p, err)
	}
	docs, err := c.List()
	if err != nil || len(docs) != 2 || docs[0].ID > docs[1].ID {
		t.Fatalf("List = %+v, %v", docs, err)
	}
	if err := c.Delete(d.ID, 1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := c.Delete(d.ID, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(d.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after delete: %v", err)
	}
	if err := c.Delete(d.ID, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// A temporary file left by a crash before the rename is ignored.
	if err := os.WriteFile(filepath.Join(collDir(c), "half.doc.tmp"), []byte("spur-doc 1 99"), 0o644); err != nil {
		t.Fatal(err)
	}
	if docs, err := c.List(); err != nil || len(docs) != 1 {
		t.Fatalf("List with a temporary file: %+v, %v", docs, err)
	}
	if _, err := a.Collection("Bad/Name"); err == nil {
		t.Fatal("bad collection name accepted")
	}
	if ents, _ := os.ReadDir(collDir(c)); len(ents) != 3 { // named.doc, META.LOCK, half.doc.tmp
		t.Fatalf("files: %v", ents)
	}
}

// TestDocCorruption: every flipped bit of a document file is reported as
// corruption (or, for the format version, as a newer version), never read
// as a document; so are unknown and missing fields with a valid checksum.
func TestDocCorruption(t *testing.T) {
	_, a := metaApp(t)
	c, _ := a.Collection("dashboards")
	d, err := c.Create("board", []byte(`{"name":"Board","tiles":[{"insight":"abc"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(collDir(c), "board.doc")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		for bit := range 8 {
			b := []byte(string(good))
			b[i] ^= 1 << bit
			_, err := decodeDoc(b, path, "board")
			if err == nil {
				t.Fatalf("byte %d bit %d flipped: decoded", i, bit)
			}
			if !errors.Is(err, segment.ErrCorruption) && !strings.Contains(err.Error(), "unsupported format version") {
				t.Fatalf("byte %d bit %d flipped: %v is not corruption", i, bit, err)
			}
		}
	}
	if _, err := decodeDoc(good[:len(good)-1], path, "board"); !errors.Is(err, segment.ErrCorruption) {
		t.Fatalf("truncated: %v", err)
	}
	for _, js := range []string{
		`{"id":"board","version":1,"created":"2024-01-01T00:00:00Z","updated":"2024-01-01T00:00:00Z","body":{},"extra":1}`,
		`{"id":"board","version":1,"created":"2024-01-01T00:00:00Z","body":{}}`,
		`{"id":"other","version":1,"created":"2024-01-01T00:00:00Z","updated":"2024-01-01T00:00:00Z","body":{}}`,
		`{"id":"board","version":0,"created":"2024-01-01T00:00:00Z","updated":"2024-01-01T00:00:00Z","body":{}}`,
		`{"id":"board","version":1,"created":"yesterday","updated":"2024-01-01T00:00:00Z","body":{}}`,
		`{"id":"board","version":1,"created":"2024-01-01T00:00:00Z","updated":"2024-01-01T00:00:00Z","body":{}} {}`,
	} {
		b := encodeRaw(js)
		if _, err := decodeDoc(b, path, "board"); !errors.Is(err, segment.ErrCorruption) {
			t.Fatalf("%s: %v", js, err)
		}
	}
	if err := os.WriteFile(path, encodeRaw(`{}`)[:5], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("board"); !errors.Is(err, segment.ErrCorruption) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Get of a damaged file: %v", err)
	}
	if _, err := c.Get("board"); !errors.As(err, new(*CorruptionError)) {
		t.Fatalf("Get of a damaged file: %v is not a *CorruptionError", err)
	}
	if _, err := c.List(); !errors.Is(err, segment.ErrCorruption) {
		t.Fatalf("List with a damaged file: %v", err)
	}
	newer := strings.Replace(string(encodeDoc(&d)), "spur-doc 1 ", "spur-doc 2 ", 1)
	if _, err := decodeDoc([]byte(newer), path, "board"); err == nil || errors.Is(err, segment.ErrCorruption) || !strings.Contains(err.Error(), "unsupported format version 2") {
		t.Fatalf("newer format: %v", err)
	}
}

// encodeRaw frames js as a document file with a correct header.
func encodeRaw(js string) []byte {
	return []byte(fmt.Sprintf("spur-doc 1 %d %08x\n%s", len(js), crc32.Checksum([]byte(js), docCRC), js))
}

// TestCollectionConcurrentUpdates: writers in several goroutines and two
// Stores on one directory (two processes' views) increment a counter in
// one document with read-modify-write and retry on conflict: no update is
// lost, and the version counts them.
func TestCollectionConcurrentUpdates(t *testing.T) {
	st, a := metaApp(t)
	st2, err := Open(Config{Dir: st.cfg.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	a2, err := st2.App("app")
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := a.Collection("insights")
	c2, _ := a2.Collection("insights")
	if _, err := c1.Create("n", []byte(`{"n":0}`)); err != nil {
		t.Fatal(err)
	}
	const writers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		c := c1
		if w%2 == 1 {
			c = c2
		}
		wg.Go(func() {
			for range each {
				for {
					d, err := c.Get("n")
					if err != nil {
						errs <- err
						return
					}
					var v struct{ N int }
					json.Unmarshal(d.Body, &v)
					_, err = c.Update("n", d.Version, fmt.Appendf(nil, `{"n":%d}`, v.N+1))
					if err == nil {
						break
					}
					if !errors.Is(err, ErrConflict) {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d, err := c2.Get("n")
	if err != nil || string(d.Body) != fmt.Sprintf(`{"n":%d}`, writers*each) || d.Version != writers*each+1 {
		t.Fatalf("after %d updates: %+v %v", writers*each, d, err)
	}
}

// TestLegacyCohortsMigrate: a cohorts.json written before the collection
// is read as it is, and the first write moves it into documents and sets
// it aside.
func TestLegacyCohortsMigrate(t *testing.T) {
	_, a := metaApp(t)
	legacy := `{"format_version": 1, "cohorts": [
	  {"name": "buyers", "definition": {"performed": {"event": "b"}}, "description": "bought", "saved_at": "2024-02-01T10:00:00Z"},
	  {"name": "lurkers", "definition": {"not_performed": {"event": "a"}}, "saved_at": "2024-02-02T10:00:00Z"}]}`
	if err := os.WriteFile(filepath.Join(a.dir, legacyCohorts), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(names ...string) {
		t.Helper()
		cs, err := a.Cohorts()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range cs {
			got = append(got, c.Name)
		}
		if strings.Join(got, ",") != strings.Join(names, ",") {
			t.Fatalf("cohorts %v, want %v", got, names)
		}
	}
	check("buyers", "lurkers")
	if c, err := a.Cohort("buyers"); err != nil || string(c.Definition) != `{"performed":{"event":"b"}}` || c.Description != "bought" || c.Version != 0 {
		t.Fatalf("legacy Cohort(buyers) = %+v, %v", c, err)
	}
	if err := a.SaveCohort(SavedCohort{Name: "new", Definition: []byte(`{"performed":{"event":"c"}}`), SavedAt: "2024-03-01T00:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.dir, legacyCohorts)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cohorts.json still in place: %v", err)
	}
	if _, err := os.Stat(filepath.Join(a.dir, legacyCohortsDone)); err != nil {
		t.Fatalf("cohorts.json not set aside: %v", err)
	}
	check("buyers", "lurkers", "new")
	c, err := a.Cohort("lurkers")
	if err != nil || c.Version != 1 || c.SavedAt != "2024-02-02T10:00:00Z" {
		t.Fatalf("migrated Cohort(lurkers) = %+v, %v", c, err)
	}
	if err := a.DeleteCohort("buyers"); err != nil {
		t.Fatal(err)
	}
	check("lurkers", "new")
	if err := a.DeleteCohort("buyers"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// FuzzDecodeDoc: the document decoder never panics, and whatever it
// accepts encodes to a file that decodes to the same document.
func FuzzDecodeDoc(f *testing.F) {
	f.Add(encodeRaw(`{"id":"x","version":3,"created":"2024-01-01T00:00:00.000Z","updated":"2024-01-02T00:00:00.000Z","body":{"a":[1,2]}}`))
	f.Add(encodeRaw(`{"id":"x","version":1}`))
	f.Add([]byte("spur-doc 1 2 00000000\n{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeDoc(b, "x.doc", "x")
		if err != nil {
			return
		}
		d2, err := decodeDoc(encodeDoc(&d), "x.doc", "x")
		if err != nil || d2.Version != d.Version || d2.Created != d.Created || d2.Updated != d.Updated {
			t.Fatalf("accepted %q as %+v; its encoding decodes as %+v, %v", b, d, d2, err)
		}
	})
}

// TestStoreCollection: a store-level collection needs no app, lives in
// DIR/meta/NAME, is checksummed like an app's, and its writes are refused
// while another process holds the store's writer role.
func TestStoreCollection(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(Config{Dir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := st.Collection("keys")
	if err != nil {
		t.Fatal(err)
	}
	if docs, err := c.List(); err != nil || len(docs) != 0 {
		t.Fatalf("empty: %v %v", docs, err)
	}
	d, err := c.Create("k1", []byte(`{"scope":"admin"}`))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "meta", "keys", "k1.doc")
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(b), "spur-doc 1 ") {
		t.Fatalf("file %s: %q %v", path, b, err)
	}
	if got, err := c.Get("k1"); err != nil || string(got.Body) != string(d.Body) {
		t.Fatalf("Get: %+v %v", got, err)
	}
	if _, err := c.Get("k2"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "the store has no keys") {
		t.Fatalf("missing: %v", err)
	}
	if _, err := st.Collection("Keys"); err == nil {
		t.Fatal("invalid collection name accepted")
	}

	// A flipped byte is corruption naming the file.
	b[len(b)-3] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("k1"); !errors.Is(err, segment.ErrCorruption) || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt: %v", err)
	}
	if err := c.Delete("k1", 0); !errors.Is(err, segment.ErrCorruption) {
		t.Fatalf("delete of a corrupt document: %v", err)
	}
	os.Remove(path)

	// Another process (a second Store here) holding the writer role
	// refuses this one's writes, naming it.
	srv, err := Open(Config{Dir: dir, Writer: true, Holder: "spur serve", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("k3", []byte(`{}`)); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "spur serve (pid") {
		t.Fatalf("write while served: %v", err)
	}
	sc, err := srv.Collection("keys")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Create("k3", []byte(`{}`)); err != nil {
		t.Fatalf("the writer's own write: %v", err)
	}
	srv.Close()
	if docs, err := c.List(); err != nil || len(docs) != 1 || docs[0].ID != "k3" {
		t.Fatalf("list after the writer: %+v %v", docs, err)
	}
}

// collDir is the directory of a file store's collection c.
func collDir(c *Collection) string { return filepath.Dir(c.path("x")) }
