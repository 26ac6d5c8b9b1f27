package storage

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// ScanSpec says what a scan reads.
type ScanSpec struct {
	// Kind is the kind of segments to read (default KindEvents).
	Kind SegmentKind
	// From and To bound the rows read: only rows with From <= time < To
	// reach the visitor; segments and blocks whose time range lies outside
	// are skipped.
	From, To int64
	// Masks compiles the query's matchers for one segment: it returns, per
	// event code of meta.EventNames, the bit set of matchers that code
	// satisfies (len(meta.EventNames) entries). It is called once per
	// segment per scan, from the scanning goroutine of that segment's shard,
	// and must not retain meta. Rows whose mask is 0 are dropped, blocks
	// holding only such rows are not decoded, and a segment whose masks are
	// all 0 is skipped.
	Masks func(meta *segment.Meta) []uint64
	// Compile, if set, is used instead of Masks: it compiles the query for
	// one events segment into a SegmentPlan (matcher bits per event code,
	// row-level property filters, property columns for the trail). Like
	// Masks it is called once per segment per scan from the scanning
	// goroutine and must not retain meta; an error fails the scan.
	Compile func(ref SegmentRef, meta *segment.Meta) (*SegmentPlan, error)
	// Cols is the number of event property columns every trail carries
	// (trail.Trail.Cols); SegmentPlan.Cols says how to fill them.
	Cols int
	// UserProps is the number of user property values every trail carries
	// (trail.Trail.User). When > 0 the scan merges each shard's users
	// segments (all of them, whatever the time range) into its k-way merge
	// and sets Trail.User[j] to the user's current value (spec §1: the
	// latest write by timestamp wins; equal timestamps: the later
	// arrival). CompileUsers must then be set; it is called like Compile,
	// once per users segment.
	UserProps    int
	CompileUsers func(ref SegmentRef, meta *segment.Meta) (*UserSegmentPlan, error)
	// AllUsers makes the scan visit every user of the segments it reads —
	// events segments overlapping [From, To) and every users segment (with
	// AllUsers they are merged even when UserProps is 0) — also users
	// without a passing row (with an empty trail). It turns off the
	// skipping of segments and blocks by event index and of blocks by time.
	AllUsers bool
	// NoIDs says that no visitor reads the UserKey or Trail.ID (no user
	// lists): the scan then leaves them zero where it can and skips
	// decoding the users' hashes and ids (ReadBlockRows).
	NoIDs bool
	// Workers is the number of goroutines scanning shards in parallel;
	// 0 means GOMAXPROCS.
	Workers int
	// Thin, when its Mask is not 0, lets the scan omit rows no visitor
	// needs (see Thin).
	Thin Thin
}

// Thin says which rows a scan may omit: of each run of consecutive rows
// of a user — consecutive as stored: any row between them, passing or
// not, ends the run — that all have mask exactly Mask, lie in [From, To)
// and in one slot [Origin + k·Slot, Origin + (k+1)·Slot) (µs), all but
// the first.
// The visitors must answer alike whichever of these rows they are given:
// an analysis that only asks in which of its time buckets a user has a
// row of those matchers, with every bucket boundary and range end on a
// slot boundary (a calendar retention's return events; a distinct-users
// trend). A row with other mask bits is never omitted and ends a run.
//
// It is a hint: only the AVX-512 row filter thins (filterDeltasBlock;
// blocks without property columns or row masks), and only rows less than
// 2^51 µs (71 years) from Origin, or, in blocks wholly in [From, To)
// whose time unit (segment.Block.TimeGCD) divides Slot, 2^51 of those
// units. Where it thins, a run of returns on one day costs one passing
// row instead of one per event.
type Thin struct {
	Mask   uint64 // the thinned rows' mask; 0: no thinning
	Origin int64  // a slot boundary, UTC µs
	Slot   int64  // slot length, µs (> 0)
}

// SegmentPlan is a query compiled for one events segment (ScanSpec.Compile).
// The scan only reads it.
type SegmentPlan struct {
	// Masks[code] is the set of matcher bits that every row with event
	// code holds (len(meta.EventNames) entries).
	Masks []uint64
	// Cond[code], if not nil, is the set of further matcher bits a row
	// with event code may hold depending on its properties
	// (len(meta.EventNames) entries). When some Cond entry is not 0, Rows
	// computes every row's mask.
	Cond []uint64
	// Props lists the property columns (indexes into meta.Props) that
	// ReadBlock decodes for Rows and Cols; Block.Props[j] is Props[j].
	Props []int
	// Rows sets rowMask[r], for every row r of the decoded block b
	// (len(rowMask) = b.Rows), to the row's complete mask: Masks of its
	// event code plus the Cond bits its properties satisfy. It is called
	// once per decoded block, from the scanning goroutine, and must not
	// retain b or rowMask.
	Rows func(b *segment.Block, rowMask []uint64)
	// Cols[j] says how to fill trail column j (ScanSpec.Cols entries).
	Cols []ColumnSource
}

// UserSegmentPlan is a query compiled for one users segment
// (ScanSpec.CompileUsers): the property columns to decode and, per
// Trail.User value, where it comes from (ScanSpec.UserProps entries).
type UserSegmentPlan struct {
	Props []int
	Cols  []ColumnSource
}

// ColumnKind says how a ColumnSource's values become trail.Value bits.
type ColumnKind uint8

// Column kinds.
const (
	ColInt    ColumnKind = iota // int, bool (0/1) and time (µs) properties: the int64
	ColFloat                    // float properties: math.Float64bits, with -0 stored as +0
	ColString                   // string properties: Remap[dictionary code]
	// ColIntFloat reads an int column of a property the app types float
	// (widened after the segment was written, spec §1): the int64 as
	// math.Float64bits of its float64 (exact up to 2^53).
	ColIntFloat
)

// ColumnSource says where one trail column (or user value) comes from in
// a segment: Block.Props[Prop], or nowhere when Prop < 0 (the segment
// lacks the property, so it is unset on every row). Unset values have
// Bits 0.
type ColumnSource struct {
	Prop  int
	Kind  ColumnKind
	Remap []uint32 // ColString: segment dictionary code → query-wide value id
}

// UserKey identifies the user of a trail: the xxhash64 of the user id and
// the id bytes (borrowed, valid until Visit returns).
type UserKey struct {
	Hash uint64
	ID   []byte
}

// Visitor receives the trails of one scan worker. Visit is called once per
// user that has at least one row passing the spec (with AllUsers: once per
// user of the scanned segments), with the user's rows in trail order
// (time, then arrival), the requested columns and user values, and t.ID
// set to u.ID; u.ID, t and its slices are borrowed until Visit returns.
// Each Visitor is used by one goroutine only.
type Visitor interface {
	Visit(u UserKey, t *trail.Trail)
}

// PrepassVisitor is a Visitor that must see a user's whole trail before it
// is visited with it (a cohort filter decided before an analysis adds the
// user). For a user whose trail comes in several chunks (package trail),
// the scan first calls Prepass with each chunk in order, then Visit with
// the same chunks again, in order; a user whose trail is one chunk gets
// Visit only (the visitor does both at once). Slices are borrowed until
// the call returns, as for Visit.
type PrepassVisitor interface {
	Visitor
	Prepass(u UserKey, t *trail.Trail)
}

// ScanStats counts the work of one scan.
type ScanStats struct {
	EventsScanned   int64 // rows decoded
	SegmentsRead    int64 // segments with at least one block decoded
	SegmentsSkipped int64 // segments skipped by time range or event index
	BlocksRead      int64 // blocks decoded
	BlocksSkipped   int64 // blocks skipped by time range or event index
	BytesRead       int64 // stored (compressed) bytes of the chunks decoded
	BufferBytes     int64 // peak bytes of decode and trail buffers held by the scan
}

func (s *ScanStats) add(o *ScanStats) {
	s.EventsScanned += o.EventsScanned
	s.SegmentsRead += o.SegmentsRead
	s.SegmentsSkipped += o.SegmentsSkipped
	s.BlocksRead += o.BlocksRead
	s.BlocksSkipped += o.BlocksSkipped
	s.BytesRead += o.BytesRead
	s.BufferBytes += o.BufferBytes
}

// Scan walks every user's trail in the snapshot: shards are scanned in
// parallel by len(visitors) workers (worker w calls only visitors[w]); within
// a shard a k-way merge across its segments hands each user's whole trail,
// in order, to the worker's visitor. Which worker sees which user depends on
// scheduling, so visitors must merge order-independently.
//
// It returns the first error met: a segment that cannot be opened or whose
// checksums fail (errors.Is(err, segment.ErrCorruption)), or ctx.Err().
func (s *Snapshot) Scan(ctx context.Context, spec ScanSpec, visitors []Visitor) (ScanStats, error) {
	if spec.Kind == "" {
		spec.Kind = KindEvents
	}
	if len(visitors) == 0 {
		return ScanStats{}, fmt.Errorf("storage: Scan needs at least one visitor")
	}
	if spec.Compile == nil && spec.Masks == nil {
		return ScanStats{}, fmt.Errorf("storage: Scan needs Masks or Compile")
	}
	withUsers := (spec.UserProps > 0 || spec.AllUsers) && spec.Kind != KindUsers
	if spec.UserProps > 0 && spec.CompileUsers == nil {
		return ScanStats{}, fmt.Errorf("storage: Scan with UserProps needs CompileUsers")
	}
	byShard := make([][]SegmentRef, s.Manifest.Shards)
	var stats ScanStats
	for _, ref := range s.Manifest.Segments {
		if withUsers && ref.Kind == KindUsers && ref.Rows > 0 {
			byShard[ref.Shard] = append(byShard[ref.Shard], ref)
			continue
		}
		if ref.Kind != spec.Kind {
			continue
		}
		if ref.Rows == 0 || ref.MaxTime < spec.From || ref.MinTime >= spec.To {
			stats.SegmentsSkipped++
			continue
		}
		byShard[ref.Shard] = append(byShard[ref.Shard], ref)
	}
	var next atomic.Int64
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws := make([]ScanStats, len(visitors))
	errs := make([]error, len(visitors))
	var wg sync.WaitGroup
	for w := range visitors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Decode buffers are reused across scans: a query must not
			// re-allocate tens of MiB of block buffers (GC pressure).
			sc := s.app.store.getScanner()
			sc.snap, sc.spec, sc.v, sc.st = s, &spec, visitors[w], &ws[w]
			defer func() {
				sc.snap, sc.spec, sc.v, sc.st = nil, nil, nil, nil
				for _, c := range sc.free {
					c.chain, c.r, c.meta, c.masks, c.plan, c.uplan, c.own = nil, nil, nil, nil, nil, nil, SegmentPlan{}
				}
				sc.trail.ID = nil
				s.app.store.putScanner(sc)
			}()
			for {
				sh := int(next.Add(1) - 1)
				if sh >= len(byShard) || ctx.Err() != nil {
					break
				}
				if len(byShard[sh]) == 0 {
					continue
				}
				var err error
				sctx, stage := StartStage(ctx, "scan shard", sh)
				err = sc.scanShard(sctx, byShard[sh])
				stage.End()
				if err != nil {
					errs[w] = err
					cancel()
					break
				}
			}
			ws[w].BufferBytes = sc.bufferBytes()
		}()
	}
	wg.Wait()
	for w := range ws {
		stats.add(&ws[w])
	}
	for _, err := range errs {
		if err != nil {
			return stats, err
		}
	}
	// A cancelled or expired caller context fails the scan (a partial scan
	// is not an answer); our own cancel() above only stops the workers.
	if err := parent.Err(); err != nil {
		return stats, err
	}
	return stats, nil
}

// A segment is scanned with the branching row filters when at most
// sparseNum/sparseDen of its rows can match (cursor.sparse). Measured at
// 100M events (bench-query, median of 5): a purchase-only trend (0.6% of
// rows) 512 -> 460 ms with the branching filter; a 4-step funnel (12.6%)
// 368 -> 410 ms, so it stays branch-free.
const sparseNum, sparseDen = 1, 16

// vectorNum/vectorDen bounds the share of a segment's rows that can match
// for drain to use filterDeltasBlock's vector kernel (cursor.vector).
// Measured at 100M events with bench/ab.sh, kernel against the per-user
// loop: funnels on 13 %, 24 % and 41 % of the rows ×0.85, ×0.93 and
// ×0.90; distinct users (every row) ×1.05.
const vectorNum, vectorDen = 1, 2

// DefaultWorkers returns the scan parallelism used when none is given:
// GOMAXPROCS.
func DefaultWorkers() int { return runtime.GOMAXPROCS(0) }

// shardScanner is one worker's reusable scan state.
type shardScanner struct {
	snap *Snapshot
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
	live8 [8]uint64 // live's first 8 words (filterDeltasBlock)
	// rowWise: row masks come from plan.Rows into rowMask (per block row)
	rowWise bool
	rowMask []uint64
	blk     segment.Block
	block   int // current block index; len(meta.Blocks) when exhausted
	user    int // current user within blk
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
	// filterDeltasBlock: the CPU has AVX-512, codes are below 512 (live8),
	// and at most vectorNum/vectorDen of the segment's rows can match
	vector bool
	// thin: the vector filter's thinning (ScanSpec.Thin; nil: none),
	// pointing to thinBuf
	thin    *thinning
	thinBuf thinning
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
}

// hash returns the current user's hash: stored, or computed from its id
// (blocks read with segment.KeysIDs).
func (c *cursor) hash() uint64 { return blockHash(&c.blk, c.user) }
func (c *cursor) id() []byte   { return c.blk.UserID(c.user) }

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

// open prepares cursor c for segment ref: it compiles the query for the
// segment and reports whether the segment can hold a passing row (with
// AllUsers: always).
func (sc *shardScanner) open(c *cursor, ref SegmentRef, r *segment.Reader) (bool, error) {
	meta := r.Meta()
	c.r, c.meta, c.seq, c.block, c.user = r, meta, ref.Seq, -1, 0
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
		c.thinBuf = thinning{origin: th.Origin, slot: th.Slot}
		for code, m := range c.masks {
			if m == th.Mask && code < 64*len(c.thinBuf.codes) {
				c.thinBuf.codes[code>>6] |= 1 << (code & 63)
				thinRows += meta.EventRows[code]
			}
		}
	}
	c.vector = useAVX512 && c.deltas && !c.sparse && len(c.live) <= len(c.live8) && (live-thinRows)*vectorDen <= meta.Rows*vectorNum
	if c.vector && thinRows > 0 {
		c.thin = &c.thinBuf
	}
	if c.rowWise && c.plan.Rows == nil {
		return false, fmt.Errorf("storage: segment plan for %s has Cond bits but no Rows", ref.File)
	}
	return anyLive || sc.spec.AllUsers, nil
}

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
// (drainUsers). Blocks read with deltas are filtered by filterDeltasBlock
// (vector cursors), filterDeltas and its variants, blocks with property
// columns or row masks by filterColumns. It returns read errors and
// ctx.Err().
func (sc *shardScanner) drain(ctx context.Context, c *cursor, ucs []*cursor) error {
	sc.startUser()
	// The visited trail lives in sc: a local would escape through Visit
	// and cost an allocation per drain.
	t := &sc.dtrail
	if len(sc.blkCols) != sc.spec.Cols {
		sc.blkCols = make([]trail.Column, sc.spec.Cols)
		sc.dcols = make([]trail.Column, sc.spec.Cols)
	}
	*t = trail.Trail{Cols: sc.dcols, User: sc.trail.User}
	// With users cursors every visited user gets its values set (unset
	// once they are exhausted); without, the values stay unset.
	join := len(ucs) > 0
	if len(ucs) == 1 {
		// From its next block on: no times, and no hashes where the
		// ids imply them (joinInStep matches by id).
		ucs[0].noTimes, ucs[0].keys = true, segment.KeysIDs
	}
	// From the next block on: without a join or lists the users are
	// visited by position and their keys are not decoded; a join under
	// NoIDs needs the ids only.
	switch {
	case !sc.spec.NoIDs:
		c.keys = segment.KeysAll
	case join:
		c.keys = segment.KeysIDs
	default:
		c.keys = segment.KeysNone
	}
	for {
		b := &c.blk
		users := len(b.UserStarts) - 1
		sc.excRank = rankCache{}
		for c.user < users {
			// The block's users c.user..hi-1: all of them, or, for
			// filterDeltasBlock, whole users of about denseRows rows, so
			// that its buffers and the visitors' reads of them stay in
			// cache.
			hi := users
			if c.vector {
				hi = c.user + 1 + sort.Search(users-c.user-1, func(i int) bool {
					return b.UserStarts[c.user+1+i]-b.UserStarts[c.user] >= denseRows
				})
			}
			if err := sc.drainUsers(ctx, c, hi, t, &ucs, join); err != nil {
				return err
			}
			c.user = hi
		}
		ok, err := sc.nextBlock(ctx, c)
		if err == nil && !ok {
			ok, err = sc.nextSegment(ctx, c)
		}
		if err != nil || !ok {
			return err
		}
	}
}

// denseRows is the rows per call of filterDeltasBlock in drain (whole
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
	// 8 spare entries for filterDeltasBlock's whole-register stores
	times := slices.Grow(sc.blkTimes[:0], rows+8)[:rows]
	masks := slices.Grow(sc.blkMask[:0], rows+8)[:rows]
	ends := slices.Grow(sc.blkEnds[:0], hi-c.user)[:hi-c.user]
	switch {
	case !c.deltas:
		sc.filterColumns(c, times, masks, ends)
	case c.sparse:
		rows := slices.Grow(sc.rows[:0], len(times))[:len(times)]
		k := filterDeltasSparse(times, masks, rows, ends, b, b.Events, b.UserStarts[c.user:], c.masks, b.TimeBase, b.TimeGCD, from, span)
		sc.rows = rows[:k]
		sc.gatherCols(c)
	case c.vector:
		// Deltas at 16 bits stay packed (the kernel widens them);
		// other widths are unpacked whole.
		bd := &sc.bd
		*bd = blockDeltas{deltas: b.Deltas}
		if pd, ok := b.PackedDeltas(); ok && pd.W == 16 {
			*bd = blockDeltas{lows: pd.Lows, excRows: pd.ExcRows, excBits: pd.ExcBits, excHighs: pd.Highs, excRank: &sc.excRank}
		} else if ok {
			b.UnpackDeltas()
			bd.deltas = b.Deltas
		}
		filterDeltasBlock(times, masks, ends, bd, b.Events, b.UserStarts[c.user:], c.masks, &c.live8, b.TimeBase, b.TimeGCD, c.inRange, from, span, c.thin, &sc.fs)
	default:
		// Dense, no columns: one call per user. One call for all of
		// the block's users spilled registers and was slower per
		// 64 Ki rows: with nested loops 386–543 µs against 180–235 µs
		// per user, with a branch at each user boundary 181–326 µs
		// against 139–168 µs.
		for u, k := c.user, 0; u < hi; u++ {
			s, e := b.UserStarts[u], b.UserStarts[u+1]
			if c.inRange {
				k += filterDeltas(times[k:], masks[k:], b.Deltas[s:e], b.Events[s:e], c.masks, b.TimeBase, b.TimeGCD)
			} else {
				k += filterDeltasInRange(times[k:], masks[k:], b.Deltas[s:e], b.Events[s:e], c.masks, b.TimeBase, b.TimeGCD, from, span)
			}
			ends[u-c.user] = int32(k)
		}
	}
	sc.blkTimes, sc.blkMask, sc.blkEnds = times, masks, ends
	start := int32(0)
	for i, end := range ends {
		u := c.user + i
		if join {
			// One users cursor steps with every user of the block,
			// visited or not; several join at the visited ones.
			var err error
			if len(*ucs) == 1 {
				*ucs, err = sc.joinInStep(ctx, *ucs, b, u, end > start)
			} else if end > start {
				*ucs, err = sc.joinUserValues(ctx, *ucs, blockHash(b, u), b.UserID(u))
			}
			if err != nil {
				return err
			}
		}
		if end > start {
			t.Times, t.Mask = times[start:end:end], masks[start:end:end]
			var key UserKey
			if len(b.UserHashes) > 0 {
				key = UserKey{Hash: b.UserHashes[u], ID: b.UserID(u)}
			}
			t.ID = key.ID
			for j := range t.Cols {
				bc := &sc.blkCols[j]
				t.Cols[j] = trail.Column{Set: bc.Set[start:end:end], Bits: bc.Bits[start:end:end]}
			}
			sc.v.Visit(key, t)
		}
		start = end
	}
	return nil
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
		} else if visited {
			sc.userValues(uc)
		}
		// Past a match, or past a user with writes but no rows here.
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
	for j := range sc.trail.User {
		sc.trail.User[j] = trail.Value{}
		sc.ubest[j] = math.MinInt64
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
	for _, uc := range at {
		sc.userValues(uc)
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
	case ColIntFloat:
		return math.Float64bits(float64(pd.Ints[r]) + 0)
	}
	return uint64(pd.Ints[r])
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

// advance moves c to its next user, loading the next useful block when the
// current one is exhausted. It returns false when the segment is done.
func (sc *shardScanner) advance(ctx context.Context, c *cursor) (bool, error) {
	c.user++
	if c.user < len(c.blk.UserStarts)-1 {
		return true, nil
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
	known bool   // the chain's last segment has a hash range
	last  uint64 // its LastHash
}

// chainSegments partitions a shard's segments of one kind into chains
// (runs) that one cursor can read one after the other: segments whose
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
			ch = slices.IndexFunc(tails, func(t chainTail) bool { return t.known && t.last < ref.FirstHash })
		}
		if ch < 0 {
			ch = len(tails)
			tails = append(tails, chainTail{})
		}
		tails[ch] = chainTail{known: known, last: ref.LastHash}
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
	blocks := c.meta.Blocks
	for c.block++; c.block < len(blocks); c.block++ {
		bm := &blocks[c.block]
		if !c.users && !sc.spec.AllUsers && (bm.MaxTime < sc.spec.From || bm.MinTime >= sc.spec.To || !intersects(bm.Events, c.live)) {
			sc.st.BlocksSkipped++
			continue
		}
		if err := ctx.Err(); err != nil {
			return false, err
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
		if err != nil {
			return false, err
		}
		if c.rowWise {
			c.rowMask = slices.Grow(c.rowMask[:0], c.blk.Rows)[:c.blk.Rows]
			c.plan.Rows(&c.blk, c.rowMask)
		}
		c.inRange = bm.MinTime >= sc.spec.From && bm.MaxTime < sc.spec.To
		sc.st.BlocksRead++
		sc.st.EventsScanned += int64(c.blk.Rows)
		sc.st.BytesRead += c.blk.BytesRead
		if len(c.blk.UserStarts) < 2 {
			continue
		}
		c.user = 0
		return true, nil
	}
	return false, nil
}

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
