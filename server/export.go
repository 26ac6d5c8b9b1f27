package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	"github.com/spurdb/spur/query"
)

// csvOutput reads the query endpoint's ?output= parameter: json (the
// default) or csv (query.WriteCSV). Anything else is an invalid_query
// naming the field "output".
func csvOutput(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("output"); v {
	case "", "json":
		return false, nil
	case "csv":
		return true, nil
	default:
		return false, &query.Error{Code: query.CodeInvalidQuery, Field: "output",
			Message: fmt.Sprintf("unknown output %q: want json or csv", v)}
	}
}

// writeCSV answers with res as tidy CSV (text/csv, a download named
// spur-KIND.csv, KIND the result's query.Result.ResultKind).
func (s *Server) writeCSV(w http.ResponseWriter, r *http.Request, res query.Result) {
	var b bytes.Buffer
	if err := query.WriteCSV(&b, res); err != nil {
		s.internal(w, r, err)
		return
	}
	kind := res.ResultKind()
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="spur-%s.csv"`, kind))
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
}
