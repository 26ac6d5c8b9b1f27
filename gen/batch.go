package gen

import (
	"io"
	"slices"

	"github.com/spurdb/spur/event"
)

// batchRows is the number of events per NextBatch.
const batchRows = 4096

// Dictionaries of the string columns, shared by every batch (immutable, so
// a consumer may cache per dictionary).
var (
	eventDict    = &event.Dict{Strs: eventNames[:]}
	personsDict  = &event.Dict{Strs: allNames} // event names with persons (Config.Persons > 0)
	platformDict = &event.Dict{Strs: platforms[:]}
	channelDict  = &event.Dict{Strs: channels[:]}
	countryDict  = &event.Dict{Strs: countries[:]}
	urlDict      = &event.Dict{Strs: urls}
)

// allNull is a column's Null of batchRows null rows (immutable).
var allNull = func() (a [batchRows]bool) {
	for i := range a {
		a[i] = true
	}
	return a
}()

// Close implements ingest.Reader; a generator holds nothing to release.
func (s Source) Close() error { return nil }

// Rows implements event.BatchReader: the number of events the generator
// emits in all (Config.Events, plus the $identify events with persons).
func (s Source) Rows() int64 { return s.G.p.cfg.Events + s.G.identifies }

// NextBatch implements event.BatchReader: it fills b with the next
// events (up to 4096), the same events Next would return, as columns —
// user ids, times, event names and the platform, channel and country
// properties as dictionary codes, session_id, price and revenue (null on
// events without one), url (codes; null on events without one) and, with
// Config.Persons > 0, a tenth column $anon_distinct_id (null except on
// $identify events) — so that an import skips building an event.Event per
// row
// (storage's batch path). It returns io.EOF when no event is left. Next
// and NextBatch may be mixed freely.
func (s Source) NextBatch(b *event.Batch) error {
	g := s.G
	persons := g.p.cfg.Persons > 0
	nc, names := 9, eventDict
	if persons {
		nc, names = 10, personsDict
	}
	cols := b.Columns(nc)
	user, name, plat, chn, ctry, sess, price := &cols[0], &cols[1], &cols[2], &cols[3], &cols[4], &cols[5], &cols[6]
	rev, url := &cols[7], &cols[8]
	var anon *event.Column
	if persons {
		// Null but on the few $identify rows: set in bulk, not per row.
		anon = &cols[9]
		setCol(anon, PropAnonDistinctID, event.TypeString, nil)
		anon.Strs = slices.Grow(anon.Strs, batchRows)[:batchRows]
		clear(anon.Strs)
		anon.Null = slices.Grow(anon.Null, batchRows)[:batchRows]
		copy(anon.Null, allNull[:])
	}
	setCol(user, "user_id", event.TypeString, nil)
	setCol(name, "event", event.TypeString, names)
	setCol(plat, PropPlatform, event.TypeString, platformDict)
	setCol(chn, PropChannel, event.TypeString, channelDict)
	setCol(ctry, PropCountry, event.TypeString, countryDict)
	setCol(sess, PropSessionID, event.TypeInt, nil)
	setCol(price, PropPrice, event.TypeFloat, nil)
	setCol(rev, PropRevenue, event.TypeFloat, nil)
	setCol(url, PropURL, event.TypeString, urlDict)
	b.Time = b.Time[:0]
	n := 0
	for ; n < batchRows; n++ {
		nm, p, ok := g.step()
		if !ok {
			break
		}
		user.Strs = append(user.Strs, g.uid)
		b.Time = append(b.Time, g.evTime)
		name.Codes = append(name.Codes, uint32(nm))
		plat.Codes = append(plat.Codes, uint32(g.a.platform))
		chn.Codes = append(chn.Codes, uint32(g.evChannel))
		ctry.Codes = append(ctry.Codes, uint32(g.a.country))
		sess.Ints = append(sess.Ints, g.sessionID)
		price.Floats = append(price.Floats, p)
		price.Null = append(price.Null, p == 0)
		rev.Floats = append(rev.Floats, g.evRevenue)
		rev.Null = append(rev.Null, g.evRevenue == 0)
		url.Codes = append(url.Codes, uint32(max(g.evURL, 0)))
		url.Null = append(url.Null, g.evURL < 0)
		if g.evAnon != "" { // only with persons: anon is not nil
			anon.Strs[n], anon.Null[n] = g.evAnon, false
		}
	}
	if n == 0 {
		return io.EOF
	}
	for i := range cols[:6] {
		cols[i].Null = slices.Grow(cols[i].Null[:0], n)[:n]
		clear(cols[i].Null)
	}
	b.Rows, b.Pos = n, event.Pos{}
	b.Errs = slices.Grow(b.Errs[:0], n)[:n]
	clear(b.Errs)
	b.User, b.Event, b.InsertID = user, name, nil
	b.Props = append(b.Props[:0], plat, chn, ctry, sess, price, rev, url)
	if anon != nil {
		anon.Strs, anon.Null = anon.Strs[:n], anon.Null[:n]
		b.Props = append(b.Props, anon)
	}
	return nil
}

// setCol resets c to an empty column of the given name, type and
// dictionary, keeping its memory.
func setCol(c *event.Column, name string, t event.Type, d *event.Dict) {
	c.Name, c.Type, c.Dict = name, t, d
	c.Null, c.Ints, c.Floats, c.Strs, c.Codes = c.Null[:0], c.Ints[:0], c.Floats[:0], c.Strs[:0], c.Codes[:0]
}
