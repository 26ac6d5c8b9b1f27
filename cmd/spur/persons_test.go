package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// personsCSV: three visitors view anonymously and sign up under an
// account id; the first and the numeric third carry their anonymous id
// (column anon), the second does not.
const personsCSV = `user_id,ts,event,anon
d1,2021-05-01T10:00:00Z,view,
u1,2021-05-01T11:00:00Z,signup,d1
d2,2021-05-02T10:00:00Z,view,
u2,2021-05-02T11:00:00Z,signup,
42,2021-05-03T10:00:00Z,view,
7,2021-05-03T11:00:00Z,signup,42
`

// converted runs a view → signup funnel on the --data store and returns
// its users per step.
func converted(t *testing.T, data string) string {
	t.Helper()
	q := `{"kind":"funnel","range":{"from":"2021-05-01","to":"2021-06-01"},"steps":[{"event":"view"},{"event":"signup"}],"window":"1d"}`
	out, _, err := spur(t, q, "--data", data, "query", "--app", "shop", "-")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Steps []struct{ Users int64 }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Steps) != 2 {
		t.Fatalf("funnel: %s (%v)", out, err)
	}
	return fmt.Sprintf("%d,%d", res.Steps[0].Users, res.Steps[1].Users)
}

// TestPersonsImportAndMerge: `spur import --anonymous-id` joins each
// row's anonymous id into its user's person (a numeric id read as a
// string) and reports the operations; `spur persons merge` joins two
// more by hand, and `spur persons show` prints them; the funnel started
// anonymously converts per person. Then the same through a running
// server (--url): an import with --anonymous-id, a merge, a show.
func TestPersonsImportAndMerge(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	csv := filepath.Join(dir, "persons.csv")
	if err := os.WriteFile(csv, []byte(personsCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := spur(t, "", "--data", data, "import", "--app", "shop", "--time", "ts", "--anonymous-id", "anon", csv)
	if err != nil || !strings.Contains(stderr, "; 2 identity operations applied") {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	if got := converted(t, data); got != "3,2" {
		t.Fatalf("funnel after the import: %s, want 3,2 (d1+u1 and 42+7 convert)", got)
	}
	for id, want := range map[string]string{"d1": "person u1: distinct ids d1 u1", "42": "person 7: distinct ids 42 7", "d2": "person d2: distinct ids d2"} {
		if out, _, err := spur(t, "", "--data", data, "persons", "show", "--app", "shop", id); err != nil || out != want+"\n" {
			t.Fatalf("show %s: %q %v", id, out, err)
		}
	}
	out, _, err := spur(t, "", "--data", data, "persons", "merge", "--app", "shop", "u2", "d2")
	if err != nil || out != "merged u2 and d2 in app shop: person u2: distinct ids d2 u2\n" {
		t.Fatalf("merge: %q %v", out, err)
	}
	if got := converted(t, data); got != "3,3" {
		t.Fatalf("funnel after the merge: %s, want 3,3", got)
	}
	if _, _, err := spur(t, "", "--data", data, "persons", "merge", "--app", "shop", "u2", ""); err == nil {
		t.Fatal("merge with an empty id accepted")
	}
	if _, _, err := spur(t, "", "--data", data, "persons", "merge", "--app", "nope", "a", "b"); err == nil {
		t.Fatal("merge in an unknown app accepted")
	}
	if _, _, err := spur(t, "", "--data", data, "import", "--app", "shop", "--users", "--anonymous-id", "anon", csv); err == nil || !strings.Contains(err.Error(), "--anonymous-id") {
		t.Fatalf("users import with --anonymous-id: %v", err)
	}

	url, key, stop := startServe(t, data)
	defer stop()
	more := filepath.Join(dir, "more.csv")
	if err := os.WriteFile(more, []byte("user_id,ts,event,anon\nd4,2021-05-04T10:00:00Z,view,\nu4,2021-05-04T11:00:00Z,signup,d4\nd5,2021-05-05T10:00:00Z,view,\nu5,2021-05-05T11:00:00Z,signup,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	remote := []string{"--url", url, "--key", key}
	_, stderr, err = spur(t, "", append([]string{"import", "--app", "shop", "--time", "ts", "--anonymous-id", "anon", more}, remote...)...)
	if err != nil || !strings.Contains(stderr, "; 1 identity operations applied") {
		t.Fatalf("import through the server: %v\n%s", err, stderr)
	}
	out, _, err = spur(t, "", append([]string{"persons", "merge", "--app", "shop", "u5", "d5"}, remote...)...)
	if err != nil || out != "merged u5 and d5 in app shop: person u5: distinct ids d5 u5\n" {
		t.Fatalf("merge through the server: %q %v", out, err)
	}
	out, _, err = spur(t, "", append([]string{"persons", "show", "--app", "shop", "d4"}, remote...)...)
	if err != nil || out != "person u4: distinct ids d4 u4\n" {
		t.Fatalf("show through the server: %q %v", out, err)
	}
	if _, _, err := spur(t, "", append([]string{"persons", "merge", "--app", "shop", "u5", ""}, remote...)...); err == nil || !strings.Contains(err.Error(), "ids[1]") {
		t.Fatalf("merge of an empty id through the server: %v", err)
	}
}

// importPersons imports personsCSV (with its anonymous ids) into app
// shop of a new --data store and returns the store's directory.
func importPersons(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	csv := filepath.Join(dir, "persons.csv")
	if err := os.WriteFile(csv, []byte(personsCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := spur(t, "", "--data", data, "import", "--app", "shop", "--time", "ts", "--anonymous-id", "anon", csv); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	return data
}

// TestPersonsDelete: `spur persons delete` erases a person (both of its
// ids, joined by the import's anonymous id) from the funnel at once, and
// after `spur compact --erase` no file of the store holds its ids.
func TestPersonsDelete(t *testing.T) {
	data := importPersons(t)
	out, _, err := spur(t, "", "--data", data, "persons", "delete", "--app", "shop", "u1")
	if err != nil || !strings.Contains(out, "u1: erasure del-") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if got := converted(t, data); got != "2,1" {
		t.Fatalf("funnel after the erasure: %s, want 2,1 (only 42+7 converts; d2 views)", got)
	}
	if out, _, err = spur(t, "", "--data", data, "compact", "--app", "shop", "--erase"); err != nil || !strings.Contains(out, "1 deletion requests done") {
		t.Fatalf("compact --erase: %v\n%s", err, out)
	}
	if got := converted(t, data); got != "2,1" {
		t.Fatalf("funnel after compact --erase: %s, want 2,1", got)
	}
	err = filepath.WalkDir(data, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && (strings.Contains(string(b), "u1") || strings.Contains(string(b), "d1,")) {
			t.Errorf("%s still holds an erased id", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEventsDelete: `spur events delete` deletes the views of one day by a
// filter-free matcher; the funnel loses them at once and after
// `spur compact --erase`; a bad filter is refused naming the field.
func TestEventsDelete(t *testing.T) {
	data := importPersons(t)
	if _, _, err := spur(t, "", "--data", data, "events", "delete", "--app", "shop", "--event", "view", "--where", `[{"property":"nope","op":"is_set"}]`, "--from", "2021-05-01", "--to", "2021-05-02"); err == nil || !strings.Contains(err.Error(), "where[0].property") {
		t.Fatalf("a bad filter: %v", err)
	}
	out, _, err := spur(t, "", "--data", data, "events", "delete", "--app", "shop", "--event", "view", "--from", "2021-05-01", "--to", "2021-05-02")
	if err != nil || !strings.Contains(out, "pending") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if got := converted(t, data); got != "2,1" {
		t.Fatalf("funnel after the deletion: %s, want 2,1 (d1's view is gone)", got)
	}
	if _, _, err := spur(t, "", "--data", data, "compact", "--app", "shop", "--erase"); err != nil {
		t.Fatal(err)
	}
	if got := converted(t, data); got != "2,1" {
		t.Fatalf("funnel after compact --erase: %s, want 2,1", got)
	}
}
