package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestTieredWriteAmplification simulates an hour of steady live ingestion
// into one shard — a flush every 30 s — with tiered compaction after each
// flush (outputs as large as their inputs), and checks docs/ingest.md §2's
// bound: write amplification (bytes written by flushes and compactions
// over bytes flushed) ≤ 10, with the runs a scan merges staying few.
func TestTieredWriteAmplification(t *testing.T) {
	for _, flushBytes := range []int64{64 << 10, 1 << 20, 5 << 20, 64 << 20} {
		c := &Catalog{App: "app", Shards: 1, NextSeq: 0}
		var flushed, written int64
		maxRuns := 0
		for flush := range 120 { // an hour of 30-second flushes
			seq := c.NextSeq
			c.NextSeq++
			c.Segments = append(c.Segments, SegmentRef{File: fmt.Sprintf("f%d", flush), Kind: KindEvents, SeqMin: seq, SeqMax: seq, Bytes: flushBytes, Rows: 1, Users: 1})
			flushed += flushBytes
			written += flushBytes
			for {
				groups := planTiered(c)
				if len(groups) == 0 {
					break
				}
				g := groups[0]
				var out int64
				in := map[string]bool{}
				for _, r := range g.inputs {
					out += r.Bytes
					in[r.File] = true
				}
				written += out
				var next []SegmentRef
				for _, r := range c.Segments {
					if !in[r.File] {
						next = append(next, r)
					}
				}
				c.Segments = append(next, SegmentRef{File: fmt.Sprintf("c%d-%d", flush, g.seqMax), Kind: KindEvents,
					SeqMin: g.seqMin, SeqMax: g.seqMax, Bytes: out, Rows: 1, Users: 1})
				sortSegments(c.Segments)
				if err := checkSeqRanges(c.Segments); err != nil {
					t.Fatal(err)
				}
			}
			maxRuns = max(maxRuns, len(c.Segments))
		}
		wa := float64(written) / float64(flushed)
		t.Logf("flushes of %d KiB: write amplification %.2f, at most %d runs", flushBytes>>10, wa, maxRuns)
		if wa > 10 || maxRuns > 4*TierFanout {
			t.Errorf("flushes of %d bytes: write amplification %.2f, %d runs", flushBytes, wa, maxRuns)
		}
	}
}

// TestTieredCompactionKeepsTrails runs tiered compaction on a real app
// grown by many small imports: the trails stay the same, the segments of
// each shard keep disjoint arrival ranges, and runs of one tier merge.
func TestTieredCompactionKeepsTrails(t *testing.T) {
	st := openTest(t, 2)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(9, 9))
	var ids idPool
	var m trailModel
	for i := range 20 {
		evs := compactEvents(r, 40, 20, 1_600_000_000_000_000+int64(i)*1_000_000, &ids)
		m.addEvents(evs)
		if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := st.App("app")
	before := len(a.Current().Segments)
	rep, err := a.Compact(ctx, CompactOptions{Tiered: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Groups == 0 || rep.SegmentsAfter >= before {
		t.Fatalf("tiered compaction of %d small segments: %+v", before, rep)
	}
	sameTrails(t, "after tiered compaction", recordTrails(t, snapOf(t, a)), m.trails())
	if err := checkSeqRanges(a.Current().Segments); err != nil {
		t.Fatal(err)
	}
}
