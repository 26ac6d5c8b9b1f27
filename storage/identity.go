package storage

// The id graph of an app (docs/persons.md, the contract
// ../shared/spec/identity.md): identity operations arrive with live
// requests (in the write-ahead-log record of their request, applied with
// it), with imports (applied when the import publishes) and from the admin
// endpoint; package identity applies them. Every publication writes the
// operations recorded since the previous one to the app's id graph file
// and its copy, then names the file's published prefix in the catalog
// (Catalog.Identity), so that the graph is published atomically with the
// catalog, survives the log's release, and is rebuilt on open by replaying
// that prefix.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/storage/vfs"
)

// Files of the id graph in an app directory: the graph and its
// independently written second copy (docs/storage.md §3).
const (
	identityName     = "IDGRAPH"
	identityCopyName = "IDGRAPH.COPY"
)

// Layout of an id graph file (integers little-endian):
//
//	magic "SPURIDG\n", u16 format version (1)
//	frames, one per publication that recorded operations:
//	  u32 payload length N, u32 operations, u64 log seq (IdentityPos.LogSeq
//	  after this frame), N bytes of operations (identity.AppendOp each),
//	  u32 CRC-32C of the frame's bytes before it
//
// The catalog publishes a prefix of whole frames (IdentityPos); bytes
// after it are a publication that did not complete, ignored and
// overwritten by the next.
const (
	identityMagic       = "SPURIDG\n"
	identityVersion     = 1
	identityHeaderBytes = len(identityMagic) + 2
	identityFrameHeader = 16
	// maxIdentityFrame bounds one frame's payload: larger is corruption.
	maxIdentityFrame = 1 << 30
)

// appIdentity is an app's id graph as this process holds it.
type appIdentity struct {
	// mu pairs each Apply with the log position it covers (applyLive) and
	// guards the fields below. Taken after liveApp.mu, never with App.mu.
	mu     sync.Mutex
	graph  *identity.Graph // nil until loaded or the first operation
	logSeq uint64          // the last write-ahead-log record whose operations graph holds
	disk   IdentityPos     // what the files hold that a publication names
	file   []byte          // the files' bytes up to disk.Bytes
}

// pos returns the published prefix the graph was loaded or last
// persisted with.
func (id *appIdentity) pos() IdentityPos {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.disk
}

// unpersisted reports whether the graph holds operations no publication
// wrote yet.
func (id *appIdentity) unpersisted() bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.graph != nil && id.graph.Snapshot().Recorded() != id.disk.Ops
}

// snapshot returns the graph's current snapshot, nil when the app has no
// graph.
func (id *appIdentity) snapshot() *identity.Snapshot {
	id.mu.Lock()
	g := id.graph
	id.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.Snapshot()
}

// apply applies ops (in order) to the graph, creating it, and records
// that the graph holds the operations of log record logSeq (0: not from
// the log). Operations of a record the published graph already holds
// (logSeq ≤ the position it was loaded with) are skipped: a replay after a
// crash applies each operation once.
func (id *appIdentity) apply(ops []identity.Op, logSeq uint64) error {
	if len(ops) == 0 {
		return nil
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if logSeq > 0 && logSeq <= id.logSeq {
		return nil
	}
	if id.graph == nil {
		id.graph = identity.New()
	}
	if err := id.graph.Apply(ops, nil); err != nil {
		return err
	}
	if logSeq > 0 {
		id.logSeq = logSeq
	}
	return nil
}

// applyChunked applies an import's operations, in order, in batches
// (each a new snapshot).
func (id *appIdentity) applyChunked(ops []identity.Op) error {
	const batch = 1 << 16
	for len(ops) > 0 {
		n := min(len(ops), batch)
		if err := id.apply(ops[:n], 0); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// Persons returns the id graph snapshot the version shows (package
// identity), consistent with its events: nil when the app has applied no
// identity operation (every distinct id is a person of its own). The
// snapshot is immutable and shared.
func (v *Version) Persons() *identity.Snapshot { return v.persons }

// identityPaths returns the paths of app a's id graph file and its copy.
func (a *App) identityPaths() (string, string) {
	return filepath.Join(a.dir, identityName), filepath.Join(a.dir, identityCopyName)
}

// loadIdentity replaces the app's graph by the one catalog c publishes,
// read from the id graph file or, when that is damaged, from its copy.
func (a *App) loadIdentity(c *Catalog) error {
	id := &a.ident
	if c.Identity == (IdentityPos{}) {
		id.mu.Lock()
		id.graph, id.logSeq, id.disk, id.file = nil, 0, IdentityPos{}, nil
		id.mu.Unlock()
		return nil
	}
	p1, p2 := a.identityPaths()
	g, file, err1 := readIdentity(a.store.fs, p1, c.Identity)
	if err1 != nil {
		var err2 error
		g, file, err2 = readIdentity(a.store.fs, p2, c.Identity)
		if err2 != nil {
			return fmt.Errorf("app %q: id graph (`spur verify --app %s` lists the damage): %w", a.name, a.name, errors.Join(err1, err2))
		}
		a.store.log.Warn("id graph file damaged: read its copy (the next publication rewrites both)", "app", a.name, "err", err1)
	}
	id.mu.Lock()
	id.graph, id.logSeq, id.disk, id.file = g, c.Identity.LogSeq, c.Identity, file
	id.mu.Unlock()
	return nil
}

// readIdentity reads the prefix pos of id graph file path and replays it.
// It returns the graph and the prefix's bytes. Errors: ErrCorruption
// (a *CorruptionError naming path and offset) when the file is shorter,
// damaged or holds another number of operations; I/O errors.
func readIdentity(fsys vfs.FS, path string, pos IdentityPos) (*identity.Graph, []byte, error) {
	b, err := vfs.ReadFile(fsys, path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, &CorruptionError{Path: path, Msg: fmt.Sprintf("missing, but the catalog publishes %d bytes of it", pos.Bytes)}
		}
		return nil, nil, err
	}
	if int64(len(b)) < pos.Bytes {
		return nil, nil, &CorruptionError{Path: path, Offset: int64(len(b)), Msg: fmt.Sprintf("%d bytes, but the catalog publishes %d", len(b), pos.Bytes)}
	}
	b = b[:pos.Bytes]
	g := identity.New()
	var ops []identity.Op
	frames, err := walkIdentity(path, b, func(payload []byte, n uint32, _ uint64, at int64) error {
		ops = ops[:0]
		if err := identity.DecodeOps(payload, func(op identity.Op) error {
			ops = append(ops, op)
			return nil
		}); err != nil {
			return &CorruptionError{Path: path, Offset: at, Msg: err.Error()}
		}
		if uint32(len(ops)) != n {
			return &CorruptionError{Path: path, Offset: at, Msg: fmt.Sprintf("frame holds %d operations, its header says %d", len(ops), n)}
		}
		return g.Apply(ops, nil)
	})
	if err != nil {
		return nil, nil, err
	}
	if frames.end != pos.Bytes || g.Snapshot().Recorded() != pos.Ops {
		return nil, nil, &CorruptionError{Path: path, Offset: frames.end,
			Msg: fmt.Sprintf("%d recorded operations in %d bytes of whole frames, but the catalog publishes %d in %d",
				g.Snapshot().Recorded(), frames.end, pos.Ops, pos.Bytes)}
	}
	return g, b, nil
}

// identityFrames summarises the frames walkIdentity read.
type identityFrames struct {
	end    int64  // the offset after the last whole, intact frame
	ops    uint64 // operations in the frames
	logSeq uint64 // the last frame's log seq
}

// walkIdentity calls fn with each frame of id graph file bytes b, in
// order, stopping at the first error (fn's, or a *CorruptionError for a
// bad header, a truncated frame or a checksum mismatch). It returns what
// it read up to there.
func walkIdentity(path string, b []byte, fn func(payload []byte, ops uint32, logSeq uint64, at int64) error) (identityFrames, error) {
	var st identityFrames
	if len(b) < identityHeaderBytes || string(b[:len(identityMagic)]) != identityMagic {
		return st, &CorruptionError{Path: path, Msg: "not an id graph file"}
	}
	if v := binary.LittleEndian.Uint16(b[len(identityMagic):]); v != identityVersion {
		if v > identityVersion {
			return st, fmt.Errorf("%s: id graph format version %d: %w (this build reads %d)", path, v, ErrUnsupportedVersion, identityVersion)
		}
		return st, &CorruptionError{Path: path, Offset: int64(len(identityMagic)), Msg: fmt.Sprintf("format version %d", v)}
	}
	at := int64(identityHeaderBytes)
	st.end = at
	for at < int64(len(b)) {
		rest := b[at:]
		if len(rest) < identityFrameHeader+4 {
			return st, &CorruptionError{Path: path, Offset: at, Msg: "truncated frame header"}
		}
		n := binary.LittleEndian.Uint32(rest)
		if n > maxIdentityFrame || int64(len(rest)) < int64(identityFrameHeader)+int64(n)+4 {
			return st, &CorruptionError{Path: path, Offset: at, Msg: fmt.Sprintf("frame of %d bytes runs past the end", n)}
		}
		body := rest[:identityFrameHeader+int(n)]
		if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(rest[len(body):]); got != want {
			return st, &CorruptionError{Path: path, Offset: at, Msg: fmt.Sprintf("frame checksum mismatch: stored %08x, computed %08x", want, got)}
		}
		ops := binary.LittleEndian.Uint32(rest[4:])
		logSeq := binary.LittleEndian.Uint64(rest[8:])
		if err := fn(body[identityFrameHeader:], ops, logSeq, at); err != nil {
			return st, err
		}
		at += int64(len(body)) + 4
		st.end, st.ops, st.logSeq = at, st.ops+uint64(ops), logSeq
	}
	return st, nil
}

// persistIdentity writes the operations recorded since the last
// publication to the id graph file and its copy (each replaced
// atomically) and sets next.Identity to the new prefix: called by
// writeTxn.publish before the catalog is swapped, so that a catalog never
// names bytes the files lack.
func (a *App) persistIdentity(next *Catalog) error {
	id := &a.ident
	id.mu.Lock()
	g, logSeq, disk, file := id.graph, id.logSeq, id.disk, id.file
	id.mu.Unlock()
	if g == nil {
		next.Identity = IdentityPos{}
		return nil
	}
	rec := g.Snapshot().Recorded()
	if rec == disk.Ops {
		// Only Noop operations since: the log position moves on, unless
		// no frame was ever written (a position of no bytes must be the
		// zero one, which names no file; replaying Noops on an empty
		// graph records nothing again).
		if disk.Bytes > 0 {
			disk.LogSeq = max(disk.LogSeq, logSeq)
		}
		next.Identity = disk
		return nil
	}
	b, err := appendIdentityFrame(slices.Clone(file), g.RecordedOps(disk.Ops, rec), logSeq)
	if err != nil {
		return fmt.Errorf("app %q: %w", a.name, err)
	}
	if err := vfs.MkdirAllSync(a.store.fs, a.dir, 0o755); err != nil {
		return fmt.Errorf("app %q: id graph: %w", a.name, err)
	}
	for _, name := range []string{identityName, identityCopyName} {
		// A copy per write: the bytes stay ours (a test filesystem in a
		// race build scrambles what it was given once Write returns).
		if err := vfs.WriteFileAtomic(a.store.fs, a.dir, name, slices.Clone(b)); err != nil {
			return fmt.Errorf("app %q: write id graph %s: %w", a.name, name, err)
		}
	}
	pos := IdentityPos{Ops: rec, Bytes: int64(len(b)), LogSeq: logSeq}
	id.mu.Lock()
	id.disk, id.file = pos, b
	id.mu.Unlock()
	next.Identity = pos
	return nil
}

// appendIdentityFrame appends to id graph file bytes b (empty: the
// file's header first) a frame of ops covering the log up to logSeq.
func appendIdentityFrame(b []byte, ops []identity.Op, logSeq uint64) ([]byte, error) {
	if len(b) == 0 {
		b = append(b, identityMagic...)
		b = binary.LittleEndian.AppendUint16(b, identityVersion)
	}
	start := len(b)
	b = append(b, make([]byte, identityFrameHeader)...)
	for _, op := range ops {
		b = identity.AppendOp(b, op)
	}
	n := len(b) - start - identityFrameHeader
	if n > maxIdentityFrame {
		return nil, fmt.Errorf("%d bytes of identity operations in one publication, more than %d", n, maxIdentityFrame)
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(n))
	binary.LittleEndian.PutUint32(b[start+4:], uint32(len(ops)))
	binary.LittleEndian.PutUint64(b[start+8:], logSeq)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli)), nil
}

// tombstoneIdentity replaces, in every recorded operation of the app's
// id graph, each id of erased by its tombstone (erased[id]), and
// rebuilds the graph from them: the persons it forms are the same, the
// erased ids appear nowhere (docs/storage.md §7). The id graph file is
// rewritten (one frame with the published operations), not its copy:
// until the catalog naming the new file is published, a reader of the
// old catalog finds the file's length wrong and reads the copy; the
// caller rewrites the copy after the publication (finishDeletions).
// Live applies wait meanwhile.
func (a *App) tombstoneIdentity(erased map[string]string) error {
	id := &a.ident
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.graph == nil {
		return nil
	}
	rec := id.graph.Snapshot().Recorded()
	ops := id.graph.RecordedOps(0, rec)
	changed := false
	for i := range ops {
		if t, ok := erased[ops[i].T]; ok {
			ops[i].T, changed = t, true
		}
		if t, ok := erased[ops[i].O]; ok {
			ops[i].O, changed = t, true
		}
	}
	if !changed {
		return nil
	}
	g := identity.New()
	if err := g.Apply(ops, nil); err != nil {
		return fmt.Errorf("app %q: rebuild the id graph without erased ids: %w", a.name, err)
	}
	disk := id.disk
	var file []byte
	if disk.Ops > 0 {
		var err error
		if file, err = appendIdentityFrame(nil, ops[:disk.Ops], disk.LogSeq); err != nil {
			return fmt.Errorf("app %q: %w", a.name, err)
		}
		if err := vfs.WriteFileAtomic(a.store.fs, a.dir, identityName, slices.Clone(file)); err != nil {
			return fmt.Errorf("app %q: write id graph %s: %w", a.name, identityName, err)
		}
		disk.Bytes = int64(len(file))
	}
	id.graph, id.disk, id.file = g, disk, file
	return nil
}

// writeIdentityCopy rewrites the id graph's copy with the file's
// published bytes (after tombstoneIdentity's publication).
func (a *App) writeIdentityCopy() error {
	id := &a.ident
	id.mu.Lock()
	file := slices.Clone(id.file)
	id.mu.Unlock()
	if len(file) == 0 {
		return nil
	}
	if err := vfs.WriteFileAtomic(a.store.fs, a.dir, identityCopyName, file); err != nil {
		return fmt.Errorf("app %q: write id graph %s: %w", a.name, identityCopyName, err)
	}
	return nil
}

// recoverIdentity restores the app's id graph for App recovery (spur
// recover): the prefix the readable old catalog names (old), else the
// longest run of intact frames of the graph file or its copy; both files
// are rewritten with it, so that the publication of the recovered
// catalog names it. What it dropped is a warning in rep.
func (a *App) recoverIdentity(old *IdentityPos, rep *RecoverReport) error {
	p1, p2 := a.identityPaths()
	var best []byte
	var bestPos IdentityPos
	for _, path := range []string{p1, p2} {
		b, err := vfs.ReadFile(a.store.fs, path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("app %q: read id graph: %w", a.name, err)
		}
		if old != nil && *old != (IdentityPos{}) {
			if _, _, err := readIdentity(a.store.fs, path, *old); err == nil {
				best, bestPos = b[:old.Bytes], *old
				break
			}
		}
		st, err := walkIdentity(path, b, func([]byte, uint32, uint64, int64) error { return nil })
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("id graph %s: kept the %d operations before the damage: %v", path, st.ops, err))
		}
		if st.end > int64(identityHeaderBytes) && st.ops > bestPos.Ops {
			best, bestPos = b[:st.end], IdentityPos{Ops: st.ops, Bytes: st.end, LogSeq: st.logSeq}
		}
	}
	if bestPos.Ops == 0 {
		return a.loadIdentity(&Catalog{})
	}
	for _, name := range []string{identityName, identityCopyName} {
		if err := vfs.WriteFileAtomic(a.store.fs, a.dir, name, slices.Clone(best)); err != nil {
			return fmt.Errorf("app %q: rewrite id graph %s: %w", a.name, name, err)
		}
	}
	return a.loadIdentity(&Catalog{Identity: bestPos})
}

// IdentityWrite is one identity operation of an Ingest request: Op, of
// the request's event Index (dropped with it when that event is
// rejected), or of no event (Index < 0: the admin endpoint's merges).
type IdentityWrite struct {
	Index int
	Op    identity.Op
}

// Event names that carry identity operations (docs/identity.md §2, PostHog's
// names), and the properties that hold their second id.
const (
	IdentifyEvent      = "$identify"
	CreateAliasEvent   = "$create_alias"
	MergeEvent         = "$merge_dangerously"
	anonIDProp         = "$anon_distinct_id"
	aliasProp          = "alias"
	processPersonsProp = "$process_person_profile"
)

// OpOfEvent returns the identity operation event ev carries (docs/identity.md
// §2): `$identify` from T with properties.$anon_distinct_id A is
// identify(T, A) (identify(T, T) without it), `$create_alias` from T with
// properties.alias O is alias(T, O), `$merge_dangerously` the same as
// merge(T, O). ok is false for other events, for an alias or merge without
// a string alias, and for an event with `$process_person_profile: false`.
// The operation's ids are not validated (identity.Op.Validate).
func OpOfEvent(ev *event.Event) (op identity.Op, ok bool) {
	if len(ev.Name) < 2 || ev.Name[0] != '$' {
		return op, false
	}
	var kind identity.Kind
	other := aliasProp
	switch ev.Name {
	case IdentifyEvent:
		kind, other = identity.Identify, anonIDProp
	case CreateAliasEvent:
		kind = identity.Alias
	case MergeEvent:
		kind = identity.Merge
	default:
		return op, false
	}
	if !ProcessesPersons(ev) {
		return op, false
	}
	op = identity.Op{Kind: kind, T: ev.UserID, O: ev.UserID, Time: ev.Time}
	o, found := stringProp(ev, other)
	switch {
	case found:
		op.O = o
	case kind != identity.Identify:
		return op, false
	}
	return op, true
}

// ProcessesPersons reports whether ev may change persons: false when it
// carries `$process_person_profile: false` (PostHog; docs/identity.md §2).
func ProcessesPersons(ev *event.Event) bool {
	for _, p := range ev.Props {
		if p.Name == processPersonsProp && p.Value.Type == event.TypeBool && p.Value.Int == 0 {
			return false
		}
	}
	return true
}

// stringProp returns ev's non-empty string property name.
func stringProp(ev *event.Event, name string) (string, bool) {
	for _, p := range ev.Props {
		if p.Name == name && p.Value.Type == event.TypeString && p.Value.Str != "" {
			return p.Value.Str, true
		}
	}
	return "", false
}

// MergePersons applies merge(t, o) to app appName's id graph by hand
// (docs/identity.md §2: the admin endpoint and `spur persons merge`), durably:
// through the write-ahead log when the store takes live events
// (Config.Live), else in a publication of the app's catalog. Errors:
// invalid ids (identity.Op.Validate), an unknown app (ErrNotFound), the
// write's.
func (s *Store) MergePersons(ctx context.Context, appName, t, o string) error {
	op := identity.Op{Kind: identity.Merge, T: t, O: o}
	if err := op.Validate(); err != nil {
		return err
	}
	a, err := s.App(appName)
	if err != nil {
		return err
	}
	if s.cfg.Live != nil {
		l, err := a.openLive()
		if err != nil {
			return err
		}
		_, err = l.ingestOps(ctx, nil, nil, []IdentityWrite{{Index: -1, Op: op}}, IngestOptions{})
		return err
	}
	tx, err := a.beginWrite()
	if err != nil {
		return err
	}
	defer tx.end()
	if err := a.ident.apply([]identity.Op{op}, 0); err != nil {
		return err
	}
	return tx.publish(tx.base.clone())
}
