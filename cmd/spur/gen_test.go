package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestGenPersons: spur gen --persons writes the $identify events into an
// app and into a Parquet file (which imports to the same data), and
// --persons-resolved keeps them with no anonymous id left.
func TestGenPersons(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	file := filepath.Join(dir, "p.parquet")
	if _, _, err := spur(t, "", "gen", "--events", "1000", "--persons", "1.5", "--out", file); err == nil || !strings.Contains(err.Error(), "persons rate 1.5") {
		t.Fatalf("--persons 1.5: %v, want a persons rate error", err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, errb, err := spur(t, "", append([]string{"--data", data}, args...)...)
		if err != nil {
			t.Fatalf("spur %v: %v\n%s", args, err, errb)
		}
		return out + errb
	}
	gen := []string{"gen", "--events", "20000", "--seed", "3", "--persons", "0.2"}
	run(append(gen, "--app", "p")...)
	if out := run(append(gen, "--out", file)...); !strings.Contains(out, "wrote 20") || strings.Contains(out, "wrote 20000 ") {
		t.Fatalf("gen --out reports %q, want the rows with the $identify events", out)
	}
	run("import", "--app", "f", file)
	run(append(gen, "--persons-resolved", "--app", "r")...)
	q := `{"kind": "trend", "range": {"from": "2024-01-01", "to": "2024-04-01"}, "interval": "month",
	       "series": [{"event": "$identify", "math": "count"}, {"event": "$any", "math": "users"}]}`
	byIDs := strings.Replace(q, `"interval"`, `"persons": false, "interval"`, 1)
	res := map[string]string{}
	for _, app := range []string{"p", "f", "r"} {
		for _, qq := range []string{q, byIDs} {
			out, _, err := spur(t, qq, "--data", data, "query", "--app", app, "--table", "-")
			if err != nil {
				t.Fatal(err)
			}
			res[app+map[bool]string{true: "", false: " by ids"}[qq == q]] = out
		}
	}
	// Counted by persons, the data by distinct id answers as the resolved
	// data (docs/identity.md §3); counted by distinct ids it has more users.
	if res["p"] != res["f"] || res["p"] != res["r"] || res["p by ids"] == res["r by ids"] || res["r"] != res["r by ids"] ||
		strings.Contains(res["p"], "total                0") {
		t.Fatalf("by app, by file, resolved; by ids by app and resolved:\n%s\n%s\n%s\n%s\n%s", res["p"], res["f"], res["r"], res["p by ids"], res["r by ids"])
	}
	ids, _, err := spur(t, "", "--data", data, "export", "--app", "r", "--format", "ndjson")
	if err != nil || strings.Contains(ids, `"user_id":"anon-`) || !strings.Contains(ids, `"$anon_distinct_id":"anon-`) {
		t.Fatalf("resolved export (%v) has anonymous user ids or no $identify", err)
	}
}
