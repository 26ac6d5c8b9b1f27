package capture

import (
	"strconv"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/ingest"
)

// Amplitude's HTTP V2 API and Batch Event Upload (amplitude.com/docs/apis/
// analytics/http-v2): {"api_key", "events": [event…], "options":
// {"min_id_length"}?}. Mapping (docs/sdks.md, "What is mapped how"): the distinct id
// is user_id when set, else device_id, each at least min_id_length
// characters (default 5); "time" is epoch milliseconds (receipt time when
// absent); insert_id is the insert id (derived when absent); the
// properties are event_properties plus the event's scalar top-level
// fields (platform, os_name, app_version, revenue, …) under their own
// names, groups as JSON text; user_properties' $set and plain keys are
// user properties (set), $setOnce set once, other operations ($add,
// $unset, $append, …) are dropped and listed. An event carrying both
// user_id and device_id is identify(user_id, device_id)
// (docs/identity.md §2).

// amplitudeReserved reports the event fields that are not properties.
func amplitudeReserved(k string) bool {
	switch k {
	case "event_type", "user_id", "device_id", "time", "insert_id", "event_properties", "user_properties", "group_properties":
		return true
	}
	return false
}

// AmplitudeDefaultMinIDLength is Amplitude's default minimum length of
// user_id and device_id, in characters.
const AmplitudeDefaultMinIDLength = 5

// DecodeAmplitude decodes an Amplitude upload. Invalid events are listed
// with the fields Amplitude's 400 answer keys them by: Field
// "missing:NAME" for a required field that is absent, "invalid:NAME" for
// one of the wrong type or value, "id_length:NAME" for an id shorter than
// min_id_length. Errors: *BodyError, ErrNoEvents.
func DecodeAmplitude(body []byte, opt Options) (*Batch, error) {
	root, release, err := parse(body, "an Amplitude upload {\"api_key\", \"events\": [...]}")
	if err != nil {
		return nil, err
	}
	defer release()
	o := object(root)
	if o == nil {
		return nil, &BodyError{Msg: "the body is not an Amplitude upload: want a JSON object"}
	}
	var evs []*fastjson.Value
	if v := o.Get("events"); v != nil {
		if evs, err = v.Array(); err != nil {
			return nil, &BodyError{Msg: "the body is not an Amplitude upload: \"events\" is not an array"}
		}
	}
	if len(evs) == 0 {
		return nil, ErrNoEvents
	}
	minLen := AmplitudeDefaultMinIDLength
	if n := get(object(o.Get("options")), "min_id_length"); n != nil {
		if m, err := n.Int(); err == nil && m >= 0 {
			minLen = m
		}
	}
	bd := &builder{b: &Batch{Key: str(o.Get("api_key")), Total: len(evs)}, opt: opt}
	for i, v := range evs {
		m := object(v)
		if m == nil {
			bd.invalid(i, "invalid:event", "an event is not a JSON object")
			continue
		}
		bd.amplitudeEvent(i, m, minLen)
	}
	return bd.b, nil
}

// amplitudeEvent adds event i of the request.
func (bd *builder) amplitudeEvent(i int, m *fastjson.Object, minLen int) {
	name := str(m.Get("event_type"))
	if name == "" {
		bd.invalid(i, "missing:event_type", "missing event_type")
		return
	}
	user, device := str(m.Get("user_id")), str(m.Get("device_id"))
	if user == "" && device == "" {
		bd.invalid(i, "missing:user_id", "an event needs user_id or device_id")
		return
	}
	for _, f := range [...]struct{ n, v string }{{"user_id", user}, {"device_id", device}} {
		if f.v != "" && utf8.RuneCountInString(f.v) < minLen {
			bd.invalid(i, "id_length:"+f.n, f.n+" is shorter than min_id_length "+strconv.Itoa(minLen))
			return
		}
	}
	id := truncateID(user)
	if id == "" {
		id = truncateID(device)
	}
	ts, clientTime := bd.opt.Now, ""
	if t := m.Get("time"); t != nil && t.Type() != fastjson.TypeNull {
		ms, err := t.Int64()
		if err == nil {
			ts, err = event.EpochToMicros(ms)
		}
		if err != nil || ms < 1e11 {
			bd.invalid(i, "invalid:time", "time must be an integer of epoch milliseconds")
			return
		}
		clientTime = str(t)
	}
	ep := object(m.Get("event_properties"))
	ps := props(nil, ep, nil)
	fixed := len(ps)
	ps = props(ps, m, func(k string) bool { return amplitudeReserved(k) || hasProp(ps[:fixed], k) })
	insertID := str(m.Get("insert_id"))
	if insertID == "" {
		insertID = derivedInsertID(bd.b.Key, id, name, clientTime, ep)
	}
	e := bd.add(i, event.Event{UserID: id, Name: name, Time: ts, InsertID: insertID, Props: ps})
	if up := object(m.Get("user_properties")); up != nil {
		// At one instant the operations apply in this order
		// (docs/sdks.md, "What is mapped how"): $clearAll, $unset, set, $setOnce, $add.
		plain := bd.amplitudeUserOps(i, up)
		if up.Get("$clearAll") != nil {
			bd.userDelete(e)
		}
		if v := up.Get("$unset"); v != nil {
			bd.userOp(e, ingest.UserUnset, bd.unsetNames(i, "user_properties.$unset", v))
		}
		bd.users(e, setProps(plain, object(up.Get("$set"))), false)
		bd.users(e, setProps(object(up.Get("$setOnce"))), true)
		if v := up.Get("$add"); v != nil {
			bd.userOp(e, ingest.UserAdd, bd.addNumbers(i, "user_properties.$add", v))
		}
	}
	if user != "" && device != "" && user != device {
		bd.op(e, identity.Identify, id, truncateID(device))
	}
}

// amplitudeUserOps lists the operations of user_properties other than
// $set, $setOnce, $unset, $add and $clearAll (the list operations) as
// dropped, and returns an object of its plain keys (set), or nil when it
// has none.
func (bd *builder) amplitudeUserOps(i int, up *fastjson.Object) *fastjson.Object {
	plain := false
	up.Visit(func(k []byte, _ *fastjson.Value) {
		switch string(k) {
		case "$set", "$setOnce", "$unset", "$add", "$clearAll":
			return
		}
		switch {
		case len(k) > 0 && k[0] == '$':
			bd.dropped(i, "user_properties."+string(k), string(k)+" is not applied yet (docs/sdks.md)")
		default:
			plain = true
		}
	})
	if !plain {
		return nil
	}
	var a fastjson.Arena
	o := a.NewObject()
	up.Visit(func(k []byte, v *fastjson.Value) {
		if len(k) > 0 && k[0] != '$' {
			o.Set(string(k), v)
		}
	})
	return object(o)
}
