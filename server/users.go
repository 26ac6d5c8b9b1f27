package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query"
)

// User endpoints (scope query), for drill-downs: the users behind a
// number are listed by a query's "list"; these show who they are.
//
//	GET /api/apps/{app}/users?id=A&id=B…        {"users": [{"user_id", "properties"}]} (at most MaxUsersPerRequest ids)
//	GET /api/apps/{app}/users/{id}              {"user_id", "properties"}
//	GET /api/apps/{app}/users/{id}/events       {"user_id", "total", "offset", "limit", "tz", "events": [{"time", "event", "insert_id", "properties"}]}
//	    ?offset=N (default 0) &limit=N (1..1000, default 100) &tz=IANA (default the app's)
//
// properties is an object of the user's current properties (or the
// event's), each as its JSON type: strings, numbers, booleans, and times
// as RFC 3339 strings in UTC. Event times are RFC 3339 with microseconds
// in tz. An unknown user has no properties and no events (not a 404: a
// user with only events or only properties is a user).

// MaxUsersPerRequest bounds the ids of one GET /users request.
const MaxUsersPerRequest = 1000

// userJSON is one user with their current properties.
type userJSON struct {
	UserID     string         `json:"user_id"`
	Properties map[string]any `json:"properties"`
}

// userEventJSON is one event of a user's trail.
type userEventJSON struct {
	Time       string         `json:"time"`
	Event      string         `json:"event"`
	InsertID   string         `json:"insert_id,omitempty"`
	Properties map[string]any `json:"properties"`
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
	snap, err := a.Acquire()
	if err != nil {
		s.readFailed(w, r, err)
		return
	}
	defer snap.Release()
	out := make([]userJSON, len(ids))
	for i, id := range ids {
		props, err := snap.UserProperties(r.Context(), id)
		if err != nil {
			s.readFailed(w, r, err)
			return
		}
		out[i] = userJSON{UserID: id, Properties: propsJSON(props)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": out})
}

func (s *Server) handleUser(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	snap, err := a.Acquire()
	if err != nil {
		s.readFailed(w, r, err)
		return
	}
	defer snap.Release()
	props, err := snap.UserProperties(r.Context(), id)
	if err != nil {
		s.readFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, userJSON{UserID: id, Properties: propsJSON(props)})
}

func (s *Server) handleUserEvents(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	qv := r.URL.Query()
	offset, err := intParam(qv.Get("offset"), "offset", 0, 0, 1<<30)
	if err != nil {
		writeError(w, err)
		return
	}
	limit, err := intParam(qv.Get("limit"), "limit", 100, 1, 1000)
	if err != nil {
		writeError(w, err)
		return
	}
	snap, aerr := a.Acquire()
	if aerr != nil {
		s.readFailed(w, r, aerr)
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
	tr, rerr := snap.UserEvents(r.Context(), id, offset, limit)
	if rerr != nil {
		s.readFailed(w, r, rerr)
		return
	}
	evs := make([]userEventJSON, len(tr.Events))
	for i, e := range tr.Events {
		evs[i] = userEventJSON{Time: time.UnixMicro(e.Time).In(loc).Format("2006-01-02T15:04:05.000000Z07:00"),
			Event: e.Event, InsertID: e.InsertID, Properties: propsJSON(e.Props)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"user_id": id, "total": tr.Total, "offset": offset, "limit": limit,
		"tz": loc.String(), "events": evs})
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
