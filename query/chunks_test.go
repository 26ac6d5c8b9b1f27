package query

import (
	"math/rand/v2"
	"testing"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/trail"
)

// chunkVisitor is the chunking driver: it takes each whole trail of a
// real scan and hands it to the visitor v in random chunks of about
// maxLen events (testutil.Chunks), as the scan is to hand long trails:
// for a user of several chunks first each chunk to Prepass, when v is a
// storage.PrepassVisitor, then each to Visit. Every chunk is lent as a
// fresh copy that is spoiled after the call (testutil.Lend), so that Visit
// does not see what Prepass changed and no visitor can keep a chunk.
type chunkVisitor struct {
	v      storage.Visitor
	r      *rand.Rand
	maxLen int
}

func (c *chunkVisitor) Visit(u storage.UserKey, t *trail.Trail) {
	chunks := testutil.Chunks(t, c.r, c.maxLen)
	if pv, ok := c.v.(storage.PrepassVisitor); ok && len(chunks) > 1 {
		for i := range chunks {
			testutil.Lend(&chunks[i], func(ch *trail.Trail) { pv.Prepass(u, ch) })
		}
	}
	for i := range chunks {
		testutil.Lend(&chunks[i], func(ch *trail.Trail) { c.v.Visit(u, ch) })
	}
}

// chunkLens are the chunk lengths (about that many events each) of the
// chunked scans.
var chunkLens = []int{1, 2, 3, 7, 40}

// withChunks makes the scans of an engine configured with it hand their
// trails in chunks of about maxLen events (chunkVisitor), each worker's
// drawn from its own random source for seed.
func withChunks(seed int64, maxLen int) func(*Config) {
	return func(cfg *Config) {
		cfg.chunkTrails = func(v storage.Visitor, i int) storage.Visitor {
			return &chunkVisitor{v: v, r: rand.New(rand.NewPCG(uint64(seed), uint64(i))), maxLen: maxLen}
		}
	}
}

// TestChunkedScansAgainstNaive is the end-to-end differential test
// (TestDifferentialAgainstNaive) with every trail handed to the query's
// visitors in random chunks, a user with a cohort filter shown to Prepass
// first: trends, funnels, retention tables and cohorts with every option, cohort
// filters, user property filters, breakdowns and lists must equal the
// naive reference for trails whole or chunked, and so must funnels.
func TestChunkedScansAgainstNaive(t *testing.T) {
	runSeeds(t, 200, 40, func(t *testing.T, seed int64) {
		diffSeedConfig(t, seed, withChunks(seed, chunkLens[seed%int64(len(chunkLens))]))
	})
}
