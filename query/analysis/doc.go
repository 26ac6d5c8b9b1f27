// Package analysis holds Spur's in-memory analysis kernels: trends (every
// math of spec §4, breakdowns, rolling active users), ordered funnels (§5),
// retention (§6), query-time attribution (§10), stickiness (§13),
// lifecycle (§14) and paths (§15), each per breakdown key and able to list
// the users behind a number, and the cohort condition evaluator (§7). The
// attribution, stickiness, lifecycle and paths kernels take a user's trail
// in chunks (package trail: Offset, More), keeping bounded or accounted
// state between them. The
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
// accumulator, with their whole trail in one Add: counts of distinct users
// rely on it.
//
// All instants are int64 UTC microseconds; calendar buckets come from
// package query/timebucket as boundary lists.
package analysis
