package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportCommand: spur export writes files spur import reads back with
// no column flags into an app that exports the same bytes; --url streams
// the same bytes from a running spur serve; --persons with --users is
// refused.
func TestExportCommand(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	csv := filepath.Join(dir, "in.csv")
	os.WriteFile(csv, []byte("user_id,ts,event,price,ok\nu1,2021-05-01T10:00:00.000001Z,view,1.5,true\nu2,2021-05-02T10:00:00Z,buy,2,false\nu1,2021-05-03T10:00:00Z,buy,,\n"), 0o644)
	if _, stderr, err := spur(t, "", "--data", data, "import", "--app", "a", "--time", "ts", csv); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	exp := func(app, format string, extra ...string) []byte {
		t.Helper()
		out := filepath.Join(dir, app+"-"+format+strings.Join(extra, ""))
		args := append([]string{"--data", data, "export", "--app", app, "--format", format, "--out", out}, extra...)
		if _, stderr, err := spur(t, "", args...); err != nil || !strings.Contains(stderr, "exported ") {
			t.Fatalf("export %v: %v\n%s", args, err, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, f := range []string{"ndjson", "parquet"} {
		want := exp("a", f)
		file := filepath.Join(dir, "a."+f)
		os.WriteFile(file, want, 0o644)
		if _, stderr, err := spur(t, "", "--data", data, "import", "--app", "b"+f, file); err != nil {
			t.Fatalf("import %s: %v\n%s", f, err, stderr)
		}
		if got := exp("b"+f, f); string(got) != string(want) {
			t.Fatalf("%s: the re-imported app exports\n%s\nwant\n%s", f, got, want)
		}
	}
	stdout, _, err := spur(t, "", "--data", data, "export", "--app", "a", "--format", "ndjson")
	if err != nil || stdout != string(exp("a", "ndjson")) || !strings.Contains(stdout, `"timestamp":"2021-05-01T10:00:00.000001Z"`) {
		t.Fatalf("export to stdout: %v\n%s", err, stdout)
	}
	if _, _, err := spur(t, "", "--data", data, "export", "--app", "a", "--persons", "--users"); err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Fatalf("--persons --users: %v", err)
	}

	url, key, stop := startServe(t, data)
	defer stop()
	for _, f := range []string{"ndjson", "parquet"} {
		out := filepath.Join(dir, "remote."+f)
		if _, stderr, err := spur(t, "", "export", "--url", url, "--key", key, "--app", "a", "--format", f, "--out", out); err != nil {
			t.Fatalf("export --url: %v\n%s", err, stderr)
		}
		got, _ := os.ReadFile(out)
		if string(got) != string(exp("a", f)) {
			t.Fatalf("%s through --url differs from the local export", f)
		}
	}
	if _, _, err := spur(t, "", "export", "--url", url, "--key", key, "--app", "nosuch", "--format", "ndjson"); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("unknown app through --url: %v", err)
	}
}

// TestExportFailureLeavesNoFile: an export that fails leaves no file, and
// an existing --out as it was.
func TestExportFailureLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.ndjson")
	_, _, err := spur(t, "", "export", "--url", "http://127.0.0.1:1", "--app", "a", "--format", "ndjson", "--out", out)
	if _, serr := os.Stat(out); err == nil || serr == nil {
		t.Fatalf("export to a closed port: %v; the file: %v", err, serr)
	}
	if err := os.WriteFile(out, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = spur(t, "", "export", "--url", "http://127.0.0.1:1", "--app", "a", "--format", "ndjson", "--out", out)
	if b, rerr := os.ReadFile(out); err == nil || string(b) != "kept" {
		t.Fatalf("failed export over an existing file: %v; the file: %q %v", err, b, rerr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left in the directory: %v", ents)
	}
}

// TestExportImportPersons: `spur gen --persons` → spur export of the
// events, users and persons (Parquet) → spur import --persons into a new
// app answers funnel4, retention_install_daily and distinct_users as the
// original, and spur persons show answers the same for an account id, an
// anonymous id and an id of no person; the new app exports the same
// persons file, also through spur serve (--url). Import --persons is
// refused with --anonymous-id and --url.
func TestExportImportPersons(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := spur(t, "", append([]string{"--data", data}, args...)...)
		if err != nil {
			t.Fatalf("spur %v: %v\n%s", args, err, stderr)
		}
		return stdout
	}
	run("gen", "--events", "30000", "--seed", "3", "--persons", "0.2", "--app", "a")
	file := func(name string) string { return filepath.Join(dir, name) }
	run("export", "--app", "a", "--format", "parquet", "--out", file("events.parquet"))
	run("export", "--app", "a", "--format", "parquet", "--users", "--out", file("users.parquet"))
	run("export", "--app", "a", "--format", "parquet", "--persons", "--out", file("persons.parquet"))
	run("import", "--app", "b", "--persons", file("persons.parquet"), file("events.parquet"))
	run("import", "--app", "b", "--users", file("users.parquet"))
	for _, q := range []string{"funnel4", "retention_install_daily", "distinct_users"} {
		path := filepath.Join("..", "..", "bench", "queries", q+".json")
		want, got := run("query", "--app", "a", "--output", "csv", path), run("query", "--app", "b", "--output", "csv", path)
		if want != got || len(want) < 20 {
			t.Errorf("%s: app a answers\n%s\napp b answers\n%s", q, want, got)
		}
	}
	persons := run("export", "--app", "a", "--format", "ndjson", "--persons")
	var anon, acct string
	for _, line := range strings.Split(persons, "\n") {
		if strings.Contains(line, `"distinct_id":"anon-`) {
			var r struct {
				DistinctID string `json:"distinct_id"`
				PersonID   string `json:"person_id"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			anon, acct = r.DistinctID, r.PersonID
			break
		}
	}
	if anon == "" {
		t.Fatalf("no anonymous id among the persons:\n%.500s", persons)
	}
	for _, id := range []string{anon, acct, "nobody"} {
		want, got := run("persons", "show", "--app", "a", id), run("persons", "show", "--app", "b", id)
		if want != got || (id == anon && !strings.Contains(want, "person "+acct+":")) {
			t.Errorf("persons show %s: app a %q, app b %q", id, want, got)
		}
	}
	if again := run("export", "--app", "b", "--format", "ndjson", "--persons"); again != persons {
		t.Error("app b exports other persons than app a")
	}
	if _, _, err := spur(t, "", "--data", data, "import", "--app", "c", "--persons", file("persons.parquet"), "--anonymous-id", "x", file("events.parquet")); err == nil {
		t.Error("--persons with --anonymous-id was accepted")
	}
	if _, _, err := spur(t, "", "import", "--url", "http://127.0.0.1:1", "--app", "c", "--persons", file("persons.parquet"), file("events.parquet")); err == nil || !strings.Contains(err.Error(), "not through --url") {
		t.Errorf("--persons with --url: %v", err)
	}
	url, key, stop := startServe(t, data)
	defer stop()
	if got, stderr, err := spur(t, "", "export", "--url", url, "--key", key, "--app", "a", "--format", "ndjson", "--persons"); err != nil || got != persons {
		t.Errorf("--persons through --url: %v\n%s", err, stderr)
	}
}
