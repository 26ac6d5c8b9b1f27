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
