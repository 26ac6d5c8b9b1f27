package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/export"
	"github.com/spurdb/spur/query"
)

// handleExport streams an app's events, or with users=true its users'
// current properties, or with persons=true its persons
// ({distinct_id, person_id, identified} rows, export.Options.Persons), in
// the shape `spur import` reads (package export, docs/storage.md §8):
//
//	GET /api/apps/{app}/export?format=ndjson|parquet[&users=true|&persons=true][&from=T&to=T]
//
// format defaults to ndjson; from and to (timestamps as the events
// endpoint reads them, docs/analytics.md §1) bound the events exported to
// from ≤ time < to. The answer reads one snapshot of the app (every event
// acknowledged before the request) and is streamed as it is made (no
// Content-Length); a failure after the first bytes aborts the connection,
// so a client sees a truncated body, never a complete-looking one.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	opt := export.Options{Format: export.NDJSON}
	if v := q.Get("format"); v != "" {
		f, err := export.ParseFormat(v)
		if err != nil {
			writeError(w, badParam("format", "%v", err))
			return
		}
		opt.Format = f
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"users", &opt.Users}, {"persons", &opt.Persons}} {
		switch v := q.Get(b.name); v {
		case "", "false":
		case "true":
			*b.dst = true
		default:
			writeError(w, badParam(b.name, "want true or false, found %s", event.Quote(v)))
			return
		}
	}
	if opt.Users && opt.Persons {
		writeError(w, badParam("persons", "users=true and persons=true: choose one"))
		return
	}
	for _, b := range []struct {
		name string
		dst  *int64
	}{{"from", &opt.From}, {"to", &opt.To}} {
		v := q.Get(b.name)
		if v == "" {
			continue
		}
		us, err := event.ParseTime(v, nil)
		if err != nil {
			writeError(w, badParam(b.name, "%v", err))
			return
		}
		*b.dst = us
	}
	if (q.Get("from") != "") != (q.Get("to") != "") || opt.From > opt.To {
		writeError(w, badParam("from", "give both from and to, from ≤ to"))
		return
	}
	snap, err := a.Acquire()
	if err != nil {
		s.readFailed(w, r, err)
		return
	}
	defer snap.Release()
	ext := "ndjson"
	if opt.Format == export.Parquet {
		ext = "parquet"
	}
	kind := "events"
	if opt.Users {
		kind = "users"
	} else if opt.Persons {
		kind = "persons"
	}
	h := w.Header()
	h.Set("Content-Type", opt.Format.ContentType())
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s.%s"`, a.Name(), kind, ext))
	ow := &startedWriter{w: w}
	if _, err := export.Write(r.Context(), snap, ow, opt); err != nil {
		if !ow.started {
			h.Del("Content-Disposition")
			switch {
			case errors.Is(context.Cause(r.Context()), errShuttingDown):
				h.Set("Retry-After", "5")
				writeError(w, &apiError{Status: http.StatusServiceUnavailable, Code: query.CodeUnavailable,
					Message: "export cancelled: the server is shutting down; export again"})
			case r.Context().Err() != nil:
				// The client went away before the first byte: no answer,
				// and none that looks like a complete (empty) export.
				panic(http.ErrAbortHandler)
			default:
				s.readFailed(w, r, err)
			}
			return
		}
		if r.Context().Err() == nil {
			s.log.Error("export failed", "path", r.URL.Path, "err", err)
		}
		panic(http.ErrAbortHandler) // a truncated body must not look complete
	}
}

// startedWriter notes whether anything was written through it.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	s.started = true
	return s.w.Write(p)
}
