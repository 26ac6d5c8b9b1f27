package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
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
	// are skipped. An events scan never reads before the app's retention
	// (Version.RetainedFrom): From is raised to it.
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
	// and sets Trail.User[j] to the user's current value (docs/analytics.md §1: the
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
	// DistinctIDs scans trails by distinct id even when the version's id
	// graph joins ids into persons (Version.Persons): an export, a user's
	// own events. Without it, the trails visited are persons' (see
	// personscan.go): the events of all of a person's distinct ids in one
	// trail whose ID is the person id.
	DistinctIDs bool
	// Shards, when not nil, restricts the scan to these shards: indexes
	// in [0, Catalog.Shards), sorted ascending without repeats (else Scan
	// fails); an empty non-nil slice scans none. nil scans every shard.
	// By placement (ShardOf) every user is in exactly one shard, so scans
	// over disjoint subsets visit disjoint sets of users, and their union
	// is the full scan (a cluster querier scans only its shards). Segments
	// of other shards are neither read nor counted in ScanStats.
	Shards []int
	// Workers is the number of goroutines scanning shards in parallel;
	// 0 means GOMAXPROCS.
	Workers int
	// Thin, when its Mask is not 0, lets the scan omit rows no visitor
	// needs (see Thin).
	Thin Thin
	// ChunkEvents is the largest number of events of one trail chunk the
	// visitors get (package trail); 0 means DefaultChunkEvents. A group of
	// equal timestamps longer than that is one chunk.
	ChunkEvents int
	// Grow, if set, is told (bytes > 0) each time a worker's buffers grow
	// past what it held before — decode buffers, and the blocks and chunk
	// of a long trail being merged — and may refuse with an error,
	// which ends the scan with it: a query's memory budget. Called at most
	// once per user or per block of a long trail, never per event, and once at the end of each worker
	// with the negative of what it reported (the buffers are kept for the
	// next scan, which reports them again). Calls come from the scan's
	// goroutines, concurrently.
	Grow func(bytes int64) error
}

// DefaultChunkEvents is ScanSpec.ChunkEvents when it is 0: 65,536 events
// (1 MiB of times and masks, plus the requested columns).
const DefaultChunkEvents = 1 << 16

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
// It is a hint: only the AVX-512 row filter thins (segment.FilterDeltasBlock;
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
	ColEvent                    // the row's event name, always set: Remap[event code] (Prop is ignored)
	// ColIntFloat reads an int column of a property the app types float
	// (widened after the segment was written, docs/analytics.md §1): the int64 as
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
func (s *Version) Scan(ctx context.Context, spec ScanSpec, visitors []Visitor) (ScanStats, error) {
	if spec.Kind == 0 {
		spec.Kind = KindEvents
	}
	if spec.Kind == KindEvents {
		// Retention (docs/storage.md §7): no query sees an expired event.
		// An empty range stays From <= To (the row filters test
		// uint64(t-From) < uint64(To-From)).
		if from := s.RetainedFrom(); spec.From < from {
			spec.From, spec.To = from, max(spec.To, from)
		}
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
	want, err := checkShards(spec.Shards, s.Shards)
	if err != nil {
		return ScanStats{}, err
	}
	byShard := make([][]SegmentRef, s.Shards)
	var stats ScanStats
	for _, ref := range s.Segments {
		if want != nil && !want[ref.Shard] {
			continue
		}
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
	var join *personJoin
	if !spec.DistinctIDs {
		join = newPersonJoin(s)
	}
	scanners := visitors
	if join != nil && spec.UserProps > 0 {
		var err error
		if join.ops, err = usersHaveOps(s); err != nil {
			return stats, err
		}
	}
	if join != nil {
		join.prepare(&spec)
		scanners = join.wrap(visitors, spec.Grow)
		defer join.release()
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
			sc := s.app.store.scanners.get()
			sc.snap, sc.spec, sc.v, sc.st = s, &spec, scanners[w], &ws[w]
			if join != nil {
				join.workers[w].sc, sc.keepTimes = sc, true
				if join.ops {
					sc.joined = join.snap
				}
			}
			sc.chunkEvents, sc.held = cmp.Or(spec.ChunkEvents, DefaultChunkEvents), 0
			defer func() {
				sc.snap, sc.spec, sc.v, sc.st, sc.keepTimes, sc.joined = nil, nil, nil, nil, false, nil
				for _, c := range sc.free {
					c.chain, c.r, c.meta, c.masks, c.plan, c.uplan, c.own = nil, nil, nil, nil, nil, nil, SegmentPlan{}
				}
				sc.trail.ID = nil
				if sc.bufferBytes() <= maxIdleScanBytes {
					s.app.store.scanners.put(sc)
				}
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
			if spec.Grow != nil && sc.held > 0 {
				spec.Grow(-sc.held) // the worker's buffers are the next scan's
			}
		}()
	}
	wg.Wait()
	for w := range ws {
		stats.add(&ws[w])
	}
	// The first worker's failure cancels the others, whose errors are then
	// the cancellation: report the failure itself.
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled)) {
			first = err
		}
	}
	if first != nil {
		return stats, first
	}
	if join != nil {
		if err := join.visit(ctx, cmp.Or(spec.ChunkEvents, DefaultChunkEvents), spec.UserProps); err != nil {
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
