package storage

import (
	"context"
	"math"
	"slices"

	"github.com/spurdb/spur/trail"
)

// mergePart is one events cursor of a long user's group in mergeLong: the
// passing rows appended from its blocks and not yet merged, and the blocks
// they came from.
type mergePart struct {
	cur  int32 // the cursor's index in the group
	buf  int   // its rows' buffer in sc.bufs, -1 when it holds none
	head int   // its rows before head are merged
	// srcs are the blocks whose rows may lie at a time not yet merged
	// (a tie at which dedupTies reads them), in block order.
	srcs []pendSrc
	// waiting: the cursor's current block (the user's first) is not
	// appended yet, and bound is the time of the user's first row in it;
	// else bound is the time of the user's last row, passing or not, in
	// the last block appended. No row not yet appended is earlier.
	waiting bool
	bound   int64
	more    bool // the user goes on in the cursor's next block
}

// pendSrc is one block of a mergePart: its index, the user's index in
// it, where its passing rows end in the part's rows, and the time of the
// user's last row in it (passing or not).
type pendSrc struct {
	block, user int32
	end         int
	last        int64
}

// mergeLong merges and visits the trail of user key, whose rows go on
// past a block in at least one of the group's events cursors, block by
// block. In rounds, it merges and deduplicates (mergeParts, dedupTies)
// the rows appended so far that are earlier than the watermark — the
// least bound of the parts with rows not yet appended: no row to come is
// earlier — or than an earlier cut that keeps a round within a chunk
// (roundCut), visits them in chunks but for the last, which it holds for
// the next round, and appends the next block of the parts at the
// watermark (a part's first block only once the watermark reaches its
// first row, so that segments that follow each other in time hold one
// block at a time). A group of equal timestamps is merged in one round,
// whole, so the order and the duplicates dropped are those of the whole
// trail's merge, and no chunk splits it. It holds a block's worth of rows
// per part whose rows overlap in time and a round's and a chunk's worth
// of merged rows, whatever the trail's length.
//
// A PrepassVisitor is given a trail of several chunks through Prepass;
// the cursors are then moved back to the user's first blocks and the
// trail is merged again for Visit (its blocks read twice, not held).
// It returns read errors, ctx.Err() and ScanSpec.Grow's refusal.
func (sc *shardScanner) mergeLong(ctx context.Context, key UserKey) error {
	sc.starts = sc.starts[:0]
	for _, c := range sc.group {
		sc.starts = append(sc.starts, [2]int{c.block, c.user})
	}
	pv, pre := sc.v.(PrepassVisitor)
	visit := sc.v.Visit
	if pre {
		visit = pv.Prepass
	}
	chunked, err := sc.mergeStream(ctx, key, visit)
	if err != nil || !chunked || !pre {
		return err
	}
	for i, c := range sc.group {
		if c.users {
			continue
		}
		if c.block != sc.starts[i][0] {
			c.block = sc.starts[i][0]
			if err := sc.readBlock(ctx, c); err != nil {
				return err
			}
		}
		c.user = sc.starts[i][1]
	}
	_, err = sc.mergeStream(ctx, key, sc.v.Visit)
	return err
}

// mergeStream is one pass of mergeLong over the user's blocks from the
// cursors' current ones, visiting with visit the chunks it can hand over
// before the trail's end. It reports whether it did (chunked); if not,
// the trail was visited whole at its end (visitChunked).
func (sc *shardScanner) mergeStream(ctx context.Context, key UserKey, visit func(UserKey, *trail.Trail)) (chunked bool, err error) {
	o := &sc.out
	resetTrail(o, sc.spec.Cols)
	o.User, o.ID = sc.trail.User, key.ID
	sc.outOff = 0
	sc.freeBufs = sc.freeBufs[:0]
	for i := range sc.bufs {
		sc.freeBufs = append(sc.freeBufs, i)
	}
	parts := sc.mparts[:0]
	for i, c := range sc.group {
		if c.users {
			continue
		}
		if len(parts) < cap(parts) {
			parts = parts[:len(parts)+1]
		} else {
			parts = append(parts, mergePart{})
		}
		p := &parts[len(parts)-1]
		b := &c.blk
		s := int(b.UserStarts[c.user])
		*p = mergePart{cur: int32(i), buf: -1, srcs: p.srcs[:0], waiting: true, bound: rowTime(b, !c.deltas, s, s)}
	}
	sc.mparts = parts
	for {
		w, final := int64(0), true
		for i := range parts {
			if p := &parts[i]; (p.waiting || p.more) && (final || p.bound < w) {
				w, final = p.bound, false
			}
		}
		cut, whole := sc.roundCut(w, final)
		last := final && whole
		if err := sc.mergeRound(cut, last); err != nil {
			return false, err
		}
		sc.longBytes = trailBytes(o)
		for i := range sc.bufs {
			sc.longBytes += trailBytes(&sc.bufs[i])
		}
		if err := sc.grow(); err != nil {
			return false, err
		}
		// The round's rows (sc.trail) join the held ones (sc.out) while
		// they fit in a chunk. Else both are visited but for the round's
		// last chunk, held as the next rounds may add to it (or add
		// nothing: the last chunk has More unset).
		r := &sc.trail
		switch {
		case len(o.Times)+len(r.Times) <= sc.chunkEvents:
			appendTrail(o, r, 0, len(r.Times))
		case !last:
			if len(r.Times) > 0 {
				n := sc.visitHeld(key, visit, false)
				sc.outOff += len(o.Times) + n
				resetTrail(o, sc.spec.Cols)
				appendTrail(o, r, n, len(r.Times))
			}
		case sc.outOff > 0:
			sc.visitHeld(key, visit, true)
			return true, nil
		default:
			// The whole trail is in memory, in several chunks.
			if pv, ok := sc.v.(PrepassVisitor); ok {
				sc.visitHeld(key, pv.Prepass, true)
			}
			sc.visitHeld(key, sc.v.Visit, true)
			return false, nil
		}
		if last {
			break
		}
		if !whole {
			continue
		}
		for i := range parts {
			p := &parts[i]
			if !(p.waiting || p.more) || p.bound != w {
				continue
			}
			c := sc.group[p.cur]
			if !p.waiting {
				ok, err := sc.nextPart(ctx, c)
				if err != nil {
					return false, err
				}
				if !ok {
					p.more = false
					continue
				}
			}
			sc.appendPart(p, c)
		}
	}
	if sc.outOff > 0 {
		sc.visitChunks(key, o, sc.outOff, false, false, visit)
		return true, nil
	}
	if len(o.Times) > 0 || sc.spec.AllUsers {
		sc.visitChunked(key, o)
	}
	return false, nil
}

// visitHeld visits the held rows (sc.out) as one chunk, then the round's
// (sc.trail) in chunks, from Offset sc.outOff: the last with More unset
// when final, else not at all. It returns how many of the round's rows
// it visited.
func (sc *shardScanner) visitHeld(key UserKey, visit func(UserKey, *trail.Trail), final bool) int {
	o, r := &sc.out, &sc.trail
	base := sc.outOff
	if len(o.Times) > 0 {
		sc.visitChunks(key, o, base, len(r.Times) > 0 || !final, false, visit)
		base += len(o.Times)
	}
	r.User, r.ID = o.User, o.ID
	return sc.visitChunks(key, r, base, !final, !final, visit)
}

// roundCut returns the time before which the next round merges the
// parts' rows, w (every row when final, whole reports either), or, when
// more than a chunk's worth of rows lie before it, the latest time that
// keeps the round within a chunk — or past the earliest group of equal
// timestamps, however long — so that a round's buffers stay that size
// when the parts overlap in time.
func (sc *shardScanner) roundCut(w int64, final bool) (cut int64, whole bool) {
	lo, hi, total := int64(math.MaxInt64), int64(math.MinInt64), 0
	for i := range sc.mparts {
		if p := &sc.mparts[i]; p.buf >= 0 {
			times := sc.bufs[p.buf].Times[p.head:]
			if len(times) > 0 {
				lo, hi, total = min(lo, times[0]), max(hi, times[len(times)-1]), total+len(times)
			}
		}
	}
	if !final {
		hi = w
	}
	limit := sc.chunkEvents
	if total <= limit || lo >= hi || sc.before(hi) <= limit {
		return w, true
	}
	// The latest t in (lo, hi) with at most limit rows before it, or lo+1.
	l, h := lo+1, hi-1
	for l < h {
		m := l + int64((uint64(h)-uint64(l)+1)/2)
		if sc.before(m) <= limit {
			l = m
		} else {
			h = m - 1
		}
	}
	return l, false
}

// before returns how many of the parts' rows not yet merged are earlier
// than t.
func (sc *shardScanner) before(t int64) int {
	n := 0
	for i := range sc.mparts {
		if p := &sc.mparts[i]; p.buf >= 0 {
			k, _ := slices.BinarySearch(sc.bufs[p.buf].Times[p.head:], t)
			n += k
		}
	}
	return n
}

// appendPart appends the passing rows of c's current block to part p
// (taking a buffer for them, or moving its unmerged rows to the front
// first) and records the block.
func (sc *shardScanner) appendPart(p *mergePart, c *cursor) {
	if p.buf < 0 {
		if n := len(sc.freeBufs); n > 0 {
			p.buf, sc.freeBufs = sc.freeBufs[n-1], sc.freeBufs[:n-1]
		} else {
			p.buf = len(sc.bufs)
			sc.bufs = append(sc.bufs, trail.Trail{})
		}
		resetTrail(&sc.bufs[p.buf], sc.spec.Cols)
	}
	rows := &sc.bufs[p.buf]
	if p.head > 0 {
		dropFront(rows, p.head)
		for i := range p.srcs {
			p.srcs[i].end -= p.head
		}
		p.head = 0
	}
	end := sc.filterRows(rows, c)
	b := &c.blk
	s, e := int(b.UserStarts[c.user]), int(b.UserStarts[c.user+1])
	last := p.bound
	if e > s {
		last = rowTime(b, !c.deltas, e-1, s)
	}
	p.srcs = append(p.srcs, pendSrc{block: int32(c.block), user: int32(c.user), end: end, last: last})
	p.waiting, p.bound, p.more = false, last, c.continues()
}

// mergeRound gathers into the trail buffer, as one part per block in
// arrival order, the parts' rows earlier than w (every row when final),
// merges them there and drops the duplicates among them. Blocks whose
// rows are all earlier than w are forgotten, and so is the buffer of a
// part with no rows left to merge or append.
func (sc *shardScanner) mergeRound(w int64, final bool) error {
	t := &sc.trail
	resetTrail(t, sc.spec.Cols)
	sc.parts = append(sc.parts[:0], 0)
	sc.srcs, sc.ties = sc.srcs[:0], false
	for i := range sc.mparts {
		p := &sc.mparts[i]
		var rows *trail.Trail
		cut := 0
		if p.buf >= 0 {
			rows = &sc.bufs[p.buf]
			cut = len(rows.Times)
			if !final {
				k, _ := slices.BinarySearch(rows.Times[p.head:], w)
				cut = p.head + k
			}
		}
		prev := 0
		for _, s := range p.srcs {
			from, to := max(prev, p.head), min(s.end, cut)
			prev = s.end
			src := partSrc{cursor: p.cur, block: s.block, user: s.user, part: -1}
			if to > from {
				appendTrail(t, rows, from, to)
				src.part = int32(len(sc.parts) - 1)
				sc.parts = append(sc.parts, len(t.Times))
			}
			sc.srcs = append(sc.srcs, src)
		}
		p.head = cut
		k := 0
		for k < len(p.srcs) && (final || p.srcs[k].last < w) {
			k++
		}
		p.srcs = slices.Delete(p.srcs, 0, k)
		if rows != nil && !p.more && cut == len(rows.Times) {
			sc.freeBufs = append(sc.freeBufs, p.buf)
			p.buf, p.head = -1, 0
		}
	}
	if len(sc.parts) > 2 {
		sc.mergeParts()
		if sc.ties {
			if err := sc.dedupTies(sc.group); err != nil {
				return err
			}
		}
	}
	return nil
}

// resetTrail empties t's times, masks and columns, giving it cols
// columns.
func resetTrail(t *trail.Trail, cols int) {
	t.Times, t.Mask = t.Times[:0], t.Mask[:0]
	if len(t.Cols) != cols {
		t.Cols = make([]trail.Column, cols)
	}
	for j := range t.Cols {
		c := &t.Cols[j]
		c.Set, c.Bits = c.Set[:0], c.Bits[:0]
	}
}

// appendTrail appends events [i, j) of src (times, masks and columns) to
// dst, which has as many columns.
func appendTrail(dst, src *trail.Trail, i, j int) {
	dst.Times = append(dst.Times, src.Times[i:j]...)
	dst.Mask = append(dst.Mask, src.Mask[i:j]...)
	for k := range dst.Cols {
		dst.Cols[k].Set = append(dst.Cols[k].Set, src.Cols[k].Set[i:j]...)
		dst.Cols[k].Bits = append(dst.Cols[k].Bits, src.Cols[k].Bits[i:j]...)
	}
}

// dropFront removes t's first n events, moving the rest to the front.
func dropFront(t *trail.Trail, n int) {
	if n == 0 {
		return
	}
	m := copy(t.Times, t.Times[n:])
	copy(t.Mask, t.Mask[n:])
	t.Times, t.Mask = t.Times[:m], t.Mask[:m]
	for k := range t.Cols {
		c := &t.Cols[k]
		copy(c.Set, c.Set[n:])
		copy(c.Bits, c.Bits[n:])
		c.Set, c.Bits = c.Set[:m], c.Bits[:m]
	}
}
