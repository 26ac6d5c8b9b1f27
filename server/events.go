package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// The events endpoint (docs/ingest.md §1, scope ingest, any origin):
//
//	POST /api/apps/{app}/events
//	     body: a JSON array of events (or one event object), or NDJSON
//	     with Content-Type: application/x-ndjson; Content-Encoding: gzip
//	     accepted. The event shape and field rules: ingest.EventsParser.
//	     An event's anonymous_id applies identify(user_id, anonymous_id)
//	     (docs/identity.md §2; IdentityIngester) with the request; events
//	     named $identify, $create_alias and $merge_dangerously apply
//	     their operations in the store (storage.OpOfEvent).
//	200  {"accepted": N, "rejected": [{"index", "field", "message"}]}: the
//	     good events are durable and visible to queries when this is sent;
//	     every bad one is listed by its 0-based position in the request
//	400  invalid_input: the body cannot be parsed as a whole (not a JSON
//	     array of events, invalid JSON in an array, a corrupt gzip stream;
//	     field "body"), an invalid app name (field "app") or an unsupported
//	     Content-Encoding; nothing stored
//	413  limit_exceeded: over MaxEventsBytes as sent, over
//	     MaxEventsDecompressedBytes decompressed, or events needing more
//	     memory than EventsMemory; nothing stored
//	503  unavailable, Retry-After: 1: the store's unflushed events are
//	     over their memory limit, the disk is full, or the requests being
//	     parsed hold all of EventsMemory; nothing stored
//	500  corruption: the app's log is damaged and it refuses writes
//	     (`spur recover --app APP`); internal otherwise
//
// Each request runs in a runtime/trace task "spur.ingest" with regions
// "parse" and "store".

// Ingester stores the events of one request (docs/ingest.md §2): the events
// endpoint's view of the store. (*storage.Store).Ingest implements it
// (storage/ingestapi.go describes the call); ImportIngester stands in
// where it does not. evs have passed ingest.EventsParser's checks; users
// are their user property writes. Ingest coerces the events to the app's
// schema, rejects per event what does not fit (IngestRejection.Index
// into evs), creates the app when missing, and returns once every
// accepted event is durable and visible. It must not keep evs, users or
// their Props slices after it returns (the server reuses them); the
// strings in them are immutable and may be kept. Errors:
// storage.ErrBackpressure, storage.ErrDiskFull (answered 503),
// *storage.LockedError (503), storage.ErrCorruption (500 corruption), the
// context's.
type Ingester interface {
	Ingest(ctx context.Context, app string, evs []event.Event, users []storage.UserWrite) (*storage.IngestReport, error)
}

// IdentityIngester is an Ingester that also takes the identity operations
// of a request (docs/identity.md §2: an event's anonymous_id is
// identify(user_id, anonymous_id)): IngestIdentity is Ingest with ids,
// each naming its event by index into evs, applied with the request and
// visible on its answer; it must not keep ids. (*storage.Store)
// implements it (storage.Store.IngestIdentity). A request with
// anonymous ids sent to an Ingester without it is refused whole (400,
// field "anonymous_id").
type IdentityIngester interface {
	Ingester
	IngestIdentity(ctx context.Context, app string, evs []event.Event, users []storage.UserWrite, ids []storage.IdentityWrite) (*storage.IngestReport, error)
}

// The store takes identity operations.
var _ IdentityIngester = (*storage.Store)(nil)

// Defaults of the events endpoint's limits (Config fields of the same
// names, `spur serve` flags).
const (
	DefaultMaxEventsBytes             = 20 << 20                 // as sent
	DefaultMaxEventsDecompressedBytes = 200 << 20                // decompressed
	DefaultMaxFuture                  = storage.DefaultMaxFuture // the live layer's own check (storage.LiveOptions.MaxFuture)
	DefaultEventsMemory               = 256 << 20
	DefaultMaxClockSkew               = 60 * time.Second // capture.DefaultMaxClockSkew
)

// eventsRetryAfter is the Retry-After of the endpoint's 503 answers,
// seconds (docs/ingest.md §2).
const eventsRetryAfter = "1"

// maxPooledParser is the largest parser (buffers kept, bytes) returned to
// the pool: one that grew on a huge request is dropped.
const maxPooledParser = 8 << 20

// eventsWork is a request's reusable state: the parser and the user
// writes handed to the Ingester.
type eventsWork struct {
	p     *ingest.EventsParser
	users []storage.UserWrite
	ids   []storage.IdentityWrite
}

// Errors of the events memory gate.
var (
	errEventsBusy    = errors.New("the events requests being received hold all of the server's events memory")
	errEventsTooMuch = errors.New("the request's events need more memory than the server has for requests being received")
)

// memGate bounds the memory of the events requests being parsed and
// stored (docs/storage.md §5): a request reserves in steps as it parses
// (ingest.EventsOptions.Reserve) and releases when answered.
type memGate struct {
	limit int64
	used  atomic.Int64
}

// reserve adds n bytes for a request that holds held already, or fails:
// errEventsTooMuch when the request alone would pass the limit,
// errEventsBusy when others hold the rest.
func (g *memGate) reserve(held, n int64) error {
	if held+n > g.limit {
		return errEventsTooMuch
	}
	if g.used.Add(n) > g.limit {
		g.used.Add(-n)
		return errEventsBusy
	}
	return nil
}

// ndjsonTypes are the Content-Types of NDJSON bodies.
var ndjsonTypes = map[string]bool{"application/x-ndjson": true, "application/ndjson": true,
	"application/jsonl": true, "application/x-jsonlines": true, "application/jsonlines": true}

// eventsAnswer is the 200 answer of the events endpoint.
type eventsAnswer struct {
	Accepted int                `json:"accepted"`
	Rejected []ingest.Rejection `json:"rejected"`
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx, task := trace.NewTask(r.Context(), "spur.ingest")
	defer task.End()
	app := r.PathValue("app")
	fail := func(e *apiError) {
		s.met.ingestRequests.WithLabelValues(e.Code).Inc()
		if e.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", eventsRetryAfter)
		}
		writeError(w, e)
	}
	if !storage.ValidAppName(app) {
		fail(&apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: "app",
			Message: fmt.Sprintf("invalid app name %s: want [a-z0-9][a-z0-9_-]{0,63}", event.Quote(app))})
		return
	}
	switch ce := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); ce {
	case "", "identity", "gzip", "x-gzip":
	default:
		fail(&apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: "content-encoding",
			Message: fmt.Sprintf("unsupported Content-Encoding %s: send gzip or none", event.Quote(ce))})
		return
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))

	var held int64
	defer func() { s.eventsMem.used.Add(-held) }()
	opt := ingest.EventsOptions{
		NDJSON: ndjsonTypes[mt], Now: start.UnixMicro(), MaxFuture: int64(s.cfg.MaxFuture / time.Microsecond),
		MaxPropertyBytes: s.cfg.MaxPropertyBytes, MaxDecompressedBytes: s.cfg.MaxEventsDecompressedBytes,
		Reserve: func(n int64) error {
			if err := s.eventsMem.reserve(held, n); err != nil {
				return err
			}
			held += n
			return nil
		},
	}
	if s.cfg.MaxFuture < 0 {
		opt.MaxFuture = -1
	}
	work := s.eventsPool.Get().(*eventsWork)
	defer func() {
		if work.p.Cap() <= maxPooledParser {
			clear(work.users) // drop the Props references
			clear(work.ids)
			s.eventsPool.Put(work)
		}
	}()
	region := trace.StartRegion(ctx, "parse")
	b, err := work.p.Parse(ctx, http.MaxBytesReader(w, r.Body, s.cfg.MaxEventsBytes), opt)
	region.End()
	if err != nil {
		if e := s.eventsBodyError(w, err); e != nil {
			fail(e)
		} else {
			s.met.ingestRequests.WithLabelValues(codeCancelled).Inc()
		}
		return
	}
	s.met.ingestBytes.Add(float64(b.Bytes))

	ans := eventsAnswer{Rejected: b.Rejected}
	if len(b.Events) > 0 {
		users := work.users[:0]
		for _, u := range b.Users {
			users = append(users, storage.UserWrite{Index: u.Event, Props: u.Props, Once: u.Once, Op: u.Op})
		}
		work.users = users
		var rep *storage.IngestReport
		if len(b.Anon) == 0 {
			region = trace.StartRegion(ctx, "store")
			rep, err = s.ingester.Ingest(ctx, app, b.Events, users)
			region.End()
		} else {
			ii, ok := s.ingester.(IdentityIngester)
			if !ok {
				fail(&apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: "anonymous_id",
					Message: "this server's store takes no identity operations (anonymous_id); nothing was stored"})
				return
			}
			ids := work.ids[:0]
			for _, a := range b.Anon {
				ev := &b.Events[a.Event]
				ids = append(ids, storage.IdentityWrite{Index: a.Event,
					Op: identity.Op{Kind: identity.Identify, T: ev.UserID, O: a.ID, Time: ev.Time}})
			}
			work.ids = ids
			region = trace.StartRegion(ctx, "store")
			rep, err = ii.IngestIdentity(ctx, app, b.Events, users, ids)
			region.End()
		}
		if err != nil {
			if e := s.ingestError(r, app, err); e != nil {
				fail(e)
			} else {
				s.met.ingestRequests.WithLabelValues(codeCancelled).Inc()
			}
			return
		}
		ans.Accepted = rep.Accepted
		if ans.Rejected, err = mergeRejections(b.Rejected, b.Index, rep.Rejected); err != nil {
			s.internal(w, r, err)
			return
		}
	}
	if ans.Rejected == nil {
		ans.Rejected = []ingest.Rejection{}
	}
	out, err := json.Marshal(ans)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeBytes(w, http.StatusOK, out)
	s.met.ingestRequests.WithLabelValues(codeOK).Inc()
	s.met.ingestEvents.WithLabelValues("accepted").Add(float64(ans.Accepted))
	s.met.ingestEvents.WithLabelValues("rejected").Add(float64(len(ans.Rejected)))
	s.met.ingestAck.Observe(time.Since(start).Seconds())
}

// mergeRejections returns the parser's rejections (request positions)
// and the store's (positions in the events handed to it, in order, mapped
// to the request's through index), in request order. A store rejection
// out of range or order is an error.
func mergeRejections(parsed []ingest.Rejection, index []int, stored []storage.IngestRejection) ([]ingest.Rejection, error) {
	if len(stored) == 0 {
		return parsed, nil
	}
	out := make([]ingest.Rejection, 0, len(parsed)+len(stored))
	i := 0
	for k, st := range stored {
		if st.Index < 0 || st.Index >= len(index) || k > 0 && st.Index <= stored[k-1].Index {
			return nil, fmt.Errorf("the store rejected event %d of %d, out of range or order", st.Index, len(index))
		}
		at := index[st.Index]
		for ; i < len(parsed) && parsed[i].Index < at; i++ {
			out = append(out, parsed[i])
		}
		out = append(out, ingest.Rejection{Index: at, Field: st.Field, Message: st.Message})
	}
	return append(out, parsed[i:]...), nil
}

// eventsBodyError answers a failed parse of an events body, or returns
// nil when the client went away.
func (s *Server) eventsBodyError(w http.ResponseWriter, err error) *apiError {
	if e := bodyLimitError(w, err, s.cfg.MaxEventsBytes); e != nil {
		return e
	}
	var se *ingest.EventsSyntaxError
	var de *ingest.DecompressError
	switch {
	case errors.Is(err, errEventsBusy):
		return &apiError{Status: http.StatusServiceUnavailable, Code: query.CodeUnavailable,
			Message: err.Error() + "; nothing was stored, retry after a second"}
	case errors.Is(err, errEventsTooMuch):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: query.CodeLimitExceeded, Field: "body",
			Message: fmt.Sprintf("%v (%d bytes, --events-memory); nothing was stored: send smaller batches", err, s.cfg.EventsMemory)}
	case errors.As(err, &se), errors.As(err, &de):
		return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: "body",
			Message: err.Error() + "; nothing was stored"}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return nil
	}
	return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: "body",
		Message: "read the body: " + err.Error() + "; nothing was stored"}
}

// ingestError answers a failed Ingest, or returns nil when the client went
// away.
func (s *Server) ingestError(r *http.Request, app string, err error) *apiError {
	var le *storage.LockedError
	switch {
	case errors.Is(err, storage.ErrLiveOff):
		return &apiError{Status: http.StatusServiceUnavailable, Code: query.CodeUnavailable,
			Message: "this server's store takes no live events (storage.Config.Live); nothing was stored"}
	case errors.Is(err, storage.ErrBackpressure), errors.Is(err, storage.ErrDiskFull):
		s.log.Warn("events refused", "app", app, "err", err)
		return &apiError{Status: http.StatusServiceUnavailable, Code: query.CodeUnavailable,
			Message: err.Error() + "; nothing was stored, retry after a second"}
	case errors.As(err, &le):
		return &apiError{Status: http.StatusServiceUnavailable, Code: query.CodeUnavailable, Message: err.Error()}
	case errors.Is(err, storage.ErrCorruption):
		s.log.Error("events refused: the app's log is damaged", "app", app, "err", err)
		return &apiError{Status: http.StatusInternalServerError, Code: query.CodeCorruption,
			Message: fmt.Sprintf("%v; app %s refuses writes until `spur recover --app %s`", err, event.Quote(app), app)}
	case r.Context().Err() != nil && !errors.Is(context.Cause(r.Context()), errShuttingDown):
		s.log.Info("events request cancelled: the client went away; its events may or may not be stored", "app", app)
		return nil
	case errors.Is(err, context.Canceled):
		return &apiError{Status: http.StatusServiceUnavailable, Code: query.CodeUnavailable, Message: "the server is shutting down"}
	}
	s.log.Error("events request failed", "app", app, "err", err)
	return &apiError{Status: http.StatusInternalServerError, Code: query.CodeInternal, Message: err.Error()}
}

// newEventsPool returns the pool of events request states.
func newEventsPool() *sync.Pool {
	return &sync.Pool{New: func() any { return &eventsWork{p: ingest.NewEventsParser()} }}
}
