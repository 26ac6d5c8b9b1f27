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
