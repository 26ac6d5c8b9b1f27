package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// keyLine is what `spur keys create` prints on stdout: the key alone.
var keyLine = regexp.MustCompile(`^spur_[a-z2-7]{32}\n$`)

// TestKeysCLI: keys are created, listed and revoked on the store
// directly, and, while spur serve runs, only through its API, where a
// revoked key is refused at once; the first start prints a login URL.
func TestKeysCLI(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	out, stderr, err := spur(t, "", "--data", data, "keys", "create", "--scope", "query", "--app", "shop", "--name", "analyst")
	if err != nil || !keyLine.MatchString(out) || !strings.Contains(stderr, "created query key") {
		t.Fatalf("create: %v %q %q", err, out, stderr)
	}
	qkey := strings.TrimSpace(out)
	for _, bad := range [][]string{{"--scope", "ingest"}, {"--scope", "admin", "--app", "shop"}, {"--scope", "root"}} {
		if _, _, err := spur(t, "", append([]string{"--data", data, "keys", "create"}, bad...)...); err == nil {
			t.Errorf("create %v: no error", bad)
		}
	}
	out, _, err = spur(t, "", "--data", data, "keys", "list")
	if err != nil || !strings.Contains(out, "query  shop  ") || !strings.Contains(out, "analyst") || strings.Contains(out, qkey[5:]) {
		t.Fatalf("list: %v\n%s", err, out)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]

	// The first start creates an admin key and prints the login URL.
	url, admin, stop := startServe(t, data)
	defer stop()
	if admin == "" {
		t.Fatal("no login URL")
	}
	if _, _, err := spur(t, "", "--data", data, "keys", "revoke", id); err == nil || !strings.Contains(err.Error(), "spur serve (pid") ||
		!strings.Contains(err.Error(), "--url http://HOST:PORT") {
		t.Fatalf("a direct revoke while serving: %v", err)
	}
	get := func(key string) int {
		req, _ := http.NewRequest("GET", url+"/api/apps/shop/schema", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(qkey); c != 404 { // the app does not exist yet: the key got through
		t.Fatalf("query key: %d", c)
	}
	out, _, err = spur(t, "", "keys", "create", "--url", url, "--key", admin, "--scope", "ingest", "--app", "shop")
	if err != nil || !keyLine.MatchString(out) {
		t.Fatalf("create through the server: %v %q", err, out)
	}
	if _, _, err := spur(t, "", "keys", "list", "--url", url, "--key", qkey); err == nil || !strings.Contains(err.Error(), "needs an admin key") {
		t.Fatalf("list with a query key: %v", err)
	}
	t.Setenv(keyEnv, admin)
	revoked := time.Now()
	if _, _, err := spur(t, "", "keys", "revoke", "--url", url, id); err != nil {
		t.Fatalf("revoke through the server: %v", err)
	}
	if c := get(qkey); c != 401 || time.Since(revoked) > time.Second {
		t.Fatalf("revoked key: %d after %s", c, time.Since(revoked))
	}
	out, _, err = spur(t, "", "keys", "list", "--url", url)
	if err != nil || strings.Contains(out, id) || !strings.Contains(out, "admin") || !strings.Contains(out, "ingest") {
		t.Fatalf("list through the server: %v\n%s", err, out)
	}
}

// TestLoadgen: the load generator sends batches that the server
// acknowledges, writes a record, and the check finds every acknowledged
// event exactly once; a record that disagrees fails the check.
func TestLoadgen(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	url, admin, stop := startServe(t, data)
	defer stop()
	ikey, _, err := spur(t, "", "keys", "create", "--url", url, "--key", admin, "--scope", "ingest", "--app", "lg")
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "rec.json")
	out, stderr, err := spur(t, "", "loadgen", "--url", url, "--key", strings.TrimSpace(ikey), "--app", "lg", "--events", "3000",
		"--duration", "0", "--batch", "500", "--workers", "2", "--users", "50", "--gzip", "--seed", "7", "--record", rec, "--report", "0")
	if err != nil || !strings.Contains(out, "3000 events acknowledged") || !strings.Contains(out, "ack latency p50") {
		t.Fatalf("loadgen: %v\n%s%s", err, out, stderr)
	}
	out, _, err = spur(t, "", "loadgen", "--url", url, "--key", admin, "--check", rec)
	if err != nil || !strings.Contains(out, "3000 events stored, 3000 acknowledged: 50 users exact") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	// A record claiming one more event for a user fails.
	b, _ := os.ReadFile(rec)
	var r loadRecord
	json.Unmarshal(b, &r)
	for _, tl := range r.Users {
		tl.Events++
		break
	}
	b, _ = json.Marshal(r)
	os.WriteFile(rec, b, 0o644)
	if out, _, err := spur(t, "", "loadgen", "--url", url, "--key", admin, "--check", rec); err == nil || !strings.Contains(out, "1 wrong") {
		t.Fatalf("check of a wrong record: %v\n%s", err, out)
	}
}

// TestServeAuthNone: --auth none is refused on a listener that is not
// loopback, and on loopback the server says it runs without keys.
func TestServeAuthNone(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	if _, _, err := spur(t, "", "--data", data, "serve", "--auth", "none", "--listen", "0.0.0.0:0", "--debug-listen", ""); err == nil ||
		!strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("--auth none on 0.0.0.0: %v", err)
	}
	if _, _, err := spur(t, "", "--data", data, "serve", "--auth", "maybe", "--listen", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "want keys or none") {
		t.Fatalf("--auth maybe: %v", err)
	}
}

// TestKeysCreateSnippets: with --snippets, stdout still holds the key
// alone; stderr has each SDK's lines with the key and the --public-url
// (the placeholder without it); a key of another scope gets none, and a
// bad --public-url is refused before a key is made.
func TestKeysCreateSnippets(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	out, stderr, err := spur(t, "", "--data", data, "keys", "create", "--scope", "ingest", "--app", "shop", "--snippets", "--public-url", "https://spur.test/")
	if err != nil || !keyLine.MatchString(out) {
		t.Fatalf("create: %v %q %q", err, out, stderr)
	}
	key := strings.TrimSpace(out)
	for _, want := range []string{
		"posthog.init('" + key + "', {\n  api_host: 'https://spur.test/ingest/posthog',",
		"Posthog('" + key + "', host='https://spur.test/ingest/posthog')",
		"new PostHog('" + key + "', { host: 'https://spur.test/ingest/posthog' })",
		"posthog.NewWithConfig(\"" + key + "\", posthog.Config{\n\tEndpoint: \"https://spur.test/ingest/posthog\",",
		"cdnURL: 'https://spur.test/ingest/segment',",
		"analytics.host = 'https://spur.test/ingest/segment'",
		"new Analytics({ writeKey: '" + key + "', host: 'https://spur.test/ingest/segment' })",
		"analytics.NewWithConfig(\"" + key + "\", analytics.Config{\n\tEndpoint: \"https://spur.test/ingest/segment\",",
		"amplitude.init('" + key + "', { serverUrl: 'https://spur.test/ingest/amplitude/2/httpapi' })",
		"Config(server_url='https://spur.test/ingest/amplitude/2/httpapi')",
		"init('" + key + "', { serverUrl: 'https://spur.test/ingest/amplitude/2/httpapi' })",
		"events_url='https://spur.test/ingest/mixpanel/track',",
		"api_host: 'https://spur.test/ingest/mixpanel',",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if out, stderr, err = spur(t, "", "--data", data, "keys", "create", "--scope", "ingest", "--app", "shop", "--snippets"); err != nil ||
		!keyLine.MatchString(out) || !strings.Contains(stderr, "host='https://spur.example.com/ingest/posthog'") || !strings.Contains(stderr, "replace https://spur.example.com") {
		t.Errorf("placeholder base: %v %q\n%s", err, out, stderr)
	}
	if out, stderr, err = spur(t, "", "--data", data, "keys", "create", "--scope", "query", "--app", "shop", "--snippets"); err != nil ||
		!keyLine.MatchString(out) || !strings.Contains(stderr, "no SDK snippets") || strings.Contains(stderr, "posthog") {
		t.Errorf("query key: %v %q\n%s", err, out, stderr)
	}
	out, _, _ = spur(t, "", "--data", data, "keys", "list")
	n := strings.Count(out, "\n")
	if out, _, err = spur(t, "", "--data", data, "keys", "create", "--scope", "ingest", "--app", "shop", "--snippets", "--public-url", "spur.test"); err == nil ||
		out != "" || !strings.Contains(err.Error(), "--public-url") {
		t.Errorf("bad --public-url: %v %q", err, out)
	}
	if out, _, _ = spur(t, "", "--data", data, "keys", "list"); strings.Count(out, "\n") != n {
		t.Errorf("a key was made for a bad --public-url:\n%s", out)
	}
}
