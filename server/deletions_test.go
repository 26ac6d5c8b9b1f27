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

// TestDeleteEventsEndpoint: POST /delete (admin) with an event, filters and
// a range deletes the matching events stored before it from the next
// query, keeps the others, is listed with its match, and refuses a bad
// filter naming the field.
func TestDeleteEventsEndpoint(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	evs := `[{"user_id":"a","event":"click","timestamp":"2026-01-01T00:00:00Z","properties":{"build":"7.1","n":1}},
		{"user_id":"a","event":"click","timestamp":"2026-01-01T00:00:01Z","properties":{"build":"7.2","n":2}},
		{"user_id":"b","event":"click","timestamp":"2026-01-03T00:00:00Z","properties":{"build":"7.1","n":3}},
		{"user_id":"b","event":"view","timestamp":"2026-01-01T00:00:00Z","properties":{"build":"7.1"}}]`
	if code, _, b := ts.do(t, "POST", "api/apps/app/events", evs); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	for body, field := range map[string]string{
		`{"event":"click","where":[{"property":"nope","op":"eq","value":1}],"range":{"from":"2026-01-01","to":"2026-01-02"}}`: "where[0].property",
		`{"event":"click","where":[{"property":"n","op":"eq","value":"x"}],"range":{"from":"2026-01-01","to":"2026-01-02"}}`:  "where[0].value",
		`{"event":"click","range":{"from":"2026-01-02","to":"2026-01-01"}}`:                                                   "range",
		`{"range":{"from":"2026-01-01","to":"2026-01-02"}}`:                                                                   "event",
	} {
		if code, _, b := ts.do(t, "POST", "api/apps/app/delete", body); code != 400 || !strings.Contains(string(b), `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, code, b, field)
		}
	}
	code, _, b := ts.do(t, "POST", "api/apps/app/delete", `{"event":"click","where":[{"property":"build","op":"eq","value":"7.1"}],"range":{"from":"2026-01-01","to":"2026-01-02"}}`)
	if code != 200 || !strings.Contains(string(b), `"kind":"events"`) || !strings.Contains(string(b), `"match":{"event":"click","where":[{"property":"build"`) {
		t.Fatalf("delete: %d %s", code, b)
	}
	q := `{"kind":"trend","range":{"from":"2026-01-01","to":"2026-01-05"},"interval":"day","series":[{"event":"$any"}]}`
	code, _, b = ts.do(t, "POST", "api/apps/app/query", q)
	var res struct {
		Series []struct{ Total int64 }
	}
	if code != 200 || json.Unmarshal(b, &res) != nil || len(res.Series) != 1 || res.Series[0].Total != 3 {
		t.Fatalf("after the deletion: %d %s, want 3 events", code, b)
	}
	if code, _, b := ts.do(t, "GET", "api/apps/app/users/a/events", ""); code != 200 || !strings.Contains(string(b), `"total":1`) || !strings.Contains(string(b), "7.2") {
		t.Errorf("a's trail: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "GET", "api/apps/app/deletions", ""); code != 200 || !strings.Contains(string(b), `"kind":"events"`) {
		t.Errorf("deletions: %d %s", code, b)
	}
}
