// Package capture decodes the request bodies of the PostHog, Segment,
// Amplitude and Mixpanel client libraries into Spur's events, user
// property writes and identity operations (docs/ingest.md §6, the mapping
// of docs/sdks.md ("What is mapped how"), identity operations of
// docs/identity.md §2), so that those SDKs send to Spur unchanged. It
// knows the protocols' bodies, not HTTP: package server reads the
// request (limits, gzip, keys in headers) and answers in each protocol's
// shape.
//
// Every decoder takes the JSON of one request, already decompressed, and
// returns a Batch; a body that is not the protocol's JSON at all is a
// *BodyError (nothing of it is stored). An event the protocol's rules
// reject (no distinct id, no event name, a timestamp that is not one) is
// listed in Batch.Invalid by its position in the request and left out;
// every other event is kept. Decoders are safe for concurrent use; a
// Batch is owned by its caller.
package capture

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/ingest"
)

// DefaultMaxClockSkew is the default of Options.MaxClockSkew
// (`--max-clock-skew`, docs/ingest.md §6): 60 s in microseconds.
const DefaultMaxClockSkew = 60 * 1e6

// MaxDistinctIDBytes is the length PostHog truncates distinct ids to
// (its capture's extract_distinct_id: 200 characters); Spur truncates at
// 200 bytes, on a UTF-8 boundary.
const MaxDistinctIDBytes = 200

// Options are a request's facts a decoder needs.
type Options struct {
	// Now is the request's receive time, UTC microseconds.
	Now int64
	// MaxClockSkew bounds the client clock errors left uncorrected,
	// microseconds: a batch whose sent-at time is further from Now than
	// this has its events' timestamps shifted by the difference, rounded
	// to whole seconds (PostHog's sent_at correction; docs/ingest.md §6).
	// 0 means DefaultMaxClockSkew.
	MaxClockSkew int64
	// UserAgent is the request's User-Agent header, given only on the
	// paths browser SDKs use (PostHog's /e/, Segment's one-letter paths);
	// "" otherwise.
	UserAgent string
	// Key is the key the request carries outside its body (Segment's
	// Basic-auth user, Mixpanel /import's), "" when none.
	Key string
}

func (o Options) skew() int64 {
	if o.MaxClockSkew <= 0 {
		return DefaultMaxClockSkew
	}
	return o.MaxClockSkew
}

// Batch is one request decoded.
type Batch struct {
	// Key is the request's key (the protocol's project token, write key or
	// API key): every event of the request carries this one or none.
	// "" when the request carries none.
	Key string
	// Events are the request's good events, in request order; Index[i]
	// is the 0-based position of Events[i] among the request's messages.
	Events []event.Event
	Index  []int
	// Users are the user property writes of Events (Event indexes Events).
	Users []ingest.UserProps
	// Ops are the identity operations of Events (Event indexes Events),
	// all of them: the store is told not to derive any from event names
	// (storage.IngestOptions.ExplicitOps).
	Ops []Op
	// Invalid lists the messages left out, by request position, with the
	// field and what was wrong.
	Invalid []Problem
	// Dropped lists values left out of kept events (an operation Spur
	// does not apply, such as Mixpanel's $append, or a bad operand), by
	// request position.
	Dropped []Problem
	// Total counts the request's messages.
	Total int
}

// Op is an identity operation of the event Events[Event].
type Op struct {
	Event int
	Op    identity.Op
}

// Problem is a message or value a decoder left out: Index the message's
// position in the request, Field its JSON field, Message what was
// expected and found.
type Problem struct {
	Index   int    `json:"index"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// BodyError is a body that is not the protocol's JSON: nothing of the
// request is stored.
type BodyError struct{ Msg string }

func (e *BodyError) Error() string { return e.Msg }

// KeyError is a request carrying two different keys (PostHog's
// MultipleTokensError): nothing of it is stored.
type KeyError struct{ First, Second string }

func (e *KeyError) Error() string {
	return "the request carries more than one key; send one project's events per request"
}

// ErrNoEvents is returned for a body with no message at all (PostHog and
// Segment answer 400 to an empty batch).
var ErrNoEvents = errors.New("the request holds no events")

// builder accumulates a Batch.
type builder struct {
	b   *Batch
	opt Options
	// header is Options.UserAgent parsed (once per request: its events
	// share it), when headerParsed.
	header       [3]string
	headerParsed bool
}

// key records the key k carried somewhere in the request.
func (bd *builder) key(k string) error {
	switch {
	case k == "" || k == bd.b.Key:
	case bd.b.Key == "":
		bd.b.Key = k
	default:
		return &KeyError{First: bd.b.Key, Second: k}
	}
	return nil
}

func (bd *builder) invalid(i int, field, msg string) {
	bd.b.Invalid = append(bd.b.Invalid, Problem{Index: i, Field: field, Message: msg})
}

func (bd *builder) dropped(i int, field, msg string) {
	bd.b.Dropped = append(bd.b.Dropped, Problem{Index: i, Field: field, Message: msg})
}

// add appends ev (request position i) and returns its index in Events.
func (bd *builder) add(i int, ev event.Event) int {
	bd.b.Events = append(bd.b.Events, ev)
	bd.b.Index = append(bd.b.Index, i)
	return len(bd.b.Events) - 1
}

// users appends a user property write of event e.
func (bd *builder) users(e int, props []event.Prop, once bool) {
	if len(props) > 0 {
		bd.b.Users = append(bd.b.Users, ingest.UserProps{Event: e, Props: props, Once: once})
	}
}

// userOp appends a write of operation op (unset, add) of event e, when
// it names a property.
func (bd *builder) userOp(e int, op ingest.UserOp, props []event.Prop) {
	if len(props) > 0 {
		bd.b.Users = append(bd.b.Users, ingest.UserProps{Event: e, Props: props, Op: op})
	}
}

// userDelete appends a write of event e that clears every property of
// its user (Mixpanel's $delete, Amplitude's $clearAll).
func (bd *builder) userDelete(e int) {
	bd.b.Users = append(bd.b.Users, ingest.UserProps{Event: e, Op: ingest.UserDelete})
}

// unsetNames returns the property names of an unset — a list of names
// (PostHog, Mixpanel) or an object's keys (Amplitude's {"name": "-"}) —
// as properties without a value, in name order, repeats removed; names
// that are not strings are listed in Dropped under field.
func (bd *builder) unsetNames(i int, field string, v *fastjson.Value) []event.Prop {
	var out []event.Prop
	switch v.Type() {
	case fastjson.TypeArray:
		for _, x := range v.GetArray() {
			if x.Type() != fastjson.TypeString || len(x.GetStringBytes()) == 0 {
				bd.dropped(i, field, "want property names (strings), found "+string(x.MarshalTo(nil)))
				continue
			}
			out = append(out, event.Prop{Name: str(x)})
		}
	case fastjson.TypeObject:
		o, _ := v.Object()
		o.Visit(func(k []byte, _ *fastjson.Value) { out = append(out, event.Prop{Name: string(k)}) })
	case fastjson.TypeString:
		if s := str(v); s != "" {
			out = append(out, event.Prop{Name: s})
		}
	default:
		bd.dropped(i, field, "want a list of property names, found "+string(v.MarshalTo(nil)))
	}
	slices.SortFunc(out, func(a, b event.Prop) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b event.Prop) bool { return a.Name == b.Name })
}

// addNumbers returns the numbers of an add ({"name": number}) as
// properties, in name order; a value that is not a number is listed in
// Dropped under field.name.
func (bd *builder) addNumbers(i int, field string, v *fastjson.Value) []event.Prop {
	o := object(v)
	if o == nil {
		bd.dropped(i, field, "want an object of numbers, found "+string(v.MarshalTo(nil)))
		return nil
	}
	var out []event.Prop
	o.Visit(func(k []byte, x *fastjson.Value) {
		val, ok := value(x)
		if x.Type() != fastjson.TypeNumber || !ok || (val.Type != event.TypeInt && val.Type != event.TypeFloat) {
			bd.dropped(i, field+"."+string(k), "an add needs a number, found "+string(x.MarshalTo(nil)))
			return
		}
		out = append(out, event.Prop{Name: string(k), Value: val})
	})
	slices.SortStableFunc(out, func(a, b event.Prop) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// op appends an identity operation of event e; identify(T, A) with A == T
// only marks T identified.
func (bd *builder) op(e int, kind identity.Kind, t, o string) {
	ev := &bd.b.Events[e]
	bd.b.Ops = append(bd.b.Ops, Op{Event: e, Op: identity.Op{Kind: kind, T: t, O: o, Time: ev.Time}})
}

// parsers are the JSON parsers of the decoders (valyala/fastjson: a
// typed tree walked in document order, its memory reused between
// requests).
var parsers fastjson.ParserPool

// parse parses b, whose JSON must be want (for the error); the parser
// goes back to parsers with release once the tree is no longer read.
func parse(b []byte, want string) (*fastjson.Value, func(), error) {
	p := parsers.Get()
	v, err := p.ParseBytes(b)
	if err != nil {
		parsers.Put(p)
		return nil, nil, &BodyError{Msg: fmt.Sprintf("the body is not %s: %v", want, err)}
	}
	return v, func() { parsers.Put(p) }, nil
}

// JSONBody reports whether b starts (after white space) as a JSON object
// or array, rather than a form.
func JSONBody(b []byte) bool {
	c := firstByte(b)
	return c == '{' || c == '['
}

// firstByte returns b's first non-space byte, or 0.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// str returns v as a distinct id or key: strings as they are (copied),
// numbers in their JSON spelling, bools as true/false (PostHog
// stringifies non-string distinct ids); "" for absent values, null,
// objects and arrays.
func str(v *fastjson.Value) string {
	if v == nil {
		return ""
	}
	switch v.Type() {
	case fastjson.TypeString:
		return string(v.GetStringBytes())
	case fastjson.TypeNumber:
		return string(v.MarshalTo(nil))
	case fastjson.TypeTrue:
		return "true"
	case fastjson.TypeFalse:
		return "false"
	}
	return ""
}

// object returns v as an object, or nil.
func object(v *fastjson.Value) *fastjson.Object {
	if v == nil || v.Type() != fastjson.TypeObject {
		return nil
	}
	o, _ := v.Object()
	return o
}

// get returns member key of o, or nil.
func get(o *fastjson.Object, key string) *fastjson.Value {
	if o == nil {
		return nil
	}
	return o.Get(key)
}

// truncateID cuts a distinct id to MaxDistinctIDBytes on a rune boundary.
func truncateID(s string) string {
	if len(s) <= MaxDistinctIDBytes {
		return s
	}
	n := MaxDistinctIDBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// value converts a JSON value to a property value: strings (invalid
// UTF-8 replaced by U+FFFD), numbers (int when integral and in range,
// else float; NaN and infinities, which JSON cannot hold, as their text),
// bools; arrays and objects as their compact JSON text (docs/analytics.md
// §1); ok false for null.
func value(v *fastjson.Value) (event.Value, bool) {
	switch v.Type() {
	case fastjson.TypeNull:
		return event.Value{}, false
	case fastjson.TypeString:
		b := v.GetStringBytes()
		if !utf8.Valid(b) {
			return event.String(strings.ToValidUTF8(string(b), "\uFFFD")), true
		}
		return event.String(string(b)), true
	case fastjson.TypeTrue:
		return event.Bool(true), true
	case fastjson.TypeFalse:
		return event.Bool(false), true
	case fastjson.TypeNumber:
		raw := v.MarshalTo(nil)
		if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return event.Int(i), true
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return event.String(string(raw)), true
		}
		return event.Float(f), true
	}
	return event.String(string(v.MarshalTo(nil))), true
}

// props appends o's members as properties, in name order after the
// ones already in dst, skipping nulls and the names skip reports; a name
// already among the appended ones is replaced (a later object of setProps
// wins).
func props(dst []event.Prop, o *fastjson.Object, skip func(string) bool) []event.Prop {
	from := len(dst)
	o.Visit(func(k []byte, v *fastjson.Value) {
		if skip != nil && skip(string(k)) {
			return
		}
		if val, ok := value(v); ok {
			dst = append(dst, event.Prop{Name: string(k), Value: val})
		}
	})
	slices.SortStableFunc(dst[from:], func(a, b event.Prop) int { return strings.Compare(a.Name, b.Name) })
	return dst
}

// setProps returns the properties of objs merged, a later object's value
// winning on a name in both, in name order.
func setProps(objs ...*fastjson.Object) []event.Prop {
	var out []event.Prop
	for _, o := range objs {
		if o == nil {
			continue
		}
		for _, p := range props(nil, o, nil) {
			if i := slices.IndexFunc(out, func(q event.Prop) bool { return q.Name == p.Name }); i >= 0 {
				out[i] = p
			} else {
				out = append(out, p)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b event.Prop) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// flatten appends o's leaves as properties named prefix + dotted path
// (Segment's context as context.* properties), sorted by name; arrays
// are leaves.
func flatten(dst []event.Prop, o *fastjson.Object, prefix string) []event.Prop {
	from := len(dst)
	var walk func(o *fastjson.Object, prefix string)
	walk = func(o *fastjson.Object, prefix string) {
		o.Visit(func(k []byte, v *fastjson.Value) {
			name := prefix + string(k)
			if sub := object(v); sub != nil {
				walk(sub, name+".")
				return
			}
			if val, ok := value(v); ok {
				dst = append(dst, event.Prop{Name: name, Value: val})
			}
		})
	}
	walk(o, prefix)
	slices.SortStableFunc(dst[from:], func(a, b event.Prop) int { return strings.Compare(a.Name, b.Name) })
	return dst
}

// hasProp reports whether ps holds name.
func hasProp(ps []event.Prop, name string) bool {
	for i := range ps {
		if ps[i].Name == name {
			return true
		}
	}
	return false
}

// canonical appends o's members sorted by key, each value as its compact
// JSON (the derived insert id's properties).
func canonical(dst []byte, o *fastjson.Object) []byte {
	type kv struct {
		k string
		v *fastjson.Value
	}
	var kvs []kv
	o.Visit(func(k []byte, v *fastjson.Value) { kvs = append(kvs, kv{string(k), v}) })
	slices.SortStableFunc(kvs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	dst = append(dst, '{')
	for i, m := range kvs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, m.k)
		dst = m.v.MarshalTo(append(dst, ':'))
	}
	return append(dst, '}')
}

// derivedInsertID is the dedup id of an event whose protocol id is absent
// or empty (docs/ingest.md §6): 128 bits of SHA-256 over the key, the
// distinct id, the event name, the timestamp as the client sent it and
// the properties' canonical JSON (members sorted by key, values compact
// as sent), in hex. clientTime "" (no client timestamp) derives nothing: such an
// event cannot be deduplicated (docs/ingest.md §1).
func derivedInsertID(key, distinctID, name, clientTime string, properties *fastjson.Object) string {
	if clientTime == "" {
		return ""
	}
	h := sha256.New()
	for _, s := range []string{key, distinctID, name, clientTime} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	h.Write(canonical(nil, properties))
	var sum [sha256.Size]byte
	return "d-" + hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// isoTime parses an ISO-8601 / RFC 3339 timestamp of any precision and
// offset to UTC microseconds.
func isoTime(s string) (int64, error) {
	return event.ParseTime(strings.TrimSpace(s), nil)
}

// skewShift returns the correction of a client clock that sent its batch
// at sentAt (microseconds) received at now: now − sentAt rounded to whole
// seconds when its size is over max, else 0 (docs/ingest.md §6).
func skewShift(now, sentAt, max int64) int64 {
	d := now - sentAt
	if d <= max && d >= -max {
		return 0
	}
	return int64(math.Round(float64(d)/1e6)) * 1e6
}

// userAgent adds $browser, $os and $device_type, each where ps lacks it,
// parsed from ua, else from the request's header (Options.UserAgent,
// browser paths only), with ParseUserAgent (docs/ingest.md §6).
func (bd *builder) userAgent(ps *[]event.Prop, ua string) {
	if ua == "" {
		ua = bd.opt.UserAgent
	}
	if ua == "" || hasProp(*ps, "$browser") && hasProp(*ps, "$os") && hasProp(*ps, "$device_type") {
		return
	}
	var browser, os, device string
	if ua == bd.opt.UserAgent {
		if !bd.headerParsed {
			b, o, d := ParseUserAgent(ua)
			bd.header, bd.headerParsed = [3]string{b, o, d}, true
		}
		browser, os, device = bd.header[0], bd.header[1], bd.header[2]
	} else {
		browser, os, device = ParseUserAgent(ua)
	}
	for _, p := range [...]struct{ name, v string }{{"$browser", browser}, {"$os", os}, {"$device_type", device}} {
		if p.v != "" && !hasProp(*ps, p.name) {
			*ps = append(*ps, event.Prop{Name: p.name, Value: event.String(p.v)})
		}
	}
}
