package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/ingest"
)

// The SDK protocols `spur loadgen --protocol` speaks (docs/ingest.md §6):
// the generated events in the body shape each SDK sends, posted to its
// capture path with the key in its place, so that a protocol's path can
// be measured against the native events endpoint at the same batch size.

// loadProtocols are --protocol's values.
var loadProtocols = []string{"native", "posthog", "segment", "amplitude", "mixpanel"}

// sdkEncoder writes batches of one SDK protocol.
type sdkEncoder struct {
	proto string
	key   string // the ingest key, or the app's name under --auth none
}

// path is the capture path of the protocol, relative to --url.
func (e sdkEncoder) path() string {
	switch e.proto {
	case "posthog":
		return "ingest/posthog/batch/"
	case "segment":
		return "ingest/segment/v1/batch"
	case "amplitude":
		return "ingest/amplitude/2/httpapi"
	}
	return "ingest/mixpanel/track?verbose=1"
}

// header is the request's headers: JSON, Segment's Basic auth, a form
// for Mixpanel.
func (e sdkEncoder) header(gz bool) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	switch e.proto {
	case "segment":
		h.Set("Authorization", "Basic "+basicUser(e.key))
	case "mixpanel":
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if gz {
		h.Set("Content-Encoding", "gzip")
	}
	return h
}

// msTime reports whether the protocol sends milliseconds (the generator's
// times are rounded down to them so that --check's hashes hold).
func (e sdkEncoder) msTime() bool { return e.proto == "amplitude" || e.proto == "mixpanel" }

// begin starts a batch.
func (e sdkEncoder) begin(dst []byte) []byte {
	switch e.proto {
	case "posthog":
		return append(ingest.AppendJSONString(append(dst, `{"api_key":`...), e.key), `,"batch":[`...)
	case "segment":
		return append(dst, `{"batch":[`...)
	case "amplitude":
		return append(ingest.AppendJSONString(append(dst, `{"api_key":`...), e.key), `,"events":[`...)
	}
	return append(dst, '[')
}

// end closes a batch; Mixpanel's JSON becomes its form.
func (e sdkEncoder) end(dst []byte) []byte {
	if len(dst) > 0 && dst[len(dst)-1] == ',' {
		dst = dst[:len(dst)-1]
	}
	switch e.proto {
	case "posthog", "segment", "amplitude":
		return append(dst, "]}"...)
	}
	dst = append(dst, ']')
	return []byte("verbose=1&ip=0&data=" + url.QueryEscape(string(dst)))
}

// event appends one event and a comma: ev with its user properties (set
// and once) and, when anon is not "", the anonymous id the protocol
// carries with it ($identify events name it as the one identified).
func (e sdkEncoder) event(dst []byte, ev *event.Event, set, once []event.Prop, anon string) []byte {
	str := ingest.AppendJSONString
	obj := ingest.AppendJSONObject
	identify := ev.Name == "$identify"
	switch e.proto {
	case "posthog":
		dst = str(append(dst, `{"event":`...), ev.Name)
		dst = str(append(dst, `,"distinct_id":`...), ev.UserID)
		dst = str(append(dst, `,"uuid":`...), ev.InsertID)
		dst = append(ingest.AppendRFC3339(append(dst, `,"timestamp":"`...), ev.Time), '"')
		dst = obj(append(dst, `,"properties":`...), ev.Props)
		if len(set) > 0 {
			dst = obj(append(dst, `,"$set":`...), set)
		}
		if len(once) > 0 {
			dst = obj(append(dst, `,"$set_once":`...), once)
		}
	case "segment":
		typ := "track"
		if identify {
			typ = "identify"
		}
		dst = append(append(append(dst, `{"type":"`...), typ...), '"')
		if !identify {
			dst = str(append(dst, `,"event":`...), ev.Name)
		}
		dst = str(append(dst, `,"userId":`...), ev.UserID)
		if anon != "" {
			dst = str(append(dst, `,"anonymousId":`...), anon)
		}
		dst = str(append(dst, `,"messageId":`...), ev.InsertID)
		dst = append(ingest.AppendRFC3339(append(dst, `,"timestamp":"`...), ev.Time), '"')
		if identify {
			dst = obj(append(dst, `,"traits":`...), set)
		} else {
			dst = obj(append(dst, `,"properties":`...), ev.Props)
		}
	case "amplitude":
		dst = str(append(dst, `{"event_type":`...), ev.Name)
		dst = str(append(dst, `,"user_id":`...), ev.UserID)
		if anon != "" {
			dst = str(append(dst, `,"device_id":`...), anon)
		}
		dst = str(append(dst, `,"insert_id":`...), ev.InsertID)
		dst = strconv.AppendInt(append(dst, `,"time":`...), ev.Time/1000, 10)
		dst = obj(append(dst, `,"event_properties":`...), ev.Props)
		if len(set)+len(once) > 0 {
			dst = obj(append(dst, `,"user_properties":{"$set":`...), set)
			dst = append(obj(append(dst, `,"$setOnce":`...), once), '}')
		}
	default: // mixpanel
		dst = str(append(dst, `{"event":`...), ev.Name)
		dst = str(append(dst, `,"properties":{"token":`...), e.key)
		if identify {
			dst = str(append(dst, `,"$identified_id":`...), ev.UserID)
			dst = str(append(dst, `,"$anon_id":`...), anon)
		} else {
			dst = str(append(dst, `,"distinct_id":`...), ev.UserID)
			if anon != "" {
				dst = str(append(dst, `,"$user_id":`...), ev.UserID)
				dst = str(append(dst, `,"$device_id":`...), anon)
			}
		}
		dst = str(append(dst, `,"$insert_id":`...), ev.InsertID)
		dst = strconv.AppendInt(append(dst, `,"time":`...), ev.Time/1000, 10)
		if props := obj(nil, ev.Props); len(props) > 2 {
			dst = append(append(dst, ','), props[1:len(props)-1]...)
		}
		dst = append(dst, '}')
	}
	return append(dst, "},"...)
}

// basicUser is the Basic credentials of user key with no password,
// base64-encoded (Segment's write key).
func basicUser(key string) string { return base64.StdEncoding.EncodeToString([]byte(key + ":")) }

// accepted returns the events an answer of the protocol acknowledges for
// a batch of n: all of them on a 2xx (Amplitude says how many).
func (e sdkEncoder) accepted(body []byte, n int) (int, error) {
	if e.proto != "amplitude" {
		return n, nil
	}
	var ans struct {
		Code     int `json:"code"`
		Ingested int `json:"events_ingested"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.Code != 200 {
		return 0, fmt.Errorf("unreadable Amplitude answer %.200q", body)
	}
	return ans.Ingested, nil
}
