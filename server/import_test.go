package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/storage"
)

// eventCount returns the events of app via GET /api/apps (-1 if absent).
func eventCount(t *testing.T, ts *testServer, app string) int64 {
	t.Helper()
	code, _, body := ts.do(t, "GET", "api/apps", "")
	if code != 200 {
		t.Fatalf("apps: %d %s", code, body)
	}
	var out struct{ Apps []appSummary }
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	for _, a := range out.Apps {
		if a.Name == app {
			return a.Events
		}
	}
	return -1
}

func trendTotal(t *testing.T, ts *testServer, app, event string) float64 {
	t.Helper()
	code, _, body := ts.do(t, "POST", "api/apps/"+app+"/query",
		`{"kind": "trend", "range": {"from": "2024-01-01", "to": "2024-02-01"}, "series": [{"event": "`+event+`"}]}`)
	if code != 200 {
		t.Fatalf("query: %d %s", code, body)
	}
	var res struct {
		Series []struct{ Total float64 } `json:"series"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	return res.Series[0].Total
}

const goodCSV = "user_id,timestamp,event,price\n" +
	"u1,2024-01-02T10:00:00Z,view,10\n" +
	"u1,2024-01-02T10:05:00Z,buy,10\n" +
	"u2,2024-01-03 08:00:00,view,12\n"

func TestImportAppliesAtomically(t *testing.T) {
	st, err := storage.Open(storage.Config{Dir: t.TempDir(), Shards: 2, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := start(t, Config{Store: st})

	code, _, body := ts.do(t, "POST", "api/apps/shop/import?name=events.csv", goodCSV)
	if code != 200 {
		t.Fatalf("import: %d %s", code, body)
	}
	var rep importResponse
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Applied != 3 || rep.Read != 3 || rep.Segments == 0 || rep.App != "shop" {
		t.Errorf("report %+v", rep)
	}
	if got := trendTotal(t, ts, "shop", "view"); got != 2 {
		t.Errorf("views after import: %v", got)
	}

	// Bad rows abort the whole import with positioned errors: nothing applied.
	bad := "user_id,timestamp,event,price\n" +
		"u3,2024-01-04T00:00:00Z,view,5\n" +
		"u3,not a time,view,5\n" +
		",2024-01-05T00:00:00Z,view,5\n"
	code, _, body = ts.do(t, "POST", "api/apps/shop/import?name=more.csv", bad)
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("bad import: %d %s", code, body)
	}
	e := decodeError(t, body)
	if e.Error.Code != CodeInvalidInput || len(e.Error.Errors) != 2 {
		t.Fatalf("error %+v", e.Error)
	}
	for i, want := range []struct {
		line  int64
		field string
	}{{3, "timestamp"}, {4, "user_id"}} {
		re := e.Error.Errors[i]
		if re.File != "more.csv" || re.Line != want.line || re.Field != want.field || re.Message == "" ||
			!strings.HasPrefix(re.Position, "more.csv:") {
			t.Errorf("row error %d: %+v, want line %d field %q", i, re, want.line, want.field)
		}
	}
	if n := eventCount(t, ts, "shop"); n != 3 {
		t.Errorf("events after the aborted import: %d, want 3", n)
	}

	// With max_errors the good rows go in and the bad ones are reported.
	code, _, body = ts.do(t, "POST", "api/apps/shop/import?name=more.csv&max_errors=5", bad)
	if code != 200 {
		t.Fatalf("tolerant import: %d %s", code, body)
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Applied != 1 || rep.Rejected != 2 || len(rep.Errors) != 2 || rep.Errors[0].Line != 3 {
		t.Errorf("report %+v", rep)
	}

	// NDJSON by Content-Type, users by parameter.
	code, _, body = ts.do(t, "POST", "api/apps/shop/import",
		`{"user_id": "u9", "timestamp": "2024-01-09T00:00:00Z", "event": "view", "price": 3}`+"\n", "Content-Type", "application/x-ndjson")
	if code != 200 {
		t.Fatalf("ndjson import: %d %s", code, body)
	}
	code, _, body = ts.do(t, "POST", "api/apps/shop/import?users=true&format=csv&time=seen", "user_id,seen,plan\nu1,2024-01-01T00:00:00Z,pro\n")
	if code != 200 || !strings.Contains(string(body), `"kind":"users"`) {
		t.Fatalf("users import: %d %s", code, body)
	}
	if n := eventCount(t, ts, "shop"); n != 5 {
		t.Errorf("events: %d, want 5", n)
	}
	if n := metricValue(t, ts.srv.met.importRows.WithLabelValues("rejected")); n != 4 {
		t.Errorf("spur_import_rows_total{result=rejected} = %v, want 4", n)
	}
}

func TestImportRequestErrors(t *testing.T) {
	st, err := storage.Open(storage.Config{Dir: t.TempDir(), Shards: 2, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := start(t, Config{Store: st, MaxImportBytes: 256})
	big := goodCSV + strings.Repeat("u5,2024-01-05T00:00:00Z,view,1\n", 20) // > 256 bytes
	for _, tc := range []struct {
		name, path, body string
		status           int
		code, field      string
	}{
		{"oversized body", "api/apps/shop/import?format=csv", big, 413, "limit_exceeded", "body"},
		{"unknown format", "api/apps/shop/import", goodCSV, 400, "invalid_query", "format"},
		{"bad time zone", "api/apps/shop/import?format=csv&tz=Mars/Olympus", goodCSV, 400, "invalid_query", "tz"},
		{"unknown parameter", "api/apps/shop/import?format=csv&fromat=csv", goodCSV, 400, "invalid_query", "fromat"},
		{"bad schema", "api/apps/shop/import?format=csv&schema=price:money", goodCSV, 400, "invalid_query", "schema"},
		{"bad app name", "api/apps/Shop!/import?format=csv", goodCSV, 400, "invalid_query", "app"},
		{"unreadable header", "api/apps/shop/import?format=csv", "a,b\n1,2\n", 422, CodeInvalidInput, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := ts.do(t, "POST", tc.path, tc.body)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %s", code, tc.status, body)
			}
			if e := decodeError(t, body); e.Error.Code != tc.code || e.Error.Field != tc.field {
				t.Errorf("error %+v, want %q field %q", e.Error, tc.code, tc.field)
			}
		})
	}
	if n := eventCount(t, ts, "shop"); n != -1 {
		t.Errorf("app shop exists with %d events after failed imports", n)
	}
}

func FuzzParseImportParams(f *testing.F) {
	for _, s := range []struct{ q, ct string }{
		{"format=csv", ""},
		{"name=a.csv.gz&user=uid&time=ts&event=ev&insert_id=id", ""},
		{"schema=price:float,n:int&tz=Europe/Berlin&users=true&max_errors=3", "text/csv"},
		{"", "application/x-ndjson; charset=utf-8"},
		{"format=parquet&schema=:int", ""},
		{"max_errors=-1&format=csv", ""},
		{"users=maybe&format=otto", ""},
		{"name=x&name=y", ""},
	} {
		f.Add(s.q, s.ct)
	}
	f.Fuzz(func(t *testing.T, rawQuery, contentType string) {
		v, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		opt, iopt, name, aerr := parseImportParams(v, contentType)
		if aerr != nil {
			if aerr.Status != 400 || aerr.Code != "invalid_query" || aerr.Field == "" || aerr.Message == "" {
				t.Fatalf("bad error %+v", aerr)
			}
			return
		}
		if name == "" || opt.Loc == nil || iopt.MaxErrors < 0 {
			t.Fatalf("incomplete options: name %q, %+v, %+v", name, opt, iopt)
		}
		if _, err := ingest.ParseFormat(string(opt.Format)); err != nil {
			t.Fatalf("format %q accepted: %v", opt.Format, err)
		}
		if opt.Users != (iopt.Kind == storage.KindUsers) {
			t.Fatalf("users %v but kind %q", opt.Users, iopt.Kind)
		}
	})
}

// runsPerShard returns, per shard of app, its runs of events: the distinct
// arrival ranks (SeqMax) of its events segments.
func runsPerShard(t *testing.T, st *storage.Store, app string) []int {
	t.Helper()
	a, err := st.App(app)
	if err != nil {
		t.Fatal(err)
	}
	c := a.Current()
	ranks := make([]map[int64]bool, c.Shards)
	for i := range ranks {
		ranks[i] = map[int64]bool{}
	}
	for _, ref := range c.Segments {
		if ref.Kind == storage.KindEvents {
			ranks[ref.Shard][ref.SeqMax] = true
		}
	}
	out := make([]int, c.Shards)
	for i, r := range ranks {
		out[i] = len(r)
	}
	return out
}

// TestImportCompactsAfterSpill: an API import that flushes more than once
// leaves one run per shard, as `spur import` does (ImportCompactMinRuns);
// with no_compact=true it leaves the runs it wrote.
func TestImportCompactsAfterSpill(t *testing.T) {
	var b strings.Builder
	b.WriteString("user_id,timestamp,event,price\n")
	const rows = 200_000
	for i := range rows {
		fmt.Fprintf(&b, "u%d,2024-01-%02dT10:%02d:00Z,view,%d\n", i%50_000, 1+i%28, i%60, i)
	}
	body := b.String()
	for _, noCompact := range []bool{false, true} {
		st, err := storage.Open(storage.Config{Dir: t.TempDir(), Shards: 2, WriteMemory: 16 << 20, Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		ts := start(t, Config{Store: st})
		path := "api/apps/shop/import?name=events.csv"
		if noCompact {
			path += "&no_compact=true"
		}
		code, _, resp := ts.do(t, "POST", path, body)
		if code != 200 {
			t.Fatalf("import (no_compact %v): %d %s", noCompact, code, resp)
		}
		runs := runsPerShard(t, st, "shop")
		t.Logf("no_compact %v: runs per shard %v", noCompact, runs)
		for sh, n := range runs {
			if !noCompact && n != 1 {
				t.Errorf("shard %d: %d runs after a compacted import, want 1", sh, n)
			}
			if noCompact && n < 2 {
				t.Errorf("shard %d: %d runs with no_compact=true, want the import's several flushes", sh, n)
			}
		}
		if n := eventCount(t, ts, "shop"); n != rows {
			t.Errorf("no_compact %v: %d events, want %d", noCompact, n, rows)
		}
		ts.stop(t)
		st.Close()
	}
}
