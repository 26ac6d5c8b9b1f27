package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// deletionView is one deletion request as the API shows it
// (docs/storage.md §7): never the ids it erases.
type deletionView struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	RequestedAt string `json:"requested_at"` // RFC 3339, UTC
	Status      string `json:"status"`       // "pending" or "done"
	DoneAt      string `json:"done_at,omitempty"`
	Suppress    bool   `json:"suppress,omitempty"`
	// Match is an events deletion's predicate.
	Match *matchView `json:"match,omitempty"`
}

// matchView is an events deletion's predicate as the API shows it.
type matchView struct {
	Event string          `json:"event"`
	Where json.RawMessage `json:"where,omitempty"`
	From  string          `json:"from"` // RFC 3339, UTC
	To    string          `json:"to"`
}

func viewDeletion(d storage.Deletion) deletionView {
	v := deletionView{ID: d.ID, Kind: d.Kind.String(), RequestedAt: rfc3339Micros(d.RequestedAt), Status: "pending", Suppress: d.Suppress}
	if !d.Pending() {
		v.Status, v.DoneAt = "done", rfc3339Micros(d.DoneAt)
	}
	if m := d.Match; m != nil {
		v.Match = &matchView{Event: m.Event, From: rfc3339Micros(m.From), To: rfc3339Micros(m.To)}
		if m.Where != "" {
			v.Match.Where = json.RawMessage(m.Where)
		}
	}
	return v
}

func rfc3339Micros(us int64) string { return time.UnixMicro(us).UTC().Format(time.RFC3339Nano) }

// handleErasePerson is DELETE /api/apps/{app}/persons/{id}[?suppress=true]
// (admin; docs/storage.md §7): storage.Store.ErasePersons of the distinct
// id. 200 with the request ({"id", "kind", "requested_at", "status",
// "done_at"}); every query started after the answer ignores the person.
// Idempotent: a pending request for the id is answered again. 400
// invalid_input for a bad id or suppress value, 404 for an unknown app.
func (s *Server) handleErasePerson(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := event.ValidateUserID(id); err != nil {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: "id", Message: "not a valid distinct id: " + err.Error()})
		return
	}
	suppress := false
	switch q := r.URL.Query().Get("suppress"); q {
	case "", "false":
	case "true":
		suppress = true
	default:
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: "suppress", Message: "want true or false, found " + event.Quote(q)})
		return
	}
	dels, err := s.store.ErasePersons(r.Context(), a.Name(), []string{id}, suppress)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			writeError(w, notFoundApp(a.Name()))
		} else if e := s.ingestError(r, a.Name(), err); e != nil {
			writeError(w, e)
		}
		return
	}
	s.log.Info("person erasure requested", "app", a.Name(), "request", dels[0].ID, "suppress", suppress)
	writeJSON(w, http.StatusOK, viewDeletion(dels[0]))
}

// handleDeletions is GET /api/apps/{app}/deletions (admin): the app's
// deletion requests in request order, {"deletions": [...]} as
// handleErasePerson answers each.
func (s *Server) handleDeletions(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	dels, err := s.store.Deletions(a.Name())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]deletionView, len(dels))
	for i, d := range dels {
		out[i] = viewDeletion(d)
	}
	writeJSON(w, http.StatusOK, map[string]any{"deletions": out})
}

// deleteEventsBody is the body of POST /api/apps/{app}/delete.
type deleteEventsBody struct {
	Event string          `json:"event"`
	Where json.RawMessage `json:"where,omitempty"`
	Range query.Range     `json:"range"`
	TZ    string          `json:"tz,omitempty"`
}

// handleDeleteEvents is POST /api/apps/{app}/delete (admin;
// docs/storage.md §7, "Events by predicate"): {"event": NAME ("$any": every
// event), "where": [event-property filters] (optional), "range": {"from",
// "to"} or {"last"}, "tz": zone (optional, the app's)}: the matching events
// stored before the request are deleted (storage.Store.DeleteEvents),
// hidden from every query started after the answer. 200 with the request
// as handleErasePerson answers it, with its "match"; 400 invalid_query
// naming the field for a bad body, range or filter; 404 for an unknown app.
func (s *Server) handleDeleteEvents(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	var body deleteEventsBody
	if !readStrict(w, r, &body) {
		return
	}
	if body.Event == "" {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Field: "event", Message: `event is required ("$any" for every event)`})
		return
	}
	tz := body.TZ
	if tz == "" {
		tz = a.Current().TZ
	}
	from, to, err := query.ResolveRange(body.Range, tz, time.Now().UnixMicro())
	if err != nil {
		writeError(w, queryAPIError(err.(*query.Error)))
		return
	}
	where := ""
	if len(bytes.TrimSpace(body.Where)) > 0 && string(bytes.TrimSpace(body.Where)) != "null" {
		var buf bytes.Buffer
		if err := json.Compact(&buf, body.Where); err != nil {
			writeError(w, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: "where", Message: err.Error()})
			return
		}
		where = buf.String()
	}
	d, err := s.store.DeleteEvents(r.Context(), a.Name(), storage.EventMatch{Event: body.Event, Where: where, From: from, To: to})
	var qe *query.Error
	switch {
	case errors.As(err, &qe):
		writeError(w, queryAPIError(qe))
		return
	case err != nil && errors.Is(err, storage.ErrNotFound):
		writeError(w, notFoundApp(a.Name()))
		return
	case err != nil:
		if e := s.ingestError(r, a.Name(), err); e != nil {
			writeError(w, e)
		}
		return
	}
	s.log.Info("events deletion requested", "app", a.Name(), "request", d.ID, "event", body.Event, "from", from, "to", to)
	writeJSON(w, http.StatusOK, viewDeletion(d))
}
