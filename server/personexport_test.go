package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestPersonExport: GET /persons/{id}/export streams the person and its
// merged trail as NDJSON, by any of its distinct ids; the event lines
// sent back to the events endpoint of another app make the same person
// trail there; an unknown id is 404.
func TestPersonExport(t *testing.T) {
	defer func(n int) { personExportPage = n }(personExportPage)
	personExportPage = 7 // the 26 events in 4 pages
	ts := start(t, Config{Store: liveStore(t)})
	var evs []string
	for i := range 25 {
		u := "dev-1"
		if i >= 10 {
			u = "user-1"
		}
		evs = append(evs, fmt.Sprintf(`{"user_id":%q,"event":"e%d","timestamp":"2026-01-01T00:00:%02dZ","insert_id":"i%d","properties":{"n":%d,"s":"x\"y"}}`, u, i%3, i, i, i))
	}
	evs = append(evs, `{"user_id":"user-1","anonymous_id":"dev-1","event":"login","timestamp":"2026-01-01T00:01:00Z","user_properties":{"plan":"pro"}}`,
		`{"user_id":"other","event":"e0","timestamp":"2026-01-01T00:00:00Z"}`)
	if code, _, b := ts.do(t, "POST", "api/apps/src/events", "["+strings.Join(evs, ",")+"]"); code != 200 || !strings.Contains(string(b), `"accepted":27`) {
		t.Fatalf("%d %s", code, b)
	}
	code, hdr, body := ts.do(t, "GET", "api/apps/src/persons/dev-1/export", "")
	if code != 200 || hdr.Get("Content-Type") != "application/x-ndjson" || !strings.Contains(hdr.Get("Content-Disposition"), "spur-src-person-user-1.ndjson") {
		t.Fatalf("%d %v %.300s", code, hdr, body)
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Scan()
	var person struct {
		PersonID    string         `json:"person_id"`
		DistinctIDs []string       `json:"distinct_ids"`
		Properties  map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(sc.Bytes(), &person); err != nil || person.PersonID != "user-1" || strings.Join(person.DistinctIDs, ",") != "dev-1,user-1" || person.Properties["plan"] != "pro" {
		t.Fatalf("person line %s: %+v %v", sc.Bytes(), person, err)
	}
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 26 || !strings.Contains(lines[0], `"user_id":"dev-1","event":"e0","timestamp":"2026-01-01T00:00:00.000000Z","insert_id":"i0"`) {
		t.Fatalf("%d event lines, first %s", len(lines), lines[0])
	}
	// The lines read back: the same trail in another app.
	if code, _, b := ts.do(t, "POST", "api/apps/dst/events", strings.Join(lines, "\n"), "Content-Type", "application/x-ndjson"); code != 200 || !strings.Contains(string(b), `"accepted":26`) {
		t.Fatalf("import back: %d %s", code, b)
	}
	if _, _, b := ts.do(t, "POST", "api/apps/dst/events", `[{"user_id":"user-1","anonymous_id":"dev-1","event":"x","timestamp":"2026-01-01T00:02:00Z"}]`); !strings.Contains(string(b), `"accepted":1`) {
		t.Fatal(string(b))
	}
	_, _, src := ts.do(t, "GET", "api/apps/src/persons/user-1/events?limit=1000", "")
	_, _, dst := ts.do(t, "GET", "api/apps/dst/persons/user-1/events?limit=1000", "")
	trail := func(b []byte) string {
		var ans struct {
			Events []map[string]any `json:"events"`
		}
		json.Unmarshal(b, &ans)
		var out []string
		for _, e := range ans.Events {
			if e["event"] != "x" {
				out = append(out, fmt.Sprint(e))
			}
		}
		return strings.Join(out, "\n")
	}
	if trail(src) != trail(dst) {
		t.Errorf("the trail exported and imported back differs:\n%s\nwant\n%s", trail(dst), trail(src))
	}
	if code, _, _ := ts.do(t, "GET", "api/apps/src/persons/nobody/export", ""); code != 404 {
		t.Errorf("unknown id: %d", code)
	}
}
