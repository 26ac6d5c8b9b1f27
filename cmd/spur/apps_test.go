package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppsDelete: `spur apps delete` refuses without --yes, then removes
// the app and its keys; another app stays.
func TestAppsDelete(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	csv := filepath.Join(dir, "persons.csv")
	if err := os.WriteFile(csv, []byte(personsCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"gone", "kept"} {
		if _, stderr, err := spur(t, "", "--data", data, "import", "--app", app, "--time", "ts", csv); err != nil {
			t.Fatalf("import: %v\n%s", err, stderr)
		}
	}
	if _, _, err := spur(t, "", "--data", data, "keys", "create", "--scope", "ingest", "--app", "gone"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := spur(t, "", "--data", data, "apps", "delete", "gone"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("without --yes: %v", err)
	}
	out, _, err := spur(t, "", "--data", data, "apps", "delete", "gone", "--yes")
	if err != nil || !strings.HasPrefix(out, "deleted app gone: ") || !strings.HasSuffix(out, ", 1 keys revoked\n") {
		t.Fatalf("delete: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(data, "apps", "gone")); !os.IsNotExist(err) {
		t.Errorf("the app's directory: %v", err)
	}
	if out, _, err := spur(t, "", "--data", data, "keys", "list"); err != nil || strings.Contains(out, "gone") {
		t.Errorf("keys after the delete: %q %v", out, err)
	}
	if _, _, err := spur(t, "", "--data", data, "apps", "delete", "gone", "--yes"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("second delete: %v", err)
	}
	if _, _, err := spur(t, "", "--data", data, "persons", "show", "--app", "kept", "d1"); err != nil {
		t.Errorf("the other app: %v", err)
	}
}

// TestAppsSetRetention: `spur apps set --retention` sets and clears an
// app's retention; imports then skip older events with a count, and
// spur compact drops the expired segments.
func TestAppsSetRetention(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	csv := filepath.Join(dir, "persons.csv")
	if err := os.WriteFile(csv, []byte(personsCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := spur(t, "", "--data", data, "import", "--app", "old", "--time", "ts", csv); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	if _, _, err := spur(t, "", "--data", data, "apps", "set", "old"); err == nil || !strings.Contains(err.Error(), "--retention") {
		t.Errorf("without a setting: %v", err)
	}
	if _, _, err := spur(t, "", "--data", data, "apps", "set", "old", "--retention", "soon"); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Errorf("a bad retention: %v", err)
	}
	out, _, err := spur(t, "", "--data", data, "apps", "set", "old", "--retention", "400d")
	if err != nil || out != "app old: retention 400d\n" {
		t.Fatalf("set: %q %v", out, err)
	}
	// personsCSV's events are of 2021, past 400 days: the import skips
	// them, and its compaction drops the first import's segments.
	_, stderr, err := spur(t, "", "--data", data, "import", "--app", "old", "--time", "ts", csv)
	if err != nil || !strings.Contains(stderr, "6 events older than the app's retention skipped") ||
		!strings.Contains(stderr, "6 events past the retention dropped") {
		t.Fatalf("import under retention: %q %v", stderr, err)
	}
	if out, _, err := spur(t, "", "--data", data, "verify", "--app", "old"); err != nil {
		t.Errorf("verify: %q %v", out, err)
	}
	if out, _, err := spur(t, "", "--data", data, "apps", "set", "old", "--retention", "none"); err != nil || out != "app old: retention none\n" {
		t.Errorf("clear: %q %v", out, err)
	}
}
