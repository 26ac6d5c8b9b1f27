package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/storage/segment"
)

// Saved documents of an app (scope query; storage/meta.go keeps them
// checksummed and written atomically):
//
//	GET    /api/apps/{app}/insights              {"insights": [doc…]} sorted by id
//	POST   /api/apps/{app}/insights              body {"name", "description"?, "query"} → 201 doc
//	GET    /api/apps/{app}/insights/{id}         doc
//	PUT    /api/apps/{app}/insights/{id}         body {"version", "name", "description"?, "query"} → doc (version+1); 409 conflict when version is not the current one
//	DELETE /api/apps/{app}/insights/{id}?version=N  204 (version optional; 409 when stale)
//	GET    /api/apps/{app}/insights/{id}/result  {"insight", "insight_version", "catalog_version", "computed_at", "age_seconds", "cached", "result"} (?refresh=1 recomputes)
//
// and the same five for dashboards (body {"name", "description"?, "tiles":
// [{"insight", "width"?}]}) and cohorts (body {"name", "definition",
// "description"?}; the id is the name, which POST requires). A doc is the
// body's fields plus "id", "version" (1 at creation, +1 per update),
// "created" and "updated". A query is stored as given: a relative range
// ({"last": "30d"}) stays relative and is resolved whenever it runs.
//
// An insight's result is cached by (query, catalog version, saved
// cohorts' versions when the query has a cohort, and for a relative range
// the minute it ran in, which it is run with as its "now"), so a cached
// answer is never stale; "age_seconds" says how old it is.

// collection is one kind of saved document: its URL and storage names and
// how a body is checked.
type collection struct {
	plural   string // URL segment and storage collection: insights
	singular string // in messages: insight
	// check validates a request body (strictly decoded) and returns the
	// body to store and, for collections whose id is a field, that id.
	check func(s *Server, app string, body []byte) (doc []byte, id string, err error)
}

func (s *Server) collections() []*collection {
	return []*collection{
		{plural: "insights", singular: "insight", check: checkInsight},
		{plural: "dashboards", singular: "dashboard", check: checkDashboard},
		{plural: "cohorts", singular: "cohort", check: checkCohort},
	}
}

// Bodies of the saved documents (decoded strictly; the stored body is
// re-encoded from them, the query and definitions as given).
type insightBody struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Query       json.RawMessage `json:"query"`
}

type dashboardBody struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Tiles       []dashboardTile `json:"tiles"`
}

// dashboardTile is one tile of a dashboard: a saved insight, one or two
// grid columns wide.
type dashboardTile struct {
	Insight string `json:"insight"`
	Width   int    `json:"width,omitempty"`
}

type cohortBody struct {
	Name        string          `json:"name"`
	Definition  json.RawMessage `json:"definition"`
	Description string          `json:"description,omitempty"`
}

// maxDocBody bounds a saved document's request body, bytes.
const maxDocBody = 1 << 20

// decodeStrict decodes one JSON object from b into v, refusing unknown
// fields and trailing data; the error is an invalid_query naming the
// field.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		field := ""
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			field = strings.Trim(f, `"`)
			msg = "unknown field " + f
		}
		return &query.Error{Code: query.CodeInvalidQuery, Field: field, Message: msg}
	}
	if dec.More() {
		return &query.Error{Code: query.CodeInvalidQuery, Message: "trailing data after the object"}
	}
	return nil
}

func checkName(name string) error {
	if strings.TrimSpace(name) == "" || utf8.RuneCountInString(name) > 200 || !utf8.ValidString(name) {
		return &query.Error{Code: query.CodeInvalidQuery, Field: "name", Message: "name is required: 1 to 200 characters"}
	}
	return nil
}

func checkInsight(_ *Server, app string, b []byte) ([]byte, string, error) {
	var ib insightBody
	if err := decodeStrict(b, &ib); err != nil {
		return nil, "", err
	}
	if err := checkName(ib.Name); err != nil {
		return nil, "", err
	}
	if len(ib.Query) == 0 {
		return nil, "", &query.Error{Code: query.CodeInvalidQuery, Field: "query", Message: "query is required: a docs/analytics.md §9 query"}
	}
	q, err := query.Parse(ib.Query)
	if err != nil {
		var qe *query.Error
		if errors.As(err, &qe) && qe.Field != "" {
			qe.Field = "query." + qe.Field
		}
		return nil, "", err
	}
	if q.Kind == "" {
		return nil, "", &query.Error{Code: query.CodeInvalidQuery, Field: "query.kind", Message: "the query needs a kind"}
	}
	if q.App != "" && q.App != app {
		return nil, "", &query.Error{Code: query.CodeInvalidQuery, Field: "query.app", Message: fmt.Sprintf("the query's app %q is not this app %q", q.App, app)}
	}
	out, err := json.Marshal(ib)
	return out, "", err
}

func checkDashboard(_ *Server, _ string, b []byte) ([]byte, string, error) {
	var db dashboardBody
	if err := decodeStrict(b, &db); err != nil {
		return nil, "", err
	}
	if err := checkName(db.Name); err != nil {
		return nil, "", err
	}
	if db.Tiles == nil {
		db.Tiles = []dashboardTile{}
	}
	if len(db.Tiles) > 100 {
		return nil, "", &query.Error{Code: query.CodeInvalidQuery, Field: "tiles", Message: "a dashboard has at most 100 tiles"}
	}
	for i, t := range db.Tiles {
		if !storage.ValidDocID(t.Insight) {
			return nil, "", &query.Error{Code: query.CodeInvalidQuery, Field: fmt.Sprintf("tiles[%d].insight", i), Message: fmt.Sprintf("want an insight id, found %q", t.Insight)}
		}
		if t.Width < 0 || t.Width > 2 {
			return nil, "", &query.Error{Code: query.CodeInvalidQuery, Field: fmt.Sprintf("tiles[%d].width", i), Message: "width is 1 or 2 grid columns"}
		}
	}
	out, err := json.Marshal(db)
	return out, "", err
}

// checkCohort validates a saved cohort as a query would compile it (the
// default runner is a *query.Engine; another runner gets no check).
func checkCohort(s *Server, app string, b []byte) ([]byte, string, error) {
	var cb cohortBody
	if err := decodeStrict(b, &cb); err != nil {
		return nil, "", err
	}
	if !storage.ValidCohortName(cb.Name) {
		return nil, "", &query.Error{Code: query.CodeInvalidQuery, Field: "name", Message: fmt.Sprintf("invalid cohort name %q: want [a-z0-9][a-z0-9_-]{0,63}", cb.Name)}
	}
	if len(cb.Definition) == 0 {
		return nil, "", &query.Error{Code: query.CodeInvalidQuery, Field: "definition", Message: "definition is required: a cohort condition tree (docs/analytics.md §7)"}
	}
	if c, ok := s.runner.(interface {
		CheckCohort(app string, def []byte) error
	}); ok {
		if err := c.CheckCohort(app, cb.Definition); err != nil {
			var qe *query.Error
			if errors.As(err, &qe) {
				qe.Field = "definition." + strings.TrimPrefix(qe.Field, "cohort")
			}
			return nil, "", err
		}
	}
	// The body of storage's saved cohort documents (storage/cohorts.go).
	out, err := json.Marshal(struct {
		Definition  json.RawMessage `json:"definition"`
		Description string          `json:"description,omitempty"`
		SavedAt     string          `json:"saved_at"`
	}{cb.Definition, cb.Description, time.Now().UTC().Format(time.RFC3339)})
	return out, cb.Name, err
}

// docJSON renders a document: its body's fields plus id, version, created
// and updated. For saved cohorts the name is the id.
func docJSON(c *collection, d storage.Doc) json.RawMessage {
	meta, _ := json.Marshal(map[string]any{"id": d.ID, "version": d.Version, "created": d.Created, "updated": d.Updated})
	body := bytes.TrimSpace(d.Body)
	if c.plural == "cohorts" {
		name, _ := json.Marshal(d.ID)
		meta = append(append(meta[:len(meta)-1], `,"name":`...), name...)
		meta = append(meta, '}')
	}
	if len(body) < 2 || body[0] != '{' || string(body) == "{}" {
		return meta
	}
	out := append(meta[:len(meta)-1:len(meta)-1], ',')
	return append(out, body[1:]...)
}

// collectionOf returns the app's storage collection for c, or answers.
func (s *Server) collectionOf(w http.ResponseWriter, r *http.Request, c *collection) (*storage.App, *storage.Collection, bool) {
	a, ok := s.appOf(w, r)
	if !ok {
		return nil, nil, false
	}
	col, err := a.Collection(c.plural)
	if err == nil && c.plural == "cohorts" {
		err = a.MigrateCohorts() // a legacy cohorts.json becomes documents
	}
	if err != nil {
		s.internal(w, r, err)
		return nil, nil, false
	}
	return a, col, true
}

func (s *Server) listDocs(c *collection) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, col, ok := s.collectionOf(w, r, c)
		if !ok {
			return
		}
		docs, err := col.List()
		if err != nil {
			s.docFailed(w, r, c, err)
			return
		}
		out := make([]json.RawMessage, len(docs))
		for i, d := range docs {
			out[i] = docJSON(c, d)
		}
		writeJSON(w, http.StatusOK, map[string]any{c.plural: out})
	}
}

// readBody reads a document request body.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDocBody))
	if err != nil {
		return nil, answerError{bodyError(w, err, maxDocBody)}
	}
	return b, nil
}

// answerError carries a ready answer through an error return.
type answerError struct{ e *apiError }

func (a answerError) Error() string { return a.e.Code + ": " + a.e.Message }

// docOp is one operation on a document of an app's collection; it
// returns the document to answer with (none for a delete).
type docOp func(w http.ResponseWriter, r *http.Request, a *storage.App, col *storage.Collection) (storage.Doc, error)

// docEndpoint answers a document operation: the app's collection is
// found, op runs, and its document is answered with status (201 with a
// Location, 204 without a body) or its error by docFailed.
func (s *Server) docEndpoint(c *collection, status int, op docOp) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, col, ok := s.collectionOf(w, r, c)
		if !ok {
			return
		}
		d, err := op(w, r, a, col)
		switch {
		case err != nil:
			s.docFailed(w, r, c, err)
		case status == http.StatusNoContent:
			w.WriteHeader(status)
		default:
			if status == http.StatusCreated {
				w.Header().Set("Location", r.URL.Path+"/"+d.ID)
			}
			writeJSON(w, status, docJSON(c, d))
		}
	}
}

func (s *Server) createDoc(c *collection) http.HandlerFunc {
	return s.docEndpoint(c, http.StatusCreated, func(w http.ResponseWriter, r *http.Request, a *storage.App, col *storage.Collection) (storage.Doc, error) {
		b, err := readBody(w, r)
		if err != nil {
			return storage.Doc{}, err
		}
		body, id, err := c.check(s, a.Name(), b)
		if err != nil {
			return storage.Doc{}, err
		}
		return col.Create(id, body)
	})
}

func (s *Server) getDoc(c *collection) http.HandlerFunc {
	return s.docEndpoint(c, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, _ *storage.App, col *storage.Collection) (storage.Doc, error) {
		return col.Get(r.PathValue("id"))
	})
}

func (s *Server) updateDoc(c *collection) http.HandlerFunc {
	return s.docEndpoint(c, http.StatusOK, func(w http.ResponseWriter, r *http.Request, a *storage.App, col *storage.Collection) (storage.Doc, error) {
		var none storage.Doc
		b, err := readBody(w, r)
		if err != nil {
			return none, err
		}
		// The version is a field of the request body, next to the
		// document's own fields.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil {
			return none, &query.Error{Code: query.CodeInvalidQuery, Message: "body: want a JSON object: " + err.Error()}
		}
		var version int64
		if err := json.Unmarshal(fields["version"], &version); err != nil || version < 1 {
			return none, &query.Error{Code: query.CodeInvalidQuery, Field: "version", Message: "version is required: the version the update replaces (≥ 1)"}
		}
		delete(fields, "version")
		id := r.PathValue("id")
		if raw, ok := fields["name"]; c.plural == "cohorts" && (!ok || string(raw) != strconv.Quote(id)) {
			return none, &query.Error{Code: query.CodeInvalidQuery, Field: "name", Message: "a cohort's name is its id: give the same name (save under a new name with POST)"}
		}
		rest, _ := json.Marshal(fields)
		body, _, err := c.check(s, a.Name(), rest)
		if err != nil {
			return none, err
		}
		return col.Update(id, version, body)
	})
}

func (s *Server) deleteDoc(c *collection) http.HandlerFunc {
	return s.docEndpoint(c, http.StatusNoContent, func(_ http.ResponseWriter, r *http.Request, _ *storage.App, col *storage.Collection) (storage.Doc, error) {
		var version int64
		if v := r.URL.Query().Get("version"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return storage.Doc{}, &query.Error{Code: query.CodeInvalidQuery, Field: "version", Message: fmt.Sprintf("version: want an integer ≥ 1, found %q", v)}
			}
			version = n
		}
		return storage.Doc{}, col.Delete(r.PathValue("id"), version)
	})
}

// docFailed answers a failed document request: invalid_query 400,
// not_found 404, conflict 409, corruption and others 500.
func (s *Server) docFailed(w http.ResponseWriter, r *http.Request, c *collection, err error) {
	var qe *query.Error
	var ae answerError
	switch {
	case errors.As(err, &ae):
		writeError(w, ae.e)
	case errors.As(err, &qe):
		writeError(w, queryAPIError(qe))
	case errors.Is(err, storage.ErrNotFound):
		writeError(w, &apiError{Status: http.StatusNotFound, Code: query.CodeNotFound, Field: "id", Message: err.Error()})
	case errors.Is(err, storage.ErrConflict):
		writeError(w, &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "version",
			Message: fmt.Sprintf("%v: the %s changed since it was read; read it again and retry", err, c.singular)})
	default:
		s.readFailed(w, r, err)
	}
}

// CodeConflict is the error code of a stale update (409): the document's
// version is not the one the update names. It extends the docs/analytics.md §9 codes.
const CodeConflict = "conflict"

// classifyRead returns the corruption error for an error of reading
// stored data that is corruption, else nil.
func classifyRead(err error) *query.Error {
	if errors.Is(err, segment.ErrCorruption) {
		return &query.Error{Code: query.CodeCorruption, Message: err.Error(), Err: err}
	}
	return nil
}

// resultCache holds insight results by cacheKey. It is bounded by entries
// and bytes, evicting the oldest first.
type resultCache struct {
	mu      sync.Mutex
	entries map[[32]byte]*cachedResult
	order   [][32]byte // insertion order, oldest first
	bytes   int64
}

// cachedResult is one cached insight answer.
type cachedResult struct {
	at     time.Time
	result []byte // the result JSON
}

// Cache bounds.
const (
	maxCachedResults     = 256
	maxCachedResultBytes = 64 << 20
)

func (c *resultCache) get(k [32]byte) *cachedResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[k]
}

func (c *resultCache) put(k [32]byte, e *cachedResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[[32]byte]*cachedResult{}
	}
	if old := c.entries[k]; old != nil {
		c.bytes -= int64(len(old.result))
	} else {
		c.order = append(c.order, k)
	}
	c.entries[k] = e
	c.bytes += int64(len(e.result))
	for len(c.order) > 1 && (len(c.entries) > maxCachedResults || c.bytes > maxCachedResultBytes) {
		old := c.order[0]
		c.order = c.order[1:]
		if o := c.entries[old]; o != nil {
			c.bytes -= int64(len(o.result))
			delete(c.entries, old)
		}
	}
}

// catalogVersion is the version of an app's data that cached answers are
// keyed by (storage.App.DataVersion): it advances with every import,
// flush and compaction and every live request acknowledged.
func catalogVersion(a *storage.App) int64 { return a.DataVersion() }

// cacheKey returns the key of q's answer on app a at catalog version gen,
// and the "now" the
// query must run with (empty: its own). A relative range ({"last": …},
// any range field but from and to) is resolved against "now": it is run
// with now truncated to the minute and keyed by it.
func cacheKey(a *storage.App, gen int64, q *query.Query, raw json.RawMessage) ([32]byte, string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00", a.Name(), gen)
	if from := a.RetainedFrom(); from != math.MinInt64 {
		fmt.Fprintf(h, "retained=%d\x00", from) // the retention's cutoff moves with the clock (docs/storage.md §7)
	}
	var compact bytes.Buffer
	json.Compact(&compact, raw)
	h.Write(compact.Bytes())
	now := ""
	if q.Now == "" && relativeRange(raw) {
		now = time.Now().UTC().Truncate(time.Minute).Format(time.RFC3339)
		fmt.Fprintf(h, "\x00now=%s", now)
	}
	if len(bytes.TrimSpace(q.Cohort)) > 0 {
		cs, err := a.Cohorts()
		if err != nil {
			return [32]byte{}, "", err
		}
		for _, c := range cs {
			fmt.Fprintf(h, "\x00cohort=%s@%d/%s", c.Name, c.Version, c.SavedAt)
		}
	}
	var k [32]byte
	h.Sum(k[:0])
	return k, now, nil
}

// relativeRange reports whether a query's range has a field other than
// from and to (a relative range such as {"last": "30d"}).
func relativeRange(raw json.RawMessage) bool {
	var q struct {
		Range map[string]json.RawMessage `json:"range"`
	}
	if json.Unmarshal(raw, &q) != nil {
		return false
	}
	for k := range q.Range {
		if k != "from" && k != "to" {
			return true
		}
	}
	return false
}

func (s *Server) handleInsightResult(w http.ResponseWriter, r *http.Request) {
	c := s.collections()[0]
	a, col, ok := s.collectionOf(w, r, c)
	if !ok {
		return
	}
	d, err := col.Get(r.PathValue("id"))
	if err != nil {
		s.docFailed(w, r, c, err)
		return
	}
	var ib insightBody
	if err := json.Unmarshal(d.Body, &ib); err != nil {
		s.internal(w, r, fmt.Errorf("insight %s: %w", d.ID, err))
		return
	}
	q, err := query.Parse(ib.Query)
	if err != nil {
		s.queryFailed(w, "", err, 0, ib.Query)
		return
	}
	q.App = a.Name()
	gen := catalogVersion(a)
	key, now, err := cacheKey(a, gen, q, ib.Query)
	if err != nil {
		s.docFailed(w, r, c, err)
		return
	}
	e := s.results.get(key)
	cached := e != nil && !truthy(r.URL.Query().Get("refresh"))
	if !cached {
		if now != "" {
			q.Now = now
		}
		res, dur, err := s.execute(r.Context(), q)
		if r.Context().Err() != nil {
			return
		}
		if err != nil {
			s.queryFailed(w, q.Kind, err, dur, ib.Query)
			return
		}
		s.met.observe(q.Kind, codeOK, dur, query.StatsOf(res))
		b, err := json.Marshal(res)
		if err != nil {
			s.internal(w, r, err)
			return
		}
		e = &cachedResult{at: time.Now(), result: b}
		if catalogVersion(a) == gen { // else the run may have seen newer data: not the key's answer
			s.results.put(key, e)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"insight": d.ID, "insight_version": d.Version, "catalog_version": gen,
		"computed_at": e.at.UTC().Format(time.RFC3339Nano), "age_seconds": time.Since(e.at).Seconds(),
		"cached": cached, "result": json.RawMessage(e.result)})
}
