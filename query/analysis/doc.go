// Package analysis holds Spur's in-memory analysis kernels: trends (every
// math of docs/analytics.md §4, breakdowns, rolling active users), funnels (§5, and the
// orders, exclusions, views and breakdown attributions of §11), retention
// (§6), query-time attribution (§10), stickiness (§13), lifecycle (§14)
// and paths (§15), each per breakdown key and able to list the users
// behind a number, and the cohort condition evaluator (§7). The storage
// scan feeds them one user's trail at a time, in chunks (package trail:
// Offset, More) — times, matcher masks, the requested event property
// columns and user property values — and they never see storage.
//
// Breakdown keys are Values (typed bits, strings as query-wide ids); a
// kernel groups by key with an allocation-free open-addressing table and
// reports results per key, ordered by key. Result can merge keys into
// groups after the fact where the math allows it (counts, sums, value
// lists); a spec's Group (a KeyGroup: kept keys and an "(other)" key, as
// data) recomputes merged groups exactly in a second pass for the maths
// that count users.
//
// Every kernel is an accumulator with the same life cycle:
//
//	acc, err := NewX(spec, …)      // validates spec, preallocates state
//	acc.Add(&chunk)                 // per chunk of each user's trail, in order
//	err = acc.Merge(other)          // combine accumulators of other shards
//	res := acc.Result(group)        // final, freshly allocated tables
//	b, err := acc.AppendBinary(nil) // the mergeable state, portable
//	other, err := DecodeX(spec, b)  // … read back by a query of the same spec
//
// An accumulator is owned by one goroutine (typically one per shard). Add
// does no allocation, Go map lookup, interface call or locking per event;
// the only allocations are amortised appends of per-user values (funnel
// durations, percentile values, per-user counts), new breakdown keys, kept
// user ids of a list and per-user scratch growth, and each accumulator
// reports its memory (Bytes) for the query's budget. Merge is exact and commutative:
// the Result does not depend on how users were split between accumulators
// or the order of merges (docs/analytics.md §8). A user must be added to exactly one
// accumulator, which counts distinct users on it. Merge of an accumulator
// of another spec returns an error wrapping ErrState (never panics).
//
// Portable partial states (codec.go): each kernel keeps its mergeable
// state (per-key counters, cells, lists) in a struct apart from its
// per-user scratch (marks, walkers, the current user's entries), and
// encodes exactly the mergeable part: a version byte, the kind, the
// spec's fingerprint (a hash of its canonical parameters, so that a
// state of another query is refused), then the state, with string keys
// as their strings when a KeyDict names them (KeySource.Dict,
// AttributionSpec.ChannelDict, PathsSpec.Items; mapped into the
// receiving query's ids on decode). An in-process Merge compares the
// two specs field by field; a decode compares the fingerprints.
// Decoders are strict: truncated, trailing, out-of-range or inconsistent
// input is an error, and no length field allocates more than the input
// can fill.
//
// A user's trail comes as one or more chunks by the rules of package
// trail: Add is called with each in turn, without another user's chunk in
// between; the first has Offset 0 (a new user), all but the last More (the
// trail continues), and no chunk splits a group of equal timestamps. The
// result is the same however a trail is cut. Between the chunks of a user
// a kernel keeps only bounded state — marks per breakdown key and series,
// the user's retention entries (at most one per cohort bucket), a count
// per cohort condition — or state it counts in Bytes; a trail of one chunk
// (Offset 0, More false) takes the same path, as fast as before chunks. A
// cohort condition is evaluated the same way, chunk by chunk
// (CohortState), and decided after the last chunk.
//
// Funnels: FunnelUser is the allocation-free walk of the ordered funnel
// (the common case); a general walker (funnel_walk.go) runs strict order,
// exclusions and conversion over time as variations of the same walk over
// an explicit, pruned set of attempts, and another (funnel_unordered.go)
// the windows of the unordered funnel. Per-row breakdown attributions run
// one walker per value (funnel_rows.go).
//
// All instants are int64 UTC microseconds; calendar buckets come from
// package query/timebucket as boundary lists.
package analysis
