package storage

import (
	"cmp"
	"math/bits"
	"slices"
)

// Tiered compaction (docs/ingest.md §2) keeps the number of segments a scan
// merges low while live ingestion flushes new segments every few seconds,
// without rewriting the old data at every flush. Per shard and kind the
// segments are taken in arrival order as runs — the parts of one
// compaction output share an arrival range and count as one run — and
// each run has a size tier:
//
//	tier = ⌊log_F(max(bytes, TierBaseBytes) / TierBaseBytes)⌋
//
// When F consecutive runs (in arrival order) have the same tier, they are
// merged into one run, about one tier up. An event is so rewritten about
// once per tier: write amplification ≈ 1 + log_F(total / flush size),
// 8 for a year of 30-second flushes of 64 KiB with F = 8. Merging only
// consecutive runs keeps the arrival ranges of a shard's segments
// disjoint (catalog rule), which the scan's tie order relies on.
const (
	// TierFanout is F: how many runs of one tier are merged at once.
	TierFanout = 8
	// TierBaseBytes is the size of tier 0's runs and below, bytes: flushes
	// smaller than it rewrite more (each merge of tier 0 holds less).
	TierBaseBytes = 64 << 10
)

// tierRun is one run of a shard and kind for planTiered: segments sharing
// an arrival range (the parts of one output), and their size.
type tierRun struct {
	refs  []SegmentRef
	bytes int64
}

// tierOf returns a run's tier.
func tierOf(bytes int64) int {
	q := uint64(max(bytes, TierBaseBytes) / TierBaseBytes) // ≥ 1
	// ⌊log_8 q⌋ = ⌊log2 q / 3⌋
	return (bits.Len64(q) - 1) / 3
}

// planTiered returns the compaction groups tiered compaction calls for in
// catalog m: per shard and kind, the first window of TierFanout
// consecutive runs of one tier (in arrival order), the largest groups
// first. Each group's inputs cover a contiguous arrival range.
func planTiered(m *Catalog) []compactGroup {
	type key struct {
		kind  SegmentKind
		shard int
	}
	byKey := map[key][]SegmentRef{}
	for _, ref := range m.Segments {
		k := key{ref.Kind, ref.Shard}
		byKey[k] = append(byKey[k], ref)
	}
	var groups []compactGroup
	for k, refs := range byKey {
		sortSegments(refs)
		var runs []tierRun
		for _, r := range refs {
			if n := len(runs); n > 0 && runs[n-1].refs[0].SeqMin == r.SeqMin && runs[n-1].refs[0].SeqMax == r.SeqMax {
				runs[n-1].refs = append(runs[n-1].refs, r)
				runs[n-1].bytes += r.Bytes
				continue
			}
			runs = append(runs, tierRun{refs: []SegmentRef{r}, bytes: r.Bytes})
		}
		for i := 0; i+TierFanout <= len(runs); i++ {
			t := tierOf(runs[i].bytes)
			j := i + 1
			for j < len(runs) && j-i < TierFanout && tierOf(runs[j].bytes) == t {
				j++
			}
			if j-i < TierFanout {
				continue
			}
			g := compactGroup{shard: k.shard, kind: k.kind, seqMin: runs[i].refs[0].SeqMin, seqMax: runs[j-1].refs[0].SeqMax}
			for _, run := range runs[i:j] {
				g.inputs = append(g.inputs, run.refs...)
				for _, r := range run.refs {
					g.rows += r.Rows
				}
			}
			groups = append(groups, g)
			break
		}
	}
	slices.SortStableFunc(groups, func(x, y compactGroup) int {
		return cmp.Or(cmp.Compare(y.rows, x.rows), cmp.Compare(x.shard, y.shard), cmp.Compare(x.kind, y.kind))
	})
	return groups
}
