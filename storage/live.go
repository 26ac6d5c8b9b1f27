package storage

// The live layer (docs/ingest.md §2): events sent to the server are written to
// the app's write-ahead log (package wal, group commit, fsync before the
// acknowledgement), applied in log order to per-shard buffers (the tails,
// importers whose segments go to memory), and sealed into segments of
// the ordinary format held in memory, which every version made afterwards
// shows beside the published segments: a request's events are visible at
// once, to every query started after its acknowledgement. A background
// loop merges the in-memory segments geometrically, flushes them into
// segment files published with the log position they cover in one catalog
// swap (then the log before it is released), and compacts by tiers. See
// docs/ingest.md for an event's lifecycle.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/storage/wal"
)

// Defaults of LiveOptions (docs/ingest.md §2).
const (
	DefaultIngestMemory int64 = 512 << 20 // bytes of unflushed events
	DefaultFlushBytes   int64 = 64 << 20  // bytes of an app's live segments that start a flush
	DefaultFlushAge           = 30 * time.Second
	DefaultMaxFuture          = 24 * time.Hour
)

// livePrefix begins the names of the live layer's segments (never files).
const livePrefix = "live-"

// logDir is the write-ahead log's directory in an app's directory.
const logDir = "wal"

// sealRows is the number of buffered rows at which the background loop
// seals an app's tails without waiting for a query to.
const sealRows = 1 << 16

// liveMergeFanout is how many in-memory segments of one shard, kind and
// size tier are merged into one.
const liveMergeFanout = 4

// liveMaxSegments is how many in-memory segments one shard and kind may
// keep when no tier has liveMergeFanout consecutive ones: seals of
// different sizes (at 64 Ki rows, and at each query) interleave tiers in
// arrival order, which the tier rule alone never merges (6,817 in-memory
// segments after 5M events sent as 1,000-event requests, queries 2–4×
// slower than on the same events flushed).
const liveMaxSegments = 12

// liveMergeRoundBytes bounds the input of one round of in-memory merges,
// bytes (mergeMemory): the memory a round holds beside the live layer.
const liveMergeRoundBytes = 64 << 20

// liveTierBase is the size of the smallest tier of in-memory segments,
// bytes; each tier is liveMergeFanout times the one below.
const liveTierBase = 16 << 10

// LiveOptions configure live ingestion (Store.Ingest; docs/ingest.md §2). The
// zero value gives the defaults.
type LiveOptions struct {
	// Memory bounds the unflushed events of the store's apps, bytes
	// (--ingest-memory): buffered rows and in-memory segments. An Ingest
	// that finds its app over it stores nothing and fails with
	// ErrBackpressure. 0 means DefaultIngestMemory.
	Memory int64
	// FlushBytes starts a flush of an app once its live layer holds this
	// many bytes; 0 means DefaultFlushBytes.
	FlushBytes int64
	// FlushAge starts a flush once the oldest unflushed event of an app
	// was applied this long ago; 0 means DefaultFlushAge.
	FlushAge time.Duration
	// LogFileSize rotates write-ahead-log files at this size, bytes; 0
	// means wal.DefaultSegmentSize (64 MiB).
	LogFileSize int64
	// MaxFuture rejects events whose timestamp is later than now plus
	// this (field "timestamp"); 0 means DefaultMaxFuture, negative no
	// limit. Events older than the app's retention (Catalog.Retention)
	// are rejected the same way.
	MaxFuture time.Duration
	// Now is the clock of MaxFuture, the retention and FlushAge; nil
	// means Config.Now, else time.Now.
	Now func() time.Time
	// OnFlush, if set, is called after each flush with its duration, the
	// rows it wrote and its error (nil on success): for metrics.
	OnFlush func(d time.Duration, rows int64, err error)
	// OnCompact, if set, is called after each background compaction that
	// rewrote segments, with its duration and report.
	OnCompact func(d time.Duration, rep *CompactReport)
	// EraseWithin is how long a deletion request may stay pending before
	// the background loop completes it (Store.Erase, --erase-within); 0
	// means DefaultEraseWithin.
	EraseWithin time.Duration
	// NoIdleCompact turns off the compaction of an idle app (compactIdle:
	// once ingestion pauses and everything is flushed, every shard and
	// kind left in more than one run by flushes and tiered merges is
	// merged into one, as after an import), leaving tiered compaction
	// alone.
	NoIdleCompact bool
}

func (o LiveOptions) withDefaults() LiveOptions {
	if o.Memory <= 0 {
		o.Memory = DefaultIngestMemory
	}
	if o.FlushBytes <= 0 {
		o.FlushBytes = DefaultFlushBytes
	}
	if o.FlushAge <= 0 {
		o.FlushAge = DefaultFlushAge
	}
	if o.LogFileSize <= 0 {
		o.LogFileSize = wal.DefaultSegmentSize
	}
	if o.MaxFuture == 0 {
		o.MaxFuture = DefaultMaxFuture
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.EraseWithin <= 0 {
		o.EraseWithin = DefaultEraseWithin
	}
	return o
}

// ErrLiveOff is matched (errors.Is) by the error of an Ingest on a Store
// opened without Config.Live.
var ErrLiveOff = errors.New("live ingestion is not enabled on this store")

// Ingest stores live events of app appName (created if missing; docs/ingest.md
// §1-§3): each event is validated (docs/analytics.md §1 limits, the timestamp at most
// LiveOptions.MaxFuture ahead) and coerced to the app's schema (a
// property's first sighting fixes its type; an int property given a
// fraction widens to float), with its user property writes (users, by
// event index) coerced to the users schema; an event that does not fit,
// or whose user writes do not, is rejected whole (IngestReport.Rejected,
// naming the field: "user_id", "event", "timestamp", "properties.NAME",
// "user_properties.NAME", "user_properties_once.NAME"). The accepted
// events are written to the app's write-ahead log as one record and
// Ingest returns only once that record is durable (fsynced, grouped with
// concurrent calls) and visible: every version acquired after Ingest
// returns shows all of them, and none acquired before shows any.
//
// Ingest coerces evs and the users' Props in place; it keeps none of
// them. A request over the memory limit fails with ErrBackpressure, one
// the log cannot take for lack of space with ErrDiskFull (nothing stored
// in both cases); an app whose log is damaged refuses with an error
// matching ErrCorruption naming `spur recover`; a ctx that ends before the
// record is taken stores nothing and returns ctx.Err(). Types fixed by an
// event that is then rejected for another field stay fixed.
func (s *Store) Ingest(ctx context.Context, appName string, evs []event.Event, users []UserWrite) (*IngestReport, error) {
	return s.IngestIdentity(ctx, appName, evs, users, nil)
}

// IngestIdentity is Ingest with identity operations (docs/identity.md §2, §4):
// each of ids applies with the request, in the log record of its events,
// and is visible on the answer like them; an operation of a rejected event
// is dropped with it, and an invalid one rejects its event (field
// "anonymous_id"). Operations carried by the events themselves
// (`$identify`, `$create_alias`, `$merge_dangerously`: OpOfEvent) apply
// with Ingest too. A request of operations only (no events) is written
// as well. Errors as Ingest's.
func (s *Store) IngestIdentity(ctx context.Context, appName string, evs []event.Event, users []UserWrite, ids []IdentityWrite) (*IngestReport, error) {
	return s.IngestWith(ctx, appName, evs, users, ids, IngestOptions{})
}

// IngestWith is IngestIdentity with options: with opt.DropBadValues a
// property or user property that does not fit the app's schema is removed
// from its event (listed in IngestReport.Dropped) instead of rejecting
// the event (docs/ingest.md §6: an SDK's traffic is never lost for one
// mistyped property). It removes such properties from evs' and users'
// Props in place. Errors as Ingest's.
func (s *Store) IngestWith(ctx context.Context, appName string, evs []event.Event, users []UserWrite, ids []IdentityWrite, opt IngestOptions) (*IngestReport, error) {
	ctx, task := trace.NewTask(ctx, "ingest")
	defer task.End()
	if s.cfg.Live == nil {
		return nil, ErrLiveOff
	}
	a, err := s.app(appName, true)
	if err != nil {
		return nil, err
	}
	l, err := a.openLive()
	if err != nil {
		return nil, err
	}
	return l.ingestOps(ctx, evs, users, ids, opt)
}

// FlushLive writes app appName's live layer into segment files now,
// publishing them with the log position they cover (what the background
// loop does after LiveOptions.FlushAge or FlushBytes), and releases the
// log before it. It does nothing for an app without a live layer.
func (s *Store) FlushLive(ctx context.Context, appName string) error {
	a, err := s.App(appName)
	if err != nil {
		return err
	}
	l := a.live.Load()
	if l == nil {
		return nil
	}
	l.maint.Lock()
	defer l.maint.Unlock()
	_, err = l.flush(ctx)
	return err
}

// liveApp is one app's live layer.
type liveApp struct {
	a   *App
	opt LiveOptions
	log Log

	// schemaMu guards the schemas: Ingest coerces against them before the
	// log, the apply coerces (again, idempotently) after it.
	schemaMu   sync.Mutex
	evSchema   *event.Schema
	userSchema *event.Schema

	maint sync.Mutex // one flush or in-memory merge at a time (they replace segs)

	mu        sync.Mutex // guards the fields below; taken before App.mu
	evTail    *importer  // applied events not yet sealed
	userTail  *importer  // applied user property writes not yet sealed
	tailRows  int
	tailBytes int64     // estimate of the tails' memory
	segs      []liveSeg // sealed segments, not yet flushed
	segBytes  int64
	applied   uint64    // the last log record applied
	seenSeq   uint64    // applied as of the previous background round (maintain)
	idleAfter time.Time // compactIdle waits until then (wall clock; guarded by maint)
	oldest    time.Time // when the oldest unflushed record was applied; zero when none
	dirty     bool      // segs or the tails changed since the current version was made
	sink      memSink
	batch     liveBatch // apply's decode buffer
	uev       event.Event
	failed    error // sticky: an apply could not read a record (Ingest refuses)
	// delSeq is the number of the newest deletion request applied
	// (published or in dels): tails sealed now are clean of it.
	delSeq uint64
	// dels are the deletion requests applied from the log and not yet
	// published (flush publishes them), in order.
	dels []Deletion
	// eraseFailed is when the last background erasure failed (l.maint)
	eraseFailed time.Time
	supp        atomic.Pointer[suppressSet] // suppression's cache

	mem  atomic.Int64 // tailBytes + segBytes, for Ingest's check without the lock
	enc  sync.Pool    // record encode buffers (*[]byte)
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// openLive returns app a's live layer, opening it on first use: the log is
// opened (a torn tail of its last file cut), the records after the
// catalog's log position replayed into the tails, and the background loop
// started. It needs the store's writer role (Config.Writer): one process
// writes the log.
func (a *App) openLive() (*liveApp, error) {
	if l := a.live.Load(); l != nil {
		return l, nil
	}
	s := a.store
	a.liveOpen.Lock()
	defer a.liveOpen.Unlock()
	if l := a.live.Load(); l != nil {
		return l, nil
	}
	if a.deleted.Load() {
		return nil, fmt.Errorf("app %q: %w", a.name, ErrAppDeleted)
	}
	if s.role == nil {
		return nil, fmt.Errorf("app %q: live ingestion needs the store's writer role (storage.Config.Writer, as spur serve holds it)", a.name)
	}
	if a.published().Generation == 0 {
		// A new app: its empty catalog makes it exist for every reader
		// (Store.Apps) before its events are flushed.
		t, err := a.beginWrite()
		if err != nil {
			return nil, err
		}
		err = t.publish(t.base.clone())
		t.end()
		if err != nil {
			return nil, fmt.Errorf("app %q: create its catalog: %w", a.name, err)
		}
	}
	c := a.published()
	opt := s.cfg.Live.withDefaults()
	l := &liveApp{a: a, opt: opt, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	var err error
	if l.evSchema, err = loadSchema(c.EventProps); err != nil {
		return nil, err
	}
	if l.userSchema, err = loadSchema(c.UserProps); err != nil {
		return nil, err
	}
	l.newTails(c)
	log, err := s.logs.OpenLog(context.Background(), a.name, wal.Options{SegmentSize: opt.LogFileSize, FirstSeq: c.LogSeq + 1, Apply: l.apply})
	if err != nil {
		return nil, fmt.Errorf("app %q refuses writes: its write-ahead log is damaged (`spur recover --app %s` sets it aside, keeping every intact record): %w",
			a.name, a.name, err)
	}
	if r, ok := log.Repair(); ok {
		s.log.Warn("write-ahead log: cut a torn tail (a write that was never acknowledged)", "app", a.name,
			"file", r.File, "offset", r.Offset, "records_dropped", r.Dropped, "reason", r.Reason)
	}
	if st := log.Stats(); st.LastSeq < c.LogSeq {
		log.Close()
		return nil, fmt.Errorf("app %q refuses writes: its catalog covers write-ahead-log records up to %d but the log ends at %d (files lost?): `spur recover --app %s`: %w",
			a.name, c.LogSeq, st.LastSeq, a.name, ErrCorruption)
	}
	l.log = log
	l.applied = c.LogSeq
	l.delSeq = lastDeletion(c.Deletions)
	start := time.Now()
	var replayed int
	l.mu.Lock()
	err = log.Replay(c.LogSeq, func(seq uint64, rec []byte) error {
		replayed++
		return l.applyLocked(seq, rec)
	})
	l.mu.Unlock()
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("app %q refuses writes: replay its write-ahead log (`spur recover --app %s`): %w", a.name, a.name, err)
	}
	if replayed > 0 {
		s.log.Info("write-ahead log replayed", "app", a.name, "records", replayed, "after", c.LogSeq, "elapsed", time.Since(start))
	}
	a.live.Store(l)
	if err := l.refresh(); err != nil {
		a.live.Store(nil)
		log.Close()
		return nil, err
	}
	go l.run()
	return l, nil
}

// newTails starts empty tails for an app whose published catalog is c
// (l.mu held, or before l is shared).
func (l *liveApp) newTails(c *Catalog) {
	gen := c.Generation + 1
	seqs := func() int64 { return l.a.allocSeq(0) }
	l.evTail = newImporter(&l.sink, gen, c.Shards, l.evSchema, seqs, ImportOptions{Kind: KindEvents})
	l.evTail.prefix, l.evTail.trusted = livePrefix, true
	l.userTail = newImporter(&l.sink, gen, c.Shards, l.userSchema, seqs, ImportOptions{Kind: KindUsers})
	l.userTail.prefix, l.userTail.trusted = livePrefix, true
	l.tailRows, l.tailBytes = 0, 0
}

// allocSeq returns the next arrival rank of app a: larger than every rank
// handed out by this process and than min (a write's base catalog's
// NextSeq).
func (a *App) allocSeq(min int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := max(a.seqNext, a.cur.disk.NextSeq, a.cur.NextSeq, min)
	a.seqNext = n + 1
	return n
}

// ingestOps is Store.IngestIdentity on this app.
func (l *liveApp) ingestOps(ctx context.Context, evs []event.Event, users []UserWrite, ids []IdentityWrite, opt IngestOptions) (*IngestReport, error) {
	if err := l.err(); err != nil {
		return nil, err
	}
	if l.a.deleted.Load() {
		return nil, fmt.Errorf("app %q: %w", l.a.name, ErrAppDeleted)
	}
	if l.mem.Load() >= l.opt.Memory {
		l.signal()
		return nil, ErrBackpressure
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &IngestReport{}
	ok := l.check(evs, users, rep, opt.DropBadValues)
	if sup := l.suppression(); sup.ids != nil {
		for i := range evs {
			if ok[i] && sup.drops(evs[i].UserID) {
				ok[i] = false
				rep.Accepted--
				rep.Suppressed++
			}
		}
	}
	ops := identityOps(evs, ids, ok, rep, opt.ExplicitOps)
	if snap := l.a.ident.snapshot(); snap != nil && len(ops) > 0 {
		// An operation that is a no-op now stays one (persons never split):
		// not logged, not applied. Segment and Amplitude traffic carries
		// the same two ids on every event.
		ops = slices.DeleteFunc(ops, snap.Noop)
	}
	if rep.Accepted == 0 && len(ops) == 0 {
		return rep, nil
	}
	bp, _ := l.enc.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer l.enc.Put(bp)
	*bp = appendLiveRecordOf(*bp, evs, users, ops, ok)
	if _, err := l.log.Append(ctx, *bp); err != nil {
		rep.Accepted = 0
		if errors.Is(err, syscall.ENOSPC) {
			return nil, fmt.Errorf("app %q: write-ahead log: %w (%v)", l.a.name, ErrDiskFull, err)
		}
		return nil, fmt.Errorf("app %q: write-ahead log: %w", l.a.name, err)
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	return rep, nil
}

// check validates and coerces evs and their user writes, recording the
// rejected ones in rep; ok[i] says whether evs[i] is accepted. With drop,
// a property that fails (a bad name, a repeated name, a value of another
// type) is removed from its event or user write and recorded in
// rep.Dropped, and the event is checked again without it.
func (l *liveApp) check(evs []event.Event, users []UserWrite, rep *IngestReport, drop bool) []bool {
	ok := make([]bool, len(evs))
	byEvent := make([][]int, len(evs)) // indexes into users
	for j, u := range users {
		if u.Index >= 0 && u.Index < len(evs) {
			byEvent[u.Index] = append(byEvent[u.Index], j)
		}
	}
	var limit int64 = -1
	now := l.opt.Now()
	if l.opt.MaxFuture > 0 {
		limit = now.Add(l.opt.MaxFuture).UnixMicro()
	}
	c := l.a.published()
	expired, expiring := expiredBefore(c, now) // docs/storage.md §7
	l.schemaMu.Lock()
	defer l.schemaMu.Unlock()
	var hints map[string]event.Type // prepareUserOp's, made when needed
	for i := range evs {
		ev := &evs[i]
		reject := func(field, msg string) {
			rep.Rejected = append(rep.Rejected, IngestRejection{Index: i, Field: field, Message: msg})
		}
		if limit >= 0 && ev.Time > limit {
			reject("timestamp", fmt.Sprintf("%s is more than %v after the server's clock", time.UnixMicro(ev.Time).UTC().Format(time.RFC3339Nano), l.opt.MaxFuture))
			continue
		}
		if expiring && ev.Time < expired {
			reject("timestamp", fmt.Sprintf("%s is older than the app's retention of %s", time.UnixMicro(ev.Time).UTC().Format(time.RFC3339Nano), FormatRetention(c.Retention)))
			continue
		}
		if err := coerceDropping(ev, l.evSchema, event.ValidateEvent, drop, i, "properties.", rep); err != nil {
			f, msg := rowField(err, "properties.")
			reject(f, msg)
			continue
		}
		good := true
		for _, j := range byEvent[i] {
			u := &users[j]
			prefix := userOpFields[u.op()]
			if err := l.prepareUserOp(u, users, &hints, drop, i, prefix, rep); err != nil {
				f, msg := rowField(err, prefix)
				reject(f, msg)
				good = false
				break
			}
			uev := event.Event{UserID: ev.UserID, Time: ev.Time, Props: u.Props}
			err := coerceDropping(&uev, l.userSchema, event.ValidateUser, drop, i, prefix, rep)
			u.Props = uev.Props
			if err != nil {
				f, msg := rowField(err, prefix)
				reject(f, msg)
				good = false
				break
			}
		}
		if good {
			ok[i] = true
			rep.Accepted++
		}
	}
	return ok
}

// userOpFields are the field prefixes of the operations' properties in
// rejections (the native endpoint's keys, docs/ingest.md §1).
var userOpFields = [...]string{UserSet: "user_properties.", UserSetOnce: "user_properties_once.",
	UserUnset: "user_properties_unset.", UserAdd: "user_properties_add.", UserDelete: "user_properties_delete."}

// prepareUserOp readies the properties of a write that is not a set
// (l.schemaMu held), into a new slice (the caller's is not changed): an
// unset's values become the zero value of each property's type (they
// only mark the property). A property the schema does not know takes
// the type of its first value among the request's other writes (all,
// the request's writes; *hints caches them), which it will have once
// they are applied; one no write of the request has either is dropped
// (no user has it: there is nothing to clear). A delete's properties are
// removed, and an add's values must be numbers (int or float) of a
// property typed int or float, or new: a bad one is dropped (recorded in
// rep.Dropped for event index, the field prefixed) with drop, else
// returned as an *event.RowError.
func (l *liveApp) prepareUserOp(u *UserWrite, all []UserWrite, hints *map[string]event.Type, drop bool, index int, prefix string, rep *IngestReport) error {
	switch u.op() {
	case UserUnset:
		ps := make([]event.Prop, 0, len(u.Props))
		for _, p := range u.Props {
			t, ok := l.userSchema.Type(p.Name)
			if !ok {
				if *hints == nil {
					*hints = map[string]event.Type{}
					for i := range all {
						if op := all[i].op(); op == UserSet || op == UserSetOnce || op == UserAdd {
							for _, q := range all[i].Props {
								if _, seen := (*hints)[q.Name]; !seen && q.Value.Type != event.TypeNone {
									(*hints)[q.Name] = q.Value.Type
								}
							}
						}
					}
				}
				t, ok = (*hints)[p.Name]
			}
			if ok {
				ps = append(ps, event.Prop{Name: p.Name, Value: event.Value{Type: t}})
			}
		}
		u.Props = ps
	case UserDelete:
		u.Props = nil
	case UserAdd:
		ps := make([]event.Prop, 0, len(u.Props))
		for _, p := range u.Props {
			msg := ""
			if t := p.Value.Type; t != event.TypeInt && t != event.TypeFloat {
				msg = fmt.Sprintf("an add needs a number, found %s", p.Value.Type)
			} else if t, ok := l.userSchema.Type(p.Name); ok && t != event.TypeInt && t != event.TypeFloat {
				msg = fmt.Sprintf("an add needs a number property, %s is %s", event.Quote(p.Name), t)
			}
			if msg == "" {
				ps = append(ps, p)
				continue
			}
			if !drop {
				return &event.RowError{Field: p.Name, Msg: msg}
			}
			rep.Dropped = append(rep.Dropped, IngestRejection{Index: index, Field: prefix + p.Name, Message: msg})
		}
		u.Props = ps
	}
	return nil
}

// coerceDropping validates ev and coerces it to schema; with drop, each
// property the error names is removed from ev.Props (recorded in
// rep.Dropped for event index, its field prefixed) and the event is
// checked again, until it passes or fails on its user id, event name or
// a field not among its properties.
func coerceDropping(ev *event.Event, schema *event.Schema, validate func(*event.Event) error, drop bool, index int, prefix string, rep *IngestReport) error {
	for {
		err := validate(ev)
		if err == nil {
			err = schema.CoerceEvent(ev)
		}
		if err == nil || !drop {
			return err
		}
		var re *event.RowError
		if !errors.As(err, &re) || re.Field == event.FieldUserID || re.Field == event.FieldEvent {
			return err
		}
		n := len(ev.Props)
		ev.Props = slices.DeleteFunc(ev.Props, func(p event.Prop) bool { return p.Name == re.Field })
		if len(ev.Props) == n {
			return err
		}
		rep.Dropped = append(rep.Dropped, IngestRejection{Index: index, Field: prefix + re.Field, Message: re.Msg})
	}
}

// rowField returns the field path and message of a validation error: an
// *event.RowError's field (a property's prefixed), else the error text.
func rowField(err error, prefix string) (string, string) {
	var re *event.RowError
	if !errors.As(err, &re) {
		return "", err.Error()
	}
	switch re.Field {
	case "", event.FieldUserID, event.FieldEvent:
		return re.Field, re.Msg
	}
	return prefix + re.Field, re.Msg
}

// appendLiveRecordOf appends the record of the accepted events (ok),
// their user writes, renumbered, and the identity operations ops.
func appendLiveRecordOf(dst []byte, evs []event.Event, users []UserWrite, ops []identity.Op, ok []bool) []byte {
	if !slices.Contains(ok, false) {
		return appendLiveRecord(dst[:0], evs, users, ops)
	}
	idx := make([]int, len(evs))
	var kept []event.Event
	for i := range evs {
		idx[i] = len(kept)
		if ok[i] {
			kept = append(kept, evs[i])
		}
	}
	var ku []UserWrite
	for _, u := range users {
		if u.Index >= 0 && u.Index < len(evs) && ok[u.Index] {
			u.Index = idx[u.Index]
			ku = append(ku, u)
		}
	}
	return appendLiveRecord(dst[:0], kept, ku, ops)
}

// identityOps returns the identity operations of a request, in the
// order they apply (docs/identity.md §4: array order): per accepted event (ok),
// its explicit operations (ids, by Index) then the one its name carries
// (OpOfEvent); then the operations of no event (Index < 0). An event
// whose operation is invalid (an id too long, not UTF-8) is rejected
// (ok and rep updated; field "anonymous_id" or the property's); an event
// with `$process_person_profile: false` carries none.
func identityOps(evs []event.Event, ids []IdentityWrite, ok []bool, rep *IngestReport, explicit bool) []identity.Op {
	var ops []identity.Op
	// ids by event, in their order (usually they come so already).
	if !slices.IsSortedFunc(ids, func(a, b IdentityWrite) int { return cmp.Compare(a.Index, b.Index) }) {
		ids = slices.Clone(ids)
		slices.SortStableFunc(ids, func(a, b IdentityWrite) int { return cmp.Compare(a.Index, b.Index) })
	}
	next := 0 // the first of ids with an Index ≥ the event's
	rejected := false
	for i := range evs {
		lo := next
		for next < len(ids) && ids[next].Index <= i {
			next++
		}
		ev := &evs[i]
		// Most events carry no operation: their properties are not read.
		if !ok[i] || lo == next && (explicit || !identityEvent(ev.Name)) || !ProcessesPersons(ev) {
			continue
		}
		n := len(ops)
		for _, w := range ids[lo:next] {
			if w.Index != i {
				continue // of no event (< 0)
			}
			op := w.Op
			if err := op.Validate(); err != nil {
				rep.Rejected = append(rep.Rejected, IngestRejection{Index: i, Field: "anonymous_id", Message: err.Error()})
				ok[i], rejected = false, true
				break
			}
			ops = append(ops, op)
		}
		if op, has := OpOfEvent(ev); ok[i] && has && !explicit {
			if err := op.Validate(); err != nil {
				field := "properties." + aliasProp
				if op.Kind == identity.Identify {
					field = "properties." + anonIDProp
				}
				rep.Rejected = append(rep.Rejected, IngestRejection{Index: i, Field: field, Message: err.Error()})
				ok[i], rejected = false, true
			} else {
				ops = append(ops, op)
			}
		}
		if !ok[i] {
			ops = ops[:n]
			rep.Accepted--
		}
	}
	for _, w := range ids {
		if w.Index < 0 {
			ops = append(ops, w.Op)
		}
	}
	if rejected {
		slices.SortStableFunc(rep.Rejected, func(a, b IngestRejection) int { return cmp.Compare(a.Index, b.Index) })
	}
	return ops
}

// err returns the live layer's sticky failure.
func (l *liveApp) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// apply is the log's Apply: it applies a durable commit group, in order.
func (l *liveApp) apply(first uint64, recs [][]byte) {
	l.mu.Lock()
	for i, rec := range recs {
		if err := l.applyLocked(first+uint64(i), rec); err != nil {
			l.failed = fmt.Errorf("app %q: the live layer cannot apply write-ahead-log record %d (restart to replay it): %w", l.a.name, first+uint64(i), err)
			l.a.store.log.Error("live layer failed", "app", l.a.name, "err", l.failed)
			break
		}
	}
	big := l.tailRows >= sealRows || l.mem.Load() >= l.opt.FlushBytes
	l.mu.Unlock()
	if big {
		l.signal()
	}
}

// applyLocked adds record seq to the tails (l.mu held).
func (l *liveApp) applyLocked(seq uint64, rec []byte) error {
	if len(rec) > 0 && (rec[0] == deletionRecordTag || rec[0] == eventsDeletionRecordTag) {
		return l.applyDeletion(seq, rec)
	}
	lb := &l.batch
	if err := decodeLiveRecord(rec, lb); err != nil {
		return err
	}
	var rep ImportReport
	var bytes int64
	l.schemaMu.Lock()
	defer l.schemaMu.Unlock()
	for i := range lb.evs {
		ev := &lb.evs[i]
		if err := l.evTail.add(ev, &rep); err != nil {
			return fmt.Errorf("record %d event %d: %w", seq, i, err)
		}
		bytes += eventBytes(ev)
	}
	for i := range lb.users {
		u := &lb.users[i]
		ev := &lb.evs[u.ev]
		name := userOpEvents[u.op]
		l.uev = event.Event{UserID: ev.UserID, Time: ev.Time, Name: name, Props: u.props}
		if err := l.userTail.add(&l.uev, &rep); err != nil {
			return fmt.Errorf("record %d user write %d: %w", seq, i, err)
		}
		bytes += eventBytes(&l.uev)
	}
	if err := l.a.ident.apply(lb.ops, seq); err != nil {
		return fmt.Errorf("record %d identity operations: %w", seq, err)
	}
	if len(lb.ops) > 0 {
		l.dirty = true
	}
	l.tailRows += len(lb.evs) + len(lb.users)
	l.tailBytes += bytes
	l.mem.Add(bytes)
	l.applied = seq
	if l.oldest.IsZero() {
		l.oldest = l.opt.Now()
	}
	l.dirty = true
	return nil
}

// eventBytes estimates what a buffered row costs a tail: its columns
// (time, event code, user index, about 24 bytes), its user id and the
// properties (a value, a row number and the string).
func eventBytes(ev *event.Event) int64 {
	n := int64(24 + len(ev.UserID) + len(ev.InsertID))
	for _, p := range ev.Props {
		n += 16 + int64(len(p.Value.Str))
	}
	return n
}

// signal wakes the background loop.
func (l *liveApp) signal() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// refresh seals the tails and makes the app's current version show the
// live layer as it is, when it changed (Acquire calls it: a query sees
// every record applied before it started).
func (l *liveApp) refresh() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.sealLocked(); err != nil {
		return err
	}
	if !l.dirty {
		return nil
	}
	a := l.a
	v, err := a.newVersion(a.published(), l.viewLocked(nil))
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.cur
	a.cur = v
	a.releaseLocked(old)
	a.mu.Unlock()
	l.dirty = false
	return nil
}

// sealLocked writes the tails' rows as in-memory segments (one per shard
// and kind with rows) and starts new tails (l.mu held).
func (l *liveApp) sealLocked() error {
	if l.tailRows == 0 {
		return nil
	}
	for _, tail := range []*importer{l.evTail, l.userTail} {
		if tail.buffered == 0 {
			continue
		}
		if _, err := tail.flush(); err != nil {
			return fmt.Errorf("app %q: seal live events: %w", l.a.name, err)
		}
		refs, err := tail.wait()
		if err != nil {
			return fmt.Errorf("app %q: seal live events: %w", l.a.name, err)
		}
		for _, ref := range refs {
			ref.DelSeq = l.delSeq
			data := l.sink.take(ref.File)
			l.segs = append(l.segs, liveSeg{ref: ref, data: data})
			l.segBytes += int64(len(data))
			l.mem.Add(int64(len(data)))
		}
	}
	l.mem.Add(-l.tailBytes)
	l.newTails(l.a.published())
	l.dirty = true
	return nil
}

// viewLocked returns the live layer as a version shows it, without the
// segments named in drop (l.mu held).
func (l *liveApp) viewLocked(drop map[string]bool) *liveView {
	lv := &liveView{logSeq: l.applied, dels: slices.Clone(l.dels)}
	for _, s := range l.segs {
		if !drop[s.ref.File] {
			lv.segs = append(lv.segs, s)
		}
	}
	l.schemaMu.Lock()
	lv.eventProps, lv.userProps = l.evSchema.Props(), l.userSchema.Props()
	l.schemaMu.Unlock()
	return lv
}

// dropLocked removes the segments named in drop (flushed) from the live
// layer (l.mu held).
func (l *liveApp) dropLocked(drop map[string]bool) {
	if len(drop) == 0 {
		return
	}
	l.segs = slices.DeleteFunc(l.segs, func(s liveSeg) bool {
		if drop[s.ref.File] {
			l.segBytes -= int64(len(s.data))
			l.mem.Add(-int64(len(s.data)))
			return true
		}
		return false
	})
	l.dirty = true
}

// run is the background loop: it flushes when the live layer is large or
// old enough (then compacts by tiers), else seals large tails and merges
// in-memory segments.
func (l *liveApp) run() {
	defer close(l.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
		case <-tick.C:
		}
		l.maintain(context.Background(), false)
	}
}

// maintain does one round of the background work; force flushes whatever
// is unflushed.
func (l *liveApp) maintain(ctx context.Context, force bool) {
	l.maint.Lock()
	defer l.maint.Unlock()
	defer l.eraseIfDue(ctx)
	if l.flushDue(force) {
		start := time.Now()
		rows, err := l.flush(ctx)
		if l.opt.OnFlush != nil {
			l.opt.OnFlush(time.Since(start), rows, err)
		}
		if err != nil {
			l.a.store.log.Error("live flush failed (retried)", "app", l.a.name, "err", err)
			return
		}
		if !force {
			l.compact(ctx)
		}
		return
	}
	l.mu.Lock()
	// Idle: nothing applied since the previous round (a second ago, or
	// the round an ingest kicked). The live layer is then sealed and
	// merged into one in-memory segment per shard and kind, as a flush
	// would write it: queries merge two runs per shard, not up to
	// liveMaxSegments+1.
	idle := l.applied == l.seenSeq
	l.seenSeq = l.applied
	var err error
	if l.tailRows >= sealRows || idle && l.tailRows > 0 {
		err = l.sealLocked()
	}
	l.mu.Unlock()
	if err == nil {
		err = l.mergeMemory(ctx, idle)
	}
	if err != nil {
		l.a.store.log.Error("live merge failed (retried)", "app", l.a.name, "err", err)
		return
	}
	if idle && !force {
		l.compactIdle(ctx)
	}
}

// idleCompactPause is how many times the duration of its last pass
// compactIdle waits before the next: the background rewrites of an app
// whose ingestion pauses often (a trickle) take at most a tenth of the
// time, however large the app.
const idleCompactPause = 9

// compactIdle merges, while the app is idle (nothing applied since the
// previous background round) and everything is flushed, each shard and
// kind that flushes and tiered merges left in more than one run into one
// run, as the import rule does (ImportCompactMinRuns,
// AutoCompactUserMinRuns): a scan of a shard of several runs merges it
// user by user, 1.2–1.5× slower than one run even beside a run of 0.1 %
// of the events, 2–4× with a few runs of similar size (docs/compaction.md),
// and ingestion that stops would otherwise leave that layout for good.
// One (shard, kind) is compacted and published at a time, so a flush
// after ingestion resumes waits for one group at most; it stops when a
// record is applied or the live layer closes (its compaction is then
// cancelled, changing nothing). After a pass that compacted anything it
// pauses idleCompactPause times the pass's duration. Failures are logged
// and retried after the pause. Called from maintain (l.maint held).
func (l *liveApp) compactIdle(ctx context.Context) {
	if l.opt.NoIdleCompact || time.Now().Before(l.idleAfter) {
		return
	}
	l.mu.Lock()
	busy := l.tailRows > 0 || len(l.segs) > 0
	seen := l.applied
	l.mu.Unlock()
	if busy {
		return // the flush comes first (FlushAge)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	did := false
	for ctx.Err() == nil {
		sk, ok := idleGroup(l.a.published())
		if !ok {
			break
		}
		l.mu.Lock()
		resumed := l.applied != seen
		l.mu.Unlock()
		if resumed {
			break
		}
		t0 := time.Now()
		rep, err := l.a.Compact(ctx, CompactOptions{MinRuns: ImportCompactMinRuns, UserMinRuns: AutoCompactUserMinRuns, Workers: 1,
			only: map[shardKind]bool{sk: true}})
		if err != nil {
			if ctx.Err() == nil {
				l.a.store.log.Error("idle compaction failed (retried)", "app", l.a.name, "shard", sk.shard, "kind", sk.kind, "err", err)
			}
			break
		}
		if rep.Written == 0 {
			break // nothing to merge after all: idleGroup and the plan disagree
		}
		did = true
		if l.opt.OnCompact != nil {
			l.opt.OnCompact(time.Since(t0), rep)
		}
	}
	if did {
		l.idleAfter = time.Now().Add(idleCompactPause * time.Since(start))
	}
}

// idleGroup returns the first shard and kind of c that compactIdle
// merges: events in ImportCompactMinRuns runs or more, users in
// AutoCompactUserMinRuns or more.
func idleGroup(c *Catalog) (shardKind, bool) {
	for _, k := range []struct {
		kind SegmentKind
		min  int
	}{{KindEvents, ImportCompactMinRuns}, {KindUsers, AutoCompactUserMinRuns}} {
		for sh, n := range c.ShardRuns(k.kind) {
			if n >= k.min {
				return shardKind{sh, k.kind}, true
			}
		}
	}
	return shardKind{}, false
}

// flushDue reports whether maintain flushes now: something is unflushed
// and force is set, or the oldest unflushed record is FlushAge old, or
// the live layer holds FlushBytes or half its memory limit.
func (l *liveApp) flushDue(force bool) bool {
	l.mu.Lock()
	age := !l.oldest.IsZero() && l.opt.Now().Sub(l.oldest) >= l.opt.FlushAge
	unflushed := l.tailRows > 0 || len(l.segs) > 0 || len(l.dels) > 0
	l.mu.Unlock()
	mem := l.mem.Load()
	return unflushed && (force || age || mem >= l.opt.FlushBytes || mem >= l.opt.Memory/2)
}

// liveGroups returns the compaction groups of segs: per kind and shard,
// the runs of segments (in arrival order) that pick chooses to write as
// one, each with its inputs' arrival range.
func liveGroups(segs []liveSeg, pick func(run []liveSeg) [][]liveSeg) []compactGroup {
	type key struct {
		kind  SegmentKind
		shard int
	}
	by := map[key][]liveSeg{}
	var keys []key
	for _, s := range segs {
		k := key{s.ref.Kind, s.ref.Shard}
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], s)
	}
	var groups []compactGroup
	for _, k := range keys {
		run := by[k]
		slices.SortFunc(run, func(x, y liveSeg) int { return cmp.Compare(x.ref.SeqMin, y.ref.SeqMin) })
		for _, part := range pick(run) {
			g := compactGroup{shard: k.shard, kind: k.kind, seqMin: part[0].ref.SeqMin, seqMax: part[len(part)-1].ref.SeqMax}
			for _, s := range part {
				g.inputs = append(g.inputs, s.ref)
				g.rows += s.ref.Rows
			}
			groups = append(groups, g)
		}
	}
	slices.SortStableFunc(groups, func(x, y compactGroup) int { return cmp.Compare(y.rows, x.rows) })
	return groups
}

// flush writes the live layer (sealed first) into segment files and
// publishes them with the log position they cover, removing them from the
// live layer in the same version swap; then the log before that position
// is released. It returns the rows written.
func (l *liveApp) flush(ctx context.Context) (int64, error) {
	ctx, task := trace.NewTask(ctx, "flush")
	defer task.End()
	a := l.a
	if err := l.refresh(); err != nil { // seals: the segments hold every applied record
		return 0, err
	}
	l.mu.Lock()
	segs := slices.Clone(l.segs)
	logSeq := l.applied
	dels, delSeq := slices.Clone(l.dels), l.delSeq
	l.oldest = time.Time{}
	// The outputs take an arrival rank of their own, after every rank
	// handed out so far and before those of later seals: a flush output's
	// range never spans a segment another write published meanwhile (an
	// import's), whatever the live segments' own ranks.
	seq := a.allocSeq(0)
	l.mu.Unlock()
	if len(segs) == 0 && len(dels) == 0 && !a.ident.unpersisted() {
		return 0, nil
	}
	t, err := a.beginWrite()
	if err != nil {
		l.mu.Lock()
		l.oldest = l.opt.Now() // retry after a while, not at once
		l.mu.Unlock()
		return 0, err
	}
	defer t.end()
	base := t.base
	v, err := a.Acquire() // pins segs: no one else removes live segments
	if err != nil {
		return 0, err
	}
	defer v.Release()
	groups := liveGroups(segs, func(run []liveSeg) [][]liveSeg { return [][]liveSeg{run} })
	for i := range groups {
		groups[i].seqMin, groups[i].seqMax = seq, seq
	}
	out := compactOutput{sink: t, shards: base.Shards, gen: t.outputGen(), delSeq: delSeq}
	var written []SegmentRef
	if len(groups) > 0 {
		written, _, err = a.compactGroups(ctx, out, v, groups, CompactOptions{MaxSegmentRows: DefaultMaxSegmentRows, Workers: runtime.GOMAXPROCS(0)})
		if err != nil {
			return 0, fmt.Errorf("app %q: flush live events: %w", a.name, err)
		}
	}
	next := base.clone()
	next.Generation++
	next.Segments = append(next.Segments, written...)
	sortSegments(next.Segments)
	next.NextSeq = max(next.NextSeq, seq+1)
	var rows int64
	for _, w := range written {
		rows += w.Rows
	}
	next.LogSeq = max(next.LogSeq, logSeq)
	next.Deletions = append(slices.Clip(next.Deletions), dels...)
	if next.DelSalt == "" && len(next.Deletions) > 0 {
		next.DelSalt = newDelSalt() // published with the first request: Erase's tombstones need it
	}
	l.schemaMu.Lock()
	next.EventProps, next.UserProps = l.evSchema.Props(), l.userSchema.Props()
	l.schemaMu.Unlock()
	t.dropLive = make(map[string]bool, len(segs))
	for _, s := range segs {
		t.dropLive[s.ref.File] = true
	}
	if err := t.publish(next); err != nil {
		return 0, fmt.Errorf("app %q: publish flushed live events: %w", a.name, err)
	}
	if len(dels) > 0 {
		l.mu.Lock()
		l.dels = slices.Delete(l.dels, 0, len(dels)) // published; later ones stay
		l.dirty = true
		l.mu.Unlock()
	}
	if err := l.log.Release(next.LogSeq); err != nil {
		a.store.log.Warn("release write-ahead log (retried at the next flush)", "app", a.name, "upto", next.LogSeq, "err", err)
	}
	a.store.log.Debug("live events flushed", "app", a.name, "rows", rows, "segments", len(written), "log_seq", next.LogSeq, "generation", next.Generation)
	return rows, nil
}

// compact runs the tiered compaction of the app's published segments
// (CompactOptions.Tiered), after a flush.
func (l *liveApp) compact(ctx context.Context) {
	ctx, task := trace.NewTask(ctx, "compaction")
	defer task.End()
	start := time.Now()
	rep, err := l.a.Compact(ctx, CompactOptions{Tiered: true})
	if err != nil {
		l.a.store.log.Error("background compaction failed (retried after the next flush)", "app", l.a.name, "err", err)
		return
	}
	if rep.Written > 0 && l.opt.OnCompact != nil {
		l.opt.OnCompact(time.Since(start), rep)
	}
}

// eraseIfDue completes the app's pending deletion requests once one is
// LiveOptions.EraseWithin old (l.maint held); after a failure it waits a
// minute before trying again.
func (l *liveApp) eraseIfDue(ctx context.Context) {
	now := l.opt.Now()
	if now.Sub(l.eraseFailed) < time.Minute || !eraseDue(l.a.published(), now, l.opt.EraseWithin) {
		return
	}
	if _, err := l.a.erase(ctx, l); err != nil {
		l.eraseFailed = now
		l.a.store.log.Error("background erasure failed (retried in a minute)", "app", l.a.name, "err", err)
	}
}

// liveTier is the size tier of an in-memory segment of n bytes.
func liveTier(n int64) int {
	if n <= liveTierBase {
		return 0
	}
	return (bits.Len64(uint64(n/liveTierBase)) + 1) / 2 // log4
}

// mergeMemory merges, per shard and kind, liveMergeFanout consecutive
// in-memory segments of one tier into one, until no tier has that many,
// and, past liveMaxSegments, the consecutive ones with the fewest bytes:
// at most about liveMergeFanout−1 segments per tier and liveMaxSegments
// in all stay, so a query merges a few cursors per shard however long
// ingestion runs between flushes. With all (ingestion idle) it merges
// each shard's and kind's segments into one.
func (l *liveApp) mergeMemory(ctx context.Context, all bool) error {
	a := l.a
	for round := 0; ; round++ {
		if round > 0 && l.flushDue(false) {
			// Under steady ingestion every round finds new seals to
			// merge: without this the loop never ended and maintain
			// never flushed while requests kept coming (3M events sent
			// over 10 s with a 3 s flush age: one flush, after the last).
			return nil
		}
		l.mu.Lock()
		segs := slices.Clone(l.segs)
		l.mu.Unlock()
		groups := liveGroups(segs, func(run []liveSeg) [][]liveSeg {
			if all && len(run) > 1 {
				return [][]liveSeg{run}
			}
			var parts [][]liveSeg
			for i := 0; i+liveMergeFanout <= len(run); {
				t := liveTier(run[i].ref.Bytes)
				j := i + 1
				for j < len(run) && j-i < liveMergeFanout && liveTier(run[j].ref.Bytes) == t {
					j++
				}
				if j-i == liveMergeFanout {
					parts = append(parts, run[i:j])
					i = j
					continue
				}
				i++
			}
			if len(parts) == 0 && len(run) > liveMaxSegments {
				// Tiers interleave: merge the consecutive window with
				// the fewest bytes.
				best, bestBytes := 0, int64(-1)
				for i := 0; i+liveMergeFanout <= len(run); i++ {
					var n int64
					for _, s := range run[i : i+liveMergeFanout] {
						n += s.ref.Bytes
					}
					if bestBytes < 0 || n < bestBytes {
						best, bestBytes = i, n
					}
				}
				parts = append(parts, run[best:best+liveMergeFanout])
			}
			return parts
		})
		if len(groups) == 0 {
			return nil
		}
		// The outputs are held in memory (the sink) beside their inputs
		// until published: a round takes groups up to liveMergeRoundBytes
		// of input (at least one), so an idle merge of a large live layer
		// does not hold a second copy of it. (One group per round instead
		// made rounds, each sealing the tails anew, lag behind ingestion:
		// 38 s to settle after 2M events.)
		var in int64
		for i, g := range groups {
			for _, ref := range g.inputs {
				in += ref.Bytes
			}
			if i > 0 && in > liveMergeRoundBytes {
				groups = groups[:i]
				break
			}
		}
		if err := l.refresh(); err != nil {
			return err
		}
		v, err := a.Acquire()
		if err != nil {
			return err
		}
		c := v.Published()
		out := compactOutput{sink: &l.sink, shards: c.Shards, gen: c.Generation + 1, prefix: livePrefix, delSeq: lastDeletion(v.Deletions)}
		written, _, err := a.compactGroups(ctx, out, v, groups, CompactOptions{MaxSegmentRows: 1 << 30, Workers: 1})
		v.Release()
		if err != nil {
			for _, w := range written {
				l.sink.take(w.File)
			}
			return err
		}
		l.mu.Lock()
		drop := map[string]bool{}
		for _, g := range groups {
			for _, in := range g.inputs {
				drop[in.File] = true
			}
		}
		l.dropLocked(drop)
		for _, w := range written {
			data := l.sink.take(w.File)
			l.segs = append(l.segs, liveSeg{ref: w, data: data})
			l.segBytes += int64(len(data))
			l.mem.Add(int64(len(data)))
		}
		l.dirty = true
		l.mu.Unlock()
		if err := l.refresh(); err != nil {
			return err
		}
	}
}

// close stops the background loop, flushes what is unflushed (ctx bounds
// it: whatever is not flushed is in the log) and closes the log.
func (l *liveApp) close(ctx context.Context) error {
	close(l.stop)
	<-l.done
	l.maint.Lock()
	defer l.maint.Unlock()
	if l.err() == nil {
		if _, err := l.flush(ctx); err != nil {
			l.a.store.log.Warn("flush at close (the write-ahead log keeps the events)", "app", l.a.name, "err", err)
		}
	}
	return l.log.Close()
}

// drop stops the live layer of an app being deleted (Store.DeleteApp):
// its background work ends, nothing is flushed, the log is closed.
func (l *liveApp) drop() {
	close(l.stop)
	<-l.done
	l.maint.Lock()
	defer l.maint.Unlock()
	if err := l.log.Close(); err != nil {
		l.a.store.log.Warn("deleted app: closing its write-ahead log", "app", l.a.name, "err", err)
	}
}

// props returns the live schema of kind's properties.
func (l *liveApp) props(kind SegmentKind) []event.PropType {
	l.schemaMu.Lock()
	defer l.schemaMu.Unlock()
	if kind == KindUsers {
		return l.userSchema.Props()
	}
	return l.evSchema.Props()
}

// mergeProps merges the property types an import fixed (props) into the
// live schema of kind and returns the merged schema's properties: the
// import publishes them (a superset of what its segments and the
// published ones need). A property that live events typed differently
// meanwhile fails the import; an int one that either widened to float is
// float for both.
func (l *liveApp) mergeProps(kind SegmentKind, props []event.PropType) ([]event.PropType, error) {
	l.schemaMu.Lock()
	defer l.schemaMu.Unlock()
	sc := l.evSchema
	if kind == KindUsers {
		sc = l.userSchema
	}
	for _, p := range props {
		t, ok := sc.Type(p.Name)
		switch {
		case !ok:
			if err := sc.Declare(p.Name, p.Type); err != nil {
				return nil, err
			}
		case t == p.Type:
		case t == event.TypeInt && p.Type == event.TypeFloat:
			sc.WidenToFloat(p.Name)
		case t == event.TypeFloat && p.Type == event.TypeInt:
		default:
			return nil, fmt.Errorf("property %q is %s in this import but live events made it %s meanwhile", p.Name, p.Type, t)
		}
	}
	return sc.Props(), nil
}

// LiveStats describe one app's live layer (for metrics): unflushed rows and
// bytes, in-memory segments, the log's files and bytes and its last
// record applied.
type LiveStats struct {
	App             string
	UnflushedBytes  int64
	UnflushedRows   int64 // events and user property writes applied, not yet in segment files
	BufferedRows    int64 // applied, not yet sealed
	MemorySegments  int
	LogFiles        int
	LogBytes        int64
	LastAppliedSeq  uint64
	PublishedLogSeq uint64
}

// LiveStats returns the stats of every app with a live layer, by name.
func (s *Store) LiveStats() []LiveStats {
	var out []LiveStats
	for _, a := range s.openApps() {
		l := a.live.Load()
		if l == nil {
			continue
		}
		ls := l.log.Stats()
		l.mu.Lock()
		st := LiveStats{App: a.name, UnflushedBytes: l.mem.Load(), UnflushedRows: int64(l.tailRows), BufferedRows: int64(l.tailRows),
			MemorySegments: len(l.segs), LogFiles: ls.Files, LogBytes: ls.Bytes, LastAppliedSeq: l.applied, PublishedLogSeq: a.published().LogSeq}
		for _, sg := range l.segs {
			st.UnflushedRows += sg.ref.Rows
		}
		l.mu.Unlock()
		out = append(out, st)
	}
	slices.SortFunc(out, func(x, y LiveStats) int { return strings.Compare(x.App, y.App) })
	return out
}
