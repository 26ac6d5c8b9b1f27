package gen

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/spurdb/spur/event"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// streamHash hashes every field of every event of cfg.
func streamHash(t testing.TB, cfg Config, seed maphash.Seed) (uint64, int64) {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var h maphash.Hash
	h.SetSeed(seed)
	var ev event.Event
	var n int64
	for g.Next(&ev) {
		n++
		fmt.Fprintf(&h, "%s|%d|%s|", ev.UserID, ev.Time, ev.Name)
		for _, p := range ev.Props {
			fmt.Fprintf(&h, "%s=%v;", p.Name, p.Value)
		}
	}
	return h.Sum64(), n
}

func TestDeterminism(t *testing.T) {
	seed := maphash.MakeSeed()
	cfg := Config{Events: 50_000, Seed: 7}
	a, _ := streamHash(t, cfg, seed)
	b, _ := streamHash(t, cfg, seed)
	if a != b {
		t.Fatalf("same config gave different streams")
	}
	cfg.Seed = 8
	if c, _ := streamHash(t, cfg, seed); c == a {
		t.Fatalf("seeds 7 and 8 gave the same stream")
	}
}

// checkStream generates cfg and checks the invariants every stream must
// hold; it returns the events for further checks when keep is true.
func checkStream(t testing.TB, cfg Config, keep bool) []event.Event {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	full := g.Config()
	start, end := full.Start, full.Start+int64(full.Days)*dayMicros
	var (
		ev        event.Event
		out       []event.Event
		n, users  int64
		prev      event.Event
		lastSess  int64
		fixed     [3]string
		installed bool
	)
	for g.Next(&ev) {
		n++
		if n > full.Events {
			t.Fatalf("more than %d events", full.Events)
		}
		if ev.Time < start || ev.Time >= end {
			t.Fatalf("event %d time %d outside [%d, %d)", n, ev.Time, start, end)
		}
		if len(ev.Props) < 4 || ev.Props[0].Name != PropPlatform || ev.Props[1].Name != PropChannel ||
			ev.Props[2].Name != PropCountry || ev.Props[3].Name != PropSessionID {
			t.Fatalf("event %d props %v", n, ev.Props)
		}
		sess := ev.Props[3].Value.Int
		ad := ev.Name == "ad_impression" || ev.Name == "ad_click"
		if ev.UserID != prev.UserID {
			if n > 1 && ev.UserID <= prev.UserID {
				t.Fatalf("event %d: user %q after %q", n, ev.UserID, prev.UserID)
			}
			if n > 1 && !installed {
				t.Fatalf("user %s never installs", prev.UserID)
			}
			users++
			installed = false
			if sess <= lastSess {
				t.Fatalf("event %d: session %d not after %d", n, sess, lastSess)
			}
		} else {
			if ev.Time < prev.Time {
				t.Fatalf("user %s: time %d before %d", ev.UserID, ev.Time, prev.Time)
			}
			if sess < lastSess {
				t.Fatalf("user %s: session %d after %d", ev.UserID, sess, lastSess)
			}
		}
		// Ad touchpoints come before the install, which is once; the
		// user's platform, country and (but on ads) channel are fixed.
		switch {
		case ad && installed:
			t.Fatalf("user %s: %s after the install", ev.UserID, ev.Name)
		case !ad && !installed:
			if ev.Name != "install" {
				t.Fatalf("user %s: %q before the install", ev.UserID, ev.Name)
			}
			installed = true
			for k := range fixed {
				fixed[k] = ev.Props[k].Value.Str
			}
		case ev.Name == "install":
			t.Fatalf("user %s installs twice", ev.UserID)
		}
		for k := range fixed {
			if v := ev.Props[k].Value.Str; installed && v != fixed[k] && !(ad && k == 1) {
				t.Fatalf("user %s: %s changed from %q to %q", ev.UserID, ev.Props[k].Name, fixed[k], v)
			}
		}
		if ad && ev.Props[1].Value.Str == "organic" {
			t.Fatalf("event %d: an organic ad", n)
		}
		lastSess = sess
		// Optional properties, in order: price on add_to_cart and
		// purchase, revenue on purchase, url on web users' events after
		// the install.
		want := []string{}
		if ev.Name == "add_to_cart" || ev.Name == "purchase" {
			want = append(want, PropPrice)
		}
		if ev.Name == "purchase" {
			want = append(want, PropRevenue)
		}
		if ev.Props[0].Value.Str == "web" && !ad {
			want = append(want, PropURL)
		}
		var got []string
		for _, p := range ev.Props[4:] {
			got = append(got, p.Name)
			switch {
			case p.Name == PropURL && (p.Value.Type != event.TypeString || !strings.HasPrefix(p.Value.Str, "/")),
				p.Name != PropURL && (p.Value.Type != event.TypeFloat || !(p.Value.Float > 0)):
				t.Fatalf("event %d %q: %v", n, ev.Name, p)
			}
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("event %d %q props %v, want %v", n, ev.Name, ev.Props, want)
		}
		if len(want) >= 2 && want[1] == PropRevenue && ev.Props[5].Value.Float > ev.Props[4].Value.Float {
			t.Fatalf("event %d: revenue %v above the price %v", n, ev.Props[5].Value.Float, ev.Props[4].Value.Float)
		}
		if (ev.Name == "screen_view" && ev.Props[0].Value.Str == "web") || (ev.Name == "page_view" && ev.Props[0].Value.Str != "web") {
			t.Fatalf("event %d: %s on %s", n, ev.Name, ev.Props[0].Value.Str)
		}
		if keep {
			c := ev
			c.Props = append([]event.Prop(nil), ev.Props...)
			out = append(out, c)
		}
		prev.UserID, prev.Time = ev.UserID, ev.Time
	}
	if n > 0 && !installed {
		t.Fatalf("user %s never installs", prev.UserID)
	}
	if n != full.Events {
		t.Fatalf("%+v: %d events, want %d", cfg, n, full.Events)
	}
	if users != g.Users() || users != full.Users {
		t.Fatalf("%+v: %d users seen, Users() = %d, config %d", cfg, users, g.Users(), full.Users)
	}
	if g.Next(&ev) {
		t.Fatalf("Next returned true after the end")
	}
	return out
}

func TestInvariants(t *testing.T) {
	for _, cfg := range []Config{
		{Events: 1},
		{Events: 2, Seed: 3},
		{Events: 23},
		{Events: 1000, Users: 1000},            // installs only
		{Events: 1000, Users: 1, Days: 1},      // one user
		{Events: 5000, Users: 2, Seed: -1},     // two heavy users
		{Events: 20_000, Days: 1, Start: 1e15}, // crowded day
		{Events: 300_000, Seed: 42},
		{Events: 3000, Start: -dayMicros * 1000}, // before the epoch
	} {
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) { checkStream(t, cfg, false) })
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "events 0"},
		{Config{Events: -5}, "events -5"},
		{Config{Events: MaxEvents + 1}, "events"},
		{Config{Events: 10, Days: -1}, "days -1"},
		{Config{Events: 10, Days: MaxDays + 1}, "days"},
		{Config{Events: 10, Users: 11}, "users 11"},
		{Config{Events: 10, Users: -1}, "users -1"},
		{Config{Events: 10, Start: math.MaxInt64 - 5}, "overflows"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want error containing %q", tc.cfg, err, tc.want)
		}
		if _, err := NewUserStream(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewUserStream(%+v) = %v, want error containing %q", tc.cfg, err, tc.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	g, err := New(Config{Events: 100_000_000 / 1000})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Events: 100_000, Start: DefaultStart, Days: DefaultDays, Users: 100_000 / EventsPerUser}
	if got := g.Config(); got != want {
		t.Fatalf("Config() = %+v, want %+v", got, want)
	}
	if len(EventNames()) != 43 {
		t.Fatalf("EventNames() has %d names, want 43", len(EventNames()))
	}
}

// TestShape checks the distributions on 1M events: events per user, name
// frequencies, ties, sessions.
func TestShape(t *testing.T) {
	const events = 1_000_000
	g, err := New(Config{Events: events, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	names := map[string]int64{}
	var counts []int64
	var ties, sessions int64
	var prevUser string
	var prevTime, prevSess int64
	for g.Next(&ev) {
		names[ev.Name]++
		if ev.UserID != prevUser {
			counts = append(counts, 0)
		} else if ev.Time == prevTime {
			ties++
		}
		if ev.Name != "ad_impression" && ev.Name != "ad_click" {
			counts[len(counts)-1]++ // the user's events after the touchpoints
		}
		if s := ev.Props[3].Value.Int; s != prevSess {
			sessions++
			prevSess = s
		}
		prevUser, prevTime = ev.UserID, ev.Time
	}
	if len(names) != len(eventNames) {
		t.Errorf("%d distinct names, want %d", len(names), len(eventNames))
	}
	var single, maxCount int64
	for _, c := range counts {
		if c == 1 {
			single++
		}
		maxCount = max(maxCount, c)
	}
	if f := float64(single) / float64(len(counts)); f < 0.2 || f > 0.4 {
		t.Errorf("install-only users %.3f, want 0.2..0.4", f)
	}
	if maxCount > events/500 || maxCount < events/5000 {
		t.Errorf("heaviest user has %d events, want ~0.1%% of %d", maxCount, events)
	}
	if f := float64(ties) / events; f < 0.001 || f > 0.05 {
		t.Errorf("timestamp ties %.4f of events, want a few percent", f)
	}
	if l := float64(events) / float64(sessions); l < 3 || l > 12 {
		t.Errorf("mean session length %.1f events", l)
	}
	// Zipf: screen_view (rank 1; page_view on the web) about twice
	// view_item (rank 2), rank 3 about a third of rank 1.
	views := float64(names["screen_view"] + names["page_view"])
	if r := views / float64(names["view_item"]); r < 1.6 || r > 2.4 {
		t.Errorf("screen_view/view_item = %.2f, want ~2", r)
	}
	if r := views / float64(names["scroll"]); r < 2.4 || r > 3.6 {
		t.Errorf("screen_view/scroll = %.2f, want ~3", r)
	}
}

// TestFunnel runs a naive per-user ordered funnel (first view_item, then
// the first add_to_cart after it, and so on, within 14 days) and checks that
// conversions are plausible and decreasing.
func TestFunnel(t *testing.T) {
	events := checkStream(t, Config{Events: 400_000, Seed: 5}, true)
	steps := []string{"view_item", "add_to_cart", "begin_checkout", "purchase"}
	const window = 14 * dayMicros
	reached := make([]int, len(steps)+1)
	for i := 0; i < len(events); {
		j := i
		for j < len(events) && events[j].UserID == events[i].UserID {
			j++
		}
		k, t0 := 0, int64(0)
		for _, ev := range events[i:j] {
			if k < len(steps) && ev.Name == steps[k] && (k == 0 || ev.Time-t0 <= window) {
				if k == 0 {
					t0 = ev.Time
				}
				k++
			}
		}
		for s := 1; s <= k; s++ {
			reached[s]++
		}
		i = j
	}
	for s := 2; s <= len(steps); s++ {
		c := float64(reached[s]) / float64(reached[s-1])
		t.Logf("%s → %s: %d/%d = %.3f", steps[s-2], steps[s-1], reached[s], reached[s-1], c)
		if c < 0.1 || c > 0.9 {
			t.Errorf("conversion %s → %s = %.3f, want 0.1..0.9", steps[s-2], steps[s-1], c)
		}
	}
}

// TestUsersAgree checks that the users stream matches the events: same ids
// in the same order, signup time = install time, same properties.
func TestUsersAgree(t *testing.T) {
	cfg := Config{Events: 100_000, Seed: 11}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewUserStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Users() != g.Users() {
		t.Fatalf("users %d vs %d", s.Users(), g.Users())
	}
	var ev, u event.Event
	var n int64
	for g.Next(&ev) {
		if ev.Name != "install" {
			continue
		}
		if !s.Next(&u) {
			t.Fatalf("users stream ended after %d users", n)
		}
		n++
		if u.UserID != ev.UserID || u.Time != ev.Time || u.Name != "" || len(u.Props) != 4 {
			t.Fatalf("user %+v vs install %+v", u, ev)
		}
		for k := range 3 {
			if u.Props[k] != ev.Props[k] {
				t.Fatalf("user %s prop %v vs %v", u.UserID, u.Props[k], ev.Props[k])
			}
		}
		if u.Props[3] != (event.Prop{Name: PropSignupTime, Value: event.Time(ev.Time)}) {
			t.Fatalf("user %s signup_time %v, want %d", u.UserID, u.Props[3], ev.Time)
		}
	}
	if s.Next(&u) || n != s.Users() {
		t.Fatalf("users stream: %d matched of %d, or more left", n, s.Users())
	}
}

func TestNextAllocs(t *testing.T) {
	for _, persons := range []float64{0, 0.5} {
		g, err := New(Config{Events: 1_000_000, Users: 100, Persons: persons})
		if err != nil {
			t.Fatal(err)
		}
		var ev event.Event
		g.Next(&ev)
		if a := testing.AllocsPerRun(100_000, func() { g.Next(&ev) }); a != 0 {
			t.Fatalf("persons %v: Next allocates %.3f times per event", persons, a)
		}
	}
}

func TestExpDraw(t *testing.T) {
	tab := newTables()
	r := newRNG(1, 0, 9)
	const n = 1 << 18
	var sum, sq float64
	for range n {
		x := r.next()
		e := tab.expDraw(x)
		if want := -math.Log(float64(x) * 0x1p-64); math.Abs(e-want) > 1e-5*(1+want) {
			t.Fatalf("expDraw(%#x) = %v, want %v", x, e, want)
		}
		sum += e
		sq += e * e
	}
	if mean := sum / n; math.Abs(mean-1) > 0.01 {
		t.Fatalf("mean %v, want 1", mean)
	}
	if v := sq/n - (sum/n)*(sum/n); math.Abs(v-1) > 0.03 {
		t.Fatalf("variance %v, want 1", v)
	}
}

// FuzzGenerate checks the stream invariants on small random configs.
func FuzzGenerate(f *testing.F) {
	f.Add(int64(1), int64(0), int64(0), 0, int64(0))
	f.Add(int64(500), int64(3), int64(-9), 1, int64(1))
	f.Add(int64(2000), int64(2000), int64(1), 2, int64(0))
	f.Add(int64(4000), int64(0), int64(12345), 3650, int64(-1e12))
	f.Fuzz(func(t *testing.T, events, users, seed int64, days int, start int64) {
		cfg := Config{Events: abs(events%5000) + 1, Seed: seed, Days: int(abs(int64(days % (MaxDays + 1)))), Start: start}
		if users > 0 {
			cfg.Users = users%cfg.Events + 1
		}
		if _, err := New(cfg); err != nil {
			// Only the start overflow is left to reject.
			if !strings.Contains(err.Error(), "overflows") {
				t.Fatalf("New(%+v): %v", cfg, err)
			}
			return
		}
		checkStream(t, cfg, false)
	})
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
