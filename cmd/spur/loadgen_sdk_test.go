package main

import (
	"net/url"
	"testing"

	"github.com/spurdb/spur/capture"
	"github.com/spurdb/spur/event"
)

// TestSDKEncoders: loadgen's bodies of each protocol decode (package
// capture) to the events, user properties and identity operations they
// were made from (user properties where the protocol sends them with
// events: not Segment's track calls, not Mixpanel's /track).
func TestSDKEncoders(t *testing.T) {
	t0 := int64(1763632800123000)
	evs := []event.Event{
		{UserID: "user-1", Name: "install", Time: t0, InsertID: "i-1", Props: []event.Prop{{Name: "platform", Value: event.String("ios")}, {Name: "n", Value: event.Int(3)}}},
		// As loadgen makes them (loadWorker.make).
		{UserID: "user-1", Name: "$identify", Time: t0 + 1000, InsertID: "i-2", Props: []event.Prop{{Name: "$anon_distinct_id", Value: event.String("anon-user-1")}}},
	}
	set := []event.Prop{{Name: "plan", Value: event.String("pro")}}
	for _, proto := range loadProtocols[1:] {
		e := sdkEncoder{proto: proto, key: "k"}
		body := e.begin(nil)
		body = e.event(body, &evs[0], set, nil, "")
		body = e.event(body, &evs[1], nil, nil, "anon-user-1")
		body = e.end(body)
		opt := capture.Options{Now: t0, Key: "k"}
		var b *capture.Batch
		var err error
		switch proto {
		case "posthog":
			b, err = capture.DecodePostHog(body, opt, false)
		case "segment":
			b, err = capture.DecodeSegment(body, opt, "")
		case "amplitude":
			b, err = capture.DecodeAmplitude(body, opt)
		case "mixpanel":
			form, _ := url.ParseQuery(string(body))
			b, err = capture.DecodeMixpanel([]byte(form.Get("data")), opt, false)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", proto, err, body)
		}
		if len(b.Events) != 2 || len(b.Invalid) != 0 || b.Key != "k" {
			t.Fatalf("%s: %+v\n%s", proto, b, body)
		}
		for i, ev := range b.Events {
			if ev.UserID != evs[i].UserID || ev.Name != evs[i].Name || ev.Time != evs[i].Time || ev.InsertID != evs[i].InsertID {
				t.Errorf("%s event %d: %+v, want %+v", proto, i, ev, evs[i])
			}
		}
		if len(b.Ops) != 1 || b.Ops[0].Op.T != "user-1" || b.Ops[0].Op.O != "anon-user-1" {
			t.Errorf("%s: ops %+v", proto, b.Ops)
		}
		if proto != "segment" && proto != "mixpanel" && (len(b.Users) != 1 || b.Users[0].Props[0].Name != "plan") {
			t.Errorf("%s: users %+v", proto, b.Users)
		}
	}
}
