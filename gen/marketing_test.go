package gen

import (
	"errors"
	"io"
	"testing"

	"github.com/spurdb/spur/event"
)

// TestMarketing checks the shape of what the marketing analyses read, on
// 1M events: touchpoints before installs (clicks in the user's
// acquisition channel, minutes to hours before the install; impressions
// within 7 days), page views and URLs on the web only, revenue at most
// the price.
func TestMarketing(t *testing.T) {
	const events = 1_000_000
	g, err := New(Config{Events: events, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	var users, clicked, organic, organicImps, imps, clicks, webEvents, urls, purchases, discounted int64
	var delay, clickChannel int64 // Σ last click → install (µs); clicks in the user's channel
	var lastClick int64
	var lastClickCh string
	var userImps []int64
	for g.Next(&ev) {
		switch ev.Name {
		case "ad_impression":
			imps++
			userImps = append(userImps, ev.Time)
		case "ad_click":
			clicks++
			lastClick, lastClickCh = ev.Time, ev.Props[1].Value.Str
		case "install":
			users++
			ch := ev.Props[1].Value.Str
			if ch == "organic" {
				organic++
				if len(userImps) > 0 {
					organicImps++
				}
			}
			if lastClick != 0 {
				clicked++
				delay += ev.Time - lastClick
				if lastClickCh == ch {
					clickChannel++
				}
			}
			for _, ti := range userImps {
				if ti > ev.Time || (ti < ev.Time-touchWindow-1000 && ti > g.p.cfg.Start) {
					t.Fatalf("user %s: impression at %d, install at %d", ev.UserID, ti, ev.Time)
				}
			}
			lastClick, userImps = 0, userImps[:0]
		case "purchase":
			purchases++
			if ev.Props[5].Value.Float < ev.Props[4].Value.Float {
				discounted++
			}
		}
		if ev.Props[0].Value.Str == "web" && ev.Name != "ad_impression" && ev.Name != "ad_click" {
			webEvents++
			if ev.Props[len(ev.Props)-1].Name == PropURL {
				urls++
			}
		}
	}
	if users == 0 || clicks == 0 || imps == 0 || purchases == 0 {
		t.Fatalf("users %d clicks %d impressions %d purchases %d", users, clicks, imps, purchases)
	}
	// 55 % of users come through a paid or owned channel and click.
	if f := float64(clicked) / float64(users); f < 0.5 || f > 0.6 {
		t.Errorf("users with a click %.3f, want ~0.55", f)
	}
	if clickChannel != clicked {
		t.Errorf("%d of %d last clicks are in the user's channel", clickChannel, clicked)
	}
	if m := float64(delay) / float64(clicked) / 60e6; m < 30 || m > 50 {
		t.Errorf("mean last click → install %.1f min, want ~40", m)
	}
	if f := float64(organicImps) / float64(organic); f < 0.25 || f > 0.35 {
		t.Errorf("organic users with an impression %.3f, want ~0.3", f)
	}
	if f := float64(imps+clicks) / events; f < 0.05 || f > 0.08 {
		t.Errorf("touchpoints are %.3f of the events", f)
	}
	if urls != webEvents {
		t.Errorf("%d of %d web events have a url", urls, webEvents)
	}
	if f := float64(discounted) / float64(purchases); f < 0.2 || f > 0.3 {
		t.Errorf("discounted purchases %.3f, want ~0.25", f)
	}
}

// TestNextBatchAgreesWithNext checks that the column batches of an import
// carry exactly the events of Next.
func TestNextBatchAgreesWithNext(t *testing.T) {
	for _, cfg := range []Config{
		{Events: 20_000, Seed: 9},
		{Events: 50_000, Seed: 7, Days: 30, Persons: 0.5}, // $anon_distinct_id on the $identify events
		{Events: 30_000, Seed: 2, Persons: 0.4, ResolvePersons: true},
	} {
		checkBatchAgrees(t, cfg)
	}
}

// checkBatchAgrees checks that NextBatch yields Next's events for cfg,
// Source.Rows of them.
func checkBatchAgrees(t *testing.T, cfg Config) {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var batch event.Batch
	var ev event.Event
	n := 0
	for {
		err := Source{G: b}.NextBatch(&batch)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for r := range batch.Rows {
			if !a.Next(&ev) {
				t.Fatalf("%+v: Next ended at event %d", cfg, n)
			}
			n++
			got := event.Event{UserID: batch.User.Str(r), Time: batch.Time[r], Name: batch.Event.Str(r)}
			for _, c := range batch.Props {
				if v := c.Value(r); v.Type != event.TypeNone {
					got.Props = append(got.Props, event.Prop{Name: c.Name, Value: v})
				}
			}
			want := ev
			want.Props = append([]event.Prop(nil), ev.Props...)
			if got.UserID != want.UserID || got.Time != want.Time || got.Name != want.Name || len(got.Props) != len(want.Props) {
				t.Fatalf("%+v: event %d: batch %+v, Next %+v", cfg, n, got, want)
			}
			for k := range got.Props {
				if got.Props[k] != want.Props[k] {
					t.Fatalf("%+v: event %d: batch %+v, Next %+v", cfg, n, got, want)
				}
			}
		}
	}
	if a.Next(&ev) || int64(n) != (Source{G: b}).Rows() {
		t.Fatalf("%+v: batches held %d events of %d", cfg, n, (Source{G: b}).Rows())
	}
}
