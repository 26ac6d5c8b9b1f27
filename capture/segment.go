package capture

import (
	"encoding/json"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
)

// Segment's Tracking API (segmentio/segment-docs: http-api/index.md):
// /v1/batch takes {"batch": [message…], "context"?, "integrations"?,
// "writeKey"?, "sentAt"?}; /v1/track, identify, page, screen, group, alias
// and analytics.js's one-letter t i p s g a take one message (its type
// from the path when the message has none). Mapping
// (docs/sdks.md, "What is mapped how"): the distinct id is userId when set, else
// anonymousId; messageId is the insert id (derived when absent); track →
// its event, page → $pageview and screen → $screen (with name and
// category properties), identify → $identify with traits as user
// properties (set) and $anon_distinct_id, alias → $create_alias with
// alias (previousId), group → $groupidentify
// ($group_key, $group_set); context (batch-level first, the message's
// over it) as context.* properties; context.userAgent derives $browser,
// $os, $device_type. Identity (docs/identity.md §2): any message with
// both userId and anonymousId is identify(userId, anonymousId); identify
// with userId only marks it identified; alias is alias(userId,
// previousId). Timestamps: "timestamp"; else "originalTimestamp", shifted
// by receipt − sentAt only when that is over Options.MaxClockSkew; else
// the receipt time.

// segmentMessage is one Segment message.
type segmentMessage struct {
	Type              string         `json:"type"`
	Event             string         `json:"event"`
	UserID            any            `json:"userId"`
	AnonymousID       any            `json:"anonymousId"`
	PreviousID        any            `json:"previousId"`
	GroupID           any            `json:"groupId"`
	Name              any            `json:"name"`
	Category          any            `json:"category"`
	Properties        map[string]any `json:"properties"`
	Traits            map[string]any `json:"traits"`
	Context           map[string]any `json:"context"`
	Timestamp         string         `json:"timestamp"`
	OriginalTimestamp string         `json:"originalTimestamp"`
	SentAt            string         `json:"sentAt"`
	MessageID         any            `json:"messageId"`
	WriteKey          string         `json:"writeKey"`
}

// segmentBatch is /v1/batch's envelope.
type segmentBatch struct {
	Batch    []json.RawMessage `json:"batch"`
	Context  map[string]any    `json:"context"`
	WriteKey string            `json:"writeKey"`
	SentAt   string            `json:"sentAt"`
}

// SegmentTypes maps Segment's single-message paths (under /v1/) to their
// message type; "batch" and "b" take a batch.
var SegmentTypes = map[string]string{
	"track": "track", "identify": "identify", "page": "page", "screen": "screen", "group": "group", "alias": "alias",
	"t": "track", "i": "identify", "p": "page", "s": "screen", "g": "group", "a": "alias",
}

// DecodeSegment decodes a Segment body: a batch when typ is "", else one
// message of type typ (SegmentTypes). opt.Key is the Basic-auth user.
// Errors: *BodyError, *KeyError, ErrNoEvents.
func DecodeSegment(body []byte, opt Options, typ string) (*Batch, error) {
	var env segmentBatch
	var raws []json.RawMessage
	if typ == "" {
		if err := decodeJSON(body, &env, "a Segment batch {\"batch\": [...]}"); err != nil {
			return nil, err
		}
		raws = env.Batch
	} else {
		if firstByte(body) != '{' {
			return nil, &BodyError{Msg: "the body is not a Segment message: want a JSON object"}
		}
		raws = []json.RawMessage{body}
	}
	if len(raws) == 0 {
		return nil, ErrNoEvents
	}
	bd := &builder{b: &Batch{Total: len(raws)}, opt: opt}
	for _, k := range []string{opt.Key, env.WriteKey} {
		if err := bd.key(k); err != nil {
			return nil, err
		}
	}
	for i, raw := range raws {
		var m segmentMessage
		if err := decodeJSON(raw, &m, "a Segment message object"); err != nil {
			bd.invalid(i, "", err.Error())
			continue
		}
		if m.Type == "" {
			m.Type = typ
		}
		sentAt := m.SentAt
		if sentAt == "" {
			sentAt = env.SentAt
		}
		if err := bd.segmentMessage(i, &m, env.Context, sentAt); err != nil {
			return nil, err
		}
	}
	return bd.b, nil
}

// segmentMessage adds message i of the request.
func (bd *builder) segmentMessage(i int, m *segmentMessage, batchContext map[string]any, sentAt string) error {
	if err := bd.key(m.WriteKey); err != nil {
		return err
	}
	user, anon := truncateID(str(m.UserID)), truncateID(str(m.AnonymousID))
	id := user
	if id == "" {
		id = anon
	}
	if id == "" {
		bd.invalid(i, "userId", "missing userId and anonymousId: a message needs one")
		return nil
	}
	var name string
	var ps []event.Prop
	switch m.Type {
	case "track":
		if name = m.Event; name == "" {
			bd.invalid(i, "event", "missing event name of a track call")
			return nil
		}
	case "page", "screen":
		name = "$pageview"
		if m.Type == "screen" {
			name = "$screen"
		}
		for _, f := range [...]struct {
			n string
			v any
		}{{"name", m.Name}, {"category", m.Category}} {
			if v, ok := value(f.v); ok {
				ps = append(ps, event.Prop{Name: f.n, Value: v})
			}
		}
	case "identify":
		name = "$identify"
		if user != "" && anon != "" {
			ps = append(ps, event.Prop{Name: "$anon_distinct_id", Value: event.String(anon)})
		}
	case "alias":
		name = "$create_alias"
		if user == "" || str(m.PreviousID) == "" {
			bd.invalid(i, "previousId", "an alias call needs userId and previousId")
			return nil
		}
		ps = append(ps, event.Prop{Name: "alias", Value: event.String(truncateID(str(m.PreviousID)))})
	case "group":
		name = "$groupidentify"
		if v, ok := value(m.GroupID); ok {
			ps = append(ps, event.Prop{Name: "$group_key", Value: v})
		}
		if len(m.Traits) > 0 {
			if v, ok := value(m.Traits); ok {
				ps = append(ps, event.Prop{Name: "$group_set", Value: v})
			}
		}
	default:
		bd.invalid(i, "type", "unknown message type "+event.Quote(m.Type)+": want track, identify, page, screen, group or alias")
		return nil
	}
	ts, clientTime, ok := bd.segmentTime(i, m, sentAt)
	if !ok {
		return nil
	}
	ps = props(ps, m.Properties, "", func(k string) bool { return hasProp(ps, k) })
	ctx := mergeMaps(batchContext, m.Context)
	ps = flatten(ps, ctx, "context.")
	bd.userAgent(&ps, str(ctx["userAgent"]))
	insertID := str(m.MessageID)
	if insertID == "" {
		insertID = derivedInsertID(bd.b.Key, id, name, clientTime, m.Properties)
	}
	e := bd.add(i, event.Event{UserID: id, Name: name, Time: ts, InsertID: insertID, Props: ps})
	if m.Type == "identify" {
		bd.users(e, props(nil, m.Traits, "", nil), false)
	}
	switch {
	case m.Type == "alias":
		bd.op(e, identity.Alias, user, truncateID(str(m.PreviousID)))
	case user != "" && anon != "" && user != anon:
		bd.op(e, identity.Identify, user, anon)
	case m.Type == "identify" && user != "":
		bd.op(e, identity.Identify, user, user)
	}
	return nil
}

// segmentTime returns message i's timestamp and its client spelling, or
// records it invalid.
func (bd *builder) segmentTime(i int, m *segmentMessage, sentAt string) (int64, string, bool) {
	if m.Timestamp != "" {
		us, err := isoTime(m.Timestamp)
		if err != nil {
			bd.invalid(i, "timestamp", err.Error())
			return 0, "", false
		}
		return us, m.Timestamp, true
	}
	if m.OriginalTimestamp != "" {
		us, err := isoTime(m.OriginalTimestamp)
		if err != nil {
			bd.invalid(i, "originalTimestamp", err.Error())
			return 0, "", false
		}
		if sent, err := isoTime(sentAt); err == nil {
			us += skewShift(bd.opt.Now, sent, bd.opt.skew())
		}
		return us, m.OriginalTimestamp, true
	}
	return bd.opt.Now, "", true
}
