package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// importParams are the query parameters of POST /api/apps/{app}/import,
// the HTTP twins of `spur import`'s flags.
var importParams = map[string]string{
	"name":       "input name used in error positions and for format detection (default \"body\")",
	"format":     "csv, ndjson, parquet or otto (default: from name, else from Content-Type)",
	"user":       "column holding the user id (default user_id)",
	"time":       "column holding the event time (default timestamp)",
	"event":      "column holding the event name (default event)",
	"insert_id":  "column holding the deduplication key (default insert_id)",
	"schema":     "declared property types: name:type,...",
	"tz":         "time zone of timestamps without an offset (default UTC)",
	"users":      "true: the body holds user properties, not events",
	"max_errors": "bad rows tolerated (default 0: any bad row aborts the import)",
	"no_compact": "true: do not compact the app after the import (default false: every shard with more than one run of a kind is compacted)",

	"anonymous_id": "column holding each row's anonymous id: a non-empty one applies identify(user, anonymous id) (docs/identity.md §4; default none)",
}

// contentTypeFormats maps request media types to input formats.
var contentTypeFormats = map[string]ingest.Format{
	"text/csv":                       ingest.FormatCSV,
	"application/csv":                ingest.FormatCSV,
	"application/x-ndjson":           ingest.FormatNDJSON,
	"application/ndjson":             ingest.FormatNDJSON,
	"application/jsonl":              ingest.FormatNDJSON,
	"application/json":               ingest.FormatNDJSON,
	"application/vnd.apache.parquet": ingest.FormatParquet,
	"application/x-parquet":          ingest.FormatParquet,
}

// parseImportParams turns an import request's query parameters and
// Content-Type into reader and import options; name is the input name for
// error positions. iopt.CompactAfter is true unless no_compact=true: the
// handler then compacts the app after publishing (autoCompact). Unknown
// parameters are rejected (a typo should not silently change an import).
// The error is a 400 invalid_query naming the parameter.
func parseImportParams(v url.Values, contentType string) (ingest.Options, storage.ImportOptions, string, *apiError) {
	var opt ingest.Options
	iopt := storage.ImportOptions{Kind: storage.KindEvents, CompactAfter: true}
	bad := func(field, format string, args ...any) (ingest.Options, storage.ImportOptions, string, *apiError) {
		return opt, iopt, "", &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Field: field,
			Message: fmt.Sprintf(format, args...)}
	}
	for k, vs := range v {
		if k == "" {
			return bad("query", "a query parameter has an empty name")
		}
		if _, ok := importParams[k]; !ok {
			return bad(k, "unknown import parameter %q (known: name, format, user, time, event, insert_id, anonymous_id, schema, tz, users, max_errors, no_compact)", k)
		}
		if len(vs) > 1 {
			return bad(k, "parameter %q given %d times", k, len(vs))
		}
	}
	name := v.Get("name")
	if name == "" {
		name = "body"
	}
	opt.UserCol, opt.TimeCol, opt.EventCol, opt.InsertIDCol = v.Get("user"), v.Get("time"), v.Get("event"), v.Get("insert_id")
	switch f := v.Get("format"); {
	case f != "":
		ff, err := ingest.ParseFormat(f)
		if err != nil {
			return bad("format", "%v", err)
		}
		opt.Format = ff
	default:
		if ff, err := ingest.DetectFormat(name); err == nil {
			opt.Format = ff
			break
		}
		mt, _, _ := mime.ParseMediaType(contentType)
		ff, ok := contentTypeFormats[mt]
		if !ok {
			return bad("format", "cannot tell the input format from the name %q or the Content-Type %q: set ?format=csv|ndjson|parquet|otto", name, contentType)
		}
		opt.Format = ff
	}
	if s := v.Get("schema"); s != "" {
		opt.Schema = map[string]event.Type{}
		for _, part := range strings.Split(s, ",") {
			pn, typ, ok := strings.Cut(strings.TrimSpace(part), ":")
			if !ok || pn == "" {
				return bad("schema", "schema entry %q: want name:type", part)
			}
			t, err := event.ParseType(typ)
			if err != nil {
				return bad("schema", "property %q: %v", pn, err)
			}
			opt.Schema[pn] = t
		}
	}
	loc, err := event.LoadZone(v.Get("tz"))
	if err != nil {
		return bad("tz", "%v", err)
	}
	opt.Loc = loc
	if s := v.Get("users"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad("users", "users: want true or false, found %q", s)
		}
		opt.Users = b
		if b {
			iopt.Kind = storage.KindUsers
		}
	}
	if s := v.Get("max_errors"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return bad("max_errors", "max_errors: want a non-negative integer, found %q", s)
		}
		iopt.MaxErrors = n
	}
	if s := v.Get("anonymous_id"); s != "" {
		if iopt.Kind == storage.KindUsers {
			return bad("anonymous_id", "anonymous_id: a users import (users=true) carries no identity operations")
		}
		iopt.AnonymousID = s
		// Read as a string, whatever it looks like (as `spur import`).
		if opt.Schema == nil {
			opt.Schema = map[string]event.Type{}
		}
		if _, ok := opt.Schema[s]; !ok {
			opt.Schema[s] = event.TypeString
		}
	}
	if s := v.Get("no_compact"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad("no_compact", "no_compact: want true or false, found %q", s)
		}
		iopt.CompactAfter = !b
	}
	opt.ImportTime = time.Now().UnixMicro()
	return opt, iopt, name, nil
}

// rowError is one bad input row in an import answer.
type rowError struct {
	Position string `json:"position"` // "file:line"
	File     string `json:"file"`
	Line     int64  `json:"line"`
	Field    string `json:"field,omitempty"`
	Message  string `json:"message"`
}

func rowErrors(res []*event.RowError) []rowError {
	out := make([]rowError, len(res))
	for i, re := range res {
		out[i] = rowError{Position: re.Pos.String(), File: re.Pos.File, Line: re.Pos.Line, Field: re.Field, Message: re.Msg}
	}
	return out
}

// importResponse is the answer of a finished import (and the "report" of an
// aborted one).
type importResponse struct {
	App        string              `json:"app"`
	Kind       storage.SegmentKind `json:"kind"`
	Read       int64               `json:"rows_read"`
	Applied    int64               `json:"rows_applied"`
	Rejected   int64               `json:"rows_rejected"`
	Duplicates int64               `json:"rows_duplicate"`
	Expired    int64               `json:"rows_expired"` // events older than the app's retention, skipped (docs/storage.md §7)
	Segments   int                 `json:"segments"`
	Bytes      int64               `json:"bytes"`
	ElapsedMS  float64             `json:"elapsed_ms"`
	// IdentityOps are the identity operations the import applied
	// (anonymous_id, $identify/$create_alias/$merge_dangerously rows).
	IdentityOps int64      `json:"identity_ops,omitempty"`
	Errors      []rowError `json:"errors,omitempty"` // bad rows skipped within max_errors
}

func newImportResponse(rep *storage.ImportReport) *importResponse {
	return &importResponse{App: rep.App, Kind: rep.Kind, Read: rep.Read, Applied: rep.Applied,
		Rejected: rep.Rejected, Duplicates: rep.Duplicates, Expired: rep.Expired, Segments: rep.Segments, Bytes: rep.Bytes,
		ElapsedMS: math.Round(float64(rep.Elapsed.Microseconds())) / 1000, IdentityOps: rep.IdentityOps, Errors: rowErrors(rep.Errors)}
}

// inputError marks a fatal error of the input (unreadable gzip, corrupt
// Parquet, a body over the limit) as opposed to a store failure.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// inputSource passes rows through and marks fatal reader errors.
type inputSource struct{ r ingest.Reader }

func (s inputSource) Next(ev *event.Event) error {
	err := s.r.Next(ev)
	if err == nil || err == io.EOF {
		return err
	}
	var re *event.RowError
	if errors.As(err, &re) {
		return err
	}
	return &inputError{err}
}

func (s *Server) handleImport(w http.ResponseWriter, r *http.Request) {
	appName := r.PathValue("app")
	if !storage.ValidAppName(appName) {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Field: "app",
			Message: fmt.Sprintf("invalid app name %s: want [a-z0-9][a-z0-9_-]{0,63}", event.Quote(appName))})
		return
	}
	opt, iopt, name, aerr := parseImportParams(r.URL.Query(), r.Header.Get("Content-Type"))
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	opt.MaxDecompressedBytes = s.cfg.MaxImportDecompressedBytes
	opt.MaxPropertyBytes = s.cfg.MaxPropertyBytes
	limit := s.cfg.MaxImportBytes
	body := http.MaxBytesReader(w, r.Body, limit)
	fail := func(e *apiError, err error) {
		s.met.imports.WithLabelValues("error").Inc()
		s.log.Info("import failed", "app", appName, "code", e.Code, "err", err)
		writeError(w, e)
	}
	rd, err := ingest.NewReader(body, name, opt)
	if err != nil {
		e := bodyLimitError(w, err, limit)
		if e == nil {
			e = &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidInput, Message: err.Error()}
		}
		fail(e, err)
		return
	}
	defer rd.Close()
	rep, err := s.store.Import(r.Context(), appName, []storage.Source{inputSource{rd}}, iopt)
	if rep != nil {
		s.met.importRows.WithLabelValues("rejected").Add(float64(rep.Rejected))
	}
	var ie *storage.ImportError
	var inErr *inputError
	var limitErr *apiError // a body over a limit, or too slow: answered even though the read failure cancelled r.Context()
	if err != nil {
		limitErr = bodyLimitError(w, err, limit)
		if limitErr == nil {
			if terr := bodyExpired(r); terr != nil {
				limitErr = bodyLimitError(w, terr, limit)
			}
		}
	}
	switch {
	case err == nil:
		s.met.imports.WithLabelValues("ok").Inc()
		s.met.importRows.WithLabelValues("applied").Add(float64(rep.Applied))
		s.met.importRows.WithLabelValues("duplicate").Add(float64(rep.Duplicates))
		if iopt.CompactAfter {
			s.autoCompact(r.Context(), appName)
		}
		writeJSON(w, http.StatusOK, newImportResponse(rep))
	case limitErr != nil:
		fail(limitErr, err)
	case r.Context().Err() != nil:
		s.met.imports.WithLabelValues("error").Inc()
		s.log.Info("import cancelled: client went away; nothing applied", "app", appName)
	case errors.As(err, &ie):
		s.met.imports.WithLabelValues("aborted").Inc()
		resp := newImportResponse(ie.Report)
		rows := resp.Errors
		resp.Errors = nil
		e := &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidInput, Errors: rows, Report: resp,
			Message: fmt.Sprintf("import aborted, nothing applied: %d bad row(s), at most %d allowed", ie.Report.Rejected, ie.Max)}
		if len(rows) > 0 {
			e.Field = rows[0].Field
			e.Message += "; first: " + rows[0].Position + ": "
			if rows[0].Field != "" {
				e.Message += "field " + event.Quote(rows[0].Field) + ": "
			}
			e.Message += rows[0].Message
		}
		s.log.Info("import aborted", "app", appName, "rejected", ie.Report.Rejected)
		writeError(w, e)
	case errors.As(err, &inErr):
		fail(&apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidInput,
			Message: "import aborted, nothing applied: " + err.Error()}, err)
	default:
		s.met.imports.WithLabelValues("error").Inc()
		s.internal(w, r, fmt.Errorf("import into app %q: %w", appName, err))
	}
}

// autoCompact applies `spur import`'s policy after a published import
// (unless the request set no_compact=true): compact the app's shards that
// have more than one run of events or of user properties
// (storage.ImportCompactMinRuns, storage.AutoCompactUserMinRuns), so that
// queries right after the import read one run per shard. The runs it
// merges include the live layer's flushed runs of those shards, if any;
// the store's per-app write lock serializes it with the live layer's
// flushes and tiered compactions (the server is the store's only writer),
// and the live layer's own policy is unchanged. It runs before the answer
// is sent, so the client waits for it. The import is published whatever
// happens: a failure is logged, never reported as an import error, and a
// client that goes away cancels the compaction, which then changes
// nothing.
func (s *Server) autoCompact(ctx context.Context, app string) {
	rep, err := s.store.Compact(ctx, app, storage.CompactOptions{MinRuns: storage.ImportCompactMinRuns, UserMinRuns: storage.AutoCompactUserMinRuns})
	if err != nil {
		s.log.Warn("automatic compaction after an import failed; the import is published", "app", app, "err", err)
		return
	}
	if rep.Written > 0 {
		s.log.Info("compacted after an import", "app", app, "replaced", rep.Replaced, "written", rep.Written,
			"rows", rep.Rows, "bytes_before", rep.BytesBefore, "bytes_after", rep.BytesAfter, "elapsed", rep.Elapsed)
	}
}
