package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestErasePersonEndpoint: DELETE /persons/{id} (admin) hides the person —
// both of its ids — from the next query, answers the request again when
// repeated, lists it at GET /deletions without the ids, and refuses a
// query key.
func TestErasePersonEndpoint(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	evs := `[{"user_id":"dev-9","event":"view","timestamp":"2026-01-01T00:00:00Z"},
		{"user_id":"user-9","anonymous_id":"dev-9","event":"signup","timestamp":"2026-01-01T00:01:00Z"},
		{"user_id":"other","event":"view","timestamp":"2026-01-01T00:00:00Z"}]`
	if code, _, b := ts.do(t, "POST", "api/apps/app/events", evs); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	query, _, err := ts.srv.Keys().Create(ScopeQuery, "app", "")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := ts.do(t, "DELETE", "api/apps/app/persons/dev-9", "", "Authorization", "Bearer "+query); code != 403 {
		t.Errorf("a query key erased a person: %d", code)
	}
	code, _, b := ts.do(t, "DELETE", "api/apps/app/persons/dev-9", "")
	var ans deletionView
	if code != 200 || json.Unmarshal(b, &ans) != nil || ans.Status != "pending" || ans.Kind != "person" || !strings.HasPrefix(ans.ID, "del-") {
		t.Fatalf("erase: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "DELETE", "api/apps/app/persons/dev-9", ""); code != 200 || !strings.Contains(string(b), ans.ID) {
		t.Errorf("again: %d %s", code, b)
	}
	for _, id := range []string{"dev-9", "user-9"} {
		if code, _, b := ts.do(t, "GET", "api/apps/app/users/"+id+"/events", ""); code != 200 || !strings.Contains(string(b), `"total":0`) ||
			!strings.Contains(string(b), `"distinct_ids":["`+id+`"]`) {
			t.Errorf("%s after the erasure: %d %s", id, code, b)
		}
	}
	if code, _, b := ts.do(t, "GET", "api/apps/app/users/other/events", ""); code != 200 || !strings.Contains(string(b), `"total":1`) {
		t.Errorf("another user: %d %s", code, b)
	}
	code, _, b = ts.do(t, "GET", "api/apps/app/deletions", "")
	if code != 200 || !strings.Contains(string(b), `"status":"pending"`) || strings.Contains(string(b), "dev-9") {
		t.Errorf("deletions: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "DELETE", "api/apps/app/persons/dev-9?suppress=maybe", ""); code != 400 {
		t.Errorf("bad suppress: %d %s", code, b)
	}
	if code, _, _ := ts.do(t, "DELETE", "api/apps/nope/persons/x", ""); code != 404 {
		t.Errorf("unknown app: %d", code)
	}
}
