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
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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

// ImportCompactMinRuns is the CompactOptions.MinRuns of the automatic
// compaction that `spur import`, `spur gen --app` and the server's import
// endpoint (POST /api/apps/{app}/import) run after publishing:
// a shard is compacted as soon as it has two runs of events. A scan merges
// a shard of several runs user by user instead of draining one run block by
// block, and that costs about the same whether the second run is large or
// small: 10M bench events imported in 4 runs per shard made funnel4 3.3×,
// retention 2.9× and the funnel by channel 3.5× slower than compacted, and
// a 1M-event import (10 % of the users returning) beside a compacted 10M
// run made funnel4 3.3× and retention 1.8× slower. The compaction rewrites
// the shard once (1.6 s for 10M events, within the import's peak memory);
// an import into a large app therefore rewrites the whole app
// (--no-compact defers it to an explicit spur compact).
const ImportCompactMinRuns = 2

// AutoCompactUserMinRuns is CompactOptions.UserMinRuns of the policy after
// an import: 4.2M users imported in three runs per shard made user
// breakdowns at 100M events 35–45 % slower than with one run.
const AutoCompactUserMinRuns = 2

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
	// MinRuns is how many runs (see Catalog.ShardRuns) a shard's segments
	// of one kind must form to be compacted; values below 2 mean 2.
	MinRuns int
	// UserMinRuns is MinRuns for users segments; 0 means MinRuns. Users
	// runs are small, and every one is a cursor that each query's user
	// join steps through: the automatic policy merges them from 2
	// (AutoCompactUserMinRuns).
	UserMinRuns int
	// Force compacts every shard and kind that has a segment, also those
	// that are one run already (to re-split them by MaxSegmentRows).
	Force bool
	// Tiered compacts by size tiers (planTiered: TierFanout consecutive
	// runs of one tier at a time) instead of all of a shard's segments:
	// the policy under continuous ingestion, which bounds write
	// amplification. MinRuns and Force are ignored.
	Tiered bool
	// BlockRows is passed to the segment writer (rows per block); 0 means
	// its default.
	BlockRows int
	// Workers is the number of shard groups compacted in parallel; 0 means
	// GOMAXPROCS. Memory grows with it (see MaxSegmentRows).
	Workers int
	// FanIn is the most runs one output merges (each run's cursor holds a
	// decoded block); 0 means a worker's share of Config.WriteMemory, less
	// its output's (maxOutputMemory), over fanInRunBytes, within [4, 64]:
	// 24 with the default 512 MiB on 2 cores. A shard with more runs is compacted in rounds, each
	// merging consecutive batches of at most FanIn runs (by arrival), and
	// published on its own, until one run is left: a 1B-event app of 300
	// runs per shard is merged in two passes with bounded memory instead of
	// one pass holding 300 blocks per worker (2.7 GiB before). Ignored by
	// Tiered, whose groups have TierFanout runs.
	FanIn int
	// Progress, if set, is called after each output segment is written with
	// the number of rows written so far by this compaction. Calls are
	// serialized but come from the compaction's worker goroutines.
	Progress func(rows int64)

	// Expire also compacts every shard whose events segments hold rows
	// past the app's retention (docs/storage.md §7), even one run already,
	// so that those rows leave the disk (`spur compact`). Without it they
	// go when their shard is compacted for another reason. Either way,
	// events segments wholly past the retention are dropped first.
	Expire bool

	// only, if set, limits a round to these (shard, kind) pairs: those the
	// previous round cut into batches.
	only map[shardKind]bool
	// erase rewrites the runs holding rows of pending deletions
	// (planErase; Erase) instead; the other fields but Workers are
	// ignored.
	erase bool
	// expireBefore, when expiring, drops the events rows before it (UTC
	// µs: the app's retention, retention.go) from the outputs; expired
	// counts them.
	expireBefore int64
	expiring     bool
	expired      *atomic.Int64
}

// shardKind names one shard's segments of one kind.
type shardKind struct {
	shard int
	kind  SegmentKind
}

// CompactReport describes a finished, aborted or no-op compaction. Byte
// counts are file sizes; Before/After describe the whole catalog.
type CompactReport struct {
	App            string        `json:"app"`
	Groups         int           `json:"groups"`            // (shard, kind) groups compacted
	SegmentsBefore int           `json:"segments_before"`   // segments published before
	SegmentsAfter  int           `json:"segments_after"`    // segments published after
	Replaced       int           `json:"segments_replaced"` // input segments removed from the catalog
	Written        int           `json:"segments_written"`  // output segments published
	Rows           int64         `json:"rows"`              // rows rewritten (those of the replaced segments)
	Duplicates     int64         `json:"rows_duplicate"`    // duplicate events dropped (docs/ingest.md §3)
	Expired        int           `json:"segments_expired"`  // events segments dropped whole: every row past the app's retention (docs/storage.md §7)
	RowsExpired    int64         `json:"rows_expired"`      // events past the retention dropped: the expired segments' and those left out of rewritten segments
	BytesBefore    int64         `json:"bytes_before"`      // bytes of the segments published before
	BytesAfter     int64         `json:"bytes_after"`       // bytes of the segments published after
	ReplacedBytes  int64         `json:"bytes_replaced"`    // bytes of the replaced segments, left on disk until the next write (see App.Compact)
	Generation     uint64        `json:"generation"`        // catalog generation after (unchanged when nothing was compacted)
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
// The outputs replace the inputs in one atomic catalog swap (Generation
// +1) under the app's write locks (as Import): a crash or an error at any
// point leaves the store as it was, and unpublished outputs are removed as
// orphans by the next write. A cancelled ctx aborts with a wrapped
// ctx.Err() and changes nothing. Replaced input files are not deleted:
// another process, or a scan of an older snapshot in this one, may still
// read the previous catalog and open them, so they stay until the next
// write (import or compaction) removes them as orphans; in this process,
// the readers already open keep working after that, until the next
// compaction drops them. For an app with a retention (Catalog.Retention)
// it first drops the events segments wholly past it (published on their
// own, before the rounds), and the outputs of events leave out the rows
// past it (CompactOptions.Expire also compacts the shards holding such
// rows); CompactReport.Expired and RowsExpired count them. Errors are
// I/O errors, segment corruption (errors.Is(err,
// segment.ErrCorruption)), a locked app, or segments whose property types
// disagree.
func (a *App) Compact(ctx context.Context, opt CompactOptions) (*CompactReport, error) {
	start := time.Now()
	if opt.MaxSegmentRows <= 0 {
		opt.MaxSegmentRows = DefaultMaxSegmentRows
	}
	opt.MinRuns = max(opt.MinRuns, 2)
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.FanIn <= 0 {
		// Each worker's share of the write memory, less its output's.
		share := a.store.cfg.WriteMemory/int64(opt.Workers) - maxOutputMemory
		opt.FanIn = min(max(int(share/fanInRunBytes), 4), 64)
	}
	opt.FanIn = max(opt.FanIn, 2)
	expired, expiredRows, _, err := a.expire(ctx)
	if err != nil {
		return &CompactReport{App: a.name, Elapsed: time.Since(start)}, err
	}
	opt.expired = new(atomic.Int64)
	rep, more, err := a.compactRound(ctx, opt)
	for err == nil && len(more) > 0 {
		// The next round merges what this one left of the shards it cut
		// into batches: the batches' outputs and the runs not yet merged.
		opt.Force, opt.MinRuns, opt.only = false, 2, more
		var r *CompactReport
		r, more, err = a.compactRound(ctx, opt)
		rep.Groups, rep.Replaced, rep.Written = rep.Groups+r.Groups, rep.Replaced+r.Replaced, rep.Written+r.Written
		rep.Rows, rep.Duplicates, rep.ReplacedBytes = rep.Rows+r.Rows, rep.Duplicates+r.Duplicates, rep.ReplacedBytes+r.ReplacedBytes
		if r.Generation != 0 {
			rep.SegmentsAfter, rep.BytesAfter, rep.Generation = r.SegmentsAfter, r.BytesAfter, r.Generation
		}
	}
	rep.Expired, rep.RowsExpired = expired, expiredRows+opt.expired.Load()
	rep.Elapsed = time.Since(start)
	return rep, err
}

// fanInRunBytes is the memory a compaction allows per merged run (a
// decoded block, its compressed bytes and the cursor) when it derives
// CompactOptions.FanIn from the write memory, bytes.
const fanInRunBytes = 8 << 20

// compactRound is one round of Compact (opt completed by it): it plans
// the groups, merges them and publishes the result, and returns the
// shards (and kinds) that had more than opt.FanIn runs, for which another
// round is due.
func (a *App) compactRound(ctx context.Context, opt CompactOptions) (*CompactReport, map[shardKind]bool, error) {
	start := time.Now()
	rep := &CompactReport{App: a.name}
	defer func() { rep.Elapsed = time.Since(start) }()
	noop := func(c *Catalog) (*CompactReport, map[shardKind]bool, error) {
		rep.SegmentsBefore, rep.SegmentsAfter = len(c.Segments), len(c.Segments)
		rep.BytesBefore, rep.BytesAfter = c.Bytes(), c.Bytes()
		rep.Generation = c.Generation
		return rep, nil, nil
	}
	// Nothing to do in the current version: no lock taken, so a no-op
	// after every import costs nothing and cannot fail on a busy lock.
	plan := planCompaction
	switch {
	case opt.erase:
		plan = func(m *Catalog, _ CompactOptions) ([]compactGroup, map[shardKind]bool) { return a.planErase(m), nil }
	case opt.Tiered:
		plan = func(m *Catalog, _ CompactOptions) ([]compactGroup, map[shardKind]bool) { return planTiered(m), nil }
	}
	cur := a.published()
	opt.expireBefore, opt.expiring = expiredBefore(cur, a.store.now())
	if len(first(plan(cur, opt))) == 0 {
		return noop(cur)
	}
	if err := ctx.Err(); err != nil {
		return rep, nil, fmt.Errorf("compact app %q cancelled: %w", a.name, err)
	}
	t, err := a.beginWrite()
	if err != nil {
		return rep, nil, err
	}
	defer t.end()
	base := t.base
	opt.expireBefore, opt.expiring = expiredBefore(base, a.store.now())
	groups, more := plan(base, opt)
	if len(groups) == 0 {
		return noop(base)
	}
	v, err := a.Acquire() // the inputs' readers
	if err != nil {
		return rep, nil, err
	}
	defer v.Release()

	out := compactOutput{sink: t, shards: base.Shards, gen: t.outputGen(), delSeq: lastDeletion(base.Deletions)}
	written, dups, err := a.compactGroups(ctx, out, v, groups, opt)
	if err == nil {
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("compact app %q cancelled: %w", a.name, cerr)
		}
	}
	if err != nil {
		return rep, nil, err
	}
	replaced := map[string]bool{}
	for _, g := range groups {
		for _, ref := range g.inputs {
			replaced[ref.File] = true
			rep.Rows += ref.Rows
			rep.ReplacedBytes += ref.Bytes
		}
	}
	next := base.clone()
	next.Generation++
	next.Segments = next.Segments[:0]
	for _, ref := range base.Segments {
		if !replaced[ref.File] {
			next.Segments = append(next.Segments, ref)
		}
	}
	next.Segments = append(next.Segments, written...)
	sortSegments(next.Segments)
	if err := t.publish(next); err != nil {
		return rep, nil, fmt.Errorf("compact app %q: %w", a.name, err)
	}

	rep.Groups, rep.Replaced, rep.Written, rep.Duplicates = len(groups), len(replaced), len(written), dups
	rep.SegmentsBefore, rep.SegmentsAfter = len(base.Segments), len(next.Segments)
	rep.BytesBefore, rep.BytesAfter = base.Bytes(), next.Bytes()
	rep.Generation = next.Generation
	a.store.log.Debug("compaction published", "app", a.name, "groups", rep.Groups, "replaced", rep.Replaced,
		"written", rep.Written, "rows", rep.Rows, "bytes_before", rep.BytesBefore, "bytes_after", rep.BytesAfter,
		"generation", next.Generation, "more_rounds", len(more), "elapsed", time.Since(start))
	return rep, more, nil
}

// first returns its first argument.
func first[T, U any](t T, _ U) T { return t }

// ShardRuns returns, per shard (Shards entries), the number of runs formed
// by the shard's segments of the given kind: the number of cursors a scan of
// the shard merges. Segments with known, pairwise disjoint hash ranges
// (FirstHash and LastHash not both 0) chain into one run, as the outputs of
// one compaction do; a segment with an unknown range (an import's) is a run
// of its own. Runs are counted as the scan forms them: segments in
// FirstHash order, each appended to the first run whose last segment ends
// below its FirstHash (greedy interval partitioning, which is optimal).
func (c *Catalog) ShardRuns(kind SegmentKind) []int {
	byShard := make([][]SegmentRef, c.Shards)
	for _, ref := range c.Segments {
		if ref.Kind == kind && ref.Shard >= 0 && ref.Shard < c.Shards {
			byShard[ref.Shard] = append(byShard[ref.Shard], ref)
		}
	}
	out := make([]int, c.Shards)
	for sh, refs := range byShard {
		out[sh] = countRuns(refs)
	}
	return out
}

// countRuns counts the runs of one shard's segments of one kind (see
// Catalog.ShardRuns).
func countRuns(refs []SegmentRef) int { return len(chainSegments(refs, &chainScratch{})) }

// compactGroup is the input of one output run: all segments of one kind of
// one shard, in arrival order.
type compactGroup struct {
	shard  int
	kind   SegmentKind
	inputs []SegmentRef // sorted by (SeqMax, FirstHash); segments sharing a range hold disjoint users
	seqMin int64        // the outputs' arrival range: the inputs'
	seqMax int64
	rows   int64
}

// planCompaction returns the groups that m and opt call for, the largest
// first (so parallel workers finish together), and the shards (and
// kinds) with more than opt.FanIn runs (0: no limit): their segments, in arrival order,
// are then cut into consecutive batches of at most opt.FanIn arrival
// ranks (each a run or less; a compaction's outputs share one rank), one
// group per batch of two ranks or more, and another round is due.
// Consecutive batches keep arrival order: a batch's outputs take its
// ranks, which all come before the next batch's.
func planCompaction(m *Catalog, opt CompactOptions) ([]compactGroup, map[shardKind]bool) {
	var groups []compactGroup
	var more map[shardKind]bool
	for _, kind := range []SegmentKind{KindEvents, KindUsers} {
		byShard := make([][]SegmentRef, m.Shards)
		for _, ref := range m.Segments {
			if ref.Kind == kind && ref.Shard >= 0 && ref.Shard < m.Shards {
				byShard[ref.Shard] = append(byShard[ref.Shard], ref)
			}
		}
		for sh, refs := range byShard {
			minRuns := opt.MinRuns
			if kind == KindUsers && opt.UserMinRuns > 0 {
				minRuns = max(opt.UserMinRuns, 2)
			}
			if len(refs) == 0 || (!opt.Force && countRuns(refs) < minRuns && !opt.expires(refs)) || (opt.only != nil && !opt.only[shardKind{sh, kind}]) {
				continue
			}
			refs = slices.Clone(refs)
			sortSegments(refs)
			batches := batchRanks(refs, opt.FanIn)
			if len(batches) > 1 {
				if more == nil {
					more = map[shardKind]bool{}
				}
				more[shardKind{sh, kind}] = true
			}
			for _, b := range batches {
				if len(batches) > 1 && b[0].SeqMax == b[len(b)-1].SeqMax {
					continue // one rank: a run already, merged next round
				}
				g := compactGroup{shard: sh, kind: kind, inputs: b, seqMin: b[0].SeqMin, seqMax: b[len(b)-1].SeqMax}
				for _, r := range b {
					g.rows += r.Rows
					g.seqMin = min(g.seqMin, r.SeqMin)
				}
				groups = append(groups, g)
			}
		}
	}
	slices.SortStableFunc(groups, func(x, y compactGroup) int { return cmp.Compare(y.rows, x.rows) })
	return groups, more
}

// expires reports whether opt.Expire calls for compacting refs, one
// shard's segments of one kind: events segments holding rows past the
// app's retention.
func (opt *CompactOptions) expires(refs []SegmentRef) bool {
	if !opt.Expire || !opt.expiring {
		return false
	}
	for _, ref := range refs {
		if ref.Kind == KindEvents && ref.MinTime < opt.expireBefore {
			return true
		}
	}
	return false
}

// batchRanks cuts refs (sorted by sortSegments: by SeqMax) into
// consecutive batches of at most n distinct SeqMax values (all of refs
// when n is 0 or they have no more).
func batchRanks(refs []SegmentRef, n int) [][]SegmentRef {
	var out [][]SegmentRef
	start, ranks := 0, 0
	for i := range refs {
		if i == 0 || refs[i].SeqMax != refs[i-1].SeqMax {
			if n > 0 && ranks == n {
				out = append(out, refs[start:i])
				start, ranks = i, 0
			}
			ranks++
		}
	}
	return append(out, refs[start:])
}

// compactOutput says where a compaction's outputs go: the sink, the app's
// shard count, the generation they are written for and a prefix of their
// names (the live layer's, for segments kept in memory).
type compactOutput struct {
	sink   segSink
	shards int
	gen    uint64
	prefix string
	// delSeq is the outputs' SegmentRef.DelSeq: the newest deletion
	// request the catalog they are published in (or the live layer) has.
	// The compactor hides the rows of every deletion the version pending
	// in an input (compactCursor.erase), so outputs are clean of them.
	delSeq uint64
}

// compactGroups runs the groups on opt.Workers goroutines and returns every
// output written (also on error, for the caller to remove), in group
// order. The first error cancels the other workers.
func (a *App) compactGroups(ctx context.Context, out compactOutput, v *Version, groups []compactGroup, opt CompactOptions) ([]SegmentRef, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outs := make([][]SegmentRef, len(groups))
	dups := make([]int64, len(groups))
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
			var blocks []*segment.Block
			for gi := range next {
				if ctx.Err() != nil {
					continue
				}
				sctx, stage := StartStage(ctx, "compact shard", groups[gi].shard)
				c := &compactor{app: a, out: out, v: v, opt: opt, g: &groups[gi], progress: progress, blocks: &blocks}
				outs[gi], errs[gi] = c.run(sctx)
				dups[gi] = c.dups
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
	var dropped int64
	for gi, o := range outs {
		written = append(written, o...)
		dropped += dups[gi]
	}
	// Workers stopped by another worker's failure report context.Canceled:
	// report the failure itself, else the first cancellation.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return written, dropped, err
		}
		if first == nil {
			first = err
		}
	}
	return written, dropped, first
}

// compactor merges one group into outputs written a block at a time
// (segment.Writer): its memory is the inputs' decoded blocks and the block
// being written, whatever the size of the group (docs/storage.md §5).
type compactor struct {
	app      *App
	out      compactOutput
	v        *Version // pins the inputs
	opt      CompactOptions
	g        *compactGroup
	progress func(rows int64)
	blocks   *[]*segment.Block // the worker's decode buffers, reused from group to group

	props   []segment.PropSpec // output columns: the inputs' (by name; types agree)
	cursors []*compactCursor
	heap    []*compactCursor
	group   []*compactCursor // the cursors at the user being merged, in arrival order
	parts   []runPart        // their rows of that user in their current blocks
	dups    int64            // duplicate events dropped
	deleted int64            // events deleted by pending events deletions
	tie     tieKeys          // events written at the current tie time

	w       *segment.Writer  // the output being written, or nil
	ref     SegmentRef       // its catalog entry
	remaps  []*segment.Remap // per cursor, for w
	last    uint64           // the hash of the last user written to w
	written []SegmentRef
}

// compactCursor walks one input segment's users in (hash, id) order,
// decoding every column of each block.
type compactCursor struct {
	r     *segment.Reader
	meta  *segment.Meta // with a format-3 insert-id column renamed (InsertIDProp)
	seq   int64
	ord   int   // input index: the last tie-break of the merge
	props []int // every property column
	iid   int   // the insert-id column (index into blk.Props), -1 if none
	blk   *segment.Block
	block int
	user  int
	// erase lists the users whose rows pending deletions hide in this
	// input (eraseIndex.forSegment), in hash order; eraseAt is the
	// first one not behind the cursor.
	erase   []erasedUser
	eraseAt int
	// rowDels are the events deletions pending in the input: its rows
	// they delete are not written (writeRun)
	rowDels []rowDelete
}

func (c *compactCursor) hash() uint64 { return c.blk.UserHashes[c.user] }
func (c *compactCursor) id() []byte   { return c.blk.UserID(c.user) }

// continues reports whether c's current user has rows in the next block.
func (c *compactCursor) continues() bool {
	return c.user == len(c.blk.UserStarts)-2 && c.block+1 < len(c.meta.Blocks) && c.meta.Blocks[c.block+1].Continued
}

// runPart is one input's rows of the user being merged in its current
// block: rows [s, e) of cursor c; index is its position in the group.
type runPart struct {
	c     *compactCursor
	s, e  int
	index int
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
			*cp.blocks = append(*cp.blocks, c.blk)
		}
		if cp.w != nil {
			cp.w.Abort()
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
	maxRows := int64(cp.opt.MaxSegmentRows)
	for len(cp.heap) > 0 {
		// Every cursor at the smallest user key, in (Seq, input) order.
		first := cp.pop()
		cp.group = append(cp.group[:0], first)
		for len(cp.heap) > 0 && cp.heap[0].hash() == first.hash() && bytes.Equal(cp.heap[0].id(), first.id()) {
			cp.group = append(cp.group, cp.pop())
		}
		hash := first.hash()
		var rows int64 // the user's rows in the inputs' current blocks
		for _, c := range cp.group {
			rows += int64(c.blk.UserStarts[c.user+1] - c.blk.UserStarts[c.user])
		}
		// An output ends before a user that would take it over the cap
		// (or its writer over maxOutputMemory), but only between users of
		// different hashes, so the outputs' hash ranges are disjoint.
		if cp.w != nil && hash != cp.last && cp.w.Rows() > 0 && (cp.w.Rows()+rows > maxRows || cp.w.Bytes() >= maxOutputMemory) {
			if err := cp.closeOutput(); err != nil {
				return cp.written, err
			}
		}
		if cp.w == nil {
			if err := cp.openOutput(); err != nil {
				return cp.written, err
			}
		}
		if err := cp.w.StartUser(hash, first.id()); err != nil {
			return cp.written, err
		}
		cp.last = hash
		if err := cp.mergeUser(ctx); err != nil {
			return cp.written, err
		}
		for _, c := range cp.group {
			ok, err := cp.advance(ctx, c)
			if err != nil {
				return cp.written, err
			}
			if ok {
				cp.push(c)
			}
		}
		if err := ctx.Err(); err != nil {
			return cp.written, fmt.Errorf("compact app %q cancelled: %w", cp.app.name, err)
		}
	}
	if cp.w != nil {
		if err := cp.closeOutput(); err != nil {
			return cp.written, err
		}
	}
	return cp.written, nil
}

// maxOutputMemory ends a compaction output (between users) once its
// writer holds this much (dictionaries of high-cardinality string
// columns grow with the output), bytes.
const maxOutputMemory = 64 << 20

// compactStringsHint caps the distinct strings an output's dictionary is
// sized for ahead (segment.PropSpec.Strings), per column, and
// compactStringsBudget the sum over its columns (16 MiB of map slots, a
// quarter of maxOutputMemory): the sum of the inputs' dictionaries
// overestimates a column whose strings repeat across inputs, and the
// space reserved counts in maxOutputMemory — reserved past it, every
// output would end after its first user.
const (
	compactStringsHint   = 1 << 18
	compactStringsBudget = 1 << 19
)

// open opens the group's inputs and derives the output columns: the union
// of the inputs' property columns by name, sorted (types must agree, but
// for an int column of a property widened to float later, docs/analytics.md §1: the
// output is float). A format-3 input's insert-id column is taken as the
// current one.
func (cp *compactor) open() error {
	types := map[string]event.Type{}
	strs := map[string]int{} // per string column: the inputs' dictionary lengths, summed
	var rows int64
	for i, ref := range cp.g.inputs {
		rows += ref.Rows
		r, err := cp.v.Reader(ref)
		if err != nil {
			return fmt.Errorf("compact app %q: %w", cp.app.name, err)
		}
		meta := r.Meta()
		iid := insertIDColumn(meta)
		if meta.Version < 4 && iid >= 0 {
			m := *meta
			m.Props = slices.Clone(meta.Props)
			m.Props[iid].Name = InsertIDProp
			meta = &m
		}
		// Other persons' events that name an erased id keep no trace of
		// it (their identity fields written through a scrubbed dictionary).
		meta, _ = cp.v.erasing().scrubbed(meta, ref.DelSeq)
		c := &compactCursor{r: r, meta: meta, seq: ref.SeqMax, ord: i, block: -1, blk: cp.block(), iid: iid}
		c.erase = cp.v.erasing().forSegment(nil, &ref, cp.out.shards)
		// Every property column is decoded, each at its footer index.
		if c.rowDels, err = cp.v.erasing().eventDeletes(nil, &ref, meta, func(mi int) int { return mi }); err != nil {
			return fmt.Errorf("compact app %q: %w", cp.app.name, err)
		}
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
			strs[p.Name] += len(p.Dict)
		}
	}
	names := slices.Sorted(maps.Keys(types))
	cp.props = make([]segment.PropSpec, len(names))
	total := 0
	for j, n := range names {
		cp.props[j] = segment.PropSpec{Name: n, Type: types[n]}
		if types[n] == event.TypeString {
			cp.props[j].Strings = int(min(int64(strs[n]), rows, compactStringsHint))
			total += cp.props[j].Strings
		}
	}
	capStringHints(cp.props, total)
	return nil
}

// capStringHints scales the dictionary sizes of specs (total in all)
// down to compactStringsBudget together.
func capStringHints(specs []segment.PropSpec, total int) {
	if total <= compactStringsBudget {
		return
	}
	for j := range specs {
		specs[j].Strings = int(int64(specs[j].Strings) * compactStringsBudget / int64(total))
	}
}

// openOutput starts the next output segment and the inputs' code tables
// for it.
func (cp *compactor) openOutput() error {
	o := &cp.out
	cp.ref = SegmentRef{File: o.prefix + segmentName(cp.g.kind, cp.g.shard, cp.g.seqMin, cp.g.seqMax, o.gen, len(cp.written)),
		Kind: cp.g.kind, Shard: cp.g.shard, SeqMin: cp.g.seqMin, SeqMax: cp.g.seqMax, Generation: o.gen, DelSeq: o.delSeq}
	f, err := o.sink.createSegment(cp.ref.File)
	if err != nil {
		return err
	}
	w, err := segment.NewWriter(f, segment.WriterOptions{BlockRows: cp.opt.BlockRows, Props: cp.props, FastZstd: o.prefix == livePrefix,
		Identity: cp.ref.identity(o.shards)})
	if err != nil {
		f.Close()
		return fmt.Errorf("compact app %q: %w", cp.app.name, err)
	}
	cp.w = w
	cp.remaps = cp.remaps[:0]
	for _, c := range cp.cursors {
		rm, err := w.NewRemap(c.meta, c.props)
		if err != nil {
			return fmt.Errorf("compact app %q: %w", cp.app.name, err)
		}
		cp.remaps = append(cp.remaps, rm)
	}
	return nil
}

// widened reports whether types a and b of one property are int and
// float, in either order: an int property widened to float (docs/analytics.md §1).
func widened(a, b event.Type) bool {
	return (a == event.TypeInt && b == event.TypeFloat) || (a == event.TypeFloat && b == event.TypeInt)
}

// closeOutput completes the output being written and records it.
func (cp *compactor) closeOutput() error {
	w := cp.w
	cp.w = nil
	if w.Rows() == 0 {
		// Every row it was given was deleted (an events deletion) or past
		// the retention: no output (its file, never published, is removed
		// by the write's end; a live merge's bytes leave the sink).
		if ms, ok := cp.out.sink.(*memSink); ok {
			ms.take(cp.ref.File)
		}
		return w.Abort()
	}
	info, err := w.Close()
	if err != nil {
		return fmt.Errorf("compact app %q shard %d: write segment %s: %w", cp.app.name, cp.g.shard, cp.ref.File, err)
	}
	ref := cp.ref
	ref.Rows, ref.Users, ref.MinTime, ref.MaxTime, ref.Bytes = info.Rows, info.Users, info.MinTime, info.MaxTime, info.Bytes
	ref.FirstHash, ref.LastHash = info.FirstHash, info.LastHash
	cp.written = append(cp.written, ref)
	cp.progress(info.Rows)
	return nil
}

// block returns a decode buffer from the worker's pool, or a new one.
func (cp *compactor) block() *segment.Block {
	if n := len(*cp.blocks); n > 0 {
		blk := (*cp.blocks)[n-1]
		*cp.blocks = (*cp.blocks)[:n-1]
		return blk
	}
	return &segment.Block{}
}

// advance moves c to its next user not erased; false when the segment
// is done.
func (cp *compactor) advance(ctx context.Context, c *compactCursor) (bool, error) {
	for {
		c.user++
		if c.user >= len(c.blk.UserStarts)-1 {
			return cp.nextBlock(ctx, c)
		}
		if !erasedAt(c.erase, &c.eraseAt, c.hash(), c.id()) {
			return true, nil
		}
	}
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
			if !erasedAt(c.erase, &c.eraseAt, c.hash(), c.id()) {
				return true, nil
			}
			return cp.advance(ctx, c)
		}
	}
	return false, nil
}

// mergeUser writes the rows of the user every cursor of cp.group is at,
// in trail order (time, then arrival: the group's order), following each
// input into the blocks the user continues in. Parts are merged run by
// run: the part with the smallest head row gives its rows up to the next
// part's head (and the rows tied with it, when it comes first). Duplicate
// events (docs/ingest.md §3) — equal event name, time and insert id in two
// inputs — are dropped, the earlier input's kept: only rows at a time two
// parts share can be copies, so only they are compared (tieKeys).
func (cp *compactor) mergeUser(ctx context.Context) error {
	cp.parts = cp.parts[:0]
	for i, c := range cp.group {
		cp.parts = append(cp.parts, runPart{c, int(c.blk.UserStarts[c.user]), int(c.blk.UserStarts[c.user+1]), i})
	}
	cp.tie.reset()
	for {
		best, second := -1, -1
		for i := range cp.parts {
			p := &cp.parts[i]
			if p.s == p.e && p.c.continues() {
				// The user goes on in the input's next block.
				ok, err := cp.nextBlock(ctx, p.c)
				if err != nil {
					return err
				}
				if ok {
					p.s, p.e = 0, int(p.c.blk.UserStarts[1])
				}
			}
			cp.dropExpired(p)
			if p.s == p.e {
				continue
			}
			switch t := p.c.blk.Times[p.s]; {
			case best < 0 || t < cp.parts[best].c.blk.Times[cp.parts[best].s]:
				best, second = i, best
			case second < 0 || t < cp.parts[second].c.blk.Times[cp.parts[second].s]:
				second = i
			}
		}
		if best < 0 {
			return nil
		}
		p := &cp.parts[best]
		times := p.c.blk.Times
		end := p.e
		tied := false // rows tied with the second part's head are written now
		if second >= 0 {
			t2 := cp.parts[second].c.blk.Times[cp.parts[second].s]
			k := p.s + 1
			for k < p.e && (times[k] < t2 || (times[k] == t2 && best < second)) {
				k++
			}
			end = k
			tied = times[end-1] == t2
		}
		if err := cp.writeRun(p, end, tied); err != nil {
			return err
		}
		p.s = end
	}
}

// dropExpired skips the rows of part p past the app's retention
// (CompactOptions.expireBefore) in an events compaction: a prefix, since
// a part's rows are in time order.
func (cp *compactor) dropExpired(p *runPart) {
	if !cp.opt.expiring || cp.g.kind != KindEvents {
		return
	}
	s, times := p.s, p.c.blk.Times
	for p.s < p.e && times[p.s] < cp.opt.expireBefore {
		p.s++
	}
	if p.s > s && cp.opt.expired != nil {
		cp.opt.expired.Add(int64(p.s - s))
	}
}

// writeRun writes rows [p.s, end) of part p. Rows at the current tie time
// (tieKeys) that copy an earlier part's event are dropped; with tied, the
// run's last rows are at a time a later part also holds, and their keys
// are recorded for it.
func (cp *compactor) writeRun(p *runPart, end int, tied bool) error {
	b, rm := p.c.blk, cp.remaps[p.c.ord]
	times := b.Times
	dels := p.c.rowDels
	if len(dels) == 0 && (!cp.tie.active(times[p.s]) && !tied || p.c.iid < 0 && !cp.tie.active(times[p.s])) {
		return cp.w.AppendBlockRows(b, p.s, end, rm)
	}
	from := p.s
	for r := p.s; r < end; r++ {
		if len(dels) > 0 && deletedRow(dels, b, r) {
			if r > from {
				if err := cp.w.AppendBlockRows(b, from, r, rm); err != nil {
					return err
				}
			}
			from = r + 1
			cp.deleted++
			continue
		}
		t := times[r]
		if !cp.tie.active(t) && !(tied && t == times[end-1]) {
			continue
		}
		name, id, ok := cp.key(p.c, r)
		if !ok {
			continue
		}
		if cp.tie.active(t) && cp.tie.has(p.index, name, id) {
			if r > from {
				if err := cp.w.AppendBlockRows(b, from, r, rm); err != nil {
					return err
				}
			}
			from = r + 1
			cp.dups++
			continue
		}
		cp.tie.add(t, p.index, name, id)
	}
	if end > from {
		return cp.w.AppendBlockRows(b, from, end, rm)
	}
	return nil
}

// key returns row r of c's block's event name and insert id; false when
// it has no insert id (never a duplicate).
func (cp *compactor) key(c *compactCursor, r int) (string, string, bool) {
	if c.iid < 0 {
		return "", "", false
	}
	pd := &c.blk.Props[c.iid]
	if pd.Present[r>>6]>>(r&63)&1 == 0 {
		return "", "", false
	}
	return c.meta.EventNames[c.blk.Events[r]], c.meta.Props[c.iid].Dict[pd.Strs[pd.Index(r)]], true
}

// tieKeys are the (event name, insert id) keys of the events written at one
// time t, with the part each came from: a later part's event with an
// earlier part's key is a duplicate.
type tieKeys struct {
	t    int64
	set  bool
	keys []tieKey
}

type tieKey struct {
	part      int
	name, iid string
}

func (k *tieKeys) reset() { k.set, k.keys = false, k.keys[:0] }

// active reports whether keys are kept for time t.
func (k *tieKeys) active(t int64) bool { return k.set && k.t == t }

// add records a key at time t (starting over when t is a new time).
func (k *tieKeys) add(t int64, part int, name, iid string) {
	if !k.active(t) {
		k.t, k.set, k.keys = t, true, k.keys[:0]
	}
	k.keys = append(k.keys, tieKey{part, name, iid})
}

// has reports whether an earlier part than part wrote the key.
func (k *tieKeys) has(part int, name, iid string) bool {
	for _, x := range k.keys {
		if x.part < part && x.name == name && x.iid == iid {
			return true
		}
	}
	return false
}

// push and pop keep cp.heap a binary min-heap by compactLess.
func (cp *compactor) push(c *compactCursor) { cp.heap = heapPush(cp.heap, c, compactLess) }

func (cp *compactor) pop() *compactCursor {
	c, h := heapPop(cp.heap, compactLess)
	cp.heap = h
	return c
}
