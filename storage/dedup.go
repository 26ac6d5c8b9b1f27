package storage

import (
	"slices"

	"github.com/spurdb/spur/storage/segment"
)

// tieRow is an event at a tie time in one block: its block row, event
// name and insert id (both borrowed from the segment's dictionaries) and
// whether it passes the scan.
type tieRow struct {
	row       int32
	name, iid string
	pass      bool
}

// dedupTies drops duplicate events across segments from the merged trail
// buffer (a user's trail, or a round of mergeLong, which holds every
// event at each time it merges) (docs/ingest.md §3, Mixpanel's rule): two events of one user with equal
// event name, timestamp and insert_id are one, and the first stored — the
// earlier arrival, so the earlier part of the user's group — wins.
// Writers keep a segment free of duplicates, so only events with equal
// timestamps from different segments can be copies, and mergeParts flags
// when the trail holds such ties. For each tie time, the rows of every
// part at that time are read whole from their blocks (re-read when
// mergeLong moved the cursor on), also those that do not pass the scan:
// a first copy the query filters out still makes a later passing copy a
// duplicate when both are at the tie. A tie is seen where passing events
// of two parts meet: a later copy that passes alone, its first copy
// filtered out by a row condition (copies with other properties) or in a
// segment the scan skips, is kept until compaction drops it. The
// insert-id column is decoded only here. It returns read errors.
func (sc *shardScanner) dedupTies(group []*cursor) error {
	t := &sc.trail
	times := t.Times
	n := len(times)
	drop := sc.drop[:0]
	for i := 0; i < n; {
		j := i + 1
		for j < n && times[j] == times[i] {
			j++
		}
		if j-i > 1 && sc.multiPart(i, j) {
			var err error
			if drop, err = sc.dedupAt(group, i, j, drop); err != nil {
				return err
			}
		}
		i = j
	}
	sc.drop = drop
	if len(drop) > 0 {
		sc.removeRows(drop)
	}
	return nil
}

// partOf returns the trail buffer part a merged event came from.
func (sc *shardScanner) partOf(merged int) int32 {
	pos := int(sc.perm[merged])
	k, _ := slices.BinarySearch(sc.bounds, pos+1)
	return int32(k - 1)
}

// multiPart reports whether merged events [i, j) come from several parts.
func (sc *shardScanner) multiPart(i, j int) bool {
	p := sc.partOf(i)
	for k := i + 1; k < j; k++ {
		if sc.partOf(k) != p {
			return true
		}
	}
	return false
}

// dedupAt handles the tie group of merged events [i, j) (one timestamp):
// it appends to drop the merged positions of the later copies.
func (sc *shardScanner) dedupAt(group []*cursor, i, j int, drop []int) ([]int, error) {
	tt := sc.trail.Times[i]
	seen := sc.seen[:0]
	for _, src := range sc.srcs {
		rows, err := sc.tieRows(group[src.cursor], src, tt)
		if err != nil {
			return drop, err
		}
		// The passing rows of this part at tt are, in order, the merged
		// events of [i, j) that came from its part.
		next := i
		for _, r := range rows {
			pos := -1
			if r.pass && src.part >= 0 {
				for next < j && sc.partOf(next) != src.part {
					next++
				}
				if next < j {
					pos = next
					next++
				}
			}
			if r.iid == "" {
				continue
			}
			dup := slices.ContainsFunc(seen, func(k [2]string) bool { return k[0] == r.name && k[1] == r.iid })
			switch {
			case dup && pos >= 0:
				drop = append(drop, pos)
			case !dup:
				seen = append(seen, [2]string{r.name, r.iid})
			}
		}
	}
	sc.seen = seen
	return drop, nil
}

// tieRows returns the rows of src's user in src's block with time tt,
// every one, with event names, insert ids and whether they pass. The
// result is sc's scratch, valid until the next call.
func (sc *shardScanner) tieRows(c *cursor, src partSrc, tt int64) ([]tieRow, error) {
	iidCol := insertIDColumn(c.meta)
	b, timed := &c.blk, !c.deltas
	if int(src.block) != c.block || iidCol >= 0 {
		// The insert ids (and the block, when the cursor moved on): read
		// the block again, with the plan's columns (for row masks) and
		// the insert ids. Rare: only ties across segments get here.
		props := append(sc.tieProps[:0], c.plan.Props...)
		if iidCol >= 0 {
			props = append(props, iidCol)
		}
		sc.tieProps = props
		if err := c.r.ReadBlock(int(src.block), props, &sc.tieBlk); err != nil {
			return nil, err
		}
		sc.tieBytes = sc.tieBlk.Bytes()
		b, timed = &sc.tieBlk, true
	}
	s, e := int(b.UserStarts[src.user]), int(b.UserStarts[src.user+1])
	out := sc.ties2[:0]
	var rowMask []uint64
	switch {
	case c.rowWise && b == &c.blk:
		rowMask = c.rowMask
	case c.rowWise:
		rowMask = slices.Grow(sc.tieMask[:0], b.Rows)[:b.Rows]
		c.plan.Rows(b, rowMask) // the plan's columns come first in props
		sc.tieMask = rowMask
	}
	inRange := tt >= sc.spec.From && tt < sc.spec.To
	for r := s; r < e; r++ {
		if rowTime(b, timed, r, s) != tt {
			continue
		}
		code := b.Events[r]
		tr := tieRow{row: int32(r), name: c.meta.EventNames[code]}
		if rowMask != nil {
			tr.pass = inRange && rowMask[r] != 0
		} else {
			tr.pass = inRange && c.masks[code] != 0
		}
		if iidCol >= 0 {
			pd := &b.Props[len(b.Props)-1]
			if pd.Present[r>>6]>>(r&63)&1 != 0 {
				tr.iid = c.meta.Props[iidCol].Dict[pd.Strs[pd.Index(r)]]
			}
		}
		out = append(out, tr)
	}
	sc.ties2 = out
	return out, nil
}

// rowTime returns the time of block row r, whose user's rows start at s,
// from the block's times (timed) or, for blocks read with deltas, their
// sums.
func rowTime(b *segment.Block, timed bool, r, s int) int64 {
	if timed {
		return b.Times[r]
	}
	return b.TimeBase + int64(b.SumDeltas(s, r+1)*b.TimeGCD)
}

// removeRows removes the merged events at the ascending positions drop
// from the trail buffer.
func (sc *shardScanner) removeRows(drop []int) {
	slices.Sort(drop)
	t := &sc.trail
	w, d := 0, 0
	for r := range t.Times {
		if d < len(drop) && drop[d] == r {
			d++
			continue
		}
		t.Times[w], t.Mask[w] = t.Times[r], t.Mask[r]
		for k := range t.Cols {
			t.Cols[k].Set[w], t.Cols[k].Bits[w] = t.Cols[k].Set[r], t.Cols[k].Bits[r]
		}
		w++
	}
	t.Times, t.Mask = t.Times[:w], t.Mask[:w]
	for k := range t.Cols {
		t.Cols[k].Set, t.Cols[k].Bits = t.Cols[k].Set[:w], t.Cols[k].Bits[:w]
	}
}
