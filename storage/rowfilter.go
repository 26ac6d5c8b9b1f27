package storage

import (
	"math"
	"math/bits"

	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// appendCol appends the values of the given block rows to trail column
// col.
func appendCol(col *trail.Column, src ColumnSource, b *segment.Block, rows []int32) {
	if src.Prop < 0 {
		for range rows {
			col.Set = append(col.Set, false)
			col.Bits = append(col.Bits, 0)
		}
		return
	}
	pd := &b.Props[src.Prop]
	for _, r := range rows {
		set := pd.Present[r>>6]>>(r&63)&1 != 0
		var v uint64
		if set {
			v = columnBits(pd, src, int(r))
		}
		col.Set = append(col.Set, set)
		col.Bits = append(col.Bits, v)
	}
}

// columnBits returns the value bits of present row r of pd.
func columnBits(pd *segment.PropData, src ColumnSource, r int) uint64 {
	r = pd.Index(r)
	switch src.Kind {
	case ColFloat:
		if b := math.Float64bits(pd.Floats[r]); b != 1<<63 {
			return b
		}
		return 0 // -0 as +0
	case ColString:
		return uint64(src.Remap[pd.Strs[r]])
	}
	return uint64(pd.Ints[r])
}

// filterDeltas sums a user's time deltas (see segment.Block.Deltas: the
// first from base) into times and writes every row's time and mask to
// out/outm, returning how many rows have a non-zero mask, compacted to the
// front. It is the hot loop of a scan, fused so that the block's times are
// never written to memory: one multiply-add and one table lookup per event
// and no branch on the match (the write position advances by (m | -m) >>
// 63, 1 for any non-zero m), since which events match is unpredictable.
// len(out), len(outm) ≥ len(deltas) = len(codes). It is kept out of line:
// inlined into appendRows, register pressure spilled k and t to the stack
// and the loop ran at ~11 cycles per event instead of ~3.
//
//go:noinline
func filterDeltas(out []int64, outm []uint64, deltas []uint64, codes []uint32, masks []uint64, base int64, g uint64) int {
	k := 0
	out, outm = out[:len(deltas)], outm[:len(deltas)]
	codes = codes[:len(deltas)]
	t := base
	for i, d := range deltas {
		t += int64(d * g)
		m := masks[codes[i]]
		out[k] = t
		outm[k] = m
		k += int((m | -m) >> 63)
	}
	return k
}

// filterDeltasSparse is filterDeltas for segments where few rows match
// (see cursor.sparse), also requiring from ≤ t < from+span, over the
// users u = 0..len(ends)-1 of a block at once, user u holding rows
// [starts[u], starts[u+1]) of deltas and codes. It writes the passing
// rows' times, masks and block rows back to back from out[0], outm[0] and
// rows[0], the end of user u's rows in them to ends[u], and returns the
// total. It looks for matching codes first,
// branching on the match (which the predictor gets right for almost every
// row), and sums a user's deltas only up to each match (sumDeltas): the
// deltas after a user's last match, and all of a user with none, are
// never read. One call per block: a call per user cost more than the
// rows of a typical user.
//
//go:noinline
func filterDeltasSparse(out []int64, outm []uint64, rows []int32, ends []int32, b *segment.Block, codes []uint32, starts []int32, masks []uint64, base int64, g uint64, from int64, span uint64) int {
	k, u := 0, 0
	starts = starts[:len(ends)+1]
	end := int(starts[len(ends)])
	codes = codes[:end]
	p, next := int(starts[0]), int(starts[1]) // user u's deltas[starts[u]:p] are in sum
	var sum uint64                            // wrapping, like the times
	for i := p; ; i++ {
		if i = nextMatch(codes, masks, i); i == end {
			break
		}
		m := masks[codes[i]]
		if i >= next { // the match is a later user's
			for i >= next {
				ends[u] = int32(k)
				u++
				next = int(starts[u+1])
			}
			p, sum = int(starts[u]), 0
		}
		sum += b.SumDeltas(p, i+1)
		p = i + 1
		// base + g·Σd ≡ base + Σ(g·d) (mod 2^64): the times filterDeltas sums.
		if t := base + int64(sum*g); uint64(t)-uint64(from) < span {
			out[k] = t
			outm[k] = m
			rows[k] = int32(i)
			k++
		}
	}
	for ; u < len(ends); u++ {
		ends[u] = int32(k)
	}
	return k
}

// nextMatch returns the first row r ≥ i with a non-zero masks[codes[r]],
// or len(codes). Out of line, so that the loop has registers to itself.
//
//go:noinline
func nextMatch(codes []uint32, masks []uint64, i int) int {
	// Four rows per test: one branch per four rows, and the four
	// lookups issue together (BenchmarkFilterDeltas/sparse, 2.5% of rows
	// live: 102 -> 83 µs; eight rows per test: 99 µs).
	for ; i+4 <= len(codes); i += 4 {
		c := codes[i : i+4 : i+4]
		if masks[c[0]]|masks[c[1]]|masks[c[2]]|masks[c[3]] != 0 {
			break
		}
	}
	for ; i < len(codes); i++ {
		if masks[codes[i]] != 0 {
			return i
		}
	}
	return len(codes)
}

// filterDeltasInRange is filterDeltas that also requires from ≤ t <
// from+span (span as an unsigned width, so the full int64 range works):
// the subtraction's borrow is 1 exactly when t-from < span. Out of line
// like filterDeltas.
//
//go:noinline
func filterDeltasInRange(out []int64, outm []uint64, deltas []uint64, codes []uint32, masks []uint64, base int64, g uint64, from int64, span uint64) int {
	k := 0
	out, outm = out[:len(deltas)], outm[:len(deltas)]
	codes = codes[:len(deltas)]
	t := base
	for i, d := range deltas {
		t += int64(d * g)
		m := masks[codes[i]]
		out[k] = t
		outm[k] = m
		_, in := bits.Sub64(uint64(t)-uint64(from), span, 0)
		k += int(((m | -m) >> 63) & in)
	}
	return k
}

// filterCodesAt writes every row's time and mask (masks[codes[i]]) and
// its block row s+i to out/outm/rows and returns how many rows pass (a
// non-zero mask and from ≤ t < from+span), compacted to the front: the
// row filter of blocks read with property columns, branch-free and out of
// line like filterDeltas (inlined, the loop spilled its counters).
//
//go:noinline
func filterCodesAt(out []int64, outm []uint64, rows []int32, times []int64, codes []uint32, masks []uint64, s int32, from int64, span uint64) int {
	k := 0
	out, outm, rows, codes = out[:len(times)], outm[:len(times)], rows[:len(times)], codes[:len(times)]
	for i, t := range times {
		m := masks[codes[i]]
		out[k] = t
		outm[k] = m
		rows[k] = s + int32(i)
		_, in := bits.Sub64(uint64(t)-uint64(from), span, 0)
		k += int(((m | -m) >> 63) & in)
	}
	return k
}

// filterRowsAt is filterCodesAt with per-row masks (rowMask[i]) computed
// by a SegmentPlan's Rows.
//
//go:noinline
func filterRowsAt(out []int64, outm []uint64, rows []int32, times []int64, rowMask []uint64, s int32, from int64, span uint64) int {
	k := 0
	out, outm, rows, rowMask = out[:len(times)], outm[:len(times)], rows[:len(times)], rowMask[:len(times)]
	for i, t := range times {
		m := rowMask[i]
		out[k] = t
		outm[k] = m
		rows[k] = s + int32(i)
		_, in := bits.Sub64(uint64(t)-uint64(from), span, 0)
		k += int(((m | -m) >> 63) & in)
	}
	return k
}
