package sdktests

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/posthog/posthog-go"
)

// posthogCallback feeds an acks from posthog-go's Callback.
type posthogCallback struct{ *acks }

func (c posthogCallback) Success(posthog.APIMessage)              { c.success() }
func (c posthogCallback) Failure(_ posthog.APIMessage, err error) { c.failure(err) }

func newPosthog(t *testing.T, app, base string, a *acks) posthog.Client {
	t.Helper()
	c, err := posthog.NewWithConfig(app, posthog.Config{
		Endpoint: base + "/ingest/posthog",
		Interval: 50 * time.Millisecond, BatchSize: 100,
		Callback: posthogCallback{a},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A test that fails before its own Close stops the client's retries here (a second Close
	// answers ErrClosed).
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestPosthogGo(t *testing.T) {
	base, app := server(t), appName(t)
	a := &acks{}
	c := newPosthog(t, app, base, a)
	anon, user := "phgo-anon-1", "phgo-user-1"
	msgs := []posthog.Message{
		posthog.Capture{Uuid: "0190b2a4-0000-4000-8000-000000000001", DistinctId: anon, Event: "signup", Timestamp: at(0),
			Properties: posthog.Properties{"plan": "free", "n": 1}},
		// posthog-go sends "uuid": "" when none is set: the server derives the dedup id, so the
		// same event enqueued twice is one event.
		posthog.Capture{DistinctId: anon, Event: "page_view", Timestamp: at(1),
			Properties: posthog.Properties{"path": "/home", "$set": map[string]any{"email": "a@b.c"}}},
		posthog.Capture{DistinctId: anon, Event: "page_view", Timestamp: at(1),
			Properties: posthog.Properties{"path": "/home", "$set": map[string]any{"email": "a@b.c"}}},
		posthog.Identify{DistinctId: user, Timestamp: at(2), Properties: posthog.Properties{"name": "Ada"}},
		// Go's Alias is alias(T=user, O=anon): the opposite argument order from posthog-python's.
		posthog.Alias{DistinctId: user, Alias: anon, Timestamp: at(3)},
		posthog.Capture{Uuid: "0190b2a4-0000-4000-8000-000000000004", DistinctId: user, Event: "purchase", Timestamp: at(4),
			Properties: posthog.Properties{"amount": 9.5, "items": []string{"a", "b"}}},
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

	assertCounts(t, app, map[string]int{"signup": 1, "page_view": 1, "$identify": 1, "$create_alias": 1, "purchase": 1})
	p := assertOnePerson(t, app, []string{anon, user}, user)
	if p.Properties["email"] != "a@b.c" || p.Properties["name"] != "Ada" {
		t.Errorf("person properties %v, want email a@b.c and name Ada", p.Properties)
	}
	events := trail(t, app, anon)
	signup := find(t, events, "0190b2a4-0000-4000-8000-000000000001")
	if signup.Event != "signup" || signup.DistinctID != anon || signup.Time != "2024-05-01T12:00:00.000000Z" ||
		signup.Properties["plan"] != "free" || signup.Properties["n"] != 1.0 || signup.Properties["$lib"] != "posthog-go" {
		t.Errorf("signup stored as %+v", signup)
	}
	page := findEvent(t, events, "page_view")
	if page.InsertID == "" || page.Properties["path"] != "/home" || page.Time != "2024-05-01T12:00:01.000000Z" {
		t.Errorf("page_view stored as %+v (want a derived insert_id)", page)
	}
	if _, ok := page.Properties["$set"]; ok {
		t.Errorf("page_view kept $set as a property: %+v", page)
	}
	purchase := find(t, events, "0190b2a4-0000-4000-8000-000000000004")
	if purchase.Properties["amount"] != 9.5 || purchase.Properties["items"] != `["a","b"]` {
		t.Errorf("purchase stored as %+v", purchase)
	}
}

// TestPosthogGoRetry: the first /batch/ fails with 503 (lost before or after the server stored
// it); posthog-go resends the batch 100 ms later, and it is stored once — also its events with an
// empty "uuid", whose dedup id the server derives.
func TestPosthogGoRetry(t *testing.T) {
	testRetry(t, map[string]int{"retried": 4}, func(t *testing.T, app, base string, a *acks) (io.Closer, int) {
		c := newPosthog(t, app, base, a)
		for i := 0; i < 4; i++ {
			uuid := ""
			if i%2 == 0 {
				uuid = fmt.Sprintf("0190b2a4-0000-4000-8000-0000000001%02d", i)
			}
			if err := c.Enqueue(posthog.Capture{Uuid: uuid, DistinctId: fmt.Sprintf("phgo-r-%d", i), Event: "retried",
				Timestamp: at(i), Properties: posthog.Properties{"i": i}}); err != nil {
				t.Fatal(err)
			}
		}
		return c, 4
	})
}
