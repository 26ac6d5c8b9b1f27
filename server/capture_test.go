package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// captureServer serves a live store with keys; it returns the server and
// an ingest key and a query key of app "sdk".
func captureServer(t *testing.T) (*testServer, string, string) {
	t.Helper()
	ts := start(t, Config{Store: liveStore(t)})
	query, _, err := ts.srv.Keys().Create(ScopeQuery, "sdk", "")
	if err != nil {
		t.Fatal(err)
	}
	return ts, ingestKey(t, ts, "sdk"), query
}

// personEvents returns the number of events of the person of distinct id
// id in app sdk, and its distinct ids (0 and nil when unknown).
func personEvents(t *testing.T, ts *testServer, id string) (int, []string) {
	t.Helper()
	code, _, b := ts.do(t, "GET", "api/apps/sdk/persons/"+url.PathEscape(id)+"/events", "")
	if code == 404 {
		return 0, nil
	}
	var ans struct {
		Total       int      `json:"total"`
		DistinctIDs []string `json:"distinct_ids"`
	}
	if code != 200 || json.Unmarshal(b, &ans) != nil {
		t.Fatalf("person %s: %d %s", id, code, b)
	}
	return ans.Total, ans.DistinctIDs
}

// TestCaptureProtocols: each protocol's request, as its client sends it,
// gets the answer the client expects; its events, person properties and
// identity operations are visible when it is answered; a resend is
// stored once.
func TestCaptureProtocols(t *testing.T) {
	ts, key, _ := captureServer(t)
	ts0 := "2026-11-20T10:00:00"
	// sent_at is the server's now: within --max-clock-skew, so the events
	// keep their times and the resend below is a copy. (Sent 8 days
	// late, each request's events would move by now − sent_at in whole
	// seconds, and a resend in the next second would not be one.)
	sentAt := time.Now().UTC().Format("2006-01-02T15:04:05")
	posthog := fmt.Sprintf(`{"api_key":%q,"sent_at":"%sZ","batch":[
		{"event":"signup","distinct_id":"ph-anon","uuid":"u-1","timestamp":"%s.1Z","properties":{"plan":"free","$set":{"email":"a@b.c"}}},
		{"event":"$identify","distinct_id":"ph-user","uuid":"","timestamp":"%s.2Z","properties":{"$anon_distinct_id":"ph-anon"},"$set":{"name":"Ada"}},
		{"event":"purchase","distinct_id":"ph-user","uuid":"","timestamp":"%s.3Z","properties":{"amount":9.5}}]}`, key, sentAt, ts0, ts0, ts0)
	segment := fmt.Sprintf(`{"writeKey":%q,"batch":[
		{"type":"track","event":"signup","anonymousId":"sg-anon","messageId":"m-1","timestamp":"%s.1Z"},
		{"type":"identify","userId":"sg-user","anonymousId":"sg-anon","traits":{"email":"s@b.c"},"messageId":"m-2","timestamp":"%s.2Z"},
		{"type":"page","userId":"sg-user","name":"Home","messageId":"m-3","timestamp":"%s.3Z","context":{"userAgent":"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"}}]}`, key, ts0, ts0, ts0)
	amplitude := fmt.Sprintf(`{"api_key":%q,"events":[
		{"event_type":"signup","device_id":"am-device","insert_id":"a-1","time":1763632800100},
		{"event_type":"purchase","user_id":"am-user","device_id":"am-device","insert_id":"a-2","time":1763632800200,"user_properties":{"$set":{"email":"m@b.c"}}}]}`, key)
	mixpanel := url.Values{"data": {fmt.Sprintf(`[
		{"event":"signup","properties":{"token":%q,"distinct_id":"mp-anon","time":1763632800.1,"$insert_id":"x-1"}},
		{"event":"$identify","properties":{"token":%q,"$identified_id":"mp-user","$anon_id":"mp-anon","time":1763632800.2,"$insert_id":"x-2"}}]`, key, key)},
		"verbose": {"1"}}.Encode()
	cases := []struct {
		name, path, body, ctype string
		hdr                     []string
		want                    string
		user, anon              string
		events                  int
	}{
		{"posthog", "ingest/posthog/batch/", posthog, "application/json", nil, `{"status":1}`, "ph-user", "ph-anon", 3},
		{"segment", "ingest/segment/v1/batch", segment, "text/plain", nil, `{"success":true}`, "sg-user", "sg-anon", 3},
		{"amplitude", "ingest/amplitude/2/httpapi", amplitude, "application/json", nil, `"code":200,"events_ingested":2`, "am-user", "am-device", 2},
		{"mixpanel", "ingest/mixpanel/track", mixpanel, "application/x-www-form-urlencoded", nil, `{"error":null,"status":1}`, "mp-user", "mp-anon", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for try := range 2 { // the resend is stored once
				code, hdr, b := ts.do(t, "POST", c.path, c.body, append([]string{"Content-Type", c.ctype, "Authorization", ""}, c.hdr...)...)
				if code != 200 || !strings.Contains(string(b), c.want) {
					t.Fatalf("try %d: %d %s, want 200 %s", try, code, b, c.want)
				}
				if hdr.Get("Access-Control-Allow-Origin") != "*" {
					t.Errorf("no CORS header: %v", hdr)
				}
				n, ids := personEvents(t, ts, c.anon)
				if n != c.events || strings.Join(ids, ",") != c.anon+","+c.user {
					t.Fatalf("try %d: person of %s has %d events and ids %v, want %d and [%s %s]", try, c.anon, n, ids, c.events, c.anon, c.user)
				}
			}
		})
	}
	// Person properties, by any id.
	for id, want := range map[string]string{"ph-anon": `"email":"a@b.c","name":"Ada"`, "sg-anon": `"email":"s@b.c"`, "am-device": `"email":"m@b.c"`} {
		code, _, b := ts.do(t, "GET", "api/apps/sdk/persons/"+id, "")
		if code != 200 || !strings.Contains(string(b), want) {
			t.Errorf("person %s: %d %s, want %s", id, code, b, want)
		}
	}
	// The Segment page's user agent: $browser, $os, $device_type.
	_, _, b := ts.do(t, "GET", "api/apps/sdk/persons/sg-user/events", "")
	if !strings.Contains(string(b), `"$browser":"Firefox"`) || !strings.Contains(string(b), `"$os":"Linux"`) {
		t.Errorf("user agent not parsed into the page event (ParseUserAgent): %s", b)
	}
}

// TestCaptureEncodings: posthog-js's gzip without Content-Encoding, its
// base64 form, a gzip with the header, Mixpanel's base64 data, and
// posthog-js's offset-only events resent with another offset.
func TestCaptureEncodings(t *testing.T) {
	ts, key, _ := captureServer(t)
	ev := func(id string) string {
		return fmt.Sprintf(`[{"event":"e","distinct_id":%q,"uuid":"%s-1","timestamp":"2026-11-20T10:00:00Z","properties":{"token":%q}}]`, id, id, key)
	}
	for _, c := range []struct {
		id, path, body string
		hdr            []string
	}{
		{"gz-js", "ingest/posthog/e/?compression=gzip-js&ver=1.0", gzipped(t, ev("gz-js")), []string{"Content-Type", "text/plain"}},
		{"gz-hdr", "ingest/posthog/batch/", gzipped(t, ev("gz-hdr")), []string{"Content-Encoding", "gzip"}},
		{"b64", "ingest/posthog/e/?compression=base64", "data=" + url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(ev("b64")))), []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"mp64", "ingest/mixpanel/track?ip=0", "data=" + url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf(`{"event":"e","properties":{"token":%q,"distinct_id":"mp64","time":1763632800}}`, key)))), []string{"Content-Type", "application/x-www-form-urlencoded"}},
	} {
		code, _, b := ts.do(t, "POST", c.path, c.body, append([]string{"Authorization", ""}, c.hdr...)...)
		if code != 200 {
			t.Errorf("%s: %d %s", c.id, code, b)
		}
		if n, _ := personEvents(t, ts, c.id); n != 1 {
			t.Errorf("%s: %d events stored, want 1", c.id, n)
		}
	}
	// posthog-js: no timestamp, an offset, a UUIDv7 of now; resent later
	// with a larger offset: one event.
	ms := time.Now().UnixMilli() - 2000
	uuid := fmt.Sprintf("%08x-%04x-7000-8000-000000000001", ms>>16, ms&0xffff)
	for _, off := range []int{100, 1600} {
		body := fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"$pageview","uuid":%q,"offset":%d,"properties":{"distinct_id":"js-offset"}}]}`, key, uuid, off)
		if code, _, b := ts.do(t, "POST", "ingest/posthog/e/", body, "Authorization", ""); code != 200 {
			t.Fatalf("%d %s", code, b)
		}
	}
	if n, _ := personEvents(t, ts, "js-offset"); n != 1 {
		t.Errorf("posthog-js resend: %d events, want 1", n)
	}
}

// TestCaptureKeys: an ingest key in each protocol's place names the app;
// a query key, an unknown key and mixed keys get the protocol's 401 (an
// Amplitude 400 "Invalid API key") and store nothing.
func TestCaptureKeys(t *testing.T) {
	ts, key, queryKey := captureServer(t)
	bodies := func(k string) map[string][3]string { // path, body, Basic user
		return map[string][3]string{
			"posthog":   {"ingest/posthog/batch/", fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"e","distinct_id":"k-ph","timestamp":"2026-11-20T10:00:00Z"}]}`, k)},
			"segment":   {"ingest/segment/v1/batch", `{"batch":[{"type":"track","event":"e","userId":"k-sg","timestamp":"2026-11-20T10:00:00Z"}]}`, k},
			"amplitude": {"ingest/amplitude/2/httpapi", fmt.Sprintf(`{"api_key":%q,"events":[{"event_type":"e","user_id":"k-amp1","time":1763632800000}]}`, k)},
			"mixpanel":  {"ingest/mixpanel/track", "data=" + url.QueryEscape(fmt.Sprintf(`{"event":"e","properties":{"token":%q,"distinct_id":"k-mp","time":1763632800}}`, k))},
			"import":    {"ingest/mixpanel/import", `[{"event":"e","properties":{"distinct_id":"k-imp","time":1763632800}}]`, k},
		}
	}
	post := func(name string, c [3]string) (int, string) {
		hdr := []string{"Authorization", ""}
		if c[2] != "" {
			hdr[1] = "Basic " + base64.StdEncoding.EncodeToString([]byte(c[2]+":"))
		}
		code, _, b := ts.do(t, "POST", c[0], c[1], hdr...)
		return code, string(b)
	}
	for _, bad := range []string{"spur_nope", queryKey, ""} {
		for name, c := range bodies(bad) {
			code, b := post(name, c)
			want := 401
			if name == "amplitude" {
				want = 400
				if !strings.Contains(b, `"error":"Invalid API key: `) || !strings.Contains(b, `"code":400`) {
					t.Errorf("amplitude key %q: %s", bad, b)
				}
			}
			if code != want {
				t.Errorf("%s with key %q: %d %s, want %d", name, bad, code, b, want)
			}
		}
	}
	for _, id := range []string{"k-ph", "k-sg", "k-amp1", "k-mp", "k-imp"} {
		if n, _ := personEvents(t, ts, id); n != 0 {
			t.Errorf("%s: %d events stored by refused requests", id, n)
		}
	}
	for name, c := range bodies(key) {
		if code, b := post(name, c); code != 200 {
			t.Errorf("%s with the ingest key: %d %s", name, code, b)
		}
	}
	for _, id := range []string{"k-ph", "k-sg", "k-amp1", "k-mp", "k-imp"} {
		if n, _ := personEvents(t, ts, id); n != 1 {
			t.Errorf("%s: %d events stored, want 1", id, n)
		}
	}
	// Mixed keys: PostHog's MultipleTokensError; nothing stored.
	mixed := fmt.Sprintf(`[{"event":"e","distinct_id":"mixed","timestamp":"2026-11-20T10:00:00Z","properties":{"token":%q}},{"event":"e","distinct_id":"mixed","timestamp":"2026-11-20T10:00:01Z","properties":{"token":"other"}}]`, key)
	if code, _, b := ts.do(t, "POST", "ingest/posthog/e/", mixed, "Authorization", ""); code != 401 {
		t.Errorf("mixed keys: %d %s", code, b)
	}
	if n, _ := personEvents(t, ts, "mixed"); n != 0 {
		t.Errorf("mixed keys stored %d events", n)
	}
}

// TestCaptureBadInput: undecodable, truncated and oversize bodies get
// each protocol's error answer and store nothing; a mistyped property is
// dropped from its event, which is stored, and listed as a warning.
func TestCaptureBadInput(t *testing.T) {
	st := liveStore(t)
	ts := start(t, Config{Store: st, MaxEventsBytes: 4096})
	key := ingestKey(t, ts, "sdk")
	good := fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"e","distinct_id":"bad-1","timestamp":"2026-11-20T10:00:00Z","properties":{"n":1}}]}`, key)
	for _, path := range []string{"ingest/posthog/batch/", "ingest/segment/v1/batch", "ingest/amplitude/2/httpapi", "ingest/mixpanel/track", "ingest/mixpanel/import"} {
		for name, c := range map[string]struct {
			body string
			want int
		}{
			"truncated":   {good[:len(good)/2], 400},
			"random":      {"\x00\x01\x02garbage", 400},
			"bad gzip":    {gzipped(t, good)[:20], 400},
			"oversize":    {`{"batch":[` + strings.Repeat(" ", 5000) + `]}`, 413},
			"empty batch": {`{"api_key":"x","batch":[],"events":[]}`, 400},
		} {
			code, _, b := ts.do(t, "POST", path, c.body, "Authorization", "")
			want := c.want
			if strings.Contains(path, "mixpanel") && name == "empty batch" {
				want = 401 // an object without token: no key
			}
			if code != want {
				t.Errorf("%s %s: %d %s, want %d", path, name, code, b, want)
			}
			if strings.Contains(path, "amplitude") && !strings.Contains(string(b), fmt.Sprintf(`"code":%d`, code)) {
				t.Errorf("amplitude %s: no code in %s", name, b)
			}
		}
	}
	if n, _ := personEvents(t, ts, "bad-1"); n != 0 {
		t.Fatalf("%d events stored from bad bodies", n)
	}
	// n is an int; a later string n is dropped, the event kept.
	if code, _, b := ts.do(t, "POST", "ingest/posthog/batch/", good, "Authorization", ""); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	typo := fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"e","distinct_id":"bad-1","uuid":"t","timestamp":"2026-11-20T10:00:01Z","properties":{"n":"one","m":2}}]}`, key)
	if code, _, b := ts.do(t, "POST", "ingest/posthog/batch/", typo, "Authorization", ""); code != 200 || strings.TrimSpace(string(b)) != `{"status":1}` {
		t.Fatalf("%d %s", code, b)
	}
	if n, _ := personEvents(t, ts, "bad-1"); n != 2 {
		t.Errorf("%d events, want 2", n)
	}
	code, _, b := ts.do(t, "GET", "api/apps/sdk/warnings?kind=property", "")
	if code != 200 || !strings.Contains(string(b), `"field":"properties.n"`) || !strings.Contains(string(b), `"total":1`) {
		t.Errorf("warnings: %d %s", code, b)
	}
}

// TestCaptureSideEndpoints: the flag, remote config and settings
// requests browser SDKs make at start, and CORS preflights.
func TestCaptureSideEndpoints(t *testing.T) {
	ts, key, _ := captureServer(t)
	// Mixpanel group updates: answered, not stored, listed (the app
	// exists once an event was stored).
	ev := "data=" + url.QueryEscape(fmt.Sprintf(`{"event":"e","properties":{"token":%q,"distinct_id":"g","time":1763632800}}`, key))
	if code, _, b := ts.do(t, "POST", "ingest/mixpanel/track", ev, "Authorization", ""); code != 200 {
		t.Fatalf("track: %d %s", code, b)
	}
	groups := "data=" + url.QueryEscape(fmt.Sprintf(`{"$token":%q,"$group_key":"company","$group_id":"acme","$set":{"n":1}}`, key))
	if code, _, b := ts.do(t, "POST", "ingest/mixpanel/groups", groups, "Authorization", ""); code != 200 || strings.TrimSpace(string(b)) != "1" {
		t.Errorf("groups: %d %q", code, b)
	}
	if _, _, b := ts.do(t, "GET", "api/apps/sdk/warnings?kind=property", ""); !strings.Contains(string(b), "group profile updates are not stored") {
		t.Errorf("groups warning: %s", b)
	}
	for _, c := range []struct{ method, path, want string }{
		{"POST", "ingest/posthog/flags/?v=2&config=true", `"featureFlags":{}`},
		{"POST", "ingest/posthog/decide/?v=3", `"sessionRecording":false`},
		{"GET", "ingest/posthog/array/phc_x/config", `"supportedCompression":["gzip","gzip-js"]`},
		{"GET", "ingest/segment/v1/projects/wk/settings", `"Segment.io":{"apiHost":"`},
		{"GET", "ingest/segment/v1/projects/wk/settings", `"metrics":{"sampleRate":0}`},
	} {
		code, hdr, b := ts.do(t, c.method, c.path, "{}", "Authorization", "", "Origin", "https://shop.example")
		if code != 200 || !strings.Contains(string(b), c.want) || hdr.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s %s: %d %v %s", c.method, c.path, code, hdr, b)
		}
	}
	code, hdr, _ := ts.do(t, "OPTIONS", "ingest/posthog/e/", "", "Origin", "https://shop.example", "Access-Control-Request-Method", "POST")
	if code != 204 || hdr.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight: %d %v", code, hdr)
	}
	// analytics-next's resend adds X-Retry-Count: the preflight allows the
	// headers asked for, when they are header names.
	for ask, want := range map[string]string{
		"authorization,content-type,x-retry-count": "authorization,content-type,x-retry-count",
		"x-a, x b:1": "Authorization, Content-Type, Content-Encoding",
	} {
		_, hdr, _ = ts.do(t, "OPTIONS", "ingest/segment/v1/t", "", "Origin", "https://shop.example",
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", ask)
		if got := hdr.Get("Access-Control-Allow-Headers"); got != want {
			t.Errorf("preflight asking %q: allows %q, want %q", ask, got, want)
		}
	}
	if code, _, b := ts.do(t, "POST", "ingest/segment/v1/m", `{"series":[]}`, "Origin", "https://shop.example"); code != 200 {
		t.Errorf("metrics: %d %s", code, b)
	}
}

// TestCaptureMemory: a capture request reserves its decoding's memory
// from the events memory (Config.EventsMemory) before the work: one that
// needs more alone is 413 in its protocol's shape, nothing stored.
func TestCaptureMemory(t *testing.T) {
	ts := start(t, Config{Store: liveStore(t), EventsMemory: 64 << 10})
	key := ingestKey(t, ts, "sdk")
	var evs []string
	for i := range 60 {
		evs = append(evs, fmt.Sprintf(`{"event":"e","distinct_id":"mem","uuid":"%d","timestamp":"2026-11-20T10:00:00Z","properties":{"pad":%q}}`, i, strings.Repeat("x", 100)))
	}
	body := fmt.Sprintf(`{"api_key":%q,"batch":[%s]}`, key, strings.Join(evs, ","))
	code, _, b := ts.do(t, "POST", "ingest/posthog/batch/", body, "Authorization", "")
	if code != 413 || !strings.Contains(string(b), `"detail":`) {
		t.Fatalf("%d bytes needing %d of 64 KiB: %d %s", len(body), captureWorkFactor*len(body), code, b)
	}
	if n, _ := personEvents(t, ts, "mem"); n != 0 {
		t.Errorf("%d events stored", n)
	}
	// A tenth of it passes.
	body = fmt.Sprintf(`{"api_key":%q,"batch":[%s]}`, key, strings.Join(evs[:6], ","))
	if code, _, b := ts.do(t, "POST", "ingest/posthog/batch/", body, "Authorization", ""); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
}

// TestUserPropertyOps: the operations unset, add and delete reach the
// store from the native endpoint (user_properties_unset,
// user_properties_add) and from the SDK protocols (PostHog $unset,
// Amplitude $add/$unset/$clearAll, Mixpanel /engage $add/$unset/$delete),
// and the user's properties are their fold in time order whatever the
// arrival order (docs/identity.md §3).
func TestUserPropertyOps(t *testing.T) {
	ts, key, _ := captureServer(t)
	auth := "Bearer " + key
	send := func(path, body, ctype string) {
		t.Helper()
		code, _, b := ts.do(t, "POST", path, body, "Content-Type", ctype, "Authorization", auth)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, b)
		}
	}
	props := func(id string) string {
		t.Helper()
		code, _, b := ts.do(t, "GET", "api/apps/sdk/users?id="+id, "")
		if code != 200 {
			t.Fatalf("users: %d %s", code, b)
		}
		return strings.TrimSpace(string(b))
	}
	// Native: sent latest first; the fold goes by timestamp.
	send("api/apps/sdk/events", `[{"user_id": "n1", "event": "e", "timestamp": "2026-01-05T00:00:00Z", "user_properties_add": {"logins": 2, "ltv": 1.5}},
		{"user_id": "n1", "event": "e", "timestamp": "2026-01-04T00:00:00Z", "user_properties_unset": ["plan", "logins"]},
		{"user_id": "n1", "event": "e", "timestamp": "2026-01-03T00:00:00Z", "user_properties": {"plan": "pro", "logins": 10, "ltv": 2.0, "tier": "a"}}]`, "application/json")
	if got, want := props("n1"), `{"users":[{"user_id":"n1","properties":{"logins":2,"ltv":3.5,"tier":"a"}}]}`; got != want {
		t.Errorf("native: %s, want %s", got, want)
	}
	code, _, b := ts.do(t, "POST", "api/apps/sdk/events", `[{"user_id": "n1", "event": "e", "user_properties_add": {"tier": 1}}]`, "Authorization", auth)
	if code != 200 || !strings.Contains(string(b), `"user_properties_add.tier"`) {
		t.Errorf("an add to a string property: %d %s", code, b)
	}
	// PostHog $unset (top level), after a $set in an earlier batch.
	send("ingest/posthog/batch/", fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"x","distinct_id":"p1","uuid":"ph-1","timestamp":"2026-01-03T00:00:00Z","properties":{"$set":{"plan":"pro","tier":"b"}}}]}`, key), "application/json")
	send("ingest/posthog/batch/", fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"y","distinct_id":"p1","uuid":"ph-2","timestamp":"2026-01-04T00:00:00Z","$unset":["plan"]}]}`, key), "application/json")
	if got, want := props("p1"), `{"users":[{"user_id":"p1","properties":{"tier":"b"}}]}`; got != want {
		t.Errorf("posthog: %s, want %s", got, want)
	}
	// Amplitude: $add twice, $unset, then $clearAll and a set at once.
	send("ingest/amplitude/2/httpapi", fmt.Sprintf(`{"api_key":%q,"events":[
		{"event_type":"e","user_id":"amp-1","insert_id":"a1","time":1767225600000,"user_properties":{"$set":{"plan":"pro"},"$add":{"logins":1}}},
		{"event_type":"e","user_id":"amp-1","insert_id":"a2","time":1767225601000,"user_properties":{"$add":{"logins":4}}}]}`, key), "application/json")
	if got, want := props("amp-1"), `{"users":[{"user_id":"amp-1","properties":{"logins":5,"plan":"pro"}}]}`; got != want {
		t.Errorf("amplitude adds: %s, want %s", got, want)
	}
	send("ingest/amplitude/2/httpapi", fmt.Sprintf(`{"api_key":%q,"events":[
		{"event_type":"e","user_id":"amp-1","insert_id":"a3","time":1767225602000,"user_properties":{"$clearAll":"-","$set":{"tier":"c"}}}]}`, key), "application/json")
	if got, want := props("amp-1"), `{"users":[{"user_id":"amp-1","properties":{"tier":"c"}}]}`; got != want {
		t.Errorf("amplitude $clearAll: %s, want %s", got, want)
	}
	// Mixpanel /engage: $delete, then $add and $unset.
	engage := func(body string) {
		t.Helper()
		send("ingest/mixpanel/engage", url.Values{"data": {body}}.Encode(), "application/x-www-form-urlencoded")
	}
	engage(fmt.Sprintf(`[{"$token":%q,"$distinct_id":"mp-1","$time":1767225600000,"$set":{"plan":"pro","n":1}}]`, key))
	engage(fmt.Sprintf(`[{"$token":%q,"$distinct_id":"mp-1","$time":1767225601000,"$add":{"n":2}},
		{"$token":%q,"$distinct_id":"mp-1","$time":1767225602000,"$unset":["plan"]}]`, key, key))
	if got, want := props("mp-1"), `{"users":[{"user_id":"mp-1","properties":{"n":3}}]}`; got != want {
		t.Errorf("mixpanel: %s, want %s", got, want)
	}
	engage(fmt.Sprintf(`[{"$token":%q,"$distinct_id":"mp-1","$time":1767225603000,"$delete":""}]`, key))
	if got, want := props("mp-1"), `{"users":[{"user_id":"mp-1","properties":{}}]}`; got != want {
		t.Errorf("mixpanel $delete: %s, want %s", got, want)
	}
}
