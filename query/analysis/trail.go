package analysis

// Trail is the part of one user's trail that an analysis sees: the events
// that matched at least one of the query's matchers, in trail order
// (timestamp, then arrival; spec §1). Slices are borrowed until the next
// Add; kernels never retain them.
//
// Matcher bits are assigned by the query layer: trend series i ↔ bit i;
// funnel step k (1-based) ↔ bit k-1; retention start matcher A ↔ bit 0 and
// return matcher B ↔ bit 1. Bits a kernel does not use are ignored.
// len(Mask) must be ≥ len(Times); Mask[i] belongs to Times[i].
type Trail struct {
	Times []int64  // UTC microseconds, non-decreasing
	Mask  []uint64 // Mask[i] bit j set: event i matches matcher j
}
