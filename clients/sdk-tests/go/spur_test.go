// Package sdktests drives the real Go SDK clients — github.com/posthog/posthog-go and
// gopkg.in/segmentio/analytics-go.v3, as the Go module proxy serves them — against a real
// `spur serve` (the binary named by SPUR_BIN, on a fresh store) and checks what Spur stored
// through its HTTP API. It builds nothing of Spur: it is its own module so that Spur's go.mod does
// not gain the SDKs' dependencies. clients/sdk-tests/run.sh runs it.
package sdktests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// spurURL is the base URL of the server TestMain started ("" without SPUR_BIN: every test skips).
var spurURL string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin := os.Getenv("SPUR_BIN")
	if bin == "" {
		fmt.Fprintln(os.Stderr, "SPUR_BIN is not set: the SDK tests skip (clients/sdk-tests/run.sh sets it)")
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "spur-sdk-go-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(bin, "--data", dir, "serve", "--auth", "none", "--listen", "127.0.0.1:0", "--debug-listen", "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "starting %s serve: %v\n", bin, err)
		return 1
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	addr := regexp.MustCompile(`UI and API on (http://\S+?)/? `)
	for lines.Scan() {
		if m := addr.FindStringSubmatch(lines.Text() + " "); m != nil {
			spurURL = m[1]
			break
		}
	}
	if spurURL == "" {
		fmt.Fprintln(os.Stderr, "spur serve printed no address")
		return 1
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return m.Run()
}

// server skips the test when there is no server.
func server(t *testing.T) string {
	t.Helper()
	if spurURL == "" {
		t.Skip("SPUR_BIN not set")
	}
	return spurURL
}

// appName is an app of the test's own.
func appName(t *testing.T) string {
	return "go-" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
}

// getJSON GETs or POSTs (body non-nil) base+path and decodes a 200 answer into out.
func getJSON(t *testing.T, base, path string, body any, out any) {
	t.Helper()
	var res *http.Response
	var err error
	if body == nil {
		res, err = http.Get(base + path)
	} else {
		b, _ := json.Marshal(body)
		res, err = http.Post(base+path, "application/json", bytes.NewReader(b))
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("%s: %d %s", path, res.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v in %s", path, err, raw)
	}
}

// assertCounts checks that the app has exactly `want` events by name and no other event.
func assertCounts(t *testing.T, app string, want map[string]int) {
	t.Helper()
	names := []string{"$any"}
	total := 0
	for n, c := range want {
		names = append(names, n)
		total += c
	}
	sort.Strings(names[1:])
	var series []map[string]string
	for _, n := range names {
		series = append(series, map[string]string{"event": n})
	}
	var res struct {
		Series []struct {
			Event string  `json:"event"`
			Total float64 `json:"total"`
		} `json:"series"`
	}
	getJSON(t, server(t), "/api/apps/"+app+"/query", map[string]any{"kind": "trend", "interval": "month", "series": series}, &res)
	got := map[string]int{}
	for _, s := range res.Series {
		got[s.Event] = int(s.Total)
	}
	w := map[string]int{"$any": total}
	for n, c := range want {
		w[n] = c
	}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("app %s: events by name %v, want %v", app, got, w)
	}
}

// person is GET /api/apps/{app}/persons/{id}.
type person struct {
	PersonID    string         `json:"person_id"`
	DistinctIDs []string       `json:"distinct_ids"`
	Properties  map[string]any `json:"properties"`
}

// trailEvent is one event of GET /api/apps/{app}/persons/{id}/events.
type trailEvent struct {
	Time       string         `json:"time"`
	Event      string         `json:"event"`
	InsertID   string         `json:"insert_id"`
	DistinctID string         `json:"distinct_id"`
	Properties map[string]any `json:"properties"`
}

func getPerson(t *testing.T, app, id string) person {
	t.Helper()
	var p person
	getJSON(t, server(t), "/api/apps/"+app+"/persons/"+url.PathEscape(id), nil, &p)
	return p
}

func trail(t *testing.T, app, id string) []trailEvent {
	t.Helper()
	var page struct {
		Events []trailEvent `json:"events"`
		Total  int          `json:"total"`
	}
	getJSON(t, server(t), "/api/apps/"+app+"/persons/"+url.PathEscape(id)+"/events?limit=1000&tz=UTC", nil, &page)
	if page.Total > len(page.Events) {
		t.Fatalf("%s: %d events, more than one page", id, page.Total)
	}
	return page.Events
}

// assertOnePerson checks that every id of ids is person personID with exactly those distinct ids.
func assertOnePerson(t *testing.T, app string, ids []string, personID string) person {
	t.Helper()
	sort.Strings(ids)
	var p person
	for _, id := range ids {
		p = getPerson(t, app, id)
		sort.Strings(p.DistinctIDs)
		if p.PersonID != personID || !reflect.DeepEqual(p.DistinctIDs, ids) {
			t.Errorf("%s: id %s is person %q with ids %v, want %q with %v", app, id, p.PersonID, p.DistinctIDs, personID, ids)
		}
	}
	return p
}

// faultProxy answers the first request on each path with 503 and Retry-After: 1 and forwards
// the others to the server; statuses lists what it answered, in order. With stored, the failed
// request is sent on first and the server's answer (upstream) replaced by the 503: an
// acknowledgement lost on its way back, so the client's resend must be deduplicated.
type faultProxy struct {
	*httptest.Server
	stored   bool
	mu       sync.Mutex
	failed   map[string]bool
	statuses []int
	upstream []int
}

// testRetry runs once per way a first request fails — never reaching the server (lost-request),
// or stored and its answer lost (lost-answer) — with a faultProxy in front of the server: send
// enqueues n messages through a client pointed at base, whose Close then flushes it; the proxy
// must have answered 503 then 200 and the app hold exactly want.
func testRetry(t *testing.T, want map[string]int, send func(t *testing.T, app, base string, a *acks) (io.Closer, int)) {
	server(t)
	for _, mode := range []struct {
		name   string
		stored bool
	}{{"lost-request", false}, {"lost-answer", true}} {
		t.Run(mode.name, func(t *testing.T) {
			app := appName(t)
			p := newFaultProxy(t, mode.stored)
			a := &acks{}
			c, n := send(t, app, p.URL, a)
			a.wait(t, n)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			p.check(t)
			assertCounts(t, app, want)
		})
	}
}

func newFaultProxy(t *testing.T, stored bool) *faultProxy {
	t.Helper()
	target, err := url.Parse(server(t))
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &faultProxy{stored: stored, failed: map[string]bool{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		fail := !p.failed[r.URL.Path]
		p.failed[r.URL.Path] = true
		p.mu.Unlock()
		if fail {
			if p.stored {
				rec := httptest.NewRecorder()
				rp.ServeHTTP(rec, r)
				p.mu.Lock()
				p.upstream = append(p.upstream, rec.Code)
				p.mu.Unlock()
			}
			p.record(http.StatusServiceUnavailable)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "injected by the test proxy", http.StatusServiceUnavailable)
			return
		}
		rec := &statusWriter{ResponseWriter: w, status: 200}
		rp.ServeHTTP(rec, r)
		p.record(rec.status)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *faultProxy) record(status int) {
	p.mu.Lock()
	p.statuses = append(p.statuses, status)
	p.mu.Unlock()
}

func (p *faultProxy) answered() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.statuses...)
}

// check fails the test unless the proxy answered 503 then 200 and, with stored, the server
// stored the first copy (answered 200 to it).
func (p *faultProxy) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if fmt.Sprint(p.statuses) != "[503 200]" {
		t.Errorf("proxy answered %v, want [503 200]", p.statuses)
	}
	if want := map[bool]string{true: "[200]", false: "[]"}[p.stored]; fmt.Sprint(p.upstream) != want {
		t.Errorf("the server answered the failed request %v, want %s", p.upstream, want)
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// acks counts the messages an SDK's callback reported sent, and the failures.
type acks struct {
	mu       sync.Mutex
	ok       int
	failures []error
}

func (a *acks) success() {
	a.mu.Lock()
	a.ok++
	a.mu.Unlock()
}

func (a *acks) failure(err error) {
	a.mu.Lock()
	a.failures = append(a.failures, err)
	a.mu.Unlock()
}

// wait waits until n messages were acknowledged (the SDKs' Close abandons a batch waiting for its
// retry, so a retry test waits for the acknowledgement first).
func (a *acks) wait(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.mu.Lock()
		ok, failures := a.ok, append([]error(nil), a.failures...)
		a.mu.Unlock()
		if len(failures) > 0 {
			t.Fatalf("the client reported failures: %v", failures)
		}
		if ok >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages acknowledged after 30 s", ok, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// t0 is the time of the tests' events: 2024-05-01T12:00:00Z.
var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// find returns the one event of the trail with that insert id.
func find(t *testing.T, events []trailEvent, insertID string) trailEvent {
	t.Helper()
	return only(t, events, "insert_id", func(e trailEvent) string { return e.InsertID }, insertID)
}

// findEvent returns the one event of the trail with that name.
func findEvent(t *testing.T, events []trailEvent, name string) trailEvent {
	t.Helper()
	return only(t, events, "name", func(e trailEvent) string { return e.Event }, name)
}

// only returns the one event whose field (named what) is value, and fails on none or several.
func only(t *testing.T, events []trailEvent, what string, field func(trailEvent) string, value string) trailEvent {
	t.Helper()
	var found []trailEvent
	for _, e := range events {
		if field(e) == value {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d events with %s %q in %+v", len(found), what, value, events)
	}
	return found[0]
}
