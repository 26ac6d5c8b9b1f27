package storage

import (
	"bytes"
	"context"
	"math"
	"slices"

	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/internal/userfold"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// shardScanner is one worker's reusable scan state.
type shardScanner struct {
	snap *Version
	// erasing: pending deletions hide users in a segment of the shard
	// being scanned (scanShard)
	erasing bool
	spec    *ScanSpec
	v       Visitor
	st      *ScanStats

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
	// per user value: the earliest set-once write and its time; onceSeen:
	// some users segment of the scan has set-once writes
	uonce    []trail.Value
	uonceAt  []int64
	onceSeen bool
	// The exact fold of a user with unset, add or delete writes
	// (ucollect, set per user from cursor.userOps): collectUserValues
	// gathers its writes per user value in arrival order (urank numbers
	// the rows gathered so far) and finishUserValues folds them
	// (internal/userfold). uops is reused from user to user.
	ucollect bool
	uops     [][]userfold.Write[ubits]
	urank    int64
	joined   *identity.Snapshot // the persons join's graph, nil without one
	// keepTimes reads users blocks with their times also when a shard has
	// one users chain: the person join needs each value's write time.
	keepTimes bool
	fs        segment.FilterScratch
	bd        segment.BlockDeltas // drainUsers' deltas for segment.FilterDeltasBlock
	excRank   segment.RankCache   // bd's exception rank, reset by drain at each block
	// mergeParts scratch
	perm, perm2 []int32
	sTimes      []int64
	sBits       []uint64
	sSet        []bool

	// mergeUser's state
	group       []*cursor   // the cursors at the user, in arrival order
	id          []byte      // the user's id (a copy)
	chunk       trail.Trail // the chunk being visited (views of trail)
	chunkEvents int         // ScanSpec.ChunkEvents or its default
	srcs        []partSrc   // the appendRows calls (blocks) of the trail buffer's parts
	bounds      []int       // the parts' bounds before mergeParts
	ties        bool        // two parts hold events at one time
	held        int64       // bytes of growing buffers reported to ScanSpec.Grow
	// mergeLong's state (a user whose rows go on past a block): the
	// group's events cursors (parts), the buffers of their rows not yet
	// merged (those free), the merged rows not yet visited, how many of
	// the user's events were visited before them, and where each cursor
	// of the group started (for a rewind)
	mparts    []mergePart
	bufs      []trail.Trail
	freeBufs  []int
	out       trail.Trail
	outOff    int
	starts    [][2]int
	longBytes int64 // what bufs and out hold (capacities), as of the last round
	// drain's carried trail (in trail): a user whose rows go on into the
	// next block
	carrying  bool    // a trail is carried
	carryCont bool    // the current block's first user continues it
	carryKey  UserKey // its user (ID in id)
	carryOff  int     // events of it visited already
	ccols     []trail.Column
	// dedupTies scratch
	drop     []int
	seen     [][2]string
	ties2    []tieRow
	tieBlk   segment.Block
	tieBytes int64 // tieBlk.Bytes() as of its last read
	tieMask  []uint64
	tieProps []int
}

// maxIdleScanBytes bounds the buffers of a worker's scan state kept for
// the next scan (Store.scanners): one that grew past it — a shard of
// many overlapping segments holds a decoded block per segment, 29 blocks
// of 64 Ki rows are 55 MB — is left to the garbage collector, since the
// next scan would report what it holds to ScanSpec.Grow whatever shard it
// reads, and a worker given a smaller one would grow its own as well.
const maxIdleScanBytes = 32 << 20

// grow reports the growth of the worker's buffers since the last report
// to ScanSpec.Grow (a query's memory budget), which may refuse it. The
// buffers are bounded by the blocks and chunks of a scan, not by the
// length of a trail (mergeLong, drain), but for a group of equal
// timestamps, which is never split, and the trail drain carries whole
// for a PrepassVisitor. Called once per user or merge round, it costs a
// few capacity reads.
func (sc *shardScanner) grow() error {
	if sc.spec.Grow == nil {
		return nil
	}
	n := sc.bufferBytes()
	if n <= sc.held {
		return nil
	}
	d := n - sc.held
	sc.held = n
	return sc.spec.Grow(d)
}

func (sc *shardScanner) bufferBytes() int64 {
	var n int64
	for _, c := range sc.free {
		n += c.bytes
	}
	n += trailBytes(&sc.trail) + sc.longBytes + sc.tieBytes + int64(cap(sc.sTimes)+cap(sc.sBits))*8
	n += int64(cap(sc.blkTimes)+cap(sc.blkMask))*8 + int64(cap(sc.blkEnds))*4
	n += int64(cap(sc.rows)+cap(sc.perm)+cap(sc.perm2))*4 + int64(cap(sc.sSet))
	return n + sc.fs.Bytes()
}

// trailBytes returns the bytes of t's times, masks and columns
// (capacities).
func trailBytes(t *trail.Trail) int64 {
	n := int64(cap(t.Times)+cap(t.Mask)) * 8
	for _, c := range t.Cols {
		n += int64(cap(c.Bits))*8 + int64(cap(c.Set))
	}
	return n
}

func (sc *shardScanner) scanShard(ctx context.Context, refs []SegmentRef) error {
	sc.heap = sc.heap[:0]
	if len(sc.trail.Cols) != sc.spec.Cols {
		sc.trail.Cols = make([]trail.Column, sc.spec.Cols)
	}
	if len(sc.trail.User) != sc.spec.UserProps {
		sc.trail.User = make([]trail.Value, sc.spec.UserProps)
		sc.ubest = make([]int64, sc.spec.UserProps)
		sc.uonce = make([]trail.Value, sc.spec.UserProps)
		sc.uonceAt = make([]int64, sc.spec.UserProps)
	}
	sc.onceSeen = false
	sc.unsetOnce()
	// Pending deletions that hide users in one of the shard's segments:
	// the cursors skip them (cursor.erased; drain decodes the ids to,
	// and drainAhead is off).
	sc.erasing = false
	if x := sc.snap.erasing(); x != nil {
		for i := range refs {
			if x.holds(&refs[i], sc.snap.Shards) {
				sc.erasing = true
				break
			}
		}
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
		c.chain, c.keys, c.noTimes = run, segment.KeysAll, usersChains == 1 && !sc.keepTimes
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
		if !sc.erasing {
			if ok, err := sc.drainAhead(ctx); err != nil {
				return err
			} else if ok {
				continue
			}
		}
		if err := sc.mergeUser(ctx); err != nil {
			return err
		}
	}
	return nil
}

// mergeUser visits the user at the top of the heap (the general path of
// a shard with several chains): it takes every cursor positioned at the
// user, in (hash, id, arrival) order, applies the users cursors'
// property writes, merges the events cursors' passing rows by (time,
// arrival) when they come from several segments, drops duplicate events
// across segments (docs/ingest.md §3: dedupTies), visits the trail in chunks,
// and moves every cursor past the user.
//
// A user whose rows all lie in the cursors' current blocks (every user
// but the few with more rows than a block holds) is assembled whole in
// sc.trail and visited by visitUser. A user whose rows go on into a next
// block in some segment is merged block by block by mergeLong, in memory
// bounded by the blocks and the chunk size, whatever the trail's length.
func (sc *shardScanner) mergeUser(ctx context.Context) error {
	first := sc.pop()
	group := append(sc.group[:0], first)
	for len(sc.heap) > 0 && sc.heap[0].hash() == first.hash() && bytes.Equal(sc.heap[0].id(), first.id()) {
		group = append(group, sc.pop())
	}
	sc.group = group
	sc.startUser()
	sc.id = append(sc.id[:0], first.id()...) // the blocks holding it may be replaced below
	key := UserKey{Hash: first.hash(), ID: sc.id}
	long := false
	sc.startCollect(group, key.Hash, key.ID)
	for _, c := range group {
		if c.users {
			if err := sc.userWrites(ctx, c, true); err != nil {
				return err
			}
			continue
		}
		long = long || c.continues()
	}
	sc.finishUserValues()
	if long {
		if err := sc.mergeLong(ctx, key); err != nil {
			return err
		}
	} else {
		for i, c := range group {
			if !c.users {
				sc.appendRows(c, i)
			}
		}
		if err := sc.grow(); err != nil {
			return err
		}
		if len(sc.parts) > 2 {
			sc.mergeParts()
			if sc.ties {
				if err := sc.dedupTies(group); err != nil {
					return err
				}
			}
		}
		sc.visitUser(key)
	}
	for _, c := range group {
		ok, err := sc.advance(ctx, c)
		if err != nil {
			return err
		}
		if ok {
			sc.push(c)
		}
	}
	return nil
}

// visitUser hands the assembled trail of user key (sc.trail, final) to
// the visitor (visitChunked). Users without passing rows are visited only
// when the scan visits all users.
func (sc *shardScanner) visitUser(key UserKey) {
	t := &sc.trail
	if len(t.Times) == 0 && !sc.spec.AllUsers {
		return
	}
	t.ID = key.ID
	sc.visitChunked(key, t)
}

// visitChunked hands user key's whole trail t to the visitor: in one call
// when it fits in one chunk, else in chunks of at most ScanSpec.ChunkEvents
// events that never split a group of equal timestamps — all to Prepass
// first when the visitor is a PrepassVisitor, then all to Visit.
func (sc *shardScanner) visitChunked(key UserKey, t *trail.Trail) {
	if len(t.Times) <= sc.chunkEvents {
		t.Offset, t.More = 0, false
		sc.v.Visit(key, t)
		return
	}
	if pv, ok := sc.v.(PrepassVisitor); ok {
		sc.visitChunks(key, t, 0, false, false, pv.Prepass)
	}
	sc.visitChunks(key, t, 0, false, false, sc.v.Visit)
}

// visitChunks calls visit with the chunks of the events of t (views of
// its slices in sc.chunk): the first at Offset base, the last with More
// set to more. With hold, the last chunk is not visited: it returns where
// it starts (else len(t.Times)).
func (sc *shardScanner) visitChunks(key UserKey, t *trail.Trail, base int, more, hold bool, visit func(UserKey, *trail.Trail)) int {
	c := &sc.chunk
	if len(c.Cols) != len(t.Cols) {
		c.Cols = make([]trail.Column, len(t.Cols))
	}
	c.User, c.ID = t.User, t.ID
	n := len(t.Times)
	for i := 0; i < n; {
		j := chunkEnd(t.Times, i, sc.chunkEvents)
		if hold && j == n {
			return i
		}
		c.Times, c.Mask = t.Times[i:j:j], t.Mask[i:j:j]
		for k := range t.Cols {
			c.Cols[k] = trail.Column{Set: t.Cols[k].Set[i:j:j], Bits: t.Cols[k].Bits[i:j:j]}
		}
		c.Offset, c.More = base+i, j < n || more
		visit(key, c)
		i = j
	}
	return n
}

// chunkEnd returns where the chunk starting at event i of times ends: at
// most limit events on, moved back to the start of the group of equal
// timestamps it would split, or, when that group starts at i, forward
// past it (a group longer than limit is one chunk).
func chunkEnd(times []int64, i, limit int) int {
	j := i + limit
	if j >= len(times) {
		return len(times)
	}
	for k := j; k > i; k-- {
		if times[k] != times[k-1] {
			return k
		}
	}
	for j < len(times) && times[j] == times[i] {
		j++
	}
	return j
}

// startUser resets the per-user buffers.
func (sc *shardScanner) startUser() {
	resetTrail(&sc.trail, len(sc.trail.Cols))
	sc.unsetUserValues()
	sc.parts = append(sc.parts[:0], 0)
	sc.srcs = sc.srcs[:0]
	sc.ties = false
}

// appendRows appends cursor c's current user's rows that pass the spec to
// the trail buffer (filterRows) as a new part, recording the call in
// sc.srcs for dedupTies: part is c's index in the user's group.
func (sc *shardScanner) appendRows(c *cursor, part int) {
	n := sc.filterRows(&sc.trail, c)
	src := partSrc{cursor: int32(part), block: int32(c.block), user: int32(c.user), part: -1}
	if n > sc.parts[len(sc.parts)-1] {
		src.part = int32(len(sc.parts) - 1)
		sc.parts = append(sc.parts, n)
	}
	sc.srcs = append(sc.srcs, src)
}

// filterRows appends cursor c's current user's rows in its block that
// pass the spec to dst and returns dst's new length. This is the
// per-event hot loop of every query: one
// table lookup per event (or one row-mask read when the segment has
// property filters), and no data-dependent branch (every row is written,
// and the write position advances only for passing rows, which the
// compiler turns into a conditional move), since which events match is
// unpredictable. When the block's zone map lies inside the range, the time
// test is dropped. With property columns, the block row of each kept event
// is recorded the same way and the columns are gathered afterwards.
func (sc *shardScanner) filterRows(dst *trail.Trail, c *cursor) int {
	b := &c.blk
	s, e := b.UserStarts[c.user], b.UserStarts[c.user+1]
	codes := b.Events[s:e:e]
	masks := c.masks
	n := len(dst.Times)
	tt := slices.Grow(dst.Times, len(codes))[:n+len(codes)]
	tm := slices.Grow(dst.Mask, len(codes))[:n+len(codes)]
	out := tt[n:]
	outm := tm[n:]
	k := 0
	from, span := sc.spec.From, uint64(sc.spec.To)-uint64(sc.spec.From)
	rows := slices.Grow(sc.rows[:0], len(codes))[:len(codes)]
	if c.vector {
		grows := cap(b.Deltas) < b.Rows
		b.UnpackDeltas() // read packed for drain
		if grows {
			c.bytes = b.Bytes() + int64(cap(c.rowMask))*8
		}
	}
	switch {
	case c.sparse:
		var end [1]int32
		k = segment.FilterDeltasSparse(out, outm, rows, end[:], b, b.Events, b.UserStarts[c.user:c.user+2], masks, b.TimeBase, b.TimeGCD, from, span)
	case !c.deltas && c.rowWise:
		k = filterRowsAt(out, outm, rows, b.Times[s:e], c.rowMask[s:e:e], s, from, span)
	case !c.deltas:
		k = filterCodesAt(out, outm, rows, b.Times[s:e], codes, masks, s, from, span)
	case c.inRange:
		k = segment.FilterDeltas(out, outm, b.Deltas[s:e], codes, masks, b.TimeBase, b.TimeGCD)
	default:
		k = segment.FilterDeltasInRange(out, outm, b.Deltas[s:e], codes, masks, b.TimeBase, b.TimeGCD, from, span)
	}
	sc.rows = rows[:k]
	for j := range dst.Cols {
		appendCol(&dst.Cols[j], c.plan.Cols[j], b, sc.rows)
	}
	dst.Times, dst.Mask = tt[:n+k], tm[:n+k]
	return n + k
}

// partSrc is one appendRows call of a user (or, in mergeLong, one block's
// rows merged in a round): cursor (index in the user's group), block and
// user index in the block, and the trail buffer part holding its passing
// rows (-1: none).
type partSrc struct {
	cursor, block, user, part int32
}

// userValues applies the current user's property writes in users cursor c
// to the trail's user values (docs/analytics.md §1): a SetEvent write replaces the held
// value unless it is older; cursors come in Seq order and a user's rows
// in (time, arrival) order, so the latest write wins and a tie goes to
// the later arrival. A block read without times (cursor.noTimes) is its
// user's only source: its last write wins. A SetOnceEvent write is kept
// aside, the earliest winning (a tie to the earlier arrival), for
// finishUserValues to use where no SetEvent write set the property.
func (sc *shardScanner) userValues(c *cursor) {
	if sc.ucollect {
		sc.collectUserValues(c)
		return
	}
	b := &c.blk
	s, e := int(b.UserStarts[c.user]), int(b.UserStarts[c.user+1])
	times := len(b.Times) > 0
	once := c.onceCode
	for j, src := range c.uplan.Cols {
		if src.Prop < 0 {
			continue
		}
		pd := &b.Props[src.Prop]
		for r := s; r < e; r++ {
			if pd.Present[r>>6]>>(r&63)&1 == 0 {
				continue
			}
			if once >= 0 && int(b.Events[r]) == once {
				if b.Times[r] < sc.uonceAt[j] {
					sc.uonceAt[j] = b.Times[r]
					sc.uonce[j] = trail.Value{Set: true, Bits: columnBits(pd, src, r)}
				}
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
	sc.onceSeen = sc.onceSeen || once >= 0
}

// finishUserValues gives the properties no SetEvent write set the
// earliest SetOnceEvent write, once all of the user's writes are applied.
func (sc *shardScanner) finishUserValues() {
	if sc.ucollect {
		for j := range sc.trail.User {
			v, set := userfold.Fold(sc.uops[j], addBits)
			sc.trail.User[j] = trail.Value{Set: set, Bits: v.bits}
		}
		return
	}
	if !sc.onceSeen {
		return
	}
	for j := range sc.trail.User {
		if !sc.trail.User[j].Set && sc.uonce[j].Set {
			sc.trail.User[j] = sc.uonce[j]
		}
	}
}

// ubits is a user value's bits as the fold carries them: Kind says how
// an add sums them (addBits).
type ubits struct {
	bits uint64
	kind ColumnKind
}

// addBits is userfold's add for trail bits: int columns add as int64
// (wrapping), float ones as float64; other kinds are not numbers (the add
// is ignored). The sum takes cur's kind.
func addBits(cur, d ubits) (ubits, bool) {
	switch cur.kind {
	case ColInt:
		if d.kind == ColInt {
			return ubits{bits: uint64(int64(cur.bits) + int64(d.bits)), kind: ColInt}, true
		}
	case ColFloat, ColIntFloat:
		if d.kind == ColFloat || d.kind == ColIntFloat {
			s := math.Float64frombits(cur.bits) + math.Float64frombits(d.bits)
			if s == 0 {
				s = 0 // -0 as +0, as columnBits
			}
			return ubits{bits: math.Float64bits(s), kind: cur.kind}, true
		}
	}
	return cur, false
}

// startCollect sets the fold of user (h, id), about to be joined from
// its users cursors cs: exact (collecting its writes) when one of them
// has writes the fast fold cannot apply, or when the scan joins persons
// (sc.joined) and the id is one of a joined person's, whose values fold
// with its other ids' (personMerge.foldUserValues needs every write).
func (sc *shardScanner) startCollect(cs []*cursor, h uint64, id []byte) {
	sc.ucollect = false
	for _, c := range cs {
		if c.users && c.userOps() {
			sc.ucollect = true
			break
		}
	}
	if !sc.ucollect && sc.joined != nil && len(cs) > 0 && sc.joined.MayBeJoined(h) {
		p := sc.joined.LookupHash(h, id)
		sc.ucollect = p != nil && len(p.DistinctIDs) > 1
	}
	if !sc.ucollect {
		return
	}
	if len(sc.uops) != len(sc.trail.User) {
		sc.uops = make([][]userfold.Write[ubits], len(sc.trail.User))
	}
	for j := range sc.uops {
		sc.uops[j] = sc.uops[j][:0]
	}
	sc.urank = 0
}

// collectUserValues appends the current user's writes in users cursor c
// to sc.uops: per user value, each row with the property (a DeleteEvent
// row: every row) as a write of its time (0 in a block read without
// times, whose rows are in time order and the user's only ones) and
// arrival rank (cursors come in Seq order, a user's rows in (time,
// arrival) order).
func (sc *shardScanner) collectUserValues(c *cursor) {
	b := &c.blk
	s, e := int(b.UserStarts[c.user]), int(b.UserStarts[c.user+1])
	times := len(b.Times) > 0
	for j, src := range c.uplan.Cols {
		var pd *segment.PropData
		if src.Prop >= 0 {
			pd = &b.Props[src.Prop]
		}
		ws := sc.uops[j]
		for r := s; r < e; r++ {
			w := userfold.Write[ubits]{Rank: sc.urank + int64(r-s)}
			if times {
				w.Time = b.Times[r]
			}
			switch code := int(b.Events[r]); {
			case code == c.delCode:
				w.Op = userfold.Delete
				ws = append(ws, w)
				continue
			case pd == nil || pd.Present[r>>6]>>(r&63)&1 == 0:
				continue
			case code == c.onceCode:
				w.Op = userfold.SetOnce
			case code == c.unsetCode:
				w.Op = userfold.Unset
			case code == c.addCode:
				w.Op = userfold.Add
			default:
				w.Op = userfold.Set
			}
			w.Value = ubits{bits: columnBits(pd, src, r), kind: src.Kind}
			ws = append(ws, w)
		}
		sc.uops[j] = ws
	}
	sc.urank += int64(e - s)
}

// mergeParts orders the trail buffer, made of time-sorted parts (one per
// segment, in Seq order), by time; equal times keep part order, which is
// arrival order. It merges a permutation pairwise, then gathers the
// times, masks and columns through it. It sets sc.ties when two parts
// hold events with equal times (possible duplicates, see dedupTies), and
// leaves in sc.perm the buffer position each merged event came from.
func (sc *shardScanner) mergeParts() {
	sc.bounds = append(sc.bounds[:0], sc.parts...)
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
			ti, tj := times[perm[i]], times[perm[j]]
			if tj < ti {
				out = append(out, perm[j])
				j++
			} else {
				sc.ties = sc.ties || ti == tj
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
