package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerify: a clean store verifies; a flipped byte in a segment makes
// verify name the file and fail.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	os.WriteFile(good, []byte(goodCSV), 0o644)
	data := filepath.Join(dir, "store")
	if _, stderr, err := spur(t, "", "--data", data, "import", "--app", "shop", "--time", "ts", good); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	out, _, err := spur(t, "", "--data", data, "verify")
	if err != nil || !strings.Contains(out, " segment files, 3 rows") || !strings.Contains(out, " 0 findings") {
		t.Fatalf("clean store: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(data, "apps", "shop", "seg", "e-*.seg"))
	if len(files) == 0 {
		t.Fatal("no segments")
	}
	b, _ := os.ReadFile(files[0])
	b[len(b)/3] ^= 4
	os.WriteFile(files[0], b, 0o644)
	out, _, err = spur(t, "", "--data", data, "verify", "--app", "shop")
	if err == nil || !strings.Contains(out, "corruption: ") || !strings.Contains(out, filepath.Base(files[0])) {
		t.Fatalf("corrupt store: %v\n%s", err, out)
	}
}
