package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/spurdb/spur/data"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openCardano returns a store holding the bundled Cardano Stack Exchange
// events and users as app "cardano" (13,206 events), closed at cleanup.
func openCardano(t testing.TB) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.Config{Dir: t.TempDir(), Shards: 4, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, in := range []struct {
		file string
		opt  ingest.Options
		kind storage.SegmentKind
	}{
		{"stackexchange-cardano/events.csv.gz", ingest.Options{UserCol: "user_id", TimeCol: "event_time", EventCol: "event_type"}, storage.KindEvents},
		{"stackexchange-cardano/users.csv.gz", ingest.Options{UserCol: "user_id", TimeCol: "last_access_time", Users: true}, storage.KindUsers},
	} {
		f, err := data.FS.Open(in.file)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ingest.NewReader(f, filepath.Base(in.file), in.opt)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Import(context.Background(), "cardano", []storage.Source{r}, storage.ImportOptions{Kind: in.kind})
		r.Close()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// metricValue returns the value of a single counter or gauge.
func metricValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testServer is a Server serving on random loopback ports.
type testServer struct {
	srv      *Server
	url      string // main listener, with a trailing slash
	debugURL string // debug listener, with a trailing slash
	key      string // an admin key, sent by do unless it is given another Authorization
	client   *http.Client
	cancel   context.CancelFunc
	done     chan error // Serve's result
}

// start serves cfg (with a quiet logger unless set) until the test ends.
// Under AuthKeys it creates an admin key for do.
func start(t testing.TB, cfg Config) *testServer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLog()
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	if cfg.Auth == AuthKeys {
		if key, _, err = srv.Keys().Create(ScopeAdmin, "", "test"); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{srv: srv, url: "http://" + ln.Addr().String() + "/", debugURL: "http://" + dln.Addr().String() + "/", key: key,
		client: &http.Client{Transport: keyTransport{key: key, rt: &http.Transport{}}}, cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve(ctx, ln, dln) }()
	t.Cleanup(func() {
		ts.stop(t)
	})
	return ts
}

// keyTransport adds "Authorization: Bearer key" to requests without an
// Authorization header.
type keyTransport struct {
	key string
	rt  *http.Transport
}

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.key != "" && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+k.key)
	}
	return k.rt.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach rt.
func (k keyTransport) CloseIdleConnections() { k.rt.CloseIdleConnections() }

// stop shuts the server down (idempotent) and checks Serve's result.
func (ts *testServer) stop(t testing.TB) {
	t.Helper()
	ts.cancel()
	if err, ok := <-ts.done; ok {
		close(ts.done)
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	ts.client.CloseIdleConnections()
}

func (ts *testServer) do(t *testing.T, method, path, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// errorBody decodes a docs/analytics.md §9 error answer.
type errorBody struct {
	Error struct {
		Code    string     `json:"code"`
		Message string     `json:"message"`
		Field   string     `json:"field"`
		Errors  []rowError `json:"errors"`
	} `json:"error"`
}

func decodeError(t *testing.T, b []byte) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("not a §9 error body (%v): %s", err, b)
	}
	return e
}

const funnelQuery = `{"kind": "funnel", "range": {"from": "2021-04-26", "to": "2021-12-06"}, "tz": "UTC",
  "steps": [{"event": "signup"}, {"event": "question"}, {"event": "answer"}], "window": "30d"}`

func TestQueryAnswersLikeTheEngine(t *testing.T) {
	st := openCardano(t)
	ts := start(t, Config{Store: st})
	code, hdr, body := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var got query.FunnelResult
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	q, err := query.Parse([]byte(funnelQuery))
	if err != nil {
		t.Fatal(err)
	}
	q.App = "cardano"
	res, err := query.New(st, query.Config{}).Run(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	want := res.(*query.FunnelResult)
	got.Stats, want.Stats = query.Stats{}, query.Stats{}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		t.Errorf("HTTP answer differs from the engine's:\n got %s\nwant %s", gb, wb)
	}
	if got.Steps[0].Users == 0 || got.Steps[2].Users == 0 {
		t.Errorf("empty funnel: %s", gb)
	}
	if strings.Contains(string(body), `"trace"`) {
		t.Error("trace present without ?trace=1")
	}
}

func TestQueryErrors(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t)})
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"malformed JSON", "POST", "api/apps/cardano/query", `{"kind": "funnel",`, 400, "invalid_query", ""},
		{"not an object", "POST", "api/apps/cardano/query", `[1, 2]`, 400, "invalid_query", ""},
		{"unknown field", "POST", "api/apps/cardano/query", `{"kind": "trend", "bogus": 1}`, 400, "invalid_query", "bogus"},
		{"bad range", "POST", "api/apps/cardano/query", `{"kind": "trend", "range": {"from": "2021-06-01", "to": "2021-05-01"}, "series": [{"event": "signup"}]}`, 400, "invalid_query", "range"},
		{"app mismatch", "POST", "api/apps/cardano/query", `{"kind": "trend", "app": "other", "series": [{"event": "signup"}]}`, 400, "invalid_query", "app"},
		{"unknown app", "POST", "api/apps/nosuchapp/query", `{"kind": "trend", "series": [{"event": "signup"}]}`, 404, "not_found", "app"},
		{"invalid app name", "POST", "api/apps/Bad.Name/query", `{"kind": "trend", "series": [{"event": "signup"}]}`, 404, "not_found", "app"},
		{"unknown app schema", "GET", "api/apps/nosuchapp/schema", ``, 404, "not_found", "app"},
		{"bad top", "GET", "api/apps/cardano/schema?top=x", ``, 400, "invalid_query", "top"},
		{"wrong method", "GET", "api/apps/cardano/query", ``, 405, "invalid_query", ""},
		{"unknown endpoint", "GET", "api/nothing", ``, 404, "not_found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := ts.do(t, tc.method, tc.path, tc.body)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %s", code, tc.status, body)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			e := decodeError(t, body)
			if e.Error.Code != tc.code || e.Error.Field != tc.field || e.Error.Message == "" {
				t.Errorf("error %+v, want code %q field %q", e.Error, tc.code, tc.field)
			}
			if tc.status == 405 && hdr.Get("Allow") != "POST" {
				t.Errorf("Allow %q", hdr.Get("Allow"))
			}
		})
	}
}

func TestOversizedQueryBody(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t), MaxBodyBytes: 64})
	code, _, body := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery) // > 64 bytes
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d: %s", code, body)
	}
	if e := decodeError(t, body); e.Error.Code != "limit_exceeded" || e.Error.Field != "body" {
		t.Errorf("error %+v", e.Error)
	}
}

// gatedRunner runs queries on the real engine, first signalling started
// and waiting for release (if set) or for the query's context to end; it
// records the context's error at that point.
type gatedRunner struct {
	eng     *query.Engine
	started chan struct{}
	release chan struct{} // nil: wait for ctx only
	ctxErr  chan error
	// holdPastDeadline makes Run wait for release only, holding its query
	// slot even after its context ends.
	holdPastDeadline bool
}

func newGated(st *storage.Store, release bool) *gatedRunner {
	g := &gatedRunner{eng: query.New(st, query.Config{}), started: make(chan struct{}, 16), ctxErr: make(chan error, 16)}
	if release {
		g.release = make(chan struct{})
	}
	return g
}

func (g *gatedRunner) Run(ctx context.Context, q *query.Query) (query.Result, error) {
	g.started <- struct{}{}
	done := ctx.Done()
	if g.holdPastDeadline {
		done = nil
	}
	select {
	case <-done:
		g.ctxErr <- ctx.Err()
	case <-g.release:
		g.ctxErr <- ctx.Err()
	}
	return g.eng.Run(ctx, q)
}

func TestQueryTimeout(t *testing.T) {
	st := openCardano(t)
	g := newGated(st, false)
	ts := start(t, Config{Store: st, Runner: g, QueryTimeout: 50 * time.Millisecond})
	t0 := time.Now()
	code, _, body := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery)
	if code != http.StatusGatewayTimeout {
		t.Fatalf("status %d: %s", code, body)
	}
	if e := decodeError(t, body); e.Error.Code != "limit_exceeded" {
		t.Errorf("error %+v", e.Error)
	}
	if err := <-g.ctxErr; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("query context ended with %v, want a deadline", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("timeout answered after %s", d)
	}
	if n := metricValue(t, ts.srv.met.queries.WithLabelValues("funnel", "limit_exceeded")); n != 1 {
		t.Errorf("spur_queries_total{code=limit_exceeded} = %v", n)
	}
}

func TestQueryWaitsForASlotWithinItsTimeout(t *testing.T) {
	st := openCardano(t)
	g := newGated(st, true)
	g.holdPastDeadline = true
	ts := start(t, Config{Store: st, Runner: g, QueryTimeout: 300 * time.Millisecond, MaxConcurrentQueries: 1})
	first := make(chan int, 1)
	go func() {
		code, _, _ := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery)
		first <- code
	}()
	<-g.started
	code, _, body := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery)
	if code != http.StatusGatewayTimeout || !strings.Contains(string(body), "free query slot") {
		t.Errorf("second query: status %d: %s", code, body)
	}
	close(g.release)
	if code := <-first; code != http.StatusGatewayTimeout && code != http.StatusOK {
		t.Errorf("first query: status %d", code)
	}
}

func TestClientCancellationCancelsTheQuery(t *testing.T) {
	st := openCardano(t)
	g := newGated(st, false)
	ts := start(t, Config{Store: st, Runner: g})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"api/apps/cardano/query", strings.NewReader(funnelQuery))
	errc := make(chan error, 1)
	go func() {
		resp, err := ts.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-g.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v, want cancelled", err)
	}
	select {
	case err := <-g.ctxErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("query context ended with %v, want Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the query's context was not cancelled when the client went away")
	}
	cancelled := ts.srv.met.queries.WithLabelValues("funnel", codeCancelled)
	for deadline := time.Now().Add(5 * time.Second); metricValue(t, cancelled) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("spur_queries_total{code=cancelled} did not reach 1")
		}
	}
	for deadline := time.Now().Add(5 * time.Second); metricValue(t, ts.srv.met.inFlight) != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("spur_queries_in_flight did not return to 0")
		}
	}
}

func TestTraceParameterReturnsTheStageTree(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t)})
	code, _, body := ts.do(t, "POST", "api/apps/cardano/query?trace=1", funnelQuery)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var res struct {
		Kind  string        `json:"kind"`
		Steps []any         `json:"steps"`
		Trace *storage.Span `json:"trace"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Kind != "funnel" || len(res.Steps) != 3 || res.Trace == nil {
		t.Fatalf("answer %s", body)
	}
	var names []string
	for _, c := range res.Trace.Children {
		names = append(names, c.Name)
		if c.StartMS < 0 || c.MS < 0 || c.StartMS+c.MS > res.Trace.MS+0.002 {
			t.Errorf("span %q [%v, +%v] outside the request's %v ms", c.Name, c.StartMS, c.MS, res.Trace.MS)
		}
	}
	if res.Trace.Name != "request" || strings.Join(names, ",") != "read body,parse,run,encode" {
		t.Errorf("trace %q children %v", res.Trace.Name, names)
	}
}

func TestSchemaEndpoint(t *testing.T) {
	st := openCardano(t)
	ts := start(t, Config{Store: st})
	code, _, body := ts.do(t, "GET", "api/apps/cardano/schema?top=3", "")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var sc storage.Schema
	if err := json.Unmarshal(body, &sc); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for i, e := range sc.EventNames {
		sum += e.Count
		if i > 0 && e.Count > sc.EventNames[i-1].Count {
			t.Errorf("event names not by count: %v", sc.EventNames)
		}
	}
	if sc.Events != 13206 || sum != sc.Events {
		t.Errorf("events %d, sum of event counts %d", sc.Events, sum)
	}
	byName := map[string]storage.PropSummary{}
	for _, p := range append(sc.EventProps, sc.UserProps...) {
		byName[p.Name] = p
	}
	if d := byName["detail"]; d.Type.String() != "string" || len(d.Top) != 3 || d.Distinct < 3 {
		t.Errorf("detail: %+v", d)
	}
	if r := byName["reputation"]; r.Type.String() != "int" || r.Min == nil || *r.Min < 1 || *r.Max <= *r.Min {
		t.Errorf("reputation: %+v", r)
	}
	_, _, again := ts.do(t, "GET", "api/apps/cardano/schema?top=3", "")
	if !bytes.Equal(again, body) {
		t.Error("cached schema differs")
	}
	code, _, body = ts.do(t, "GET", "api/apps", "")
	if code != 200 || !strings.Contains(string(body), `"name":"cardano","tz":"","events":13206`) {
		t.Errorf("apps: %d %s", code, body)
	}
}

func TestUIIsServed(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t)})
	for path, want := range map[string]string{
		"":                           "text/html",
		"app.js":                     "text/javascript",
		"pages/query.js":             "text/javascript",
		"vendor/preact.mjs":          "text/javascript",
		"style.css":                  "text/css",
		"vendor/chart.umd.min.js":    "text/javascript",
		"vendor/LICENSE-chart.js.md": "text/markdown",
	} {
		code, hdr, body := ts.do(t, "GET", path, "")
		if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), want) || len(body) == 0 {
			t.Errorf("GET /%s: %d %q (%d bytes)", path, code, hdr.Get("Content-Type"), len(body))
		}
		if !strings.Contains(hdr.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET /%s: CSP %q", path, hdr.Get("Content-Security-Policy"))
		}
	}
	if code, _, _ := ts.do(t, "POST", "", "x"); code != 405 {
		t.Errorf("POST /: %d", code)
	}
}

func TestMetrics(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t)})
	if code, _, body := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery); code != 200 {
		t.Fatalf("query: %d %s", code, body)
	}
	ts.do(t, "POST", "api/apps/cardano/query", `{"kind":`)
	code, _, body := ts.do(t, "GET", "metrics", "")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{
		`spur_query_duration_seconds_count{kind="funnel"} 1`,
		`spur_queries_total{code="ok",kind="funnel"} 1`,
		`spur_queries_total{code="invalid_query",kind="other"} 1`,
		`spur_query_events_scanned_total{kind="funnel"} 13206`,
		`spur_app_segments{app="cardano",kind="events"} 4`,
		`spur_app_rows{app="cardano",kind="events"} 13206`,
		`spur_queries_in_flight 0`,
		`go_goroutines `,
		`process_cpu_seconds_total `,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestTwoServersInOneProcess(t *testing.T) {
	st := openCardano(t)
	a := start(t, Config{Store: st})
	b := start(t, Config{Store: st})
	for _, ts := range []*testServer{a, b} {
		if code, _, body := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery); code != 200 {
			t.Fatalf("status %d: %s", code, body)
		}
	}
	if n := metricValue(t, a.srv.met.queries.WithLabelValues("funnel", codeOK)); n != 1 {
		t.Errorf("server a counted %v queries, want its own 1", n)
	}
}

func TestConcurrentQueries(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t)})
	var wg sync.WaitGroup
	errs := make(chan string, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := funnelQuery
			if i%2 == 1 {
				q = `{"kind": "retention", "range": {"from": "2021-04-26", "to": "2021-06-28"}, "start": {"event": "signup"}, "period": "week", "periods": 8}`
			}
			resp, err := ts.client.Post(ts.url+"api/apps/cardano/query", "application/json", strings.NewReader(q))
			if err != nil {
				errs <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- fmt.Sprintf("%d %s", resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestGracefulShutdownFinishesInFlightQueries(t *testing.T) {
	st := openCardano(t)
	g := newGated(st, true)
	ts := start(t, Config{Store: st, Runner: g})
	type answer struct {
		code int
		body []byte
	}
	ans := make(chan answer, 1)
	go func() {
		resp, err := ts.client.Post(ts.url+"api/apps/cardano/query", "application/json", strings.NewReader(funnelQuery))
		if err != nil {
			ans <- answer{0, []byte(err.Error())}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ans <- answer{resp.StatusCode, b}
	}()
	<-g.started
	ts.cancel() // as SIGTERM does through the command's context
	select {
	case err := <-ts.done:
		t.Fatalf("Serve returned (%v) while a query was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(ts.url, "http://"), "/"), time.Second); err == nil {
		t.Error("new connections are still accepted during shutdown")
	}
	close(g.release)
	if a := <-ans; a.code != 200 {
		t.Errorf("in-flight query: %d %s", a.code, a.body)
	}
	if err := <-g.ctxErr; err != nil {
		t.Errorf("in-flight query's context ended early: %v", err)
	}
	ts.stop(t)
	goleak.VerifyNone(t)
}

func TestShutdownTimeoutCancelsQueries(t *testing.T) {
	st := openCardano(t)
	g := newGated(st, false)
	ts := start(t, Config{Store: st, Runner: g, ShutdownTimeout: 50 * time.Millisecond})
	go func() {
		resp, err := ts.client.Post(ts.url+"api/apps/cardano/query", "application/json", strings.NewReader(funnelQuery))
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-g.started
	t0 := time.Now()
	ts.stop(t)
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("shutdown took %s", d)
	}
	if err := <-g.ctxErr; !errors.Is(err, context.Canceled) {
		t.Errorf("query context: %v, want Canceled once the connection is closed", err)
	}
	goleak.VerifyNone(t)
}
