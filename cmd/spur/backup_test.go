package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spurdb/spur/storage"
)

// backupQueries are the queries a restored store must answer as the
// original: a trend of users, a funnel (both over persons: the generated
// data has identity operations) and a cohort query.
var backupQueries = []string{
	`{"kind":"trend","range":{"from":"2024-01-01","to":"2024-04-01"},"tz":"UTC","interval":"week","series":[{"event":"$any","math":"users"},{"event":"purchase","math":"count"}]}`,
	`{"kind":"funnel","range":{"from":"2024-01-01","to":"2024-04-01"},"tz":"UTC","steps":[{"event":"view_item"},{"event":"add_to_cart"},{"event":"purchase"}],"window":"7d"}`,
	`{"kind":"trend","range":{"from":"2024-01-01","to":"2024-04-01"},"tz":"UTC","interval":"month","series":[{"event":"$any","math":"users"}],"cohort":"buyers"}`,
}

// answers runs backupQueries on store data's app g and returns the
// results (without their timing stats).
func answers(t *testing.T, data string) []string {
	t.Helper()
	return answersBy(t, data, func(stdin string, args ...string) (string, error) {
		out, _, err := spur(t, stdin, args...)
		return out, err
	})
}

// answersBy is answers with the commands run by run (in-process, or a
// built binary), which returns stdout and the error.
func answersBy(t *testing.T, data string, run func(stdin string, args ...string) (string, error)) []string {
	t.Helper()
	var out []string
	for _, q := range backupQueries {
		res, err := run(q, "--data", data, "query", "--app", "g", "-")
		if err != nil {
			t.Fatalf("query %s on %s: %v: %s", q, data, err, res)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(res), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "stats")
		b, _ := json.Marshal(m)
		out = append(out, string(b))
	}
	p, err := run("", "--data", data, "persons", "show", "--app", "g", "u-merge-a")
	if err != nil {
		t.Fatalf("persons show: %v", err)
	}
	return append(out, p)
}

// backupReport runs `spur backup` with args and --json, and returns the
// report.
func backupReport(t *testing.T, args ...string) storage.BackupReport {
	t.Helper()
	out, errOut, err := spur(t, "", append(args, "--json")...)
	if err != nil {
		t.Fatalf("spur %v: %v: %s", args, err, errOut)
	}
	var rep storage.BackupReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("backup report %q: %v", out, err)
	}
	return rep
}

// TestBackupRestoreCommands: `spur backup` of a store no server holds,
// then `spur restore`, give a store that `spur verify` passes and that
// answers a trend, a funnel, a cohort's trend and a person as the
// original; a second backup after another import places only the new
// segment files; an interrupted backup is reported by verify and refused
// by restore; a server holding the store makes the CLI point at --url.
func TestBackupRestoreCommands(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	if _, errOut, err := spur(t, "", "--data", data, "gen", "--events", "20000", "--persons", "0.3", "--app", "g"); err != nil {
		t.Fatalf("gen: %v: %s", err, errOut)
	}
	for _, args := range [][]string{
		{"persons", "merge", "--app", "g", "u-merge-a", "u-merge-b"},
		{"cohort", "save", "--app", "g", "buyers", "-"},
		{"keys", "create", "--scope", "admin"},
	} {
		if out, errOut, err := spur(t, `{"performed":{"event":"purchase"}}`, append([]string{"--data", data}, args...)...); err != nil {
			t.Fatalf("%v: %v: %s %s", args, err, out, errOut)
		}
	}
	want := answers(t, data)
	bk := filepath.Join(dir, "backup")
	rep := backupReport(t, "--data", data, "backup", "--to", bk)
	if len(rep.Apps) != 1 || rep.FilesLinked == 0 || rep.Documents != 2 {
		t.Fatalf("backup: %+v", rep)
	}
	restored := filepath.Join(dir, "restored")
	out, errOut, err := spur(t, "", "--data", restored, "restore", "--from", bk)
	if err != nil || !strings.Contains(out, "restored the backup of") || !strings.Contains(out, "0 findings") {
		t.Fatalf("restore: %v: %s %s", err, out, errOut)
	}
	t.Logf("%s", out)
	if out, _, err := spur(t, "", "--data", restored, "verify"); err != nil {
		t.Fatalf("verify the restored store: %v: %s", err, out)
	}
	if got := answers(t, restored); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the restored store answers\n%s\nthe original\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	keys, _, err := spur(t, "", "--data", restored, "keys", "list")
	if err != nil || !strings.Contains(keys, "admin") {
		t.Fatalf("restored keys: %q %v", keys, err)
	}

	// An import without compaction adds one segment per shard: the second
	// backup places those only.
	before := rep.FilesLinked
	if _, errOut, err := spur(t, "", "--data", data, "gen", "--events", "5000", "--seed", "2", "--app", "g", "--no-compact"); err != nil {
		t.Fatalf("gen: %v: %s", err, errOut)
	}
	rep = backupReport(t, "--data", data, "backup", "--to", bk)
	ents, _ := os.ReadDir(filepath.Join(data, "apps", "g", "seg"))
	if added := len(ents) - before; rep.FilesLinked+rep.FilesCopied != added || rep.FilesKept != before || rep.FilesRemoved != 0 || added < 1 {
		t.Fatalf("second backup (%d new segment files, %d old): %+v", added, before, rep)
	}

	// Interrupted: reported, refused; the next backup completes it.
	if err := os.WriteFile(filepath.Join(bk, storage.BackupMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, err := spur(t, "", "--data", bk, "verify"); err == nil || !strings.Contains(out, "incomplete backup") {
		t.Fatalf("verify of an interrupted backup: %v: %s", err, out)
	}
	if _, _, err := spur(t, "", "--data", filepath.Join(dir, "r2"), "restore", "--from", bk); err == nil || !strings.Contains(err.Error(), "incomplete backup") {
		t.Fatalf("restore of an interrupted backup: %v", err)
	}
	if _, _, err := spur(t, "", "--data", restored, "restore", "--from", bk); err == nil {
		t.Fatal("restore into a non-empty directory")
	}
	backupReport(t, "--data", data, "backup", "--to", bk)
	if out, _, err := spur(t, "", "--data", bk, "verify"); err != nil {
		t.Fatalf("verify of the completed backup: %v: %s", err, out)
	}
	if _, _, err := spur(t, "", "--data", data, "backup", "--to", restored); err == nil || !strings.Contains(err.Error(), "neither empty nor a backup") {
		t.Fatalf("backup into a store: %v", err)
	}

	// While a server holds the store, the CLI names --url.
	url, _, stop := startServe(t, data)
	defer stop()
	_ = url
	if _, _, err := spur(t, "", "--data", data, "backup", "--to", filepath.Join(dir, "b3")); err == nil || !strings.Contains(err.Error(), "--url") {
		t.Fatalf("backup of a store a server holds: %v", err)
	}
}

// TestBackupThroughServer: `spur backup --url --key` has the running
// server (POST /api/backup, admin) back up its store, with live events
// not yet flushed; the restored store answers as the server does.
func TestBackupThroughServer(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	if _, errOut, err := spur(t, "", "--data", data, "gen", "--events", "20000", "--persons", "0.3", "--app", "g"); err != nil {
		t.Fatalf("gen: %v: %s", err, errOut)
	}
	url, key, stop := startServe(t, data)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	// Live events (and an identity merge) the server has not flushed.
	var body strings.Builder
	for i := range 200 {
		fmt.Fprintf(&body, `{"user_id":"live-%d","event":"purchase","timestamp":"2024-02-0%dT10:00:00Z"}`+"\n", i%40, 1+i%9)
	}
	req, _ := http.NewRequest("POST", url+"/api/apps/g/events", strings.NewReader(body.String()))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	if out, errOut, err := spur(t, "", "persons", "merge", "--url", url, "--key", key, "--app", "g", "u-merge-a", "live-1"); err != nil {
		t.Fatalf("merge: %v: %s %s", err, out, errOut)
	}

	bk := filepath.Join(dir, "backup")
	rep := backupReport(t, "backup", "--url", url, "--key", key, "--to", bk)
	if len(rep.Apps) != 1 || rep.Apps[0].LogSeq == 0 || rep.LogRecords == 0 || rep.FilesLinked == 0 {
		t.Fatalf("backup through the server: %+v", rep)
	}
	// Refusals through the API: a relative path; a directory that is not a backup.
	if _, _, err := spur(t, "", "backup", "--url", url, "--key", key, "--to", data); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("backup into the store itself: %v", err)
	}
	resp, err = http.DefaultClient.Do(func() *http.Request {
		r, _ := http.NewRequest("POST", url+"/api/backup", strings.NewReader(`{"to":"relative/dir"}`))
		r.Header.Set("Authorization", "Bearer "+key)
		return r
	}())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("a relative backup directory: %d", resp.StatusCode)
	}
	stop() // flushes: the store holds what the backup holds
	stopped = true

	restored := filepath.Join(dir, "restored")
	if out, errOut, err := spur(t, "", "--data", restored, "restore", "--from", bk); err != nil {
		t.Fatalf("restore: %v: %s %s", err, out, errOut)
	}
	if _, _, err := spur(t, `{"performed":{"event":"purchase"}}`, "--data", data, "cohort", "save", "--app", "g", "buyers", "-"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := spur(t, `{"performed":{"event":"purchase"}}`, "--data", restored, "cohort", "save", "--app", "g", "buyers", "-"); err != nil {
		t.Fatal(err)
	}
	want, got := answers(t, data), answers(t, restored)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the restored store answers\n%s\nthe original\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(got[len(got)-1], "live-1") {
		t.Fatalf("the merge made through the server is not in the backup: %s", got[len(got)-1])
	}
}
