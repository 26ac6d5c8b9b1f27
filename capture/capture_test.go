package capture

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// receipt is the receive time of the golden requests: 100 s after the
// posthog-python batch's sent_at, so that its clock looks 100 s slow.
var receipt = time.Date(2026, 11, 22, 5, 48, 0, 974275000, time.UTC).UnixMicro()

// render writes a Batch as text, one line per event, user write, op and
// problem, for golden comparison.
func render(b *Batch) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "key %q total %d\n", b.Key, b.Total)
	for i, ev := range b.Events {
		fmt.Fprintf(&sb, "event %d (msg %d) user=%q name=%q time=%s insert=%q\n", i, b.Index[i], ev.UserID, ev.Name,
			time.UnixMicro(ev.Time).UTC().Format(time.RFC3339Nano), ev.InsertID)
		for _, p := range ev.Props {
			fmt.Fprintf(&sb, "  %s = %s %q\n", p.Name, p.Value.Type, p.Value.String())
		}
	}
	for _, u := range b.Users {
		if u.Op.Simple() {
			fmt.Fprintf(&sb, "users of event %d once=%v:", u.Event, u.Once)
		} else {
			fmt.Fprintf(&sb, "users of event %d op=%v:", u.Event, u.Op)
		}
		for _, p := range u.Props {
			fmt.Fprintf(&sb, " %s=%q", p.Name, p.Value.String())
		}
		sb.WriteString("\n")
	}
	kinds := map[identity.Kind]string{identity.Identify: "identify", identity.Alias: "alias", identity.Merge: "merge"}
	for _, o := range b.Ops {
		fmt.Fprintf(&sb, "op of event %d: %s(%q, %q)\n", o.Event, kinds[o.Op.Kind], o.Op.T, o.Op.O)
	}
	for _, p := range b.Invalid {
		fmt.Fprintf(&sb, "invalid msg %d %s: %s\n", p.Index, p.Field, p.Message)
	}
	for _, p := range b.Dropped {
		fmt.Fprintf(&sb, "dropped msg %d %s: %s\n", p.Index, p.Field, p.Message)
	}
	return sb.String()
}

// TestGolden decodes bodies the real clients sent (captured in
// ../notes/ingest-protocols.md, ids and times made fixed) and compares
// the batches with testdata/*.golden (go test -update rewrites them).
func TestGolden(t *testing.T) {
	opt := Options{Now: receipt, UserAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"}
	cases := []struct {
		file   string
		decode func([]byte) (*Batch, error)
	}{
		{"posthog-python.json", func(b []byte) (*Batch, error) { return DecodePostHog(b, Options{Now: receipt}, false) }},
		{"posthog-go.json", func(b []byte) (*Batch, error) { return DecodePostHog(b, Options{Now: receipt}, false) }},
		{"posthog-js.json", func(b []byte) (*Batch, error) { return DecodePostHog(b, opt, false) }},
		{"segment-python.json", func(b []byte) (*Batch, error) {
			return DecodeSegment(b, Options{Now: receipt, Key: "seg_write_key"}, "")
		}},
		{"amplitude-python.json", func(b []byte) (*Batch, error) { return DecodeAmplitude(b, Options{Now: receipt}) }},
		{"mixpanel-track.json", func(b []byte) (*Batch, error) { return DecodeMixpanel(b, Options{Now: receipt}, false) }},
		{"mixpanel-engage.json", func(b []byte) (*Batch, error) { return DecodeMixpanelEngage(b, Options{Now: receipt}) }},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.decode(body)
			if err != nil {
				t.Fatal(err)
			}
			got := render(b)
			golden := filepath.Join("testdata", strings.TrimSuffix(c.file, ".json")+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("decoded %s:\n%s\nwant:\n%s", c.file, got, want)
			}
		})
	}
}

// TestKeys: a request's keys must agree (PostHog's MultipleTokensError);
// the batch key, the event's and properties.token all count.
func TestKeys(t *testing.T) {
	for _, c := range []struct {
		body string
		key  string
		err  bool
	}{
		{`{"api_key":"a","batch":[{"event":"e","distinct_id":"u"}]}`, "a", false},
		{`{"api_key":"a","batch":[{"event":"e","distinct_id":"u","properties":{"token":"a"}}]}`, "a", false},
		{`{"api_key":"a","batch":[{"event":"e","distinct_id":"u","properties":{"token":"b"}}]}`, "", true},
		{`[{"event":"e","distinct_id":"u","properties":{"token":"a"}},{"event":"e","distinct_id":"u","token":"b"}]`, "", true},
		{`[{"event":"e","distinct_id":"u"}]`, "", false},
	} {
		b, err := DecodePostHog([]byte(c.body), Options{Now: receipt}, false)
		var ke *KeyError
		if c.err {
			if !errorsAs(err, &ke) {
				t.Errorf("%s: %v, want a KeyError", c.body, err)
			}
			continue
		}
		if err != nil || b.Key != c.key {
			t.Errorf("%s: key %q, %v; want %q", c.body, b.Key, err, c.key)
		}
	}
	// Segment: the Basic-auth user and the body's writeKey must agree.
	if _, err := DecodeSegment([]byte(`{"writeKey":"b","batch":[{"type":"track","event":"e","userId":"u"}]}`), Options{Key: "a"}, ""); err == nil {
		t.Error("Segment: Basic-auth user a and writeKey b: no error")
	}
}

func errorsAs(err error, ke **KeyError) bool {
	k, ok := err.(*KeyError)
	if ok {
		*ke = k
	}
	return ok
}

// TestBodies: bodies that are not the protocol's JSON are BodyErrors,
// empty batches ErrNoEvents; one bad message among good ones is listed,
// the others kept.
func TestBodies(t *testing.T) {
	decoders := map[string]func([]byte) (*Batch, error){
		"posthog":   func(b []byte) (*Batch, error) { return DecodePostHog(b, Options{Now: receipt}, false) },
		"segment":   func(b []byte) (*Batch, error) { return DecodeSegment(b, Options{Now: receipt}, "") },
		"amplitude": func(b []byte) (*Batch, error) { return DecodeAmplitude(b, Options{Now: receipt}) },
		"mixpanel":  func(b []byte) (*Batch, error) { return DecodeMixpanel(b, Options{Now: receipt}, false) },
		"engage":    func(b []byte) (*Batch, error) { return DecodeMixpanelEngage(b, Options{Now: receipt}) },
	}
	for name, dec := range decoders {
		for _, body := range []string{``, `{`, `[1,`, `"x"`, "\x1f\x8b\x08", `{"batch": 3}`, `{} {}`} {
			if strings.HasPrefix(body, `{"batch"`) && (name == "mixpanel" || name == "engage") {
				continue // an object: a message without its fields (listed invalid)
			}
			if _, err := dec([]byte(body)); err == nil {
				t.Errorf("%s %q: no error", name, body)
			}
		}
	}
	b, err := DecodePostHog([]byte(`[{"event":"a","distinct_id":"u"},{"event":"","distinct_id":"u"},{"event":"b"},7,{"event":"c","distinct_id":42,"timestamp":"x"},{"event":"d","distinct_id":42}]`), Options{Now: receipt}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Events) != 2 || b.Events[0].Name != "a" || b.Events[1].UserID != "42" || len(b.Invalid) != 4 {
		t.Fatalf("events %+v invalid %+v", b.Events, b.Invalid)
	}
	for i, want := range []int{1, 2, 3, 4} {
		if b.Invalid[i].Index != want {
			t.Errorf("invalid %d at %d, want %d", i, b.Invalid[i].Index, want)
		}
	}
}

// TestClientClock: PostHog's sent_at shifts timestamps only past
// MaxClockSkew, by whole seconds; posthog-js's offset-only events take
// their UUIDv7's time when it is close, so a resend (new offset, later
// receipt) is the same event.
func TestClientClock(t *testing.T) {
	at := func(body string, now int64) int64 {
		t.Helper()
		b, err := DecodePostHog([]byte(body), Options{Now: now}, false)
		if err != nil || len(b.Events) != 1 {
			t.Fatalf("%s: %v %+v", body, err, b)
		}
		return b.Events[0].Time
	}
	ts := "2026-11-22T05:00:00.123456Z"
	base, _ := event.ParseTime(ts, nil)
	sent := base + 5e6
	// 30 s slow: within the bound, stored as sent.
	body := fmt.Sprintf(`{"api_key":"k","sent_at":%q,"batch":[{"event":"e","distinct_id":"u","timestamp":%q}]}`,
		time.UnixMicro(sent).UTC().Format(time.RFC3339Nano), ts)
	if got := at(body, sent+30e6); got != base {
		t.Errorf("30 s skew: %d, want %d", got, base)
	}
	// 100.4 s slow: shifted by 100 s.
	if got := at(body, sent+100_400_000); got != base+100e6 {
		t.Errorf("100.4 s skew: %d, want %d", got, base+100e6)
	}
	// posthog-js: UUIDv7 of ms 0x019ac8f31c2d, offset 120 ms.
	uuidMs := int64(0x019ac8f31c2d)
	js := `[{"event":"e","distinct_id":"u","uuid":"019ac8f3-1c2d-7000-8000-00000000000a","offset":%d}]`
	first := at(fmt.Sprintf(js, 120), uuidMs*1e3+120e3+2e6)
	resend := at(fmt.Sprintf(js, 1500), uuidMs*1e3+1500e3+9e6)
	if first != uuidMs*1e3 || resend != first {
		t.Errorf("posthog-js offset events at %d and %d, want both %d", first, resend, uuidMs*1e3)
	}
	// A uuid far from receipt − offset: receipt − offset.
	far := at(fmt.Sprintf(js, 100), uuidMs*1e3+3600e6)
	if far != uuidMs*1e3+3600e6-100e3 {
		t.Errorf("far uuid: %d", far)
	}
}

// TestDerivedInsertID: posthog-go's empty uuid derives an id that is
// equal for a resend and differs for a different event; an event without
// a client timestamp gets none.
func TestDerivedInsertID(t *testing.T) {
	id := func(body string, now int64) string {
		b, err := DecodePostHog([]byte(body), Options{Now: now}, false)
		if err != nil || len(b.Events) != 1 {
			t.Fatalf("%s: %v", body, err)
		}
		return b.Events[0].InsertID
	}
	a := `{"api_key":"k","batch":[{"uuid":"","event":"e","distinct_id":"u","timestamp":"2026-11-22T05:47:52.904596284Z","properties":{"n":1,"m":[1,2]}}]}`
	b := `{"api_key":"k","batch":[{"uuid":"","event":"e","distinct_id":"u","timestamp":"2026-11-22T05:47:52.904596284Z","properties":{"m":[1,2],"n":1}}]}`
	c := `{"api_key":"k","batch":[{"uuid":"","event":"e","distinct_id":"u","timestamp":"2026-11-22T05:47:52.904596284Z","properties":{"n":2,"m":[1,2]}}]}`
	if x, y := id(a, receipt), id(b, receipt+5e6); x == "" || x != y {
		t.Errorf("resend: %q and %q", x, y)
	}
	if id(a, receipt) == id(c, receipt) {
		t.Error("different properties, equal derived ids")
	}
	if got := id(`[{"event":"e","distinct_id":"u"}]`, receipt); got != "" {
		t.Errorf("no client timestamp: derived %q", got)
	}
}

// TestSegmentIdentity: identify with only an anonymousId marks nobody
// identified; with only a userId it marks that id; any message with
// both ids links them.
func TestSegmentIdentity(t *testing.T) {
	body := `{"batch":[
		{"type":"identify","anonymousId":"a1","traits":{"x":1}},
		{"type":"identify","userId":"u1","traits":{"x":2}},
		{"type":"track","event":"e","userId":"u2","anonymousId":"a2"},
		{"type":"alias","userId":"u3","previousId":"a3"}]}`
	b, err := DecodeSegment([]byte(body), Options{Now: receipt, Key: "k"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range b.Ops {
		got = append(got, fmt.Sprintf("%d:%d(%s,%s)", o.Event, o.Op.Kind, o.Op.T, o.Op.O))
	}
	want := fmt.Sprintf("[1:%d(u1,u1) 2:%d(u2,a2) 3:%d(u3,a3)]", identity.Identify, identity.Identify, identity.Alias)
	if fmt.Sprint(got) != want {
		t.Errorf("ops %v, want %s", got, want)
	}
	if len(b.Users) != 2 || b.Users[0].Event != 0 || b.Events[0].UserID != "a1" {
		t.Errorf("users %+v", b.Users)
	}
}

// FuzzDecoders: no body makes a decoder panic, and every kept event has
// a user id and a name, and its index in range.
func FuzzDecoders(f *testing.F) {
	for _, name := range []string{"posthog-python", "posthog-go", "posthog-js", "segment-python", "amplitude-python", "mixpanel-track", "mixpanel-engage"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"batch":[{"type":"identify"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		opt := Options{Now: receipt, UserAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)"}
		for _, dec := range []func() (*Batch, error){
			func() (*Batch, error) { return DecodePostHog(body, opt, false) },
			func() (*Batch, error) { return DecodePostHog(body, opt, true) },
			func() (*Batch, error) { return DecodeSegment(body, opt, "") },
			func() (*Batch, error) { return DecodeSegment(body, opt, "track") },
			func() (*Batch, error) { return DecodeAmplitude(body, opt) },
			func() (*Batch, error) { return DecodeMixpanel(body, opt, false) },
			func() (*Batch, error) { return DecodeMixpanel(body, opt, true) },
			func() (*Batch, error) { return DecodeMixpanelEngage(body, opt) },
		} {
			b, err := dec()
			if err != nil {
				continue
			}
			if len(b.Index) != len(b.Events) {
				t.Fatalf("%d indexes for %d events", len(b.Index), len(b.Events))
			}
			for i, ev := range b.Events {
				if ev.UserID == "" || ev.Name == "" || b.Index[i] < 0 || b.Index[i] >= b.Total {
					t.Fatalf("event %d: %+v (index %d of %d)", i, ev, b.Index[i], b.Total)
				}
			}
			for _, u := range b.Users {
				if u.Event < 0 || u.Event >= len(b.Events) {
					t.Fatalf("user write of event %d of %d", u.Event, len(b.Events))
				}
			}
			for _, o := range b.Ops {
				if o.Event < 0 || o.Event >= len(b.Events) || o.Op.T == "" || o.Op.O == "" {
					t.Fatalf("op %+v of %d events", o, len(b.Events))
				}
			}
		}
	})
}

// benchBody returns a posthog-python batch of n events (the captured
// shape: seven properties, a UUID, an ISO timestamp).
func benchBody(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"api_key":"k","sent_at":"2026-11-22T05:46:20.974275+00:00","batch":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"event":"page_view","distinct_id":"user-%d","uuid":"0190b2a4-0000-7000-8000-%012d","timestamp":"2026-11-22T05:46:20.873119+00:00",`+
			`"properties":{"path":"/home/%d","plan":"free","n":%d,"$lib":"posthog-python","$lib_version":"7.91.1","$geoip_disable":true,"price":9.99}}`, i%100, i, i%7, i)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// BenchmarkDecodePostHog: a 1,000-event posthog-python batch; events/s
// reported.
func BenchmarkDecodePostHog(b *testing.B) {
	body := benchBody(1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodePostHog(body, Options{Now: receipt}, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "events/s")
}

// TestUserOps: the user property operations of each protocol become
// writes of their operation, in the order the decoder documents (what
// applies at one instant, docs/sdks.md "What is mapped how"); list operations and bad
// operands are listed in Dropped.
func TestUserOps(t *testing.T) {
	opt := Options{Now: receipt}
	for _, c := range []struct {
		name   string
		decode func([]byte) (*Batch, error)
		body   string
		want   []string
	}{
		{"posthog", func(b []byte) (*Batch, error) { return DecodePostHog(b, opt, false) },
			`{"api_key": "k", "batch": [{"event": "e", "distinct_id": "u1", "timestamp": "2026-11-22T05:00:00Z",
			  "$unset": ["b"], "properties": {"$set": {"a": 1}, "$unset": ["c", "a", "c", 7]}}]}`,
			[]string{`users of event 0 once=false: a="1"`, `users of event 0 op=unset: b="(none)"`, `users of event 0 op=unset: a="(none)" c="(none)"`,
				`dropped msg 0 properties.$unset: want property names (strings), found 7`}},
		{"amplitude", func(b []byte) (*Batch, error) { return DecodeAmplitude(b, opt) },
			`{"api_key": "k", "events": [{"event_type": "e", "user_id": "user-1", "time": 1763632800000,
			  "user_properties": {"$clearAll": "-", "$unset": {"z": "-"}, "plain": "p", "$setOnce": {"o": 1}, "$add": {"n": 1}, "$append": {"l": 2}}}]}`,
			[]string{`users of event 0 op=delete:`, `users of event 0 op=unset: z="(none)"`, `users of event 0 once=false: plain="p"`,
				`users of event 0 once=true: o="1"`, `users of event 0 op=add: n="1"`,
				`dropped msg 0 user_properties.$append: $append is not applied yet (docs/sdks.md)`}},
		{"mixpanel", func(b []byte) (*Batch, error) { return DecodeMixpanelEngage(b, opt) },
			`[{"$token": "k", "$distinct_id": "u1", "$time": 1795326463000, "$delete": ""},
			  {"$token": "k", "$distinct_id": "u1", "$time": 1795326463000, "$unset": ["x", "y"]},
			  {"$token": "k", "$distinct_id": "u1", "$time": 1795326463000, "$add": {"n": 2, "m": -0.5, "s": "3"}},
			  {"$token": "k", "$distinct_id": "u1", "$time": 1795326463000, "$union": {"l": [1]}}]`,
			[]string{`users of event 0 op=delete:`, `users of event 1 op=unset: x="(none)" y="(none)"`, `users of event 2 op=add: m="-0.5" n="2"`,
				`dropped msg 2 $add.s: an add needs a number, found "3"`, `dropped msg 3 $union: $union is not applied yet (docs/sdks.md)`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := c.decode([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(render(b), "\n") {
				if strings.HasPrefix(l, "users ") || strings.HasPrefix(l, "dropped ") || strings.HasPrefix(l, "invalid ") {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
