package server

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

type docResp struct {
	ID      string          `json:"id"`
	Version int64           `json:"version"`
	Name    string          `json:"name"`
	Query   json.RawMessage `json:"query"`
	Tiles   []dashboardTile `json:"tiles"`
}

// TestInsightsAndDashboards: create, read, list, update (a stale version
// gets 409), delete; the query is stored as given; documents survive a
// new Server on the same store.
func TestInsightsAndDashboards(t *testing.T) {
	st := openCardano(t)
	ts := start(t, Config{Store: st})
	q := `{"kind":"trend","range":{"from":"2021-05-01","to":"2021-06-01"},"interval":"day","series":[{"event":"signup","math":"users"}]}`
	code, hdr, b := ts.do(t, "POST", "api/apps/cardano/insights", `{"name":"Daily signups","query":`+q+`}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	ins := decode[docResp](t, b)
	if ins.Version != 1 || ins.Name != "Daily signups" || string(ins.Query) != q || hdr.Get("Location") != "/api/apps/cardano/insights/"+ins.ID {
		t.Fatalf("created %s (Location %q)", b, hdr.Get("Location"))
	}
	for _, bad := range []struct{ body, field string }{
		{`{"query":` + q + `}`, "name"},
		{`{"name":"x"}`, "query"},
		{`{"name":"x","query":{"kind":"trend","bogus":1}}`, "query.bogus"},
		{`{"name":"x","query":{"kind":"trend","app":"otto"}}`, "query.app"},
		{`{"name":"x","query":` + q + `,"extra":1}`, "extra"},
	} {
		code, _, b := ts.do(t, "POST", "api/apps/cardano/insights", bad.body)
		if e := decodeError(t, b); code != 400 || e.Error.Field != bad.field {
			t.Errorf("%s: %d %s, want 400 on %s", bad.body, code, b, bad.field)
		}
	}
	path := "api/apps/cardano/insights/" + ins.ID
	code, _, b = ts.do(t, "PUT", path, `{"version":1,"name":"Daily signups (users)","query":`+q+`}`)
	if code != 200 || decode[docResp](t, b).Version != 2 {
		t.Fatalf("update: %d %s", code, b)
	}
	code, _, b = ts.do(t, "PUT", path, `{"version":1,"name":"stale","query":`+q+`}`)
	if e := decodeError(t, b); code != 409 || e.Error.Code != CodeConflict {
		t.Fatalf("stale update: %d %s", code, b)
	}
	code, _, b = ts.do(t, "PUT", path, `{"name":"no version","query":`+q+`}`)
	if e := decodeError(t, b); code != 400 || e.Error.Field != "version" {
		t.Fatalf("update without version: %d %s", code, b)
	}
	code, _, b = ts.do(t, "POST", "api/apps/cardano/dashboards", `{"name":"Growth","tiles":[{"insight":"`+ins.ID+`","width":2}]}`)
	if code != 201 {
		t.Fatalf("create dashboard: %d %s", code, b)
	}
	dash := decode[docResp](t, b)
	code, _, b = ts.do(t, "POST", "api/apps/cardano/dashboards", `{"name":"Bad","tiles":[{"insight":"Not An Id"}]}`)
	if e := decodeError(t, b); code != 400 || e.Error.Field != "tiles[0].insight" {
		t.Fatalf("bad tile: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "PATCH", path, ""); code != 405 {
		t.Fatalf("PATCH: %d %s", code, b)
	}
	if code, _, _ := ts.do(t, "GET", "api/apps/nope/insights", ""); code != 404 {
		t.Fatalf("unknown app: %d", code)
	}
	if code, _, _ := ts.do(t, "GET", "api/apps/cardano/insights/zzz", ""); code != 404 {
		t.Fatalf("unknown insight: %d", code)
	}
	ts.stop(t)

	// A new server over the same store (a restart) serves the same docs.
	ts2 := start(t, Config{Store: st})
	code, _, b = ts2.do(t, "GET", "api/apps/cardano/insights", "")
	list := decode[map[string][]docResp](t, b)["insights"]
	if code != 200 || len(list) != 1 || list[0].Version != 2 || string(list[0].Query) != q {
		t.Fatalf("after restart: %d %s", code, b)
	}
	code, _, b = ts2.do(t, "GET", "api/apps/cardano/dashboards/"+dash.ID, "")
	if d := decode[docResp](t, b); code != 200 || len(d.Tiles) != 1 || d.Tiles[0].Insight != ins.ID || d.Tiles[0].Width != 2 {
		t.Fatalf("dashboard after restart: %d %s", code, b)
	}
	if code, _, b := ts2.do(t, "DELETE", "api/apps/cardano/dashboards/"+dash.ID+"?version=7", ""); code != 409 {
		t.Fatalf("stale delete: %d %s", code, b)
	}
	if code, _, b := ts2.do(t, "DELETE", "api/apps/cardano/dashboards/"+dash.ID+"?version=1", ""); code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, _, _ := ts2.do(t, "GET", "api/apps/cardano/dashboards/"+dash.ID, ""); code != 404 {
		t.Fatalf("deleted dashboard: %d", code)
	}
}

// TestInsightResultCache: an insight's result is the query's answer,
// served from the cache until the catalog version changes (an import) or
// the insight's query does.
func TestInsightResultCache(t *testing.T) {
	st := openCardano(t)
	ts := start(t, Config{Store: st})
	code, _, b := ts.do(t, "POST", "api/apps/cardano/insights", `{"name":"Funnel","query":`+funnelQuery+`}`)
	if code != 201 {
		t.Fatalf("%d %s", code, b)
	}
	id := decode[docResp](t, b).ID
	type resultResp struct {
		Cached         bool               `json:"cached"`
		CatalogVersion int64              `json:"catalog_version"`
		AgeSeconds     float64            `json:"age_seconds"`
		Result         query.FunnelResult `json:"result"`
	}
	get := func(extra string) resultResp {
		t.Helper()
		code, _, b := ts.do(t, "GET", "api/apps/cardano/insights/"+id+"/result"+extra, "")
		if code != 200 {
			t.Fatalf("result: %d %s", code, b)
		}
		return decode[resultResp](t, b)
	}
	first := get("")
	_, _, direct := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery)
	want := decode[query.FunnelResult](t, direct)
	if first.Cached || len(first.Result.Steps) != 3 || first.Result.Steps[2].Users != want.Steps[2].Users {
		t.Fatalf("first result %+v, want the query's %+v", first, want.Steps)
	}
	second := get("")
	if !second.Cached || second.CatalogVersion != first.CatalogVersion || second.Result.Steps[0].Users != first.Result.Steps[0].Users {
		t.Fatalf("second result not from the cache: %+v", second)
	}
	if get("?refresh=1").Cached {
		t.Fatal("refresh=1 served the cache")
	}
	// A new import: a new catalog version, a fresh answer that counts it.
	evs := []event.Event{{UserID: "new-user", Time: 1_620_000_000_000_000, Name: "signup"}}
	if _, err := st.Import(context.Background(), "cardano", []storage.Source{&evSource{evs: evs}}, storage.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	third := get("")
	if third.Cached || third.CatalogVersion == first.CatalogVersion || third.Result.Steps[0].Users != first.Result.Steps[0].Users+1 {
		t.Fatalf("after an import: %+v (before %d users at step 1)", third, first.Result.Steps[0].Users)
	}
}

type evSource struct{ evs []event.Event }

func (s *evSource) Next(ev *event.Event) error {
	if len(s.evs) == 0 {
		return io.EOF
	}
	*ev, s.evs = s.evs[0], s.evs[1:]
	return nil
}

// TestSavedCohortsAPI: cohorts saved through the API are checked like a
// query's cohort, used by queries by name, versioned like documents.
func TestSavedCohortsAPI(t *testing.T) {
	st := openCardano(t)
	ts := start(t, Config{Store: st})
	def := `{"performed":{"event":"answer"},"count":{"op":"gte","value":2}}`
	code, _, b := ts.do(t, "POST", "api/apps/cardano/cohorts", `{"name":"answerers","definition":`+def+`}`)
	if code != 201 {
		t.Fatalf("%d %s", code, b)
	}
	if code, _, b := ts.do(t, "POST", "api/apps/cardano/cohorts", `{"name":"answerers","definition":`+def+`}`); code != 409 {
		t.Fatalf("second create: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "POST", "api/apps/cardano/cohorts", `{"name":"bad","definition":{"performed":{"event":"answer"},"count":{"op":"most"}}}`); code != 400 || !strings.HasPrefix(decodeError(t, b).Error.Field, "definition") {
		t.Fatalf("bad definition: %d %s", code, b)
	}
	code, _, b = ts.do(t, "POST", "api/apps/cardano/query", `{"kind":"cohort","cohort":"answerers","list":{"limit":5}}`)
	res := decode[query.CohortResult](t, b)
	if code != 200 || res.Users == 0 {
		t.Fatalf("query by saved name: %d %s", code, b)
	}
	code, _, b = ts.do(t, "PUT", "api/apps/cardano/cohorts/answerers", `{"version":1,"name":"answerers","definition":{"performed":{"event":"answer"},"count":{"op":"gte","value":5}},"description":"5+"}`)
	if code != 200 || decode[docResp](t, b).Version != 2 {
		t.Fatalf("update: %d %s", code, b)
	}
	if code, _, b := ts.do(t, "PUT", "api/apps/cardano/cohorts/answerers", `{"version":1,"name":"answerers","definition":`+def+`}`); code != 409 {
		t.Fatalf("stale update: %d %s", code, b)
	}
	_, _, b = ts.do(t, "POST", "api/apps/cardano/query", `{"kind":"cohort","cohort":"answerers"}`)
	if n := decode[query.CohortResult](t, b).Users; n >= res.Users || n == 0 {
		t.Fatalf("after the update %d users, before %d", n, res.Users)
	}
	if code, _, b := ts.do(t, "DELETE", "api/apps/cardano/cohorts/answerers", ""); code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, _, _ := ts.do(t, "POST", "api/apps/cardano/query", `{"kind":"cohort","cohort":"answerers"}`); code != 404 {
		t.Fatalf("deleted cohort still queried: %d", code)
	}
}

// TestUserEndpoints: a listed user's properties and trail.
func TestUserEndpoints(t *testing.T) {
	st := openCardano(t)
	ts := start(t, Config{Store: st})
	_, _, b := ts.do(t, "POST", "api/apps/cardano/query", `{"kind":"cohort","cohort":{"performed":{"event":"answer"},"count":{"op":"gte","value":3}},"list":{"limit":3}}`)
	ids := decode[query.CohortResult](t, b).UserIDs
	if len(ids) != 3 {
		t.Fatalf("ids %v", ids)
	}
	code, _, b := ts.do(t, "GET", "api/apps/cardano/users?id="+ids[0]+"&id="+ids[1], "")
	users := decode[map[string][]userJSON](t, b)["users"]
	if code != 200 || len(users) != 2 || users[0].UserID != ids[0] || len(users[0].Properties) == 0 {
		t.Fatalf("users: %d %s", code, b)
	}
	code, _, b = ts.do(t, "GET", "api/apps/cardano/users/"+ids[0]+"/events?limit=1000&tz=Asia/Tokyo", "")
	type eventsResp struct {
		Total  int64           `json:"total"`
		Events []userEventJSON `json:"events"`
	}
	er := decode[eventsResp](t, b)
	answers := 0
	for i, e := range er.Events {
		if e.Event == "answer" {
			answers++
		}
		if i > 0 && e.Time < er.Events[i-1].Time || !strings.HasSuffix(e.Time, "+09:00") {
			t.Fatalf("event %d at %s: not in time order in Asia/Tokyo", i, e.Time)
		}
	}
	if code != 200 || er.Total != int64(len(er.Events)) || answers < 3 {
		t.Fatalf("events: %d, %d of %d, %d answers", code, len(er.Events), er.Total, answers)
	}
	_, _, b = ts.do(t, "GET", "api/apps/cardano/users/"+ids[0]+"/events?offset=1&limit=2&tz=Asia/Tokyo", "")
	if p := decode[eventsResp](t, b); len(p.Events) != 2 || p.Events[0].Time != er.Events[1].Time || p.Total != er.Total {
		t.Fatalf("page: %+v", p)
	}
	for _, bad := range []string{"users/x/events?limit=0", "users/x/events?offset=-1", "users/x/events?tz=Mars/Base", "users"} {
		if code, _, b := ts.do(t, "GET", "api/apps/cardano/"+bad, ""); code != 400 {
			t.Errorf("%s: %d %s", bad, code, b)
		}
	}
	code, _, b = ts.do(t, "GET", "api/apps/cardano/users/nobody", "")
	if u := decode[userJSON](t, b); code != 200 || len(u.Properties) != 0 {
		t.Fatalf("unknown user: %d %s", code, b)
	}
}

// TestQueryCSV: ?output=csv answers the same numbers as the JSON.
func TestQueryCSV(t *testing.T) {
	st := openCardano(t)
	ts := start(t, Config{Store: st})
	_, _, jb := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery)
	want := decode[query.FunnelResult](t, jb)
	code, hdr, b := ts.do(t, "POST", "api/apps/cardano/query?output=csv", funnelQuery)
	if code != 200 || hdr.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("%d %q %s", code, hdr.Get("Content-Type"), b)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(rows) != 4 {
		t.Fatalf("%v: %q", err, b)
	}
	for i, s := range want.Steps {
		if rows[i+1][1] != strconv.Itoa(s.Step) || rows[i+1][4] != fmt.Sprint(s.Users) {
			t.Fatalf("row %d %v, step %+v", i+1, rows[i+1], s)
		}
	}
	if code, _, b := ts.do(t, "POST", "api/apps/cardano/query?output=xml", funnelQuery); code != 400 || decodeError(t, b).Error.Field != "output" {
		t.Fatalf("output=xml: %d %s", code, b)
	}
}

// TestEndpointScopes: every saved-document and user endpoint declares the
// scope an authentication middleware will ask for.
func TestEndpointScopes(t *testing.T) {
	srv, err := New(Config{Store: openCardano(t), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range srv.endpoints() {
		if e.scope != ScopeQuery || !strings.HasPrefix(e.path, "/api/apps/{app}/") {
			t.Errorf("%s %s: scope %q", e.method, e.path, e.scope)
		}
	}
}

// TestRelativeRangeKey: a relative range is run with "now" pinned to the
// minute and keyed by it; an absolute one is not.
func TestRelativeRangeKey(t *testing.T) {
	for _, c := range []struct {
		q   string
		rel bool
	}{
		{`{"kind":"trend","range":{"last":"7d"}}`, true},
		{`{"kind":"trend","range":{"from":"2021-01-01","to":"2021-02-01"}}`, false},
		{`{"kind":"trend"}`, false},
	} {
		if got := relativeRange(json.RawMessage(c.q)); got != c.rel {
			t.Errorf("%s: relative %v", c.q, got)
		}
	}
	st := openCardano(t)
	a, _ := st.App("cardano")
	raw := json.RawMessage(`{"kind":"trend","range":{"last":"7d"}}`)
	k1, now, err := cacheKey(a, 1, &query.Query{Kind: "trend"}, raw)
	if err != nil || now == "" {
		t.Fatalf("relative: now %q, %v", now, err)
	}
	if k2, _, _ := cacheKey(a, 2, &query.Query{Kind: "trend"}, raw); k2 == k1 {
		t.Fatal("the catalog version is not in the key")
	}
}

// TestInsightResultCacheLiveEvents: an acknowledged live event changes the
// data version, so a cached insight answer is recomputed and counts it.
func TestInsightResultCacheLiveEvents(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	auth := "Bearer " + ingestKey(t, ts, "shop")
	send := func(user string) {
		t.Helper()
		body := `[{"user_id":"` + user + `","event":"buy","timestamp":"2026-01-05T10:00:00Z"}]`
		if code, _, b := ts.do(t, "POST", "api/apps/shop/events", body, "Authorization", auth); code != 200 {
			t.Fatalf("events: %d %s", code, b)
		}
	}
	send("u1")
	q := `{"kind":"trend","range":{"from":"2026-01-01","to":"2026-02-01"},"interval":"month","series":[{"event":"buy"}]}`
	code, _, b := ts.do(t, "POST", "api/apps/shop/insights", `{"name":"Buys","query":`+q+`}`)
	if code != 201 {
		t.Fatalf("%d %s", code, b)
	}
	id := decode[docResp](t, b).ID
	type resultResp struct {
		Cached bool              `json:"cached"`
		Result query.TrendResult `json:"result"`
	}
	get := func() resultResp {
		t.Helper()
		code, _, b := ts.do(t, "GET", "api/apps/shop/insights/"+id+"/result", "")
		if code != 200 {
			t.Fatalf("result: %d %s", code, b)
		}
		return decode[resultResp](t, b)
	}
	if r := get(); r.Cached || r.Result.Series[0].Total != 1 {
		t.Fatalf("first: %+v", r)
	}
	if r := get(); !r.Cached {
		t.Fatal("second not cached")
	}
	send("u2")
	if r := get(); r.Cached || r.Result.Series[0].Total != 2 {
		t.Fatalf("after a live event: cached %v, total %v, want a fresh 2", r.Cached, r.Result.Series[0].Total)
	}
}
