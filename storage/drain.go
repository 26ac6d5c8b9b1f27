package storage

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"slices"
	"sort"

	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// drainable returns the heap index of the shard's only events cursor when
// drain can take over — every other cursor is a users cursor, and the scan
// does not visit every user — else -1.
func (sc *shardScanner) drainable() int {
	if sc.spec.AllUsers {
		return -1
	}
	ev := -1
	for i, c := range sc.heap {
		if !c.users {
			if ev >= 0 {
				return -1
			}
			ev = i
		}
	}
	return ev
}

// drain visits the remaining users of c, the shard's last events cursor,
// block by block: one filter pass over the block's rows into a block-wide
// buffer (no per-user merge bookkeeping or heap operations), then one Visit
// per user with a passing row, whose user values are merge-joined from the
// users cursors ucs (users with no passing row are skipped past, as the
// general path never visits them). A vector cursor's blocks are filtered
// and visited in pieces of whole users of about denseRows rows
// (drainUsers). Blocks read with deltas are filtered by segment.FilterDeltasBlock
// (vector cursors), filterDeltas and its variants, blocks with property
// columns or row masks by filterColumns. It returns read errors and
// ctx.Err().
func (sc *shardScanner) drain(ctx context.Context, c *cursor, ucs []*cursor) error {
	t := sc.startDrain()
	// With users cursors every visited user gets its values set (unset
	// once they are exhausted); without, the values stay unset.
	join := len(ucs) > 0
	if len(ucs) == 1 {
		// From its next block on: no times, and no hashes where the
		// ids imply them (joinInStep matches by id).
		ucs[0].noTimes, ucs[0].keys = ucs[0].onceCode < 0 && !sc.keepTimes, segment.KeysIDs
	}
	// From the next block on: without a join or lists the users are
	// visited by position and their keys are not decoded; a join under
	// NoIDs needs the ids only.
	// Pending erasures (sc.erasing) skip users by id.
	switch {
	case !sc.spec.NoIDs:
		c.keys = segment.KeysAll
	case join || sc.erasing:
		c.keys = segment.KeysIDs
	default:
		c.keys = segment.KeysNone
	}
	for {
		b := &c.blk
		users := len(b.UserStarts) - 1
		sc.excRank = segment.RankCache{}
		for c.user < users {
			// The block's users c.user..hi-1: all of them, or, for
			// segment.FilterDeltasBlock, whole users of about denseRows rows, so
			// that its buffers and the visitors' reads of them stay in
			// cache.
			hi := users
			if c.vector {
				hi = c.user + 1 + sort.Search(users-c.user-1, func(i int) bool {
					return b.UserStarts[c.user+1+i]-b.UserStarts[c.user] >= denseRows
				})
			}
			if len(c.erase) > 0 {
				// An erased user is skipped (also its rows that go on
				// in the next block: that block's first user, skipped
				// there); the others are drained up to the next one.
				if c.erasedUser(c.user) {
					c.user++
					continue
				}
				for e := c.user + 1; e < hi; e++ {
					if c.erasedUser(e) {
						hi = e
						break
					}
				}
			}
			if err := sc.drainUsers(ctx, c, hi, t, &ucs, join); err != nil {
				return err
			}
			c.user = hi
		}
		prev := c.block
		ok, err := sc.nextBlock(ctx, c)
		if err == nil && !ok {
			ok, err = sc.nextSegment(ctx, c)
		}
		if err != nil {
			return err
		}
		if sc.carrying {
			// The carried user goes on in this block only if every block
			// since holds nothing but its rows; else it ended in a
			// skipped block.
			sc.carryCont = ok && c.block > prev && sameUserThrough(c.meta, prev, c.block)
			if !sc.carryCont {
				sc.endCarry()
			}
		}
		if !ok {
			return nil
		}
	}
}

// startDrain readies the scanner for drain or drainAhead and returns the
// trail they visit users with. The trail lives in sc: a local would
// escape through Visit and cost an allocation per drain.
func (sc *shardScanner) startDrain() *trail.Trail {
	sc.startUser()
	t := &sc.dtrail
	if len(sc.blkCols) != sc.spec.Cols {
		sc.blkCols = make([]trail.Column, sc.spec.Cols)
		sc.dcols = make([]trail.Column, sc.spec.Cols)
	}
	*t = trail.Trail{Cols: sc.dcols, User: sc.trail.User}
	sc.carrying, sc.carryCont = false, false
	return t
}

// sameUserThrough reports whether the last user of block from is the
// first user of block to (from < to): every block in (from, to] continues
// the one before, and those strictly between hold that user alone.
func sameUserThrough(m *segment.Meta, from, to int) bool {
	for b := from + 1; b <= to; b++ {
		if !blockContinued(m, b) || (b < to && m.Blocks[b].Users != 1) {
			return false
		}
	}
	return true
}

// denseRows is the rows per call of segment.FilterDeltasBlock in drain (whole
// users, so a little more). Measured on bench/queries/funnel4.json and
// distinct_users.json at 100M events: see the commit message.
const denseRows = 4096

// drainUsers filters the rows of users c.user..hi-1 of c's block and
// visits those with a passing row (see drain), joining their user values
// from *ucs when join is set.
func (sc *shardScanner) drainUsers(ctx context.Context, c *cursor, hi int, t *trail.Trail, ucs *[]*cursor, join bool) error {
	b := &c.blk
	from, span := sc.spec.From, uint64(sc.spec.To)-uint64(sc.spec.From)
	rows := int(b.UserStarts[hi] - b.UserStarts[c.user])
	// 8 spare entries for segment.FilterDeltasBlock's whole-register stores
	times := slices.Grow(sc.blkTimes[:0], rows+8)[:rows]
	masks := slices.Grow(sc.blkMask[:0], rows+8)[:rows]
	ends := slices.Grow(sc.blkEnds[:0], hi-c.user)[:hi-c.user]
	switch {
	case !c.deltas:
		sc.filterColumns(c, times, masks, ends)
	case c.sparse:
		rows := slices.Grow(sc.rows[:0], len(times))[:len(times)]
		k := segment.FilterDeltasSparse(times, masks, rows, ends, b, b.Events, b.UserStarts[c.user:], c.masks, b.TimeBase, b.TimeGCD, from, span)
		sc.rows = rows[:k]
		sc.gatherCols(c)
	case c.vector:
		// Deltas at 16 bits stay packed (the kernel widens them);
		// other widths are unpacked whole.
		sc.bd.Reset(b, &sc.excRank)
		segment.FilterDeltasBlock(times, masks, ends, &sc.bd, b.Events, b.UserStarts[c.user:], c.masks, &c.live8, b.TimeBase, b.TimeGCD, c.inRange, from, span, c.thin, &sc.fs)
	default:
		// Dense, no columns: one call per user. One call for all of
		// the block's users spilled registers and was slower per
		// 64 Ki rows: with nested loops 386–543 µs against 180–235 µs
		// per user, with a branch at each user boundary 181–326 µs
		// against 139–168 µs.
		for u, k := c.user, 0; u < hi; u++ {
			s, e := b.UserStarts[u], b.UserStarts[u+1]
			if c.inRange {
				k += segment.FilterDeltas(times[k:], masks[k:], b.Deltas[s:e], b.Events[s:e], c.masks, b.TimeBase, b.TimeGCD)
			} else {
				k += segment.FilterDeltasInRange(times[k:], masks[k:], b.Deltas[s:e], b.Events[s:e], c.masks, b.TimeBase, b.TimeGCD, from, span)
			}
			ends[u-c.user] = int32(k)
		}
	}
	sc.blkTimes, sc.blkMask, sc.blkEnds = times, masks, ends
	start := int32(0)
	last := len(b.UserStarts) - 2
	for i, end := range ends {
		// The block's first user may continue the trail carried from the
		// previous block, its last user may go on in the next one:
		// drainEdge. Every other user is joined and visited here, in a
		// loop kept small so that the compiler keeps its variables in
		// registers (with the carry tests inline it spilled and reloaded
		// them around every call; moving them out took funnel4_by_channel
		// at 100M from 1.051 to 1.023× session 7's CPU, bench/ab.sh).
		if u := c.user + i; u == 0 || u == last {
			if err := sc.drainEdge(ctx, c, u, start, end, t, ucs, join); err != nil {
				return err
			}
		} else {
			if join {
				if err := sc.joinUser(ctx, ucs, b, u, end > start); err != nil {
					return err
				}
			}
			// Users without passing rows (most of a sparse filter's)
			// come no further.
			if end > start {
				sc.visitRows(b, u, start, end, t)
			}
		}
		start = end
	}
	sc.carryCont = false
	return nil
}

// drainEdge is drainUsers for the first or the last user u of c's block,
// whose filtered rows are [start, end) of the block-wide buffers: the
// first may continue the trail carried from the previous block, the last
// may go on in the next; their rows gather in the carry (sc.trail) and
// are visited from there. A user going on into the next block is joined
// now, whether or not it has passing rows here.
func (sc *shardScanner) drainEdge(ctx context.Context, c *cursor, u int, start, end int32, t *trail.Trail, ucs *[]*cursor, join bool) error {
	b := &c.blk
	last := len(b.UserStarts) - 2
	cont := u == 0 && sc.carryCont
	goesOn := u == last && c.continues()
	carry := cont || goesOn
	if join && !cont {
		if err := sc.joinUser(ctx, ucs, b, u, carry || end > start); err != nil {
			return err
		}
	}
	switch {
	case carry:
		if !cont {
			sc.startCarry(c, u)
		}
		sc.appendCarry(start, end)
		if goesOn {
			if err := sc.grow(); err != nil {
				return err
			}
			sc.streamCarry()
		} else {
			sc.endCarry()
		}
	case end > start:
		sc.visitRows(b, u, start, end, t)
	}
	return nil
}

// joinUser sets the trail's user values for user u of block b from the
// users cursors *ucs (drain's join), visited or not: a single users cursor
// steps with every user of the block (joinInStep), several join at the
// visited users only (joinUserValues). It removes exhausted cursors from
// *ucs and returns read errors and ctx.Err().
func (sc *shardScanner) joinUser(ctx context.Context, ucs *[]*cursor, b *segment.Block, u int, visited bool) error {
	var err error
	if len(*ucs) == 1 {
		*ucs, err = sc.joinInStep(ctx, *ucs, b, u, visited)
	} else if visited {
		*ucs, err = sc.joinUserValues(ctx, *ucs, blockHash(b, u), b.UserID(u))
	}
	if err != nil {
		return err
	}
	sc.finishUserValues()
	return nil
}

// visitRows visits user u of block b with its filtered rows [start, end)
// of the block-wide buffers (sc.blkTimes, sc.blkMask, sc.blkCols), in
// chunks when they are more than a chunk.
func (sc *shardScanner) visitRows(b *segment.Block, u int, start, end int32, t *trail.Trail) {
	t.Times, t.Mask = sc.blkTimes[start:end:end], sc.blkMask[start:end:end]
	var key UserKey
	if len(b.UserHashes) > 0 {
		key = UserKey{Hash: b.UserHashes[u], ID: b.UserID(u)}
	}
	t.ID = key.ID
	for j := range t.Cols {
		bc := &sc.blkCols[j]
		t.Cols[j] = trail.Column{Set: bc.Set[start:end:end], Bits: bc.Bits[start:end:end]}
	}
	if end-start <= int32(sc.chunkEvents) {
		sc.v.Visit(key, t)
	} else {
		sc.visitChunked(key, t)
	}
}

// startCarry begins carrying the trail of user u of c's block, which goes
// on in the next block: its key is copied (the block will be replaced).
func (sc *shardScanner) startCarry(c *cursor, u int) {
	b := &c.blk
	resetTrail(&sc.trail, len(sc.trail.Cols))
	sc.carryKey = UserKey{}
	if len(b.UserHashes) > 0 || len(b.UserIDOffsets) > 0 {
		sc.id = append(sc.id[:0], b.UserID(u)...)
		sc.carryKey = UserKey{Hash: blockHash(b, u), ID: sc.id}
	}
	sc.carryOff, sc.carrying = 0, true
}

// appendCarry appends the filtered rows [start, end) of the block-wide
// buffers to the carried trail.
func (sc *shardScanner) appendCarry(start, end int32) {
	blk := trail.Trail{Times: sc.blkTimes, Mask: sc.blkMask, Cols: sc.blkCols}
	appendTrail(&sc.trail, &blk, int(start), int(end))
}

// streamCarry visits the carried trail's chunks that are complete — the
// events before its last group of equal timestamps, which the next block
// may extend — once more than a chunk is carried, keeping the rest. A
// PrepassVisitor must see the whole trail before its visit, so for it the
// trail is carried whole (bounded by ScanSpec.Grow) and visited at its
// end.
func (sc *shardScanner) streamCarry() {
	t := &sc.trail
	if len(t.Times) <= sc.chunkEvents {
		return
	}
	if _, ok := sc.v.(PrepassVisitor); ok {
		return
	}
	cut := len(t.Times) - 1
	for cut > 0 && t.Times[cut-1] == t.Times[cut] {
		cut--
	}
	if cut == 0 {
		return // one group of equal timestamps so far
	}
	whole := *t
	whole.Times, whole.Mask = t.Times[:cut], t.Mask[:cut]
	whole.Cols = sc.carryCols(0, cut)
	sc.visitChunks(sc.carryKey, &whole, sc.carryOff, true, false, sc.v.Visit)
	dropFront(t, cut)
	sc.carryOff += cut
}

// carryCols returns views of rows [i, j) of the carried trail's columns
// (sc's scratch).
func (sc *shardScanner) carryCols(i, j int) []trail.Column {
	t := &sc.trail
	cols := sc.ccols[:0]
	for _, c := range t.Cols {
		cols = append(cols, trail.Column{Set: c.Set[i:j:j], Bits: c.Bits[i:j:j]})
	}
	sc.ccols = cols
	return cols
}

// endCarry visits the rest of the carried trail as its last chunks.
func (sc *shardScanner) endCarry() {
	t := &sc.trail
	if len(t.Times) > 0 || sc.carryOff > 0 {
		if sc.carryOff == 0 {
			t.ID = sc.carryKey.ID
			sc.visitChunked(sc.carryKey, t)
		} else {
			whole := *t
			whole.ID = sc.carryKey.ID
			sc.visitChunks(sc.carryKey, &whole, sc.carryOff, false, false, sc.v.Visit)
		}
	}
	sc.carrying = false
}

// blockHash returns user u's hash in b: stored, or computed from its id
// (a block read with segment.KeysIDs).
func blockHash(b *segment.Block, u int) uint64 {
	if len(b.UserHashes) > 0 {
		return b.UserHashes[u]
	}
	return segment.UserHash(b.UserID(u))
}

// joinInStep is joinUserValues for a single users cursor, called for
// every user u of the events block b in order, visited or not: the two
// sides then mostly hold the same users in the same order, so an equal
// id is a match and the hashes (not decoded: segment.KeysIDs) are
// computed only where the ids differ, to tell which side is behind. It
// sets the trail's user values when visited. Computing every user's hash
// on both sides instead was 5.5 % of the CPU of a 100M-event funnel by a
// user property.
func (sc *shardScanner) joinInStep(ctx context.Context, ucs []*cursor, b *segment.Block, u int, visited bool) ([]*cursor, error) {
	if visited {
		sc.unsetUserValues()
	}
	uc, id := ucs[0], b.UserID(u)
	var h uint64
	hashed := false
	for {
		match := bytes.Equal(uc.id(), id)
		if !match {
			if !hashed {
				h, hashed = blockHash(b, u), true
			}
			c := cmp.Compare(uc.hash(), h)
			if c == 0 {
				c = bytes.Compare(uc.id(), id)
			}
			if c > 0 {
				return ucs, nil // the user has no property writes
			}
		}
		// Past a match (its writes applied when visited), or past a user
		// with writes but no rows here. A user's writes mostly fit in
		// one block: userWrites only for those that do not.
		if match && visited {
			sc.startCollect(ucs[:1], uc.hash(), id)
		}
		if uc.continues() {
			if err := sc.userWrites(ctx, uc, match && visited); err != nil {
				return nil, err
			}
		} else if match && visited {
			sc.userValues(uc)
		}
		ok, err := sc.advance(ctx, uc)
		if err != nil {
			return nil, err
		}
		if !ok {
			return ucs[:0], nil
		}
		if match {
			return ucs, nil
		}
	}
}

// filterColumns is drain's row filter for blocks read with times summed
// by the reader (row masks, or property columns with many matching rows):
// per user filterRowsAt or filterCodesAt, recording block rows, then the
// query's columns gathered for all passing rows into sc.blkCols.
func (sc *shardScanner) filterColumns(c *cursor, times []int64, masks []uint64, ends []int32) {
	b := &c.blk
	from, span := sc.spec.From, uint64(sc.spec.To)-uint64(sc.spec.From)
	rows := slices.Grow(sc.rows[:0], len(times))[:len(times)]
	k := 0
	for u := c.user; u < len(ends)+c.user; u++ {
		s, e := b.UserStarts[u], b.UserStarts[u+1]
		if bt := b.Times[s:e]; c.rowWise {
			k += filterRowsAt(times[k:], masks[k:], rows[k:], bt, c.rowMask[s:e:e], s, from, span)
		} else {
			k += filterCodesAt(times[k:], masks[k:], rows[k:], bt, b.Events[s:e:e], c.masks, s, from, span)
		}
		ends[u-c.user] = int32(k)
	}
	sc.rows = rows[:k]
	sc.gatherCols(c)
}

// gatherCols gathers the query's columns of block rows sc.rows of c's
// block into sc.blkCols.
func (sc *shardScanner) gatherCols(c *cursor) {
	for j := range sc.blkCols {
		bc := &sc.blkCols[j]
		bc.Set, bc.Bits = bc.Set[:0], bc.Bits[:0]
		appendCol(bc, c.plan.Cols[j], &c.blk, sc.rows)
	}
}

// unsetUserValues unsets the trail's user values (and the write times
// they came from) before a user's are joined.
func (sc *shardScanner) unsetUserValues() {
	once := sc.onceSeen // else the set-once values hold nothing
	sc.ucollect = false
	for j := range sc.trail.User {
		sc.trail.User[j] = trail.Value{}
		sc.ubest[j] = math.MinInt64
		if once {
			sc.uonce[j], sc.uonceAt[j] = trail.Value{}, math.MaxInt64
		}
	}
}

// unsetOnce unsets the set-once writes held aside (sc.uonce, sc.uonceAt)
// at a shard's start; unsetUserValues unsets them before each user's
// join once a set-once write was seen.
func (sc *shardScanner) unsetOnce() {
	for j := range sc.uonce {
		sc.uonce[j], sc.uonceAt[j] = trail.Value{}, math.MaxInt64
	}
}

// userWrites applies (apply) or passes over users cursor c's current
// user's writes in every block they continue in, leaving c at the user's
// last block, ready for advance.
func (sc *shardScanner) userWrites(ctx context.Context, c *cursor, apply bool) error {
	for {
		if apply {
			sc.userValues(c)
		}
		if !c.continues() {
			return nil
		}
		if _, err := sc.nextPart(ctx, c); err != nil {
			return err
		}
	}
}

// joinUserValues sets the trail's user values for the user (h, id): it
// advances every users cursor of ucs past the users before it and applies
// the writes of those positioned at it in Seq order (a chain's Seq is that
// of its current segment), as take does in the k-way merge. It returns ucs
// without the exhausted cursors. drain uses it with no or several users
// cursors; its single one steps with joinInStep.
func (sc *shardScanner) joinUserValues(ctx context.Context, ucs []*cursor, h uint64, id []byte) ([]*cursor, error) {
	sc.unsetUserValues()
	at := sc.ucsAt[:0]
	live := ucs[:0]
	for _, uc := range ucs {
		ok := true
		for ok {
			c := cmp.Compare(uc.hash(), h)
			if c == 0 {
				c = bytes.Compare(uc.id(), id)
			}
			if c > 0 {
				break
			}
			if c == 0 {
				at = append(at, uc)
				break
			}
			var err error
			if ok, err = sc.advance(ctx, uc); err != nil {
				return nil, err
			}
		}
		if ok {
			live = append(live, uc)
		}
	}
	if len(at) > 1 {
		slices.SortFunc(at, func(a, b *cursor) int { return cmp.Compare(a.seq, b.seq) })
	}
	sc.startCollect(at, h, id)
	for _, uc := range at {
		if err := sc.userWrites(ctx, uc, true); err != nil {
			return nil, err
		}
	}
	sc.ucsAt = at
	// Past the user: the cursors that were at it move on.
	out := live[:0]
	for _, uc := range live {
		ok := true
		if slices.Contains(at, uc) {
			var err error
			if ok, err = sc.advance(ctx, uc); err != nil {
				return nil, err
			}
		}
		if ok {
			out = append(out, uc)
		}
	}
	return out, nil
}

// minAhead is the fewest users drainAhead takes at once: below it the
// general path's per-user merge costs less than setting drain up.
const minAhead = 8

// drainAhead is drain for a shard with several events cursors (a live
// layer's in-memory segments beside a compacted run, imports not yet
// compacted): the users of the top events cursor's current block that
// come before every other events cursor's current user have rows in no
// other segment — no merge, no duplicates — so they are filtered and
// visited with drain's block-wide pass instead of one mergeUser each. It
// stops before a user that goes on into the next block (mergeUser's
// mergeLong takes it) and never takes fewer than minAhead users. The
// users cursors are merge-joined as in drain. It reports whether it
// visited any users; the heap holds every cursor not exhausted after.
// It returns read errors and ctx.Err().
func (sc *shardScanner) drainAhead(ctx context.Context) (bool, error) {
	top := sc.heap[0]
	if sc.spec.AllUsers || top.users {
		return false, nil
	}
	var bound *cursor // the least other events cursor
	for _, c := range sc.heap[1:] {
		if !c.users && (bound == nil || less(c, bound)) {
			bound = c
		}
	}
	if bound == nil {
		return false, nil
	}
	b := &top.blk
	end := len(b.UserStarts) - 1
	if top.block+1 < len(top.meta.Blocks) && blockContinued(top.meta, top.block+1) {
		end-- // the block's last user goes on in the next block
	}
	bh, bid := bound.hash(), bound.id()
	n := sort.Search(end-top.user, func(i int) bool {
		u := top.user + i
		if h := blockHash(b, u); h != bh {
			return h > bh
		}
		return bytes.Compare(b.UserID(u), bid) >= 0
	})
	if n < minAhead {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// Take the cursors out of the heap: the top one is drained, the users
	// cursors are joined, and all go back in after.
	ucs := sc.ucs[:0] // reused: drainAhead runs once per run of users
	others := sc.group[:0]
	for _, c := range sc.heap[1:] {
		if c.users {
			ucs = append(ucs, c)
		} else {
			others = append(others, c)
		}
	}
	sc.group = others
	t := sc.startDrain()
	sc.excRank = segment.RankCache{}
	// The general path may have unpacked this block's deltas already:
	// drainUsers' per-user loop reads them unpacked.
	vector := top.vector
	if vector {
		b.UnpackDeltas()
		top.bytes = b.Bytes() + int64(cap(top.rowMask))*8
		top.vector = false
	}
	join := len(ucs) > 0
	hi := top.user + n
	err := sc.drainUsers(ctx, top, hi, t, &ucs, join)
	top.vector = vector
	if err != nil {
		return false, err
	}
	top.user = hi - 1
	ok, err := sc.advance(ctx, top)
	if err != nil {
		return false, err
	}
	sc.heap = sc.heap[:0]
	if ok {
		sc.push(top)
	}
	for _, c := range sc.group {
		sc.push(c)
	}
	for _, c := range ucs {
		sc.push(c)
	}
	sc.ucs = ucs[:0]
	return true, nil
}
