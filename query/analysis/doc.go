// Package analysis holds Spur's in-memory analysis kernels: trends (every
// math of spec §4, breakdowns, rolling active users), funnels (§5, and the
// orders, exclusions, views and breakdown attributions of §11) and
// retention (§6), each per breakdown key and able to list the users
// behind a number, and the cohort condition evaluator (§7). The
// storage scan feeds them one user's Trail at a time — times, matcher
// masks, the requested event property columns and user property values —
// and they never see storage.
//
// Breakdown keys are Values (typed bits, strings as query-wide ids); a
// kernel groups by key with an allocation-free open-addressing table and
// reports results per key, ordered by key. Result can merge keys into
// groups after the fact where the math allows it (counts, sums, value
// lists); Trend's Group recomputes merged groups exactly in a second pass
// for the maths that count users.
//
// Every kernel is an accumulator with the same life cycle:
//
//	acc, err := NewX(spec, …)  // validates spec, preallocates state
//	acc.Add(&trail)             // once per user, with the user's whole trail
//	acc.Merge(other)            // combine accumulators of other shards
//	res := acc.Result(group)    // final, freshly allocated tables
//
// An accumulator is owned by one goroutine (typically one per shard). Add
// does no allocation, Go map lookup, interface call or locking per event;
// the only allocations are amortised appends of per-user values (funnel
// durations, percentile values, per-user counts), new breakdown keys, kept
// user ids of a list and per-user scratch growth, and each accumulator
// reports its memory (Bytes) for the query's budget. Merge is exact and commutative:
// the Result does not depend on how users were split between accumulators
// or the order of merges (spec §8). A user must be added to exactly one
// accumulator: counts of distinct users rely on it. Funnel.Add takes a
// user's trail in chunks (package trail) and keeps bounded state between
// them; the other kernels take the whole trail in one Add.
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
