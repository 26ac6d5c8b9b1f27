package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// Snippet is the code that points one SDK at a Spur server (docs/ingest.md §6
// "Keys for SDKs"): a few lines, in the SDK's language, with the server's
// base URL and an ingest key filled in.
type Snippet struct {
	// SDK is the client library's package name, e.g. "posthog-js",
	// "segment-analytics-python", "analytics-go".
	SDK string `json:"sdk"`
	// Language is "javascript", "python" or "go".
	Language string `json:"language"`
	// Code is the snippet, lines separated by "\n", without a final newline.
	Code string `json:"code"`
}

// SnippetBasePlaceholder is the base URL of the snippets when the server's
// public URL is not known (`spur keys create --snippets` without
// --public-url).
const SnippetBasePlaceholder = "https://spur.example.com"

// SnippetKeyPlaceholder is the key of the snippets when no ingest key is at
// hand (the web UI before it creates one). It is unique in every snippet's
// code, so a client may substitute a real key for it.
const SnippetKeyPlaceholder = "YOUR_SPUR_INGEST_KEY"

// sdkSnippets are the snippets' templates: {{base}} and {{key}} are
// replaced. The clients append their own paths to each prefix (docs/ingest.md
// §6); the options are the ones the SDK-driven tests use. docs/sdks.md
// shows the same text, with what each option does.
var sdkSnippets = []Snippet{
	{"posthog-js", "javascript", `import posthog from 'posthog-js'

posthog.init('{{key}}', {
  api_host: '{{base}}/ingest/posthog',
  disable_session_recording: true, // Spur stores no recordings
})`},
	{"posthog-python", "python", `from posthog import Posthog

posthog = Posthog('{{key}}', host='{{base}}/ingest/posthog')`},
	{"posthog-node", "javascript", `import { PostHog } from 'posthog-node'

const posthog = new PostHog('{{key}}', { host: '{{base}}/ingest/posthog' })`},
	{"posthog-go", "go", `// import "github.com/posthog/posthog-go"
client, err := posthog.NewWithConfig("{{key}}", posthog.Config{
	Endpoint: "{{base}}/ingest/posthog",
})`},
	{"@segment/analytics-next", "javascript", `import { AnalyticsBrowser } from '@segment/analytics-next'

// Spur answers the settings request at cdnURL and points the
// Segment.io integration back at itself.
const analytics = AnalyticsBrowser.load({
  writeKey: '{{key}}',
  cdnURL: '{{base}}/ingest/segment',
})`},
	{"segment-analytics-python", "python", `import segment.analytics as analytics

analytics.write_key = '{{key}}'
analytics.host = '{{base}}/ingest/segment'`},
	{"@segment/analytics-node", "javascript", `import { Analytics } from '@segment/analytics-node'

const analytics = new Analytics({ writeKey: '{{key}}', host: '{{base}}/ingest/segment' })`},
	{"analytics-go", "go", `// import "gopkg.in/segmentio/analytics-go.v3"
client, err := analytics.NewWithConfig("{{key}}", analytics.Config{
	Endpoint: "{{base}}/ingest/segment",
})`},
	{"@amplitude/analytics-browser", "javascript", `import * as amplitude from '@amplitude/analytics-browser'

amplitude.init('{{key}}', { serverUrl: '{{base}}/ingest/amplitude/2/httpapi' })`},
	{"amplitude-analytics", "python", `from amplitude import Amplitude, Config

client = Amplitude('{{key}}', Config(server_url='{{base}}/ingest/amplitude/2/httpapi'))`},
	{"@amplitude/analytics-node", "javascript", `import { init } from '@amplitude/analytics-node'

init('{{key}}', { serverUrl: '{{base}}/ingest/amplitude/2/httpapi' })`},
	{"mixpanel-python", "python", `from mixpanel import Mixpanel, Consumer

mp = Mixpanel('{{key}}', consumer=Consumer(
    events_url='{{base}}/ingest/mixpanel/track',
    people_url='{{base}}/ingest/mixpanel/engage',
    groups_url='{{base}}/ingest/mixpanel/groups',
    import_url='{{base}}/ingest/mixpanel/import',
))`},
	{"mixpanel-browser", "javascript", `import mixpanel from 'mixpanel-browser'

mixpanel.init('{{key}}', {
  api_host: '{{base}}/ingest/mixpanel',
  api_routes: { track: 'track', engage: 'engage', groups: 'groups' },
})`},
}

// SDKSnippets returns, for each supported SDK (in a fixed order: PostHog,
// Segment, Amplitude, Mixpanel), the lines that point it at the server at
// baseURL with the ingest key key. baseURL is the server's public URL as
// the clients reach it ("" for SnippetBasePlaceholder): an absolute http or
// https URL, possibly with a path, without query, fragment or user info; a
// final "/" is dropped. key "" is SnippetKeyPlaceholder. The snippets quote
// both in string literals, so a baseURL or key holding a quote, backslash,
// space or control character is refused, as is a malformed baseURL: the
// error says which. The result is newly allocated and the caller's.
func SDKSnippets(baseURL, key string) ([]Snippet, error) {
	base, err := snippetBase(baseURL)
	if err != nil {
		return nil, err
	}
	if key == "" {
		key = SnippetKeyPlaceholder
	}
	if !literalSafe(key) {
		return nil, fmt.Errorf("snippets: key %q: only letters, digits and _ . - may be quoted in a snippet", key)
	}
	r := strings.NewReplacer("{{base}}", base, "{{key}}", key)
	out := make([]Snippet, len(sdkSnippets))
	for i, s := range sdkSnippets {
		out[i] = Snippet{SDK: s.SDK, Language: s.Language, Code: r.Replace(s.Code)}
	}
	return out, nil
}

// snippetBase checks a snippet base URL and returns it without its final
// "/" ("" is the placeholder).
func snippetBase(baseURL string) (string, error) {
	if baseURL == "" {
		return SnippetBasePlaceholder, nil
	}
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return "", fmt.Errorf("snippets: base URL %q: %w", baseURL, err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return "", fmt.Errorf("snippets: base URL %q: want http://HOST[:PORT][/PATH] or https://…", baseURL)
	case u.User != nil, u.RawQuery != "", u.ForceQuery, u.Fragment != "":
		return "", fmt.Errorf("snippets: base URL %q: no user, query or fragment, only scheme, host and path", baseURL)
	case strings.ContainsAny(baseURL, "'\"`\\<>{} \t\r\n"):
		return "", fmt.Errorf("snippets: base URL %q holds a character that cannot be quoted in a snippet", baseURL)
	}
	return strings.TrimRight(baseURL, "/"), nil
}

// literalSafe reports whether s is non-empty and only letters, digits and
// _ . - (what keys and app names are made of).
func literalSafe(s string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return s != ""
}

// sdkSnippetsAnswer is the body of GET /api/apps/{app}/sdk-snippets.
type sdkSnippetsAnswer struct {
	// Base is the base URL the snippets use.
	Base string `json:"base"`
	// Key is the key the snippets hold: SnippetKeyPlaceholder, or under
	// --auth none the app's name (which is then what the SDKs send).
	Key string `json:"key"`
	// Placeholder says Key is SnippetKeyPlaceholder, to be replaced by an
	// ingest key of the app.
	Placeholder bool      `json:"placeholder"`
	Snippets    []Snippet `json:"snippets"`
}

// handleSDKSnippets serves GET /api/apps/{app}/sdk-snippets?base=URL: the
// SDKSnippets of the app for the server at URL (the web UI sends its own
// origin), with SnippetKeyPlaceholder for the key — or under --auth none
// the app's name, which those endpoints read as the key. No key is ever
// put in the URL: the UI substitutes one it creates for the placeholder.
// 400 for a bad base, 404 for an invalid app name (the app need not exist
// yet: its first event creates it).
func (s *Server) handleSDKSnippets(w http.ResponseWriter, r *http.Request) {
	a := sdkSnippetsAnswer{Key: SnippetKeyPlaceholder, Placeholder: true}
	if app := r.PathValue("app"); !storage.ValidAppName(app) {
		writeError(w, notFoundApp(app))
		return
	} else if s.cfg.Auth == AuthNone {
		a.Key, a.Placeholder = app, false
	}
	base := r.URL.Query().Get("base")
	snips, err := SDKSnippets(base, a.Key)
	if err != nil {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Field: "base", Message: err.Error()})
		return
	}
	a.Base, _ = snippetBase(base)
	a.Snippets = snips
	writeJSON(w, http.StatusOK, a)
}
