package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// personTrail is the answer of GET /persons/{id}/events.
type personTrail struct {
	userJSON
	Total  int64           `json:"total"`
	Events []userEventJSON `json:"events"`
}

// warningsPage is the answer of GET /warnings.
type warningsPage struct {
	Kind     string
	Total    uint64
	Warnings []warningJSON
}

// sendEvents posts body to app's events endpoint and returns the answer.
func sendEvents(t *testing.T, ts *testServer, app, body string) string {
	t.Helper()
	code, _, b := ts.do(t, "POST", "api/apps/"+app+"/events", body)
	if code != 200 {
		t.Fatalf("events: %d %s", code, b)
	}
	return string(b)
}

// funnelUsers answers a view → signup funnel's users per step.
func funnelUsers(t *testing.T, ts *testServer, app string) string {
	t.Helper()
	q := `{"kind": "funnel", "range": {"from": "2026-01-01", "to": "2026-02-01"}, "tz": "UTC",
		"steps": [{"event": "view"}, {"event": "signup"}], "window": "30d"}`
	code, _, b := ts.do(t, "POST", "api/apps/"+app+"/query", q)
	if code != 200 {
		t.Fatalf("funnel: %d %s", code, b)
	}
	r := decode[struct{ Steps []struct{ Users int64 } }](t, b)
	var out []string
	for _, s := range r.Steps {
		out = append(out, fmt.Sprint(s.Users))
	}
	return strings.Join(out, ",")
}

// TestEventsAnonymousIDJoinsPersons: an event with user_id and
// anonymous_id joins the anonymous person into the account's, visible
// on the acknowledgement: the funnel started anonymously converts once,
// and the person page and its trail answer by either id (also through
// /users); a bad anonymous_id rejects its event only, naming the field.
func TestEventsAnonymousIDJoinsPersons(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	sendEvents(t, ts, "shop", `[{"user_id": "d1", "event": "view", "timestamp": "2026-01-02T10:00:00Z", "user_properties": {"plan": "free"}},
		{"user_id": "d2", "event": "view", "timestamp": "2026-01-02T11:00:00Z"}]`)
	if got := funnelUsers(t, ts, "shop"); got != "2,0" {
		t.Fatalf("before any signup: funnel %s", got)
	}
	ans := sendEvents(t, ts, "shop", `[{"user_id": "u1", "anonymous_id": "d1", "event": "signup", "timestamp": "2026-01-02T10:05:00Z",
		"user_properties": {"plan": "pro"}}, {"user_id": "u9", "anonymous_id": "", "event": "signup"}]`)
	if !strings.Contains(ans, `"accepted":1`) || !strings.Contains(ans, `{"index":1,"field":"anonymous_id"`) {
		t.Fatalf("answer %s", ans)
	}
	if got := funnelUsers(t, ts, "shop"); got != "2,1" {
		t.Fatalf("after identify(u1, d1): funnel %s, want 2,1 (d1 and u1 are one converting person)", got)
	}
	for _, path := range []string{"persons/d1", "persons/u1", "users/d1"} {
		code, _, b := ts.do(t, "GET", "api/apps/shop/"+path, "")
		p := decode[userJSON](t, b)
		if code != 200 || p.PersonID != "u1" || p.UserID != "u1" || !slices.Equal(p.DistinctIDs, []string{"d1", "u1"}) || p.Properties["plan"] != "pro" {
			t.Fatalf("%s: %d %s", path, code, b)
		}
	}
	var first []byte
	for _, path := range []string{"persons/d1/events", "users/u1/events"} {
		code, _, b := ts.do(t, "GET", "api/apps/shop/"+path+"?tz=UTC", "")
		tr := decode[personTrail](t, b)
		var got []string
		for _, e := range tr.Events {
			got = append(got, e.DistinctID+":"+e.Event)
		}
		if code != 200 || tr.PersonID != "u1" || tr.Total != 2 || strings.Join(got, " ") != "d1:view u1:signup" {
			t.Fatalf("%s: %d %s", path, code, b)
		}
		if first != nil && string(first) != string(b) {
			t.Fatalf("%s answers differently:\n%s\n%s", path, first, b)
		}
		first = b
	}
	// Integer ids are strings; an anonymous_id given twice rejects its event.
	ans = sendEvents(t, ts, "shop", `[{"user_id": 5, "anonymous_id": 6, "event": "signup"},
		{"user_id": "u7", "anonymous_id": "a", "anonymous_id": "b", "event": "signup"}]`)
	if !strings.Contains(ans, `"accepted":1`) || !strings.Contains(ans, `{"index":1,"field":"anonymous_id","message":"given twice"}`) {
		t.Fatalf("answer %s", ans)
	}
	if code, _, b := ts.do(t, "GET", "api/apps/shop/persons/6", ""); code != 200 || decode[userJSON](t, b).PersonID != "5" {
		t.Fatalf("persons/6: %d %s", code, b)
	}
	// A distinct id the graph does not hold is a person of its own.
	code, _, b := ts.do(t, "GET", "api/apps/shop/persons/d2/events", "")
	if tr := decode[personTrail](t, b); code != 200 || tr.PersonID != "d2" || !slices.Equal(tr.DistinctIDs, []string{"d2"}) || tr.Total != 1 || tr.Events[0].DistinctID != "d2" {
		t.Fatalf("d2: %d %s", code, b)
	}
	code, _, b = ts.do(t, "GET", "api/apps/shop/users?id=d1&id=d2", "")
	if code != 200 || !strings.Contains(string(b), `{"user_id":"d1","person_id":"u1","distinct_ids":["d1","u1"]`) ||
		!strings.Contains(string(b), `{"user_id":"d2","properties":{}}`) {
		t.Fatalf("users: %d %s", code, b)
	}
}

// TestEventsAnonymousIDNeedsIdentityIngester: an Ingester that takes no
// identity operations refuses a request with anonymous ids whole.
func TestEventsAnonymousIDNeedsIdentityIngester(t *testing.T) {
	f := &fakeIngester{}
	ts := start(t, Config{Store: emptyStore(t), Ingester: f})
	code, _, b := ts.do(t, "POST", "api/apps/shop/events", `[{"user_id": "u", "anonymous_id": "d", "event": "e"}]`)
	if code != 400 || decodeError(t, b).Error.Field != "anonymous_id" || len(f.calledWith()) != 0 {
		t.Fatalf("%d %s", code, b)
	}
}

// TestIdentityEventsVisibleOnAck: $identify, $create_alias and
// $merge_dangerously events join persons in the store; the person page
// read right after each acknowledgement shows it, and the events
// themselves are stored.
func TestIdentityEventsVisibleOnAck(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	sendEvents(t, ts, "app", `[{"user_id": "anon", "event": "view", "timestamp": "2026-01-03T00:00:00Z"},
		{"user_id": "phone", "event": "view", "timestamp": "2026-01-04T00:00:00Z"},
		{"user_id": "other", "event": "view", "timestamp": "2026-01-05T00:00:00Z"}]`)
	steps := []struct{ body, id, person, ids string }{
		{`{"user_id": "acct", "event": "$identify", "timestamp": "2026-01-03T01:00:00Z", "properties": {"$anon_distinct_id": "anon"}}`, "anon", "acct", "acct anon"},
		{`{"user_id": "acct", "event": "$create_alias", "timestamp": "2026-01-04T01:00:00Z", "properties": {"alias": "phone"}}`, "phone", "acct", "acct anon phone"},
		{`{"user_id": "acct", "event": "$merge_dangerously", "timestamp": "2026-01-05T01:00:00Z", "properties": {"alias": "other"}}`, "other", "acct", "acct anon other phone"},
	}
	for i, s := range steps {
		if ans := sendEvents(t, ts, "app", s.body); ans != "{\"accepted\":1,\"rejected\":[]}\n" {
			t.Fatalf("step %d: %s", i, ans)
		}
		code, _, b := ts.do(t, "GET", "api/apps/app/persons/"+s.id, "")
		p := decode[userJSON](t, b)
		if code != 200 || p.PersonID != s.person || strings.Join(p.DistinctIDs, " ") != s.ids {
			t.Fatalf("step %d: %d %s", i, code, b)
		}
	}
	code, _, b := ts.do(t, "GET", "api/apps/app/persons/other/events?limit=3&offset=1", "")
	tr := decode[personTrail](t, b)
	var got []string
	for _, e := range tr.Events {
		got = append(got, e.DistinctID+":"+e.Event)
	}
	if code != 200 || tr.Total != 6 || strings.Join(got, " ") != "acct:$identify phone:view acct:$create_alias" {
		t.Fatalf("merged trail page: %d %s", code, b)
	}
}

// TestMergePersonsEndpoint: POST /persons/merge joins two persons (admin
// keys only), visible at once; bad bodies and ids are 400 naming the
// field, an unknown app 404.
func TestMergePersonsEndpoint(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	sendEvents(t, ts, "app", `[{"user_id": "a", "event": "view", "timestamp": "2026-01-02T00:00:00Z"},
		{"user_id": "b", "event": "signup", "timestamp": "2026-01-03T00:00:00Z"}]`)
	qk, _, err := ts.srv.Keys().Create(ScopeQuery, "app", "")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, b := ts.do(t, "POST", "api/apps/app/persons/merge", `{"ids": ["b", "a"]}`, "Authorization", "Bearer "+qk); code != 403 {
		t.Fatalf("query key merged: %d %s", code, b)
	}
	code, _, b := ts.do(t, "POST", "api/apps/app/persons/merge", `{"ids": ["b", "a"]}`)
	if code != 200 || !strings.Contains(string(b), `"merged":["b","a"]`) || !strings.Contains(string(b), `"distinct_ids":["a","b"]`) {
		t.Fatalf("merge: %d %s", code, b)
	}
	code, _, b = ts.do(t, "GET", "api/apps/app/persons/a/events", "")
	if tr := decode[personTrail](t, b); code != 200 || tr.Total != 2 || !slices.Equal(tr.DistinctIDs, []string{"a", "b"}) {
		t.Fatalf("after merge: %d %s", code, b)
	}
	for _, c := range []struct{ body, field string }{
		{``, "body"}, {`[]`, "body"}, {`{"ids": ["a"]}`, "ids"}, {`{"ids": ["a", "b", "c"]}`, "ids"}, {`{}`, "ids"},
		{`{"ids": ["a", 7]}`, "ids[1]"}, {`{"ids": ["", "a"]}`, "ids[0]"}, {`{"ids": ["a", "` + strings.Repeat("x", 1000) + `"]}`, "ids[1]"},
		{`{"ids": ["a", "b"], "force": true}`, "body"}, {`{"ids": ["a", "b"]} {}`, "body"},
	} {
		code, _, b := ts.do(t, "POST", "api/apps/app/persons/merge", c.body)
		if e := decodeError(t, b); code != 400 || e.Error.Field != c.field {
			t.Errorf("body %.40q: %d %s, want 400 field %s", c.body, code, b, c.field)
		}
	}
	if code, _, b := ts.do(t, "POST", "api/apps/app/persons/merge", `{"ids": ["a", "`+strings.Repeat("x", 5000)+`"]}`); code != 413 {
		t.Fatalf("body over the limit: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "POST", "api/apps/nope/persons/merge", `{"ids": ["a", "b"]}`); code != 404 {
		t.Fatalf("unknown app: %d %s", code, b)
	}
	if code, hdr, _ := ts.do(t, "PUT", "api/apps/app/persons/merge", `{"ids": ["a", "b"]}`); code != 405 || hdr.Get("Allow") == "" {
		t.Fatalf("PUT: %d %v", code, hdr)
	}
}

// TestWarningsIdentity: a refused merge (identify of an anonymous id
// whose person is identified already) is listed newest first with its
// ids, counted in total and in spur_identity_refused_total, and the
// request that carried it does not fail.
func TestWarningsIdentity(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	code, _, b := ts.do(t, "GET", "api/apps/app/warnings?kind=identity", "")
	if code != 404 {
		t.Fatalf("unknown app: %d %s", code, b)
	}
	sendEvents(t, ts, "app", `[{"user_id": "u1", "anonymous_id": "d1", "event": "signup", "timestamp": "2026-01-02T00:00:00Z"}]`)
	code, _, b = ts.do(t, "GET", "api/apps/app/warnings", "")
	if code != 200 || string(b) != `{"kind":"identity","limit":100,"offset":0,"total":0,"warnings":[]}`+"\n" {
		t.Fatalf("no refusal: %d %s", code, b)
	}
	ans := sendEvents(t, ts, "app", `[{"user_id": "u2", "anonymous_id": "d1", "event": "login", "timestamp": "2026-01-03T00:00:00Z"},
		{"user_id": "u3", "event": "$identify", "timestamp": "2026-01-04T00:00:00.5Z", "properties": {"$anon_distinct_id": "u1"}}]`)
	if ans != "{\"accepted\":2,\"rejected\":[]}\n" {
		t.Fatalf("refusals failed their request: %s", ans)
	}
	code, _, b = ts.do(t, "GET", "api/apps/app/warnings?kind=identity", "")
	w := decode[warningsPage](t, b)
	if code != 200 || w.Kind != "identity" || w.Total != 2 || len(w.Warnings) != 2 {
		t.Fatalf("warnings: %d %s", code, b)
	}
	newest, oldest := w.Warnings[0], w.Warnings[1]
	if newest.Op != "identify" || newest.IDs != [2]string{"u3", "u1"} || newest.Time == nil || *newest.Time != "2026-01-04T00:00:00.5Z" ||
		oldest.IDs != [2]string{"u2", "d1"} || newest.Seq <= oldest.Seq || newest.Reason == "" {
		t.Fatalf("warnings: %s", b)
	}
	if code, _, b := ts.do(t, "GET", "api/apps/app/warnings?offset=1&limit=1", ""); code != 200 || !strings.Contains(string(b), `"ids":["u2","d1"]`) || strings.Contains(string(b), "u3") {
		t.Fatalf("page: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "GET", "api/apps/app/warnings?kind=schema", ""); code != 400 || decodeError(t, b).Error.Field != "kind" {
		t.Fatalf("unknown kind: %d %s", code, b)
	}
	code, _, b = ts.do(t, "GET", "metrics", "")
	if code != 200 || !strings.Contains(string(b), `spur_identity_refused_total{app="app"} 2`) {
		t.Fatalf("metrics: %d %s", code, b)
	}
}
