package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, err := spur(t, "", args...)
		if err != nil || !strings.HasPrefix(out, "spur github.com/spurdb/spur ") || !strings.Contains(out, "go1.") {
			t.Fatalf("%v: %q %v", args, out, err)
		}
	}
}

// goodStore returns a store holding goodCSV as app "shop".
func goodStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	os.WriteFile(good, []byte(goodCSV), 0o644)
	data := filepath.Join(dir, "store")
	if _, _, err := spur(t, "", "--data", data, "import", "--app", "shop", "--time", "ts", good); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestQueryOutputForms(t *testing.T) {
	data := goodStore(t)
	q := `{"kind":"funnel","range":{"from":"2021-05-01","to":"2021-05-03"},"steps":[{"event":"view"},{"event":"buy"}]}`
	out, _, err := spur(t, q, "--data", data, "query", "--app", "shop", "--output", "csv", "-")
	want := "breakdown_value,step,label,event,users,conversion,conversion_from_previous,avg_seconds,median_seconds\n,1,view,view,2,1,1,,\n,2,buy,buy,1,0.5,0.5,300,300\n"
	if err != nil || out != want {
		t.Fatalf("csv %q %v, want %q", out, err, want)
	}
	if out, _, err := spur(t, q, "--data", data, "query", "--app", "shop", "--output", "table", "-"); err != nil || !strings.Contains(out, "50.0%") {
		t.Fatalf("--output table %q %v", out, err)
	}
	for _, bad := range [][]string{{"--output", "xml"}, {"--output", "csv", "--table"}} {
		if _, _, err := spur(t, q, append([]string{"--data", data, "query", "--app", "shop"}, append(bad, "-")...)...); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}

// TestReadOnlyCommandsNeedAStore: a mistyped --data fails with an error
// naming it and creates nothing.
func TestReadOnlyCommandsNeedAStore(t *testing.T) {
	typo := filepath.Join(t.TempDir(), "spur-dta")
	for _, args := range [][]string{
		{"query", "--app", "shop", "-"},
		{"inspect", "--app", "shop"},
		{"verify", "--app", "shop"},
		{"cohort", "list", "--app", "shop"},
	} {
		_, _, err := spur(t, `{"kind":"trend"}`, append([]string{"--data", typo}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "no Spur store there") || !strings.Contains(err.Error(), typo) {
			t.Fatalf("%v: %v", args, err)
		}
		if _, err := os.Stat(typo); !os.IsNotExist(err) {
			t.Fatalf("%v created %s", args, typo)
		}
	}
}
