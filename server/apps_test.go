package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestDeleteApp: DELETE /api/apps/{app} needs an admin key; it revokes
// the app's keys and removes the app, whose schema is then 404 and whose
// name starts a new app on the next event; another app is untouched.
func TestDeleteApp(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	ingest, query := ingestKey(t, ts, "gone"), ""
	var err error
	if query, _, err = ts.srv.Keys().Create(ScopeQuery, "gone", ""); err != nil {
		t.Fatal(err)
	}
	other := ingestKey(t, ts, "kept")
	for key, app := range map[string]string{ingest: "gone", other: "kept"} {
		if code, _, b := ts.do(t, "POST", "api/apps/"+app+"/events", `[{"user_id":"u","event":"e","timestamp":"2026-01-01T00:00:00Z"}]`, "Authorization", "Bearer "+key); code != 200 {
			t.Fatalf("%s: %d %s", app, code, b)
		}
	}
	if code, _, _ := ts.do(t, "DELETE", "api/apps/gone", "", "Authorization", "Bearer "+query); code != 403 {
		t.Errorf("a query key deleted the app: %d", code)
	}
	code, _, b := ts.do(t, "DELETE", "api/apps/gone", "")
	var ans struct {
		App         string `json:"app"`
		Files       int    `json:"files"`
		KeysRevoked int    `json:"keys_revoked"`
	}
	if code != 200 || json.Unmarshal(b, &ans) != nil || ans.App != "gone" || ans.Files == 0 || ans.KeysRevoked != 2 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "POST", "api/apps/gone/events", `[{"user_id":"u","event":"e"}]`, "Authorization", "Bearer "+ingest); code != 401 {
		t.Errorf("the deleted app's ingest key: %d %s", code, b)
	}
	if code, _, _ := ts.do(t, "GET", "api/apps/gone/schema", ""); code != 404 {
		t.Errorf("schema of the deleted app: %d", code)
	}
	if code, _, _ := ts.do(t, "DELETE", "api/apps/gone", ""); code != 404 {
		t.Errorf("second delete: %d", code)
	}
	if code, _, b := ts.do(t, "GET", "api/apps/kept/schema", ""); code != 200 || !strings.Contains(string(b), `"events":1`) {
		t.Errorf("the other app: %d %s", code, b)
	}
	// The name again: a new app.
	if code, _, b := ts.do(t, "POST", "api/apps/gone/events", `[{"user_id":"v","event":"f","timestamp":"2026-01-02T00:00:00Z"},{"user_id":"v","event":"f","timestamp":"2026-01-03T00:00:00Z"}]`); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	if code, _, b := ts.do(t, "GET", "api/apps/gone/schema", ""); code != 200 || !strings.Contains(string(b), `"events":2`) || strings.Contains(string(b), `"e"`) {
		t.Errorf("the new app: %d %s", code, b)
	}
}

// TestPatchAppRetention: PATCH /api/apps/{app} sets and clears the
// retention (admin only), answers the settings, and live events older
// than it are then rejected with field timestamp.
func TestPatchAppRetention(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	day := func(n int) string {
		return time.Now().UTC().Add(-time.Duration(n) * 24 * time.Hour).Format(time.RFC3339)
	}
	if code, _, b := ts.do(t, "POST", "api/apps/shop/events", `[{"user_id":"u","event":"e","timestamp":"`+day(10)+`"},{"user_id":"v","event":"e","timestamp":"`+day(500)+`"}]`); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	// A trend over both events' months: the old one counts until the
	// retention is set.
	trend := `{"kind":"trend","range":{"from":"` + day(600)[:10] + `","to":"` + day(-2)[:10] + `"},"interval":"month","series":[{"event":"e"}]}`
	total := func() float64 {
		t.Helper()
		code, _, b := ts.do(t, "POST", "api/apps/shop/query", trend)
		var res struct {
			Series []struct {
				Total float64 `json:"total"`
			} `json:"series"`
		}
		if code != 200 || json.Unmarshal(b, &res) != nil || len(res.Series) != 1 {
			t.Fatalf("trend: %d %s", code, b)
		}
		return res.Series[0].Total
	}
	if n := total(); n != 2 {
		t.Errorf("trend before the retention: %v events, want 2", n)
	}
	query, _, err := ts.srv.Keys().Create(ScopeQuery, "shop", "")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := ts.do(t, "PATCH", "api/apps/shop", `{"retention":"400d"}`, "Authorization", "Bearer "+query); code != 403 {
		t.Errorf("a query key set the retention: %d", code)
	}
	for body, want := range map[string]string{`{"retention":"soon"}`: "retention", `{}`: "retention", `{"ttl":"4d"}`: "ttl"} {
		code, _, b := ts.do(t, "PATCH", "api/apps/shop", body)
		if code != 400 || !strings.Contains(string(b), `"field":"`+want+`"`) {
			t.Errorf("PATCH %s: %d %s", body, code, b)
		}
	}
	if code, _, _ := ts.do(t, "PATCH", "api/apps/nope", `{"retention":"400d"}`); code != 404 {
		t.Errorf("PATCH of an unknown app: %d", code)
	}
	code, _, b := ts.do(t, "PATCH", "api/apps/shop", `{"retention":"400d"}`)
	var ans AppSettings
	if code != 200 || json.Unmarshal(b, &ans) != nil || ans.App != "shop" || ans.Retention != "400d" {
		t.Fatalf("PATCH: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "GET", "api/apps", ""); code != 200 || !strings.Contains(string(b), `"retention":"400d"`) {
		t.Errorf("apps: %d %s", code, b)
	}
	if n := total(); n != 1 {
		t.Errorf("trend under a 400d retention: %v events, want 1", n)
	}
	code, _, b = ts.do(t, "POST", "api/apps/shop/events", `[{"user_id":"u","event":"e","timestamp":"`+day(401)+`"},{"user_id":"u","event":"e","timestamp":"`+day(1)+`"}]`)
	if code != 200 || !strings.Contains(string(b), `"field":"timestamp"`) || !strings.Contains(string(b), "retention") {
		t.Errorf("an event past the retention: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "PATCH", "api/apps/shop", `{"retention":"none"}`); code != 200 || !strings.Contains(string(b), `"retention":"none"`) {
		t.Errorf("clear: %d %s", code, b)
	}
	if n := total(); n != 3 { // not compacted: the old event shows again, beside the new one
		t.Errorf("trend after clearing the retention: %v events, want 3", n)
	}
}
