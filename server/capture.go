package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spurdb/spur/capture"
	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// SDK-compatible capture (docs/ingest.md §6, docs/sdks.md): the PostHog,
// Segment, Amplitude and Mixpanel client libraries send here unchanged,
// one path prefix per protocol:
//
//	/ingest/posthog/    batch/ e/ i/v0/e/ capture/ track/ engage/ (POST);
//	                    flags/ decide/ (POST, GET): no flags;
//	                    array/{token}/config (GET): an empty remote config
//	/ingest/segment/v1/ batch b track identify page screen group alias
//	                    t i p s g a (POST); projects/{key}/settings (GET);
//	                    m (analytics-next's usage metrics: dropped)
//	/ingest/amplitude/  2/httpapi batch (POST)
//	/ingest/mixpanel/   track engage groups import (POST, and GET ?data=
//	                    but for import); group updates are answered,
//	                    not stored
//
// The key is where each protocol puts it (package capture; Segment's
// Basic-auth user, Mixpanel /import's) and must be an ingest key, which
// names the app; under --auth none it is read as the app's name. Bodies:
// JSON with any Content-Type, gzip detected by its magic bytes with or
// without Content-Encoding, PostHog's compression=base64 form and
// Mixpanel's data= form. The events are stored as the events endpoint
// stores them (durable and visible on the answer, deduplicated by their
// insert ids), with a property of the wrong type dropped from its event
// (storage.IngestOptions.DropBadValues) and listed at
// GET /api/apps/{app}/warnings?kind=property, and with every identity
// operation decoded here (storage.IngestOptions.ExplicitOps). Each
// protocol answers in its own shape (captureProtocol); no answer to a
// batch with some bad events makes a client resend it forever.

// captureProtocol is one protocol's answers.
type captureProtocol struct {
	name string
	// ok answers a stored request: stored counts the events stored,
	// b is the decoded batch, invalid the messages left out (by
	// request position).
	ok func(w http.ResponseWriter, r *captureReq, b *capture.Batch, stored int, invalid []capture.Problem)
	// fail answers an error: status, a short code and the message.
	fail func(w http.ResponseWriter, r *captureReq, status int, code, msg string)
}

// captureReq is a capture request as its answer needs it.
type captureReq struct {
	*http.Request
	size int                 // the body's bytes as received
	form func(string) string // a form field of the query or body
}

// captureDecoder decodes a request's body (decompressed) for one path.
// The request's form fields are read through r.form, which parses the
// body's form once.
type captureDecoder func(body []byte, r *captureReq, opt capture.Options) (*capture.Batch, error)

// registerCapture adds the capture paths to rt.
func (s *Server) registerCapture(rt *router) {
	ph, seg, amp, mp := posthogProtocol(), segmentProtocol(), amplitudeProtocol(), mixpanelProtocol()
	posthogBody := func(engage bool) captureDecoder {
		return func(body []byte, r *captureReq, opt capture.Options) (*capture.Batch, error) {
			return capture.DecodePostHog(body, opt, engage)
		}
	}
	for _, p := range []string{"batch", "e", "i/v0/e", "capture", "track"} {
		s.captureRoute(rt, "/ingest/posthog/"+p, ph, posthogBody(false), p == "e" || p == "i/v0/e")
	}
	s.captureRoute(rt, "/ingest/posthog/engage", ph, posthogBody(true), true)
	for _, p := range []string{"flags", "decide"} {
		for _, m := range []string{"POST", "GET"} {
			rt.handle(m, "/ingest/posthog/"+p+"/", anyOrigin, open, s.handlePostHogFlags)
			rt.handle(m, "/ingest/posthog/"+p, anyOrigin, open, s.handlePostHogFlags)
		}
	}
	rt.handle("GET", "/ingest/posthog/array/{token}/config", anyOrigin, open, s.handlePostHogConfig)
	rt.handle("GET", "/ingest/posthog/array/{token}/config.js", anyOrigin, open, s.handlePostHogConfig)

	for p, typ := range capture.SegmentTypes {
		typ := typ
		s.captureRoute(rt, "/ingest/segment/v1/"+p, seg, func(body []byte, r *captureReq, opt capture.Options) (*capture.Batch, error) {
			return capture.DecodeSegment(body, opt, typ)
		}, len(p) == 1)
	}
	for _, p := range []string{"batch", "b"} {
		s.captureRoute(rt, "/ingest/segment/v1/"+p, seg, func(body []byte, r *captureReq, opt capture.Options) (*capture.Batch, error) {
			return capture.DecodeSegment(body, opt, "")
		}, p == "b")
	}
	rt.handle("GET", "/ingest/segment/v1/projects/{key}/settings", anyOrigin, open, s.handleSegmentSettings)
	rt.handle("POST", "/ingest/segment/v1/m", anyOrigin, open, s.handleSegmentMetrics)

	for _, p := range []string{"2/httpapi", "batch"} {
		s.captureRoute(rt, "/ingest/amplitude/"+p, amp, func(body []byte, r *captureReq, opt capture.Options) (*capture.Batch, error) {
			return capture.DecodeAmplitude(body, opt)
		}, false)
	}

	mixpanelBody := func(path string) captureDecoder {
		return func(body []byte, r *captureReq, opt capture.Options) (*capture.Batch, error) {
			data, err := capture.MixpanelData(body, r.form)
			if err != nil {
				return nil, err
			}
			switch path {
			case "engage":
				return capture.DecodeMixpanelEngage(data, opt)
			case "groups":
				return capture.DecodeMixpanelGroups(data, opt)
			}
			mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			return capture.DecodeMixpanel(data, opt, ndjsonTypes[mt] || r.URL.Path == "/ingest/mixpanel/import")
		}
	}
	for _, p := range []string{"track", "import", "engage", "groups"} {
		s.captureRoute(rt, "/ingest/mixpanel/"+p, mp, mixpanelBody(p), p != "import")
	}
}

// captureRoute serves POST path (and path/ for PostHog's trailing
// slashes) with decode; browser is a path browser SDKs use (the
// request's User-Agent describes the device).
func (s *Server) captureRoute(rt *router, path string, p captureProtocol, decode captureDecoder, browser bool) {
	h := func(w http.ResponseWriter, r *http.Request) { s.handleCapture(w, r, p, decode, browser) }
	rt.handle("POST", path, anyOrigin, open, h)
	if strings.HasPrefix(path, "/ingest/posthog/") {
		rt.handle("POST", path+"/", anyOrigin, open, h)
	}
	if strings.HasPrefix(path, "/ingest/mixpanel/") && path != "/ingest/mixpanel/import" {
		rt.handle("GET", path, anyOrigin, open, h)
	}
}

// formValue returns a lookup of a form field in the request's query or,
// for a form body, in body.
func formValue(body []byte, r *http.Request) func(string) string {
	var form url.Values
	return func(k string) string {
		if v := r.URL.Query().Get(k); v != "" {
			return v
		}
		if form == nil {
			form = url.Values{}
			if !capture.JSONBody(body) {
				form, _ = url.ParseQuery(string(body))
			}
		}
		return form.Get(k)
	}
}

// handleCapture reads, decodes and stores one capture request.
func (s *Server) handleCapture(w http.ResponseWriter, r *http.Request, p captureProtocol, decode captureDecoder, browser bool) {
	start := time.Now()
	ctx, task := trace.NewTask(r.Context(), "spur.capture")
	defer task.End()
	req := &captureReq{Request: r, form: formValue(nil, r)}
	fail := func(status int, code, msg string) {
		s.met.captureRequests.WithLabelValues(p.name, strconv.Itoa(status)).Inc()
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", eventsRetryAfter)
		}
		p.fail(w, req, status, code, msg)
	}
	var held int64
	defer func() { s.eventsMem.used.Add(-held) }()
	reserve := func(n int64) error {
		if err := s.eventsMem.reserve(held, n); err != nil {
			return err
		}
		held += n
		return nil
	}
	body, err := s.captureBody(w, r, reserve)
	if err == nil {
		// The parse tree, the events and their strings: measured at about
		// 5× the JSON (BenchmarkDecodePostHog: 1.4 MB for 276 kB).
		err = reserve(captureWorkFactor * int64(len(body)))
	}
	if err != nil {
		status, code := http.StatusBadRequest, CodeInvalidInput
		var mb *http.MaxBytesError
		switch {
		case errors.As(err, &mb), errors.Is(err, errEventsTooMuch), errors.Is(err, errDecompressedTooLarge):
			status, code = http.StatusRequestEntityTooLarge, query.CodeLimitExceeded
		case errors.Is(err, errEventsBusy):
			status, code = http.StatusServiceUnavailable, query.CodeUnavailable
		case r.Context().Err() != nil:
			return
		}
		fail(status, code, err.Error()+"; nothing was stored")
		return
	}
	req.size, req.form = len(body), formValue(body, r)
	opt := capture.Options{Now: start.UnixMicro(), MaxClockSkew: int64(s.cfg.MaxClockSkew / time.Microsecond)}
	if browser {
		opt.UserAgent = r.UserAgent()
	}
	if u, _, ok := r.BasicAuth(); ok {
		opt.Key = u
	}
	region := trace.StartRegion(ctx, "parse")
	b, err := decode(body, req, opt)
	region.End()
	var be *capture.BodyError
	var ke *capture.KeyError
	switch {
	case errors.As(err, &ke):
		fail(http.StatusUnauthorized, query.CodeUnauthenticated, err.Error()+"; nothing was stored")
		return
	case errors.As(err, &be), errors.Is(err, capture.ErrNoEvents):
		fail(http.StatusBadRequest, CodeInvalidInput, err.Error()+"; nothing was stored")
		return
	case err != nil:
		s.internal(w, r, err)
		return
	}
	app, why := s.captureApp(b.Key)
	if why != "" {
		s.met.authFailures.WithLabelValues("401").Inc()
		fail(http.StatusUnauthorized, query.CodeUnauthenticated, why)
		return
	}
	stored, invalid, err := s.storeCapture(ctx, app, b)
	if err != nil {
		if e := s.ingestError(r, app, err); e != nil {
			fail(e.Status, e.Code, e.Message)
		}
		return
	}
	p.ok(w, req, b, stored, invalid)
	s.met.captureRequests.WithLabelValues(p.name, "200").Inc()
	s.met.ingestEvents.WithLabelValues("accepted").Add(float64(stored))
	s.met.ingestEvents.WithLabelValues("rejected").Add(float64(len(invalid)))
	s.met.ingestAck.Observe(time.Since(start).Seconds())
}

// captureWorkFactor is the memory a capture request reserves for its
// decoding (the JSON tree, events, properties and strings) per byte of
// its decompressed body, counted by the events memory gate
// (Config.EventsMemory).
const captureWorkFactor = 8

// errDecompressedTooLarge is a gzip body over MaxEventsDecompressedBytes.
var errDecompressedTooLarge = errors.New("the body is over the decompressed size limit (--max-events-decompressed-bytes)")

// captureBody reads the request's body (GET: the query's data= field)
// within the size limits, reserving its memory, and decompresses it
// when it starts with gzip's magic bytes (whatever Content-Encoding
// says; posthog-js sends none) or PostHog's compression=base64 asks.
func (s *Server) captureBody(w http.ResponseWriter, r *http.Request, reserve func(int64) error) ([]byte, error) {
	if r.Method == http.MethodGet {
		return nil, nil
	}
	if n := r.ContentLength; n > s.cfg.MaxEventsBytes {
		return nil, &http.MaxBytesError{Limit: s.cfg.MaxEventsBytes}
	} else if n > 0 {
		if err := reserve(n); err != nil {
			return nil, err
		}
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxEventsBytes))
	if err != nil {
		return nil, fmt.Errorf("read the body: %w", err)
	}
	if r.ContentLength <= 0 {
		if err := reserve(int64(len(raw))); err != nil {
			return nil, err
		}
	}
	if r.URL.Query().Get("compression") == "base64" || strings.HasPrefix(string(raw), "data=") && strings.HasPrefix(r.URL.Path, "/ingest/posthog/") {
		form, err := url.ParseQuery(string(raw))
		if err != nil {
			return nil, fmt.Errorf("the body is not a form: %w", err)
		}
		if raw, err = base64.StdEncoding.DecodeString(form.Get("data")); err != nil {
			return nil, fmt.Errorf("the form's data is not base64: %w", err)
		}
	}
	if len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
		return raw, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the body is not valid gzip: %w", err)
	}
	var out bytes.Buffer
	limit := s.cfg.MaxEventsDecompressedBytes
	if limit < 0 {
		limit = math.MaxInt64 - 1
	}
	n, err := io.Copy(&out, io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, fmt.Errorf("the body is not valid gzip: %w", err)
	}
	if n > limit {
		return nil, errDecompressedTooLarge
	}
	if err := reserve(n); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// captureApp returns the app a capture key names, or why it names none:
// an ingest key's app; under --auth none the key read as an app name.
func (s *Server) captureApp(key string) (string, string) {
	if key == "" {
		return "", "missing key: send the app's ingest key (`spur keys create --app APP --scope ingest`) where the SDK puts its project key"
	}
	if s.cfg.Auth == AuthNone {
		if !storage.ValidAppName(key) {
			return "", fmt.Sprintf("under --auth none the key names the app: %s is not an app name ([a-z0-9][a-z0-9_-]{0,63})", event.Quote(key))
		}
		return key, ""
	}
	k := s.keys.Lookup(key)
	switch {
	case k == nil:
		return "", "unknown key: it was revoked, or it is not a key of this server"
	case k.App == "":
		return "", "an admin key names no app: send an ingest key of the app"
	case k.Scope != ScopeIngest:
		return "", "a " + string(k.Scope) + " key cannot send events: send an ingest key of the app"
	}
	return k.App, ""
}

// storeCapture stores a decoded batch in app and returns the number of
// events stored and the messages left out (the decoder's and the
// store's, by request position). Dropped values and left-out messages
// are recorded as warnings.
func (s *Server) storeCapture(ctx context.Context, app string, b *capture.Batch) (int, []capture.Problem, error) {
	invalid := b.Invalid
	if len(b.Events) == 0 {
		s.warnCapture(app, b, invalid, nil)
		return 0, invalid, nil
	}
	ii, ok := s.ingester.(captureIngester)
	if !ok {
		return 0, nil, errors.New("this server's store takes no SDK capture")
	}
	users := make([]storage.UserWrite, len(b.Users))
	for i, u := range b.Users {
		users[i] = storage.UserWrite{Index: u.Event, Props: u.Props, Once: u.Once, Op: u.Op}
	}
	ids := make([]storage.IdentityWrite, len(b.Ops))
	for i, o := range b.Ops {
		ids[i] = storage.IdentityWrite{Index: o.Event, Op: o.Op}
	}
	region := trace.StartRegion(ctx, "store")
	rep, err := ii.IngestWith(ctx, app, b.Events, users, ids, storage.IngestOptions{DropBadValues: true, ExplicitOps: true})
	region.End()
	if err != nil {
		return 0, nil, err
	}
	for _, rj := range rep.Rejected {
		invalid = append(invalid, capture.Problem{Index: b.Index[rj.Index], Field: rj.Field, Message: rj.Message})
	}
	dropped := make([]capture.Problem, 0, len(rep.Dropped))
	for _, d := range rep.Dropped {
		dropped = append(dropped, capture.Problem{Index: b.Index[d.Index], Field: d.Field, Message: d.Message})
	}
	s.warnCapture(app, b, invalid, dropped)
	return rep.Accepted, invalid, nil
}

// captureIngester is the store's view the capture paths need.
type captureIngester interface {
	IngestWith(ctx context.Context, app string, evs []event.Event, users []storage.UserWrite, ids []storage.IdentityWrite, opt storage.IngestOptions) (*storage.IngestReport, error)
}

// The store takes SDK capture.
var _ captureIngester = (*storage.Store)(nil)

// handlePostHogFlags answers posthog-js's and the server SDKs' flag
// requests with no flags (docs/ingest.md §6).
func (s *Server) handlePostHogFlags(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"flags": map[string]any{}, "featureFlags": map[string]any{}, "featureFlagPayloads": map[string]any{},
		"errorsWhileComputingFlags": false, "sessionRecording": false, "supportedCompression": []string{"gzip", "gzip-js"},
		"surveys": false, "heatmaps": false, "autocapture_opt_out": true, "capturePerformance": false,
		"toolbarParams": map[string]any{}, "siteApps": []any{}, "config": map[string]any{"enable_collect_everything": false},
	})
}

// handlePostHogConfig answers posthog-js's remote config: nothing on.
func (s *Server) handlePostHogConfig(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, ".js") {
		w.Header().Set("Content-Type", "application/javascript")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("(function(){})();\n"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": "", "supportedCompression": []string{"gzip", "gzip-js"},
		"hasFeatureFlags": false, "sessionRecording": false, "surveys": false, "heatmaps": false, "siteApps": []any{}})
}

// handleSegmentSettings answers analytics-next's settings fetch: its
// Segment.io integration pointing back at this server's
// /ingest/segment/v1 (the key in the path is not checked here: the
// events carry it).
func (s *Server) handleSegmentSettings(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"integrations": map[string]any{"Segment.io": map[string]any{
			"apiKey": r.PathValue("key"), "apiHost": r.Host + "/ingest/segment/v1", "protocol": scheme,
		}},
		"plan":                 map[string]any{"track": map[string]any{"__default": map[string]any{"enabled": true}}},
		"edgeFunction":         map[string]any{},
		"analyticsNextEnabled": true,
		// No usage metrics: analytics-next would post them to Segment.
		"metrics": map[string]any{"sampleRate": 0},
	})
}

// handleSegmentMetrics takes analytics-next's usage metrics (POST
// /ingest/segment/v1/m, when its settings did not turn them off) and
// drops them: they are the SDK's, not the app's.
func (s *Server) handleSegmentMetrics(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}

// posthogProtocol answers as PostHog's capture does: exactly 200
// {"status": 1} (posthog-python resends on any other 2xx); errors as
// {"type", "code", "detail"} (posthog-python reads detail).
func posthogProtocol() captureProtocol {
	return captureProtocol{name: "posthog",
		ok: func(w http.ResponseWriter, r *captureReq, b *capture.Batch, stored int, invalid []capture.Problem) {
			writeJSON(w, http.StatusOK, map[string]int{"status": 1})
		},
		fail: func(w http.ResponseWriter, r *captureReq, status int, code, msg string) {
			writeJSON(w, status, map[string]string{"type": "validation_error", "code": code, "detail": msg})
		}}
}

// segmentProtocol answers as Segment's Tracking API: 200
// {"success": true}; errors {"code", "message"} (segment-python reads
// them).
func segmentProtocol() captureProtocol {
	return captureProtocol{name: "segment",
		ok: func(w http.ResponseWriter, r *captureReq, b *capture.Batch, stored int, invalid []capture.Problem) {
			writeJSON(w, http.StatusOK, map[string]bool{"success": true})
		},
		fail: func(w http.ResponseWriter, r *captureReq, status int, code, msg string) {
			writeJSON(w, status, map[string]any{"success": false, "code": code, "message": msg})
		}}
}

// amplitudeProtocol answers as Amplitude's HTTP V2 API: JSON with code
// equal to the status in every answer (the Python SDK reads code, not
// the status); invalid events by index in a 400 after the good ones are
// stored (the SDK drops them and resends the rest, which deduplicate);
// an unknown key as 400 "Invalid API key: …" (InvalidAPIKeyError).
func amplitudeProtocol() captureProtocol {
	return captureProtocol{name: "amplitude",
		ok: func(w http.ResponseWriter, r *captureReq, b *capture.Batch, stored int, invalid []capture.Problem) {
			if len(invalid) == 0 {
				writeJSON(w, http.StatusOK, map[string]any{"code": 200, "events_ingested": stored,
					"payload_size_bytes": r.size, "server_upload_time": time.Now().UnixMilli()})
				return
			}
			fields := map[string]map[string][]int{"events_with_invalid_fields": {}, "events_with_missing_fields": {}, "events_with_invalid_id_lengths": {}}
			for _, p := range invalid {
				group, name := "events_with_invalid_fields", p.Field
				if kind, f, ok := strings.Cut(p.Field, ":"); ok {
					name = f
					switch kind {
					case "missing":
						group = "events_with_missing_fields"
					case "id_length":
						group = "events_with_invalid_id_lengths"
					}
				}
				fields[group][name] = append(fields[group][name], p.Index)
			}
			out := map[string]any{"code": 400, "error": "Request missing required field or contains invalid fields", "events_ingested": stored}
			for k, v := range fields {
				out[k] = v
			}
			writeJSON(w, http.StatusBadRequest, out)
		},
		fail: func(w http.ResponseWriter, r *captureReq, status int, code, msg string) {
			if status == http.StatusUnauthorized {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 400, "error": "Invalid API key: " + msg})
				return
			}
			out := map[string]any{"code": status, "error": msg}
			if status == http.StatusBadRequest {
				out["missing_field"] = "body"
			}
			writeJSON(w, status, out)
		}}
}

// mixpanelProtocol answers as Mixpanel's ingestion API: /track and
// /engage 1 (or {"status": 1, "error": null} with verbose=1), 0 / status
// 0 with the error otherwise; /import {"code": 200,
// "num_records_imported", "status": "OK"} ("status": 1 and "error": null
// for mixpanel-python's form body, which it reads as /track's answer), or
// 400 with failed_records after storing the good ones.
func mixpanelProtocol() captureProtocol {
	verbose := func(r *captureReq) bool { return r.form("verbose") == "1" }
	return captureProtocol{name: "mixpanel",
		ok: func(w http.ResponseWriter, r *captureReq, b *capture.Batch, stored int, invalid []capture.Problem) {
			if r.URL.Path == "/ingest/mixpanel/import" {
				if len(invalid) == 0 {
					ans := map[string]any{"code": 200, "num_records_imported": stored, "status": "OK"}
					if r.form("data") != "" {
						// mixpanel-python's import_data posts the /track form
						// and reads /track's answer (status 1, error).
						ans["status"], ans["error"] = 1, nil
					}
					writeJSON(w, http.StatusOK, ans)
					return
				}
				failed := make([]map[string]any, len(invalid))
				for i, p := range invalid {
					failed[i] = map[string]any{"index": p.Index, "field": p.Field, "message": p.Message}
				}
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 400, "error": "some data points in the request failed validation",
					"failed_records": failed, "num_records_imported": stored, "status": "Bad Request"})
				return
			}
			if verbose(r) {
				writeJSON(w, http.StatusOK, map[string]any{"status": 1, "error": nil})
				return
			}
			writeBytes(w, http.StatusOK, []byte("1"))
		},
		fail: func(w http.ResponseWriter, r *captureReq, status int, code, msg string) {
			if r.URL.Path == "/ingest/mixpanel/import" {
				writeJSON(w, status, map[string]any{"code": status, "error": msg, "status": http.StatusText(status)})
				return
			}
			if verbose(r) {
				writeJSON(w, status, map[string]any{"status": 0, "error": msg})
				return
			}
			writeBytes(w, status, []byte("0"))
		}}
}

// warnCapture records the messages left out and the values dropped of
// one request in the app's capture warnings (kind=property).
func (s *Server) warnCapture(app string, b *capture.Batch, invalid, dropped []capture.Problem) {
	n := len(invalid) + len(dropped) + len(b.Dropped)
	if n == 0 {
		return
	}
	s.met.captureDropped.Add(float64(len(dropped) + len(b.Dropped)))
	now := time.Now().UTC().Format(time.RFC3339Nano)
	ws := make([]captureWarning, 0, n)
	for _, p := range invalid {
		ws = append(ws, captureWarning{Time: now, Kind: "event", Index: p.Index, Field: p.Field, Message: p.Message})
	}
	for _, list := range [][]capture.Problem{dropped, b.Dropped} {
		for _, p := range list {
			ws = append(ws, captureWarning{Time: now, Kind: "property", Index: p.Index, Field: p.Field, Message: p.Message})
		}
	}
	s.captureWarns.add(app, ws)
}

// maxCaptureWarnings is how many capture warnings are kept per app: the
// newest.
const maxCaptureWarnings = 1000

// captureWarning is one message left out or value dropped by a capture
// request (GET /api/apps/{app}/warnings?kind=property).
type captureWarning struct {
	Time    string `json:"time"`  // when received, RFC 3339 UTC
	Kind    string `json:"kind"`  // "event": the message was left out; "property": a value was dropped from it
	Index   int    `json:"index"` // the message's position in its request
	Field   string `json:"field"`
	Message string `json:"message"`
}

// captureWarnings keeps the newest maxCaptureWarnings warnings of each
// app, in memory (since the server started), and their total count.
type captureWarnings struct {
	mu    sync.Mutex
	byApp map[string]*captureRing
}

type captureRing struct {
	total uint64
	ws    []captureWarning // oldest first, at most maxCaptureWarnings
}

func (c *captureWarnings) add(app string, ws []captureWarning) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byApp == nil {
		c.byApp = map[string]*captureRing{}
	}
	r := c.byApp[app]
	if r == nil {
		r = &captureRing{}
		c.byApp[app] = r
	}
	r.total += uint64(len(ws))
	r.ws = append(r.ws, ws...)
	if over := len(r.ws) - maxCaptureWarnings; over > 0 {
		r.ws = append(r.ws[:0], r.ws[over:]...)
	}
}

// forget drops app's warnings (the app was deleted).
func (c *captureWarnings) forget(app string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byApp, app)
}

// page returns app's total and the warnings newest first from offset,
// at most limit.
func (c *captureWarnings) page(app string, offset, limit int) (uint64, []captureWarning) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []captureWarning{}
	r := c.byApp[app]
	if r == nil {
		return 0, out
	}
	for i := len(r.ws) - 1 - offset; i >= 0 && len(out) < limit; i-- {
		out = append(out, r.ws[i])
	}
	return r.total, out
}
