package capture

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
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

// mixpanelEvent is one /track or /import event.
type mixpanelEvent struct {
	Event      string         `json:"event"`
	Properties map[string]any `json:"properties"`
}

// mixpanelReserved are the event properties that are not stored.
var mixpanelReserved = map[string]bool{"token": true, "distinct_id": true, "time": true, "$insert_id": true}

// MixpanelData returns the JSON of a Mixpanel form body's data field
// (plain JSON, or base64 of it, as the libraries send it), or the body
// itself when it is not a form. Errors: *BodyError.
func MixpanelData(body []byte, form func(string) string) ([]byte, error) {
	d := form("data")
	if d == "" {
		return body, nil
	}
	if c := firstByte([]byte(d)); c == '{' || c == '[' {
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

// mixpanelRaws splits a Mixpanel body into its messages: an object, an
// array of them, or (ndjson) one per line.
func mixpanelRaws(body []byte, ndjson bool) ([]json.RawMessage, error) {
	switch firstByte(body) {
	case '[':
		var raws []json.RawMessage
		if err := decodeJSON(body, &raws, "a JSON array of Mixpanel events"); err != nil {
			return nil, err
		}
		return raws, nil
	case '{':
		if !ndjson {
			if !json.Valid(body) {
				return nil, &BodyError{Msg: "the body is not a JSON object or array of Mixpanel events"}
			}
			return []json.RawMessage{json.RawMessage(body)}, nil
		}
		var raws []json.RawMessage
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, len(body)+1)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				raws = append(raws, json.RawMessage(line))
			}
		}
		return raws, nil
	}
	return nil, &BodyError{Msg: "the body is not Mixpanel's JSON: want an object or an array"}
}

// DecodeMixpanel decodes a /track or /import body (JSON, already taken
// out of a form by MixpanelData); /import's NDJSON with ndjson. Errors:
// *BodyError, *KeyError, ErrNoEvents.
func DecodeMixpanel(body []byte, opt Options, ndjson bool) (*Batch, error) {
	raws, err := mixpanelRaws(body, ndjson)
	if err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, ErrNoEvents
	}
	bd := &builder{b: &Batch{Total: len(raws)}, opt: opt}
	if err := bd.key(opt.Key); err != nil {
		return nil, err
	}
	for i, raw := range raws {
		var me mixpanelEvent
		if err := decodeJSON(raw, &me, "a Mixpanel event object"); err != nil {
			bd.invalid(i, "", err.Error())
			continue
		}
		if err := bd.mixpanelEvent(i, &me); err != nil {
			return nil, err
		}
	}
	return bd.b, nil
}

// mixpanelID returns the distinct id of an event's properties.
func mixpanelID(p map[string]any) (id, user, device string) {
	user, device = str(p["$user_id"]), str(p["$device_id"])
	switch {
	case user != "":
		id = user
	case device != "":
		id = device
	default:
		id = strings.TrimPrefix(str(p["distinct_id"]), "$device:")
	}
	return truncateID(id), truncateID(user), truncateID(device)
}

// mixpanelTime returns a Mixpanel time (seconds below 1e11, else ms) in
// microseconds, the receipt time when v is absent.
func (bd *builder) mixpanelTime(v any) (int64, string, error) {
	if v == nil {
		return bd.opt.Now, "", nil
	}
	n, ok := v.(json.Number)
	if !ok {
		if s, isStr := v.(string); isStr {
			n = json.Number(s)
		}
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return 0, "", err
	}
	us, err := event.EpochFloatToMicros(f) // seconds below 1e11, else ms (or µs)
	return us, string(n), err
}

// mixpanelEvent adds event i of the request.
func (bd *builder) mixpanelEvent(i int, me *mixpanelEvent) error {
	p := me.Properties
	if err := bd.key(str(p["token"])); err != nil {
		return err
	}
	if me.Event == "" {
		bd.invalid(i, "event", "missing event name")
		return nil
	}
	id, user, device := mixpanelID(p)
	merged, _ := p["$distinct_ids"].([]any)
	switch {
	case me.Event == "$identify" && str(p["$identified_id"]) != "":
		id = truncateID(str(p["$identified_id"]))
	case me.Event == "$merge" && id == "" && len(merged) > 0:
		id = truncateID(str(merged[0]))
	}
	if id == "" {
		bd.invalid(i, "properties.distinct_id", "missing distinct_id ($user_id, $device_id or distinct_id)")
		return nil
	}
	ts, clientTime, err := bd.mixpanelTime(p["time"])
	if err != nil {
		bd.invalid(i, "properties.time", "want epoch seconds or milliseconds: "+err.Error())
		return nil
	}
	insertID := str(p["$insert_id"])
	if insertID == "" {
		insertID = derivedInsertID(bd.b.Key, id, me.Event, clientTime, p)
	}
	ps := props(nil, p, "", func(k string) bool { return mixpanelReserved[k] })
	bd.userAgent(&ps, "")
	e := bd.add(i, event.Event{UserID: id, Name: me.Event, Time: ts, InsertID: insertID, Props: ps})
	switch me.Event {
	case "$identify":
		if anon := truncateID(str(p["$anon_id"])); anon != "" {
			bd.op(e, identity.Identify, id, anon)
		} else {
			bd.op(e, identity.Identify, id, id)
		}
	case "$create_alias":
		if o := truncateID(str(p["alias"])); o != "" {
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
	raws, err := mixpanelRaws(body, false)
	if err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, ErrNoEvents
	}
	bd := &builder{b: &Batch{Total: len(raws)}, opt: opt}
	for i, raw := range raws {
		var m map[string]any
		if err := decodeJSON(raw, &m, "a Mixpanel people update object"); err != nil {
			bd.invalid(i, "", err.Error())
			continue
		}
		if err := bd.key(str(m["$token"])); err != nil {
			return nil, err
		}
		id := truncateID(strings.TrimPrefix(str(m["$distinct_id"]), "$device:"))
		if id == "" {
			bd.invalid(i, "$distinct_id", "missing $distinct_id")
			continue
		}
		ts, clientTime, err := bd.mixpanelTime(m["$time"])
		if err != nil {
			bd.invalid(i, "$time", "want epoch seconds or milliseconds: "+err.Error())
			continue
		}
		e := bd.add(i, event.Event{UserID: id, Name: "$set", Time: ts,
			InsertID: derivedInsertID(bd.b.Key, id, "$set", clientTime, m)})
		bd.users(e, props(nil, asMap(m["$set"]), "", nil), false)
		bd.users(e, props(nil, asMap(m["$set_once"]), "", nil), true)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			switch k {
			case "$set", "$set_once", "$token", "$distinct_id", "$time", "$ip", "$ignore_time", "$ignore_alias":
			default:
				bd.dropped(i, k, k+" is not applied yet (docs/sdks.md)")
			}
		}
	}
	return bd.b, nil
}

// DecodeMixpanelGroups decodes a /groups body (JSON, out of its form):
// group profile updates ({"$token", "$group_key", "$group_id", "$set"…})
// name no user, so none is stored; each is listed in Dropped, and the
// batch carries the key so that the request is authenticated and
// answered. Errors: *BodyError, *KeyError, ErrNoEvents.
func DecodeMixpanelGroups(body []byte, opt Options) (*Batch, error) {
	raws, err := mixpanelRaws(body, false)
	if err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, ErrNoEvents
	}
	bd := &builder{b: &Batch{Total: len(raws)}, opt: opt}
	for i, raw := range raws {
		var m map[string]any
		if err := decodeJSON(raw, &m, "a Mixpanel group update object"); err != nil {
			bd.invalid(i, "", err.Error())
			continue
		}
		if err := bd.key(str(m["$token"])); err != nil {
			return nil, err
		}
		bd.dropped(i, "$group_id", "group profile updates are not stored (docs/sdks.md)")
	}
	return bd.b, nil
}
