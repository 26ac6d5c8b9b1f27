// Package analysis holds Spur's in-memory analysis kernels: trends, ordered
// funnels and retention (spec/analytics.md §4, §5, §6). The storage scan
// feeds them one user's Trail at a time; they never see storage.
//
// Every kernel is an accumulator with the same life cycle:
//
//	acc, err := NewX(spec) // validates spec, preallocates all state
//	acc.Add(trail)          // once per user, with the user's whole trail
//	acc.Merge(other)        // combine accumulators of other shards
//	res := acc.Result()     // final, freshly allocated tables
//
// An accumulator is owned by one goroutine (typically one per shard). Add
// does no allocation, map lookup, interface call or locking per event; the
// only allocations are amortised appends of per-user values (funnel
// durations) and per-user scratch growth. Merge is exact and commutative:
// the Result does not depend on how users were split between accumulators
// or the order of merges (spec §8). A user must be added to exactly one
// accumulator, with their whole trail in one Add: counts of distinct users
// rely on it.
//
// All instants are int64 UTC microseconds; calendar buckets come from
// package query/timebucket as boundary lists.
package analysis
