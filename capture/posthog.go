package capture

import (
	"errors"
	"math"
	"strconv"

	"github.com/valyala/fastjson"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/ingest"
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

// posthogTransport are the property names that carry the request, not
// the event: left out of the stored properties.
func posthogTransport(k string) bool {
	switch k {
	case "token", "distinct_id", "$set", "$set_once", "$unset":
		return true
	}
	return false
}

// DecodePostHog decodes a PostHog capture body (see above). engage is
// PostHog's /engage/ path: an event without a name is a $identify.
// Errors: *BodyError, *KeyError, ErrNoEvents.
func DecodePostHog(body []byte, opt Options, engage bool) (*Batch, error) {
	root, release, err := parse(body, "PostHog's JSON (a batch object, an array of events or an event)")
	if err != nil {
		return nil, err
	}
	defer release()
	var msgs []*fastjson.Value
	var env *fastjson.Object
	switch root.Type() {
	case fastjson.TypeArray:
		msgs, _ = root.Array()
	case fastjson.TypeObject:
		env = object(root)
		if b := env.Get("batch"); b != nil {
			if msgs, err = b.Array(); err != nil {
				return nil, &BodyError{Msg: "the body is not a PostHog batch: \"batch\" is not an array"}
			}
		} else {
			msgs, env = []*fastjson.Value{root}, nil
		}
	default:
		return nil, &BodyError{Msg: "the body is not PostHog's JSON: want an object or an array"}
	}
	if len(msgs) == 0 {
		return nil, ErrNoEvents
	}
	bd := &builder{b: &Batch{Total: len(msgs)}, opt: opt}
	if err := bd.key(str(get(env, "api_key"))); err != nil {
		return nil, err
	}
	if err := bd.key(str(get(env, "token"))); err != nil {
		return nil, err
	}
	var shift int64
	if sentAt := str(get(env, "sent_at")); sentAt != "" {
		if sent, err := isoTime(sentAt); err == nil {
			shift = skewShift(opt.Now, sent, opt.skew())
		}
	}
	for i, m := range msgs {
		o := object(m)
		if o == nil {
			bd.invalid(i, "", "an event is not a JSON object")
			continue
		}
		if err := bd.posthogEvent(i, o, shift, engage); err != nil {
			return nil, err
		}
	}
	return bd.b, nil
}

// posthogEvent adds event i of the request.
func (bd *builder) posthogEvent(i int, o *fastjson.Object, shift int64, engage bool) error {
	ps := object(o.Get("properties"))
	for _, k := range [...]*fastjson.Value{o.Get("api_key"), o.Get("token"), get(ps, "token")} {
		if err := bd.key(str(k)); err != nil {
			return err
		}
	}
	name := str(o.Get("event"))
	if name == "" && engage {
		name = "$identify"
	}
	if name == "" {
		bd.invalid(i, "event", "missing event name")
		return nil
	}
	id := str(o.Get("distinct_id"))
	if id == "" {
		id = str(get(ps, "distinct_id"))
	}
	if id == "" {
		bd.invalid(i, "distinct_id", "missing distinct_id: want a non-empty string at the top level or in properties")
		return nil
	}
	id = truncateID(id)
	uuid := str(o.Get("uuid"))
	ts, clientTime, ok := bd.posthogTime(i, o, uuid, shift)
	if !ok {
		return nil
	}
	ev := event.Event{UserID: id, Name: name, Time: ts, InsertID: uuid}
	if ev.InsertID == "" {
		ev.InsertID = derivedInsertID(bd.b.Key, id, name, clientTime, ps)
	}
	ev.Props = props(nil, ps, posthogTransport)
	bd.userAgent(&ev.Props, str(get(ps, "$raw_user_agent")))
	e := bd.add(i, ev)

	if v := get(ps, "$process_person_profile"); v != nil && v.Type() == fastjson.TypeFalse {
		return nil
	}
	// At one instant the writes apply in PostHog's order (docs/sdks.md,
	// "What is mapped how"): set, set-once, then unset.
	bd.users(e, setProps(object(o.Get("$set")), object(get(ps, "$set"))), false)
	bd.users(e, setProps(object(o.Get("$set_once")), object(get(ps, "$set_once"))), true)
	for _, u := range [...]struct {
		field string
		v     *fastjson.Value
	}{{"$unset", o.Get("$unset")}, {"properties.$unset", get(ps, "$unset")}} {
		if u.v != nil {
			bd.userOp(e, ingest.UserUnset, bd.unsetNames(i, u.field, u.v))
		}
	}
	switch name {
	case "$identify":
		anon := str(get(ps, "$anon_distinct_id"))
		if anon == "" {
			anon = id
		}
		bd.op(e, identity.Identify, id, truncateID(anon))
	case "$create_alias", "$merge_dangerously":
		other := str(get(ps, "alias"))
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
func (bd *builder) posthogTime(i int, o *fastjson.Object, uuid string, shift int64) (int64, string, bool) {
	if t := o.Get("timestamp"); t != nil && t.Type() != fastjson.TypeNull {
		s := str(t)
		var us int64
		var err error
		switch t.Type() {
		case fastjson.TypeNumber:
			us, err = epochNumber(s)
		case fastjson.TypeString:
			us, err = isoTime(s)
		default:
			err = errors.New("want an ISO-8601 string")
		}
		if err != nil {
			bd.invalid(i, "timestamp", err.Error())
			return 0, "", false
		}
		return us + shift, s, true
	}
	if t := o.Get("offset"); t != nil && t.Type() != fastjson.TypeNull {
		off, err := t.Float64()
		if err != nil || off < 0 || off > 1e13 || math.IsNaN(off) {
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
func epochNumber(n string) (int64, error) {
	if i, err := strconv.ParseInt(n, 10, 64); err == nil {
		return event.EpochToMicros(i)
	}
	f, err := strconv.ParseFloat(n, 64)
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
