package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestImportCompactsFromTwoRuns pins the post-import policy
// (storage.ImportCompactMinRuns): a second import into a one-shard app
// leaves two runs, which spur import compacts into one segment at once,
// and --no-compact leaves them.
func TestImportCompactsFromTwoRuns(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "ev.csv")
	if err := os.WriteFile(csv, []byte(goodCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "store")
	segments := func() int {
		t.Helper()
		out, _, err := spur(t, "", "--data", data, "inspect", "--app", "shop", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Segments []json.RawMessage `json:"segments"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("inspect --json: %v", err)
		}
		return len(rep.Segments)
	}
	imp := func(extra ...string) {
		t.Helper()
		args := append([]string{"--data", data, "--shards", "1", "import", "--app", "shop", "--time", "ts"}, extra...)
		if _, stderr, err := spur(t, "", append(args, csv)...); err != nil {
			t.Fatalf("import %v: %v\n%s", extra, err, stderr)
		}
	}
	imp()
	imp()
	if n := segments(); n != 1 {
		t.Fatalf("after two imports: %d segments, want 1 (compacted from two runs)", n)
	}
	imp("--no-compact")
	if n := segments(); n != 2 {
		t.Fatalf("after an import with --no-compact: %d segments, want 2", n)
	}
}
