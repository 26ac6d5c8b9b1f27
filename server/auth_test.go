package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spurdb/spur/storage"
)

// keyed returns the keys of the auth tests: an admin key, ingest and query
// keys of app "cardano", and a query key of another app.
func keyed(t *testing.T, ts *testServer) map[string]string {
	t.Helper()
	keys := map[string]string{"admin": ts.key}
	for _, k := range []struct {
		name  string
		scope Scope
		app   string
	}{{"ingest", ScopeIngest, "cardano"}, {"query", ScopeQuery, "cardano"}, {"other", ScopeQuery, "other"}} {
		secret, _, err := ts.srv.Keys().Create(k.scope, k.app, k.name)
		if err != nil {
			t.Fatal(err)
		}
		keys[k.name] = secret
	}
	return keys
}

// TestAuthMatrix: every route of the main listener, with no key, a
// malformed header, an unknown key, and a key of each scope for its app
// and for another, answers 401, 403 or gets through as its declared
// scope says (docs/ingest.md §4).
func TestAuthMatrix(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t), Ingester: &fakeIngester{}})
	keys := keyed(t, ts)
	plain := &http.Client{Transport: &http.Transport{}}
	defer plain.CloseIdleConnections()
	call := func(method, path, auth string) (int, errorBody) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.url+strings.TrimPrefix(path, "/"), strings.NewReader("{}"))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e errorBody
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e
	}
	routes := ts.srv.routeList
	if len(routes) < 25 {
		t.Fatalf("only %d routes registered", len(routes))
	}
	for _, rt := range routes {
		path := strings.NewReplacer("{app}", "cardano", "{id}", "x").Replace(rt.path)
		name := rt.method + " " + path
		if strings.HasPrefix(path, "/ingest/") {
			continue // keys in the SDKs' own places: TestCaptureKeys
		}
		if rt.acc == open {
			if code, _ := call(rt.method, path, ""); code == 401 || code == 403 {
				t.Errorf("%s needs no key, answered %d", name, code)
			}
			continue
		}
		for auth, want := range map[string]string{"": "missing API key", "Basic dTpw": "malformed", "Bearer spur_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": "unknown API key", "Bearer " + keys["admin"] + "x": "unknown API key"} {
			code, e := call(rt.method, path, auth)
			if code != 401 || e.Error.Code != "unauthenticated" || !strings.Contains(e.Error.Message, want) {
				t.Errorf("%s with Authorization %q: %d %+v", name, auth, code, e.Error)
			}
		}
		for kname, key := range keys {
			if kname == "admin" && rt.method == "DELETE" && rt.path == "/api/apps/{app}" {
				continue // it would delete the app and its keys: TestDeleteApp
			}
			code, e := call(rt.method, path, "Bearer "+key)
			var allowed bool
			switch kname {
			case "admin":
				allowed = true
			case "ingest":
				allowed = rt.acc.anyKey || rt.acc.scope == ScopeIngest
			case "query":
				allowed = rt.acc.anyKey || rt.acc.scope == ScopeQuery
			case "other":
				allowed = rt.acc.anyKey || rt.acc.scope == ScopeQuery && !rt.acc.app
			}
			switch {
			case allowed && (code == 401 || code == 403):
				t.Errorf("%s with the %s key: %d %+v", name, kname, code, e.Error)
			case !allowed && (code != 403 || e.Error.Code != "forbidden" || !strings.Contains(e.Error.Message, "key ")):
				t.Errorf("%s with the %s key: %d %+v, want 403", name, kname, code, e.Error)
			}
		}
	}
	// The messages say which.
	if _, e := call("POST", "api/apps/cardano/query", "Bearer "+keys["ingest"]); !strings.Contains(e.Error.Message, "is an ingest key for app \"cardano\"") ||
		!strings.Contains(e.Error.Message, "needs a query key of the app") {
		t.Errorf("ingest key on query: %q", e.Error.Message)
	}
	if _, e := call("GET", "api/apps/cardano/schema", "Bearer "+keys["other"]); !strings.Contains(e.Error.Message, `not for app "cardano"`) {
		t.Errorf("other app's key: %q", e.Error.Message)
	}
	// A query key lists only its app; the admin key every app.
	for kname, want := range map[string]string{"query": `["cardano"]`, "other": `[]`, "admin": `["cardano"]`} {
		req, _ := http.NewRequest("GET", ts.url+"api/apps", nil)
		req.Header.Set("Authorization", "Bearer "+keys[kname])
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Apps []appSummary }
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		names := []string{}
		for _, a := range out.Apps {
			names = append(names, a.Name)
		}
		if got, _ := json.Marshal(names); string(got) != want {
			t.Errorf("apps listed to the %s key: %s, want %s", kname, got, want)
		}
	}
	// /metrics: an admin key on the main listener, none on the debug one.
	if code, _ := call("GET", "metrics", "Bearer "+keys["query"]); code != 403 {
		t.Errorf("metrics with a query key: %d", code)
	}
	resp, err := plain.Get(ts.debugURL + "metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("metrics on the debug listener: %v %v", err, resp)
	}
	resp.Body.Close()
}

// TestKeysAPI: keys are created, listed and revoked through the admin
// API; a revoked key stops working at once; the last admin key stays.
func TestKeysAPI(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t)})
	code, _, body := ts.do(t, "POST", "api/keys", `{"scope": "query", "app": "cardano", "name": "analyst"}`)
	var created createdKey
	if code != 201 || json.Unmarshal(body, &created) != nil || !regexp.MustCompile(`^spur_[a-z2-7]{32}$`).MatchString(created.Secret) ||
		created.Scope != ScopeQuery || created.App != "cardano" || created.Name != "analyst" || created.ID == "" {
		t.Fatalf("create: %d %s", code, body)
	}
	code, _, body = ts.do(t, "GET", "api/keys", "")
	if code != 200 || !strings.Contains(string(body), `"id":"`+created.ID+`","scope":"query","app":"cardano","name":"analyst"`) ||
		strings.Contains(string(body), created.Secret) || strings.Contains(string(body), "sha256") {
		t.Fatalf("list: %d %s", code, body)
	}
	as := func(key string) int {
		code, _, _ := ts.do(t, "GET", "api/apps/cardano/schema", "", "Authorization", "Bearer "+key)
		return code
	}
	if c := as(created.Secret); c != 200 {
		t.Fatalf("the new key: %d", c)
	}
	code, _, body = ts.do(t, "GET", "api/key", "", "Authorization", "Bearer "+created.Secret)
	if code != 200 || !strings.Contains(string(body), `"scope":"query","app":"cardano"`) || !strings.Contains(string(body), `"auth":"keys"`) {
		t.Fatalf("own key: %d %s", code, body)
	}
	// Revocation takes effect for the next request, while requests with
	// the key run on other connections.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				as(created.Secret)
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	revoked := time.Now()
	if code, _, body := ts.do(t, "DELETE", "api/keys/"+created.ID, ""); code != 204 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	if c := as(created.Secret); c != 401 {
		t.Fatalf("revoked key: %d", c)
	}
	if d := time.Since(revoked); d > time.Second {
		t.Fatalf("revocation took %s", d)
	}
	close(stop)
	wg.Wait()
	if code, _, _ := ts.do(t, "DELETE", "api/keys/"+created.ID, ""); code != 404 {
		t.Fatalf("revoke twice: %d", code)
	}
	// The last admin key cannot be revoked through the API.
	var own Key
	_, _, body = ts.do(t, "GET", "api/key", "")
	json.Unmarshal(body, &own)
	if code, _, body := ts.do(t, "DELETE", "api/keys/"+own.ID, ""); code != 409 || !strings.Contains(string(body), "last admin key") {
		t.Fatalf("revoke the last admin key: %d %s", code, body)
	}
	for body, want := range map[string]string{
		`{"scope": "ingest"}`:                    "needs an app",
		`{"scope": "admin", "app": "cardano"}`:   "give no app",
		`{"scope": "root"}`:                      "unknown scope",
		`{"scope": "query", "app": "Bad App"}`:   "needs an app",
		`{"scope": "query", "app": "a", "x": 1}`: "unknown field",
		`{"scope": "admin", "name": "a\nb"}`:     "name",
	} {
		if code, _, b := ts.do(t, "POST", "api/keys", body); code != 400 || !strings.Contains(string(b), want) {
			t.Errorf("create %s: %d %s", body, code, b)
		}
	}
}

// TestKeysOnDisk: the store keeps a key's SHA-256, never the key; a key
// store re-opened finds the same keys; a damaged key file is corruption.
func TestKeysOnDisk(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.Open(storage.Config{Dir: dir, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, err := OpenKeys(st)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, sc := range []Scope{ScopeAdmin, ScopeIngest, ScopeQuery} {
		app := "shop"
		if sc == ScopeAdmin {
			app = ""
		}
		s, _, err := k.Create(sc, app, "")
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, s)
	}
	var files int
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) || bytes.Contains(b, []byte(s[len(KeyPrefix):])) {
				t.Errorf("%s holds a key", path)
			}
		}
		if strings.HasSuffix(path, ".doc") {
			files++
			if !regexp.MustCompile(`"sha256":"[0-9a-f]{64}"`).Match(b) {
				t.Errorf("%s: no digest: %s", path, b)
			}
		}
		return nil
	})
	if files != 3 {
		t.Fatalf("%d key files", files)
	}
	k2, err := OpenKeys(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if k2.Lookup(s) == nil {
			t.Errorf("key not found after a re-open")
		}
	}
	if k2.Admins() != 1 || len(k2.List()) != 3 || k2.Lookup("spur_x") != nil || k2.Lookup(secrets[0][1:]) != nil {
		t.Fatalf("re-opened: %d admins, %v", k2.Admins(), k2.List())
	}
	// A flipped byte in a key file.
	ents, _ := os.ReadDir(filepath.Join(dir, "meta", "keys"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".doc") {
			p := filepath.Join(dir, "meta", "keys", e.Name())
			b, _ := os.ReadFile(p)
			b[len(b)-5] ^= 1
			os.WriteFile(p, b, 0o644)
			break
		}
	}
	if _, err := OpenKeys(st); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("damaged key file: %v", err)
	}
}

// TestKeysUnreadableDocument: a key document that passes its checksum
// but holds a digest of the wrong length, one that is not hex, or an
// unknown field fails OpenKeys as corruption (they used to pass the check,
// and the short digest and the unknown field then panicked).
func TestKeysUnreadableDocument(t *testing.T) {
	digest := strings.Repeat("ab", sha256.Size)
	for _, body := range []string{`{"scope":"admin","sha256":"abcd"}`, `{"scope":"admin","sha256":"zz"}`, `{"scope":"admin","sha256":"` + digest + `","extra":1}`} {
		st, err := storage.Open(storage.Config{Dir: t.TempDir(), Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Collection(keysCollection)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create("k1", []byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenKeys(st); !errors.Is(err, storage.ErrCorruption) {
			t.Errorf("%s: OpenKeys: %v, want corruption", body, err)
		}
		st.Close()
	}
}

// TestKeysNeverLogged: a server logging at debug level, serving requests
// with good, revoked and unknown keys, creating keys and scraping
// metrics, writes no key to its log or its metrics.
func TestKeysNeverLogged(t *testing.T) {
	var logBuf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logBuf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ts := start(t, Config{Store: openCardano(t), Logger: log, Ingester: &fakeIngester{}})
	keys := keyed(t, ts)
	code, _, body := ts.do(t, "POST", "api/keys", `{"scope": "ingest", "app": "cardano"}`)
	var created createdKey
	if code != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	keys["created"] = created.Secret
	for _, k := range keys {
		for _, path := range []string{"api/apps", "api/apps/cardano/schema", "api/apps/cardano/events", "api/nope", "metrics"} {
			ts.do(t, "GET", path, "", "Authorization", "Bearer "+k)
			ts.do(t, "POST", path, "[]", "Authorization", "Bearer "+k)
			ts.do(t, "POST", path, "[]", "Authorization", "Bearer "+k+"x")
			ts.do(t, "POST", path, "[]", "Authorization", k)
		}
	}
	ts.do(t, "DELETE", "api/keys/"+created.ID, "")
	ts.do(t, "POST", "api/apps/cardano/events", `[{"user_id": "u", "event": "e"}]`, "Authorization", "Bearer "+created.Secret)
	_, _, metrics := ts.do(t, "GET", "metrics", "")
	mu.Lock()
	logged := logBuf.String()
	mu.Unlock()
	if !strings.Contains(logged, "request") || !strings.Contains(logged, "key created") {
		t.Fatalf("the log is missing requests: %.500s", logged)
	}
	for name, k := range keys {
		for what, text := range map[string]string{"log": logged, "metrics": string(metrics)} {
			if strings.Contains(text, k[len(KeyPrefix):]) {
				t.Errorf("the %s key is in the %s", name, what)
			}
		}
	}
	if regexp.MustCompile(`spur_[a-z2-7]{8}`).MatchString(logged + string(metrics)) {
		t.Errorf("something like a key in the log or metrics")
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestAuthNone: without keys every request is served as by an admin key,
// and Serve refuses a listener that is not on a loopback address.
func TestAuthNone(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t), Auth: AuthNone})
	if code, _, body := ts.do(t, "GET", "api/key", ""); code != 200 || !strings.Contains(string(body), `"auth":"none"`) {
		t.Fatalf("own key: %d %s", code, body)
	}
	if code, _, _ := ts.do(t, "GET", "metrics", ""); code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	srv, err := New(Config{Store: emptyStore(t), Auth: AuthNone, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skip("no non-loopback listener here:", err)
	}
	if err := srv.Serve(t.Context(), ln, nil); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("Serve on %s without keys: %v", ln.Addr(), err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("the refused listener still accepts")
	}
}
