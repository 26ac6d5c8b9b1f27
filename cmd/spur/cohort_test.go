package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCohortCommands: save validates against the app and stores the
// definition; list and show print it; show evaluates it now; delete
// removes it; bad definitions and unknown names fail.
func TestCohortCommands(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "good.csv")
	os.WriteFile(csv, []byte(goodCSV), 0o644)
	if _, _, err := spur(t, "", "--data", dir, "import", "--app", "shop", "--user", "user_id", "--time", "ts", "--event", "event", csv); err != nil {
		t.Fatal(err)
	}
	out, _, err := spur(t, `{"performed":{"event":"buy"}}`, "--data", dir, "cohort", "save", "--app", "shop", "--description", "bought", "buyers", "-")
	if err != nil || !strings.Contains(out, "saved cohort buyers") {
		t.Fatalf("save: %q %v", out, err)
	}
	out, _, err = spur(t, "", "--data", dir, "cohort", "list", "--app", "shop")
	if err != nil || !strings.Contains(out, `buyers`) || !strings.Contains(out, `{"performed":{"event":"buy"}}`) {
		t.Fatalf("list: %q %v", out, err)
	}
	out, _, err = spur(t, "", "--data", dir, "cohort", "show", "--app", "shop", "buyers")
	if err != nil || !strings.Contains(out, "1 users") || !strings.Contains(out, "u1") {
		t.Fatalf("show: %q %v", out, err)
	}
	if _, _, err := spur(t, `{"performed":{"event":"buy","where":[{"property":"colour","op":"is_set"}]}}`, "--data", dir, "cohort", "save", "--app", "shop", "bad", "-"); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("invalid definition saved: %v", err)
	}
	if _, _, err := spur(t, "", "--data", dir, "cohort", "delete", "--app", "shop", "buyers"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := spur(t, "", "--data", dir, "cohort", "show", "--app", "shop", "buyers"); err == nil {
		t.Fatal("deleted cohort still shown")
	}
}
