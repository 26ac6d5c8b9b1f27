package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// Access (docs/ingest.md §4). Every /api/ request and /metrics carry
// "Authorization: Bearer KEY" (keys.go); the scope each endpoint needs is
// declared with its route:
//
//	ingest  POST /api/apps/{app}/events, POST /api/apps/{app}/import: the key's app only
//	query   GET /api/apps (lists the key's app), schema, query, insights,
//	        dashboards, cohorts, users: the key's app only
//	admin   everything on every app, plus GET/POST /api/keys,
//	        DELETE /api/keys/{id}, DELETE /api/apps/{app}, POST
//	        /api/backup and GET /metrics
//	any key GET /api/key (the key's own record), and the 404/405 answers
//	        of /api/ (an unauthenticated client learns nothing)
//	none    GET /healthz, the web UI's files, CORS preflights; /metrics
//	        on the debug listener
//
// A missing, malformed or unknown key is 401 unauthenticated (with
// WWW-Authenticate: Bearer); a key without the scope, or for another app,
// is 403 forbidden; the message says which. An admin key passes every
// check. Keys never appear in logs, metrics or answers (but the one
// creation answer).

// AuthMode says how a Server authenticates requests.
type AuthMode uint8

const (
	// AuthKeys requires keys (the default).
	AuthKeys AuthMode = iota
	// AuthNone serves every request as an admin key would. Serve refuses
	// it unless every listener is on a loopback address (docs/ingest.md §4).
	AuthNone
)

// access is what a route needs from its request's key.
type access struct {
	scope  Scope // the scope needed; "" with anyKey false: no key
	app    bool  // ingest and query keys must be for the path's {app}
	anyKey bool  // any current key
}

// open is the access of routes that need no key.
var open = access{}

// needs returns the access of a route for scope on the path's app.
func needs(scope Scope) access { return access{scope: scope, app: true} }

// noneKey is the key of every request under AuthNone.
var noneKey = &Key{ID: "none", Scope: ScopeAdmin, Name: "--auth none"}

// requestKey returns the record of the request's key, or nil with why it
// is not one (for the 401 message). Under AuthNone it is noneKey.
func (s *Server) requestKey(r *http.Request) (*Key, string) {
	if s.cfg.Auth == AuthNone {
		return noneKey, ""
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, "missing API key: send the header \"Authorization: Bearer KEY\" (keys come from `spur keys create`)"
	}
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, "malformed Authorization header: want \"Bearer KEY\""
	}
	k := s.keys.Lookup(strings.TrimSpace(key))
	if k == nil {
		return nil, "unknown API key: it was revoked, or it is not a key of this server"
	}
	return k, ""
}

// authorize returns h behind the checks of acc (see the doc above).
func (s *Server) authorize(acc access, h http.Handler) http.Handler {
	if acc == open {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, why := s.requestKey(r)
		if k == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="spur"`)
			s.met.authFailures.WithLabelValues("401").Inc()
			writeError(w, &apiError{Status: http.StatusUnauthorized, Code: query.CodeUnauthenticated, Field: "authorization", Message: why})
			return
		}
		if why := forbidden(k, acc, r); why != "" {
			s.met.authFailures.WithLabelValues("403").Inc()
			writeError(w, &apiError{Status: http.StatusForbidden, Code: query.CodeForbidden, Field: "authorization", Message: why})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// forbidden returns why key k may not make request r of a route with
// access acc, or "".
func forbidden(k *Key, acc access, r *http.Request) string {
	if k.Scope == ScopeAdmin || acc.anyKey {
		return ""
	}
	desc := fmt.Sprintf("key %s is %s %s key for app %s", k.ID, article(k.Scope), k.Scope, event.Quote(k.App))
	if k.Scope != acc.scope {
		return fmt.Sprintf("%s; %s %s needs %s", desc, r.Method, r.URL.Path, scopeNeed(acc.scope))
	}
	if app := r.PathValue("app"); acc.app && app != k.App {
		return fmt.Sprintf("%s, not for app %s", desc, event.Quote(app))
	}
	return ""
}

// article returns the indefinite article before scope's name.
func article(scope Scope) string {
	if scope == ScopeIngest || scope == ScopeAdmin {
		return "an"
	}
	return "a"
}

// scopeNeed says which keys an endpoint of scope takes.
func scopeNeed(scope Scope) string {
	switch scope {
	case ScopeAdmin:
		return "an admin key"
	case ScopeIngest:
		return "an ingest key of the app (or an admin key)"
	}
	return "a query key of the app (or an admin key)"
}

// readable reports whether key k may read app (GET /api/apps lists those).
func readable(k *Key, app string) bool {
	return k.Scope == ScopeAdmin || k.Scope == ScopeQuery && k.App == app
}

// Key administration (scope admin; `spur keys … --url` calls these):
//
//	GET    /api/key         the request's own key: {"id", "scope", "app"?, "name"?, "created", "auth"} (any key)
//	GET    /api/keys        {"keys": [{"id", "scope", "app"?, "name"?, "created"}]}, sorted by id
//	POST   /api/keys        body {"scope": "ingest"|"query"|"admin", "app"?, "name"?} → 201 {"key": "spur_…", "id", …}: the key, shown this once
//	DELETE /api/keys/{id}   204; 404 for an unknown id; 409 for the last admin key
//
// A revoked key is refused from the next request on.

func (s *Server) handleOwnKey(w http.ResponseWriter, r *http.Request) {
	k, _ := s.requestKey(r)
	auth := "keys"
	if s.cfg.Auth == AuthNone {
		auth = "none"
	}
	writeJSON(w, http.StatusOK, struct {
		*Key
		Auth string `json:"auth"`
	}{k, auth})
}

func (s *Server) handleListKeys(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string][]Key{"keys": s.keys.List()})
}

// createdKey is the answer of POST /api/keys: the key and its record.
type createdKey struct {
	Secret string `json:"key"`
	Key
}

// keyRequest is the body of POST /api/keys.
type keyRequest struct {
	Scope Scope  `json:"scope"`
	App   string `json:"app,omitempty"`
	Name  string `json:"name,omitempty"`
}

// readStrict reads a JSON request body of at most maxDocBody bytes into v
// (decodeStrict: no unknown field, nothing after the object); on failure
// it answers 400 (or the body limit's error) and returns false.
func readStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDocBody))
	if err != nil {
		writeError(w, bodyError(w, err, maxDocBody))
		return false
	}
	if err := decodeStrict(body, v); err != nil {
		var qe *query.Error
		errors.As(err, &qe)
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: qe.Code, Field: qe.Field, Message: qe.Message})
		return false
	}
	return true
}

func (s *Server) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	var kr keyRequest
	if !readStrict(w, r, &kr) {
		return
	}
	secret, k, err := s.keys.Create(kr.Scope, kr.App, kr.Name)
	if errors.Is(err, ErrBadKeyRequest) {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Message: err.Error()})
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.log.Info("key created", "id", k.ID, "scope", k.Scope, "app", k.App)
	writeJSON(w, http.StatusCreated, createdKey{Secret: secret, Key: k})
}

func (s *Server) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var target *Key
	for _, k := range s.keys.List() {
		if k.ID == id {
			target = &k
		}
	}
	switch {
	case target == nil:
		writeError(w, &apiError{Status: http.StatusNotFound, Code: query.CodeNotFound, Field: "id",
			Message: fmt.Sprintf("no key %s", event.Quote(id))})
		return
	case target.Scope == ScopeAdmin && s.keys.Admins() == 1:
		writeError(w, &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "id",
			Message: fmt.Sprintf("key %s is the last admin key: create another admin key first", id)})
		return
	}
	if err := s.keys.Revoke(id); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			writeError(w, &apiError{Status: http.StatusNotFound, Code: query.CodeNotFound, Field: "id", Message: err.Error()})
			return
		}
		s.internal(w, r, err)
		return
	}
	s.log.Info("key revoked", "id", id)
	w.WriteHeader(http.StatusNoContent)
}
