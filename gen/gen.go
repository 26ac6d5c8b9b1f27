// Package gen generates deterministic synthetic product-analytics events,
// shaped like the workloads of PostHog or Amplitude, for tests, demos and
// benchmarks (`spur gen`).
//
// The core is a streaming Generator: it emits Config.Events events in trail
// order (all events of user 0 in time order, then user 1, …) without holding
// more than one user's state, so a billion events can be streamed straight
// into a store. The output is a pure function of the Config.
//
// Shape of the data:
//   - Events per user follow a truncated Pareto law (α = 1.2) plus a share of
//     install-only users, rescaled so that the total is exactly
//     Config.Events and the mean is Events/Users; the truncation keeps the
//     heaviest user near 0.1 % of all events on large data sets.
//   - Each user's first event in the app is "install" at the signup time;
//     heavy users sign up earlier. Before it come the user's ad
//     touchpoints ("ad_impression", "ad_click", carrying the ad's
//     channel): users acquired through paid search or social see 1 to 3
//     impressions in the 7 days before and click once or twice, the last
//     click 40 minutes (mean) before the install; referral and email users
//     click; organic users see an impression now and then and click none
//     (marketing.go). Touchpoints are about 7 % of the events, taken from
//     the events beyond the installs. Activity is grouped in sessions (events seconds
//     apart, opened by "app_open" or "notification_open") whose starts are
//     spread over the user's active lifetime with a decaying density.
//     Times have millisecond resolution (counted from Config.Start), as
//     analytics SDKs send them; events in the same millisecond are ties.
//   - 34 event names with Zipf (s = 1) frequencies ("screen_view" is
//     "page_view" for web users), plus the funnel
//     view_item → add_to_cart → begin_checkout → purchase, where each step
//     immediately follows the previous one with probability 0.30, 0.40 and
//     0.60. A purchase may carry several items that share one timestamp (the
//     intended exact timestamp ties); "install" and the first "app_open" also
//     share one.
//   - Event properties: platform, channel, country (fixed per user; on ad
//     touchpoints channel is the ad's), session_id (int, unique over the
//     data set), price (float, log-normal, on add_to_cart and purchase
//     only), revenue (float, on purchase: the price less a discount on one
//     purchase in four) and url (string, on web users' events after the
//     install: the page the event happens on, e.g. "/product/17", moving
//     along the session). User properties (UserStream): platform, channel
//     (the acquisition channel), country and signup_time.
//   - With Config.Persons, a share of the users are persons of several
//     distinct ids: anonymous before signup, then joined by "$identify"
//     events, some with a second device (persons.go).
//
// Randomness: each user has its own wyrand stream (Wang Yi's wyhash PRNG)
// seeded from (Seed, user index) through SplitMix64, so a user's attributes
// do not depend on other users and the users stream agrees with the events.
package gen

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/spurdb/spur/event"
)

// DefaultStart is the default start of the generated time span:
// 2024-01-01T00:00:00Z in UTC microseconds since the Unix epoch.
const DefaultStart int64 = 1_704_067_200_000_000

// DefaultDays is the default length of the generated time span in days.
const DefaultDays = 90

// EventsPerUser is the mean number of events per user when Config.Users is
// 0 (so 100 M events have about 4.2 M users).
const EventsPerUser = 24

// Limits of a Config.
const (
	MaxEvents = 1 << 40 // largest Config.Events accepted
	MaxDays   = 36_500  // largest Config.Days accepted (100 years)
)

const dayMicros = 86_400_000_000

// Config describes a data set. The zero value of Start, Days and Users means
// the default (so a span cannot start exactly at the Unix epoch); Events
// must be set.
type Config struct {
	Events int64 // total number of events, exactly; 1 ≤ Events ≤ MaxEvents
	Seed   int64 // any value; equal Configs give identical data
	Start  int64 // start of the span, UTC microseconds; 0 means DefaultStart
	Days   int   // length of the span in days, 1..MaxDays; 0 means DefaultDays
	Users  int64 // number of users, 1..Events; 0 means max(1, Events/EventsPerUser)

	// Persons is the share of users, 0 ≤ Persons ≤ 1, that are persons of
	// several distinct ids (identity.md): each browses anonymously before
	// signing up and half of them later log in on a second device
	// (persons.go has the trail). Which users is drawn per user from
	// (Seed, user index) alone. Their first session (with the ad
	// touchpoints and the install) is sent under an anonymous id A1, and
	// "$identify" from the user id with "$anon_distinct_id" A1 follows it;
	// a second device's session is sent under A2, preceded by
	// "$identify" (user id, A2). Anonymous ids are "anon-" and 16 hex
	// digits, distinct from each other and from every user id ("u" and
	// digits). Events counts the events without the $identify events,
	// which come in addition (Source.Rows counts both). A person's other
	// events, and all events of the other users, are exactly those of
	// Persons = 0 (only their user id differs), and with Persons = 0 the
	// output is what it was before persons existed, byte for byte.
	Persons float64
	// ResolvePersons sends every event of a person, the $identify events
	// included, under its user id: the same events as with Persons alone,
	// with the anonymous ids resolved to the person (the reference of an
	// import "with person ids already resolved"). No effect when Persons
	// is 0.
	ResolvePersons bool
}

// Tuning of the generated shape (see the package doc).
const (
	paretoAlpha    = 1.2                 // tail index of the events-per-user law
	churnShare     = 0.25                // share of users whose only event is install
	extraUnit      = 256                 // fixed-point scale of raw per-user weights
	sessionGapMin  = 30 * 60 * 1_000_000 // µs, minimum gap between sessions (plus jitter)
	eventGapMin    = 1_000_000           // µs, minimum gap inside a session
	eventGapMean   = 19_000_000          // µs, mean gap above the minimum
	funnelToCart   = 0.30
	funnelCheckout = 0.40
	funnelPurchase = 0.60
	priceMu        = 3.2 // log-normal price: exp(N(priceMu, priceSigma))
	priceSigma     = 1.0
	idBlockUsers   = 1024 // user ids allocated per block (one string each)
)

// Event names. The first six are emitted by the session and funnel logic;
// the rest are drawn with Zipf frequencies in the order listed.
const (
	evInstall = iota
	evAppOpen
	evNotificationOpen
	evAddToCart
	evBeginCheckout
	evPurchase
	evViewItem // first general name with Zipf rank 2
	nSpecial   = evViewItem
)

var eventNames = [...]string{
	"install", "app_open", "notification_open", "add_to_cart", "begin_checkout", "purchase",
	// general names; Zipf rank = position below + 1, except view_item which
	// takes rank 2 (screen_view is rank 1).
	"view_item", "screen_view", "scroll", "search", "view_item_list", "select_item", "click",
	"view_cart", "share", "login", "add_to_wishlist", "view_promotion", "select_promotion",
	"logout", "app_background", "remove_from_cart", "push_received", "video_start",
	"video_complete", "sign_up", "add_shipping_info", "add_payment_info", "rate_item",
	"write_review", "profile_update", "settings_change", "invite_friend", "tutorial_begin",
	"tutorial_complete", "level_up", "refund", "app_update", "error", "crash",
	// marketing names (marketing.go): screen_view on the web, and the ad
	// touchpoints before an install
	"page_view", "ad_impression", "ad_click",
}

// Indexes of the names after the Zipf-drawn ones.
const (
	evScreenView   = nSpecial + 1 // Zipf rank 1; page_view on the web
	nBaseNames     = 40           // the names drawn by the session and Zipf logic
	evPageView     = nBaseNames
	evAdImpression = nBaseNames + 1
	evAdClick      = nBaseNames + 2
)

// EventNames returns the 43 event names the generator emits, in a fixed
// order (with Config.Persons, IdentifyEvent as well). The returned slice is a fresh copy owned by the caller.
func EventNames() []string {
	return append([]string(nil), eventNames[:]...)
}

// Property values; indices into these are per-user attributes.
var (
	platforms      = [...]string{"ios", "android", "web"}
	platformWeight = [...]float64{45, 40, 15}
	channels       = [...]string{"organic", "paid_search", "social", "referral", "email"}
	channelWeight  = [...]float64{45, 20, 15, 12, 8}
	countries      = [...]string{
		"US", "IN", "BR", "GB", "DE", "FR", "ID", "JP", "MX", "CA",
		"ES", "IT", "KR", "TR", "PL", "NL", "AU", "PH", "VN", "NG",
	}
)

// platformWeb is the index of "web" in platforms.
const platformWeb = 2

// Property names used on events and users.
const (
	PropPlatform   = "platform"    // string: ios, android, web
	PropChannel    = "channel"     // string: organic, paid_search, social, referral, email
	PropCountry    = "country"     // string: ISO 3166-1 alpha-2 code
	PropSessionID  = "session_id"  // int: unique per session over the data set
	PropPrice      = "price"       // float: on add_to_cart and purchase only
	PropSignupTime = "signup_time" // time (user property): the install time
	PropRevenue    = "revenue"     // float: on purchase only, the price less any discount
	PropURL        = "url"         // string: on web users' events after the install, the page
)

// table is a 4096-entry sampling table: index with the top 12 bits of a
// random number to draw a value with the table's weights (quantised to
// 1/4096).
type table [4096]uint8

func newTable(weights []float64) *table {
	var t table
	total := 0.0
	for _, w := range weights {
		total += w
	}
	cum, k := 0.0, 0
	for i := range t {
		x := (float64(i) + 0.5) / float64(len(t)) * total
		for k < len(weights)-1 && x >= cum+weights[k] {
			cum += weights[k]
			k++
		}
		t[i] = uint8(k)
	}
	return &t
}

func (t *table) draw(r uint64) int { return int(t[r>>52]) }

func zipfWeights(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1 / float64(i+1)
	}
	return w
}

// tables are built once per Generator/UserStream (cheap) so that no package
// state is mutable.
type tables struct {
	general  *table // index into eventNames[nSpecial:], Zipf with view_item at rank 2
	platform *table
	channel  *table
	country  *table
	page     *table        // index into pageTargets, Zipf
	product  *table        // product, Zipf
	log1p    *[257]float64 // log1p[k] = ln(1 + k/256), for expDraw
}

// expDraw turns a uniform 64-bit random x into a standard exponential draw
// −ln(u), u = x/2⁶⁴, without calling math.Log: with x = 2^−(z+1)·(1+f)·2⁶⁴
// (z leading zero bits, f ∈ [0, 1)), −ln(u) = (z+1)·ln 2 − ln(1+f), and
// ln(1+f) is interpolated linearly in a 256-step table (error < 2·10⁻⁶).
func (t *tables) expDraw(x uint64) float64 {
	z := bits.LeadingZeros64(x | 1)
	m := x << z // top bit set
	k := (m >> 55) & 0xff
	f := float64((m>>23)&(1<<32-1)) * 0x1p-32
	l := t.log1p[k] + f*(t.log1p[k+1]-t.log1p[k])
	return float64(z+1)*math.Ln2 - l
}

func newTables() tables {
	w := zipfWeights(nBaseNames - nSpecial)
	w[0], w[1] = w[1], w[0] // view_item is listed first but has rank 2
	var l [257]float64
	for k := range l {
		l[k] = math.Log1p(float64(k) / 256)
	}
	return tables{
		general:  newTable(w),
		platform: newTable(platformWeight[:]),
		channel:  newTable(channelWeight[:]),
		country:  newTable(zipfWeights(len(countries))),
		page:     newTable(zipfWeights(len(pageTargets))),
		product:  newTable(zipfWeights(nProducts)),
		log1p:    &l,
	}
}

// plan is a validated Config with its derived constants.
type plan struct {
	cfg     Config // with defaults filled in
	seed    uint64
	end     int64   // exclusive end of the span, µs
	capRaw  float64 // truncation point of the Pareto law
	idWidth int     // digits of a user id
	tab     tables
}

func newPlan(cfg Config) (*plan, error) {
	if cfg.Events < 1 || cfg.Events > MaxEvents {
		return nil, fmt.Errorf("gen: events %d out of range [1, %d]", cfg.Events, int64(MaxEvents))
	}
	if cfg.Days == 0 {
		cfg.Days = DefaultDays
	}
	if cfg.Days < 0 || cfg.Days > MaxDays {
		return nil, fmt.Errorf("gen: days %d out of range [1, %d]", cfg.Days, MaxDays)
	}
	if cfg.Start == 0 {
		cfg.Start = DefaultStart
	}
	span := int64(cfg.Days) * dayMicros
	if cfg.Start > math.MaxInt64-span {
		return nil, fmt.Errorf("gen: start %d µs plus %d days overflows int64", cfg.Start, cfg.Days)
	}
	if cfg.Users == 0 {
		cfg.Users = max(1, cfg.Events/EventsPerUser)
	}
	if cfg.Users < 1 || cfg.Users > cfg.Events {
		return nil, fmt.Errorf("gen: users %d out of range [1, events=%d]", cfg.Users, cfg.Events)
	}
	if !(cfg.Persons >= 0 && cfg.Persons <= 1) {
		return nil, fmt.Errorf("gen: persons rate %v out of range [0, 1]", cfg.Persons)
	}
	p := &plan{
		cfg:     cfg,
		seed:    uint64(cfg.Seed),
		end:     cfg.Start + span,
		idWidth: max(7, len(strconv.FormatInt(cfg.Users-1, 10))),
		tab:     newTables(),
	}
	p.capRaw = paretoCap(cfg.Events, cfg.Users)
	return p, nil
}

// paretoMeanExtra is E[min(X, T) − 1] for X ~ Pareto(1, α), times the
// share of non-churned users: the mean raw weight of a user.
func paretoMeanExtra(t float64) float64 {
	return (1 - churnShare) * (1 - math.Pow(t, 1-paretoAlpha)) / (paretoAlpha - 1)
}

// paretoCap returns the truncation point T of the raw weights such that the
// heaviest user gets about max(0.1 % of events, 10 × the mean) events after
// rescaling: T / mean(T) = cap / mean extra events per user. T/mean(T) is
// increasing for T ≥ 3, so a bisection finds it.
func paretoCap(events, users int64) float64 {
	extraPerUser := float64(events-users) / float64(users)
	if extraPerUser <= 0 {
		return 3
	}
	want := max(float64(events)/1000, 10*float64(events)/float64(users)) / extraPerUser
	lo, hi := 3.0, 1e15
	if lo/paretoMeanExtra(lo) >= want {
		return lo
	}
	for range 200 {
		mid := math.Sqrt(lo * hi)
		if mid/paretoMeanExtra(mid) < want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// Random-stream identifiers: one independent stream per purpose and user.
const (
	streamWeight = 1
	streamUser   = 2
	streamTouch  = 3 // ad touchpoints (marketing.go)
	streamExtra  = 4 // URLs and revenue (marketing.go)
	// streamPersons = 5: who is a person and its second device (persons.go)
)

// rng is wyrand (Wang Yi, public domain): a 64-bit state advanced by a Weyl
// increment and mixed by one 64×64→128 multiply.
type rng struct{ s uint64 }

func newRNG(seed uint64, user int64, stream uint64) rng {
	return rng{s: splitmix(splitmix(seed^stream*0x9e3779b97f4a7c15) + uint64(user))}
}

// splitmix is the SplitMix64 finaliser (Steele, Lea, Flood 2014).
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func (r *rng) next() uint64 {
	r.s += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(r.s, r.s^0xe7037ed1a0b428db)
	return hi ^ lo
}

// float returns a uniform float64 in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) * 0x1p-53 }

// floatOpen returns a uniform float64 in (0, 1].
func (r *rng) floatOpen() float64 { return float64(r.next()>>11+1) * 0x1p-53 }

// normal returns a standard normal draw (Box–Muller, one of the pair).
func (r *rng) normal() float64 {
	return math.Sqrt(-2*math.Log(r.floatOpen())) * math.Cos(2*math.Pi*r.float())
}

// rawWeight is user i's raw share of the events beyond install, in units of
// 1/extraUnit: 0 for churned users, else min(X, T) − 1 for X ~ Pareto(1, α).
func (p *plan) rawWeight(i int64) uint64 {
	r := newRNG(p.seed, i, streamWeight)
	if r.float() < churnShare {
		return 0
	}
	x := math.Pow(r.floatOpen(), -1/paretoAlpha)
	x = min(x, p.capRaw)
	return uint64((x - 1) * extraUnit)
}

// userAttrs are a user's fixed attributes.
type userAttrs struct {
	platform, channel, country uint8
	signup                     int64 // µs, in [start, end)
}

// attrs draws a user's attributes from r (the user's fresh stream). Heavy
// users (large raw weight w) sign up earlier: the signup fraction of the
// span is u^(1 + ln(1 + w)/4).
func (p *plan) attrs(w uint64, r *rng) userAttrs {
	var a userAttrs
	a.platform = uint8(p.tab.platform.draw(r.next()))
	a.channel = uint8(p.tab.channel.draw(r.next()))
	a.country = uint8(p.tab.country.draw(r.next()))
	skew := 1 + math.Log1p(float64(w)/extraUnit)/4
	frac := math.Pow(r.float(), skew)
	a.signup = p.cfg.Start + min(int64(frac*float64(p.end-p.cfg.Start)), p.end-p.cfg.Start-1)
	a.signup -= (a.signup - p.cfg.Start) % 1000 // millisecond resolution, like every event time
	return a
}

// idBlock hands out user ids "u" + zero-padded decimal index, allocating one
// string per idBlockUsers users (the ids are substrings of it, so they stay
// valid forever).
type idBlock struct {
	width int
	first int64 // index of the first id in block
	n     int64 // ids in block
	block string
	buf   []byte
}

func (b *idBlock) id(i, users int64) string {
	if i < b.first || i >= b.first+b.n {
		b.first = i - i%idBlockUsers
		b.n = min(idBlockUsers, users-b.first)
		b.buf = b.buf[:0]
		for k := b.first; k < b.first+b.n; k++ {
			b.buf = append(b.buf, 'u')
			var digits [20]byte
			d := strconv.AppendInt(digits[:0], k, 10)
			for range b.width - len(d) {
				b.buf = append(b.buf, '0')
			}
			b.buf = append(b.buf, d...)
		}
		b.block = string(b.buf)
	}
	l := int64(b.width + 1)
	off := (i - b.first) * l
	return b.block[off : off+l]
}

// Generator streams the events of one Config in trail order: all events of
// user 0 in time order, then user 1, … (with Config.Persons, a user's
// events are those of all of its ids, the $identify events included; ties
// in time keep the order described in persons.go). It is not safe for
// concurrent use; use one Generator per goroutine.
type Generator struct {
	p           *plan
	totalWeight uint64 // Σ raw weights, or Users when they are all 0
	extra       uint64 // Events − Users: events beyond the installs
	uniform     bool   // all raw weights were 0: weight 1 each

	ids        idBlock
	next       int64 // index of the next user to start
	sh         share // rescaling of the started users' weights
	identifies int64 // $identify events of the data set (persons.go)

	// current user
	uid      string // distinct id of the current event
	a        userAttrs
	r        rng
	left     int64   // events of the user not yet emitted
	sessLeft int64   // events of the current session not yet emitted
	sessions int64   // sessions of the user not yet started
	life     float64 // the user's active lifetime, µs
	u        float64 // order statistic in [0, 1] of the last session start
	t        int64   // time of the last event, µs

	sessionID    int64   // global, incremented per session
	install      bool    // the install is the user's next non-touchpoint event
	afterInstall bool    // the install was the last event: app_open follows at the same time
	funnel       int     // funnel step of the last event: 0 none, 1..3
	items        int64   // further purchase items to emit at the same time
	cartPrice    float64 // price of the last add_to_cart

	// marketing (marketing.go)
	noTouch bool     // touchpoints do not fit the event budget: none at all
	touch   touchBuf // the user's touchpoints
	rx      rng      // the user's stream for URLs and revenue
	url     int      // the web user's current page (urls index)
	product int      // the web user's current product

	// persons (persons.go); pstate is pNone when Config.Persons is 0
	anonIDs *anonBlock // allocated with persons (4 KB, kept out of the hot fields' way)
	pstate  uint8
	opened  bool   // a session was opened before its $identify: appStep emits its first event
	user    string // the user's id (T)
	anon1   string // the person's anonymous ids
	anon2   string
	dev2At  int64 // device 2's session opens when sessions is dev2At; 0: none

	// the event step produced
	evTime    int64   // µs, millisecond resolution
	evChannel uint8   // channels index: the user's, or the ad's
	evURL     int     // urls index, -1 for none
	evRevenue float64 // 0 for none
	evAnon    string  // $anon_distinct_id of an $identify, "" for none
}

// New validates cfg and returns a Generator positioned before the first
// event. It reads every user's raw weight and number of touchpoints once
// (O(Users) time, about 100 ns each: 4 s for the 41.7 M users of 1 B
// events) to rescale the events-per-user law to exactly cfg.Events; with
// cfg.Persons > 0, a second pass (about as long) counts the $identify
// events. It returns an error naming the field when cfg is out of range.
func New(cfg Config) (*Generator, error) {
	p, err := newPlan(cfg)
	if err != nil {
		return nil, err
	}
	g := &Generator{p: p}
	g.ids.width = p.idWidth
	var touches int64
	for i := range p.cfg.Users {
		g.totalWeight += p.rawWeight(i)
		touches += int64(p.touchCount(i, p.userChannel(i)))
	}
	// Touchpoints come out of the events beyond the installs; when they
	// do not fit (installs nearly all the events), there are none.
	if p.cfg.Events-p.cfg.Users < touches {
		g.noTouch, touches = true, 0
	}
	g.extra = uint64(p.cfg.Events - p.cfg.Users - touches)
	if g.totalWeight == 0 {
		g.uniform = true
		g.totalWeight = uint64(p.cfg.Users)
	}
	if p.cfg.Persons > 0 {
		g.identifies = g.countIdentifies()
		g.anonIDs = new(anonBlock)
	}
	return g, nil
}

// Users returns the number of users of the data set (Config.Users or the
// derived default).
func (g *Generator) Users() int64 { return g.p.cfg.Users }

// Config returns the Config with its defaults filled in.
func (g *Generator) Config() Config { return g.p.cfg }

// startUser sets up user g.next: its event count (its rescaled weight), its
// attributes, lifetime and sessions, and opens its first session.
func (g *Generator) startUser() {
	i := g.next
	g.next++
	raw := g.p.rawWeight(i)
	n := g.take(&g.sh, raw)

	g.uid = g.ids.id(i, g.p.cfg.Users)
	g.r = newRNG(g.p.seed, i, streamUser)
	g.a = g.p.attrs(raw, &g.r)
	g.rx = newRNG(g.p.seed, i, streamExtra)
	g.touch.n, g.touch.next = 0, 0
	if !g.noTouch {
		g.p.drawTouches(i, g.a.channel, g.a.signup, &g.touch)
	}
	g.install, g.url, g.product = true, urlHome, 0
	g.sessions = sessionCount(n, &g.r)
	// Active lifetime: log-normal, median 2 days × n^0.7, within the span.
	life := 2 * dayMicros * math.Exp(0.7*math.Log(float64(n))+g.r.normal())
	g.life = min(life, float64(g.p.end-g.a.signup))
	g.left = n
	g.u = 0
	g.t = g.a.signup
	g.openSession()
	if g.p.cfg.Persons > 0 {
		g.startPerson(i)
	}
}

// openSession starts the next session of the current user and draws its
// length: the last session takes the rest, the others 1 + an exponential
// draw around the remaining mean, leaving at least one event per session.
func (g *Generator) openSession() {
	m := g.sessions
	g.sessions--
	g.sessionID++
	g.funnel = 0
	g.items = 0
	g.afterInstall = false
	if m == 1 {
		g.sessLeft = g.left
		return
	}
	mean := float64(g.left) / float64(m)
	l := 1 + int64(g.p.tab.expDraw(g.r.next())*(mean-1))
	g.sessLeft = min(max(l, 1), g.left-(m-1))
}

// advance returns the time step gap (µs, ≥ 0), lowered where needed so
// that the remaining g.left events (this one included) all fit before the
// end of the span: gap ≤ (end − 1 − t)/left. The product test avoids a
// division per event.
func (g *Generator) advance(gap int64) int64 {
	room := uint64(g.p.end - 1 - g.t)
	if hi, lo := bits.Mul64(uint64(gap), uint64(g.left)); hi != 0 || lo > room {
		return int64(room / uint64(g.left))
	}
	return gap
}

// Next fills ev with the next event and reports whether there was one. It
// sets UserID, Time, Name and Props (reusing ev.Props' capacity) and clears
// InsertID and Pos. The strings are immutable and stay valid after later
// calls; ev.Props is overwritten by the next call. It does not allocate in
// steady state (one allocation per 1024 users, for their ids, and one more
// with Config.Persons, for their anonymous ids).
func (g *Generator) Next(ev *event.Event) bool {
	name, price, ok := g.step()
	if !ok {
		return false
	}
	ev.UserID = g.uid
	ev.Time = g.evTime
	ev.Name = allNames[name]
	ev.InsertID = ""
	ev.Pos = event.Pos{}
	ps := append(ev.Props[:0],
		event.Prop{Name: PropPlatform, Value: event.Value{Type: event.TypeString, Str: platforms[g.a.platform]}},
		event.Prop{Name: PropChannel, Value: event.Value{Type: event.TypeString, Str: channels[g.evChannel]}},
		event.Prop{Name: PropCountry, Value: event.Value{Type: event.TypeString, Str: countries[g.a.country]}},
		event.Prop{Name: PropSessionID, Value: event.Value{Type: event.TypeInt, Int: g.sessionID}},
	)
	if price != 0 {
		ps = append(ps, event.Prop{Name: PropPrice, Value: event.Value{Type: event.TypeFloat, Float: price}})
	}
	if g.evRevenue != 0 {
		ps = append(ps, event.Prop{Name: PropRevenue, Value: event.Value{Type: event.TypeFloat, Float: g.evRevenue}})
	}
	if g.evURL >= 0 {
		ps = append(ps, event.Prop{Name: PropURL, Value: event.Value{Type: event.TypeString, Str: urls[g.evURL]}})
	}
	if g.evAnon != "" {
		ps = append(ps, event.Prop{Name: PropAnonDistinctID, Value: event.Value{Type: event.TypeString, Str: g.evAnon}})
	}
	ev.Props = ps
	return true
}

// time returns the current event's timestamp: millisecond resolution, as
// analytics SDKs send timestamps; flooring keeps trail order (a few more
// exact ties).
func (g *Generator) time() int64 { return g.t - (g.t-g.p.cfg.Start)%1000 }

// step advances to the next event and returns its event name index and
// price (0: no price property); ok is false after the last event. The
// user (g.uid, g.a) and session are in g, the event's time, channel, URL
// and revenue in g.ev….
func (g *Generator) step() (name int, price float64, ok bool) {
	if g.pstate != pNone && g.personStep() {
		return evIdentify, 0, true
	}
	if g.left == 0 && g.touch.next == g.touch.n {
		if g.next == g.p.cfg.Users {
			return 0, 0, false
		}
		g.startUser()
	}
	if tb := &g.touch; tb.next < tb.n { // an ad touchpoint before the install
		k := tb.next
		tb.next++
		g.evTime, g.evChannel, g.evURL, g.evRevenue = tb.t[k], tb.ch[k], -1, 0
		return int(tb.name[k]), 0, true
	}
	name, price = g.appStep()
	g.evTime, g.evChannel, g.evURL, g.evRevenue = g.time(), g.a.channel, -1, 0
	if g.a.platform == platformWeb {
		if name == evScreenView {
			name = evPageView
		}
		g.evURL = g.nextURL(name)
	}
	if name == evPurchase {
		g.evRevenue = g.revenue(price)
	}
	return name, price, true
}

// appStep advances to the user's next event after the touchpoints (the
// install, then the sessions) and returns its event name index and price.
func (g *Generator) appStep() (name int, price float64) {
	switch {
	case g.install:
		g.install = false
		name = evInstall
		g.afterInstall = true
	case g.items > 0:
		g.items--
		name = evPurchase
		price = g.price()
	case g.sessLeft == 0 || g.opened:
		if !g.opened { // else personStep opened it before its $identify
			g.openSession()
			g.t = g.sessionStart()
		}
		g.opened = false
		name = evAppOpen
		if g.r.next()>>62 == 0 { // 1 in 4
			name = evNotificationOpen
		}
	case g.afterInstall:
		name = evAppOpen // same timestamp as install
		g.afterInstall = false
	default:
		g.t += g.advance(eventGapMin + int64(g.p.tab.expDraw(g.r.next())*eventGapMean))
		name, price = g.pick()
	}
	g.left--
	g.sessLeft--
	return name, price
}

// sessionStart returns the start time of the session just opened. Session
// starts are the sorted order statistics of the user's remaining sessions
// drawn uniformly on [0, 1], mapped to signup + life·u² (activity decays
// after install), at least sessionGapMin plus a random jitter after the last
// event, and within the span.
func (g *Generator) sessionStart() int64 {
	m := float64(g.sessions + 1)                               // sessions left, this one included
	g.u = 1 - (1-g.u)*math.Exp(-g.p.tab.expDraw(g.r.next())/m) // (1−u)·v^(1/m)
	planned := g.a.signup + int64(g.life*g.u*g.u)
	floor := sessionGapMin + int64(g.r.next()>>41) // + up to 2.4 h of jitter
	return g.t + g.advance(max(planned-g.t, floor))
}

// pick draws the next in-session event: the next funnel step with the
// step's probability, else a general event with Zipf frequencies. A purchase
// carries the cart's price and may open a multi-item order (further purchase
// events at the same time, within the session). It returns the event and its
// price (0 for none).
func (g *Generator) pick() (int, float64) {
	x := g.r.next()
	coin := float64(uint32(x)) * 0x1p-32
	switch {
	case g.funnel == 1 && coin < funnelToCart:
		g.funnel = 2
		g.cartPrice = g.price()
		return evAddToCart, g.cartPrice
	case g.funnel == 2 && coin < funnelCheckout:
		g.funnel = 3
		return evBeginCheckout, 0
	case g.funnel == 3 && coin < funnelPurchase:
		g.funnel = 0
		// k items beyond the first with probability 2^-(k+1).
		extra := int64(bits.LeadingZeros64(g.r.next() | 1))
		g.items = min(extra, g.sessLeft-1)
		return evPurchase, g.cartPrice
	}
	name := nSpecial + g.p.tab.general.draw(x)
	g.funnel = 0
	if name == evViewItem {
		g.funnel = 1
	}
	return name, 0
}

// price draws a log-normal price rounded to cents (at least 0.01).
func (g *Generator) price() float64 {
	p := math.Round(math.Exp(priceMu+priceSigma*g.r.normal())*100) / 100
	return max(p, 0.01)
}
