package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/spurdb/spur/event"
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
}

func viewDeletion(d storage.Deletion) deletionView {
	v := deletionView{ID: d.ID, Kind: d.Kind.String(), RequestedAt: rfc3339Micros(d.RequestedAt), Status: "pending", Suppress: d.Suppress}
	if !d.Pending() {
		v.Status, v.DoneAt = "done", rfc3339Micros(d.DoneAt)
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
