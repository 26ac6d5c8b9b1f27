package query

import "github.com/spurdb/spur/storage"

// thinning returns the storage.Thin of an analysis that only asks, per
// user, in which of the time buckets bounds (UTC µs, increasing) the user
// has a row of matcher bit, and whether before or after each of edges
// (range ends inside the buckets): the rows with that matcher's bit alone
// may be thinned to the first of each run in a slot. The slot is the
// longest length from bounds[0] on whose multiples every bound and edge
// lies (the gcd of their offsets): a day for day buckets in UTC and for
// months, an hour for days in a zone with daylight saving time. It
// returns the zero Thin (no thinning) with Config.NoThinning.
func (e *Engine) thinning(bit int, bounds []int64, edges ...int64) storage.Thin {
	if e.cfg.NoThinning {
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

// gcd returns the greatest common divisor of a and b (gcd(0, b) = b).
func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
