package storage

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/spurdb/spur/storage/segment"
)

// A segment is scanned with the branching row filters when at most
// sparseNum/sparseDen of its rows can match (cursor.sparse). Measured at
// 100M events (bench-query, median of 5): a purchase-only trend (0.6% of
// rows) 512 -> 460 ms with the branching filter; a 4-step funnel (12.6%)
// 368 -> 410 ms, so it stays branch-free.
const sparseNum, sparseDen = 1, 16

// vectorNum/vectorDen bounds the share of a segment's rows that can match
// for drain to use segment.FilterDeltasBlock's vector kernel (cursor.vector).
// Measured at 100M events with bench/ab.sh, kernel against the per-user
// loop: funnels on 13 %, 24 % and 41 % of the rows ×0.85, ×0.93 and
// ×0.90; distinct users (every row) ×1.05.
const vectorNum, vectorDen = 1, 2

// cursor walks one segment's users in key order.
type cursor struct {
	chain []SegmentRef // segments still to read after the current one
	r     *segment.Reader
	meta  *segment.Meta
	seq   int64
	users bool // a users segment: user property writes
	plan  *SegmentPlan
	own   SegmentPlan     // plan of a Masks-only spec
	ownU  UserSegmentPlan // users plan without user values (AllUsers)
	uplan *UserSegmentPlan
	masks []uint64
	live  []uint64  // bit set of event codes with a non-zero mask
	live8 [8]uint64 // live's first 8 words (segment.FilterDeltasBlock)
	// rowWise: row masks come from plan.Rows into rowMask (per block row)
	rowWise bool
	rowMask []uint64
	blk     segment.Block
	block   int // current block index; len(meta.Blocks) when exhausted
	user    int // current user within blk
	// hashUser is the user of blk whose hash hashV holds (-1: none), for
	// blocks without stored hashes (segment.KeysIDs): the heap of a
	// multi-stream merge compares a cursor's hash at every push and pop,
	// and recomputing it there was 10 % of a live-layer query's CPU
	hashUser int
	hashV    uint64
	// inRange: the current block's rows all lie in [From, To)
	inRange bool
	// sparse: at most sparseNum/sparseDen of the segment's rows have an
	// event code with a non-zero mask (and no row masks)
	sparse bool
	// deltas: blocks are read with ReadBlockDeltas (no row masks, and no
	// property columns or a sparse segment), and the row filter sums the
	// times itself
	deltas bool
	// vector: a dense deltas cursor whose blocks drain filters with
	// segment.FilterDeltasBlock: the CPU has AVX-512, codes are below 512 (live8),
	// and at most vectorNum/vectorDen of the segment's rows can match
	vector bool
	// thin: the vector filter's thinning (ScanSpec.Thin; nil: none),
	// pointing to thinBuf
	thin    *segment.Thinning
	thinBuf segment.Thinning
	// keys: the user keys blocks are decoded with: KeysAll but for
	// drain's cursors (KeysNone without a join under ScanSpec.NoIDs,
	// KeysIDs with one under it and for its single users cursor)
	keys segment.Keys
	// noTimes: users blocks are read without their times
	// (ReadBlockNoTimes). Set by scanShard when one chain holds all the
	// shard's users segments, and by drain for a shard's only users
	// cursor left: no user has writes in two segments of a chain, and a
	// user's writes in one segment are in time order, so the last one
	// wins.
	noTimes bool
	// onceCode is the event code of SetOnceEvent in a users segment, -1
	// when it has no such rows.
	onceCode int
	// unsetCode, addCode and delCode are the event codes of UnsetEvent,
	// AddEvent and DeleteEvent in a users segment, -1 when it has no such
	// rows; hasOps says one of them is ≥ 0 (userOps).
	unsetCode, addCode, delCode int
	hasOps                      bool
	// bytes is what blk and rowMask hold (capacities), as of the last
	// block read or deltas unpacked (shardScanner.bufferBytes).
	bytes int64
	// erase lists the users whose rows the version's pending deletions
	// hide in the current segment (eraseIndex.forSegment), in hash
	// order; eraseAt is the first one not behind the cursor. The cursor
	// never stops at such a user (advance, nextBlock); a shard with any
	// is scanned without drain (shardScanner.erasing).
	erase   []erasedUser
	eraseAt int
	// rowDels are the events deletions pending in the segment
	// (eraseIndex.eventDeletes); with any, plan is delPlan, which clears
	// the masks of the rows they delete.
	rowDels []rowDelete
	delPlan SegmentPlan
}

// erased reports whether c's current user is one its segment's pending
// deletions hide.
func (c *cursor) erased() bool {
	return len(c.erase) > 0 && erasedAt(c.erase, &c.eraseAt, c.hash(), c.id())
}

// erasedUser reports whether user u of c's block (≥ every user asked
// about before in the segment) is one its segment's pending deletions
// hide; the block must hold the users' ids (drain reads them then).
func (c *cursor) erasedUser(u int) bool {
	return erasedAt(c.erase, &c.eraseAt, blockHash(&c.blk, u), c.blk.UserID(u))
}

// userOps reports whether users cursor c's current user has, in its
// current block, writes the fast fold (shardScanner.userValues) cannot
// apply — unset, add or delete — or may have: its rows continue in the
// next block. It reads the user's event codes only in segments holding
// such writes.
func (c *cursor) userOps() bool {
	if !c.hasOps {
		return false
	}
	if c.continues() {
		return true
	}
	b := &c.blk
	for _, code := range b.Events[b.UserStarts[c.user]:b.UserStarts[c.user+1]] {
		if k := int(code); k == c.unsetCode || k == c.addCode || k == c.delCode {
			return true
		}
	}
	return false
}

// continues reports whether c's current user has more rows in the
// segment's next block (a user with more rows than a block holds is split
// across consecutive blocks).
func (c *cursor) continues() bool {
	return c.user == len(c.blk.UserStarts)-2 && c.block+1 < len(c.meta.Blocks) && blockContinued(c.meta, c.block+1)
}

// nextPart moves c to its current user's rows in the next block that can
// hold a passing row (every block, for a users cursor or a scan of all
// users), reporting false when the user has none left. Blocks skipped by
// their zone maps hold no passing row of any user: when the user ends in
// one, c is left at that block with no user to visit, and advance moves
// on from its end.
func (sc *shardScanner) nextPart(ctx context.Context, c *cursor) (bool, error) {
	for c.continues() {
		c.block++
		if c.users || sc.spec.AllUsers || sc.mayPass(c, c.block) {
			if err := sc.readBlock(ctx, c); err != nil {
				return false, err
			}
			c.user = 0
			return true, nil
		}
		sc.st.BlocksSkipped++
		c.blk.UserStarts = c.blk.UserStarts[:min(len(c.blk.UserStarts), 1)]
		c.user, c.hashUser = 0, -1
		if c.meta.Blocks[c.block].Users > 1 || c.block+1 >= len(c.meta.Blocks) || !blockContinued(c.meta, c.block+1) {
			return false, nil
		}
		// The user fills this skipped block and goes on into the next:
		// keep following it (continues needs a last user in the block).
		c.blk.UserStarts = append(c.blk.UserStarts[:0], 0, 0)
	}
	return false, nil
}

// hash returns the current user's hash: stored, or computed from its id
// (blocks read with segment.KeysIDs) once per user.
func (c *cursor) hash() uint64 {
	if len(c.blk.UserHashes) > 0 {
		return c.blk.UserHashes[c.user]
	}
	if c.hashUser != c.user {
		c.hashUser, c.hashV = c.user, segment.UserHash(c.blk.UserID(c.user))
	}
	return c.hashV
}

func (c *cursor) id() []byte { return c.blk.UserID(c.user) }

func less(a, b *cursor) bool {
	ha, hb := a.hash(), b.hash()
	if ha != hb {
		return ha < hb
	}
	if c := bytes.Compare(a.id(), b.id()); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// open prepares cursor c for segment ref: it compiles the query for the
// segment and reports whether the segment can hold a passing row (with
// AllUsers: always).
func (sc *shardScanner) open(c *cursor, ref SegmentRef, r *segment.Reader) (bool, error) {
	meta := r.Meta()
	c.r, c.meta, c.seq, c.block, c.user, c.hashUser = r, meta, ref.SeqMax, -1, 0, -1
	c.erase, c.eraseAt = sc.snap.erasing().forSegment(c.erase, &ref, sc.snap.Shards), 0
	c.users = ref.Kind == KindUsers && sc.spec.Kind != KindUsers
	c.plan, c.uplan, c.rowWise, c.deltas = nil, nil, false, false
	if c.users {
		up := &c.ownU
		if sc.spec.CompileUsers != nil {
			var err error
			if up, err = sc.spec.CompileUsers(ref, meta); err != nil {
				return false, err
			}
		}
		if len(up.Cols) != sc.spec.UserProps {
			return false, fmt.Errorf("storage: users plan for segment %s has %d values, want %d", ref.File, len(up.Cols), sc.spec.UserProps)
		}
		c.uplan = up
		c.onceCode = slices.Index(meta.EventNames, SetOnceEvent)
		c.unsetCode = slices.Index(meta.EventNames, UnsetEvent)
		c.addCode = slices.Index(meta.EventNames, AddEvent)
		c.delCode = slices.Index(meta.EventNames, DeleteEvent)
		c.hasOps = c.unsetCode >= 0 || c.addCode >= 0 || c.delCode >= 0
		if c.onceCode >= 0 {
			c.noTimes = false // set-once writes need their times
		}
		return true, nil
	}
	if sc.spec.Compile != nil {
		p, err := sc.spec.Compile(ref, meta)
		if err != nil {
			return false, err
		}
		if len(p.Cols) != sc.spec.Cols || len(p.Masks) != len(meta.EventNames) || (p.Cond != nil && len(p.Cond) != len(meta.EventNames)) {
			return false, fmt.Errorf("storage: segment plan for %s does not fit the segment or the spec", ref.File)
		}
		c.plan = p
	} else {
		c.own = SegmentPlan{Masks: sc.spec.Masks(meta)}
		c.plan = &c.own
	}
	var err error
	if c.rowDels, err = sc.deletesIn(c, &ref, meta); err != nil {
		return false, err
	}
	c.masks = c.plan.Masks
	c.live = c.live[:0]
	anyLive := false
	for code, m := range c.masks {
		for len(c.live) <= code>>6 {
			c.live = append(c.live, 0)
		}
		if c.plan.Cond != nil && c.plan.Cond[code] != 0 {
			m |= c.plan.Cond[code]
			c.rowWise = true
		}
		if m != 0 {
			c.live[code>>6] |= 1 << (code & 63)
			anyLive = true
		}
	}
	if len(c.rowDels) > 0 {
		c.rowWise = true
	}
	c.live8 = [8]uint64{}
	copy(c.live8[:], c.live)
	// The footer's per-event row counts say how many rows can match: with
	// few, the row filter branches on the match (predicted right for most
	// rows) instead of writing every row branch-free.
	var live int64
	for code, m := range c.masks {
		if m != 0 {
			live += meta.EventRows[code]
		}
	}
	c.sparse = !c.rowWise && live*sparseDen <= meta.Rows*sparseNum
	// Without row masks, and without property columns or with few
	// matching rows, the block's time deltas are summed in the row filter
	// (the sparse filter sums them only up to each match).
	c.deltas = !c.rowWise && (sc.spec.Cols == 0 || c.sparse)
	// The vector filter pays off when it compacts: with most rows
	// passing, the per-user loop writes them as fast (see vectorNum).
	// Rows it may thin count as compacted.
	c.thin = nil
	var thinRows int64
	if th := sc.spec.Thin; th.Mask != 0 && th.Slot > 0 {
		c.thinBuf = segment.Thinning{Origin: th.Origin, Slot: th.Slot}
		for code, m := range c.masks {
			if m == th.Mask && code < 64*len(c.thinBuf.Codes) {
				c.thinBuf.Codes[code>>6] |= 1 << (code & 63)
				thinRows += meta.EventRows[code]
			}
		}
	}
	c.vector = segment.HasAVX512() && c.deltas && !c.sparse && len(c.live) <= len(c.live8) && (live-thinRows)*vectorDen <= meta.Rows*vectorNum
	if c.vector && thinRows > 0 {
		c.thin = &c.thinBuf
	}
	if c.rowWise && c.plan.Rows == nil {
		return false, fmt.Errorf("storage: segment plan for %s has Cond bits but no Rows", ref.File)
	}
	return anyLive || sc.spec.AllUsers, nil
}

// deletesIn compiles the version's pending events deletions for events
// cursor c at segment ref and, when some apply, makes c's plan clear the
// rows they delete (cursor.deleteRows), their columns decoded after the
// plan's.
func (sc *shardScanner) deletesIn(c *cursor, ref *SegmentRef, meta *segment.Meta) ([]rowDelete, error) {
	x := sc.snap.erasing()
	if x == nil || len(x.events) == 0 {
		return c.rowDels[:0], nil
	}
	props := slices.Clip(c.plan.Props)
	col := func(mi int) int {
		if j := slices.Index(props, mi); j >= 0 {
			return j
		}
		props = append(props, mi)
		return len(props) - 1
	}
	dels, err := x.eventDeletes(c.rowDels, ref, meta, col)
	if err != nil || len(dels) == 0 {
		return dels, err
	}
	p := c.deleteRows(c.plan, dels)
	p.Props = props
	c.plan = p
	return dels, nil
}

// advance moves c to its next user, loading the next useful block when the
// current one is exhausted. It returns false when the segment is done.
func (sc *shardScanner) advance(ctx context.Context, c *cursor) (bool, error) {
	c.user++
	for c.user < len(c.blk.UserStarts)-1 {
		if !c.erased() {
			return true, nil
		}
		c.user++
	}
	if ok, err := sc.nextBlock(ctx, c); ok || err != nil {
		return ok, err
	}
	return sc.nextSegment(ctx, c)
}

// nextSegment opens the next segment of c's chain that has a block that
// can hold a passing row and positions c at its first user. It returns
// false when the chain is exhausted.
func (sc *shardScanner) nextSegment(ctx context.Context, c *cursor) (bool, error) {
	for len(c.chain) > 0 {
		ref := c.chain[0]
		c.chain = c.chain[1:]
		r, err := sc.snap.Reader(ref)
		if err != nil {
			return false, err
		}
		ok, err := sc.open(c, ref, r)
		if err != nil {
			return false, err
		}
		if !ok {
			sc.st.SegmentsSkipped++
			continue
		}
		if ok, err = sc.nextBlock(ctx, c); err != nil {
			return false, err
		}
		if ok {
			sc.st.SegmentsRead++
			return true, nil
		}
	}
	return false, nil
}

// chainScratch is the reusable memory of chainSegments.
type chainScratch struct {
	sorted, chained []SegmentRef
	chains          [][]SegmentRef
	owner           []int32
	tails           []chainTail
}

// chainTail is the end of one chain while chainSegments builds them.
type chainTail struct {
	kind  SegmentKind // the chain's segments' kind
	known bool        // the chain's last segment has a hash range
	last  uint64      // its LastHash
}

// chainSegments partitions a shard's segments into chains (runs) that
// one cursor can read one after the other: segments of one kind whose
// user-hash ranges (SegmentRef FirstHash..LastHash, written by
// compaction) are disjoint and ascending. No user has rows in two segments
// of a chain, so the k-way merge needs one heap entry per chain instead of
// one per segment. A segment without a known range (FirstHash = LastHash =
// 0) forms a chain of its own. Chains are built greedily (segments in
// FirstHash order, each appended to the first chain that ends below it),
// which is optimal for interval partitioning. The returned slices live in
// sc and are valid until its next use.
func chainSegments(refs []SegmentRef, sc *chainScratch) [][]SegmentRef {
	sorted := append(sc.sorted[:0], refs...)
	slices.SortStableFunc(sorted, func(a, b SegmentRef) int { return cmp.Compare(a.FirstHash, b.FirstHash) })
	owner, tails := sc.owner[:0], sc.tails[:0]
	for _, ref := range sorted {
		known := ref.FirstHash != 0 || ref.LastHash != 0
		ch := -1
		if known {
			ch = slices.IndexFunc(tails, func(t chainTail) bool { return t.kind == ref.Kind && t.known && t.last < ref.FirstHash })
		}
		if ch < 0 {
			ch = len(tails)
			tails = append(tails, chainTail{})
		}
		tails[ch] = chainTail{kind: ref.Kind, known: known, last: ref.LastHash}
		owner = append(owner, int32(ch))
	}
	chained := slices.Grow(sc.chained[:0], len(sorted))
	out := sc.chains[:0]
	for ch := range tails {
		start := len(chained)
		for i, ref := range sorted {
			if owner[i] == int32(ch) {
				chained = append(chained, ref)
			}
		}
		out = append(out, chained[start:len(chained):len(chained)])
	}
	sc.sorted, sc.owner, sc.tails, sc.chained, sc.chains = sorted, owner, tails, chained, out
	return out
}

// nextBlock decodes the next block of c that can hold a passing row.
func (sc *shardScanner) nextBlock(ctx context.Context, c *cursor) (bool, error) {
	for c.block++; c.block < len(c.meta.Blocks); c.block++ {
		if !c.users && !sc.spec.AllUsers && !sc.mayPass(c, c.block) {
			sc.st.BlocksSkipped++
			continue
		}
		if err := sc.readBlock(ctx, c); err != nil {
			return false, err
		}
		if len(c.blk.UserStarts) < 2 {
			continue
		}
		c.user = 0
		for c.user < len(c.blk.UserStarts)-1 && c.erased() {
			c.user++
		}
		if c.user == len(c.blk.UserStarts)-1 {
			continue
		}
		return true, nil
	}
	return false, nil
}

// mayPass reports whether block b of c's events segment can hold a
// passing row, by its zone map: time range and event codes present.
func (sc *shardScanner) mayPass(c *cursor, b int) bool {
	bm := &c.meta.Blocks[b]
	return bm.MaxTime >= sc.spec.From && bm.MinTime < sc.spec.To && intersects(bm.Events, c.live)
}

// readBlock decodes block c.block of c as c's mode says (see cursor) and
// counts it.
func (sc *shardScanner) readBlock(ctx context.Context, c *cursor) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var props []int
	if c.users {
		props = c.uplan.Props
	} else {
		props = c.plan.Props
	}
	var err error
	switch {
	case c.users && c.noTimes:
		err = c.r.ReadBlockNoTimes(c.block, props, c.keys, &c.blk)
	case (c.sparse || c.vector) && c.deltas:
		err = c.r.ReadBlockPacked(c.block, props, c.keys, &c.blk)
	case c.deltas && c.keys != segment.KeysNone:
		err = c.r.ReadBlockDeltas(c.block, props, &c.blk)
	case c.deltas:
		err = c.r.ReadBlockRows(c.block, props, &c.blk)
	default:
		err = c.r.ReadBlock(c.block, props, &c.blk)
	}
	c.hashUser = -1
	if err != nil {
		return err
	}
	if c.rowWise {
		c.rowMask = slices.Grow(c.rowMask[:0], c.blk.Rows)[:c.blk.Rows]
		c.plan.Rows(&c.blk, c.rowMask)
	}
	c.bytes = c.blk.Bytes() + int64(cap(c.rowMask))*8
	bm := &c.meta.Blocks[c.block]
	c.inRange = bm.MinTime >= sc.spec.From && bm.MaxTime < sc.spec.To
	sc.st.BlocksRead++
	sc.st.EventsScanned += int64(c.blk.Rows)
	sc.st.BytesRead += c.blk.BytesRead
	return nil
}

// blockContinued reports whether block b's first user continues the
// previous block's last user (segment.BlockMeta.Continued; segments of
// format versions before 4 never split a user).
func blockContinued(m *segment.Meta, b int) bool { return m.Blocks[b].Continued }

func intersects(a, b []uint64) bool {
	for i := range min(len(a), len(b)) {
		if a[i]&b[i] != 0 {
			return true
		}
	}
	return false
}

// push and pop keep sc.heap a binary min-heap by (hash, id, seq).
func (sc *shardScanner) push(c *cursor) { sc.heap = heapPush(sc.heap, c, less) }

func (sc *shardScanner) pop() *cursor {
	c, h := heapPop(sc.heap, less)
	sc.heap = h
	return c
}
