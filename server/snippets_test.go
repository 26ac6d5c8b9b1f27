package server

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestSDKSnippets: every SDK's snippet carries the key once and the base
// URL under its protocol's prefix; placeholders stand in for missing ones;
// what cannot be quoted in a snippet is refused.
func TestSDKSnippets(t *testing.T) {
	const key = "spur_abcdefghijklmnopqrstuvwxyz234567"
	snips, err := SDKSnippets("https://spur.test:8443/base/", key)
	if err != nil {
		t.Fatal(err)
	}
	prefixes := map[string]int{}
	for _, s := range snips {
		if s.SDK == "" || (s.Language != "javascript" && s.Language != "python" && s.Language != "go") {
			t.Errorf("snippet %+v", s)
		}
		if n := strings.Count(s.Code, key); n != 1 {
			t.Errorf("%s: the key %d times:\n%s", s.SDK, n, s.Code)
		}
		found := false
		for _, p := range []string{"posthog", "segment", "amplitude", "mixpanel"} {
			if strings.Contains(s.Code, "https://spur.test:8443/base/ingest/"+p) {
				prefixes[p]++
				found = true
			}
		}
		if !found || strings.Contains(s.Code, "{{") || strings.Contains(s.Code, "base//") {
			t.Errorf("%s: no base URL under an /ingest/ prefix:\n%s", s.SDK, s.Code)
		}
	}
	if len(snips) != 13 || prefixes["posthog"] != 4 || prefixes["segment"] != 4 || prefixes["amplitude"] != 3 || prefixes["mixpanel"] != 2 {
		t.Errorf("%d snippets, per prefix %v", len(snips), prefixes)
	}

	snips, err = SDKSnippets("", "")
	if err != nil || !strings.Contains(snips[0].Code, SnippetBasePlaceholder+"/ingest/posthog") || !strings.Contains(snips[0].Code, SnippetKeyPlaceholder) {
		t.Fatalf("placeholders: %v %+v", err, snips)
	}
	for _, bad := range [][2]string{{"spur.test", ""}, {"ftp://spur.test", ""}, {"https://", ""}, {"https://spur.test/?a=1", ""},
		{"https://u:p@spur.test", ""}, {"https://spur.test/#x", ""}, {"https://spur.test/a'b", ""}, {"https://spur.test", "k'); evil("},
		{"https://spur.test", "a b"}, {"https://spur.test", "k\n"}} {
		if _, err := SDKSnippets(bad[0], bad[1]); err == nil || !strings.Contains(err.Error(), "snippets: ") {
			t.Errorf("SDKSnippets(%q, %q): %v", bad[0], bad[1], err)
		}
	}
}

// TestSDKSnippetsEndpoint: GET /api/apps/{app}/sdk-snippets answers the
// snippets for ?base= with the key placeholder (never a key in a URL), or
// under --auth none with the app's name, which those endpoints read as
// the key.
func TestSDKSnippetsEndpoint(t *testing.T) {
	for _, auth := range []AuthMode{AuthKeys, AuthNone} {
		ts := start(t, Config{Store: emptyStore(t), Auth: auth})
		code, _, b := ts.do(t, "GET", "api/apps/shop/sdk-snippets?base=http://127.0.0.1:8080", "")
		var a sdkSnippetsAnswer
		if err := json.Unmarshal(b, &a); code != 200 || err != nil {
			t.Fatalf("auth %d: %d %v %s", auth, code, err, b)
		}
		want, placeholder := SnippetKeyPlaceholder, true
		if auth == AuthNone {
			want, placeholder = "shop", false
		}
		if a.Base != "http://127.0.0.1:8080" || a.Key != want || a.Placeholder != placeholder || len(a.Snippets) != len(sdkSnippets) ||
			!strings.Contains(a.Snippets[0].Code, "'"+want+"'") || !strings.Contains(a.Snippets[0].Code, "http://127.0.0.1:8080/ingest/posthog") {
			t.Errorf("auth %d: %+v", auth, a)
		}
		code, _, b = ts.do(t, "GET", "api/apps/shop/sdk-snippets?base=javascript:alert(1)", "")
		if e := decodeError(t, b); code != 400 || e.Error.Field != "base" {
			t.Errorf("auth %d: bad base: %d %s", auth, code, b)
		}
		code, _, b = ts.do(t, "GET", "api/apps/Bad%20App/sdk-snippets", "")
		if code != 404 {
			t.Errorf("auth %d: bad app: %d %s", auth, code, b)
		}
	}
}

// TestSDKSnippetsInDocs: docs/sdks.md shows every snippet as SDKSnippets
// writes it with the placeholders, so the page, the CLI and the UI agree.
func TestSDKSnippetsInDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/sdks.md")
	if err != nil {
		t.Fatal(err)
	}
	snips, err := SDKSnippets("", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snips {
		if !strings.Contains(string(doc), "**"+s.SDK+"**\n\n```") || !strings.Contains(string(doc), "\n"+s.Code+"\n```\n") {
			t.Errorf("docs/sdks.md lacks the snippet of %s:\n%s", s.SDK, s.Code)
		}
	}
}
