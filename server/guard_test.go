package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

func emptyStore(t testing.TB) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.Config{Dir: t.TempDir(), Shards: 2, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestDefaultAllowedHosts(t *testing.T) {
	got := DefaultAllowedHosts("127.0.0.1:8080", "Spur.Example:80", "[::1]:6060", "")
	for _, want := range []string{"localhost", "127.0.0.1", "::1", "spur.example"} {
		if !slices.Contains(got, want) {
			t.Errorf("DefaultAllowedHosts = %v, missing %q", got, want)
		}
	}
	// All interfaces: the machine's own addresses are served.
	if all := DefaultAllowedHosts(":8080"); len(all) <= 3 {
		t.Errorf("DefaultAllowedHosts(:8080) = %v, want the interface addresses too", all)
	}
	p := newHostPolicy([]string{"localhost", "spur.example:9000", "*.corp.example", "[::1]"})
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:8080": true, "spur.example": true, "spur.example:1": true, "[::1]:80": true,
		"a.corp.example": true, "corp.example": false, "evil.example": false, "localhost.evil.example": false,
		"127.0.0.1": false, "": true,
	} {
		if p.allows(host) != want {
			t.Errorf("allows(%q) = %v, want %v", host, !want, want)
		}
	}
	if !newHostPolicy([]string{"*"}).allows("anything:1") {
		t.Error(`"*" does not allow every host`)
	}
}

// TestHostCheck: a request for a Host the server does not serve (a DNS
// rebinding attack's) is refused on every endpoint, the debug listener's
// included.
func TestHostCheck(t *testing.T) {
	ts := start(t, Config{Store: emptyStore(t)})
	for _, path := range []string{"api/apps", "healthz", "", "metrics", "api/apps/x/query"} {
		code, _, body := ts.do(t, "GET", path, "", "Host", "attacker.example:8080")
		if code != http.StatusForbidden {
			t.Errorf("GET /%s with a foreign Host: %d %s", path, code, body)
			continue
		}
		if e := decodeError(t, body); e.Error.Code != query.CodeForbidden || e.Error.Field != "host" || !strings.Contains(e.Error.Message, "--allowed-hosts") {
			t.Errorf("GET /%s: %+v", path, e)
		}
	}
	for _, host := range []string{"localhost:8080", "127.0.0.1", "[::1]:1"} {
		if code, _, body := ts.do(t, "GET", "api/apps", "", "Host", host); code != 200 {
			t.Errorf("Host %s: %d %s", host, code, body)
		}
	}
	req, _ := http.NewRequest("GET", ts.debugURL+"debug/pprof/", nil)
	req.Host = "attacker.example"
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("debug listener with a foreign Host: %d", resp.StatusCode)
	}
	// Configured hosts replace the defaults.
	ts2 := start(t, Config{Store: emptyStore(t), AllowedHosts: []string{"spur.corp.example"}})
	if code, _, _ := ts2.do(t, "GET", "healthz", "", "Host", "spur.corp.example:443"); code != 200 {
		t.Errorf("configured host: %d", code)
	}
	if code, _, _ := ts2.do(t, "GET", "healthz", ""); code != http.StatusForbidden {
		t.Errorf("127.0.0.1 without being configured: %d", code)
	}
	// The debug listener answers the loopback names whatever is configured.
	resp, err = ts2.client.Get(ts2.debugURL + "debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("debug listener on 127.0.0.1 with --allowed-hosts set: %d", resp.StatusCode)
	}
}

// TestCrossSiteRefused: browsers' cross-site requests are refused on every
// endpoint (a text/plain form POST must not import rows or create an
// app); same-origin requests, top-level navigations and clients that send
// neither header (curl) work.
func TestCrossSiteRefused(t *testing.T) {
	st := emptyStore(t)
	ts := start(t, Config{Store: st})
	host := strings.TrimSuffix(strings.TrimPrefix(ts.url, "http://"), "/")
	for _, c := range []struct {
		method, path string
		hdr          []string
	}{
		{"POST", "api/apps/shop/import?format=csv", []string{"Origin", "http://attacker.example", "Content-Type", "text/plain"}},
		{"POST", "api/apps/shop/import?format=csv", []string{"Origin", "null", "Content-Type", "text/plain"}},
		{"POST", "api/apps/shop/import?format=csv", []string{"Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain"}},
		{"POST", "api/apps/shop/query", []string{"Origin", "http://" + host + ".attacker.example"}},
		{"GET", "api/apps", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors"}},
		{"GET", "", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"}},
		{"GET", "metrics", []string{"Origin", "http://localhost:3000"}},
		{"PUT", "api/apps", []string{"Origin", "http://attacker.example"}},
		{"GET", "api/nothing", []string{"Origin", "http://attacker.example"}},
	} {
		code, hdr, body := ts.do(t, c.method, c.path, goodCSV, c.hdr...)
		if code != http.StatusForbidden {
			t.Errorf("%s /%s %v: %d %s", c.method, c.path, c.hdr, code, body)
			continue
		}
		if e := decodeError(t, body); e.Error.Code != query.CodeForbidden || e.Error.Field != "origin" {
			t.Errorf("%s /%s: %+v", c.method, c.path, e)
		}
		if hdr.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s /%s: CORS header on a same-origin-only endpoint", c.method, c.path)
		}
	}
	if n := eventCount(t, ts, "shop"); n != -1 {
		t.Fatalf("a cross-site import created app shop with %d events", n)
	}
	// Same origin, a top-level navigation, and curl.
	if code, _, body := ts.do(t, "POST", "api/apps/shop/import?format=csv", goodCSV, "Origin", "http://"+host, "Sec-Fetch-Site", "same-origin"); code != 200 {
		t.Errorf("same-origin import: %d %s", code, body)
	}
	if code, _, _ := ts.do(t, "GET", "", "", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"); code != 200 {
		t.Errorf("a link to the UI from another site: %d", code)
	}
	if code, _, body := ts.do(t, "POST", "api/apps/shop/import?format=csv", goodCSV); code != 200 {
		t.Errorf("curl-like import: %d %s", code, body)
	}
	if n := eventCount(t, ts, "shop"); n != 6 {
		t.Errorf("shop has %d events, want 6", n)
	}
}

// trickle opens a connection, sends a request whose body of n bytes comes
// one byte per interval, and returns the status line the server answers
// with (or the read error) and how long it took.
func trickle(t *testing.T, addr, key, path string, n int, interval time.Duration) (string, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: text/csv\r\nContent-Length: %d\r\n\r\n", path, addr, key, n)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for range n {
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
			if _, err := c.Write([]byte("u")); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err.Error(), time.Since(start)
	}
	return strings.TrimSpace(line), time.Since(start)
}

// TestBodyTimeout: a body that trickles is cut off at Config.BodyTimeout
// with 408 and its connection closed; handlers return (no goroutine
// waits on the client), and a query that runs longer than the body
// timeout after its body was read is not cut off.
func TestBodyTimeout(t *testing.T) {
	st := openCardano(t)
	g := newGated(st, true)
	ts := start(t, Config{Store: st, Runner: g, BodyTimeout: 300 * time.Millisecond})
	addr := strings.TrimSuffix(strings.TrimPrefix(ts.url, "http://"), "/")
	ts.do(t, "GET", "healthz", "") // the listeners' goroutines run
	ts.client.CloseIdleConnections()
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	for _, path := range []string{"/api/apps/cardano/query", "/api/apps/shop/import?format=csv"} {
		line, took := trickle(t, addr, ts.key, path, 10_000, 50*time.Millisecond)
		if !strings.Contains(line, "408") || took > 3*time.Second {
			t.Errorf("%s trickled: %q after %s, want 408 after about 300ms", path, line, took)
		}
	}
	if n := eventCount(t, ts, "shop"); n != -1 {
		t.Errorf("a timed-out import created app shop with %d events", n)
	}
	ts.client.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the trickling requests, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
	// A query running past the body timeout after its body arrived.
	done := make(chan int, 1)
	go func() {
		code, _, _ := ts.do(t, "POST", "api/apps/cardano/query", funnelQuery)
		done <- code
	}()
	<-g.started
	time.Sleep(600 * time.Millisecond)
	close(g.release)
	if code := <-done; code != 200 {
		t.Errorf("a query slower than the body timeout: %d", code)
	}
	if err := <-g.ctxErr; err != nil {
		t.Errorf("the query's context ended: %v", err)
	}
}

// TestImportSlowerThanBodyTimeout: an import whose body arrives at once
// but whose rows take longer than Config.BodyTimeout to import is answered
// 408 with nothing stored — not an empty 200 (net/http cancels the
// request's context when the read hits the deadline, and the import then
// saw only the cancelled context).
func TestImportSlowerThanBodyTimeout(t *testing.T) {
	ts := start(t, Config{Store: emptyStore(t), BodyTimeout: 20 * time.Millisecond})
	var b strings.Builder
	b.WriteString("user_id,event,timestamp,page\n")
	for i := range 400_000 {
		fmt.Fprintf(&b, "u%d,view,2024-01-01T00:%02d:%02dZ,/p/%d\n", i%5000, i/60%60, i%60, i)
	}
	// Over a raw connection: the server answers and closes while the
	// client may still be writing, which net/http's client reports as a
	// write error instead of the answer.
	conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(ts.url, "http://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		fmt.Fprintf(conn, "POST /api/apps/slow/import?format=csv HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: text/csv\r\nContent-Length: %d\r\n\r\n%s",
			strings.TrimSuffix(strings.TrimPrefix(ts.url, "http://"), "/"), ts.key, b.Len(), b.String())
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "limit_exceeded") {
		t.Fatalf("import slower than the body timeout: %d %s", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Errorf("the connection stays open after a body timeout")
	}
	if n := eventCount(t, ts, "slow"); n != -1 {
		t.Errorf("a timed-out import created app slow with %d events", n)
	}
}

// TestMaxConnections: past Config.MaxConnections, a new connection waits
// until one closes.
func TestMaxConnections(t *testing.T) {
	ts := start(t, Config{Store: emptyStore(t), MaxConnections: 2})
	addr := strings.TrimSuffix(strings.TrimPrefix(ts.url, "http://"), "/")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	client := &http.Client{Transport: &http.Transport{}, Timeout: 300 * time.Millisecond}
	defer client.CloseIdleConnections()
	if resp, err := client.Get(ts.url + "healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("a third connection was served: %d", resp.StatusCode)
	}
	held[0].Close()
	client.Timeout = 5 * time.Second
	resp, err := client.Get(ts.url + "healthz")
	if err != nil {
		t.Fatalf("after a connection closed: %v", err)
	}
	resp.Body.Close()
	held[1].Close()
}

// TestImportLimits: a gzip body that inflates past the decompressed limit
// gets 413 limit_exceeded and stores nothing; a truncated gzip body is
// reported as such; a property value over the limit names row and field.
func TestImportLimits(t *testing.T) {
	ts := start(t, Config{Store: emptyStore(t), MaxImportDecompressedBytes: 1 << 20, MaxPropertyBytes: 100})
	var plain bytes.Buffer
	plain.WriteString("user_id,timestamp,event,pad\n")
	for i := range 20_000 {
		fmt.Fprintf(&plain, "u%d,2024-01-02T10:00:00Z,view,%s\n", i%50, strings.Repeat("x", 90))
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(plain.Bytes())
	zw.Close()
	code, _, body := ts.do(t, "POST", "api/apps/shop/import?name=bomb.csv.gz", zb.String())
	e := decodeError(t, body)
	if code != http.StatusRequestEntityTooLarge || e.Error.Code != query.CodeLimitExceeded || !strings.Contains(e.Error.Message, "decompresses to more than the limit of 1048576 bytes") {
		t.Errorf("gzip bomb: %d %s", code, body)
	}
	if n := eventCount(t, ts, "shop"); n != -1 {
		t.Errorf("the refused import created app shop with %d events", n)
	}
	code, _, body = ts.do(t, "POST", "api/apps/shop/import?name=cut.csv.gz", zb.String()[:2000])
	if e := decodeError(t, body); code != http.StatusUnprocessableEntity || e.Error.Code != query.CodeInvalidInput ||
		!strings.Contains(e.Error.Message, "cut.csv.gz: gzip: truncated stream at compressed byte 2000") {
		t.Errorf("truncated gzip: %d %s", code, body)
	}
	long := "user_id,timestamp,event,note\nu1,2024-01-02T10:00:00Z,view," + strings.Repeat("y", 101) + "\n"
	code, _, body = ts.do(t, "POST", "api/apps/shop/import?format=csv", long)
	if e := decodeError(t, body); code != http.StatusUnprocessableEntity || e.Error.Field != "note" ||
		!strings.Contains(e.Error.Message, "first: body:2: field \"note\": value is 101 bytes long, over the limit of 100 bytes") {
		t.Errorf("long property: %d %s", code, body)
	}
}
