package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/storage"
)

// fakeIngester records what the events endpoint hands to the store. It
// rejects, as a store's schema would, events with a property "bad", and
// returns err when set; gate, when set, holds each call until closed.
type fakeIngester struct {
	mu    sync.Mutex
	calls []fakeCall
	err   error
	gate  chan struct{}
	in    chan struct{} // receives a value as each call starts (when set)
}

type fakeCall struct {
	app   string
	evs   []event.Event
	users []storage.UserWrite
}

func (f *fakeIngester) Ingest(ctx context.Context, app string, evs []event.Event, users []storage.UserWrite) (*storage.IngestReport, error) {
	if f.in != nil {
		f.in <- struct{}{}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	c := fakeCall{app: app}
	rep := &storage.IngestReport{}
	for i, ev := range evs {
		ev.Props = slices.Clone(ev.Props)
		c.evs = append(c.evs, ev)
		for _, p := range ev.Props {
			if p.Name == "bad" {
				rep.Rejected = append(rep.Rejected, storage.IngestRejection{Index: i, Field: "properties.bad", Message: "want int, found \"x\""})
			}
		}
	}
	for _, u := range users {
		u.Props = slices.Clone(u.Props)
		c.users = append(c.users, u)
	}
	rep.Accepted = len(evs) - len(rep.Rejected)
	f.calls = append(f.calls, c)
	return rep, nil
}

func (f *fakeIngester) calledWith() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// liveStore returns an empty store taking live events (the write-ahead
// log and the live layer), closed at cleanup.
func liveStore(t testing.TB) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.Config{Dir: t.TempDir(), Shards: 2, Writer: true, Live: &storage.LiveOptions{}, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// ingestKey returns an ingest key of app.
func ingestKey(t *testing.T, ts *testServer, app string) string {
	t.Helper()
	k, _, err := ts.srv.Keys().Create(ScopeIngest, app, "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func gzipped(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestEventsEndpoint: the body forms, per-event rejections from the
// parser and the store merged by position, what the store receives, the
// answer and the metrics.
func TestEventsEndpoint(t *testing.T) {
	f := &fakeIngester{}
	ts := start(t, Config{Store: emptyStore(t), Ingester: f, MaxFuture: time.Hour})
	auth := "Bearer " + ingestKey(t, ts, "shop")
	future := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	events := []string{
		`{"user_id": "a", "event": "view", "timestamp": "2026-01-01T00:00:00Z", "insert_id": "i1", "properties": {"n": 1}}`,
		`{"user_id": "a", "event": "buy", "properties": {"bad": "x"}, "user_properties": {"plan": "pro"}}`,
		`{"user_id": "b", "event": "view", "timestamp": "` + future + `"}`,
		`{"user_id": "c", "event": "view", "user_properties_once": {"first": "web"}}`,
		`{"userId": "d", "event": "view"}`,
	}
	want := `{"accepted":2,"rejected":[{"index":1,"field":"properties.bad","message":"want int, found \"x\""},` +
		`{"index":2,"field":"timestamp","message":"` + future[:19] + `Z is more than 1h0m0s after the server's clock (`
	for _, form := range []struct {
		name, body string
		hdr        []string
	}{
		{"array", "[" + strings.Join(events, ",") + "]", nil},
		{"ndjson", strings.Join(events, "\n") + "\n", []string{"Content-Type", "application/x-ndjson; charset=utf-8"}},
		{"gzip array", gzipped(t, "["+strings.Join(events, ",")+"]"), []string{"Content-Encoding", "gzip", "Content-Type", "application/json"}},
		{"gzip ndjson", gzipped(t, strings.Join(events, "\n")), []string{"Content-Encoding", "gzip", "Content-Type", "application/x-ndjson"}},
	} {
		before := time.Now().UnixMicro()
		n := len(f.calledWith())
		code, hdr, body := ts.do(t, "POST", "api/apps/shop/events", form.body, append([]string{"Authorization", auth}, form.hdr...)...)
		if code != 200 || !strings.HasPrefix(string(body), want) || !strings.Contains(string(body), `{"index":4,"field":"userId","message":"unknown field`) ||
			hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", form.name, code, body)
		}
		calls := f.calledWith()[n:]
		if len(calls) != 1 || calls[0].app != "shop" || len(calls[0].evs) != 3 {
			t.Fatalf("%s: store calls %+v", form.name, calls)
		}
		c := calls[0]
		if c.evs[0].Time != 1767225600e6 || c.evs[0].InsertID != "i1" || c.evs[1].Name != "buy" || c.evs[2].UserID != "c" ||
			c.evs[1].Time < before || c.evs[1].Time > time.Now().UnixMicro() || c.evs[2].Pos.Line != 4 {
			t.Fatalf("%s: events %+v", form.name, c.evs)
		}
		// User writes name their event's index in what the store gets.
		if len(c.users) != 2 || c.users[0].Index != 1 || c.users[0].Once || c.users[1].Index != 2 || !c.users[1].Once ||
			c.users[1].Props[0] != (event.Prop{Name: "first", Value: event.String("web")}) {
			t.Fatalf("%s: user writes %+v", form.name, c.users)
		}
	}
	// A batch with nothing good calls no store; an empty one neither.
	n := len(f.calledWith())
	for _, body := range []string{`[{"event": "x"}]`, `[]`, ``} {
		code, _, b := ts.do(t, "POST", "api/apps/shop/events", body, "Authorization", auth, "Content-Type", "application/x-ndjson")
		if body == `[]` {
			code, _, b = ts.do(t, "POST", "api/apps/shop/events", body, "Authorization", auth)
		}
		if code != 200 || !strings.HasPrefix(string(b), `{"accepted":0,"rejected":[`) {
			t.Fatalf("%q: %d %s", body, code, b)
		}
	}
	if len(f.calledWith()) != n {
		t.Fatal("the store was called for no good event")
	}
	m := ts.srv.met
	if a, r := metricValue(t, m.ingestEvents.WithLabelValues("accepted")), metricValue(t, m.ingestEvents.WithLabelValues("rejected")); a != 8 || r != 14 {
		t.Fatalf("events metrics: %v accepted, %v rejected", a, r)
	}
	_, _, metrics := ts.do(t, "GET", "metrics", "")
	for _, want := range []string{`spur_ingest_requests_total{code="ok"} 8`, "spur_ingest_ack_seconds_count 8", "spur_ingest_body_bytes_total", "spur_ingest_request_memory_bytes 0"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestEventsErrors: whole-body errors, limits and the store's refusals,
// each with its status and code, nothing stored.
func TestEventsErrors(t *testing.T) {
	f := &fakeIngester{}
	ts := start(t, Config{Store: emptyStore(t), Ingester: f, MaxEventsBytes: 4096, MaxEventsDecompressedBytes: 8192})
	auth := "Bearer " + ingestKey(t, ts, "shop")
	ev := `{"user_id": "a", "event": "view"}`
	big := "[" + strings.Repeat(ev+",", 300) + ev + "]"
	for _, c := range []struct {
		name, path, body string
		hdr              []string
		status           int
		code, field, msg string
	}{
		{"not an array", "shop", `"x"`, nil, 400, "invalid_input", "body", "not a JSON array of events"},
		{"invalid JSON", "shop", `[` + ev + `, {"user_id": }]`, nil, 400, "invalid_input", "body", "(event 1)"},
		{"corrupt gzip", "shop", "\x1f\x8b\x08\x00garbage", nil, 400, "invalid_input", "body", "gzip"},
		{"encoding", "shop", "[]", []string{"Content-Encoding", "br"}, 400, "invalid_input", "content-encoding", `unsupported Content-Encoding "br"`},
		{"as sent", "shop", big, nil, 413, "limit_exceeded", "body", "larger than the limit of 4096 bytes; nothing was stored"},
		{"decompressed", "shop", gzipped(t, big), []string{"Content-Encoding", "gzip"}, 413, "limit_exceeded", "body", "more than the limit of 8192 bytes"},
		{"app name", "Bad_App", "[]", []string{"Authorization", "Bearer " + ts.key}, 400, "invalid_input", "app", "invalid app name"},
	} {
		hdr := append([]string{"Authorization", auth}, c.hdr...)
		code, _, body := ts.do(t, "POST", "api/apps/"+c.path+"/events", c.body, hdr...)
		e := decodeError(t, body)
		if code != c.status || e.Error.Code != c.code || e.Error.Field != c.field || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s", c.name, code, body)
		}
	}
	if len(f.calledWith()) != 0 {
		t.Fatal("the store was called")
	}
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("app shop: %w", storage.ErrBackpressure), 503, "unavailable"},
		{storage.ErrDiskFull, 503, "unavailable"},
		{&storage.LockedError{App: "shop", Holder: "spur recover (pid 1)"}, 503, "unavailable"},
		{fmt.Errorf("log file 3 at offset 99: %w", storage.ErrCorruption), 500, "corruption"},
	} {
		f.mu.Lock()
		f.err = c.err
		f.mu.Unlock()
		code, hdr, body := ts.do(t, "POST", "api/apps/shop/events", "["+ev+"]", "Authorization", auth)
		e := decodeError(t, body)
		if code != c.status || e.Error.Code != c.code || (code == 503) != (hdr.Get("Retry-After") == "1") {
			t.Errorf("%v: %d %v %s", c.err, code, hdr, body)
		}
		if c.code == "corruption" && !strings.Contains(e.Error.Message, "spur recover --app shop") {
			t.Errorf("corruption message: %s", e.Error.Message)
		}
	}
}

// TestEventsMemory: the requests being handled share EventsMemory: while
// one holds it another is answered 503 with Retry-After, one that needs
// more than all of it 413; the memory is released after the answer.
func TestEventsMemory(t *testing.T) {
	f := &fakeIngester{gate: make(chan struct{}), in: make(chan struct{}, 1)}
	ts := start(t, Config{Store: emptyStore(t), Ingester: f, EventsMemory: 1 << 20})
	auth := "Bearer " + ingestKey(t, ts, "shop")
	ev := `{"user_id": "a", "event": "view"}`
	done := make(chan int)
	go func() {
		code, _, _ := ts.do(t, "POST", "api/apps/shop/events", "["+ev+"]", "Authorization", auth)
		done <- code
	}()
	<-f.in // the first request holds its memory in the store call
	code, hdr, body := ts.do(t, "POST", "api/apps/shop/events", "["+ev+"]", "Authorization", auth)
	if code != 503 || hdr.Get("Retry-After") != "1" || !strings.Contains(string(body), "retry after a second") {
		t.Fatalf("while memory is held: %d %v %s", code, hdr, body)
	}
	close(f.gate)
	if code := <-done; code != 200 {
		t.Fatalf("the first request: %d", code)
	}
	if used := ts.srv.eventsMem.used.Load(); used != 0 {
		t.Fatalf("%d bytes held after the answers", used)
	}
	var sb strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&sb, `{"user_id": "user-%d", "event": "view", "properties": {"a": 1, "b": 2, "c": 3}}`+"\n", i)
	}
	code, _, body = ts.do(t, "POST", "api/apps/shop/events", sb.String(), "Authorization", auth, "Content-Type", "application/x-ndjson")
	if code != 413 || !strings.Contains(string(body), "send smaller batches") {
		t.Fatalf("a request over the memory: %d %s", code, body)
	}
}

// TestEventsCORS: the events endpoint answers preflights from any origin
// and cross-origin POSTs with an ingest key, its refusals readable by the
// page (CORS headers on 401 too); other endpoints refuse cross-site
// requests and send no CORS headers.
func TestEventsCORS(t *testing.T) {
	f := &fakeIngester{}
	ts := start(t, Config{Store: openCardano(t), Ingester: f})
	key := ingestKey(t, ts, "cardano")
	qkey, _, _ := ts.srv.Keys().Create(ScopeQuery, "cardano", "")
	origin := []string{"Origin", "https://shop.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors"}
	code, h, _ := ts.do(t, "OPTIONS", "api/apps/cardano/events", "", append(origin, "Authorization", "",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type,content-encoding")...)
	if code != 204 || h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "authorization") ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight: %d %v", code, h)
	}
	code, h, body := ts.do(t, "POST", "api/apps/cardano/events", `[{"user_id": "u", "event": "e"}]`, append(origin, "Authorization", "Bearer "+key)...)
	if code != 200 || h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(string(body), `"accepted":1`) {
		t.Fatalf("cross-origin POST: %d %v %s", code, h, body)
	}
	code, h, _ = ts.do(t, "POST", "api/apps/cardano/events", `[]`, append(origin, "Authorization", "Bearer spur_nope")...)
	if code != 401 || h.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("cross-origin POST with a bad key: %d %v", code, h)
	}
	code, h, _ = ts.do(t, "POST", "api/apps/cardano/query", funnelQuery, append(origin, "Authorization", "Bearer "+qkey)...)
	if code != 403 || h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("cross-origin query: %d %v", code, h)
	}
	code, h, _ = ts.do(t, "OPTIONS", "api/apps/cardano/query", "", origin...)
	if code != 403 || h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight of the query endpoint: %d %v", code, h)
	}
	if code, h, _ := ts.do(t, "GET", "api/apps/cardano/events", ""); code != 405 || h.Get("Allow") != "OPTIONS, POST" {
		t.Fatalf("GET events: %d %v", code, h)
	}
}

// TestEventsVisibleOnAck: with the store behind it (Store.Ingest), an
// acknowledged event is in the next query, its user properties are the
// user's, and a value that does not fit the app's schema rejects its
// event only.
func TestEventsVisibleOnAck(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t)})
	auth := "Bearer " + ingestKey(t, ts, "shop")
	count := func() float64 {
		q := `{"kind": "trend", "range": {"from": "2026-01-01", "to": "2026-02-01"}, "interval": "month", "series": [{"event": "buy"}]}`
		code, _, body := ts.do(t, "POST", "api/apps/shop/query", q)
		if code != 200 {
			t.Fatalf("query: %d %s", code, body)
		}
		var r struct {
			Series []struct{ Total float64 }
		}
		json.Unmarshal(body, &r)
		return r.Series[0].Total
	}
	for i := range 3 {
		body := fmt.Sprintf(`[{"user_id": "u%d", "event": "buy", "timestamp": "2026-01-0%dT10:00:00Z", "properties": {"price": %d},
			"user_properties": {"plan": "pro"}, "user_properties_once": {"first": "v%d"}}]`, i, i+1, 10+i, i)
		code, _, b := ts.do(t, "POST", "api/apps/shop/events", body, "Authorization", auth)
		if code != 200 || string(b) != "{\"accepted\":1,\"rejected\":[]}\n" {
			t.Fatalf("event %d: %d %s", i, code, b)
		}
		if n := count(); n != float64(i+1) {
			t.Fatalf("after %d acknowledged events the query counts %v", i+1, n)
		}
	}
	code, _, b := ts.do(t, "POST", "api/apps/shop/events", `[{"user_id": "u9", "event": "buy", "timestamp": "2026-01-09T00:00:00Z", "properties": {"price": "cheap"}, "user_properties": {"plan": "x"}},
		{"user_id": "u1", "event": "buy", "timestamp": "2026-01-09T00:00:00Z", "user_properties_once": {"first": "late"}}]`, "Authorization", auth)
	if code != 200 || !strings.Contains(string(b), `"accepted":1,"rejected":[{"index":0,"field":"properties.price"`) {
		t.Fatalf("schema mismatch: %d %s", code, b)
	}
	code, _, b = ts.do(t, "GET", "api/apps/shop/users?id=u1&id=u9", "")
	if code != 200 || !strings.Contains(string(b), `"plan":"pro"`) || !strings.Contains(string(b), `{"user_id":"u9","properties":{}}`) {
		t.Fatalf("users: %d %s", code, b)
	}
	// user_properties_once: the earliest write wins (u1 keeps "v1").
	q := `{"kind": "trend", "range": {"from": "2026-01-01", "to": "2026-02-01"}, "interval": "month", "series": [{"event": "buy"}],
		"breakdown": {"property": "first", "source": "user"}}`
	code, _, b = ts.do(t, "POST", "api/apps/shop/query", q)
	var r struct {
		Series []struct {
			Value string `json:"breakdown_value"`
			Total float64
		}
	}
	json.Unmarshal(b, &r)
	got := map[string]float64{}
	for _, s := range r.Series {
		got[s.Value] = s.Total
	}
	if code != 200 || fmt.Sprint(got) != "map[v0:1 v1:2 v2:1]" {
		t.Fatalf("breakdown by the set-once property: %d %v %s", code, got, b)
	}
}

// BenchmarkEventsEndpoint: the events endpoint's handler (key check,
// decompression, parse, answer) on requests of 1,000 generated events as
// gzip NDJSON, with a store that takes them at no cost: what bounds the
// server's throughput before the write-ahead log. events/s is the total
// over GOMAXPROCS goroutines.
func BenchmarkEventsEndpoint(b *testing.B) {
	srv, err := New(Config{Store: emptyStore(b), Logger: quietLog(), Ingester: nopIngester{}})
	if err != nil {
		b.Fatal(err)
	}
	key, _, err := srv.Keys().Create(ScopeIngest, "shop", "")
	if err != nil {
		b.Fatal(err)
	}
	body := benchEventsBody(b, 1000)
	h := srv.Handler()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			req, _ := http.NewRequest("POST", "http://127.0.0.1/api/apps/shop/events", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/x-ndjson")
			req.Header.Set("Content-Encoding", "gzip")
			clear(w.h)
			w.status = 0
			h.ServeHTTP(w, req)
			if w.status != 200 {
				b.Fatalf("status %d", w.status)
			}
		}
	})
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "events/s")
}

// nopIngester accepts every event at no cost.
type nopIngester struct{}

func (nopIngester) Ingest(_ context.Context, _ string, evs []event.Event, _ []storage.UserWrite) (*storage.IngestReport, error) {
	return &storage.IngestReport{Accepted: len(evs)}, nil
}

// discardWriter is a ResponseWriter that keeps the status only.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }

// benchEventsBody returns n generated events (package gen's shape, with
// insert ids and millisecond timestamps, as `spur loadgen` sends them) as
// a gzip NDJSON body.
func benchEventsBody(b testing.TB, n int) []byte {
	g, err := gen.New(gen.Config{Events: int64(n), Seed: 1, Start: time.Now().Add(-24 * time.Hour).UnixMicro(), Days: 1})
	if err != nil {
		b.Fatal(err)
	}
	var ev event.Event
	var body []byte
	for i := 0; g.Next(&ev); i++ {
		ev.InsertID = fmt.Sprintf("%016x", i)
		body = append(ingest.AppendEventJSON(body, &ev, nil, nil), '\n')
	}
	return []byte(gzipped(b, string(body)))
}

// BenchmarkEventsHTTP: BenchmarkEventsEndpoint over loopback TCP, the
// client (8 goroutines) on the same cores: the HTTP stack's share.
func BenchmarkEventsHTTP(b *testing.B) {
	ts := start(b, Config{Store: emptyStore(b), Ingester: nopIngester{}})
	key, _, err := ts.srv.Keys().Create(ScopeIngest, "shop", "")
	if err != nil {
		b.Fatal(err)
	}
	body := benchEventsBody(b, 1000)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}
	defer client.CloseIdleConnections()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.SetParallelism(4) // 4 × GOMAXPROCS clients
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", ts.url+"api/apps/shop/events", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/x-ndjson")
			req.Header.Set("Content-Encoding", "gzip")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "events/s")
}

// TestMergeRejections: the store's rejections (positions among the
// events it got) join the parser's in request order; a store position
// out of range or order is an error, not a wrong answer.
func TestMergeRejections(t *testing.T) {
	parsed := []ingest.Rejection{{Index: 1, Field: "user_id"}, {Index: 4, Field: "event"}}
	index := []int{0, 2, 3, 5}
	got, err := mergeRejections(parsed, index, []storage.IngestRejection{{Index: 0, Field: "properties.a"}, {Index: 2, Field: "properties.b"}, {Index: 3, Field: "properties.c"}})
	if err != nil || fmt.Sprint(got) != "[{0 properties.a } {1 user_id } {3 properties.b } {4 event } {5 properties.c }]" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range [][]storage.IngestRejection{{{Index: 4}}, {{Index: -1}}, {{Index: 2}, {Index: 1}}} {
		if _, err := mergeRejections(parsed, index, bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
