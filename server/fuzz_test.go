package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// fuzzCodes are the docs/analytics.md §9 error codes an answer may carry.
var fuzzCodes = []string{query.CodeInvalidQuery, query.CodeInvalidInput, query.CodeLimitExceeded, query.CodeForbidden,
	query.CodeNotFound, query.CodeUnauthenticated, query.CodeUnavailable}

// checkAnswer fails on a 5xx answer (the store is healthy: any is a bug, a
// recovered panic included), a status outside the documented ones, or an
// error body that is not the docs/analytics.md §9 shape with a §9 code.
func checkAnswer(t *testing.T, w *httptest.ResponseRecorder, what string) {
	t.Helper()
	switch w.Code {
	case 200, 400, 401, 403, 404, 405, 408, 413, 422:
	default:
		t.Fatalf("%s: status %d: %s", what, w.Code, w.Body.Bytes())
	}
	if w.Code == 200 {
		if !json.Valid(w.Body.Bytes()) && !strings.HasPrefix(w.Header().Get("Content-Type"), "text/") {
			t.Fatalf("%s: 200 with a body that is not JSON: %.200s", what, w.Body.Bytes())
		}
		return
	}
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || !slices.Contains(fuzzCodes, e.Error.Code) || e.Error.Message == "" {
		t.Fatalf("%s: status %d with body %.300s", what, w.Code, w.Body.Bytes())
	}
	if len(e.Error.Message) > 4096 {
		t.Fatalf("%s: a message of %d bytes", what, len(e.Error.Message))
	}
}

func newFuzzServer(f *testing.F) *Server {
	st := openCardano(f)
	srv, err := New(Config{Store: st, Logger: quietLog(), Auth: AuthNone, MaxImportDecompressedBytes: 1 << 20, MaxPropertyBytes: 1 << 10})
	if err != nil {
		f.Fatal(err)
	}
	return srv
}

// FuzzQueryHandler: any body and headers on the query endpoint answer with
// a documented status and a docs/analytics.md §9 body, never a 500.
func FuzzQueryHandler(f *testing.F) {
	srv := newFuzzServer(f)
	f.Add([]byte(funnelQuery), "cardano", "", "", "")
	f.Add([]byte(`{"kind":"trend","tz":"Local","series":[{"event":"signup"},{"evnt":1}]}`), "cardano", "127.0.0.1", "", "")
	f.Add([]byte(`{"kind":"retention","range":{"from":"2021-01-01 00:00:00+00","to":"2021-03-01"},"start":{"event":"signup"},"period":"week"}`), "cardano", "localhost:1", "http://localhost:1", "same-origin")
	f.Add([]byte(`{"kind":"cohort","cohort":{"and":[{"performed":{"event":"x"}}]},"list":{"limit":5}}`), "cardano", "evil.example", "http://evil.example", "cross-site")
	f.Add([]byte("\xff\xfe{"), "Nope", "", "null", "")
	f.Fuzz(func(t *testing.T, body []byte, app, host, origin, fetchSite string) {
		path := "/api/apps/" + url.PathEscape(app) + "/query"
		req := httptest.NewRequest("POST", "http://127.0.0.1:8080/", bytes.NewReader(body))
		req.URL.Path, req.URL.RawPath = "/api/apps/"+app+"/query", path
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", fetchSite)
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		checkAnswer(t, w, "query "+string(body))
	})
}

// FuzzImportHandler: any body, parameters and content type on the import
// endpoint answer with a documented status, never a 500.
func FuzzImportHandler(f *testing.F) {
	srv := newFuzzServer(f)
	f.Add([]byte(goodCSV), "format=csv", "text/csv")
	f.Add([]byte(`{"user_id":"u1","timestamp":"2024-02-23 13:49:26.513+00","event":"e","p":"`+strings.Repeat("x", 2000)+`"}`+"\n"), "", "application/x-ndjson")
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255, 1, 2, 3}, "name=x.csv.gz", "")
	f.Add([]byte("user_id,plan\nu1,pro\n"), "users=true&format=csv&tz=Local", "")
	f.Add([]byte("PAR1garbage"), "format=parquet&max_errors=3", "")
	f.Fuzz(func(t *testing.T, body []byte, rawQuery, contentType string) {
		req := httptest.NewRequest("POST", "/api/apps/fuzz/import", bytes.NewReader(body))
		req.URL.RawQuery = rawQuery
		req.Header.Set("Content-Type", contentType)
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		checkAnswer(t, w, "import ?"+rawQuery)
	})
}

// FuzzSchemaHandler: any app name and top parameter on the schema
// endpoint, and any method, answer with a documented status.
func FuzzSchemaHandler(f *testing.F) {
	srv := newFuzzServer(f)
	f.Add("cardano", "5", "GET")
	f.Add("cardano", "-1", "GET")
	f.Add("../etc", "x", "POST")
	f.Add("", "99999999999999999999", "DELETE")
	f.Fuzz(func(t *testing.T, app, top, method string) {
		if !validMethod(method) {
			return
		}
		req := httptest.NewRequest("GET", "/", nil)
		req.Method = method
		req.URL.Path = "/api/apps/" + app + "/schema"
		req.URL.RawQuery = url.Values{"top": {top}}.Encode()
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		if w.Code == http.StatusOK && method != "GET" && method != "HEAD" {
			t.Fatalf("%s /schema answered 200", method)
		}
		checkAnswer(t, w, method+" schema "+app)
	})
}

// validMethod reports whether m is an HTTP token (what a client can send).
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range []byte(m) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}

// checkingIngester fails the test when the events endpoint hands the
// store an invalid event or a user write naming no event.
type checkingIngester struct{ t *testing.T }

func (c *checkingIngester) Ingest(_ context.Context, _ string, evs []event.Event, users []storage.UserWrite) (*storage.IngestReport, error) {
	for i := range evs {
		if err := event.ValidateEvent(&evs[i]); err != nil {
			c.t.Fatalf("the store got an invalid event: %v", err)
		}
	}
	for _, u := range users {
		if u.Index < 0 || u.Index >= len(evs) || len(u.Props) == 0 {
			c.t.Fatalf("the store got user write %+v for %d events", u, len(evs))
		}
	}
	return &storage.IngestReport{Accepted: len(evs)}, nil
}

// FuzzEventsHandler: any body, Content-Type and Content-Encoding on the
// events endpoint answer with a documented status and a docs/analytics.md §9 body, and the
// store gets only valid events; a 200 lists rejections in order.
func FuzzEventsHandler(f *testing.F) {
	ing := &checkingIngester{}
	srv, err := New(Config{Store: emptyStore(f), Logger: quietLog(), Auth: AuthNone, Ingester: ing,
		MaxEventsBytes: 1 << 16, MaxEventsDecompressedBytes: 1 << 18, EventsMemory: 8 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`[{"user_id": "u1", "event": "e", "timestamp": 1700000000, "properties": {"a": [1, {"b": 2}]}, "user_properties": {"p": 1}}]`), "application/json", "", "shop")
	f.Add([]byte("{\"user_id\": \"u1\", \"event\": \"e\"}\n{\"user_id\": 5}\n\n[]\n"), "application/x-ndjson", "", "shop")
	f.Add([]byte(gzipped(f, `[{"user_id": "u", "event": "e", "insert_id": 7}, {"event": "x"}]`)), "", "gzip", "shop")
	f.Add([]byte(`[{"user_id": "u", "event": "e", "timestamp": "2999-01-01T00:00:00Z"}, 1, "x", null]`), "text/plain", "identity", "shop")
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"), "application/json", "br", "Bad App")
	f.Fuzz(func(t *testing.T, body []byte, ctype, encoding, app string) {
		ing.t = t
		req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		req.URL.Path = "/api/apps/" + app + "/events"
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Content-Encoding", encoding)
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		checkAnswer(t, w, "events "+string(body))
		if w.Code == 200 {
			var ans eventsAnswer
			if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil || ans.Rejected == nil {
				t.Fatalf("answer %s: %v", w.Body.Bytes(), err)
			}
			for i := 1; i < len(ans.Rejected); i++ {
				if ans.Rejected[i].Index <= ans.Rejected[i-1].Index {
					t.Fatalf("rejections out of order: %s", w.Body.Bytes())
				}
			}
		}
	})
}
