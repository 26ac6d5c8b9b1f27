package capture

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/ingest"
)

// Mixpanel's ingestion API (docs.mixpanel.com/reference/track-event):
// /track and /import take an event or an array of events ({"event",
// "properties": {"token", "distinct_id", "time", "$insert_id", …}}; /import
// also NDJSON), /engage a people update or an array of them ({"$token",
// "$distinct_id", "$time"?, "$set"|"$set_once"|"$add"|"$unset"|…}).
// Mapping (docs/sdks.md "What is mapped how", docs/identity.md §2): the distinct id
// is $user_id, else $device_id, else distinct_id without a leading
// "$device:"; "time" is epoch seconds (fractional) below 1e11, else
// milliseconds (receipt time when absent); $insert_id is the insert id
// (derived when absent); token, distinct_id, time and $insert_id are not
// stored as properties. Identity: $identify ($identified_id,
// $anon_id) is identify, $create_alias (distinct_id, alias) alias, $merge
// ($distinct_ids [a, b]) merge, and an event with both $user_id and
// $device_id identify($user_id, $device_id). A people update is stored as
// an event "$set" of its distinct id with its $set and $set_once as user
// properties; other operations are dropped and listed.

// mixpanelReserved reports the event properties that are not stored.
func mixpanelReserved(k string) bool {
	switch k {
	case "token", "distinct_id", "time", "$insert_id":
		return true
	}
	return false
}

// MixpanelData returns the JSON of a Mixpanel form body's data field
// (plain JSON, or base64 of it, as the libraries send it), or the body
// itself when it is not a form. Errors: *BodyError.
func MixpanelData(body []byte, form func(string) string) ([]byte, error) {
	d := form("data")
	if d == "" {
		return body, nil
	}
	if JSONBody([]byte(d)) {
		return []byte(d), nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(d))
	if err != nil {
		if b, err = base64.URLEncoding.DecodeString(strings.TrimSpace(d)); err != nil {
			return nil, &BodyError{Msg: "the form's data is neither JSON nor base64 of JSON"}
		}
	}
	return b, nil
}

// mixpanelMessages parses a Mixpanel body and returns its messages: an
// object, an array of them, or (ndjson) one per line. release returns
// the parsers once the messages are no longer read.
func mixpanelMessages(body []byte, ndjson bool) ([]*fastjson.Value, func(), error) {
	const want = "Mixpanel's JSON (an object or an array of them)"
	if !ndjson || firstByte(body) == '[' {
		root, release, err := parse(body, want)
		if err != nil {
			return nil, nil, err
		}
		switch root.Type() {
		case fastjson.TypeArray:
			msgs, _ := root.Array()
			return msgs, release, nil
		case fastjson.TypeObject:
			return []*fastjson.Value{root}, release, nil
		}
		release()
		return nil, nil, &BodyError{Msg: "the body is not " + want}
	}
	var msgs []*fastjson.Value
	var ps []*fastjson.Parser
	release := func() {
		for _, p := range ps {
			parsers.Put(p)
		}
	}
	for line := range bytes.SplitSeq(body, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		p := parsers.Get()
		ps = append(ps, p)
		v, err := p.ParseBytes(line)
		if err != nil {
			release()
			return nil, nil, &BodyError{Msg: fmt.Sprintf("line %d is not JSON: %v", len(ps), err)}
		}
		msgs = append(msgs, v)
	}
	return msgs, release, nil
}

// DecodeMixpanel decodes a /track or /import body (JSON, already taken
// out of a form by MixpanelData); /import's NDJSON with ndjson. Errors:
// *BodyError, *KeyError, ErrNoEvents.
func DecodeMixpanel(body []byte, opt Options, ndjson bool) (*Batch, error) {
	return decodeMixpanelEach(body, opt, ndjson, "an event", (*builder).mixpanelEvent)
}

// mixpanelID returns the distinct id of an event's properties.
func mixpanelID(p *fastjson.Object) (id, user, device string) {
	user, device = str(get(p, "$user_id")), str(get(p, "$device_id"))
	switch {
	case user != "":
		id = user
	case device != "":
		id = device
	default:
		id = strings.TrimPrefix(str(get(p, "distinct_id")), "$device:")
	}
	return truncateID(id), truncateID(user), truncateID(device)
}

// mixpanelTime returns a Mixpanel time (seconds below 1e11, else ms; a
// number or a numeric string) in microseconds, the receipt time when v
// is absent, and its client spelling.
func (bd *builder) mixpanelTime(v *fastjson.Value) (int64, string, error) {
	if v == nil || v.Type() == fastjson.TypeNull {
		return bd.opt.Now, "", nil
	}
	s := str(v)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || v.Type() != fastjson.TypeNumber && v.Type() != fastjson.TypeString {
		return 0, "", fmt.Errorf("want a number, found %s", v.Type())
	}
	us, err := event.EpochFloatToMicros(f) // seconds below 1e11, else ms (or µs)
	return us, s, err
}

// mixpanelEvent adds event i of the request.
func (bd *builder) mixpanelEvent(i int, me *fastjson.Object) error {
	p := object(me.Get("properties"))
	if err := bd.key(str(get(p, "token"))); err != nil {
		return err
	}
	name := str(me.Get("event"))
	if name == "" {
		bd.invalid(i, "event", "missing event name")
		return nil
	}
	id, user, device := mixpanelID(p)
	var merged []*fastjson.Value
	if v := get(p, "$distinct_ids"); v != nil {
		merged, _ = v.Array()
	}
	switch {
	case name == "$identify" && str(get(p, "$identified_id")) != "":
		id = truncateID(str(get(p, "$identified_id")))
	case name == "$merge" && id == "" && len(merged) > 0:
		id = truncateID(str(merged[0]))
	}
	if id == "" {
		bd.invalid(i, "properties.distinct_id", "missing distinct_id ($user_id, $device_id or distinct_id)")
		return nil
	}
	ts, clientTime, err := bd.mixpanelTime(get(p, "time"))
	if err != nil {
		bd.invalid(i, "properties.time", "want epoch seconds or milliseconds: "+err.Error())
		return nil
	}
	insertID := str(get(p, "$insert_id"))
	if insertID == "" {
		insertID = derivedInsertID(bd.b.Key, id, name, clientTime, p)
	}
	ps := props(nil, p, mixpanelReserved)
	bd.userAgent(&ps, "")
	e := bd.add(i, event.Event{UserID: id, Name: name, Time: ts, InsertID: insertID, Props: ps})
	switch name {
	case "$identify":
		if anon := truncateID(str(get(p, "$anon_id"))); anon != "" {
			bd.op(e, identity.Identify, id, anon)
		} else {
			bd.op(e, identity.Identify, id, id)
		}
	case "$create_alias":
		if o := truncateID(str(get(p, "alias"))); o != "" {
			bd.op(e, identity.Alias, id, o)
		}
	case "$merge":
		if len(merged) == 2 && str(merged[0]) != "" && str(merged[1]) != "" {
			bd.op(e, identity.Merge, truncateID(str(merged[0])), truncateID(str(merged[1])))
		}
	}
	if user != "" && device != "" && user != device {
		bd.op(e, identity.Identify, user, device)
	}
	return nil
}

// DecodeMixpanelEngage decodes an /engage body (JSON, out of its form):
// each people update becomes an event "$set" (see above). Errors:
// *BodyError, *KeyError, ErrNoEvents.
func DecodeMixpanelEngage(body []byte, opt Options) (*Batch, error) {
	return decodeMixpanelEach(body, opt, false, "a people update", func(bd *builder, i int, m *fastjson.Object) error {
		if err := bd.key(str(m.Get("$token"))); err != nil {
			return err
		}
		id := truncateID(strings.TrimPrefix(str(m.Get("$distinct_id")), "$device:"))
		if id == "" {
			bd.invalid(i, "$distinct_id", "missing $distinct_id")
			return nil
		}
		ts, clientTime, err := bd.mixpanelTime(m.Get("$time"))
		if err != nil {
			bd.invalid(i, "$time", "want epoch seconds or milliseconds: "+err.Error())
			return nil
		}
		e := bd.add(i, event.Event{UserID: id, Name: "$set", Time: ts,
			InsertID: derivedInsertID(bd.b.Key, id, "$set", clientTime, m)})
		// At one instant the operations apply in this order
		// (docs/sdks.md, "What is mapped how"): $delete, $unset, $set, $set_once, $add.
		if m.Get("$delete") != nil {
			bd.userDelete(e)
		}
		if v := m.Get("$unset"); v != nil {
			bd.userOp(e, ingest.UserUnset, bd.unsetNames(i, "$unset", v))
		}
		bd.users(e, setProps(object(m.Get("$set"))), false)
		bd.users(e, setProps(object(m.Get("$set_once"))), true)
		if v := m.Get("$add"); v != nil {
			bd.userOp(e, ingest.UserAdd, bd.addNumbers(i, "$add", v))
		}
		var ops []string
		m.Visit(func(k []byte, _ *fastjson.Value) {
			switch string(k) {
			case "$set", "$set_once", "$unset", "$add", "$delete", "$token", "$distinct_id", "$time", "$ip", "$ignore_time", "$ignore_alias":
			default:
				ops = append(ops, string(k))
			}
		})
		slices.Sort(ops)
		for _, k := range ops {
			bd.dropped(i, k, k+" is not applied yet (docs/sdks.md)")
		}
		return nil
	})
}

// DecodeMixpanelGroups decodes a /groups body (JSON, out of its form):
// group profile updates ({"$token", "$group_key", "$group_id", "$set"…})
// name no user, so none is stored; each is listed in Dropped, and the
// batch carries the key so that the request is authenticated and
// answered. Errors: *BodyError, *KeyError, ErrNoEvents.
func DecodeMixpanelGroups(body []byte, opt Options) (*Batch, error) {
	return decodeMixpanelEach(body, opt, false, "a group update", func(bd *builder, i int, m *fastjson.Object) error {
		if err := bd.key(str(m.Get("$token"))); err != nil {
			return err
		}
		bd.dropped(i, "$group_id", "group profile updates are not stored (docs/sdks.md)")
		return nil
	})
}

// decodeMixpanelEach parses a Mixpanel body (mixpanelMessages), checks
// opt.Key, and hands each message that is an object to each (checking
// its own key, what names the messages), listing the others invalid.
func decodeMixpanelEach(body []byte, opt Options, ndjson bool, what string, each func(bd *builder, i int, m *fastjson.Object) error) (*Batch, error) {
	msgs, release, err := mixpanelMessages(body, ndjson)
	if err != nil {
		return nil, err
	}
	defer release()
	if len(msgs) == 0 {
		return nil, ErrNoEvents
	}
	bd := &builder{b: &Batch{Total: len(msgs)}, opt: opt}
	if err := bd.key(opt.Key); err != nil {
		return nil, err
	}
	for i, v := range msgs {
		m := object(v)
		if m == nil {
			bd.invalid(i, "", what+" is not a JSON object")
			continue
		}
		if err := each(bd, i, m); err != nil {
			return nil, err
		}
	}
	return bd.b, nil
}
