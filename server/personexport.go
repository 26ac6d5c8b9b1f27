package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/query"
)

// personExportPage is how many events a person export reads at a time
// (a variable for the tests, which page through small trails).
var personExportPage = 10_000

// handlePersonExport is GET /api/apps/{app}/persons/{id}/export (scope
// query; docs/storage.md §7, "A person's data": GDPR Art. 15/20): the
// person of any of its distinct ids, from one snapshot, streamed as
// NDJSON (Content-Type application/x-ndjson, a download named
// spur-APP-person-ID.ndjson). The first line is the person,
// {"person_id", "distinct_ids", "properties"} (as GET /persons/{id}); each
// further line is one of its events in trail order, in the events
// endpoint's shape with the distinct id it was stored under as user_id
// ({"user_id", "event", "timestamp", "insert_id", "properties"}: what
// `spur import` and POST /events read back). 404 not_found for an id
// with neither events nor properties. An error after the first line
// ends the stream early (its last line is then not a complete event;
// the status was sent already).
func (s *Server) handlePersonExport(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	snap, ok := s.acquire(w, r, a)
	if !ok {
		return
	}
	defer snap.Release()
	id := r.PathValue("id")
	person, err := personJSON(r.Context(), snap, id, false)
	if err != nil {
		s.readFailed(w, r, err)
		return
	}
	_, ids, _ := personOf(snap, id)
	first, err := snap.PersonEvents(r.Context(), ids, 0, personExportPage)
	if err != nil {
		s.readFailed(w, r, err)
		return
	}
	if first.Total == 0 && len(person.Properties) == 0 {
		writeError(w, &apiError{Status: http.StatusNotFound, Code: query.CodeNotFound, Field: "id",
			Message: "no person with distinct id " + event.Quote(id) + " in app " + event.Quote(a.Name())})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="`+url.PathEscape("spur-"+a.Name()+"-person-"+person.PersonID)+`.ndjson"`)
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	line, _ := json.Marshal(person)
	bw.Write(append(line, '\n'))
	var buf []byte
	for page, off := first, 0; ; {
		for _, e := range page.Events {
			ev := event.Event{UserID: e.DistinctID, Name: e.Event, Time: e.Time, InsertID: e.InsertID, Props: e.Props}
			buf = append(ingest.AppendEventJSON(buf[:0], &ev, nil, nil), '\n')
			if _, err := bw.Write(buf); err != nil {
				return // the client went away
			}
		}
		off += len(page.Events)
		if int64(off) >= page.Total || len(page.Events) == 0 {
			break
		}
		if page, err = snap.PersonEvents(r.Context(), ids, off, personExportPage); err != nil {
			s.log.Error("person export ended early", "app", a.Name(), "err", err)
			break
		}
	}
	if err := bw.Flush(); err != nil {
		s.log.Info("person export: the client went away", "app", a.Name())
	}
}
