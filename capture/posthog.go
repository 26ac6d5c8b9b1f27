package capture

import (
	"encoding/json"
	"strconv"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
)

// PostHog capture (v0: /batch/, /e/, /i/v0/e/, /capture/, /engage/;
// PostHog/posthog rust/capture/src/v0_request.rs). The body is one of
//
//	{"api_key"|"token", "batch": [event…], "sent_at"?, "historical_migration"?}
//	[event…]                  (posthog-js)
//	event                     (/capture/)
//
// and an event is {"event", "distinct_id", "properties", "timestamp"?,
// "offset"?, "uuid"?, "$set"?, "$set_once"?, "api_key"|"token"?}.
// Mapping (docs/sdks.md, "What is mapped how"): distinct_id from the top level, else
// properties.distinct_id (stringified, truncated to 200 bytes); the key
// from the batch, else the event's api_key/token, else
// properties.token; uuid as the insert id (derived when absent or "",
// as posthog-go sends it); $set and $set_once from the top level and from
// properties (properties' value wins on a name in both) as user
// properties; the transport keys (token, distinct_id, $set, $set_once,
// $unset) left out of the properties. $identify, $create_alias and
// $merge_dangerously apply identify / alias / merge (docs/identity.md §2);
// an event with $process_person_profile: false changes no person.
//
// Timestamps: "timestamp" in any ISO-8601 spelling, corrected by the
// batch's sent_at only when the client clock is off by more than
// Options.MaxClockSkew (whole seconds); without one, "offset" (ms before
// sending): receipt − offset, or the uuid's own millisecond time when it
// is a UUIDv7 within MaxClockSkew of that (posthog-js: so that a resend is
// the same event); else the receipt time.

// posthogEvent is one event of a PostHog body.
type posthogEvent struct {
	Event      string         `json:"event"`
	DistinctID any            `json:"distinct_id"`
	Properties map[string]any `json:"properties"`
	Timestamp  any            `json:"timestamp"`
	Offset     any            `json:"offset"`
	UUID       any            `json:"uuid"`
	Set        map[string]any `json:"$set"`
	SetOnce    map[string]any `json:"$set_once"`
	APIKey     string         `json:"api_key"`
	Token      string         `json:"token"`
}

// posthogBatch is the envelope of /batch/ and posthog-js's /e/.
type posthogBatch struct {
	APIKey string            `json:"api_key"`
	Token  string            `json:"token"`
	Batch  []json.RawMessage `json:"batch"`
	SentAt string            `json:"sent_at"`
}

// posthogTransport are the property names that carry the request, not
// the event: left out of the stored properties.
var posthogTransport = map[string]bool{"token": true, "distinct_id": true, "$set": true, "$set_once": true, "$unset": true}

// DecodePostHog decodes a PostHog capture body (see above). engage is
// PostHog's /engage/ path: an event without a name is a $identify.
// Errors: *BodyError, *KeyError, ErrNoEvents.
func DecodePostHog(body []byte, opt Options, engage bool) (*Batch, error) {
	var env posthogBatch
	var raws []json.RawMessage
	switch firstByte(body) {
	case '[':
		if err := decodeJSON(body, &raws, "a JSON array of PostHog events"); err != nil {
			return nil, err
		}
	case '{':
		var probe map[string]json.RawMessage
		if err := decodeJSON(body, &probe, "a PostHog batch or event object"); err != nil {
			return nil, err
		}
		if _, ok := probe["batch"]; ok {
			if err := decodeJSON(body, &env, "a PostHog batch {\"api_key\", \"batch\": [...]}"); err != nil {
				return nil, err
			}
			raws = env.Batch
		} else {
			raws = []json.RawMessage{body}
		}
	default:
		return nil, &BodyError{Msg: "the body is not PostHog's JSON: want an object or an array"}
	}
	if len(raws) == 0 {
		return nil, ErrNoEvents
	}
	bd := &builder{b: &Batch{Total: len(raws)}, opt: opt}
	if err := bd.key(env.APIKey); err != nil {
		return nil, err
	}
	if err := bd.key(env.Token); err != nil {
		return nil, err
	}
	var shift int64
	if env.SentAt != "" {
		if sent, err := isoTime(env.SentAt); err == nil {
			shift = skewShift(opt.Now, sent, opt.skew())
		}
	}
	for i, raw := range raws {
		var pe posthogEvent
		if err := decodeJSON(raw, &pe, "a PostHog event object"); err != nil {
			bd.invalid(i, "", err.Error())
			continue
		}
		if err := bd.posthogEvent(i, &pe, shift, engage); err != nil {
			return nil, err
		}
	}
	return bd.b, nil
}

// posthogEvent adds event i of the request.
func (bd *builder) posthogEvent(i int, pe *posthogEvent, shift int64, engage bool) error {
	for _, k := range []string{pe.APIKey, pe.Token, str(pe.Properties["token"])} {
		if err := bd.key(k); err != nil {
			return err
		}
	}
	name := pe.Event
	if name == "" && engage {
		name = "$identify"
	}
	if name == "" {
		bd.invalid(i, "event", "missing event name")
		return nil
	}
	id := str(pe.DistinctID)
	if id == "" {
		id = str(pe.Properties["distinct_id"])
	}
	if id == "" {
		bd.invalid(i, "distinct_id", "missing distinct_id: want a non-empty string at the top level or in properties")
		return nil
	}
	id = truncateID(id)
	uuid := str(pe.UUID)
	ts, clientTime, ok := bd.posthogTime(i, pe, uuid, shift)
	if !ok {
		return nil
	}
	ev := event.Event{UserID: id, Name: name, Time: ts, InsertID: uuid}
	if ev.InsertID == "" {
		ev.InsertID = derivedInsertID(bd.b.Key, id, name, clientTime, pe.Properties)
	}
	ev.Props = props(nil, pe.Properties, "", func(k string) bool { return posthogTransport[k] })
	bd.userAgent(&ev.Props, str(pe.Properties["$raw_user_agent"]))
	e := bd.add(i, ev)

	if v, ok := pe.Properties["$process_person_profile"].(bool); ok && !v {
		return nil
	}
	set := mergeMaps(pe.Set, asMap(pe.Properties["$set"]))
	once := mergeMaps(pe.SetOnce, asMap(pe.Properties["$set_once"]))
	bd.users(e, props(nil, set, "", nil), false)
	bd.users(e, props(nil, once, "", nil), true)
	if _, ok := pe.Properties["$unset"]; ok {
		bd.dropped(i, "properties.$unset", "$unset is not applied yet (docs/sdks.md)")
	}
	switch name {
	case "$identify":
		anon := str(pe.Properties["$anon_distinct_id"])
		if anon == "" {
			anon = id
		}
		bd.op(e, identity.Identify, id, truncateID(anon))
	case "$create_alias", "$merge_dangerously":
		other := str(pe.Properties["alias"])
		if other == "" {
			bd.invalid(i, "properties.alias", "missing alias: "+name+" needs the other distinct id in properties.alias")
			bd.unadd(e)
			return nil
		}
		kind := identity.Alias
		if name == "$merge_dangerously" {
			kind = identity.Merge
		}
		bd.op(e, kind, id, truncateID(other))
	}
	return nil
}

// unadd removes the last event added (e), with its user writes.
func (bd *builder) unadd(e int) {
	b := bd.b
	b.Events, b.Index = b.Events[:e], b.Index[:e]
	for len(b.Users) > 0 && b.Users[len(b.Users)-1].Event == e {
		b.Users = b.Users[:len(b.Users)-1]
	}
	for len(b.Ops) > 0 && b.Ops[len(b.Ops)-1].Event == e {
		b.Ops = b.Ops[:len(b.Ops)-1]
	}
}

// posthogTime returns the event's timestamp (microseconds) and the
// timestamp as the client sent it (for derived ids), or records event i
// invalid.
func (bd *builder) posthogTime(i int, pe *posthogEvent, uuid string, shift int64) (int64, string, bool) {
	if s := str(pe.Timestamp); s != "" {
		var us int64
		var err error
		if n, isNum := pe.Timestamp.(json.Number); isNum {
			us, err = epochNumber(n)
		} else {
			us, err = isoTime(s)
		}
		if err != nil {
			bd.invalid(i, "timestamp", err.Error())
			return 0, "", false
		}
		return us + shift, s, true
	}
	if pe.Offset != nil {
		n, ok := pe.Offset.(json.Number)
		off, err := strconv.ParseFloat(string(n), 64)
		if !ok || err != nil || off < 0 || off > 1e13 {
			bd.invalid(i, "offset", "want a number of milliseconds ≥ 0")
			return 0, "", false
		}
		at := bd.opt.Now - int64(off*1e3)
		if ms, ok := uuidV7Millis(uuid); ok {
			if d := ms*1e3 - at; d <= bd.opt.skew() && d >= -bd.opt.skew() {
				at = ms * 1e3
			}
		}
		return at, "", true
	}
	return bd.opt.Now, "", true
}

// epochNumber converts an epoch number (seconds, ms or µs by magnitude)
// to microseconds.
func epochNumber(n json.Number) (int64, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return event.EpochToMicros(i)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return 0, err
	}
	return event.EpochFloatToMicros(f)
}

// uuidV7Millis returns the Unix milliseconds of a UUIDv7 (RFC 9562, section 5.7:
// the first 48 bits), ok false for other strings.
func uuidV7Millis(u string) (int64, bool) {
	if len(u) != 36 || u[8] != '-' || u[13] != '-' || u[14] != '7' {
		return 0, false
	}
	ms, err := strconv.ParseInt(u[:8]+u[9:13], 16, 64)
	return ms, err == nil
}

// asMap returns v as an object, or nil.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// mergeMaps returns a's members overridden by b's (either may be nil).
func mergeMaps(a, b map[string]any) map[string]any {
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0:
		return b
	}
	m := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}
