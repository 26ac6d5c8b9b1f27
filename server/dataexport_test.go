package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/export"
	"github.com/spurdb/spur/storage"
)

// directExport is what package export writes for app of st.
func directExport(t *testing.T, st *storage.Store, app string, opt export.Options) []byte {
	t.Helper()
	a, err := st.App(app)
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	var b bytes.Buffer
	if _, err := export.Write(context.Background(), v, &b, opt); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestExportEndpoint: GET /api/apps/{app}/export streams (chunked, no
// Content-Length) the bytes package export writes, in both formats, for
// events and users; an admin key or the app's query key may read it,
// other keys may not; an unknown app is 404, bad parameters 400.
func TestExportEndpoint(t *testing.T) {
	st := openCardano(t)
	ts := start(t, Config{Store: st, Auth: AuthKeys})
	keys := keyed(t, ts)
	for _, c := range []struct {
		query string
		opt   export.Options
		ctype string
	}{
		{"", export.Options{Format: export.NDJSON}, "application/x-ndjson"},
		{"?format=parquet", export.Options{Format: export.Parquet}, "application/vnd.apache.parquet"},
		{"?format=ndjson&users=true", export.Options{Format: export.NDJSON, Users: true}, "application/x-ndjson"},
		{"?format=parquet&users=true", export.Options{Format: export.Parquet, Users: true}, "application/vnd.apache.parquet"},
		{"?from=2021-06-01&to=2021-07-01", export.Options{Format: export.NDJSON, From: 1622505600000000, To: 1625097600000000}, "application/x-ndjson"},
	} {
		want := directExport(t, st, "cardano", c.opt)
		for _, k := range []string{"admin", "query"} {
			req, _ := http.NewRequest("GET", ts.url+"api/apps/cardano/export"+c.query, nil)
			req.Header.Set("Authorization", "Bearer "+keys[k])
			resp, err := ts.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			got.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != c.ctype || resp.ContentLength != -1 ||
				!strings.Contains(resp.Header.Get("Content-Disposition"), "cardano-") {
				t.Fatalf("%s with the %s key: %d %v", c.query, k, resp.StatusCode, resp.Header)
			}
			if !bytes.Equal(got.Bytes(), want) || len(want) < 1000 {
				t.Fatalf("%s with the %s key: %d bytes, want the export's %d", c.query, k, got.Len(), len(want))
			}
		}
	}
	for _, c := range []struct {
		key, path string
		code      int
	}{
		{"", "cardano/export", 401},
		{"ingest", "cardano/export", 403},
		{"other", "cardano/export", 403},
		{"admin", "nosuchapp/export", 404},
		{"admin", "cardano/export?format=csv", 400},
		{"admin", "cardano/export?users=yes", 400},
		{"admin", "cardano/export?from=2021-06-01", 400},
		{"admin", "cardano/export?from=2021-06-01&to=never", 400},
	} {
		auth := "Bearer spur_unknown" // an unknown key (TestAuthMatrix tries no key)
		if c.key != "" {
			auth = "Bearer " + keys[c.key]
		}
		code, _, b := ts.do(t, "GET", "api/apps/"+c.path, "", "Authorization", auth)
		if code != c.code {
			t.Errorf("%s with key %q: %d %s, want %d", c.path, c.key, code, b, c.code)
		}
	}
}

// TestExportSeesLiveEvents: an export through the server holds the events
// acknowledged before it, not yet flushed to segments.
func TestExportSeesLiveEvents(t *testing.T) {
	st := liveStore(t)
	ts := start(t, Config{Store: st, MaxFuture: time.Hour})
	ev := `{"user_id":"u1","event":"signup","timestamp":"2026-01-02T03:04:05.123456Z","insert_id":"x","properties":{"n":1,"f":2.5,"ok":true,"s":"a"}}` + "\n"
	if code, _, b := ts.do(t, "POST", "api/apps/live/events", ev, "Content-Type", "application/x-ndjson"); code != 200 {
		t.Fatalf("events: %d %s", code, b)
	}
	code, _, b := ts.do(t, "GET", "api/apps/live/export?format=ndjson", "")
	if code != 200 || string(b) != `{"user_id":"u1","event":"signup","timestamp":"2026-01-02T03:04:05.123456Z","insert_id":"x","properties":{"f":2.5,"n":1,"ok":true,"s":"a"}}`+"\n" {
		t.Fatalf("export: %d %q", code, b)
	}
}

// TestExportCancelledBeforeItsFirstByte: an export whose request ends
// before anything was written gives no answer that looks like a complete
// (empty) export: a shutdown answers 503 unavailable with Retry-After, a
// client gone away has its connection aborted.
func TestExportCancelledBeforeItsFirstByte(t *testing.T) {
	st := openCardano(t)
	srv, err := New(Config{Store: st, Auth: AuthNone, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errShuttingDown)
	req := httptest.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:8080/api/apps/cardano/export", nil)
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" ||
		w.Header().Get("Content-Disposition") != "" || !strings.Contains(w.Body.String(), `"unavailable"`) {
		t.Errorf("shutting down: %d %v %s", w.Code, w.Header(), w.Body)
	}

	ctx, stop := context.WithCancel(context.Background())
	stop()
	req = httptest.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:8080/api/apps/cardano/export", nil)
	w = httptest.NewRecorder()
	func() {
		defer func() {
			if r := recover(); r != http.ErrAbortHandler {
				t.Errorf("client gone: recovered %v, want http.ErrAbortHandler (answered %d %q)", r, w.Code, w.Body)
			}
		}()
		srv.Handler().ServeHTTP(w, req)
	}()
}

// TestExportPersonsEndpoint: persons=true streams the persons rows package
// export writes, the live layer's identify included; with users=true, or
// not true or false, it is a 400.
func TestExportPersonsEndpoint(t *testing.T) {
	st := liveStore(t)
	ts := start(t, Config{Store: st, MaxFuture: time.Hour})
	ev := `{"user_id":"u1","anonymous_id":"dev-1","event":"signup","timestamp":"2026-01-02T03:04:05Z"}` + "\n"
	if code, _, b := ts.do(t, "POST", "api/apps/live/events", ev, "Content-Type", "application/x-ndjson"); code != 200 {
		t.Fatalf("events: %d %s", code, b)
	}
	code, hdr, b := ts.do(t, "GET", "api/apps/live/export?format=ndjson&persons=true", "")
	want := `{"distinct_id":"dev-1","person_id":"u1","identified":true}` + "\n" + `{"distinct_id":"u1","person_id":"u1","identified":true}` + "\n"
	if code != 200 || string(b) != want || !strings.Contains(hdr.Get("Content-Disposition"), "live-persons.ndjson") {
		t.Fatalf("persons export: %d %v %q", code, hdr, b)
	}
	code, _, b = ts.do(t, "GET", "api/apps/live/export?format=parquet&persons=true", "")
	if code != 200 || !bytes.Equal(b, directExport(t, st, "live", export.Options{Format: export.Parquet, Persons: true})) {
		t.Fatalf("Parquet persons export: %d, %d bytes", code, len(b))
	}
	for _, q := range []string{"persons=yes", "persons=true&users=true"} {
		if code, _, b := ts.do(t, "GET", "api/apps/live/export?"+q, ""); code != 400 {
			t.Errorf("%s: %d %s", q, code, b)
		}
	}
}
