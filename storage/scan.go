package storage

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/storage/segment"
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
	// Workers is the number of goroutines scanning shards in parallel;
	// 0 means GOMAXPROCS.
	Workers int
}

// UserKey identifies the user of a trail: the xxhash64 of the user id and
// the id bytes (borrowed, valid until Visit returns).
type UserKey struct {
	Hash uint64
	ID   []byte
}

// Visitor receives the trails of one scan worker. Visit is called once per
// user that has at least one row passing the spec, with the user's rows in
// trail order (time, then arrival); u.ID, t and its slices are borrowed
// until Visit returns. Each Visitor is used by one goroutine only.
type Visitor interface {
	Visit(u UserKey, t *analysis.Trail)
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
	byShard := make([][]SegmentRef, s.Manifest.Shards)
	var stats ScanStats
	for _, ref := range s.Manifest.Segments {
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
			sc, _ := s.app.store.scanners.Get().(*shardScanner)
			if sc == nil {
				sc = &shardScanner{}
			}
			sc.snap, sc.spec, sc.v, sc.st = s, &spec, visitors[w], &ws[w]
			defer func() {
				sc.snap, sc.spec, sc.v, sc.st = nil, nil, nil, nil
				for _, c := range sc.free {
					c.r, c.meta, c.masks = nil, nil, nil
				}
				s.app.store.scanners.Put(sc)
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

// DefaultWorkers returns the scan parallelism used when none is given:
// GOMAXPROCS.
func DefaultWorkers() int { return runtime.GOMAXPROCS(0) }

// shardScanner is one worker's reusable scan state.
type shardScanner struct {
	snap *Snapshot
	spec *ScanSpec
	v    Visitor
	st   *ScanStats

	free    []*cursor // cursors (with their decode buffers) for reuse
	heap    []*cursor
	parts   []int // trail part boundaries when a user spans segments
	trail   analysis.Trail
	scratch analysis.Trail
}

// cursor walks one segment's users in key order.
type cursor struct {
	r     *segment.Reader
	meta  *segment.Meta
	seq   int64
	masks []uint64
	live  []uint64 // bit set of event codes with a non-zero mask
	blk   segment.Block
	block int // current block index; len(meta.Blocks) when exhausted
	user  int // current user within blk
	// inRange: the current block's rows all lie in [From, To)
	inRange bool
}

func (c *cursor) hash() uint64 { return c.blk.UserHashes[c.user] }
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
		b := &c.blk
		n += int64(cap(b.UserHashes))*8 + int64(cap(b.UserIDBytes)) + int64(cap(b.UserIDOffsets))*4 +
			int64(cap(b.UserStarts))*4 + int64(cap(b.Times))*8 + int64(cap(b.Events))*2
	}
	n += int64(cap(sc.trail.Times)+cap(sc.scratch.Times))*8 + int64(cap(sc.trail.Mask)+cap(sc.scratch.Mask))*8
	return n
}

func (sc *shardScanner) scanShard(ctx context.Context, refs []SegmentRef) error {
	sc.heap = sc.heap[:0]
	used := 0
	for _, ref := range refs {
		r, err := sc.snap.Reader(ref)
		if err != nil {
			return err
		}
		meta := r.Meta()
		masks := sc.spec.Masks(meta)
		var c *cursor
		if used < len(sc.free) {
			c = sc.free[used]
		} else {
			c = &cursor{}
			sc.free = append(sc.free, c)
		}
		c.r, c.meta, c.seq, c.masks, c.block, c.user = r, meta, ref.Seq, masks, -1, 0
		c.live = c.live[:0]
		anyLive := false
		for code, m := range masks {
			for len(c.live) <= code>>6 {
				c.live = append(c.live, 0)
			}
			if m != 0 {
				c.live[code>>6] |= 1 << (code & 63)
				anyLive = true
			}
		}
		if !anyLive {
			sc.st.SegmentsSkipped++
			continue
		}
		used++
		ok, err := sc.nextBlock(ctx, c)
		if err != nil {
			return err
		}
		if ok {
			sc.st.SegmentsRead++
			sc.push(c)
		}
	}
	for len(sc.heap) > 0 {
		// Gather every cursor positioned at the smallest user key; the heap
		// order puts them in Seq (arrival) order.
		first := sc.pop()
		sc.trail.Times, sc.trail.Mask = sc.trail.Times[:0], sc.trail.Mask[:0]
		sc.parts = append(sc.parts[:0], 0)
		sc.appendRows(first)
		group := [8]*cursor{first}
		n := 1
		extra := sc.heap[:0:0]
		for len(sc.heap) > 0 && sc.heap[0].hash() == first.hash() && bytes.Equal(sc.heap[0].id(), first.id()) {
			c := sc.pop()
			sc.appendRows(c)
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
		if len(sc.trail.Times) > 0 {
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

// appendRows appends cursor c's current user's rows that pass the spec to
// the trail buffer. This is the per-event hot loop of every query: one
// table lookup per event, and no data-dependent branch (every row is
// written, and the write position advances only for passing rows, which
// the compiler turns into a conditional move), since which events match is
// unpredictable. When the block's zone map lies inside the range, the time
// test is dropped.
func (sc *shardScanner) appendRows(c *cursor) {
	b := &c.blk
	s, e := b.UserStarts[c.user], b.UserStarts[c.user+1]
	times := b.Times[s:e]
	codes := b.Events[s:e:e]
	masks := c.masks
	n := len(sc.trail.Times)
	tt := slices.Grow(sc.trail.Times, len(times))[:n+len(times)]
	tm := slices.Grow(sc.trail.Mask, len(times))[:n+len(times)]
	out := tt[n:]
	outm := tm[n:]
	k := 0
	if c.inRange {
		for i, t := range times {
			m := masks[codes[i]]
			out[k] = t
			outm[k] = m
			if m != 0 {
				k++
			}
		}
	} else {
		from, span := sc.spec.From, uint64(sc.spec.To)-uint64(sc.spec.From)
		for i, t := range times {
			m := masks[codes[i]]
			out[k] = t
			outm[k] = m
			if m != 0 && uint64(t)-uint64(from) < span {
				k++
			}
		}
	}
	sc.trail.Times, sc.trail.Mask = tt[:n+k], tm[:n+k]
	if n+k > sc.parts[len(sc.parts)-1] {
		sc.parts = append(sc.parts, n+k)
	}
}

// mergeParts merges the sorted parts of the trail buffer (one per segment,
// in Seq order) into one sequence ordered by time; equal times keep part
// order, which is arrival order.
func (sc *shardScanner) mergeParts() {
	for len(sc.parts) > 2 {
		a0, a1, b1 := sc.parts[0], sc.parts[1], sc.parts[2]
		st, sm := sc.scratch.Times[:0], sc.scratch.Mask[:0]
		i, j := a0, a1
		for i < a1 && j < b1 {
			if sc.trail.Times[j] < sc.trail.Times[i] {
				st, sm = append(st, sc.trail.Times[j]), append(sm, sc.trail.Mask[j])
				j++
			} else {
				st, sm = append(st, sc.trail.Times[i]), append(sm, sc.trail.Mask[i])
				i++
			}
		}
		st, sm = append(st, sc.trail.Times[i:a1]...), append(sm, sc.trail.Mask[i:a1]...)
		st, sm = append(st, sc.trail.Times[j:b1]...), append(sm, sc.trail.Mask[j:b1]...)
		copy(sc.trail.Times[a0:b1], st)
		copy(sc.trail.Mask[a0:b1], sm)
		sc.scratch.Times, sc.scratch.Mask = st, sm
		sc.parts = append(sc.parts[:1], sc.parts[2:]...)
	}
}

// advance moves c to its next user, loading the next useful block when the
// current one is exhausted. It returns false when the segment is done.
func (sc *shardScanner) advance(ctx context.Context, c *cursor) (bool, error) {
	c.user++
	if c.user < len(c.blk.UserHashes) {
		return true, nil
	}
	return sc.nextBlock(ctx, c)
}

// nextBlock decodes the next block of c that can hold a passing row.
func (sc *shardScanner) nextBlock(ctx context.Context, c *cursor) (bool, error) {
	blocks := c.meta.Blocks
	for c.block++; c.block < len(blocks); c.block++ {
		bm := &blocks[c.block]
		if bm.MaxTime < sc.spec.From || bm.MinTime >= sc.spec.To || !intersects(bm.Events, c.live) {
			sc.st.BlocksSkipped++
			continue
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if err := c.r.ReadBlock(c.block, nil, &c.blk); err != nil {
			return false, err
		}
		c.inRange = bm.MinTime >= sc.spec.From && bm.MaxTime < sc.spec.To
		sc.st.BlocksRead++
		sc.st.EventsScanned += int64(c.blk.Rows)
		sc.st.BytesRead += c.blk.BytesRead
		if len(c.blk.UserHashes) == 0 {
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
func (sc *shardScanner) push(c *cursor) {
	h := append(sc.heap, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	sc.heap = h
}

func (sc *shardScanner) pop() *cursor {
	h := sc.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && less(h[r], h[l]) {
			m = r
		}
		if !less(h[m], h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	sc.heap = h
	return top
}
