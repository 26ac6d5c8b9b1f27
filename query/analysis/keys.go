package analysis

import (
	"math"
	"math/bits"

	"github.com/spurdb/spur/trail"
)

// Key is a breakdown value: a Value used to group users or events.
type Key = trail.Value

// KeyFrom says where a breakdown key comes from.
type KeyFrom uint8

// Key sources.
const (
	KeyNone  KeyFrom = iota // no breakdown: every user and event has the zero Key
	KeyEvent                // Trail.Cols[Index] of the relevant event
	KeyUser                 // Trail.User[Index]
)

// KeySource selects the breakdown key of a kernel: from an event column
// (the value on each event, or on the event a kernel designates, such as
// a funnel's step-1 event), from a user property, or none.
type KeySource struct {
	From  KeyFrom
	Index int
	// Dict, if set, names the string values among the source's keys, so
	// that an encoded state (AppendBinary) carries strings rather than
	// query-local ids and a decoder maps them into this query's ids; nil
	// sends keys as their bits. Kernels read it only to encode and decode.
	Dict KeyDict
}

// event returns the key of event i of tr. s.From must not be KeyUser.
func (s KeySource) event(tr *trail.Trail, i int) Key {
	if s.From != KeyEvent {
		return Key{}
	}
	c := &tr.Cols[s.Index]
	return Key{Bits: c.Bits[i], Set: c.Set[i]}
}

// user returns the per-user key of tr (KeyUser), or the zero Key.
func (s KeySource) user(tr *trail.Trail) Key {
	if s.From != KeyUser {
		return Key{}
	}
	return tr.User[s.Index]
}

// check reports whether tr carries the column or user value s reads.
func (s KeySource) check(tr *trail.Trail) bool {
	switch s.From {
	case KeyEvent:
		return s.Index < len(tr.Cols)
	case KeyUser:
		return s.Index < len(tr.User)
	}
	return true
}

// slotTable maps breakdown keys to dense slot numbers: an open-addressing
// hash table with linear probing (no Go map, no allocation except when it
// grows). Slot -1 marks a key the kernel drops.
type slotTable struct {
	keys  []Key
	slots []int32 // slot+1; 0 = empty entry
	n     int
	last  Key // one-entry cache: consecutive events usually share a key
	lastS int32
	has   bool
}

func hashKey(k Key) uint64 {
	h := k.Bits*0x9E3779B97F4A7C15 ^ k.Bits>>29
	if k.Set {
		h ^= 0xD6E8FEB86659FD93
	}
	return h * 0xBF58476D1CE4E5B9
}

// get returns the slot of k and true, or false when k is not in the table.
func (t *slotTable) get(k Key) (int32, bool) {
	if t.has && t.last == k {
		return t.lastS, true
	}
	if len(t.keys) == 0 {
		return 0, false
	}
	mask := uint64(len(t.keys) - 1)
	for i := hashKey(k) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if t.keys[i] == k {
			t.last, t.lastS, t.has = k, s-1, true
			return s - 1, true
		}
	}
}

// put records k → slot (k must be absent).
func (t *slotTable) put(k Key, slot int32) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := uint64(len(t.keys) - 1)
	i := hashKey(k) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.keys[i], t.slots[i] = k, slot+1
	t.n++
	t.last, t.lastS, t.has = k, slot, true
}

func (t *slotTable) grow() {
	old, oldS := t.keys, t.slots
	n := max(16, 2*len(old))
	t.keys, t.slots = make([]Key, n), make([]int32, n)
	t.n = 0
	for i, s := range oldS {
		if s != 0 {
			t.put(old[i], s-1)
		}
	}
}

// bytes returns the table's memory.
func (t *slotTable) bytes() int64 { return int64(cap(t.keys))*16 + int64(cap(t.slots))*4 }

// skipLinear is how many events skipBelow reads one by one before it
// gallops.
const skipLinear = 8

// skipBelow returns the first index k > i with times[k] ≥ bound
// (len(times) if none) for non-decreasing times. It reads the next
// skipLinear events in order, whose loop exit is the only mispredicted
// branch, then gallops (checks 1, 2, 4, … events further before a
// binary search in the last step's range), so a skip over d events costs
// O(min(d, skipLinear) + log d). In trails the next bucket is usually a
// few events away: galloping from the first event cost a mispredicted
// branch per step, a binary search over the whole rest more.
func skipBelow(times []int64, i int, bound int64) int {
	end := min(i+1+skipLinear, len(times))
	for k := i + 1; k < end; k++ {
		if times[k] >= bound {
			return k
		}
	}
	if end == len(times) {
		return end
	}
	lo, step := end, 1
	hi := lo
	for hi < len(times) && times[hi] < bound {
		lo = hi + 1
		hi += step
		step <<= 1
	}
	hi = min(hi, len(times))
	// times[lo-1] < bound (or lo = i+1), and hi = len or times[hi] ≥ bound.
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if times[m] < bound {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// bucketIndex finds the calendar bucket of a time in O(1): the span of
// the boundaries is cut into slots of 2^shift µs, at most 1/16 of the
// shortest bucket, and slots[s] is the bucket holding the slot's start,
// so a time's bucket is its slot's or (rarely) the next one. Slots are
// capped at maxBucketSlots (4 bytes each); beyond that the slots grow
// longer than some buckets and the lookup walks forward over them.
type bucketIndex struct {
	bounds   []int64 // strictly increasing, ≥ 2
	shortest int64   // the shortest bucket's length, µs
	shift    uint
	slots    []int32
}

// maxBucketSlots bounds a bucketIndex's table (1 MiB).
const maxBucketSlots = 1 << 18

func newBucketIndex(bounds []int64) bucketIndex {
	nb := len(bounds) - 1
	shortest := uint64(math.MaxUint64)
	for b := range nb {
		shortest = min(shortest, uint64(bounds[b+1]-bounds[b]))
	}
	span := uint64(bounds[nb] - bounds[0])
	// Slots of at most 1/16 of the shortest bucket: a time in a slot that
	// straddles a boundary needs the compare in of, whose branch goes
	// either way; with slots as long as the buckets most slots straddle
	// one (day buckets, 19-hour slots: 80 %), with 1/16 few do.
	shift := uint(max(bits.Len64(shortest)-1-4, 0))
	for span>>shift >= maxBucketSlots {
		shift++
	}
	slots := make([]int32, span>>shift+1)
	b := 0
	for s := range slots {
		start := bounds[0] + int64(uint64(s)<<shift)
		for b < nb-1 && bounds[b+1] <= start {
			b++
		}
		slots[s] = int32(b)
	}
	return bucketIndex{bounds: bounds, shortest: int64(shortest), shift: shift, slots: slots}
}

// of returns the bucket b with bounds[b] ≤ t < bounds[b+1]: 0 for t
// before bounds[0], len(bounds)-1 for t at or after the last boundary.
func (x *bucketIndex) of(t int64) int {
	nb := len(x.bounds) - 1
	if t < x.bounds[0] {
		return 0
	}
	s := uint64(t-x.bounds[0]) >> x.shift
	if s >= uint64(len(x.slots)) {
		return nb
	}
	b := int(x.slots[s])
	for b < nb && t >= x.bounds[b+1] {
		b++
	}
	return b
}

// reset empties the table, keeping its memory.
func (t *slotTable) reset() {
	if t.n > 0 {
		clear(t.slots)
		t.n = 0
	}
	t.has = false
}
