package capture

import (
	"slices"
	"strings"

	"github.com/valyala/fastjson"

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
	root, release, err := parse(body, "Segment's JSON")
	if err != nil {
		return nil, err
	}
	defer release()
	env := object(root)
	if env == nil {
		return nil, &BodyError{Msg: "the body is not a Segment batch or message: want a JSON object"}
	}
	msgs := []*fastjson.Value{root}
	var batchContext *fastjson.Object
	sentAt := str(env.Get("sentAt"))
	if typ == "" {
		b := env.Get("batch")
		if b == nil || b.Type() != fastjson.TypeArray {
			return nil, &BodyError{Msg: "the body is not a Segment batch: want {\"batch\": [...]}"}
		}
		msgs, _ = b.Array()
		batchContext = object(env.Get("context"))
	}
	if len(msgs) == 0 {
		return nil, ErrNoEvents
	}
	bd := &builder{b: &Batch{Total: len(msgs)}, opt: opt}
	for _, k := range []string{opt.Key, str(env.Get("writeKey"))} {
		if err := bd.key(k); err != nil {
			return nil, err
		}
	}
	for i, m := range msgs {
		o := object(m)
		if o == nil {
			bd.invalid(i, "", "a message is not a JSON object")
			continue
		}
		mtyp := str(o.Get("type"))
		if mtyp == "" {
			mtyp = typ
		}
		at := sentAt
		if s := str(o.Get("sentAt")); s != "" {
			at = s
		}
		if err := bd.segmentMessage(i, o, mtyp, batchContext, at); err != nil {
			return nil, err
		}
	}
	return bd.b, nil
}

// segmentMessage adds message i of the request, of type typ.
func (bd *builder) segmentMessage(i int, m *fastjson.Object, typ string, batchContext *fastjson.Object, sentAt string) error {
	if err := bd.key(str(m.Get("writeKey"))); err != nil {
		return err
	}
	user, anon := truncateID(str(m.Get("userId"))), truncateID(str(m.Get("anonymousId")))
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
	previous := truncateID(str(m.Get("previousId")))
	switch typ {
	case "track":
		if name = str(m.Get("event")); name == "" {
			bd.invalid(i, "event", "missing event name of a track call")
			return nil
		}
	case "page", "screen":
		name = "$pageview"
		if typ == "screen" {
			name = "$screen"
		}
		for _, f := range [...]string{"name", "category"} {
			if v := m.Get(f); v != nil {
				if val, ok := value(v); ok {
					ps = append(ps, event.Prop{Name: f, Value: val})
				}
			}
		}
	case "identify":
		name = "$identify"
		if user != "" && anon != "" {
			ps = append(ps, event.Prop{Name: "$anon_distinct_id", Value: event.String(anon)})
		}
	case "alias":
		name = "$create_alias"
		if user == "" || previous == "" {
			bd.invalid(i, "previousId", "an alias call needs userId and previousId")
			return nil
		}
		ps = append(ps, event.Prop{Name: "alias", Value: event.String(previous)})
	case "group":
		name = "$groupidentify"
		if v := m.Get("groupId"); v != nil {
			if val, ok := value(v); ok {
				ps = append(ps, event.Prop{Name: "$group_key", Value: val})
			}
		}
		if t := object(m.Get("traits")); t != nil && t.Len() > 0 {
			if val, ok := value(m.Get("traits")); ok {
				ps = append(ps, event.Prop{Name: "$group_set", Value: val})
			}
		}
	default:
		bd.invalid(i, "type", "unknown message type "+event.Quote(typ)+": want track, identify, page, screen, group or alias")
		return nil
	}
	ts, clientTime, ok := bd.segmentTime(i, m, sentAt)
	if !ok {
		return nil
	}
	properties := object(m.Get("properties"))
	fixed := len(ps)
	ps = props(ps, properties, func(k string) bool { return hasProp(ps[:fixed], k) })
	ctx := object(m.Get("context"))
	ps = flattenContexts(ps, batchContext, ctx)
	bd.userAgent(&ps, str(get(ctx, "userAgent")))
	if !hasProp(ps, "$browser") && batchContext != nil {
		bd.userAgent(&ps, str(batchContext.Get("userAgent")))
	}
	insertID := str(m.Get("messageId"))
	if insertID == "" {
		insertID = derivedInsertID(bd.b.Key, id, name, clientTime, properties)
	}
	e := bd.add(i, event.Event{UserID: id, Name: name, Time: ts, InsertID: insertID, Props: ps})
	if typ == "identify" {
		bd.users(e, setProps(object(m.Get("traits"))), false)
	}
	switch {
	case typ == "alias":
		bd.op(e, identity.Alias, user, previous)
	case user != "" && anon != "" && user != anon:
		bd.op(e, identity.Identify, user, anon)
	case typ == "identify" && user != "":
		bd.op(e, identity.Identify, user, user)
	}
	return nil
}

// flattenContexts appends the batch's context and the message's, the
// message's value winning on a path in both, as context.* properties.
func flattenContexts(ps []event.Prop, batch, msg *fastjson.Object) []event.Prop {
	if batch == nil {
		return flatten(ps, msg, "context.")
	}
	from := len(ps)
	ps = flatten(ps, msg, "context.")
	own := len(ps)
	ps = flatten(ps, batch, "context.")
	ps = append(ps[:own], slices.DeleteFunc(ps[own:], func(p event.Prop) bool { return hasProp(ps[from:own], p.Name) })...)
	slices.SortStableFunc(ps[from:], func(a, b event.Prop) int { return strings.Compare(a.Name, b.Name) })
	return ps
}

// segmentTime returns message i's timestamp and its client spelling, or
// records it invalid.
func (bd *builder) segmentTime(i int, m *fastjson.Object, sentAt string) (int64, string, bool) {
	if s := str(m.Get("timestamp")); s != "" {
		us, err := isoTime(s)
		if err != nil {
			bd.invalid(i, "timestamp", err.Error())
			return 0, "", false
		}
		return us, s, true
	}
	if s := str(m.Get("originalTimestamp")); s != "" {
		us, err := isoTime(s)
		if err != nil {
			bd.invalid(i, "originalTimestamp", err.Error())
			return 0, "", false
		}
		if sent, err := isoTime(sentAt); err == nil {
			us += skewShift(bd.opt.Now, sent, bd.opt.skew())
		}
		return us, s, true
	}
	return bd.opt.Now, "", true
}
