package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// User endpoints (scope query), for drill-downs: the users behind a
// number are listed by a query's "list"; these show who they are. A user
// is a person (docs/identity.md §1): each endpoint accepts any of its
// distinct ids, and /persons/{id} and /persons/{id}/events (persons.go)
// answer the same as /users/{id} and /users/{id}/events.
//
//	GET /api/apps/{app}/users?id=A&id=B…        {"users": [{"user_id", "person_id", "distinct_ids", "properties"}]} (at most MaxUsersPerRequest ids;
//	                                             user_id as asked; person_id and distinct_ids only for ids the id graph holds)
//	GET /api/apps/{app}/users/{id}              {"user_id", "person_id", "distinct_ids", "properties"}
//	GET /api/apps/{app}/users/{id}/events       {"user_id", "person_id", "distinct_ids", "total", "offset", "limit", "tz",
//	                                             "events": [{"time", "event", "insert_id", "distinct_id", "properties"}]}
//	    ?offset=N (default 0) &limit=N (1..1000, default 100) &tz=IANA (default the app's)
//
// person_id is the person's id (docs/identity.md §1), distinct_ids all of its
// distinct ids, sorted; user_id is the person id too (kept from before
// persons), but in the list form the id asked. properties is an object
// of the person's current properties (the fold of docs/identity.md §3 over
// its ids; storage.Version.PersonProperties), or the event's, each as
// its JSON type: strings, numbers, booleans, and times as RFC 3339
// strings in UTC. events is the person's merged trail, ordered by (time,
// distinct id, position in that id's trail), each event with the
// distinct id it was sent with (storage.Version.PersonEvents). Event
// times are RFC 3339 with microseconds in tz. A distinct id the app's id
// graph does not hold is a person of its own (person_id the id,
// distinct_ids [id]). An unknown user has no properties and no events
// (not a 404: a user with only events or only properties is a user).

// MaxUsersPerRequest bounds the ids of one GET /users request.
const MaxUsersPerRequest = 1000

// userJSON is one user (person) with their current properties.
type userJSON struct {
	UserID      string         `json:"user_id"`
	PersonID    string         `json:"person_id,omitempty"`
	DistinctIDs []string       `json:"distinct_ids,omitempty"`
	Properties  map[string]any `json:"properties"`
}

// userEventJSON is one event of a user's trail.
type userEventJSON struct {
	Time       string         `json:"time"`
	Event      string         `json:"event"`
	InsertID   string         `json:"insert_id,omitempty"`
	DistinctID string         `json:"distinct_id"`
	Properties map[string]any `json:"properties"`
}

// personOf returns the person of distinct id id in v's id graph: its
// person id and distinct ids (sorted; shared, not to be modified), and
// whether the graph holds it (else it is the person of id alone).
func personOf(v *storage.Version, id string) (string, []string, bool) {
	if ps := v.Persons(); ps != nil && !v.Erased(id) {
		if p := ps.LookupString(id); p != nil {
			ids := p.DistinctIDs
			if !slices.IsSorted(ids) {
				ids = slices.Sorted(slices.Values(ids))
			}
			return p.ID, ids, true
		}
	}
	return id, []string{id}, false
}

// personJSON reads the person of distinct id id in v: user_id is asked
// in the list form, else the person id. The list form of an id the
// graph does not hold has neither person_id nor distinct_ids.
func personJSON(ctx context.Context, v *storage.Version, id string, list bool) (userJSON, error) {
	pid, ids, inGraph := personOf(v, id)
	var props []event.Prop
	var err error
	if inGraph {
		props, err = v.PersonProperties(ctx, ids)
	} else {
		props, err = v.UserProperties(ctx, id)
	}
	if err != nil {
		return userJSON{}, err
	}
	u := userJSON{UserID: pid, PersonID: pid, DistinctIDs: ids, Properties: propsJSON(props)}
	if list {
		u.UserID = id
		if !inGraph {
			u.PersonID, u.DistinctIDs = "", nil // as before persons
		}
	}
	return u, nil
}

func (s *Server) handleUsers(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	ids := r.URL.Query()["id"]
	if len(ids) == 0 || len(ids) > MaxUsersPerRequest {
		writeError(w, badParam("id", "want 1 to %d user ids (?id=A&id=B…), found %d", MaxUsersPerRequest, len(ids)))
		return
	}
	snap, ok := s.acquire(w, r, a)
	if !ok {
		return
	}
	defer snap.Release()
	out := make([]userJSON, len(ids))
	for i, id := range ids {
		var err error
		if out[i], err = personJSON(r.Context(), snap, id, true); err != nil {
			s.readFailed(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": out})
}

// handleUser answers GET /users/{id} and /persons/{id}.
func (s *Server) handleUser(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	snap, ok := s.acquire(w, r, a)
	if !ok {
		return
	}
	defer snap.Release()
	u, err := personJSON(r.Context(), snap, r.PathValue("id"), false)
	if err != nil {
		s.readFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

// handleUserEvents answers GET /users/{id}/events and
// /persons/{id}/events.
func (s *Server) handleUserEvents(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	snap, offset, limit, ok := s.pageRead(w, r, qv)
	if !ok {
		return
	}
	defer snap.Release()
	tz := qv.Get("tz")
	if tz == "" {
		tz = snap.TZ
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, lerr := time.LoadLocation(tz)
	if lerr != nil || tz == "Local" {
		writeError(w, badParam("tz", "unknown time zone %q: want an IANA name such as Europe/Berlin", tz))
		return
	}
	id := r.PathValue("id")
	pid, ids, inGraph := personOf(snap, id)
	var tr *storage.UserTrail
	var rerr error
	if inGraph {
		tr, rerr = snap.PersonEvents(r.Context(), ids, offset, limit)
	} else {
		tr, rerr = snap.UserEvents(r.Context(), id, offset, limit)
	}
	if rerr != nil {
		s.readFailed(w, r, rerr)
		return
	}
	evs := make([]userEventJSON, len(tr.Events))
	for i, e := range tr.Events {
		did := e.DistinctID
		if did == "" {
			did = id
		}
		evs[i] = userEventJSON{Time: time.UnixMicro(e.Time).In(loc).Format("2006-01-02T15:04:05.000000Z07:00"),
			Event: e.Event, InsertID: e.InsertID, DistinctID: did, Properties: propsJSON(e.Props)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"user_id": pid, "person_id": pid, "distinct_ids": ids, "total": tr.Total,
		"offset": offset, "limit": limit, "tz": loc.String(), "events": evs})
}

// pageRead starts a paged read of the path's app: it returns the app's
// current version (the caller releases it) and the page's ?offset
// (default 0) and ?limit (1 to 1,000, default 100) of qv, or answers the
// failure (404 unknown app, 400 naming the bad parameter).
func (s *Server) pageRead(w http.ResponseWriter, r *http.Request, qv url.Values) (v *storage.Version, offset, limit int, ok bool) {
	a, ok := s.appOf(w, r)
	if !ok {
		return nil, 0, 0, false
	}
	offset, err := intParam(qv.Get("offset"), "offset", 0, 0, 1<<30)
	if err == nil {
		limit, err = intParam(qv.Get("limit"), "limit", 100, 1, 1000)
	}
	if err != nil {
		writeError(w, err)
		return nil, 0, 0, false
	}
	if v, ok = s.acquire(w, r, a); !ok {
		return nil, 0, 0, false
	}
	return v, offset, limit, true
}

// acquire returns app a's current version (the caller releases it), or
// answers the failure.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request, a *storage.App) (*storage.Version, bool) {
	v, err := a.Acquire()
	if err != nil {
		s.readFailed(w, r, err)
		return nil, false
	}
	return v, true
}

// propsJSON renders properties as a JSON object's values.
func propsJSON(props []event.Prop) map[string]any {
	m := make(map[string]any, len(props))
	for _, p := range props {
		switch v := p.Value; v.Type {
		case event.TypeString:
			m[p.Name] = v.Str
		case event.TypeInt:
			m[p.Name] = v.Int
		case event.TypeFloat:
			m[p.Name] = v.Float
		case event.TypeBool:
			m[p.Name] = v.Int != 0
		case event.TypeTime:
			m[p.Name] = v.String()
		}
	}
	return m
}

// readFailed answers a failed read of stored data: gone client (no
// answer), corruption (500 corruption) or anything else (500 internal).
func (s *Server) readFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	if qe := classifyRead(err); qe != nil {
		s.log.Error("read failed", "path", r.URL.Path, "err", err)
		writeError(w, &apiError{Status: http.StatusInternalServerError, Code: qe.Code, Message: qe.Message})
		return
	}
	s.internal(w, r, err)
}

// badParam is a 400 invalid_query for a bad URL parameter.
func badParam(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Field: field, Message: fmt.Sprintf(format, args...)}
}

// intParam parses an integer URL parameter in [lo, hi]; "" gives def.
func intParam(v, name string, def, lo, hi int) (int, *apiError) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badParam(name, "%s: want an integer in [%d, %d], found %q", name, lo, hi, v)
	}
	return n, nil
}
