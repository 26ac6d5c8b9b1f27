package storage

import (
	"bytes"
	"context"
	"slices"

	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// shardScanner is one worker's reusable scan state.
type shardScanner struct {
	snap *Version
	spec *ScanSpec
	v    Visitor
	st   *ScanStats

	free   []*cursor // cursors (with their decode buffers) for reuse
	heap   []*cursor
	chains chainScratch
	ucs    []*cursor   // drain's users cursors
	dtrail trail.Trail // drain's visited trail
	ucsAt  []*cursor   // joinUserValues: the users cursors at the current user
	// drain's block-wide buffers: passing rows' times and masks, and the
	// end of each user's rows in them
	blkTimes []int64
	blkMask  []uint64
	blkEnds  []int32
	blkCols  []trail.Column // the query's columns of the passing rows
	dcols    []trail.Column // drain's visited trail's columns: views of blkCols
	parts    []int          // trail part boundaries when a user spans segments
	rows     []int32        // block row of each event appended by appendRows (with columns)
	trail    trail.Trail
	ubest    []int64 // per user value: the time of the write it holds
	fs       filterScratch
	bd       blockDeltas // drainUsers' deltas for filterDeltasBlock
	excRank  rankCache   // bd's exception rank, reset by drain at each block
	// mergeParts scratch
	perm, perm2 []int32
	sTimes      []int64
	sBits       []uint64
	sSet        []bool
}

func (sc *shardScanner) bufferBytes() int64 {
	var n int64
	for _, c := range sc.free {
		n += c.blk.Bytes() + int64(cap(c.rowMask))*8
	}
	n += int64(cap(sc.trail.Times)+cap(sc.sTimes))*8 + int64(cap(sc.trail.Mask)+cap(sc.sBits))*8
	n += int64(cap(sc.blkTimes)+cap(sc.blkMask))*8 + int64(cap(sc.blkEnds))*4
	n += int64(cap(sc.rows)+cap(sc.perm)+cap(sc.perm2))*4 + int64(cap(sc.sSet))
	for _, c := range sc.trail.Cols {
		n += int64(cap(c.Bits))*8 + int64(cap(c.Set))
	}
	return n + sc.fs.bytes()
}

func (sc *shardScanner) scanShard(ctx context.Context, refs []SegmentRef) error {
	sc.heap = sc.heap[:0]
	if len(sc.trail.Cols) != sc.spec.Cols {
		sc.trail.Cols = make([]trail.Column, sc.spec.Cols)
	}
	if len(sc.trail.User) != sc.spec.UserProps {
		sc.trail.User = make([]trail.Value, sc.spec.UserProps)
		sc.ubest = make([]int64, sc.spec.UserProps)
	}
	chains := chainSegments(refs, &sc.chains)
	// One chain with users segments: no user has writes in two of them,
	// so its blocks are read without times from the first on (drain's
	// rule, known here before any block is read).
	usersChains := 0
	for _, run := range chains {
		if slices.ContainsFunc(run, func(r SegmentRef) bool { return r.Kind == KindUsers }) {
			usersChains++
		}
	}
	used := 0
	for _, run := range chains {
		var c *cursor
		if used < len(sc.free) {
			c = sc.free[used]
		} else {
			c = &cursor{}
			sc.free = append(sc.free, c)
		}
		used++
		c.chain, c.keys, c.noTimes = run, segment.KeysAll, usersChains == 1
		ok, err := sc.nextSegment(ctx, c)
		if err != nil {
			return err
		}
		if ok {
			sc.push(c)
		}
	}
	for len(sc.heap) > 0 {
		if ev := sc.drainable(); ev >= 0 {
			// One events cursor left (one chain, e.g. a compacted shard),
			// maybe with users cursors: no user has event rows elsewhere,
			// so its blocks are filtered whole and the user values are
			// merge-joined in.
			c := sc.heap[ev]
			ucs := append(sc.ucs[:0], sc.heap[:ev]...)
			ucs = append(ucs, sc.heap[ev+1:]...)
			sc.heap, sc.ucs = sc.heap[:0], ucs
			if err := sc.drain(ctx, c, ucs); err != nil {
				return err
			}
			continue
		}
		// Gather every cursor positioned at the smallest user key; the heap
		// order puts them in Seq (arrival) order.
		first := sc.pop()
		sc.startUser()
		sc.take(first)
		group := [8]*cursor{first}
		n := 1
		extra := sc.heap[:0:0]
		for len(sc.heap) > 0 && sc.heap[0].hash() == first.hash() && bytes.Equal(sc.heap[0].id(), first.id()) {
			c := sc.pop()
			sc.take(c)
			if n < len(group) {
				group[n] = c
				n++
			} else {
				extra = append(extra, c)
			}
		}
		if len(sc.parts) > 2 {
			sc.mergeParts()
		}
		if len(sc.trail.Times) > 0 || sc.spec.AllUsers {
			sc.trail.ID = first.id()
			sc.v.Visit(UserKey{Hash: first.hash(), ID: first.id()}, &sc.trail)
		}
		for _, c := range append(group[:n], extra...) {
			ok, err := sc.advance(ctx, c)
			if err != nil {
				return err
			}
			if ok {
				sc.push(c)
			}
		}
	}
	return nil
}

// startUser resets the per-user buffers.
func (sc *shardScanner) startUser() {
	sc.trail.Times, sc.trail.Mask = sc.trail.Times[:0], sc.trail.Mask[:0]
	for j := range sc.trail.Cols {
		c := &sc.trail.Cols[j]
		c.Set, c.Bits = c.Set[:0], c.Bits[:0]
	}
	sc.unsetUserValues()
	sc.parts = append(sc.parts[:0], 0)
}

// take adds cursor c's current user to the user being assembled.
func (sc *shardScanner) take(c *cursor) {
	if c.users {
		sc.userValues(c)
	} else {
		sc.appendRows(c)
	}
}

// appendRows appends cursor c's current user's rows that pass the spec to
// the trail buffer. This is the per-event hot loop of every query: one
// table lookup per event (or one row-mask read when the segment has
// property filters), and no data-dependent branch (every row is written,
// and the write position advances only for passing rows, which the
// compiler turns into a conditional move), since which events match is
// unpredictable. When the block's zone map lies inside the range, the time
// test is dropped. With property columns, the block row of each kept event
// is recorded the same way and the columns are gathered afterwards.
func (sc *shardScanner) appendRows(c *cursor) {
	b := &c.blk
	s, e := b.UserStarts[c.user], b.UserStarts[c.user+1]
	codes := b.Events[s:e:e]
	masks := c.masks
	n := len(sc.trail.Times)
	tt := slices.Grow(sc.trail.Times, len(codes))[:n+len(codes)]
	tm := slices.Grow(sc.trail.Mask, len(codes))[:n+len(codes)]
	out := tt[n:]
	outm := tm[n:]
	k := 0
	from, span := sc.spec.From, uint64(sc.spec.To)-uint64(sc.spec.From)
	rows := slices.Grow(sc.rows[:0], len(codes))[:len(codes)]
	if c.vector {
		b.UnpackDeltas() // read packed for drain
	}
	switch {
	case c.sparse:
		var end [1]int32
		k = filterDeltasSparse(out, outm, rows, end[:], b, b.Events, b.UserStarts[c.user:c.user+2], masks, b.TimeBase, b.TimeGCD, from, span)
	case !c.deltas && c.rowWise:
		k = filterRowsAt(out, outm, rows, b.Times[s:e], c.rowMask[s:e:e], s, from, span)
	case !c.deltas:
		k = filterCodesAt(out, outm, rows, b.Times[s:e], codes, masks, s, from, span)
	case c.inRange:
		k = filterDeltas(out, outm, b.Deltas[s:e], codes, masks, b.TimeBase, b.TimeGCD)
	default:
		k = filterDeltasInRange(out, outm, b.Deltas[s:e], codes, masks, b.TimeBase, b.TimeGCD, from, span)
	}
	sc.rows = rows[:k]
	for j := range sc.trail.Cols {
		appendCol(&sc.trail.Cols[j], c.plan.Cols[j], b, sc.rows)
	}
	sc.trail.Times, sc.trail.Mask = tt[:n+k], tm[:n+k]
	if n+k > sc.parts[len(sc.parts)-1] {
		sc.parts = append(sc.parts, n+k)
	}
}

// userValues applies the current user's property writes in users cursor c
// to the trail's user values: a write replaces the held value unless it
// is older. Cursors come in Seq order and a user's rows in (time,
// arrival) order, so the latest write wins and a tie goes to the later
// arrival. A block read without times (cursor.noTimes) is its user's only
// source: its last write wins.
func (sc *shardScanner) userValues(c *cursor) {
	b := &c.blk
	s, e := int(b.UserStarts[c.user]), int(b.UserStarts[c.user+1])
	times := len(b.Times) > 0
	for j, src := range c.uplan.Cols {
		if src.Prop < 0 {
			continue
		}
		pd := &b.Props[src.Prop]
		for r := s; r < e; r++ {
			if pd.Present[r>>6]>>(r&63)&1 == 0 {
				continue
			}
			if times {
				if b.Times[r] < sc.ubest[j] {
					continue
				}
				sc.ubest[j] = b.Times[r]
			}
			sc.trail.User[j] = trail.Value{Set: true, Bits: columnBits(pd, src, r)}
		}
	}
}

// mergeParts orders the trail buffer, made of time-sorted parts (one per
// segment, in Seq order), by time; equal times keep part order, which is
// arrival order. It merges a permutation pairwise, then gathers the
// times, masks and columns through it.
func (sc *shardScanner) mergeParts() {
	times := sc.trail.Times
	perm := sc.perm[:0]
	for i := range times {
		perm = append(perm, int32(i))
	}
	for len(sc.parts) > 2 {
		a0, a1, b1 := sc.parts[0], sc.parts[1], sc.parts[2]
		out := sc.perm2[:0]
		i, j := a0, a1
		for i < a1 && j < b1 {
			if times[perm[j]] < times[perm[i]] {
				out = append(out, perm[j])
				j++
			} else {
				out = append(out, perm[i])
				i++
			}
		}
		out = append(out, perm[i:a1]...)
		out = append(out, perm[j:b1]...)
		copy(perm[a0:b1], out)
		sc.perm2 = out
		sc.parts = append(sc.parts[:1], sc.parts[2:]...)
	}
	sc.perm = perm
	st := sc.sTimes[:0]
	for _, p := range perm {
		st = append(st, times[p])
	}
	copy(times, st)
	sc.sTimes = st
	sc.sBits = gather(sc.trail.Mask, perm, sc.sBits)
	for j := range sc.trail.Cols {
		c := &sc.trail.Cols[j]
		sc.sBits = gather(c.Bits, perm, sc.sBits)
		ss := sc.sSet[:0]
		for _, p := range perm {
			ss = append(ss, c.Set[p])
		}
		copy(c.Set, ss)
		sc.sSet = ss
	}
}

// gather permutes v in place through perm using scratch and returns the
// (possibly grown) scratch.
func gather(v []uint64, perm []int32, scratch []uint64) []uint64 {
	scratch = scratch[:0]
	for _, p := range perm {
		scratch = append(scratch, v[p])
	}
	copy(v, scratch)
	return scratch
}
