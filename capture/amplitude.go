package capture

import (
	"encoding/json"
	"strconv"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
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

// amplitudeBody is the request body.
type amplitudeBody struct {
	APIKey  string            `json:"api_key"`
	Events  []json.RawMessage `json:"events"`
	Options struct {
		MinIDLength *int `json:"min_id_length"`
	} `json:"options"`
}

// amplitudeReserved are the event fields that are not properties.
var amplitudeReserved = map[string]bool{
	"event_type": true, "user_id": true, "device_id": true, "time": true, "insert_id": true,
	"event_properties": true, "user_properties": true, "group_properties": true,
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
	var b amplitudeBody
	if err := decodeJSON(body, &b, "an Amplitude upload {\"api_key\", \"events\": [...]}"); err != nil {
		return nil, err
	}
	if len(b.Events) == 0 {
		return nil, ErrNoEvents
	}
	minLen := AmplitudeDefaultMinIDLength
	if b.Options.MinIDLength != nil {
		minLen = *b.Options.MinIDLength
	}
	bd := &builder{b: &Batch{Key: b.APIKey, Total: len(b.Events)}, opt: opt}
	for i, raw := range b.Events {
		var m map[string]any
		if err := decodeJSON(raw, &m, "an Amplitude event object"); err != nil {
			bd.invalid(i, "invalid:event", err.Error())
			continue
		}
		bd.amplitudeEvent(i, m, minLen)
	}
	return bd.b, nil
}

// amplitudeEvent adds event i of the request.
func (bd *builder) amplitudeEvent(i int, m map[string]any, minLen int) {
	name := str(m["event_type"])
	if name == "" {
		bd.invalid(i, "missing:event_type", "missing event_type")
		return
	}
	user, device := str(m["user_id"]), str(m["device_id"])
	if user == "" && device == "" {
		bd.invalid(i, "missing:user_id", "an event needs user_id or device_id")
		return
	}
	for _, f := range [...]struct{ n, v string }{{"user_id", user}, {"device_id", device}} {
		if f.v != "" && len([]rune(f.v)) < minLen {
			bd.invalid(i, "id_length:"+f.n, f.n+" is shorter than min_id_length "+strconv.Itoa(minLen))
			return
		}
	}
	id := truncateID(user)
	if id == "" {
		id = truncateID(device)
	}
	ts, clientTime := bd.opt.Now, ""
	if t, ok := m["time"]; ok && t != nil {
		n, isNum := t.(json.Number)
		ms, err := strconv.ParseInt(string(n), 10, 64)
		if !isNum || err != nil {
			bd.invalid(i, "invalid:time", "time must be an integer of epoch milliseconds")
			return
		}
		if ts, err = event.EpochToMicros(ms); err != nil || ms < 1e11 {
			bd.invalid(i, "invalid:time", "time must be epoch milliseconds")
			return
		}
		clientTime = string(n)
	}
	ep := asMap(m["event_properties"])
	ps := props(nil, ep, "", nil)
	ps = props(ps, m, "", func(k string) bool { return amplitudeReserved[k] || hasProp(ps, k) })
	insertID := str(m["insert_id"])
	if insertID == "" {
		insertID = derivedInsertID(bd.b.Key, id, name, clientTime, ep)
	}
	e := bd.add(i, event.Event{UserID: id, Name: name, Time: ts, InsertID: insertID, Props: ps})
	var set, once map[string]any
	for k, v := range asMap(m["user_properties"]) {
		switch k {
		case "$set":
			set = mergeMaps(set, asMap(v))
		case "$setOnce":
			once = asMap(v)
		default:
			if len(k) > 0 && k[0] == '$' {
				bd.dropped(i, "user_properties."+k, k+" is not applied yet (docs/sdks.md)")
				continue
			}
			set = mergeMaps(set, map[string]any{k: v})
		}
	}
	bd.users(e, props(nil, set, "", nil), false)
	bd.users(e, props(nil, once, "", nil), true)
	if user != "" && device != "" && user != device {
		bd.op(e, identity.Identify, id, truncateID(device))
	}
}
