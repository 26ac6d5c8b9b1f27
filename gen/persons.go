package gen

import "math/bits"

// Persons (Config.Persons, identity.md): a share of the users browse
// anonymously before they sign up and later log in on a second device.
// Which users, and their second device's session, come from a stream of
// their own (streamPersons), so every other draw — and every event of the
// other users — is the same as without persons; a person's events are the
// events the user would have had, under other ids, plus its $identify
// events.
//
// A person's trail (its events stay contiguous and in time order):
//   - device 1, anonymous: the ad touchpoints, the install and the rest of
//     the first session under the anonymous id A1 (an anonymous browse);
//   - signup: "$identify" from the user id T with $anon_distinct_id A1, at
//     the time of A1's last event, after it;
//   - the later sessions under T;
//   - device 2 (half of the persons with two sessions or more): one later
//     session, drawn uniformly, under the anonymous id A2, preceded by
//     "$identify" from T with $anon_distinct_id A2 at that session's start
//     (a login on the phone); the sessions after it are under T again.

// IdentifyEvent is the name of the event that joins an anonymous id to the
// user id it is sent from (docs/identity.md §2: identify(T, A) with T the
// event's user id and A its PropAnonDistinctID).
const IdentifyEvent = "$identify"

// PropAnonDistinctID is the string property of an IdentifyEvent that names
// the anonymous id joined to the event's user id.
const PropAnonDistinctID = "$anon_distinct_id"

// Tuning of persons.
const (
	streamPersons = 5   // random stream of the persons draws
	secondDevice  = 0.5 // share of the persons that use a second device
	anonPrefix    = "anon-"
	anonLen       = len(anonPrefix) + 16 // "anon-" + 16 hex digits
)

// evIdentify is IdentifyEvent's index in allNames (after eventNames, so the
// names of a stream without persons keep their indexes and dictionary).
const evIdentify = len(eventNames)

// allNames are eventNames and IdentifyEvent, by index.
var allNames = append(eventNames[:len(eventNames):len(eventNames)], IdentifyEvent)

// States of the current user's persons machine (Generator.pstate).
const (
	pNone    = iota // not a person, or nothing left to do
	pDevice1        // on device 1 (A1) until its first session ends
	pWait2          // identified; device 2's session is ahead
	pOpened2        // the identify of device 2 was emitted; its session follows
	pDevice2        // in device 2's session
	pClear          // the last event was an identify: clear evAnon
)

// person draws user i's persons role: devices is 0 (not a person), 1 or 2
// (uses a second device when it has a session to spare), a share
// Config.Persons of the users. r is the user's persons stream after those
// draws.
func (p *plan) person(i int64) (devices int, r rng) {
	r = newRNG(p.seed, i, streamPersons)
	if r.float() >= p.cfg.Persons {
		return 0, r
	}
	if r.float() < secondDevice {
		return 2, r
	}
	return 1, r
}

// anonKey returns the key of the data set's anonymous ids.
func (p *plan) anonKey() uint64 { return splitmix(p.seed ^ 0x616e6f6e2d696473) } // "anon-ids"

// appendAnonID appends the anonymous id of user i's device d (0 or 1):
// "anon-" and 16 lower-case hex digits of a bijection of 2i+d, so that two
// devices never share an id, and no user id ("u" + digits) is one.
func appendAnonID(b []byte, key uint64, i int64, d int) []byte {
	const hex = "0123456789abcdef"
	x := splitmix(key ^ uint64(2*i+int64(d)))
	b = append(b, anonPrefix...)
	for s := 60; s >= 0; s -= 4 {
		b = append(b, hex[x>>uint(s)&15])
	}
	return b
}

// anonBlock hands out the anonymous ids of the persons of one block of
// idBlockUsers users, allocating one string per block (the ids are
// substrings of it, valid forever).
type anonBlock struct {
	first  int64                // first user of the block
	filled bool                 // the block holds the ids of users first …
	off    [idBlockUsers]uint32 // 1 + offset of user first+k's first id in block, 0: none
	block  string
	buf    []byte
}

// ids returns user i's anonymous ids (A1, and A2 when devices is 2); i
// must be a person with that many devices.
func (b *anonBlock) ids(p *plan, i int64, devices int) (a1, a2 string) {
	if !b.filled || i < b.first || i >= b.first+idBlockUsers {
		b.fill(p, i-i%idBlockUsers)
	}
	o := int(b.off[i-b.first]) - 1
	a1 = b.block[o : o+anonLen]
	if devices == 2 {
		a2 = b.block[o+anonLen : o+2*anonLen]
	}
	return a1, a2
}

// fill builds the anonymous ids of the persons among users first …
// first+idBlockUsers−1.
func (b *anonBlock) fill(p *plan, first int64) {
	key := p.anonKey()
	b.first, b.filled = first, true
	b.buf = b.buf[:0]
	clear(b.off[:])
	for k := range int64(idBlockUsers) {
		i := first + k
		if i >= p.cfg.Users {
			break
		}
		devices, _ := p.person(i)
		if devices == 0 {
			continue
		}
		b.off[k] = uint32(len(b.buf)) + 1
		for d := range devices {
			b.buf = appendAnonID(b.buf, key, i, d)
		}
	}
	b.block = string(b.buf)
}

// startPerson sets up the persons machine of the user just started (user
// i, with its first session open): its ids, its state and device 2's
// session. Called only when Config.Persons > 0.
func (g *Generator) startPerson(i int64) {
	devices, r := g.p.person(i)
	g.user, g.evAnon, g.dev2At = g.uid, "", 0
	g.pstate = pNone
	if devices == 0 {
		return
	}
	g.anon1, g.anon2 = g.anonIDs.ids(g.p, i, devices)
	// Device 2 takes one of the sessions after the first: it opens when
	// g.sessions (the sessions not yet started) is dev2At.
	if devices == 2 && g.sessions > 0 {
		g.dev2At = 1 + int64(r.next()%uint64(g.sessions))
	}
	g.pstate = pDevice1
	if !g.p.cfg.ResolvePersons {
		g.uid = g.anon1
	}
}

// personStep runs the current person's machine before the next event: it
// returns true when the next event is an IdentifyEvent (then g.uid is the
// user id, g.evAnon the anonymous id and g.ev… its time and properties),
// after switching the event ids as the trail moves between devices.
func (g *Generator) personStep() bool {
	switch g.pstate {
	case pClear:
		g.evAnon, g.pstate = "", pNone
	case pDevice1:
		// The first session is over (touchpoints, install and the session's
		// events emitted): the signup, at the time of its last event.
		if g.sessLeft == 0 && g.touch.next == g.touch.n && !g.install {
			g.identify(g.anon1, g.evTime)
			if g.dev2At > 0 {
				g.pstate = pWait2
			}
			return true
		}
	case pWait2:
		g.evAnon = ""
		if g.sessLeft == 0 && g.left > 0 && g.sessions == g.dev2At {
			// Open device 2's session now for its start time; appStep
			// emits its opening event next (g.opened).
			g.openSession()
			g.t = g.sessionStart()
			g.opened = true
			g.identify(g.anon2, g.time())
			g.pstate = pOpened2
			return true
		}
	case pOpened2:
		g.evAnon, g.pstate = "", pDevice2
		if !g.p.cfg.ResolvePersons {
			g.uid = g.anon2
		}
	case pDevice2:
		if g.sessLeft == 0 {
			g.uid, g.pstate = g.user, pNone
		}
	}
	return false
}

// identify sets up the IdentifyEvent joining anon to the user id, at time
// t: the user's properties, the current session, no price, URL or revenue.
// The state moves to pClear unless the caller sets another.
func (g *Generator) identify(anon string, t int64) {
	g.uid, g.evAnon = g.user, anon
	g.evTime, g.evChannel, g.evURL, g.evRevenue = t, g.a.channel, -1, 0
	g.pstate = pClear
}

// countIdentifies returns the number of IdentifyEvents of the data set:
// one per person, and one more per person whose second device gets a
// session. It replays the users' event counts (startUser's rescaling) and
// session counts: O(Users), about as long as New's own pass.
func (g *Generator) countIdentifies() int64 {
	var n int64
	var sh share
	for i := range g.p.cfg.Users {
		raw := g.p.rawWeight(i)
		events := g.take(&sh, raw)
		devices, _ := g.p.person(i)
		if devices == 0 {
			continue
		}
		n++
		if devices == 2 {
			r := newRNG(g.p.seed, i, streamUser)
			g.p.attrs(raw, &r)
			if sessionCount(events, &r) > 1 {
				n++
			}
		}
	}
	return n
}

// share is the running state of the rescaling of raw weights to event
// counts (take).
type share struct {
	cumWeight uint64 // Σ weights of the users taken
	cumExtra  uint64 // extra events given to them
}

// take returns the number of events of the next user, of raw weight raw.
// Cumulative rounding: user i's extras are ⌊cumW_i·extra/totalW⌋ −
// ⌊cumW_{i−1}·extra/totalW⌋, which sum to exactly extra.
func (g *Generator) take(s *share, raw uint64) int64 {
	w := raw
	if g.uniform {
		w = 1
	}
	s.cumWeight += w
	hi, lo := bits.Mul64(s.cumWeight, g.extra)
	cum, _ := bits.Div64(hi, lo, g.totalWeight)
	n := int64(1 + cum - s.cumExtra)
	s.cumExtra = cum
	return n
}

// sessionCount draws a user's mean session length from r (the user's
// stream after its attributes) and returns its number of sessions for n
// events.
func sessionCount(n int64, r *rng) int64 {
	meanLen := 3 + 7*r.float() // the user's mean session length, events
	return 1 + int64(float64(n-1)/meanLen)
}
