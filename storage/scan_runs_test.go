package storage

import (
	"math/rand/v2"
	"testing"
)

// TestRunsPartition checks the chains the scan builds from a shard's
// segments: every segment exactly once, segments without a hash range
// alone, within a chain strictly ascending disjoint ranges, and no more
// chains than the largest number of known ranges sharing one hash (the
// optimum of interval partitioning).
func TestRunsPartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var sc chainScratch
	for iter := range 500 {
		n := rng.IntN(12)
		refs := make([]SegmentRef, n)
		for i := range refs {
			refs[i].Seq = int64(i)
			if rng.IntN(4) > 0 {
				a, b := rng.Uint64N(40), rng.Uint64N(40)
				refs[i].FirstHash, refs[i].LastHash = min(a, b)+1, max(a, b)+1
			}
		}
		seen := make(map[int64]int)
		unknown := 0
		chains := chainSegments(refs, &sc)
		for _, ch := range chains {
			for j, r := range ch {
				seen[r.Seq]++
				if r.FirstHash == 0 && r.LastHash == 0 {
					unknown++
					if len(ch) != 1 {
						t.Fatalf("iter %d: segment without a range shares a chain: %+v", iter, ch)
					}
				}
				if j > 0 && ch[j-1].LastHash >= r.FirstHash {
					t.Fatalf("iter %d: chain ranges overlap or descend: %+v", iter, ch)
				}
			}
		}
		for i := range refs {
			if seen[int64(i)] != 1 {
				t.Fatalf("iter %d: segment %d appears %d times", iter, i, seen[int64(i)])
			}
		}
		depth := 0
		for h := uint64(1); h <= 41; h++ {
			d := 0
			for _, r := range refs {
				if r.FirstHash != 0 && r.FirstHash <= h && h <= r.LastHash {
					d++
				}
			}
			depth = max(depth, d)
		}
		if len(chains)-unknown != depth || countRuns(refs) != len(chains) {
			t.Fatalf("iter %d: %d chains for known ranges of depth %d", iter, len(chains)-unknown, depth)
		}
	}
}
