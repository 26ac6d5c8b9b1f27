// Package trail is the contract between the storage scan and the analysis
// kernels: one user's trail (docs/analytics.md §1: the user's events ordered by
// timestamp, then arrival), as typed columns, handed over in bounded
// chunks.
//
// # Chunks
//
// The scan hands a kernel a user's trail as one or more consecutive
// chunks, each a *Trail, so that one very long trail never has to be held
// in memory at once (docs/storage.md §5):
//
//   - the chunks of one user arrive one after the other, to the same
//     visitor, with no other user's chunk between them;
//   - Offset is the number of the user's events in the earlier chunks
//     (0 on the first chunk), so Offset+i is event i's index in the
//     user's whole trail;
//   - More is true on every chunk but the last;
//   - a chunk never splits a group of events with equal timestamps: all
//     of a user's events at one instant are in one chunk, so a kernel
//     that processes tie groups as a whole (the funnel) sees each group
//     whole;
//   - every chunk holds at least one event, except the single, empty
//     chunk of a user visited without passing events (a scan of all
//     users);
//   - User and ID are the same on every chunk of a user.
//
// A kernel keeps, between the chunks of a user, only state that is
// bounded or that it counts in its reported memory; the slices of a chunk
// are borrowed until the call returns. Most trails fit in one chunk
// (Offset 0, More false), which kernels may treat as their fast path.
package trail

// Trail is the part of one user's trail that an analysis sees: the events
// that matched at least one of the query's matchers, in trail order
// (timestamp, then arrival; docs/analytics.md §1), with the event property columns and
// user property values the query asked for: one chunk of it (see the
// package documentation). Slices are borrowed until the next Add; kernels
// never retain them (they copy ID when they list a user).
//
// Matcher bits are assigned by the query layer: trend series carry their
// bit in analysis.TrendSeries.Bit; funnel step k (1-based) ↔ bit k-1; retention
// start matcher A ↔ bit 0 and return matcher B ↔ bit 1. Bits a kernel does
// not use are ignored, and an event whose kernel bits are all 0 changes
// nothing. len(Mask) must be ≥ len(Times); Mask[i] belongs to Times[i].
type Trail struct {
	Times []int64  // UTC microseconds, non-decreasing
	Mask  []uint64 // Mask[i] bit j set: event i matches matcher j
	// Cols[j] is the j-th event property column of the query, one entry
	// per event (len(Set) = len(Bits) = len(Times)).
	Cols []Column
	// User[j] is the user's current value of the j-th user property of
	// the query (docs/analytics.md §1: the latest write wins).
	User []Value
	// ID is the user id, used only to list users.
	ID []byte
	// Offset is the index, in the user's whole trail, of Times[0]: the
	// number of events in the user's earlier chunks.
	Offset int
	// More reports that the user's trail continues in the next chunk.
	More bool
}

// Column holds one event property for the events of a trail. Set[i]
// reports whether event i has the property; Bits[i] is its value (0 when
// not set), encoded as described on Value.
type Column struct {
	Set  []bool
	Bits []uint64
}

// Value is one property value in the kernels' type-erased form: Set false
// means "not set" (rendered "(none)"); otherwise Bits holds the int64 of
// an int, bool (0/1) or time (UTC µs) property, math.Float64bits of a
// float property (with -0 stored as +0), or the query-wide value id of a
// string property (an index into the query's dictionary of that property).
// The query layer knows which; kernels only compare Values for equality,
// except the property maths of TrendSeries, which are told the type.
type Value struct {
	Bits uint64
	Set  bool
}
