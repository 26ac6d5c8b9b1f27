package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/storage/segment"
)

// SetEvent is the event name of the rows of users segments that set
// user properties: the latest write (by timestamp, then arrival) wins.
const SetEvent = "$set"

// SetOnceEvent is the event name of users rows that set user properties
// only where the user has none (docs/ingest.md §1 user_properties_once): for a
// property no SetEvent row sets, the earliest such write (by timestamp,
// then arrival) wins.
const SetOnceEvent = "$set_once"

// UnsetEvent, AddEvent and DeleteEvent are the event names of the users
// rows of the other user property operations (docs/identity.md §3): an
// UnsetEvent row clears the properties it has (their values, the zero
// value of the property's type, mean nothing), an AddEvent row adds its
// numbers to the properties (from 0 when unset), a DeleteEvent row
// clears every property of the user (it needs none). A user with such
// rows has its writes folded in (timestamp, arrival) order
// (internal/userfold).
const (
	UnsetEvent  = "$unset"
	AddEvent    = "$add"
	DeleteEvent = "$delete"
)

// Source yields input rows; ingest.Reader satisfies it. Next fills ev
// (reused, valid until the next call), returns io.EOF at the end, an
// *event.RowError for a bad row (the source stays usable) and any other
// error for a fatal failure. A Source that also implements
// event.BatchReader (the Parquet reader) is read batch by batch,
// column by column, instead: the same rows, errors and result.
type Source interface {
	Next(ev *event.Event) error
}

// ImportOptions configures one import.
type ImportOptions struct {
	// Kind is KindEvents (default) or KindUsers (rows are user property
	// writes; the event name is ignored).
	Kind SegmentKind
	// MaxErrors is how many bad rows are tolerated. With more, the import
	// aborts and applies nothing; with at most MaxErrors, every good row is
	// applied and every bad row is reported. Default 0: any bad row aborts.
	MaxErrors int
	// FlushRows is how many rows are buffered in memory before they are
	// written as segments (not yet published); default 8 Mi rows. The
	// writing runs in the background while the next rows are read, so up
	// to two flushes' worth of rows are in memory at a time.
	FlushRows int
	// Memory bounds the import's buffers, bytes (docs/storage.md §5): a flush
	// also starts once the rows buffered and the dictionaries of their
	// strings take a fifth of it (genShare) (two generations are in memory while
	// one is written, plus the writers' blocks). 0 means the Store's
	// Config.WriteMemory.
	Memory int64
	// BlockRows is passed to the segment writer (rows per block); 0 = its default.
	BlockRows int
	// Progress, if set, is called about every 64 Ki rows with the number of
	// rows read so far (good and bad), from the importing goroutine.
	Progress func(rows int64)
	// CompactAfter tells the import that the caller compacts the app's
	// shards of more than one run once it is published (as `spur import`
	// and the server's import endpoint do, ImportCompactMinRuns): an
	// import that flushes more than once then writes its segments with
	// segment.WriterOptions.FastZstd, since the compaction rewrites them
	// at once. An import of one flush writes as without it. The segments are valid either way (only larger), so
	// a compaction that fails or is skipped loses nothing but bytes.
	CompactAfter bool
	// AnonymousID names the string property holding each events row's
	// anonymous id (`spur import --anonymous-id COLUMN`): a row with a
	// non-empty one applies identify(user id, anonymous id) (docs/identity.md
	// §4). "" means none. Rows named `$identify`, `$create_alias` and
	// `$merge_dangerously` apply their operations either way (OpOfEvent),
	// in file order, when the import publishes.
	AnonymousID string
	// Persons, if set, is a persons file (`spur import --persons FILE`,
	// docs/identity.md §4): rows with the distinct id as user id and the
	// properties PersonsPersonIDColumn and PersonsIdentifiedColumn, as
	// `spur export --persons` writes them. Its persons alone define what
	// the import does to the id graph: it is read whole before the events
	// (any bad row fails the import, nothing applied), its operations
	// (personsOps) are applied when the import publishes, and the events'
	// operation rows are stored as plain events. Not with AnonymousID, nor
	// in a users import. On an app that has persons already, the file's
	// are merged into them (forced merges); the same file twice changes
	// nothing.
	Persons Source
}

// MaxReportedErrors caps ImportReport.Errors; the count in Rejected is exact.
const MaxReportedErrors = 1000

// ImportReport describes a finished or aborted import.
type ImportReport struct {
	App         string            `json:"app"`
	Kind        SegmentKind       `json:"kind"`
	Read        int64             `json:"rows_read"`        // rows read (good + bad)
	Applied     int64             `json:"rows_applied"`     // rows published (0 when aborted)
	Rejected    int64             `json:"rows_rejected"`    // bad rows
	Duplicates  int64             `json:"rows_duplicate"`   // duplicate events of this import dropped (docs/ingest.md §3; copies of earlier imports' events are dropped by queries and compaction)
	Expired     int64             `json:"rows_expired"`     // events older than the app's retention, skipped (docs/storage.md §7)
	Segments    int               `json:"segments"`         // segment files published
	Bytes       int64             `json:"bytes"`            // bytes of those files
	Elapsed     time.Duration     `json:"elapsed_ns"`       // wall time
	IdentityOps int64             `json:"identity_ops"`     // identity operations applied (docs/identity.md §4)
	Errors      []*event.RowError `json:"errors,omitempty"` // the first MaxReportedErrors bad rows
}

// ImportError is returned when an import is aborted because it found more
// bad rows than ImportOptions.MaxErrors; nothing was applied. Report lists
// the bad rows.
type ImportError struct {
	Report *ImportReport
	Max    int
}

func (e *ImportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "import aborted, nothing applied: %d bad row(s) (at most %d allowed)", e.Report.Rejected, e.Max)
	for i, re := range e.Report.Errors {
		if i == 20 {
			fmt.Fprintf(&b, "\n  … and %d more", e.Report.Rejected-20)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(re.Error())
	}
	return b.String()
}

// Import reads every source in order and publishes their rows to app
// (created if it does not exist) in one atomic catalog swap: either every
// good row is applied or none is. Rows are validated (docs/analytics.md §1 limits) and
// their properties coerced to the app's schema (the first sighting of a
// property fixes its type). Duplicate events (docs/ingest.md §3: equal user,
// event name, timestamp and insert_id) are dropped where trails merge:
// within one flush here (counted in the report), across flushes and
// imports by every query and by compaction — no app-wide set of insert
// ids is kept.
//
// It returns an *ImportError when more than opt.MaxErrors rows are bad, a
// wrapped ctx.Err() when cancelled, and other errors for I/O failures; in
// every error case the store is unchanged.
func (s *Store) Import(ctx context.Context, appName string, srcs []Source, opt ImportOptions) (*ImportReport, error) {
	start := time.Now()
	if opt.Kind == 0 {
		opt.Kind = KindEvents
	}
	if opt.FlushRows <= 0 {
		opt.FlushRows = 8 << 20
	}
	if opt.Memory <= 0 {
		opt.Memory = s.cfg.WriteMemory
	}
	var personOps []identity.Op
	if opt.Persons != nil {
		switch {
		case opt.Kind == KindUsers:
			return nil, errPersonsUsers
		case opt.AnonymousID != "":
			return nil, errors.New("import: an anonymous-id column and a persons file: the persons file alone defines the id graph (docs/identity.md §4)")
		}
		var err error
		if personOps, err = personsOps(ctx, opt.Persons); err != nil {
			return nil, fmt.Errorf("import into app %q: %w", appName, err)
		}
	}
	a, err := s.app(appName, true)
	if err != nil {
		return nil, err
	}
	t, err := a.beginWrite()
	if err != nil {
		return nil, err
	}
	defer t.end()
	base := t.base

	props := base.EventProps
	if opt.Kind == KindUsers {
		props = base.UserProps
	}
	live := a.live.Load()
	if live != nil {
		props = live.props(opt.Kind) // the app's schema includes the live layer's
	}
	schema, err := loadSchema(props)
	if err != nil {
		return nil, err
	}
	next := base.clone()
	im := newImporter(t, t.outputGen(), base.Shards, schema, func() int64 {
		seq := a.allocSeq(base.NextSeq)
		next.NextSeq = max(next.NextSeq, seq+1)
		return seq
	}, opt)
	if opt.Kind == KindEvents {
		im.expireBefore, _ = expiredBefore(base, s.now())
	}
	rep := &ImportReport{App: appName, Kind: opt.Kind}
	defer func() { rep.Elapsed = time.Since(start) }()
	written, err := im.run(ctx, srcs, rep)
	if err != nil {
		return rep, err
	}
	if rep.Rejected > int64(opt.MaxErrors) {
		return rep, &ImportError{Report: rep, Max: opt.MaxErrors}
	}
	rep.Duplicates, rep.Expired = im.dups, im.expired
	next.Generation++
	for i := range written {
		// Published after every request the base has: clean of them.
		// (A request still only in the live layer is not: its erased ids'
		// rows of this import are hidden with the rest.)
		written[i].DelSeq = lastDeletion(next.Deletions)
	}
	next.Segments = append(next.Segments, written...)
	sortSegments(next.Segments)
	props = im.schema.Props()
	if live != nil {
		if props, err = live.mergeProps(opt.Kind, props); err != nil {
			return rep, fmt.Errorf("import into app %q: %w", appName, err)
		}
	}
	if opt.Kind == KindUsers {
		next.UserProps = props
	} else {
		next.EventProps = props
	}
	ops := im.ops
	if opt.Persons != nil {
		ops = personOps
	}
	if err := a.ident.applyChunked(ops); err != nil {
		return rep, fmt.Errorf("import into app %q: identity operations: %w", appName, err)
	}
	rep.IdentityOps = int64(len(ops))
	if err := t.publish(next); err != nil {
		return rep, fmt.Errorf("import into app %q: %w", appName, err)
	}
	rep.Applied = rep.Read - rep.Rejected - rep.Duplicates - rep.Expired
	rep.Segments = len(written)
	for _, w := range written {
		rep.Bytes += w.Bytes
	}
	s.log.Debug("import published", "app", appName, "kind", opt.Kind, "rows", rep.Applied,
		"rejected", rep.Rejected, "duplicates", rep.Duplicates, "segments", rep.Segments,
		"bytes", rep.Bytes, "generation", next.Generation, "elapsed", time.Since(start))
	return rep, nil
}

func loadSchema(props []event.PropType) (*event.Schema, error) {
	s := event.NewSchema()
	for _, p := range props {
		if err := s.Declare(p.Name, p.Type); err != nil {
			return nil, fmt.Errorf("catalog property %q: %w", p.Name, err)
		}
	}
	return s, nil
}

// importer accumulates rows per shard and writes segments. Its shard
// buffers come in two generations: while one is being written by a
// background flush, rows go into the other.
type importer struct {
	sink   segSink
	gen    uint64 // the catalog generation its segments are written for
	opt    ImportOptions
	schema *event.Schema
	seqs   func() int64 // allocates the arrival rank of one flush's segments
	prefix string       // before its segments' names (segmentName)
	// ops are the identity operations of the rows buffered so far, in
	// file order (applied when the import publishes); rowOps those of the
	// row being added.
	ops, rowOps []identity.Op
	// trusted: rows were validated before (the live layer's, checked by
	// Ingest before they were logged): add skips the limits' checks.
	trusted bool
	// expireBefore: events rows before it (UTC µs) are past the app's
	// retention and skipped, counted in expired; math.MinInt64 for none.
	expireBefore int64
	expired      int64
	shards       []*shardBuf // the generation being filled
	spare        []*shardBuf // the other generation (being written by flight, if any), or nil
	flight       *flushRun   // the background flush in progress, or nil

	eventDict map[string]uint32
	eventName []string
	propIdx   map[string]int // property name → index into props
	props     []propInfo
	slots     []int // per position in a row's Props: the props index seen there last
	buffered  int

	cb colScratch // addBatch's per-batch state

	builders []*builder // one per flush worker, used by the background flush only

	expect  int64 // rows the sources hold, 0 if unknown (event.BatchReader.Rows)
	flushed int64 // rows handed to flushes
	flushes int   // flushes started
	last    bool  // the input has ended: the next flush is the import's last
	dups    int64 // duplicate events dropped by finished flushes

	widenings int // schema.Widenings() the buffers are typed for

	dictBytes int64 // estimate of the dictionaries' strings and maps (eventCode, propInfo.code)
	memCheck  int   // buffered rows at which full next measures the buffers
	rowBytes  int64 // measured memory of a buffered row, bytes (0: not yet)
}

// memCheckRows is how many rows full lets pass between two measurements
// of the buffers' memory.
const memCheckRows = 16 << 10

// full reports whether the buffered rows call for a flush: FlushRows of
// them, or buffers and dictionaries over a fifth (genShare) of the import's memory
// (ImportOptions.Memory), measured every memCheckRows rows.
func (im *importer) full() bool {
	if im.buffered >= im.opt.FlushRows {
		return true
	}
	if im.buffered < im.memCheck || im.opt.Memory <= 0 {
		return false
	}
	im.memCheck = im.buffered + memCheckRows
	b := im.bytes()
	if im.rowBytes == 0 && im.buffered > 0 {
		// The first measurement: size the buffers for what the memory
		// holds at this row's size, before they grow by doubling.
		im.rowBytes = max(b/int64(im.buffered), 16)
		im.reserve(im.flushed)
	}
	return b >= im.opt.Memory/genShare
}

// genShare is the part of an import's memory one generation of shard
// buffers may take: two generations are held while one is written, with
// their slack (capacities up to twice the lengths counted), the
// dictionaries, the builders' sorted copies and the writers' blocks and
// encoders. A fifth keeps a 1B-event `spur gen` under 600 MiB with the
// default 512 MiB (a quarter peaked at 655 MiB).
const genShare = 5

// bytes returns the memory of the rows buffered in the generation being
// filled and of the dictionaries, bytes.
func (im *importer) bytes() int64 {
	n := im.dictBytes
	for i := range im.props {
		n += im.props[i].bytes
	}
	for _, sb := range im.shards {
		n += sb.bytes()
	}
	return n
}

// dictEntryBytes is the estimated memory of a dictionary entry beside
// its string's bytes: the map slot and the strings slice's header.
const dictEntryBytes = 64

// resetDicts starts new string dictionaries (event names and every string
// property's) for the next generation of buffers: the flush of the
// previous generation reads its own snapshot (dictSnapshot), so an
// import's dictionaries hold only the strings of the rows buffered, not
// every distinct string of the input (a unique insert id per event would
// otherwise grow them with the import).
func (im *importer) resetDicts() {
	im.eventDict, im.eventName = map[string]uint32{}, nil
	for i := range im.props {
		p := &im.props[i]
		if p.dict != nil {
			p.dict, p.strs, p.hasLast, p.bytes = map[string]uint32{}, nil, false, 0
		}
	}
	im.dictBytes = 0
	cs := &im.cb
	cs.evDict, cs.haveName = nil, false
	for i := range cs.propDicts {
		cs.propDicts[i].dict = nil
	}
}

// expectedRows returns the number of rows of srcs if every source knows
// it (event.BatchReader), else 0.
func expectedRows(srcs []Source) int64 {
	var n int64
	for _, src := range srcs {
		cr, ok := src.(event.BatchReader)
		if !ok {
			return 0
		}
		n += max(cr.Rows(), 0)
	}
	return n
}

// defaultRowBytes is the memory of a buffered row assumed until the first
// rows are measured (full), bytes.
const defaultRowBytes = 64

// genRows returns how many rows a generation of shard buffers holds in a
// fifth (genShare) of the import's memory, at the measured (or assumed) bytes per
// row.
func (im *importer) genRows() int64 {
	if im.opt.Memory <= 0 {
		return int64(im.opt.FlushRows)
	}
	rb := im.rowBytes
	if rb == 0 {
		rb = defaultRowBytes
	}
	return max(im.opt.Memory/genShare/rb, memCheckRows)
}

// reserve sizes the shard buffers being filled for the rows expected
// after the first done rows, up to a flush's worth: an eighth more than
// an even share per shard. It does nothing when the sources do not know
// their size.
func (im *importer) reserve(done int64) {
	rows := min(im.expect-done, int64(im.opt.FlushRows), im.genRows())
	if rows <= 0 {
		return
	}
	per := int(rows/int64(len(im.shards))*9/8) + 1024
	for _, sb := range im.shards {
		sb.reserve(per)
	}
}

type propInfo struct {
	name  string
	typ   event.Type
	dict  map[string]uint32
	strs  []string
	bytes int64 // estimate of dict and strs
	// last string coded: consecutive equal values skip the map
	lastStr  string
	lastCode uint32
	hasLast  bool
}

// newImporter returns an importer writing segments of an app with shards
// shards into sink for catalog generation gen, coercing rows to schema
// (which it updates) and taking each flush's arrival rank from seqs.
func newImporter(sink segSink, gen uint64, shards int, schema *event.Schema, seqs func() int64, opt ImportOptions) *importer {
	im := &importer{
		sink:      sink,
		gen:       gen,
		opt:       opt,
		schema:    schema,
		seqs:      seqs,
		eventDict: map[string]uint32{},
		propIdx:   map[string]int{},

		expireBefore: math.MinInt64,
	}
	im.shards = make([]*shardBuf, shards)
	for i := range im.shards {
		im.shards[i] = newShardBuf()
	}
	return im
}

func (im *importer) run(ctx context.Context, srcs []Source, rep *ImportReport) (written []SegmentRef, err error) {
	im.expect = expectedRows(srcs)
	im.reserve(0)
	rctx, stop := context.WithCancel(ctx)
	batches, free := readAhead(rctx, srcs)
	defer func() {
		stop()
		for range batches { // let the read-ahead goroutine finish
		}
		refs, ferr := im.wait() // a background flush still writing
		written = append(written, refs...)
		if err == nil {
			err = ferr
		}
	}()
	// flush starts writing the buffered rows (after the previous flush has
	// finished) unless the import is already known to abort.
	flush := func() error {
		if rep.Rejected > int64(im.opt.MaxErrors) {
			return nil
		}
		refs, err := im.flush()
		written = append(written, refs...)
		return err
	}
	for b := range batches {
		if b.cols != nil && b.cols.Rows > 0 {
			before := rep.Read
			if err := im.addBatch(b.cols, rep); err != nil {
				return written, err
			}
			if before>>16 != rep.Read>>16 {
				if im.opt.Progress != nil {
					im.opt.Progress(rep.Read)
				}
				if err := ctx.Err(); err != nil {
					return written, fmt.Errorf("import cancelled: %w", err)
				}
			}
			if im.full() {
				if err := flush(); err != nil {
					return written, err
				}
			}
		}
		for i := range b.evs {
			rep.Read++
			if rep.Read&0xffff == 0 {
				if im.opt.Progress != nil {
					im.opt.Progress(rep.Read)
				}
				if err := ctx.Err(); err != nil {
					return written, fmt.Errorf("import cancelled: %w", err)
				}
			}
			err := error(b.errs[i])
			if b.errs[i] == nil {
				err = im.add(&b.evs[i], rep)
			}
			if err != nil {
				if !rejected(err, rep) {
					return written, err
				}
				continue
			}
			if im.full() {
				if err := flush(); err != nil {
					return written, err
				}
			}
		}
		if b.fatal != nil && b.fatal != io.EOF {
			return written, b.fatal
		}
		select {
		case free <- b:
		default:
		}
	}
	if err := ctx.Err(); err != nil {
		return written, fmt.Errorf("import cancelled: %w", err)
	}
	if im.opt.Progress != nil {
		im.opt.Progress(rep.Read)
	}
	im.last = true
	if err := flush(); err != nil {
		return written, err
	}
	refs, err := im.wait()
	return append(written, refs...), err
}

// rejected counts err in rep if it is an *event.RowError (a bad row) and
// reports whether it was; any other error is fatal.
func rejected(err error, rep *ImportReport) bool {
	var re *event.RowError
	if !errors.As(err, &re) {
		return false
	}
	rep.Rejected++
	if len(rep.Errors) < MaxReportedErrors {
		rep.Errors = append(rep.Errors, &event.RowError{Pos: re.Pos, Field: strings.Clone(re.Field), Msg: re.Msg})
	}
	return true
}

// add validates and buffers one row. It returns an *event.RowError for a
// bad row (nothing buffered).
func (im *importer) add(ev *event.Event, rep *ImportReport) error {
	name := ev.Name
	if im.opt.Kind == KindUsers {
		// A users row names no event (or SetEvent); SetOnceEvent marks a
		// set-once write (live ingestion's user_properties_once),
		// UnsetEvent, AddEvent and DeleteEvent the other operations.
		u := *ev
		switch name = SetEvent; u.Name {
		case SetOnceEvent, UnsetEvent, AddEvent, DeleteEvent:
			name, u.Name = u.Name, ""
		case SetEvent:
			u.Name = ""
		}
		if err := event.ValidateUser(&u); !im.trusted && err != nil {
			return err
		}
	} else if !im.trusted {
		if err := event.ValidateEvent(ev); err != nil {
			return err
		}
		if err := im.identityOps(ev); err != nil {
			return err
		}
		if ev.Time < im.expireBefore {
			im.expired++ // docs/storage.md §7; its identity operation goes with it
			return nil
		}
	}
	// Coerce every property before buffering anything: a bad row leaves no
	// trace, in the buffers or in the schema.
	if err := im.schema.CoerceEvent(ev); err != nil {
		return err
	}
	if im.schema.Widenings() != im.widenings {
		im.widen()
	}
	h := UserHash(ev.UserID)
	sb := im.shards[ShardOfHash(h, len(im.shards))]
	row := uint32(len(sb.times))
	sb.addUser(ev.UserID, h)
	sb.times = append(sb.times, ev.Time)
	sb.events = append(sb.events, im.eventCode(name))
	for i, p := range ev.Props {
		if p.Value.Type == event.TypeNone {
			continue
		}
		sb.addProp(im.propSlot(i, p.Name, p.Value.Type), row, p.Value, im)
	}
	if ev.InsertID != "" && im.opt.Kind == KindEvents {
		sb.addInsertID(im.propIndex(InsertIDProp, event.TypeString), row, ev.InsertID)
	}
	im.buffered++
	im.ops = append(im.ops, im.rowOps...)
	return nil
}

// identityOps sets im.rowOps to the identity operations of events row ev
// (docs/identity.md §4, in file order: the anonymous-id column's identify, then
// the operation its name carries), or returns an *event.RowError naming
// the field of an invalid one.
func (im *importer) identityOps(ev *event.Event) error {
	im.rowOps = im.rowOps[:0]
	// Most rows carry no operation: their properties are not read. With
	// a persons file, operation rows are plain events.
	if im.opt.AnonymousID == "" && !identityEvent(ev.Name) || im.opt.Persons != nil || !ProcessesPersons(ev) {
		return nil
	}
	if col := im.opt.AnonymousID; col != "" {
		if a, ok := stringProp(ev, col); ok {
			op := identity.Op{Kind: identity.Identify, T: ev.UserID, O: a, Time: ev.Time}
			if err := op.Validate(); err != nil {
				return &event.RowError{Pos: ev.Pos, Field: col, Msg: err.Error()}
			}
			im.rowOps = append(im.rowOps, op)
		}
	}
	if op, ok := OpOfEvent(ev); ok {
		if err := op.Validate(); err != nil {
			field := aliasProp
			if op.Kind == identity.Identify {
				field = anonIDProp
			}
			return &event.RowError{Pos: ev.Pos, Field: field, Msg: err.Error()}
		}
		im.rowOps = append(im.rowOps, op)
	}
	return nil
}

// identityEvent reports whether events named name may carry an identity
// operation (OpOfEvent).
func identityEvent(name string) bool {
	return name == IdentifyEvent || name == CreateAliasEvent || name == MergeEvent
}

// colScratch is addBatch's state, reused from batch to batch.
type colScratch struct {
	slow    []bool   // per row: buffer it through add, as an event.Event
	shard   []int32  // per row: the shard it was buffered in by addBatch, or -1
	row     []uint32 // per row: its row in that shard's buffer
	cols    []*event.Column
	conv    []event.Column // per property column: its values coerced to the schema type
	byShard []int32        // rows buffered by addBatch, grouped by shard (groupByShard)
	bounds  []int32        // per shard: where its rows start in byShard; one more at the end
	fill    []int32
	ev      event.Event // a slow row

	evDict   *event.Dict // event-name dictionary of evCodes
	evCodes  []int32     // per entry of evDict: 0 unknown, -1 invalid name, else event code + 1
	lastName string      // the last event name coded without a dictionary
	lastCode uint32
	haveName bool

	propDicts []dictCodes // per importer property
}

// dictCodes maps the entries of a batch's string dictionary to the codes
// of an importer property's dictionary.
type dictCodes struct {
	dict  *event.Dict
	codes []uint32 // per entry: 0 unknown, else code + 1
}

// addBatch validates and buffers the rows of a column batch; the result is
// as if add had been called on every good row of b in order (and every bad
// row counted by rejected): the same rows are buffered, rejected (with the
// same errors) and dropped as duplicates, and the schema learns the same
// properties. Columns are handled column by column: coercion to the schema
// once per column, user and event names once per run or dictionary entry,
// properties scattered into the shard buffers in one pass per column. A
// row that needs more than that (a value that does not coerce, a column set
// that fails validation) goes through add as an event.Event. It returns a
// non-row error (loading the app's insert ids).
func (im *importer) addBatch(b *event.Batch, rep *ImportReport) error {
	n := b.Rows
	cs := &im.cb
	cs.slow = resize(cs.slow, n)
	clear(cs.slow)
	cs.shard = resize(cs.shard, n)
	cs.row = resize(cs.row, n)
	users := im.opt.Kind == KindUsers
	// Rows that would fail validation as a whole: a users import of an
	// events file (or the reverse), or invalid or repeated property names.
	// With an anonymous-id column, every row's identity operation is read
	// on the row path.
	allSlow := users != (b.Event == nil) || !validColumnNames(b.Props) || im.opt.AnonymousID != ""
	if len(cs.conv) < len(b.Props) {
		cs.conv = make([]event.Column, len(b.Props))
	}
	cs.cols = cs.cols[:0]
	for k, c := range b.Props {
		t, known := im.schema.Type(c.Name)
		if known && t == event.TypeInt && c.Type == event.TypeFloat && !allSlow && hasFraction(c, b.Errs) {
			// A non-integer number widens the int property (docs/analytics.md §1).
			im.schema.WidenToFloat(c.Name)
			im.widen()
			t = event.TypeFloat
		}
		if known && t != c.Type && !allSlow {
			// As Schema.CoerceEvent does (UTC); rows that do not coerce
			// take the row path, which rejects them with the right error.
			c = c.ConvertTo(&cs.conv[k], t, nil, func(i int) bool { return b.Errs[i] != nil }, cs.slow)
		}
		cs.cols = append(cs.cols, c)
	}

	var setCode uint32
	if users {
		setCode = im.eventCode(SetEvent)
	}
	nshards := len(im.shards)
	var (
		lastUser string // the user of the previous good row
		haveUser bool
		h        uint64    // its hash
		s        int32     // its shard
		sb       *shardBuf // its shard's buffer
		uidx     uint32    // its index in sb, if known
		known    bool
	)
	for i := range n {
		cs.shard[i] = -1
		if re := b.Errs[i]; re != nil {
			rejected(re, rep)
			continue
		}
		if allSlow || cs.slow[i] {
			if err := im.addSlow(b, i, rep); err != nil {
				return err
			}
			continue
		}
		if u := b.User.Str(i); !haveUser || u != lastUser {
			if event.ValidateUserID(u) != nil {
				if err := im.addSlow(b, i, rep); err != nil {
					return err
				}
				continue
			}
			h = UserHash(u)
			s = int32(ShardOfHash(h, nshards))
			sb = im.shards[s]
			lastUser, haveUser, known = u, true, false
		}
		code := setCode
		if !users {
			var ok bool
			if code, ok = cs.eventCode(b.Event, i, im); !ok {
				if err := im.addSlow(b, i, rep); err != nil {
					return err
				}
				continue
			}
		}
		if b.Time[i] < im.expireBefore {
			im.expired++ // as add
			continue
		}
		id := ""
		if !users && b.InsertID != nil && !b.InsertID.Null[i] {
			id = b.InsertID.Str(i)
		}
		if !known { // the user's first buffered row: a user has ≥ 1 row
			uidx, known = sb.userIndex(lastUser, h), true
		}
		row := uint32(len(sb.times))
		sb.rowUser = append(sb.rowUser, uidx)
		sb.times = append(sb.times, b.Time[i])
		sb.events = append(sb.events, code)
		if id != "" {
			sb.addInsertID(im.propIndex(InsertIDProp, event.TypeString), row, id)
		}
		cs.shard[i], cs.row[i] = s, row
		im.buffered++
	}
	rep.Read += int64(n)
	cs.groupByShard(len(im.shards))
	for _, c := range cs.cols {
		if err := im.scatter(c); err != nil {
			return err
		}
	}
	return nil
}

// addSlow buffers good row i of b through add, counting it if rejected.
func (im *importer) addSlow(b *event.Batch, i int, rep *ImportReport) error {
	b.Row(&im.cb.ev, i)
	if err := im.add(&im.cb.ev, rep); err != nil && !rejected(err, rep) {
		return err
	}
	return nil
}

// hasFraction reports whether float column c holds a value an int cannot
// (a fraction, or beyond int64) on a row without an error.
func hasFraction(c *event.Column, errs []*event.RowError) bool {
	for i, v := range c.Floats {
		if !c.Null[i] && errs[i] == nil && (v != math.Trunc(v) || v < -1<<63 || v >= 1<<63) {
			return true
		}
	}
	return false
}

// widen converts the buffered values of the properties the schema has
// widened from int to float (docs/analytics.md §1) since the buffers were last typed.
// The generation being flushed keeps its types: its segments hold ints,
// which readers of a float property convert.
func (im *importer) widen() {
	im.widenings = im.schema.Widenings()
	for pi := range im.props {
		p := &im.props[pi]
		if t, _ := im.schema.Type(p.name); p.typ != event.TypeInt || t != event.TypeFloat {
			continue
		}
		p.typ = event.TypeFloat
		for _, sb := range im.shards {
			if pi < len(sb.props) {
				sp := &sb.props[pi]
				for _, v := range sp.ints {
					sp.floats = append(sp.floats, float64(v))
				}
				sp.ints = sp.ints[:0]
			}
		}
	}
}

// validColumnNames reports whether every column name is a valid property
// name and no name is repeated (what event.ValidateEvent checks of a row's
// properties).
func validColumnNames(cols []*event.Column) bool {
	for k, c := range cols {
		if event.ValidatePropName(c.Name) != nil {
			return false
		}
		for _, d := range cols[:k] {
			if d.Name == c.Name {
				return false
			}
		}
	}
	return true
}

// eventCode returns the event code of row i's name (col a string column),
// false if the name is invalid (event.ValidateEventName).
func (cs *colScratch) eventCode(col *event.Column, i int, im *importer) (uint32, bool) {
	if d := col.Dict; d != nil {
		if cs.evDict != d {
			cs.evDict = d
			cs.evCodes = resize(cs.evCodes, len(d.Strs))
			clear(cs.evCodes)
		}
		c := col.Codes[i]
		x := cs.evCodes[c]
		if x == 0 {
			x = -1
			if name := d.Strs[c]; event.ValidateEventName(name) == nil && !identityEvent(name) {
				x = int32(im.eventCode(name)) + 1
			}
			cs.evCodes[c] = x
		}
		return uint32(x - 1), x > 0
	}
	name := col.Strs[i]
	if cs.haveName && name == cs.lastName {
		return cs.lastCode, true
	}
	if event.ValidateEventName(name) != nil || identityEvent(name) {
		return 0, false // identity events take the row path (add)
	}
	cs.lastName, cs.lastCode, cs.haveName = name, im.eventCode(name), true
	return cs.lastCode, true
}

// groupByShard lists the rows addBatch buffered, grouped by shard in
// arrival order: the rows of shard s are cs.byShard[cs.bounds[s]:cs.bounds[s+1]].
func (cs *colScratch) groupByShard(shards int) {
	cs.bounds = resize(cs.bounds, shards+1)
	clear(cs.bounds)
	for _, s := range cs.shard {
		if s >= 0 {
			cs.bounds[s+1]++
		}
	}
	for s := 1; s <= shards; s++ {
		cs.bounds[s] += cs.bounds[s-1]
	}
	cs.byShard = resize(cs.byShard, int(cs.bounds[shards]))
	fill := cs.fill[:0]
	fill = append(fill, cs.bounds[:shards]...)
	for i, s := range cs.shard {
		if s >= 0 {
			cs.byShard[fill[s]] = int32(i)
			fill[s]++
		}
	}
	cs.fill = fill
}

// scatter appends the values of property column c of the rows addBatch
// buffered (grouped by groupByShard) to their shards' buffers. The first
// such value of a property new to the schema fixes its type
// (Schema.CoerceEvent's rule).
func (im *importer) scatter(c *event.Column) error {
	cs := &im.cb
	count := 0
	for _, i := range cs.byShard {
		if !c.Null[i] {
			count++
		}
	}
	if count == 0 {
		return nil
	}
	if err := im.schema.Declare(c.Name, c.Type); err != nil {
		return fmt.Errorf("import column %q: %w", c.Name, err)
	}
	pi := im.propIndex(c.Name, c.Type)
	var dc *dictCodes
	if c.Type == event.TypeString && c.Dict != nil {
		for len(cs.propDicts) <= pi {
			cs.propDicts = append(cs.propDicts, dictCodes{})
		}
		dc = &cs.propDicts[pi]
		if dc.dict != c.Dict {
			dc.dict = c.Dict
			dc.codes = resize(dc.codes, len(c.Dict.Strs))
			clear(dc.codes)
		}
	}
	frac := float64(count) / float64(len(cs.shard))
	for s, sb := range im.shards {
		idx := cs.byShard[cs.bounds[s]:cs.bounds[s+1]]
		if len(idx) == 0 {
			continue
		}
		sp := sb.prop(pi)
		sb.sizeProp(sp, c.Type, frac)
		dense, rows, null, srows := sp.dense, sp.rows, c.Null, cs.row
		// add records row r of the next value (sparseProp.addRow).
		add := func(r uint32) {
			if len(rows) == 0 && int(r) == dense {
				dense++
			} else {
				rows = append(rows, r)
			}
		}
		switch {
		case c.Type == event.TypeFloat:
			vals, out := c.Floats, sp.floats
			for _, i := range idx {
				if !null[i] {
					add(srows[i])
					out = append(out, vals[i])
				}
			}
			sp.floats = out
		case dc != nil:
			p, d, codes, out := &im.props[pi], c.Dict, c.Codes, sp.codes
			for _, i := range idx {
				if !null[i] {
					x := dc.codes[codes[i]]
					if x == 0 {
						x = p.code(d.Strs[codes[i]]) + 1
						dc.codes[codes[i]] = x
					}
					add(srows[i])
					out = append(out, x-1)
				}
			}
			sp.codes = out
		case c.Type == event.TypeString:
			p, strs, out := &im.props[pi], c.Strs, sp.codes
			for _, i := range idx {
				if !null[i] {
					add(srows[i])
					out = append(out, p.code(strs[i]))
				}
			}
			sp.codes = out
		default:
			vals, out := c.Ints, sp.ints
			for _, i := range idx {
				if !null[i] {
					add(srows[i])
					out = append(out, vals[i])
				}
			}
			sp.ints = out
		}
		sp.dense, sp.rows = dense, rows
	}
	return nil
}

// resize returns s with length n, reusing its capacity.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (im *importer) eventCode(name string) uint32 {
	if c, ok := im.eventDict[name]; ok {
		return c
	}
	c := uint32(len(im.eventName))
	name = strings.Clone(name)
	im.eventDict[name] = c
	im.eventName = append(im.eventName, name)
	im.dictBytes += int64(len(name)) + dictEntryBytes
	return c
}

// propSlot is propIndex with a cache by position in the row: rows whose
// properties come in a stable order do no map lookup.
func (im *importer) propSlot(pos int, name string, t event.Type) int {
	for len(im.slots) <= pos {
		im.slots = append(im.slots, -1)
	}
	if i := im.slots[pos]; i >= 0 && im.props[i].name == name {
		return i
	}
	i := im.propIndex(name, t)
	im.slots[pos] = i
	return i
}

func (im *importer) propIndex(name string, t event.Type) int {
	if i, ok := im.propIdx[name]; ok {
		return i
	}
	name = strings.Clone(name)
	im.propIdx[name] = len(im.props)
	im.props = append(im.props, propInfo{name: name, typ: t, dict: map[string]uint32{}})
	return len(im.props) - 1
}

func (p *propInfo) code(s string) uint32 {
	if p.hasLast && s == p.lastStr {
		return p.lastCode
	}
	c, ok := p.dict[s]
	if !ok {
		c = uint32(len(p.strs))
		s = strings.Clone(s)
		p.dict[s] = c
		p.strs = append(p.strs, s)
		p.bytes += int64(len(s)) + dictEntryBytes
	}
	p.lastStr, p.lastCode, p.hasLast = p.strs[c], c, true
	return c
}

// flushRun is a flush writing in the background: refs and err are set
// when done is closed.
type flushRun struct {
	done chan struct{}
	refs []SegmentRef
	dups int64 // duplicate events dropped (builder.dedup)
	err  error
}

// flush hands every shard's buffered rows to a background flush, which
// writes them as one segment per shard (in parallel; not yet published),
// and continues with the spare generation of shard buffers. It first waits
// for the previous flush, whose segments and error it returns, so at most
// two generations of buffered rows exist at a time. With
// ImportOptions.CompactAfter, every flush but the lone flush of an import
// (the one at the end of the input, im.last, with none before) writes with
// segment.WriterOptions.FastZstd.
func (im *importer) flush() ([]SegmentRef, error) {
	refs, err := im.wait()
	if err != nil {
		return refs, err
	}
	type job struct {
		shard int
		seq   int64
	}
	var jobs []job
	im.flushed += int64(im.buffered)
	for i, sb := range im.shards {
		if len(sb.times) > 0 {
			jobs = append(jobs, job{i, im.seqs()})
		}
	}
	if len(jobs) == 0 {
		return refs, nil
	}
	im.flushes++
	fast := im.prefix == livePrefix || (im.opt.CompactAfter && !(im.last && im.flushes == 1))
	shards, dicts := im.shards, im.dictSnapshot()
	im.resetDicts()
	im.memCheck = 0
	if im.spare == nil {
		im.spare = make([]*shardBuf, len(shards))
		for i := range im.spare {
			im.spare[i] = newShardBuf()
		}
	}
	im.shards, im.spare = im.spare, shards
	im.buffered = 0
	im.reserve(im.flushed)
	// A shard buffer keeps room for twice an even share of a generation.
	keep := 2*int(im.genRows()/int64(len(shards))) + 4096
	run := &flushRun{done: make(chan struct{})}
	im.flight = run
	go func() {
		defer close(run.done)
		out := make([]SegmentRef, len(jobs))
		errs := make([]error, len(jobs))
		var wg sync.WaitGroup
		next := make(chan int)
		workers := min(runtime.GOMAXPROCS(0), len(jobs))
		for len(im.builders) < workers {
			im.builders = append(im.builders, &builder{})
		}
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(bt *builder) {
				defer wg.Done()
				for j := range next {
					out[j], errs[j] = im.writeShard(shards[jobs[j].shard].build(dicts, bt), jobs[j].shard, jobs[j].seq, fast)
					shards[jobs[j].shard].reset(keep)
				}
			}(im.builders[w])
		}
		for j := range jobs {
			next <- j
		}
		close(next)
		wg.Wait()
		for _, bt := range im.builders[:workers] {
			run.dups += bt.dropped
			bt.dropped = 0
		}
		for j := range jobs {
			if errs[j] == nil {
				run.refs = append(run.refs, out[j])
			}
		}
		run.err = errors.Join(errs...)
	}()
	return refs, nil
}

// wait waits for the background flush, if any, and returns its segments
// (those written, also on error) and error.
func (im *importer) wait() ([]SegmentRef, error) {
	run := im.flight
	if run == nil {
		return nil, nil
	}
	<-run.done
	im.flight = nil
	im.dups += run.dups
	return run.refs, run.err
}

// flushDicts is what a background flush reads of the importer's
// dictionaries: the prefixes that exist when the flush starts. The
// importer only appends to these slices, so the prefixes stay valid while
// it goes on.
type flushDicts struct {
	eventNames []string
	props      []propSnap
	insertID   int // the property index of InsertIDProp, -1 if none
}

type propSnap struct {
	name string
	typ  event.Type
	strs []string
}

func (im *importer) dictSnapshot() *flushDicts {
	d := &flushDicts{eventNames: im.eventName[:len(im.eventName):len(im.eventName)], props: make([]propSnap, len(im.props)), insertID: -1}
	if i, ok := im.propIdx[InsertIDProp]; ok {
		d.insertID = i
	}
	for i, p := range im.props {
		d.props[i] = propSnap{name: p.name, typ: p.typ, strs: p.strs[:len(p.strs):len(p.strs)]}
	}
	return d
}

// segmentName names the segment of a flush of shard with arrival rank seq:
// a segment file's name, after im.prefix (the live layer's, whose
// segments stay in memory).
func (im *importer) segmentName(shard int, seq int64) string {
	return im.prefix + segmentName(im.opt.Kind, shard, seq, seq, im.gen, 0)
}

// writeShard writes one shard's flushed rows as a segment, with zstd's
// fastest level if fast (see flush).
func (im *importer) writeShard(in *segment.Input, shard int, seq int64, fast bool) (SegmentRef, error) {
	ref := SegmentRef{File: im.segmentName(shard, seq), Kind: im.opt.Kind, Shard: shard,
		SeqMin: seq, SeqMax: seq, Generation: im.gen}
	opt := segment.WriterOptions{BlockRows: im.opt.BlockRows, Props: in.PropSpecs(), FastZstd: fast}
	return writeSegment(im.sink, len(im.shards), ref, opt, func(w *segment.Writer) error { return w.AppendInput(in) })
}
