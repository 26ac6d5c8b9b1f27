package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/storage"
)

// Person endpoints (identity.md; the person pages are users.go's):
//
//	GET  /api/apps/{app}/persons/{id}           as GET /users/{id} (scope query)
//	GET  /api/apps/{app}/persons/{id}/events    as GET /users/{id}/events (scope query)
//	POST /api/apps/{app}/persons/merge          body {"ids": [T, O]} (scope admin)
//	     applies merge(T, O) (docs/identity.md §2: always allowed, permanent),
//	     durable and visible when answered: 200 {"merged": [T, O],
//	     "person_id", "distinct_ids"} (the person T belongs to now)
//	     400 invalid_input: a body that is not {"ids": [T, O]} (field
//	         "body" or "ids"), an id that is not a valid distinct id
//	         (field "ids[0]" or "ids[1]": docs/analytics.md §1's user_id rules)
//	     404 not_found: unknown app
//	     503 unavailable: as the events endpoint's (the store's log over
//	         its memory, disk full, the store held by another process)
//	GET  /api/apps/{app}/warnings?kind=identity&offset=N&limit=N (scope query)
//	     the refused merges (docs/identity.md §2), newest first:
//	     {"kind": "identity", "total": all refusals so far, "offset", "limit",
//	      "warnings": [{"seq", "time", "op", "ids": [T, O], "reason"}]}
//	     seq numbers the operation among the app's recorded ones; time is
//	     the operation's (its event's) time, RFC 3339 UTC, null when it had
//	     none; op is "identify", "alias" or "merge". The store keeps the
//	     most recent refusals only (identity.MaxRefusals): total may be
//	     more than can be paged. kind defaults to identity, the only kind.

// maxMergeBody bounds a merge request's body, bytes.
const maxMergeBody = 4 << 10

// mergeAnswer is the 200 answer of POST /persons/merge.
type mergeAnswer struct {
	Merged      [2]string `json:"merged"`
	PersonID    string    `json:"person_id"`
	DistinctIDs []string  `json:"distinct_ids"`
}

func (s *Server) handleMergePersons(w http.ResponseWriter, r *http.Request) {
	a, ok := s.appOf(w, r)
	if !ok {
		return
	}
	bad := func(field, format string, args ...any) {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	b, err := readLimited(w, r, maxMergeBody)
	if err != nil {
		writeError(w, err.(answerError).e)
		return
	}
	var body struct {
		IDs *[]json.RawMessage `json:"ids"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.More() {
		if err == nil {
			err = errors.New("data after the object")
		}
		bad("body", `want {"ids": [T, O]}: %v`, err)
		return
	}
	if body.IDs == nil || len(*body.IDs) != 2 {
		n := 0
		if body.IDs != nil {
			n = len(*body.IDs)
		}
		bad("ids", `want "ids": [T, O], two distinct ids (T's person takes O's), found %d`, n)
		return
	}
	var ids [2]string
	for i, raw := range *body.IDs {
		field := fmt.Sprintf("ids[%d]", i)
		if err := json.Unmarshal(raw, &ids[i]); err != nil {
			bad(field, "%s: want a string, found %s", field, raw)
			return
		}
		if err := event.ValidateUserID(ids[i]); err != nil {
			bad(field, "%s: not a valid distinct id: %v", field, err)
			return
		}
	}
	if err := s.store.MergePersons(r.Context(), a.Name(), ids[0], ids[1]); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			writeError(w, notFoundApp(a.Name()))
		} else if e := s.ingestError(r, a.Name(), err); e != nil {
			writeError(w, e)
		}
		return
	}
	snap, ok := s.acquire(w, r, a)
	if !ok {
		return
	}
	defer snap.Release()
	pid, dids, _ := personOf(snap, ids[0])
	writeJSON(w, http.StatusOK, mergeAnswer{Merged: ids, PersonID: pid, DistinctIDs: dids})
}

// readLimited reads a request body of at most limit bytes; the error is
// an answerError.
func readLimited(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		return nil, answerError{bodyError(w, err, limit)}
	}
	return buf.Bytes(), nil
}

// warningJSON is one refused identity operation.
type warningJSON struct {
	Seq    uint64    `json:"seq"`
	Time   *string   `json:"time"`
	Op     string    `json:"op"`
	IDs    [2]string `json:"ids"`
	Reason string    `json:"reason"`
}

// opName names an operation kind on the wire.
func opName(k identity.Kind) string {
	switch k {
	case identity.Identify:
		return "identify"
	case identity.Alias:
		return "alias"
	case identity.Merge:
		return "merge"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

func (s *Server) handleWarnings(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	snap, offset, limit, ok := s.pageRead(w, r, qv)
	if !ok {
		return
	}
	defer snap.Release()
	switch k := qv.Get("kind"); k {
	case "", "identity":
	case "property":
		total, ws := s.captureWarns.page(r.PathValue("app"), offset, limit)
		writeJSON(w, http.StatusOK, map[string]any{"kind": "property", "total": total, "offset": offset, "limit": limit, "warnings": ws})
		return
	default:
		writeError(w, badParam("kind", "unknown warnings kind %q: want identity or property", k))
		return
	}
	out := map[string]any{"kind": "identity", "total": uint64(0), "offset": offset, "limit": limit}
	warns := []warningJSON{}
	if ps := snap.Persons(); ps != nil {
		out["total"] = ps.Refused()
		refs := ps.Refusals() // oldest first
		for i := len(refs) - 1 - offset; i >= 0 && len(warns) < limit; i-- {
			rf := refs[i]
			wj := warningJSON{Seq: rf.Seq, Op: opName(rf.Op.Kind), IDs: [2]string{rf.Op.T, rf.Op.O}, Reason: rf.Reason}
			if rf.Op.Time != 0 {
				t := time.UnixMicro(rf.Op.Time).UTC().Format(time.RFC3339Nano)
				wj.Time = &t
			}
			warns = append(warns, wj)
		}
	}
	out["warnings"] = warns
	writeJSON(w, http.StatusOK, out)
}
