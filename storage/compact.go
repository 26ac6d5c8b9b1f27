package storage

// Compaction rewrites all segments of one kind of a shard as a few large
// segments with strictly increasing, non-overlapping user-hash ranges (one
// "run"), so that a scan merges one stream per shard and kind instead of
// one per import flush. See docs/compaction.md for the design.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
)

// DefaultMaxSegmentRows is the CompactOptions.MaxSegmentRows used when it is
// 0: 4 Mi rows. It bounds a compaction worker's output buffer (about
// 4 Mi × (12 + 8·P) bytes); the scan reads a run of such segments with
// one cursor, so query speed does not depend on it (100M-event funnel
// with 16 or 32 segments: the same within noise). With 16 Mi rows a
// 1B-event compaction peaked at 7.3 GB RSS.
const DefaultMaxSegmentRows = 4 << 20

// AutoCompactMinRuns is the CompactOptions.MinRuns of the automatic
// compaction that `spur import`, `spur gen --app` and the server's import
// endpoint run after publishing: a shard is compacted once it has more than
// 8 runs of a kind.
const AutoCompactMinRuns = 9

// CompactOptions configures one compaction. The zero value compacts every
// shard and kind that is not already a single run.
type CompactOptions struct {
	// MaxSegmentRows caps the rows of an output segment; 0 means
	// DefaultMaxSegmentRows. An output ends only between two users with
	// different hashes, so one user (or a group of users sharing a hash)
	// with more rows than the cap gets an output of its own above it. Each
	// worker holds one output in memory: about MaxSegmentRows × (12 + 8·P)
	// bytes for P property columns.
	MaxSegmentRows int
	// MinRuns is how many runs (see Manifest.ShardRuns) a shard's segments
	// of one kind must form to be compacted; values below 2 mean 2.
	MinRuns int
	// Force compacts every shard and kind that has a segment, also those
	// that are one run already (to re-split them by MaxSegmentRows).
	Force bool
	// BlockRows is passed to the segment writer (rows per block); 0 means
	// its default.
	BlockRows int
	// Workers is the number of shard groups compacted in parallel; 0 means
	// GOMAXPROCS. Memory grows with it (see MaxSegmentRows).
	Workers int
	// Progress, if set, is called after each output segment is written with
	// the number of rows written so far by this compaction. Calls are
	// serialized but come from the compaction's worker goroutines.
	Progress func(rows int64)
}

// CompactReport describes a finished, aborted or no-op compaction. Byte
// counts are file sizes; Before/After describe the whole manifest.
type CompactReport struct {
	App            string        `json:"app"`
	Groups         int           `json:"groups"`            // (shard, kind) groups compacted
	SegmentsBefore int           `json:"segments_before"`   // segments published before
	SegmentsAfter  int           `json:"segments_after"`    // segments published after
	Replaced       int           `json:"segments_replaced"` // input segments removed from the manifest
	Written        int           `json:"segments_written"`  // output segments published
	Rows           int64         `json:"rows"`              // rows rewritten (those of the replaced segments)
	BytesBefore    int64         `json:"bytes_before"`      // bytes of the segments published before
	BytesAfter     int64         `json:"bytes_after"`       // bytes of the segments published after
	ReplacedBytes  int64         `json:"bytes_replaced"`    // bytes of the replaced segments, left on disk until the next write (see App.Compact)
	Generation     int64         `json:"generation"`        // manifest generation after (unchanged when nothing was compacted)
	Elapsed        time.Duration `json:"elapsed_ns"`        // wall time
}

// Compact compacts app appName; see App.Compact. The error matches
// ErrNotFound (errors.Is) for an app that does not exist.
func (s *Store) Compact(ctx context.Context, appName string, opt CompactOptions) (*CompactReport, error) {
	a, err := s.App(appName)
	if err != nil {
		return nil, err
	}
	return a.Compact(ctx, opt)
}

// Compact merges, for every shard and kind whose segments form at least
// opt.MinRuns runs (or, with opt.Force, have any segment), all of that
// shard's segments of that kind into new segments that hold every row once,
// each user's rows in trail order (time, then segment Seq, then row: the
// order a scan produces), with every property column including
// InsertIDProp. Outputs hold at most opt.MaxSegmentRows rows and split only
// between users of different hashes, so a shard's outputs have strictly
// increasing, disjoint [FirstHash, LastHash] ranges; they all take the
// largest Seq of their inputs, which keeps arrival order against later
// imports (NextSeq is larger).
//
// The outputs replace the inputs in one atomic manifest swap (Generation
// +1) under the app's write locks (as Import): a crash or an error at any
// point leaves the store as it was, and unpublished outputs are removed as
// orphans by the next write. A cancelled ctx aborts with a wrapped
// ctx.Err() and changes nothing. Replaced input files are not deleted:
// another process, or a scan of an older snapshot in this one, may still
// read the previous manifest and open them, so they stay until the next
// write (import or compaction) removes them as orphans; in this process,
// the readers already open keep working after that, until the next
// compaction drops them. Errors are I/O errors, segment corruption
// (errors.Is(err, segment.ErrCorruption)), a locked app, or segments whose
// property types disagree.
func (a *App) Compact(ctx context.Context, opt CompactOptions) (*CompactReport, error) {
	start := time.Now()
	if opt.MaxSegmentRows <= 0 {
		opt.MaxSegmentRows = DefaultMaxSegmentRows
	}
	opt.MinRuns = max(opt.MinRuns, 2)
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	rep := &CompactReport{App: a.name}
	defer func() { rep.Elapsed = time.Since(start) }()
	noop := func(m *Manifest) (*CompactReport, error) {
		rep.SegmentsBefore, rep.SegmentsAfter = len(m.Segments), len(m.Segments)
		rep.BytesBefore, rep.BytesAfter = segmentBytes(m.Segments), segmentBytes(m.Segments)
		rep.Generation = m.Generation
		return rep, nil
	}
	// Nothing to do in the current snapshot: no lock taken, so a no-op
	// after every import costs nothing and cannot fail on a busy lock.
	if cur := a.Snapshot().Manifest; len(planCompaction(cur, opt)) == 0 {
		return noop(cur)
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("compact app %q cancelled: %w", a.name, err)
	}
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	unlock, err := a.lockDir()
	if err != nil {
		return rep, err
	}
	defer unlock()
	base, err := a.publishedManifest()
	if err != nil {
		return rep, err
	}
	if err := a.removeOrphans(base); err != nil {
		return rep, err
	}
	a.dropStaleReaders(base)
	groups := planCompaction(base, opt)
	if len(groups) == 0 {
		return noop(base)
	}

	written, err := a.compactGroups(ctx, base, groups, opt)
	cleanup := func() {
		for _, ref := range written {
			os.Remove(filepath.Join(a.dir, segDir, ref.File))
		}
	}
	if err == nil {
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("compact app %q cancelled: %w", a.name, cerr)
		}
	}
	if err != nil {
		cleanup()
		return rep, err
	}
	replaced := map[string]bool{}
	for _, g := range groups {
		for _, ref := range g.inputs {
			replaced[ref.File] = true
			rep.Rows += ref.Rows
			rep.ReplacedBytes += ref.Bytes
		}
	}
	next := *base
	next.Generation++
	next.Segments = make([]SegmentRef, 0, len(base.Segments)-len(replaced)+len(written))
	for _, ref := range base.Segments {
		if !replaced[ref.File] {
			next.Segments = append(next.Segments, ref)
		}
	}
	next.Segments = append(next.Segments, written...)
	// Keep the manifest in arrival order; a group's outputs stay in hash
	// order among themselves.
	slices.SortStableFunc(next.Segments, func(x, y SegmentRef) int { return cmp.Compare(x.Seq, y.Seq) })
	if err := a.publish(&next, cleanup); err != nil {
		return rep, fmt.Errorf("compact app %q: %w", a.name, err)
	}

	rep.Groups, rep.Replaced, rep.Written = len(groups), len(replaced), len(written)
	rep.SegmentsBefore, rep.SegmentsAfter = len(base.Segments), len(next.Segments)
	rep.BytesBefore, rep.BytesAfter = segmentBytes(base.Segments), segmentBytes(next.Segments)
	rep.Generation = next.Generation
	a.store.log.Debug("compaction published", "app", a.name, "groups", rep.Groups, "replaced", rep.Replaced,
		"written", rep.Written, "rows", rep.Rows, "bytes_before", rep.BytesBefore, "bytes_after", rep.BytesAfter,
		"generation", next.Generation, "elapsed", time.Since(start))
	return rep, nil
}

// publishedManifest returns the manifest on disk, adopting it as the app's
// snapshot when another process published since this one last looked
// (the caller holds the app's write locks). An app never published keeps
// its in-memory (empty) manifest.
func (a *App) publishedManifest() (*Manifest, error) {
	cur := a.Snapshot().Manifest
	m, err := readManifest(a.dir)
	if errors.Is(err, os.ErrNotExist) {
		return cur, nil
	}
	if err != nil {
		return nil, err
	}
	if m.Generation == cur.Generation {
		return cur, nil
	}
	a.snap.Store(&Snapshot{app: a, Manifest: m})
	return m, nil
}

// dropStaleReaders drops the cached readers of files that m does not
// reference: segments replaced by an earlier compaction, whose files the
// writes since then have deleted. Until this call their cached readers
// kept older snapshots readable; it bounds the descriptors (and disk
// space of deleted files) held to one compaction's inputs. The readers are
// not closed, since a scan of an older snapshot may still hold one: the
// os.File finalizer closes the descriptor once nothing does.
func (a *App) dropStaleReaders(m *Manifest) {
	live := make(map[string]bool, len(m.Segments))
	for _, ref := range m.Segments {
		live[ref.File] = true
	}
	a.rmu.Lock()
	defer a.rmu.Unlock()
	for f := range a.readers {
		if !live[f] {
			delete(a.readers, f)
		}
	}
}

func segmentBytes(refs []SegmentRef) int64 {
	var n int64
	for _, r := range refs {
		n += r.Bytes
	}
	return n
}

// ShardRuns returns, per shard (Shards entries), the number of runs formed
// by the shard's segments of the given kind: the number of cursors a scan of
// the shard merges. Segments with known, pairwise disjoint hash ranges
// (FirstHash and LastHash not both 0) chain into one run, as the outputs of
// one compaction do; a segment with an unknown range (an import's) is a run
// of its own. Runs are counted as the scan forms them: segments in
// FirstHash order, each appended to the first run whose last segment ends
// below its FirstHash (greedy interval partitioning, which is optimal).
func (m *Manifest) ShardRuns(kind SegmentKind) []int {
	byShard := make([][]SegmentRef, m.Shards)
	for _, ref := range m.Segments {
		if ref.Kind == kind && ref.Shard >= 0 && ref.Shard < m.Shards {
			byShard[ref.Shard] = append(byShard[ref.Shard], ref)
		}
	}
	out := make([]int, m.Shards)
	for sh, refs := range byShard {
		out[sh] = countRuns(refs)
	}
	return out
}

// countRuns counts the runs of one shard's segments of one kind (see
// Manifest.ShardRuns).
func countRuns(refs []SegmentRef) int { return len(chainSegments(refs, &chainScratch{})) }

// compactGroup is the input of one output run: all segments of one kind of
// one shard, in arrival order.
type compactGroup struct {
	shard  int
	kind   SegmentKind
	inputs []SegmentRef // sorted by (Seq, FirstHash); segments sharing a Seq hold disjoint users
	seq    int64        // the outputs' Seq: the largest input Seq
	rows   int64
}

// planCompaction returns the groups that m and opt call for, the largest
// first (so parallel workers finish together).
func planCompaction(m *Manifest, opt CompactOptions) []compactGroup {
	var groups []compactGroup
	for _, kind := range []SegmentKind{KindEvents, KindUsers} {
		byShard := make([][]SegmentRef, m.Shards)
		for _, ref := range m.Segments {
			if ref.Kind == kind && ref.Shard >= 0 && ref.Shard < m.Shards {
				byShard[ref.Shard] = append(byShard[ref.Shard], ref)
			}
		}
		for sh, refs := range byShard {
			if len(refs) == 0 || (!opt.Force && countRuns(refs) < opt.MinRuns) {
				continue
			}
			refs = slices.Clone(refs)
			slices.SortStableFunc(refs, func(x, y SegmentRef) int {
				return cmp.Or(cmp.Compare(x.Seq, y.Seq), cmp.Compare(x.FirstHash, y.FirstHash))
			})
			g := compactGroup{shard: sh, kind: kind, inputs: refs, seq: refs[len(refs)-1].Seq}
			for _, r := range refs {
				g.rows += r.Rows
			}
			groups = append(groups, g)
		}
	}
	slices.SortStableFunc(groups, func(x, y compactGroup) int { return cmp.Compare(y.rows, x.rows) })
	return groups
}

// compactGroups runs the groups on opt.Workers goroutines and returns every
// output written (also on error, for the caller to remove), in group
// order. The first error cancels the other workers.
func (a *App) compactGroups(ctx context.Context, base *Manifest, groups []compactGroup, opt CompactOptions) ([]SegmentRef, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outs := make([][]SegmentRef, len(groups))
	errs := make([]error, len(groups))
	var progressMu sync.Mutex
	var rowsDone int64
	progress := func(rows int64) {
		if opt.Progress == nil {
			return
		}
		progressMu.Lock()
		defer progressMu.Unlock()
		rowsDone += rows
		opt.Progress(rowsDone)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(opt.Workers, len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var bufs outBufs
			for gi := range next {
				if ctx.Err() != nil {
					continue
				}
				sctx, stage := StartStage(ctx, "compact shard", groups[gi].shard)
				c := &compactor{app: a, opt: opt, gen: base.Generation + 1, g: &groups[gi], progress: progress, bufs: &bufs}
				outs[gi], errs[gi] = c.run(sctx)
				stage.End()
				if errs[gi] != nil {
					cancel()
				}
			}
		}()
	}
	for gi := range groups {
		next <- gi
	}
	close(next)
	wg.Wait()
	var written []SegmentRef
	for _, o := range outs {
		written = append(written, o...)
	}
	// Workers stopped by another worker's failure report context.Canceled:
	// report the failure itself, else the first cancellation.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return written, err
		}
		if first == nil {
			first = err
		}
	}
	return written, first
}

// compactor merges one group. It owns its readers, decode buffers and
// output buffer.
type compactor struct {
	app      *App
	opt      CompactOptions
	gen      int64 // generation the outputs are published in (file names)
	g        *compactGroup
	progress func(rows int64)
	bufs     *outBufs // the worker's reusable output arrays

	cols    []outCol // output property columns, by name
	cursors []*compactCursor
	heap    []*compactCursor
	parts   []runPart
	out     segment.Input // the output being built
	ids     []byte        // the output users' id bytes, back to back
	idEnd   []int         // end offset in ids of each output user's id
	written []SegmentRef
}

// outCol is one output property column: its data in the output being
// built, and whether some row of that output has a value.
type outCol struct {
	col  segment.PropColumn
	used bool
}

// compactCursor walks one input segment's users in (hash, id) order.
type compactCursor struct {
	r     *segment.Reader
	meta  *segment.Meta
	seq   int64
	ord   int   // input index: the last tie-break of the merge
	props []int // every property column (ReadBlock decodes all)
	colOf []int // input property → output column
	// evMap and strMap translate codes into the output being built: input
	// code → output code + 1, 0 while the code has not been used in it.
	evMap  []uint32
	strMap [][]uint32     // per input property; nil for non-string properties
	blk    *segment.Block // from the worker's outBufs
	block  int
	user   int
}

func (c *compactCursor) hash() uint64 { return c.blk.UserHashes[c.user] }
func (c *compactCursor) id() []byte   { return c.blk.UserID(c.user) }

// runPart is one input's rows of the user being merged: block rows [s, e)
// of cursor c.
type runPart struct {
	c    *compactCursor
	s, e int
}

func compactLess(a, b *compactCursor) bool {
	if ha, hb := a.hash(), b.hash(); ha != hb {
		return ha < hb
	}
	if c := bytes.Compare(a.id(), b.id()); c != 0 {
		return c < 0
	}
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.ord < b.ord
}

// run merges the group and writes its outputs. On error it returns the
// outputs already written (for the caller to remove).
func (cp *compactor) run(ctx context.Context) ([]SegmentRef, error) {
	defer func() {
		for _, c := range cp.cursors {
			c.r.Close()
			cp.bufs.blocks = append(cp.bufs.blocks, c.blk)
		}
	}()
	if err := cp.open(); err != nil {
		return cp.written, err
	}
	for _, c := range cp.cursors {
		ok, err := cp.nextBlock(ctx, c)
		if err != nil {
			return cp.written, err
		}
		if ok {
			cp.push(c)
		}
	}
	maxRows := cp.opt.MaxSegmentRows
	cp.reserve(int(min(cp.g.rows, int64(maxRows))))
	defer cp.release()
	var group []*compactCursor
	for len(cp.heap) > 0 {
		// Every cursor at the smallest user key, in (Seq, input) order.
		first := cp.pop()
		group = append(group[:0], first)
		for len(cp.heap) > 0 && cp.heap[0].hash() == first.hash() && bytes.Equal(cp.heap[0].id(), first.id()) {
			group = append(group, cp.pop())
		}
		cp.parts = cp.parts[:0]
		rows := 0
		for _, c := range group {
			s, e := int(c.blk.UserStarts[c.user]), int(c.blk.UserStarts[c.user+1])
			cp.parts = append(cp.parts, runPart{c, s, e})
			rows += e - s
		}
		hash := first.hash()
		if n := len(cp.out.Users); n > 0 && len(cp.out.Times)+rows > maxRows && cp.out.Users[n-1].Hash != hash {
			if err := cp.flush(ctx); err != nil {
				return cp.written, err
			}
		}
		cp.appendUser(hash, first.id(), rows)
		for _, c := range group {
			ok, err := cp.advance(ctx, c)
			if err != nil {
				return cp.written, err
			}
			if ok {
				cp.push(c)
			}
		}
	}
	if len(cp.out.Users) > 0 {
		if err := cp.flush(ctx); err != nil {
			return cp.written, err
		}
	}
	return cp.written, nil
}

// open opens the group's inputs and derives the output columns: the union
// of the inputs' property columns by name, sorted (types must agree, but
// for an int column of a property widened to float later, spec §1: the
// output is float).
func (cp *compactor) open() error {
	types := map[string]event.Type{}
	for i, ref := range cp.g.inputs {
		r, err := segment.Open(filepath.Join(cp.app.dir, segDir, ref.File))
		if err != nil {
			return fmt.Errorf("compact app %q: %w", cp.app.name, err)
		}
		meta := r.Meta()
		c := &compactCursor{r: r, meta: meta, seq: ref.Seq, ord: i, block: -1, blk: cp.block(),
			evMap: make([]uint32, len(meta.EventNames)), strMap: make([][]uint32, len(meta.Props))}
		cp.cursors = append(cp.cursors, c)
		for j, p := range meta.Props {
			switch t, ok := types[p.Name]; {
			case !ok:
				types[p.Name] = p.Type
			case t != p.Type && widened(t, p.Type):
				types[p.Name] = event.TypeFloat
			case t != p.Type:
				return fmt.Errorf("compact app %q: property %q is %v in segment %s but %v in an earlier segment of shard %d",
					cp.app.name, p.Name, p.Type, ref.File, t, cp.g.shard)
			}
			c.props = append(c.props, j)
			if p.Type == event.TypeString {
				c.strMap[j] = make([]uint32, len(p.Dict))
			}
		}
	}
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	slices.Sort(names)
	cp.cols = make([]outCol, len(names))
	for j, n := range names {
		cp.cols[j].col = segment.PropColumn{Name: n, Type: types[n]}
	}
	for _, c := range cp.cursors {
		c.colOf = make([]int, len(c.meta.Props))
		for pi, p := range c.meta.Props {
			c.colOf[pi], _ = slices.BinarySearch(names, p.Name)
		}
	}
	return nil
}

// widened reports whether types a and b of one property are int and
// float, in either order: an int property widened to float (spec §1).
func widened(a, b event.Type) bool {
	return (a == event.TypeInt && b == event.TypeFloat) || (a == event.TypeFloat && b == event.TypeInt)
}

// outBufs are one worker's output row arrays, handed from group to group
// so that a worker allocates them once (they are most of its memory).
type outBufs struct {
	users   []segment.User
	ids     []byte
	idEnd   []int
	blocks  []*segment.Block // input decode buffers
	times   []int64
	events  []uint32
	present [][]uint64
	ints    [][]int64
	floats  [][]float64
	strs    [][]uint32
}

// reserve gives the output row arrays for rows rows from cp.bufs, grown at
// once if needed: grown by append, arrays of millions of rows would be
// copied over and over.
func (cp *compactor) reserve(rows int) {
	b, out := cp.bufs, &cp.out
	out.Users, cp.ids, cp.idEnd = b.users[:0], b.ids[:0], b.idEnd[:0]
	out.Times = slices.Grow(b.times[:0], rows)
	out.Events = slices.Grow(b.events[:0], rows)
	for j := range cp.cols {
		col := &cp.cols[j].col
		col.Present = slices.Grow(pop(&b.present), (rows+63)/64)
		switch col.Type {
		case event.TypeFloat:
			col.Floats = slices.Grow(pop(&b.floats), rows)
		case event.TypeString:
			col.Strs = slices.Grow(pop(&b.strs), rows)
		default:
			col.Ints = slices.Grow(pop(&b.ints), rows)
		}
	}
}

// release returns the output row arrays to cp.bufs.
func (cp *compactor) release() {
	b, out := cp.bufs, &cp.out
	clear(out.Users)
	b.users, b.ids, b.idEnd = out.Users[:0], cp.ids[:0], cp.idEnd[:0]
	b.times, b.events = out.Times[:0], out.Events[:0]
	for j := range cp.cols {
		col := &cp.cols[j].col
		b.present = append(b.present, col.Present[:0])
		switch col.Type {
		case event.TypeFloat:
			b.floats = append(b.floats, col.Floats[:0])
		case event.TypeString:
			b.strs = append(b.strs, col.Strs[:0])
		default:
			b.ints = append(b.ints, col.Ints[:0])
		}
	}
}

// block returns a decode buffer from the worker's pool, or a new one.
func (cp *compactor) block() *segment.Block {
	b := cp.bufs
	if n := len(b.blocks); n > 0 {
		blk := b.blocks[n-1]
		b.blocks = b.blocks[:n-1]
		return blk
	}
	return &segment.Block{}
}

// pop removes and returns the last slice of *pool, or nil when it is empty.
func pop[T any](pool *[][]T) []T {
	n := len(*pool)
	if n == 0 {
		return nil
	}
	s := (*pool)[n-1]
	(*pool)[n-1] = nil
	*pool = (*pool)[:n-1]
	return s[:0]
}

// advance moves c to its next user; false when the segment is done.
func (cp *compactor) advance(ctx context.Context, c *compactCursor) (bool, error) {
	c.user++
	if c.user < len(c.blk.UserHashes) {
		return true, nil
	}
	return cp.nextBlock(ctx, c)
}

// nextBlock decodes c's next block with every property column.
func (cp *compactor) nextBlock(ctx context.Context, c *compactCursor) (bool, error) {
	for c.block++; c.block < len(c.meta.Blocks); c.block++ {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("compact app %q cancelled: %w", cp.app.name, err)
		}
		if err := c.r.ReadBlock(c.block, c.props, c.blk); err != nil {
			return false, fmt.Errorf("compact app %q: %w", cp.app.name, err)
		}
		if len(c.blk.UserHashes) > 0 {
			c.user = 0
			return true, nil
		}
	}
	return false, nil
}

// appendUser appends the user being merged (cp.parts, rows in total) to
// the output: its rows from every part in (time, part) order, parts being
// in (Seq, input) order. Parts are merged run by run: the part with the
// smallest head row gives rows up to the next part's head.
func (cp *compactor) appendUser(hash uint64, id []byte, rows int) {
	out := &cp.out
	out.Users = append(out.Users, segment.User{Hash: hash, Rows: rows})
	cp.ids = append(cp.ids, id...)
	cp.idEnd = append(cp.idEnd, len(cp.ids))
	n0 := len(out.Times)
	n1 := n0 + rows
	out.Times = slices.Grow(out.Times, rows)[:n1]
	out.Events = slices.Grow(out.Events, rows)[:n1]
	words := (n1 + 63) >> 6
	for j := range cp.cols {
		// Only the presence bits need zeroing: the writer ignores the
		// values of absent rows.
		col := &cp.cols[j].col
		col.Present = growZero(col.Present, words)
		switch col.Type {
		case event.TypeFloat:
			col.Floats = slices.Grow(col.Floats, rows)[:n1]
		case event.TypeString:
			col.Strs = slices.Grow(col.Strs, rows)[:n1]
		default:
			col.Ints = slices.Grow(col.Ints, rows)[:n1]
		}
	}
	parts := cp.parts
	if len(parts) == 1 {
		cp.copyRows(parts[0].c, parts[0].s, parts[0].e, n0)
		return
	}
	at := n0
	for {
		best, second := -1, -1
		for i := range parts {
			if parts[i].s == parts[i].e {
				continue
			}
			switch t := parts[i].c.blk.Times[parts[i].s]; {
			case best < 0 || t < parts[best].c.blk.Times[parts[best].s]:
				best, second = i, best
			case second < 0 || t < parts[second].c.blk.Times[parts[second].s]:
				second = i
			}
		}
		if best < 0 {
			return
		}
		p := &parts[best]
		end := p.e
		if second >= 0 {
			// Rows before the second part's head, and rows tied with it
			// when this part comes first in arrival order.
			t2 := parts[second].c.blk.Times[parts[second].s]
			times := p.c.blk.Times
			k := p.s + 1
			for k < p.e && (times[k] < t2 || (times[k] == t2 && best < second)) {
				k++
			}
			end = k
		}
		cp.copyRows(p.c, p.s, end, at)
		at += end - p.s
		p.s = end
	}
}

// copyRows copies block rows [s, e) of cursor c to output rows [at,
// at+e-s), translating event and string codes (the output's arrays are
// already sized).
func (cp *compactor) copyRows(c *compactCursor, s, e, at int) {
	out := &cp.out
	b := c.blk
	copy(out.Times[at:], b.Times[s:e])
	ev := out.Events[at : at+e-s]
	for i, code := range b.Events[s:e] {
		oc := c.evMap[code]
		if oc == 0 {
			out.EventNames = append(out.EventNames, c.meta.EventNames[code])
			oc = uint32(len(out.EventNames))
			c.evMap[code] = oc
		}
		ev[i] = oc - 1
	}
	for pi, j := range c.colOf {
		pd := &b.Props[pi]
		oc := &cp.cols[j]
		if !orBits(oc.col.Present, at, pd.Present, s, e-s) {
			continue
		}
		oc.used = true
		col := &oc.col
		switch col.Type {
		case event.TypeFloat:
			if c.meta.Props[pi].Type == event.TypeInt { // widened since
				for r := s; r < e; r++ {
					col.Floats[at+r-s] = float64(pd.Ints[r])
				}
				break
			}
			copy(col.Floats[at:], pd.Floats[s:e])
		case event.TypeString:
			m, dict := c.strMap[pi], c.meta.Props[pi].Dict
			for r := s; r < e; r++ {
				if pd.Present[r>>6]>>(r&63)&1 == 0 {
					continue
				}
				code := pd.Strs[r]
				o := m[code]
				if o == 0 {
					col.Dict = append(col.Dict, dict[code])
					o = uint32(len(col.Dict))
					m[code] = o
				}
				col.Strs[at+r-s] = o - 1
			}
		default:
			copy(col.Ints[at:], pd.Ints[s:e])
		}
	}
}

// flush writes the output being built as a segment and resets the output
// and the cursors' code translations.
func (cp *compactor) flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("compact app %q cancelled: %w", cp.app.name, err)
	}
	out := &cp.out
	ids := string(cp.ids) // one allocation for all ids of the output
	from := 0
	for i, end := range cp.idEnd {
		out.Users[i].ID = ids[from:end]
		from = end
	}
	out.Props = out.Props[:0]
	for j := range cp.cols {
		if cp.cols[j].used {
			out.Props = append(out.Props, cp.cols[j].col)
		}
	}
	prefix := "e"
	if cp.g.kind == KindUsers {
		prefix = "u"
	}
	// Unique among live and orphan files: the generation is new, and the
	// part number orders a group's outputs.
	file := fmt.Sprintf("%s-%04d-%08d-c%08d-%04d.seg", prefix, cp.g.shard, cp.g.seq, cp.gen, len(cp.written))
	info, err := segment.Write(filepath.Join(cp.app.dir, segDir, file), out, segment.WriterOptions{BlockRows: cp.opt.BlockRows})
	if err != nil {
		return fmt.Errorf("compact app %q shard %d: %w", cp.app.name, cp.g.shard, err)
	}
	cp.written = append(cp.written, SegmentRef{File: file, Kind: cp.g.kind, Shard: cp.g.shard, Seq: cp.g.seq,
		Rows: info.Rows, Users: info.Users, MinTime: info.MinTime, MaxTime: info.MaxTime, Bytes: info.Bytes,
		FirstHash: out.Users[0].Hash, LastHash: out.Users[len(out.Users)-1].Hash})
	cp.progress(info.Rows)

	clear(out.Users) // drop the id string
	out.Users, out.Times, out.Events = out.Users[:0], out.Times[:0], out.Events[:0]
	clear(out.EventNames)
	out.EventNames = out.EventNames[:0]
	clear(out.Props)
	out.Props = out.Props[:0]
	cp.ids, cp.idEnd = cp.ids[:0], cp.idEnd[:0]
	for j := range cp.cols {
		oc := &cp.cols[j]
		clear(oc.col.Dict)
		oc.used = false
		oc.col.Present, oc.col.Ints, oc.col.Floats, oc.col.Strs, oc.col.Dict =
			oc.col.Present[:0], oc.col.Ints[:0], oc.col.Floats[:0], oc.col.Strs[:0], oc.col.Dict[:0]
	}
	for _, c := range cp.cursors {
		clear(c.evMap)
		for _, m := range c.strMap {
			clear(m)
		}
	}
	return nil
}

// growZero returns s extended to n elements, the new ones zero.
func growZero[T any](s []T, n int) []T {
	old := len(s)
	if n <= old {
		return s
	}
	s = slices.Grow(s, n-old)[:n]
	clear(s[old:])
	return s
}

// orBits ORs the n bits of bitmap src starting at bit s into bitmap dst
// starting at bit d (bit i of a bitmap is bit i%64 of word i/64), a word
// at a time, and reports whether any of those source bits is set. dst must
// hold bit d+n-1 and src bit s+n-1.
func orBits(dst []uint64, d int, src []uint64, s, n int) bool {
	set := false
	for n > 0 {
		k := min(n, 64)
		sw, sb := s>>6, uint(s&63)
		w := src[sw] >> sb
		if sb != 0 && sw+1 < len(src) {
			w |= src[sw+1] << (64 - sb)
		}
		if k < 64 {
			w &= 1<<uint(k) - 1
		}
		if w != 0 {
			set = true
			dw, db := d>>6, uint(d&63)
			dst[dw] |= w << db
			if db != 0 && int(64-db) < k {
				dst[dw+1] |= w >> (64 - db)
			}
		}
		s, d, n = s+k, d+k, n-k
	}
	return set
}

// push and pop keep cp.heap a binary min-heap by compactLess.
func (cp *compactor) push(c *compactCursor) { cp.heap = heapPush(cp.heap, c, compactLess) }

func (cp *compactor) pop() *compactCursor {
	c, h := heapPop(cp.heap, compactLess)
	cp.heap = h
	return c
}
