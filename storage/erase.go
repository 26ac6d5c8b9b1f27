package storage

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/bin"
	"github.com/spurdb/spur/storage/vfs"
)

// deletionRecordTag is the first byte of a write-ahead-log record that
// requests an erasure (event records start with their version, 1 to 3):
//
//	[1] 0xD0, str request id, varint requested at (UTC µs),
//	[1] suppress (0/1), uvarint ids, str id…
//
// The ids are those the request named; the person's other distinct ids
// are looked up when the record is applied, in log order, so a replay
// erases the same ones.
const deletionRecordTag = 0xD0

// eventsDeletionRecordTag starts the record of an events deletion
// (Store.DeleteEvents):
//
//	[1] 0xD1, str request id, varint requested at (UTC µs),
//	str event, str where, varint from, varint to (UTC µs)
const eventsDeletionRecordTag = 0xD1

// DefaultEraseWithin is LiveOptions.EraseWithin when it is 0
// (docs/storage.md §7: the bytes of an erasure are gone within it).
const DefaultEraseWithin = 24 * time.Hour

// eraseRequest is one deletion request of the log: a person to erase
// (the distinct id named, and whether later events of the person's ids
// are dropped too), or events to delete (match).
type eraseRequest struct {
	id, named string
	at        int64
	suppress  bool
	match     *EventMatch
}

func appendDeletionRecord(dst []byte, r eraseRequest) []byte {
	dst = append(dst, deletionRecordTag)
	dst = appendStr(dst, r.id)
	dst = binary.AppendVarint(dst, r.at)
	sup := byte(0)
	if r.suppress {
		sup = 1
	}
	dst = append(dst, sup)
	dst = binary.AppendUvarint(dst, 1)
	return appendStr(dst, r.named)
}

func appendEventsDeletionRecord(dst []byte, r eraseRequest) []byte {
	dst = append(dst, eventsDeletionRecordTag)
	dst = appendStr(dst, r.id)
	dst = binary.AppendVarint(dst, r.at)
	dst = appendStr(dst, r.match.Event)
	dst = appendStr(dst, r.match.Where)
	dst = binary.AppendVarint(dst, r.match.From)
	return binary.AppendVarint(dst, r.match.To)
}

func decodeDeletionRecord(rec []byte) (eraseRequest, error) {
	d := bin.NewDecoder(rec, 0)
	var r eraseRequest
	tag := d.U8()
	r.id = d.String("request id")
	r.at = d.Varint()
	if tag == eventsDeletionRecordTag {
		m := &EventMatch{Event: d.String("event"), Where: d.String("where")}
		m.From, m.To = d.Varint(), d.Varint()
		r.match = m
		if d.Err() == nil && d.Left() > 0 {
			d.Fail("%d trailing bytes", d.Left())
		}
		if e := d.Err(); e != nil {
			return r, fmt.Errorf("%w: deletion record at byte %d: %s", errLiveRecord, e.Offset, e.Msg)
		}
		return r, nil
	}
	switch d.U8() {
	case 0:
	case 1:
		r.suppress = true
	default:
		d.Fail("suppress flag not 0 or 1")
	}
	n := d.Count("ids", 1, maxDeletionIDs)
	if d.Err() == nil && n != 1 {
		d.Fail("%d ids, want 1", n)
	}
	r.named = d.String("id")
	if d.Err() == nil && d.Left() > 0 {
		d.Fail("%d trailing bytes", d.Left())
	}
	if e := d.Err(); e != nil {
		return r, fmt.Errorf("%w: deletion record at byte %d: %s", errLiveRecord, e.Offset, e.Msg)
	}
	return r, nil
}

// applyDeletion applies deletion record seq (l.mu held): the tails are
// sealed (their rows precede the request), the person's distinct ids are
// looked up in the id graph as of this record, and the request takes
// the next deletion number. Every version made after shows it.
func (l *liveApp) applyDeletion(seq uint64, rec []byte) error {
	r, err := decodeDeletionRecord(rec)
	if err != nil {
		return fmt.Errorf("record %d: %w", seq, err)
	}
	if err := l.sealLocked(); err != nil {
		return err
	}
	if r.match != nil {
		l.delSeq++
		l.dels = append(l.dels, Deletion{Seq: l.delSeq, ID: r.id, Kind: DeleteEvents, RequestedAt: r.at, Match: r.match})
		l.applied = seq
		l.dirty = true
		if l.oldest.IsZero() {
			l.oldest = l.opt.Now()
		}
		return nil
	}
	var others []string
	if snap := l.a.ident.snapshot(); snap != nil {
		if p := snap.LookupString(r.named); p != nil {
			for _, id := range p.DistinctIDs {
				if id != r.named {
					others = append(others, id)
				}
			}
		}
	}
	slices.Sort(others)
	l.delSeq++
	l.dels = append(l.dels, Deletion{Seq: l.delSeq, ID: r.id, Kind: DeletePerson, RequestedAt: r.at, Suppress: r.suppress,
		IDs: append([]string{r.named}, slices.Compact(others)...)})
	l.applied = seq
	l.dirty = true
	if l.oldest.IsZero() {
		l.oldest = l.opt.Now() // published by the flush FlushAge after
	}
	return nil
}

// ErasePersons erases the persons of app appName that the distinct ids
// name (docs/storage.md §7), one deletion request per id, in order: every
// event and user property write of each person's distinct ids (as the id
// graph joins them when the request applies) is hidden from every query
// started after ErasePersons returns, and its bytes leave the store's
// files at Erase (`spur compact --erase`, or the live layer's background
// after LiveOptions.EraseWithin). suppress also drops later events of
// those ids at ingestion. An id that a pending request already names
// returns that request (idempotent). The requests are durable (in the
// write-ahead log) when it returns. It needs the live layer (like
// Ingest). Errors: an invalid id, ErrLiveOff, ErrNotFound for an unknown
// app, log errors.
func (s *Store) ErasePersons(ctx context.Context, appName string, ids []string, suppress bool) ([]Deletion, error) {
	if s.cfg.Live == nil {
		return nil, ErrLiveOff
	}
	for _, id := range ids {
		if !validDistinctID(id) {
			return nil, fmt.Errorf("erase in app %q: distinct id %q: want 1 to 65,536 bytes of UTF-8", appName, id)
		}
	}
	a, err := s.App(appName)
	if err != nil {
		return nil, err
	}
	l, err := a.openLive()
	if err != nil {
		return nil, err
	}
	v, err := a.Acquire()
	if err != nil {
		return nil, err
	}
	// Each id's request: the pending one naming it, else a new one (once
	// per id).
	reqOf := map[string]string{}
	for _, d := range v.Deletions {
		if d.Pending() && len(d.IDs) > 0 && d.Suppress == suppress {
			reqOf[d.IDs[0]] = d.ID
		}
	}
	v.Release()
	var recs [][]byte
	at := l.opt.Now().UnixMicro()
	for _, id := range ids {
		if _, ok := reqOf[id]; ok {
			continue
		}
		r := eraseRequest{id: newDeletionID(), named: id, at: at, suppress: suppress}
		reqOf[id] = r.id
		recs = append(recs, appendDeletionRecord(nil, r))
	}
	if len(recs) > 0 {
		if _, err := l.log.AppendBatch(ctx, recs); err != nil {
			return nil, fmt.Errorf("app %q: erase: write-ahead log: %w", appName, err)
		}
		if err := l.err(); err != nil {
			return nil, err
		}
	}
	v, err = a.Acquire()
	if err != nil {
		return nil, err
	}
	defer v.Release()
	out := make([]Deletion, len(ids))
	for i, id := range ids {
		want := reqOf[id]
		j := slices.IndexFunc(v.Deletions, func(d Deletion) bool { return d.ID == want })
		if j < 0 {
			return nil, fmt.Errorf("app %q: erase request %s applied but not in the current version", appName, want)
		}
		out[i] = v.Deletions[j]
	}
	return out, nil
}

// DeleteEvents deletes the events of app appName that m matches and that
// were stored before the request (docs/storage.md §7, "Events by
// predicate": earlier in the write-ahead log, or in an import published
// before it), the same way ErasePersons erases a person: hidden from
// every query started after it returns, the bytes gone at Erase. m.Where
// must compile against the app's event properties (the registered
// WhereCompiler). It needs the live layer. Errors: an invalid match
// (an empty event name, From ≥ To, a filter that does not compile,
// naming the field), ErrLiveOff, ErrNotFound, log errors.
func (s *Store) DeleteEvents(ctx context.Context, appName string, m EventMatch) (Deletion, error) {
	if s.cfg.Live == nil {
		return Deletion{}, ErrLiveOff
	}
	if err := event.ValidateEventName(m.Event); err != nil && m.Event != "$any" {
		return Deletion{}, fmt.Errorf("delete events of app %q: event: %w", appName, err)
	}
	if m.From >= m.To {
		return Deletion{}, fmt.Errorf("delete events of app %q: range [%d, %d) µs is empty", appName, m.From, m.To)
	}
	a, err := s.App(appName)
	if err != nil {
		return Deletion{}, err
	}
	l, err := a.openLive()
	if err != nil {
		return Deletion{}, err
	}
	if _, err := compileWhere(m.Where, l.props(KindEvents)); err != nil {
		return Deletion{}, fmt.Errorf("delete events of app %q: %w", appName, err)
	}
	r := eraseRequest{id: newDeletionID(), at: l.opt.Now().UnixMicro(), match: &m}
	if _, err := l.log.Append(ctx, appendEventsDeletionRecord(nil, r)); err != nil {
		return Deletion{}, fmt.Errorf("app %q: delete events: write-ahead log: %w", appName, err)
	}
	if err := l.err(); err != nil {
		return Deletion{}, err
	}
	v, err := a.Acquire()
	if err != nil {
		return Deletion{}, err
	}
	defer v.Release()
	if j := slices.IndexFunc(v.Deletions, func(d Deletion) bool { return d.ID == r.id }); j >= 0 {
		return v.Deletions[j], nil
	}
	return Deletion{}, fmt.Errorf("app %q: deletion request %s applied but not in the current version", appName, r.id)
}

// Deletions returns app appName's deletion requests, pending and done,
// in request order (pending ones with their ids; the slice and the
// records are the caller's). Errors: ErrNotFound, a catalog that cannot
// be read.
func (s *Store) Deletions(appName string) ([]Deletion, error) {
	a, err := s.App(appName)
	if err != nil {
		return nil, err
	}
	v, err := a.Acquire()
	if err != nil {
		return nil, err
	}
	defer v.Release()
	return slices.Clone(v.Deletions), nil
}

// EraseReport describes one Erase.
type EraseReport struct {
	App string `json:"app"`
	// Done are the requests completed by this Erase.
	Done []string `json:"done"`
	// Rewritten and RewrittenBytes count the segments rewritten without
	// the erased rows (their input sizes); Segments and Bytes the app's
	// segments before, for comparison with rewriting the whole app.
	Rewritten      int           `json:"rewritten"`
	RewrittenBytes int64         `json:"rewritten_bytes"`
	Rows           int64         `json:"rows"`
	Segments       int           `json:"segments"`
	Bytes          int64         `json:"bytes"`
	Elapsed        time.Duration `json:"elapsed_ns"`
}

// Erase completes app appName's pending deletion requests
// (docs/storage.md §7): it flushes the live layer into a new log file (so
// that the log's files holding the requests and the erased events are
// released), rewrites every segment that may hold an erased row — only
// the runs of the shards of the erased ids whose hash range covers one —
// and publishes the requests as done, keeping of each only its request
// id, times and salted hashes. Queries run on meanwhile, and ingestion
// too. It is `spur compact --erase`, and the live layer's background
// work once a request is LiveOptions.EraseWithin old. Errors: ErrNotFound,
// the writer role held elsewhere (*LockedError), I/O errors; a failed
// Erase leaves the requests pending (queries still hide them) and is
// retried by the next.
func (s *Store) Erase(ctx context.Context, appName string) (*EraseReport, error) {
	a, err := s.App(appName)
	if err != nil {
		return nil, err
	}
	l := a.live.Load()
	if l == nil && s.cfg.Live != nil && s.role != nil {
		// The log may hold erased events: open it to release them.
		if l, err = a.openLive(); err != nil {
			return nil, err
		}
	}
	if l != nil {
		l.maint.Lock()
		defer l.maint.Unlock()
	}
	return a.erase(ctx, l)
}

// erase is Erase (l.maint held when l is not nil).
func (a *App) erase(ctx context.Context, l *liveApp) (*EraseReport, error) {
	start := time.Now()
	rep := &EraseReport{App: a.name}
	if l != nil {
		// An empty record in a new file: the flush below publishes it,
		// and releasing the log up to it deletes every older file.
		l.log.Rotate()
		if _, err := l.log.Append(ctx, appendLiveRecord(nil, nil, nil, nil)); err != nil {
			return rep, fmt.Errorf("app %q: erase: write-ahead log: %w", a.name, err)
		}
		if _, err := l.flush(ctx); err != nil {
			return rep, fmt.Errorf("app %q: erase: %w", a.name, err)
		}
		// The flush releases what it published; with nothing to flush,
		// the files before the new one hold only published records.
		if err := l.log.Release(a.published().LogSeq); err != nil {
			return rep, fmt.Errorf("app %q: erase: release the write-ahead log: %w", a.name, err)
		}
	}
	c := a.published()
	rep.Segments, rep.Bytes = len(c.Segments), c.Bytes()
	if !slices.ContainsFunc(c.Deletions, func(d Deletion) bool { return d.Pending() }) {
		rep.Elapsed = time.Since(start)
		return rep, a.repairIdentityCopy()
	}
	crep, err := a.Compact(ctx, CompactOptions{erase: true, Workers: runtime.GOMAXPROCS(0)})
	if err != nil {
		return rep, fmt.Errorf("app %q: erase: %w", a.name, err)
	}
	rep.Rewritten, rep.RewrittenBytes, rep.Rows = crep.Replaced, crep.ReplacedBytes, crep.Rows
	if err := a.finishDeletions(l, rep); err != nil {
		return rep, err
	}
	rep.Elapsed = time.Since(start)
	a.store.log.Info("erasure done", "app", a.name, "requests", len(rep.Done), "rewritten", rep.Rewritten,
		"rewritten_bytes", rep.RewrittenBytes, "elapsed", rep.Elapsed)
	return rep, nil
}

// finishDeletions publishes as done every pending request no segment
// (published or live) may hold rows of any more.
func (a *App) finishDeletions(l *liveApp, rep *EraseReport) error {
	t, err := a.beginWrite()
	if err != nil {
		return fmt.Errorf("app %q: erase: %w", a.name, err)
	}
	defer t.end()
	next := t.base.clone()
	var live []SegmentRef
	if l != nil {
		l.mu.Lock()
		for _, s := range l.segs {
			live = append(live, s.ref)
		}
		l.mu.Unlock()
	}
	if next.DelSalt == "" {
		next.DelSalt = newDelSalt()
	}
	now := time.Now().UnixMicro()
	if l != nil {
		now = l.opt.Now().UnixMicro()
	}
	next.Deletions = slices.Clone(next.Deletions)
	erased := map[string]string{} // id → its tombstone in the id graph
	for i := range next.Deletions {
		d := &next.Deletions[i]
		if !d.Pending() {
			continue
		}
		x := newEraseIndex([]Deletion{*d}, next.EventProps, next.DelSalt)
		held := func(r SegmentRef) bool { return x.touches(&r, next.Shards) }
		if slices.ContainsFunc(next.Segments, held) || slices.ContainsFunc(live, held) {
			continue
		}
		d.DoneAt = max(now, d.RequestedAt)
		rep.Done = append(rep.Done, d.ID)
		if d.Kind != DeletePerson {
			continue
		}
		d.Hash = hashID(next.DelSalt, d.IDs[0])
		for _, id := range d.IDs {
			erased[id] = tombstone(next.DelSalt, id)
		}
		if d.Suppress {
			d.Suppressed = make([]string, len(d.IDs))
			for j, id := range d.IDs {
				d.Suppressed[j] = hashID(next.DelSalt, id)
			}
			slices.Sort(d.Suppressed)
		}
		d.IDs = nil
	}
	if len(rep.Done) == 0 {
		return nil
	}
	if err := a.tombstoneIdentity(erased); err != nil {
		return err
	}
	if err := t.publish(next); err != nil {
		return fmt.Errorf("app %q: erase: publish: %w", a.name, err)
	}
	return a.writeIdentityCopy()
}

// repairIdentityCopy rewrites the id graph's copy when it differs from
// the published file (checked again under the writer role): a crash
// between finishDeletions' publication and its rewrite of the copy
// leaves the erased ids in the copy, which no later erasure would
// otherwise touch.
func (a *App) repairIdentityCopy() error {
	if a.identityCopyCurrent() {
		return nil
	}
	t, err := a.beginWrite()
	if err != nil {
		return fmt.Errorf("app %q: erase: %w", a.name, err)
	}
	defer t.end()
	if a.identityCopyCurrent() {
		return nil
	}
	return a.writeIdentityCopy()
}

// identityCopyCurrent reports whether the id graph's copy holds the
// published file's bytes (or there is no graph).
func (a *App) identityCopyCurrent() bool {
	a.ident.mu.Lock()
	file := a.ident.file
	a.ident.mu.Unlock()
	_, p2 := a.identityPaths()
	b, err := vfs.ReadFile(a.store.fs, p2)
	return len(file) == 0 || err == nil && bytes.Equal(b, file)
}

// planErase returns one compaction group per run of segments that may
// hold rows a pending deletion of m hides, or another person's event
// naming an erased id in an identity field: the segments of a shard and
// kind sharing such a segment's arrival range (the parts of one
// compaction output are rewritten together, so recovery never takes a
// part's older siblings for superseded inputs).
func (a *App) planErase(m *Catalog) []compactGroup {
	x := newEraseIndex(m.Deletions, m.EventProps, m.DelSalt)
	if x == nil {
		return nil
	}
	// The footers of the current version say which segments hold an
	// erased id in another person's identity fields (scrubbed).
	v, err := a.Acquire()
	if err == nil {
		defer v.Release()
	}
	names := func(r *SegmentRef) bool {
		if v == nil || r.Kind != KindEvents || len(x.named) == 0 {
			return false
		}
		rd, err := v.Reader(*r)
		if err != nil {
			return false // not in the current version: the next Erase
		}
		_, hit := x.scrubbed(rd.Meta(), r.DelSeq)
		return hit
	}
	type key struct {
		kind           SegmentKind
		shard          int
		seqMin, seqMax int64
	}
	hit := map[key]bool{}
	for i := range m.Segments {
		r := &m.Segments[i]
		if x.touches(r, m.Shards) || names(r) {
			hit[key{r.Kind, r.Shard, r.SeqMin, r.SeqMax}] = true
		}
	}
	byKey := map[key]*compactGroup{}
	var groups []compactGroup
	var order []key
	for _, r := range m.Segments {
		k := key{r.Kind, r.Shard, r.SeqMin, r.SeqMax}
		if !hit[k] {
			continue
		}
		g := byKey[k]
		if g == nil {
			g = &compactGroup{shard: r.Shard, kind: r.Kind, seqMin: r.SeqMin, seqMax: r.SeqMax}
			byKey[k] = g
			order = append(order, k)
		}
		g.inputs = append(g.inputs, r)
		g.rows += r.Rows
	}
	for _, k := range order {
		g := byKey[k]
		sortSegments(g.inputs)
		groups = append(groups, *g)
	}
	slices.SortStableFunc(groups, func(x, y compactGroup) int { return cmp.Compare(y.rows, x.rows) })
	return groups
}

// eraseDue reports whether a published request of c is pending for
// longer than within (the background Erase is due).
func eraseDue(c *Catalog, now time.Time, within time.Duration) bool {
	for _, d := range c.Deletions {
		if d.Pending() && now.Sub(time.UnixMicro(d.RequestedAt)) >= within {
			return true
		}
	}
	return false
}

// suppressSet is what Deletion.Suppress drops at ingestion: the ids of
// pending suppress requests, and the salted hashes (hashID) of done ones.
type suppressSet struct {
	cat    *Catalog // the published catalog it was built of
	live   int      // and the number of liveApp.dels
	ids    map[string]bool
	hashes map[string]bool
	salt   string
}

// suppression returns the app's current suppressSet (nil when no request
// suppresses), rebuilt when the deletions changed.
func (l *liveApp) suppression() *suppressSet {
	c := l.a.published()
	l.mu.Lock()
	dels := slices.Clip(l.dels)
	l.mu.Unlock()
	if s := l.supp.Load(); s != nil && s.cat == c && s.live == len(dels) {
		return s
	}
	s := &suppressSet{cat: c, live: len(dels), salt: c.DelSalt}
	for _, list := range [][]Deletion{c.Deletions, dels} {
		for _, d := range list {
			if !d.Suppress {
				continue
			}
			if s.ids == nil {
				s.ids, s.hashes = map[string]bool{}, map[string]bool{}
			}
			for _, id := range d.IDs {
				s.ids[id] = true
			}
			for _, h := range d.Suppressed {
				s.hashes[h] = true
			}
		}
	}
	l.supp.Store(s)
	return s
}

// drops reports whether events of distinct id are suppressed.
func (s *suppressSet) drops(id string) bool {
	if s == nil || s.ids == nil {
		return false
	}
	return s.ids[id] || len(s.hashes) > 0 && s.hashes[hashID(s.salt, id)]
}
