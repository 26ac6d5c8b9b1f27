package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
)

// InsertIDProp is the reserved property column that stores an event's
// insert_id (spec §1 deduplication key).
const InsertIDProp = "$insert_id"

// SetEvent is the event name of the rows of users segments.
const SetEvent = "$set"

// Source yields input rows; ingest.Reader satisfies it. Next fills ev
// (reused, valid until the next call), returns io.EOF at the end, an
// *event.RowError for a bad row (the source stays usable) and any other
// error for a fatal failure.
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
	// written as segments (not yet published); default 8 Mi rows.
	FlushRows int
	// BlockRows is passed to the segment writer (rows per block); 0 = its default.
	BlockRows int
	// Progress, if set, is called about every 64 Ki rows with the number of
	// rows read so far (good and bad), from the importing goroutine.
	Progress func(rows int64)
}

// MaxReportedErrors caps ImportReport.Errors; the count in Rejected is exact.
const MaxReportedErrors = 1000

// ImportReport describes a finished or aborted import.
type ImportReport struct {
	App        string            `json:"app"`
	Kind       SegmentKind       `json:"kind"`
	Read       int64             `json:"rows_read"`        // rows read (good + bad)
	Applied    int64             `json:"rows_applied"`     // rows published (0 when aborted)
	Rejected   int64             `json:"rows_rejected"`    // bad rows
	Duplicates int64             `json:"rows_duplicate"`   // rows dropped by insert_id deduplication
	Segments   int               `json:"segments"`         // segment files published
	Bytes      int64             `json:"bytes"`            // bytes of those files
	Elapsed    time.Duration     `json:"elapsed_ns"`       // wall time
	Errors     []*event.RowError `json:"errors,omitempty"` // the first MaxReportedErrors bad rows
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
// (created if it does not exist) in one atomic manifest swap: either every
// good row is applied or none is. Rows are validated (spec §1 limits),
// their properties coerced to the app's schema (the first sighting of a
// property fixes its type), and events whose insert_id was already seen in
// the app or earlier in this import are dropped as duplicates.
//
// It returns an *ImportError when more than opt.MaxErrors rows are bad, a
// wrapped ctx.Err() when cancelled, and other errors for I/O failures; in
// every error case the store is unchanged.
func (s *Store) Import(ctx context.Context, appName string, srcs []Source, opt ImportOptions) (*ImportReport, error) {
	start := time.Now()
	if opt.Kind == "" {
		opt.Kind = KindEvents
	}
	if opt.FlushRows <= 0 {
		opt.FlushRows = 8 << 20
	}
	a, err := s.app(appName, true)
	if err != nil {
		return nil, err
	}
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	unlock, err := a.lockDir()
	if err != nil {
		return nil, err
	}
	defer unlock()
	base := a.Snapshot().Manifest
	if err := a.removeOrphans(base); err != nil {
		return nil, err
	}

	im := newImporter(a, base, opt)
	rep := &ImportReport{App: appName, Kind: opt.Kind}
	defer func() { rep.Elapsed = time.Since(start) }()
	written, err := im.run(ctx, srcs, rep)
	cleanup := func() {
		for _, ref := range written {
			os.Remove(filepath.Join(a.dir, segDir, ref.File))
		}
	}
	if err != nil {
		cleanup()
		return rep, err
	}
	if rep.Rejected > int64(opt.MaxErrors) {
		cleanup()
		return rep, &ImportError{Report: rep, Max: opt.MaxErrors}
	}
	next := *base
	next.Generation++
	next.NextSeq = im.seq
	next.Segments = append(slices.Clone(base.Segments), written...)
	if opt.Kind == KindUsers {
		next.UserProps = im.schema.Props()
	} else {
		next.EventProps = im.schema.Props()
	}
	if err := writeManifest(a.dir, &next); err != nil {
		cleanup()
		return rep, err
	}
	a.snap.Store(&Snapshot{app: a, Manifest: &next})
	rep.Applied = rep.Read - rep.Rejected - rep.Duplicates
	rep.Segments = len(written)
	for _, w := range written {
		rep.Bytes += w.Bytes
	}
	s.log.Debug("import published", "app", appName, "kind", opt.Kind, "rows", rep.Applied,
		"rejected", rep.Rejected, "duplicates", rep.Duplicates, "segments", rep.Segments,
		"bytes", rep.Bytes, "generation", next.Generation, "elapsed", time.Since(start))
	return rep, nil
}

// lockDir takes the app's cross-process write lock (flock on DIR/apps/APP/LOCK).
func (a *App) lockDir() (func(), error) {
	if err := os.MkdirAll(filepath.Join(a.dir, segDir), 0o755); err != nil {
		return nil, fmt.Errorf("create app directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(a.dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open app lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("app %q is being written by another process (lock %s): %w", a.name, f.Name(), err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// removeOrphans deletes segment files that no manifest references: the
// leftovers of an import that crashed before publishing.
func (a *App) removeOrphans(m *Manifest) error {
	ents, err := os.ReadDir(filepath.Join(a.dir, segDir))
	if err != nil {
		return fmt.Errorf("list segments: %w", err)
	}
	live := make(map[string]bool, len(m.Segments))
	for _, s := range m.Segments {
		live[s.File] = true
	}
	for _, e := range ents {
		if !live[e.Name()] {
			if err := os.Remove(filepath.Join(a.dir, segDir, e.Name())); err != nil {
				return fmt.Errorf("remove orphan segment: %w", err)
			}
			a.store.log.Warn("removed unpublished segment left by an interrupted import", "app", a.name, "file", e.Name())
		}
	}
	return nil
}

func loadSchema(props []event.PropType) (*event.Schema, error) {
	s := event.NewSchema()
	for _, p := range props {
		if err := s.Declare(p.Name, p.Type); err != nil {
			return nil, fmt.Errorf("manifest property %q: %w", p.Name, err)
		}
	}
	return s, nil
}

// importer accumulates rows per shard and writes segments.
type importer struct {
	app    *App
	base   *Manifest
	opt    ImportOptions
	schema *event.Schema
	seq    int64
	shards []*shardBuf

	eventDict map[string]uint32
	eventName []string
	propIdx   map[string]int // property name → index into props
	props     []propInfo
	slots     []int // per position in a row's Props: the props index seen there last
	buffered  int

	insertIDs   map[string]struct{} // seen insert ids (nil until the first one)
	existingIDs bool                // whether existing segments' insert ids were loaded
}

type propInfo struct {
	name string
	typ  event.Type
	dict map[string]uint32
	strs []string
	// last string coded: consecutive equal values skip the map
	lastStr  string
	lastCode uint32
	hasLast  bool
}

func newImporter(a *App, base *Manifest, opt ImportOptions) *importer {
	im := &importer{
		app:       a,
		base:      base,
		opt:       opt,
		seq:       base.NextSeq,
		eventDict: map[string]uint32{},
		propIdx:   map[string]int{},
	}
	im.shards = make([]*shardBuf, base.Shards)
	for i := range im.shards {
		im.shards[i] = newShardBuf()
	}
	return im
}

func (im *importer) run(ctx context.Context, srcs []Source, rep *ImportReport) ([]SegmentRef, error) {
	var err error
	props := im.base.EventProps
	if im.opt.Kind == KindUsers {
		props = im.base.UserProps
	}
	if im.schema, err = loadSchema(props); err != nil {
		return nil, err
	}
	var written []SegmentRef
	rctx, stop := context.WithCancel(ctx)
	batches, free := readAhead(rctx, srcs)
	defer func() {
		stop()
		for range batches { // let the read-ahead goroutine finish
		}
	}()
	for b := range batches {
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
				var re *event.RowError
				if !errors.As(err, &re) {
					return written, err
				}
				rep.Rejected++
				if len(rep.Errors) < MaxReportedErrors {
					rep.Errors = append(rep.Errors, &event.RowError{Pos: re.Pos, Field: strings.Clone(re.Field), Msg: re.Msg})
				}
				continue
			}
			if im.buffered >= im.opt.FlushRows && rep.Rejected <= int64(im.opt.MaxErrors) {
				refs, err := im.flush()
				written = append(written, refs...)
				if err != nil {
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
	if rep.Rejected > int64(im.opt.MaxErrors) {
		return written, nil
	}
	refs, err := im.flush()
	return append(written, refs...), err
}

// add validates and buffers one row. It returns an *event.RowError for a
// bad row (nothing buffered).
func (im *importer) add(ev *event.Event, rep *ImportReport) error {
	name := ev.Name
	if im.opt.Kind == KindUsers {
		name = SetEvent
		if err := event.ValidateUser(ev); err != nil {
			return err
		}
	} else if err := event.ValidateEvent(ev); err != nil {
		return err
	}
	// Coerce every property before buffering anything: a bad row leaves no
	// trace, in the buffers or in the schema.
	if err := im.schema.CoerceEvent(ev); err != nil {
		return err
	}
	if ev.InsertID != "" && im.opt.Kind == KindEvents {
		if im.insertIDs == nil {
			im.insertIDs = map[string]struct{}{}
		}
		if !im.existingIDs {
			im.existingIDs = true
			if err := im.loadExistingInsertIDs(); err != nil {
				return err
			}
		}
		if _, dup := im.insertIDs[ev.InsertID]; dup {
			rep.Duplicates++
			return nil
		}
		im.insertIDs[strings.Clone(ev.InsertID)] = struct{}{}
	}

	h := xxhash.Sum64String(ev.UserID)
	sb := im.shards[h&uint64(len(im.shards)-1)]
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
		sb.addProp(im.propIndex(InsertIDProp, event.TypeString), row, event.String(ev.InsertID), im)
	}
	im.buffered++
	return nil
}

func (im *importer) eventCode(name string) uint32 {
	if c, ok := im.eventDict[name]; ok {
		return c
	}
	c := uint32(len(im.eventName))
	name = strings.Clone(name)
	im.eventDict[name] = c
	im.eventName = append(im.eventName, name)
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
	}
	p.lastStr, p.lastCode, p.hasLast = p.strs[c], c, true
	return c
}

// loadExistingInsertIDs reads the insert_id column of every published events
// segment, so that re-imported events are recognised as duplicates.
func (im *importer) loadExistingInsertIDs() error {
	snap := im.app.Snapshot()
	for _, ref := range snap.Segments(KindEvents) {
		r, err := snap.Reader(ref)
		if err != nil {
			return err
		}
		meta := r.Meta()
		col := -1
		for i, p := range meta.Props {
			if p.Name == InsertIDProp {
				col = i
			}
		}
		if col < 0 {
			continue
		}
		var blk segment.Block
		for b := range meta.Blocks {
			if err := r.ReadBlock(b, []int{col}, &blk); err != nil {
				return err
			}
			pd := &blk.Props[0]
			for row := 0; row < blk.Rows; row++ {
				if pd.Present[row>>6]&(1<<(row&63)) != 0 {
					im.insertIDs[meta.Props[col].Dict[pd.Strs[row]]] = struct{}{}
				}
			}
		}
	}
	return nil
}

// flush writes every shard's buffered rows as one segment per shard (in
// parallel) and resets the buffers. The segments are not yet published.
func (im *importer) flush() ([]SegmentRef, error) {
	type job struct {
		shard int
		seq   int64
	}
	var jobs []job
	for i, sb := range im.shards {
		if len(sb.times) > 0 {
			jobs = append(jobs, job{i, im.seq})
			im.seq++
		}
	}
	refs := make([]SegmentRef, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				refs[j], errs[j] = im.writeShard(jobs[j].shard, jobs[j].seq)
			}
		}()
	}
	for j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	for i := range im.shards {
		im.shards[i] = newShardBuf()
	}
	im.buffered = 0
	var out []SegmentRef
	for j := range jobs {
		if errs[j] == nil {
			out = append(out, refs[j])
		}
	}
	return out, errors.Join(errs...)
}

func (im *importer) writeShard(shard int, seq int64) (SegmentRef, error) {
	in := im.shards[shard].build(im)
	kind := "e"
	if im.opt.Kind == KindUsers {
		kind = "u"
	}
	file := fmt.Sprintf("%s-%04d-%08d.seg", kind, shard, seq)
	info, err := segment.Write(filepath.Join(im.app.dir, segDir, file), in, segment.WriterOptions{BlockRows: im.opt.BlockRows})
	if err != nil {
		return SegmentRef{}, fmt.Errorf("write segment %s: %w", file, err)
	}
	return SegmentRef{File: file, Kind: im.opt.Kind, Shard: shard, Seq: seq, Rows: info.Rows,
		Users: info.Users, MinTime: info.MinTime, MaxTime: info.MaxTime, Bytes: info.Bytes}, nil
}
