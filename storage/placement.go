package storage

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Placement (see the package doc): the shard of a user is a function of
// its distinct id and the app's shard count only, the same at every
// routing site (import, live ingestion, a user's trail lookup) and on
// every node.

// UserHash returns the 64-bit key of user id: xxhash64 (seed 0) of the
// id's UTF-8 bytes. It equals segment.UserHash([]byte(id)) without
// converting id, and is the hash segments sort users by.
func UserHash(id string) uint64 { return xxhash.Sum64String(id) }

// ShardOf returns the shard, in [0, shards), that holds every event and
// every user-property write of user id in an app of shards shards:
// ShardOfHash(UserHash(id), shards). shards must be a power of two in
// [1, MaxShards] (an app's Catalog.Shards); other values give a
// meaningless result.
func ShardOf(id string, shards int) int { return ShardOfHash(UserHash(id), shards) }

// ShardOfHash is ShardOf for a user whose UserHash h is already known:
// the low log2(shards) bits of h. shards must be a power of two in
// [1, MaxShards]. It inlines to one AND.
func ShardOfHash(h uint64, shards int) int { return int(h & uint64(shards-1)) }

// checkShards validates ScanSpec.Shards against an app of n shards and
// returns, when it names a subset, which shards to scan (nil: all).
func checkShards(sel []int, n int) ([]bool, error) {
	if sel == nil {
		return nil, nil
	}
	want := make([]bool, n)
	for i, sh := range sel {
		switch {
		case sh < 0 || sh >= n:
			return nil, fmt.Errorf("storage: ScanSpec.Shards[%d] = %d is out of range [0, %d)", i, sh, n)
		case i > 0 && sh <= sel[i-1]:
			return nil, fmt.Errorf("storage: ScanSpec.Shards[%d] = %d: shards must be sorted ascending without repeats (after %d)", i, sh, sel[i-1])
		}
		want[sh] = true
	}
	return want, nil
}
