package gen

import (
	"math"
	"strconv"
)

// What the marketing analyses need (query-time attribution, paths by
// URL): ad touchpoints before the install, page views and URLs on the web,
// revenue on purchases. Each is drawn from a stream of its own, so that
// the events the generator made before (sessions, names, prices) keep
// their random draws.

// Touchpoints of a user, before the install (Airbridge's and AppsFlyer's
// shape of mobile acquisition: impressions over the days before, a click
// minutes to hours before the install).
const (
	maxTouches     = 8                   // touchpoints per user at most
	touchWindow    = 7 * dayMicros       // impressions fall in the 7 days before the install
	clickMeanDelay = 40 * 60 * 1_000_000 // µs, mean time from the last click to the install (exponential)
	clickGapMin    = 3600 * 1_000_000    // µs, a second click comes 1 to 48 hours before the last
	clickGapSpan   = 47 * 3600 * 1_000_000
)

// Channel indexes (channels).
const (
	chOrganic = iota
	chPaidSearch
	chSocial
	chReferral
	chEmail
)

// touchBuf holds the current user's touchpoints in time order.
type touchBuf struct {
	n, next int
	t       [maxTouches]int64 // µs, millisecond resolution
	name    [maxTouches]uint8 // evAdImpression or evAdClick
	ch      [maxTouches]uint8 // the ad's channel (channels index)
}

// touchCounts draws the numbers of ad impressions and clicks of a user
// acquired through channel ch: organic users see an impression now and
// then (30 %: 1 or 2) and click none; paid search and social users see 1
// to 3 impressions and click once (75 %) or twice; referral and email
// users click once or twice and see an impression in 25 % of cases.
func touchCounts(r *rng, ch uint8) (imps, clicks int) {
	switch ch {
	case chOrganic:
		if r.float() < 0.3 {
			imps = 1 + int(r.next()%2)
		}
		return imps, 0
	case chPaidSearch, chSocial:
		imps = 1 + int(r.next()%3)
	default:
		if r.next()>>62 == 0 {
			imps = 1
		}
	}
	clicks = 1
	if r.next()>>62 == 0 {
		clicks = 2
	}
	return imps, clicks
}

// touchCount returns the number of touchpoints of user i, acquired
// through channel ch (as drawTouches will make them).
func (p *plan) touchCount(i int64, ch uint8) int {
	r := newRNG(p.seed, i, streamTouch)
	imps, clicks := touchCounts(&r, ch)
	return imps + clicks
}

// userChannel returns user i's acquisition channel without drawing the
// other attributes (attrs draws the platform, then the channel).
func (p *plan) userChannel(i int64) uint8 {
	r := newRNG(p.seed, i, streamUser)
	r.next()
	return uint8(p.tab.channel.draw(r.next()))
}

// drawTouches fills b with user i's touchpoints before the install at
// signup: clicks in the user's channel, the last one an exponential
// delay (mean 40 min) before the install, a second one 1 to 48 hours
// earlier; impressions uniform over the 7 days before the install, in
// the user's channel (70 %, for paid search and social) or in paid
// search or social. Times are clamped to the span's start (then spread
// 1 ms apart) and kept in time order.
func (p *plan) drawTouches(i int64, ch uint8, signup int64, b *touchBuf) {
	r := newRNG(p.seed, i, streamTouch)
	imps, clicks := touchCounts(&r, ch)
	b.n, b.next = 0, 0
	add := func(t int64, name int, c uint8) {
		t = max(t, p.cfg.Start)
		t -= (t - p.cfg.Start) % 1000
		k := b.n
		for k > 0 && b.t[k-1] > t { // insertion in time order (stable)
			b.t[k], b.name[k], b.ch[k] = b.t[k-1], b.name[k-1], b.ch[k-1]
			k--
		}
		b.t[k], b.name[k], b.ch[k] = t, uint8(name), c
		b.n++
	}
	last := signup - 1000 - int64(p.tab.expDraw(r.next())*clickMeanDelay)
	for k := range clicks {
		if k > 0 {
			last -= clickGapMin + int64(r.float()*clickGapSpan)
		}
		add(last, evAdClick, ch)
	}
	for range imps {
		t := signup - 1000 - int64(r.float()*touchWindow)
		c := uint8(chPaidSearch + r.next()>>63) // paid search or social
		if (ch == chPaidSearch || ch == chSocial) && r.float() < 0.7 {
			c = ch
		}
		add(t, evAdImpression, c)
	}
	// Touchpoints clamped to the span's start would share one instant,
	// whose order (the tie-break of last touch) a table sorted by time
	// does not keep: 1 ms apart instead, still before the install.
	for k := 1; k < b.n; k++ {
		if b.t[k] <= b.t[k-1] && b.t[k-1]+1000 < signup {
			b.t[k] = b.t[k-1] + 1000
		}
	}
}

// URLs of the web: the page an event happens on (PostHog's $current_url).
// The table is immutable; urlHome … are indexes into it, products and
// categories follow the named pages.
const (
	urlHome = iota
	urlDeals
	urlSearch
	urlCart
	urlCheckout
	urlComplete
	urlAccount
	urlLogin
	urlSignup
	urlHelp
	nNamedURLs
	nCategories = 8
	nProducts   = 200
	urlCategory = nNamedURLs                // first category URL
	urlProduct  = urlCategory + nCategories // first product URL
)

// urls is every URL the generator emits, by index.
var urls = func() []string {
	u := []string{"/", "/deals", "/search", "/cart", "/checkout", "/checkout/complete", "/account", "/login", "/signup", "/help"}
	for _, c := range []string{"shoes", "shirts", "pants", "bags", "watches", "toys", "books", "garden"} {
		u = append(u, "/category/"+c)
	}
	for k := range nProducts {
		u = append(u, "/product/"+strconv.Itoa(k))
	}
	return u
}()

// URL rules: the page an event moves to, by event name.
const (
	ruleStay     = iota // the event happens on the current page
	ruleHome            // the landing page
	rulePage            // a page view: a landing page, a category or the search (Zipf)
	ruleProduct         // a new product page (Zipf over products)
	ruleCartItem        // the current product page (the item added to the cart)
	ruleCategory        // a category page (uniform)
	ruleFixed           // urlFixed[name]
)

// urlRules gives each event name its rule; urlFixed the page of
// ruleFixed names.
var urlRules, urlFixed = func() ([]uint8, []uint8) {
	rules := make([]uint8, len(eventNames))
	fixed := make([]uint8, len(eventNames))
	set := func(name string, rule uint8, url uint8) {
		for i, n := range eventNames {
			if n == name {
				rules[i], fixed[i] = rule, url
				return
			}
		}
		panic("gen: no event " + name)
	}
	for _, n := range []string{"install", "app_open", "notification_open"} {
		set(n, ruleHome, 0)
	}
	set("page_view", rulePage, 0)
	set("view_item", ruleProduct, 0)
	set("add_to_cart", ruleCartItem, 0)
	set("view_item_list", ruleCategory, 0)
	set("select_item", ruleCategory, 0)
	set("view_promotion", ruleFixed, urlDeals)
	set("select_promotion", ruleFixed, urlDeals)
	set("search", ruleFixed, urlSearch)
	set("view_cart", ruleFixed, urlCart)
	set("remove_from_cart", ruleFixed, urlCart)
	for _, n := range []string{"begin_checkout", "add_shipping_info", "add_payment_info"} {
		set(n, ruleFixed, urlCheckout)
	}
	set("purchase", ruleFixed, urlComplete)
	set("login", ruleFixed, urlLogin)
	set("logout", ruleFixed, urlLogin)
	set("sign_up", ruleFixed, urlSignup)
	set("profile_update", ruleFixed, urlAccount)
	set("settings_change", ruleFixed, urlAccount)
	return rules, fixed
}()

// pageTargets are the destinations of a page view, drawn with Zipf
// weights in this order (tables.page).
var pageTargets = []uint8{urlHome, urlDeals, urlSearch, urlCategory, urlCategory + 1, urlCategory + 2, urlHelp,
	urlCategory + 3, urlCategory + 4, urlCategory + 5, urlCategory + 6, urlCategory + 7, urlAccount}

// nextURL moves a web user's current page (g.url) for event name and
// returns it: landing pages for app opens, Zipf-distributed products for
// item views, and so on (urlRules). Draws come from the user's extra
// stream.
func (g *Generator) nextURL(name int) int {
	switch urlRules[name] {
	case ruleHome:
		g.url = urlHome
	case rulePage:
		g.url = int(pageTargets[g.p.tab.page.draw(g.rx.next())])
	case ruleProduct:
		g.product = g.p.tab.product.draw(g.rx.next())
		g.url = urlProduct + g.product
	case ruleCartItem:
		g.url = urlProduct + g.product
	case ruleCategory:
		g.url = urlCategory + int(g.rx.next()%nCategories)
	case ruleFixed:
		g.url = int(urlFixed[name])
	}
	return g.url
}

// revenue returns what a purchase of an item at price earned: the price
// less a discount of 10, 20 or 30 % on one purchase in four, in cents.
func (g *Generator) revenue(price float64) float64 {
	x := g.rx.next()
	if x>>62 != 0 {
		return price
	}
	d := float64(1+x%3) / 10
	return max(math.Round(price*(1-d)*100)/100, 0.01)
}
