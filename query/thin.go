package query

import "github.com/spurdb/spur/storage"

// thinning returns the storage.Thin of an analysis that only asks, per
// user, in which of the time buckets bounds (UTC µs, increasing) a row
// of matcher bit has a row, and that also tells apart the times before
// and after each of edges (range ends inside the buckets): the rows of
// that matcher alone may be thinned to one per run in a slot, the
// slot being the longest length from bounds[0] on whose multiples every
// bound and edge lies (the gcd of their offsets). A day bucket in UTC
// gives a slot of a day; months give a day; days in a zone with daylight
// saving time, an hour.
func thinning(bit int, bounds []int64, edges ...int64) storage.Thin {
	if !thinScans {
		return storage.Thin{}
	}
	origin := bounds[0]
	var slot uint64
	for _, b := range append(bounds[1:len(bounds):len(bounds)], edges...) {
		d := uint64(b - origin)
		if b < origin {
			d = uint64(origin - b)
		}
		slot = gcd(slot, d)
	}
	if slot == 0 || slot > 1<<62 {
		return storage.Thin{}
	}
	return storage.Thin{Mask: 1 << bit, Origin: origin, Slot: int64(slot)}
}

// thinScans turns thinning on; tests turn it off to compare.
var thinScans = true

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
