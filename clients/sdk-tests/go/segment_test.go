package sdktests

import (
	"fmt"
	"io"
	"testing"
	"time"

	analytics "gopkg.in/segmentio/analytics-go.v3"
)

// segmentCallback feeds an acks from analytics-go's Callback.
type segmentCallback struct{ *acks }

func (c segmentCallback) Success(analytics.Message)              { c.success() }
func (c segmentCallback) Failure(_ analytics.Message, err error) { c.failure(err) }

func newSegment(t *testing.T, app, base string, a *acks) analytics.Client {
	t.Helper()
	c, err := analytics.NewWithConfig(app, analytics.Config{
		Endpoint: base + "/ingest/segment",
		Interval: 50 * time.Millisecond, BatchSize: 100,
		Callback: segmentCallback{a},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A test that fails before its own Close stops the client's retries here (a second Close
	// answers ErrClosed).
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestSegmentGo(t *testing.T) {
	base, app := server(t), appName(t)
	a := &acks{}
	c := newSegment(t, app, base, a)
	anon, user, prev := "seggo-anon-1", "seggo-user-1", "seggo-prev-1"
	msgs := []analytics.Message{
		analytics.Track{MessageId: "m-1", AnonymousId: anon, Event: "signup", Timestamp: at(0),
			Properties: analytics.Properties{"plan": "free", "n": 1}},
		analytics.Identify{MessageId: "m-2", AnonymousId: anon, UserId: user, Timestamp: at(1),
			Traits: analytics.Traits{"email": "a@b.c", "name": "Ada"}},
		analytics.Track{MessageId: "m-3", UserId: user, Event: "purchase", Timestamp: at(2),
			Properties: analytics.Properties{"amount": 9.5, "items": []string{"a", "b"}}},
		analytics.Alias{MessageId: "m-4", PreviousId: prev, UserId: user, Timestamp: at(3)},
		analytics.Page{MessageId: "m-5", UserId: user, Name: "Intro", Timestamp: at(4),
			Properties: analytics.Properties{"url": "https://x/y", "category": "Docs"}},
		analytics.Screen{MessageId: "m-6", UserId: user, Name: "Home", Timestamp: at(5),
			Properties: analytics.Properties{"k": 1}},
		analytics.Track{MessageId: "m-7", UserId: prev, Event: "purchase", Timestamp: at(6),
			Properties: analytics.Properties{"amount": 5.25}},
		// A duplicate (same messageId): one event.
		analytics.Track{MessageId: "m-1", AnonymousId: anon, Event: "signup", Timestamp: at(0),
			Properties: analytics.Properties{"plan": "free", "n": 1}},
	}
	for _, m := range msgs {
		if err := c.Enqueue(m); err != nil {
			t.Fatal(err)
		}
	}
	a.wait(t, len(msgs))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	assertCounts(t, app, map[string]int{"signup": 1, "$identify": 1, "purchase": 2, "$create_alias": 1,
		"$pageview": 1, "$screen": 1})
	p := assertOnePerson(t, app, []string{anon, user, prev}, user)
	if p.Properties["email"] != "a@b.c" || p.Properties["name"] != "Ada" {
		t.Errorf("person properties %v, want email a@b.c and name Ada", p.Properties)
	}
	events := trail(t, app, user)
	signup := find(t, events, "m-1")
	if signup.Event != "signup" || signup.DistinctID != anon || signup.Time != "2024-05-01T12:00:00.000000Z" ||
		signup.Properties["plan"] != "free" || signup.Properties["n"] != 1.0 ||
		signup.Properties["context.library.name"] != "analytics-go" {
		t.Errorf("signup stored as %+v", signup)
	}
	page := find(t, events, "m-5")
	if page.Event != "$pageview" || page.Properties["name"] != "Intro" || page.Properties["url"] != "https://x/y" {
		t.Errorf("page stored as %+v", page)
	}
	screen := find(t, events, "m-6")
	if screen.Event != "$screen" || screen.Properties["name"] != "Home" || screen.Properties["k"] != 1.0 {
		t.Errorf("screen stored as %+v", screen)
	}
	if purchase := find(t, events, "m-3"); purchase.Properties["items"] != `["a","b"]` {
		t.Errorf("purchase stored as %+v", purchase)
	}
}

// TestSegmentGoRetry: the first /v1/batch fails with 503 (lost before or after the server
// stored it); analytics-go resends the batch 100 ms later, and it is stored once.
func TestSegmentGoRetry(t *testing.T) {
	testRetry(t, map[string]int{"retried": 3}, func(t *testing.T, app, base string, a *acks) (io.Closer, int) {
		c := newSegment(t, app, base, a)
		for i := 0; i < 3; i++ {
			if err := c.Enqueue(analytics.Track{MessageId: fmt.Sprintf("r-%d", i), UserId: fmt.Sprintf("seggo-r-%d", i),
				Event: "retried", Timestamp: at(i), Properties: analytics.Properties{"i": i}}); err != nil {
				t.Fatal(err)
			}
		}
		return c, 3
	})
}
