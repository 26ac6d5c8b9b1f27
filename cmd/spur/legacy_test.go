package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestStoreFromBeforeCatalogs opens testdata/store-24712d6: an app written
// by the binary of commit 24712d6 (before catalogs: a manifest.json, and
// segment names of both forms of then, "e-SHARD-SEQ.seg" from imports and
// "e-SHARD-SEQ-cGEN-PART.seg" from a compaction). It was made with
//
//	spur gen --events 3000 --app legacy --shards 2
//	spur gen --events 3000 --seed 2 --app legacy
//	spur compact --app legacy
//	spur gen --events 500 --seed 3 --app legacy
//
// A query answers what that binary answered, verify finds nothing, and the
// first write (a forced compaction) replaces manifest.json with a catalog
// and its settings and changes no answer. Found by an A/B of that binary:
// the compaction names made every compacted store of that release
// unreadable ("file name … disagrees with kind events shard 0"), verify
// called the settings a store of then never had missing, and the first
// write did not write them.
func TestStoreFromBeforeCatalogs(t *testing.T) {
	data := t.TempDir()
	if err := os.CopyFS(data, os.DirFS("testdata/store-24712d6")); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(data, "apps", "legacy")
	q := filepath.Join(data, "q.json")
	os.WriteFile(q, []byte(`{"kind": "trend", "range": {"from": "2024-01-01", "to": "2024-04-01"},
		"series": [{"event": "app_open"}, {"event": "app_open", "math": "users"}], "interval": "month"}`), 0o644)
	check := func(when string) {
		t.Helper()
		out, stderr, err := spur(t, "", "--data", data, "query", "--app", "legacy", q)
		if err != nil {
			t.Fatalf("%s: query: %v\n%s", when, err, stderr)
		}
		var res struct {
			Series []struct {
				Buckets []struct{ Value float64 }
			}
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: %v\n%s", when, err, out)
		}
		// The answers of the 24712d6 binary on this store.
		want := [][]float64{{260, 346, 282}, {56, 66, 59}}
		for s, w := range want {
			for b, v := range w {
				if got := res.Series[s].Buckets[b].Value; got != v {
					t.Errorf("%s: series %d bucket %d = %v, want %v", when, s, b, got, v)
				}
			}
		}
	}
	check("legacy store")
	if _, stderr, err := spur(t, "", "--data", data, "verify", "--app", "legacy"); err != nil {
		t.Fatalf("verify: %v\n%s", err, stderr)
	}
	if _, stderr, err := spur(t, "", "--data", data, "compact", "--app", "legacy", "--force"); err != nil {
		t.Fatalf("compact: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(app, "manifest.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("manifest.json after the first write: %v, want gone", err)
	}
	for _, f := range []string{"CATALOG", "SETTINGS"} {
		if _, err := os.Stat(filepath.Join(app, f)); err != nil {
			t.Errorf("no %s after the first write: %v", f, err)
		}
	}
	check("after the first write")
	if _, stderr, err := spur(t, "", "--data", data, "verify", "--app", "legacy"); err != nil {
		t.Fatalf("verify after the first write: %v\n%s", err, stderr)
	}
}
