package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// Scope is the access a key needs for an endpoint (docs/ingest.md §4: an
// ingest key sends events, a query key queries an app and saves its
// cohorts, insights and dashboards, an admin key does everything). The
// scopes are declared with the routes; auth.go checks them.
type Scope string

// Scopes of docs/ingest.md §4.
const (
	ScopeIngest Scope = "ingest"
	ScopeQuery  Scope = "query"
	ScopeAdmin  Scope = "admin"
)

// endpoint is one API method and path pattern (net/http ServeMux syntax)
// with its handler and the scope a key needs.
type endpoint struct {
	method, path string
	scope        Scope
	h            http.HandlerFunc
}

// endpoints are the saved-document, user, person and SDK-snippet
// endpoints (insights.go, users.go, persons.go, snippets.go): per app, all
// of scope query.
func (s *Server) endpoints() []endpoint {
	var eps []endpoint
	for _, c := range s.collections() {
		base := "/api/apps/{app}/" + c.plural
		eps = append(eps,
			endpoint{"GET", base, ScopeQuery, s.listDocs(c)},
			endpoint{"POST", base, ScopeQuery, s.createDoc(c)},
			endpoint{"GET", base + "/{id}", ScopeQuery, s.getDoc(c)},
			endpoint{"PUT", base + "/{id}", ScopeQuery, s.updateDoc(c)},
			endpoint{"DELETE", base + "/{id}", ScopeQuery, s.deleteDoc(c)})
	}
	return append(eps,
		endpoint{"GET", "/api/apps/{app}/insights/{id}/result", ScopeQuery, s.handleInsightResult},
		endpoint{"GET", "/api/apps/{app}/users", ScopeQuery, s.handleUsers},
		endpoint{"GET", "/api/apps/{app}/users/{id}", ScopeQuery, s.handleUser},
		endpoint{"GET", "/api/apps/{app}/users/{id}/events", ScopeQuery, s.handleUserEvents},
		endpoint{"GET", "/api/apps/{app}/persons/{id}", ScopeQuery, s.handleUser},
		endpoint{"GET", "/api/apps/{app}/persons/{id}/events", ScopeQuery, s.handleUserEvents},
		endpoint{"GET", "/api/apps/{app}/persons/{id}/export", ScopeQuery, s.handlePersonExport},
		endpoint{"GET", "/api/apps/{app}/warnings", ScopeQuery, s.handleWarnings},
		endpoint{"GET", "/api/apps/{app}/sdk-snippets", ScopeQuery, s.handleSDKSnippets},
	)
}

// mergePath is the path of POST /persons/merge (persons.go). It shares
// its requests with GET /persons/{id}: a GET of it is the page of the
// distinct id "merge", other methods answer 405 with Allow: GET.
const mergePath = "/api/apps/{app}/persons/merge"

// registerEndpoints adds the endpoints to mux: each "METHOD path", and
// for each path an answer 405 with Allow naming its methods; and the
// admin endpoint POST /persons/merge.
func (s *Server) registerEndpoints(rt *router) {
	for _, ep := range s.endpoints() {
		rt.handle(ep.method, ep.path, sameOriginOnly, needs(ep.scope), ep.h)
	}
	rt.handle("POST", mergePath, sameOriginOnly, needs(ScopeAdmin), s.handleMergePersons)
	rt.handle("DELETE", "/api/apps/{app}/persons/{id}", sameOriginOnly, needs(ScopeAdmin), s.handleErasePerson)
	rt.handle("GET", "/api/apps/{app}/deletions", sameOriginOnly, needs(ScopeAdmin), s.handleDeletions)
	rt.handle("POST", "/api/apps/{app}/delete", sameOriginOnly, needs(ScopeAdmin), s.handleDeleteEvents)
	rt.noFallback[mergePath] = true
}

// appOf returns the app named in the request path, or answers 404.
func (s *Server) appOf(w http.ResponseWriter, r *http.Request) (*storage.App, bool) {
	name := r.PathValue("app")
	if !storage.ValidAppName(name) {
		writeError(w, notFoundApp(name))
		return nil, false
	}
	a, err := s.store.App(name)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			writeError(w, notFoundApp(name))
		} else {
			s.internal(w, r, err)
		}
		return nil, false
	}
	return a, true
}

// execute runs q in a query slot within the server's query time limit,
// and returns its result and run time. The error is the runner's, or
// limit_exceeded when no slot freed up in time.
func (s *Server) execute(ctx context.Context, q *query.Query) (query.Result, time.Duration, error) {
	qctx, cancel := ctx, context.CancelFunc(func() {})
	if s.cfg.QueryTimeout > 0 {
		qctx, cancel = context.WithTimeout(ctx, s.cfg.QueryTimeout)
	}
	defer cancel()
	start := time.Now()
	var res query.Result
	var err error
	select {
	case s.slots <- struct{}{}:
		rctx, st := storage.StartStage(qctx, "run", -1)
		res, err = s.runner.Run(rctx, q)
		st.End()
		<-s.slots
	case <-qctx.Done():
		err = &query.Error{Code: query.CodeLimitExceeded, Err: qctx.Err(),
			Message: "query time limit exceeded while waiting for a free query slot"}
		if errors.Is(qctx.Err(), context.Canceled) {
			err = &query.Error{Code: query.CodeUnavailable, Err: qctx.Err(),
				Message: "query cancelled while waiting for a free query slot: " + context.Cause(qctx).Error()}
		}
	}
	return res, time.Since(start), err
}
