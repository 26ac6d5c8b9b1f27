package storage

// Backup and restore (docs/storage.md §8, "Backup and restore"): a backup
// directory is itself a store — DIR/apps/APP/{CATALOG, SETTINGS, IDGRAPH,
// IDGRAPH.COPY, seg/*.seg, wal/, meta/COLL/ID.doc} and DIR/meta/COLL/ID.doc —
// holding one version of every app, plus two files of its own:
//
//	DIR/BACKUP-IN-PROGRESS  written (and synced) first, removed (and the
//	                        directory synced) last: while it exists the
//	                        directory is an incomplete backup
//	DIR/BACKUP              the record of the last complete backup: a
//	                        checksummed document (meta.go's format, id
//	                        "backup") whose body is a BackupRecord
//
// A backup pins one version per app (App.Acquire), which holds every event
// acknowledged before it started: the published catalog's segment files —
// immutable, so hard-linked when the directory is on the store's
// filesystem and copied otherwise — and, for the live layer, the
// write-ahead-log records after the catalog's position up to the last one
// the version holds, copied into the backup's own log (wal.Copy). It
// never stops or waits for writes, and never writes to the store.
// Restore replays that log and flushes it, so the new store answers
// exactly as the pinned version did.
// A second backup into the same directory places only the segment files
// it lacks, writes the new catalogs atomically, and only then removes
// the files the new snapshot does not reference.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spurdb/spur/storage/vfs"
	"github.com/spurdb/spur/storage/wal"
)

// Files of a backup directory's top level.
const (
	// BackupMarker is the file that marks a backup directory as
	// incomplete: written first, removed last.
	BackupMarker = "BACKUP-IN-PROGRESS"
	// BackupRecordName is the file recording the last complete backup
	// (a BackupRecord in a checksummed document).
	BackupRecordName = "BACKUP"
	backupDocID      = "backup"
	tmpSuffix        = ".tmp"
)

// ErrIncompleteBackup is matched (errors.Is) by the error for a backup
// directory whose last backup did not finish (BackupMarker exists): it
// holds parts of two snapshots and must not be restored.
var ErrIncompleteBackup = errors.New("incomplete backup")

// ErrBackupDir is matched (errors.Is) by the error of a backup or restore
// refused because of its destination: a directory that overlaps the
// store, that is neither empty nor a backup directory, or (restore) that
// is not empty.
var ErrBackupDir = errors.New("unsuitable backup directory")

// BackupOptions configures Store.Backup.
type BackupOptions struct {
	// Copy copies every segment file, also when the backup directory is on
	// the store's filesystem (by default they are hard-linked there: a
	// link shares the disk blocks, so it guards against deletion and
	// mistakes, not against the loss of the disk).
	Copy bool
	// Holder describes the process in the destination's lock file
	// ("spur backup"); "" means the store's.
	Holder string

	restore bool // Restore: the destination must be empty, no BACKUP record
}

// BackupReport says what Store.Backup wrote. Counts are of segment files;
// bytes are of segment files unless named otherwise.
type BackupReport struct {
	Dir          string      `json:"dir"`           // the backup directory, as given
	Apps         []BackupApp `json:"apps"`          // the apps backed up, by name
	FilesLinked  int         `json:"files_linked"`  // hard-linked from the store
	FilesCopied  int         `json:"files_copied"`  // copied (another filesystem, Copy, or a link refused)
	FilesKept    int         `json:"files_kept"`    // already in the directory from a previous backup
	FilesRemoved int         `json:"files_removed"` // removed: not in the new snapshot (segments, documents, logs, apps)
	BytesLinked  int64       `json:"bytes_linked"`  // of the files linked
	BytesCopied  int64       `json:"bytes_copied"`  // of the files copied
	BytesKept    int64       `json:"bytes_kept"`    // of the files kept
	// Bytes is the size of the snapshot's segment files; MetaBytes that
	// of the catalogs, settings, id graphs and documents written.
	Bytes     int64 `json:"bytes"`
	MetaBytes int64 `json:"meta_bytes"`
	Documents int   `json:"documents"` // documents in the snapshot (keys, saved objects)
	// LogRecords is the number of live write-ahead-log records copied
	// (every app's).
	LogRecords uint64 `json:"log_records"`
	// DurationMS is the whole backup's time, milliseconds.
	DurationMS float64 `json:"duration_ms"`
}

// BackupApp is one app of a backup: the version it holds.
type BackupApp struct {
	App        string `json:"app"`        // its name
	Generation uint64 `json:"generation"` // of the catalog backed up
	// LogSeq is the last write-ahead-log record the version holds;
	// LogRecords of them (those after the catalog's position) are in the
	// backup's log, the others in its segments.
	LogSeq     uint64 `json:"log_seq"`
	LogRecords uint64 `json:"log_records"`
	Segments   int    `json:"segments"`  // segment files of the catalog
	Events     int64  `json:"events"`    // rows of events segments
	UserRows   int64  `json:"user_rows"` // rows of users segments
	Bytes      int64  `json:"bytes"`     // of its segment files
	Documents  int    `json:"documents"` // saved cohorts, insights, dashboards, …
}

// BackupRecord is the content of a complete backup's BACKUP file.
type BackupRecord struct {
	Format   int         `json:"format"`   // 1
	Source   string      `json:"source"`   // the store directory backed up, absolute
	Started  time.Time   `json:"started"`  // when the backup began (UTC)
	Finished time.Time   `json:"finished"` // when it had written everything but this record (UTC)
	Apps     []BackupApp `json:"apps"`     // the versions it holds, by app name
}

// ReadBackup reads the record of the complete backup in directory dir of
// fsys (nil: the operating system's). Errors: one matching
// ErrIncompleteBackup when the last backup into dir did not finish
// (BackupMarker exists); one matching fs.ErrNotExist when dir holds no
// backup record (not a backup directory, or a store); ErrCorruption
// when the record is damaged; I/O errors.
func ReadBackup(fsys vfs.FS, dir string) (*BackupRecord, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	marker := filepath.Join(dir, BackupMarker)
	if ok, err := vfs.Exists(fsys, marker); err != nil {
		return nil, fmt.Errorf("backup %s: %w", dir, err)
	} else if ok {
		return nil, fmt.Errorf("backup %s: %s exists: the backup was interrupted and holds parts of two snapshots (run the backup again): %w",
			dir, marker, ErrIncompleteBackup)
	}
	path := filepath.Join(dir, BackupRecordName)
	b, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("backup %s: no backup record: %w", dir, err)
	}
	d, err := decodeDoc(b, path, backupDocID)
	if err != nil {
		return nil, err
	}
	var rec BackupRecord
	if err := json.Unmarshal(d.Body, &rec); err != nil || rec.Format != 1 {
		return nil, &CorruptionError{Path: path, Msg: fmt.Sprintf("not a format-1 backup record: %v", err)}
	}
	return &rec, nil
}

// Backup writes a consistent snapshot of the whole store into directory
// dir (docs/storage.md §8): for every app, one version pinned
// (App.Acquire: every event acknowledged before the call) — its published
// catalog, settings, id graph prefix and segment files, and the live
// layer's write-ahead-log records after the catalog's position (in the
// backup's log: Restore applies them) — and its documents; the store's
// documents (keys). Writes go on meanwhile. dir is created when missing; it must be
// empty or hold a previous backup (then only the segment files it lacks
// are placed, and the files the new snapshot does not reference are
// removed once the new catalogs are written). Segment files are
// hard-linked when dir is on the store's filesystem (unless opt.Copy),
// else copied and fsynced. The store's filesystem (Config.FS) writes dir.
// A crash at any instant leaves dir the old snapshot, the new one, or
// marked incomplete (BackupMarker; ReadBackup). Errors: a store whose
// Metastore or (with live events) LogStore is not the files (backup lists
// their document collections, and reads the log's files),
// dir not a backup directory, the store itself, damaged source files
// (named), I/O, ctx.Err().
func (s *Store) Backup(ctx context.Context, dir string, opt BackupOptions) (*BackupReport, error) {
	start := time.Now()
	fm, ok := s.meta.(*fileMeta)
	if !ok {
		return nil, errors.New("storage: backup needs the file metastore (Config.Metastore nil)")
	}
	if err := s.checkBackupDir(dir, opt.restore); err != nil {
		return nil, err
	}
	if err := vfs.MkdirAllSync(s.fs, dir, 0o755); err != nil {
		return nil, fmt.Errorf("backup: create %s: %w", dir, err)
	}
	dst, err := newFileMeta(s.fs, dir, false)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	holder := s.holder
	if opt.Holder != "" {
		holder = opt.Holder
	}
	lease, err := dst.Lease(ctx, LeaseName{}, false, holder)
	if err != nil {
		return nil, fmt.Errorf("backup: take %s: %w", dir, err)
	}
	defer lease.Close()
	if err := vfs.WriteFileAtomic(s.fs, dir, BackupMarker, fmt.Appendf(nil, "started %s by %s\n", start.UTC().Format(time.RFC3339Nano), holder)); err != nil {
		return nil, fmt.Errorf("backup: write %s: %w", filepath.Join(dir, BackupMarker), err)
	}
	b := &backup{s: s, src: fm, dst: dst, dir: dir, opt: opt, rep: &BackupReport{Dir: dir}, buf: make([]byte, 1<<20)}
	if err := b.run(ctx); err != nil {
		return b.rep, err
	}
	if !opt.restore {
		src, _ := filepath.Abs(s.cfg.Dir) // checkBackupDir made it absolute: no error
		rec := BackupRecord{Format: 1, Source: src, Started: start.UTC(), Finished: time.Now().UTC(), Apps: b.rep.Apps}
		body, _ := json.Marshal(rec) // plain fields: cannot fail
		now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
		doc := encodeDoc(&Doc{ID: backupDocID, Version: 1, Created: now, Updated: now, Body: body})
		if err := vfs.WriteFileAtomic(s.fs, dir, BackupRecordName, doc); err != nil {
			return b.rep, fmt.Errorf("backup: write %s: %w", filepath.Join(dir, BackupRecordName), err)
		}
	}
	// The commit point: without the marker the directory is the new
	// snapshot, every byte of which was synced before.
	if err := s.fs.Remove(filepath.Join(dir, BackupMarker)); err != nil {
		return b.rep, fmt.Errorf("backup: remove %s: %w", BackupMarker, err)
	}
	if err := vfs.SyncDir(s.fs, dir); err != nil {
		return b.rep, fmt.Errorf("backup: %w", err)
	}
	b.rep.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	return b.rep, nil
}

// checkBackupDir refuses a destination that is the store, lies inside
// it, or is neither empty nor a backup directory (with restore: not
// empty).
func (s *Store) checkBackupDir(dir string, restore bool) error {
	src, err1 := filepath.Abs(s.cfg.Dir)
	dst, err2 := filepath.Abs(dir)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if within(dst, src) || within(src, dst) {
		return fmt.Errorf("backup: %s and the store %s overlap: back up into a directory of its own: %w", dir, s.cfg.Dir, ErrBackupDir)
	}
	names, err := s.fs.List(dir)
	if errors.Is(err, fs.ErrNotExist) || len(names) == 0 && err == nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if restore {
		return fmt.Errorf("restore: %s is not empty: restore into a new directory: %w", dir, ErrBackupDir)
	}
	if slices.Contains(names, BackupRecordName) || slices.Contains(names, BackupMarker) {
		return nil
	}
	return fmt.Errorf("backup: %s is neither empty nor a backup directory (no %s file): refusing to write into it: %w", dir, BackupRecordName, ErrBackupDir)
}

// within reports whether path p is dir or inside it (both absolute and
// clean).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// backup is one run of Store.Backup.
type backup struct {
	s        *Store
	src, dst *fileMeta
	dir      string
	opt      BackupOptions
	rep      *BackupReport
	buf      []byte // the copy buffer
	noLink   bool   // a link failed: copy the rest
}

// run backs up every app, then the store's documents, then removes what
// the snapshot does not reference.
func (b *backup) run(ctx context.Context) error {
	s := b.s
	names, err := s.Apps()
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	for _, name := range names {
		if err := b.app(ctx, name); err != nil {
			return err
		}
	}
	keep, err := b.docs(ctx, "", filepath.Join(b.src.dir, metaDir), filepath.Join(b.dir, metaDir))
	if err != nil {
		return err
	}
	if err := b.prune(filepath.Join(b.dir, metaDir), keep); err != nil {
		return err
	}
	// Apps of an older snapshot that the store no longer has.
	have, err := s.fs.List(filepath.Join(b.dir, "apps"))
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	for _, name := range have {
		if !slices.Contains(names, name) {
			if err := b.removeAll(filepath.Join(b.dir, "apps", name)); err != nil {
				return err
			}
		}
	}
	if err := vfs.SyncDir(s.fs, filepath.Join(b.dir, "apps")); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// app backs up one app: a pinned version's segment files, id graph,
// documents and catalog, then removes the app's files the catalog does
// not reference.
func (b *backup) app(ctx context.Context, name string) error {
	a, err := b.s.App(name)
	if errors.Is(err, ErrNotFound) {
		return nil // removed since listed
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	appDir := filepath.Join(b.dir, "apps", name)
	segs := filepath.Join(appDir, segDir)
	if err := vfs.MkdirAllSync(b.s.fs, segs, 0o755); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// The version, and its log records after the catalog's position. A
	// flush that publishes them meanwhile may release them from the log
	// before they are read: then the next version holds them in segments.
	var v *Version
	var logRecs uint64
	for try := 0; ; try++ {
		if v, err = a.Acquire(); err != nil {
			return fmt.Errorf("backup: app %q: %w", name, err)
		}
		logRecs, err = b.log(ctx, a, v, appDir)
		if err == nil {
			break
		}
		v.Release()
		if !errors.Is(err, fs.ErrNotExist) || try == 10 {
			return fmt.Errorf("backup: app %q: copy its write-ahead log: %w", name, err)
		}
	}
	defer v.Release()
	c := v.Published()
	have, err := b.s.fs.List(segs)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	ba := BackupApp{App: name, Generation: c.Generation, LogSeq: max(v.LogSeq, c.LogSeq+logRecs), LogRecords: logRecs, Segments: len(c.Segments),
		Events: c.Rows(KindEvents), UserRows: c.Rows(KindUsers), Bytes: c.Bytes()}
	keepSegs := make(map[string]bool, len(c.Segments))
	placed := false
	for i := range c.Segments {
		if err := ctx.Err(); err != nil {
			return err
		}
		ref := &c.Segments[i]
		keepSegs[ref.File] = true
		path := filepath.Join(segs, ref.File)
		if _, found := slices.BinarySearch(have, ref.File); found {
			if checkSegmentFile(b.s.fs, path, ref) == nil {
				b.rep.FilesKept++
				b.rep.BytesKept += ref.Bytes
				continue
			}
		}
		if err := b.place(ctx, a, ref, path); err != nil {
			return fmt.Errorf("backup: app %q: %w", name, err)
		}
		placed = true
	}
	b.rep.Bytes += ba.Bytes
	if placed {
		if err := vfs.SyncDir(b.s.fs, segs); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
	}
	if err := b.identity(a, c, appDir); err != nil {
		return err
	}
	keepDocs, err := b.docs(ctx, name, filepath.Join(b.src.appDir(name), metaDir), filepath.Join(appDir, metaDir))
	if err != nil {
		return err
	}
	for _, k := range keepDocs {
		if !strings.HasSuffix(k, "/") {
			ba.Documents++
		}
	}
	if err := b.legacyCohorts(name, appDir); err != nil {
		return err
	}
	// The log in place, then the catalog (and SETTINGS) last: every file
	// it names is durable.
	if err := b.removeAll(filepath.Join(appDir, logDir)); err != nil {
		return err
	}
	if logRecs > 0 {
		if err := b.s.fs.Rename(filepath.Join(appDir, logDir+tmpSuffix), filepath.Join(appDir, logDir)); err != nil {
			return fmt.Errorf("backup: app %q: %w", name, err)
		}
		if err := vfs.SyncDir(b.s.fs, appDir); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
	}
	b.rep.LogRecords += logRecs
	if _, err := b.dst.Publish(ctx, name, nil, c); err != nil {
		return fmt.Errorf("backup: app %q: write its catalog: %w", name, err)
	}
	b.rep.MetaBytes += int64(len(encodeCatalog(c)))
	b.rep.Apps = append(b.rep.Apps, ba)
	// Now the older snapshot's files of the app can go.
	if err := b.prune(segs, slices.Collect(maps.Keys(keepSegs))); err != nil {
		return err
	}
	if err := b.prune(filepath.Join(appDir, metaDir), keepDocs); err != nil {
		return err
	}
	if c.Identity == (IdentityPos{}) {
		for _, n := range []string{identityName, identityCopyName} {
			if err := b.remove(filepath.Join(appDir, n)); err != nil {
				return err
			}
		}
	}
	return vfs.SyncDir(b.s.fs, appDir)
}

// log copies the write-ahead-log records version v holds after its
// published catalog's position into appDir/wal.tmp (removed first), and
// returns how many. In a restore (the source is a backup, whose log no
// one appends to) it copies the whole log after that position.
func (b *backup) log(ctx context.Context, a *App, v *Version, appDir string) (uint64, error) {
	after, upTo := v.Published().LogSeq, v.LogSeq
	src := filepath.Join(b.src.appDir(a.name), logDir)
	if b.opt.restore {
		if ok, err := vfs.Exists(b.s.fs, src); err != nil || !ok {
			return 0, err
		}
		upTo = 0 // to the end
	} else if upTo <= after {
		return 0, nil
	}
	if _, ok := b.s.logs.(fileLogs); !ok {
		return 0, errors.New("backup: live events need the file log (Config.Logs nil)")
	}
	tmp := filepath.Join(appDir, logDir+tmpSuffix)
	if err := b.removeAll(tmp); err != nil {
		return 0, err
	}
	segSize := int64(0)
	if b.s.cfg.Live != nil {
		segSize = b.s.cfg.Live.withDefaults().LogFileSize
	}
	return wal.Copy(ctx, b.s.fs, src, tmp, wal.CopyOptions{After: after, UpTo: upTo, SegmentSize: segSize})
}

// place puts segment ref of app a at path: a hard link to the store's
// file when possible, else a copy (written to path.tmp, fsynced, renamed).
// The placed file is checked against ref (checkSegmentFile).
func (b *backup) place(ctx context.Context, a *App, ref *SegmentRef, path string) error {
	if err := b.remove(path); err != nil { // a damaged or partial older copy
		return err
	}
	db, isDir := a.bucket.(*dirBucket)
	l, canLink := b.s.fs.(vfs.Linker)
	linked := false
	if isDir && canLink && !b.opt.Copy && !b.noLink {
		if err := l.Link(db.path(ref.File), path); err == nil {
			linked = true
		} else {
			b.noLink = true // another filesystem (EXDEV) or no links there: copy from now on
			b.s.log.Info("backup: hard link refused, copying segment files", "err", err)
		}
	}
	if !linked {
		if err := b.copySegment(ctx, a, ref, path); err != nil {
			return err
		}
	}
	if err := checkSegmentFile(b.s.fs, path, ref); err != nil {
		return fmt.Errorf("segment %s: %w", a.bucket.Describe(ref.File), err)
	}
	if linked {
		b.rep.FilesLinked++
		b.rep.BytesLinked += ref.Bytes
	} else {
		b.rep.FilesCopied++
		b.rep.BytesCopied += ref.Bytes
	}
	return nil
}

// copySegment copies segment ref of app a (through its bucket) to path,
// durably: path.tmp, fsync, rename (the caller syncs the directory).
func (b *backup) copySegment(ctx context.Context, a *App, ref *SegmentRef, path string) error {
	obj, err := a.bucket.Open(ctx, ref.File)
	if err != nil {
		return fmt.Errorf("open segment %s: %w", a.bucket.Describe(ref.File), err)
	}
	defer obj.Close()
	size, err := obj.Size()
	if err != nil {
		return fmt.Errorf("segment %s: %w", a.bucket.Describe(ref.File), err)
	}
	if size != ref.Bytes {
		return &CorruptionError{Path: a.bucket.Describe(ref.File), Msg: fmt.Sprintf("the catalog says %d bytes, the file has %d", ref.Bytes, size)}
	}
	return b.writeFile(path, io.NewSectionReader(obj, 0, size))
}

// writeFile writes r's bytes to path durably: path.tmp, fsync, rename
// (the caller syncs the directory).
func (b *backup) writeFile(path string, r io.Reader) error {
	tmp := path + tmpSuffix
	f, err := b.s.fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = io.CopyBuffer(struct{ io.Writer }{f}, r, b.buf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = b.s.fs.Rename(tmp, path)
	}
	if err != nil {
		b.s.fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// checkSegmentFile checks the segment file at path against its catalog
// entry, cheaply: its size, its header, trailer and footer checksums and
// the footer's identity and ranges (not every chunk: `spur verify` and
// restore do that).
func checkSegmentFile(fsys vfs.FS, path string, ref *SegmentRef) error {
	f, err := fsys.Open(path)
	if err != nil {
		return err
	}
	obj := &fileObject{File: f, size: -1}
	defer obj.Close()
	r, err := openReader(obj, path)
	if err != nil {
		return err
	}
	if r.Size() != ref.Bytes {
		return &CorruptionError{Path: path, Msg: fmt.Sprintf("the catalog says %d bytes, the file has %d", ref.Bytes, r.Size())}
	}
	return checkFooter(*ref, r.Meta(), path)
}

// identity writes the id graph prefix catalog c publishes to both files
// of the backup's app directory appDir (read from the store's graph file,
// or its copy when that is damaged).
func (b *backup) identity(a *App, c *Catalog, appDir string) error {
	if c.Identity == (IdentityPos{}) {
		return nil
	}
	p1, p2 := a.identityPaths()
	data, err1 := identityPrefix(b.s.fs, p1, c.Identity)
	if err1 != nil {
		var err2 error
		if data, err2 = identityPrefix(b.s.fs, p2, c.Identity); err2 != nil {
			return fmt.Errorf("backup: app %q: id graph: %w", a.name, errors.Join(err1, err2))
		}
	}
	for _, n := range []string{identityName, identityCopyName} {
		if err := b.writeIfChanged(appDir, n, data); err != nil {
			return err
		}
	}
	return nil
}

// identityPrefix returns the first pos.Bytes bytes of the id graph file
// at path, checked: whole intact frames holding pos.Ops operations.
func identityPrefix(fsys vfs.FS, path string, pos IdentityPos) ([]byte, error) {
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &CorruptionError{Path: path, Msg: fmt.Sprintf("missing, but the catalog publishes %d bytes of it", pos.Bytes)}
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < pos.Bytes {
		return nil, &CorruptionError{Path: path, Offset: int64(len(b)), Msg: fmt.Sprintf("%d bytes, but the catalog publishes %d", len(b), pos.Bytes)}
	}
	b = b[:pos.Bytes]
	st, err := walkIdentity(path, b, func([]byte, uint32, uint64, int64) error { return nil })
	if err != nil {
		return nil, err
	}
	if st.end != pos.Bytes || st.ops != pos.Ops {
		return nil, &CorruptionError{Path: path, Offset: st.end,
			Msg: fmt.Sprintf("%d operations in %d bytes of whole frames, but the catalog publishes %d in %d", st.ops, st.end, pos.Ops, pos.Bytes)}
	}
	return b, nil
}

// writeIfChanged writes data to dir/name atomically unless the file holds
// exactly data already.
func (b *backup) writeIfChanged(dir, name string, data []byte) error {
	if old, err := vfs.ReadFile(b.s.fs, filepath.Join(dir, name)); err == nil && string(old) == string(data) {
		return nil
	}
	if err := vfs.MkdirAllSync(b.s.fs, dir, 0o755); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// A copy: data stays the caller's (written twice for the id graph; a
	// test filesystem in a race build scrambles what it was given).
	if err := vfs.WriteFileAtomic(b.s.fs, dir, name, slices.Clone(data)); err != nil {
		return fmt.Errorf("backup: write %s: %w", filepath.Join(dir, name), err)
	}
	b.rep.MetaBytes += int64(len(data))
	return nil
}

// docs copies every document of the collections under the store's
// directory from (an app's or the store's meta directory) to the
// backup's directory to, each checked (decodeDoc) and written atomically
// when it changed. It returns what it kept, as paths relative to to:
// "COLL/" for each collection and "COLL/ID.doc" for each document.
func (b *backup) docs(ctx context.Context, app, from, to string) ([]string, error) {
	colls, err := b.s.fs.List(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	var keep []string
	for _, coll := range colls {
		if !collectionRE.MatchString(coll) {
			continue
		}
		if fi, err := b.s.fs.Stat(filepath.Join(from, coll)); err != nil || !fi.IsDir() {
			continue
		}
		dc := DocCollection{App: app, Collection: coll}
		ids, err := b.src.ListDocs(ctx, dc)
		if err != nil {
			return nil, fmt.Errorf("backup: list %s: %w", filepath.Join(from, coll), err)
		}
		keep = append(keep, coll+"/")
		for _, id := range ids {
			data, err := b.src.ReadDoc(ctx, dc, id)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since listed
			}
			if err != nil {
				return nil, fmt.Errorf("backup: %w", err)
			}
			if _, err := decodeDoc(data, b.src.docPath(dc, id), id); err != nil {
				return nil, fmt.Errorf("backup: a damaged document (`spur verify`): %w", err)
			}
			if err := b.writeIfChanged(filepath.Join(to, coll), id+docExt, data); err != nil {
				return nil, err
			}
			keep = append(keep, coll+"/"+id+docExt)
			b.rep.Documents++
		}
	}
	return keep, nil
}

// legacyCohorts copies an app's cohorts.json of a store from before
// document collections, when it has one.
func (b *backup) legacyCohorts(app, appDir string) error {
	data, _, err := b.src.legacyCohorts(app)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if data == nil {
		return b.remove(filepath.Join(appDir, legacyCohorts))
	}
	return b.writeIfChanged(appDir, legacyCohorts, data)
}

// prune removes from the backup's directory dir what keep (paths relative
// to dir; "X/" keeps directory X) does not name, one level of
// subdirectories deep, and syncs what changed. Only segment files,
// documents, collections and temporary files are ever there.
func (b *backup) prune(dir string, keep []string) error {
	names, err := b.s.fs.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	removed := false
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := b.s.fs.Stat(p)
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		if !fi.IsDir() {
			if !slices.Contains(keep, n) {
				if err := b.remove(p); err != nil {
					return err
				}
				removed = true
			}
			continue
		}
		if !slices.Contains(keep, n+"/") {
			if err := b.removeAll(p); err != nil {
				return err
			}
			removed = true
			continue
		}
		var sub []string
		for _, k := range keep {
			if rest, ok := strings.CutPrefix(k, n+"/"); ok && rest != "" {
				sub = append(sub, rest)
			}
		}
		if err := b.prune(p, append(sub, metaLock)); err != nil {
			return err
		}
	}
	if removed {
		if err := vfs.SyncDir(b.s.fs, dir); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
	}
	return nil
}

// remove removes file path of the backup when it exists, counting it.
func (b *backup) remove(path string) error {
	err := b.s.fs.Remove(path)
	switch {
	case err == nil:
		if !strings.HasSuffix(path, tmpSuffix) {
			b.rep.FilesRemoved++
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return fmt.Errorf("backup: %w", err)
}

// removeAll removes directory path of the backup, when it exists, with
// everything in it, its catalog first (so that it stops being an app at
// once), and syncs its parent.
func (b *backup) removeAll(path string) error {
	if ok, err := vfs.Exists(b.s.fs, path); err != nil {
		return fmt.Errorf("backup: %w", err)
	} else if !ok {
		return nil
	}
	if err := b.remove(filepath.Join(path, catalogName)); err != nil {
		return err
	}
	if err := removeTree(b.s.fs, path, b.remove); err != nil {
		return err // b.remove's are "backup: …", the rest name their path
	}
	return vfs.SyncDir(b.s.fs, filepath.Dir(path))
}

// eraseIfPending completes app's pending erasures in st (Store.Erase),
// if it has any (also those its write-ahead log replayed).
func eraseIfPending(ctx context.Context, st *Store, app string) error {
	a, err := st.App(app)
	if err != nil {
		return err
	}
	v, err := a.Acquire() // the live layer's requests too
	if err != nil {
		return err
	}
	pending := slices.ContainsFunc(v.Deletions, func(d Deletion) bool { return d.Pending() })
	v.Release()
	if !pending {
		return nil
	}
	_, err = st.Erase(ctx, app)
	return err
}

// RestoreOptions configures Restore.
type RestoreOptions struct {
	// FS is the filesystem of both directories; nil means the operating
	// system's.
	FS vfs.FS
	// Copy copies the segment files instead of hard-linking them to the
	// backup's (BackupOptions.Copy).
	Copy bool
	// Logger receives the stores' logs; nil means slog.Default().
	Logger *slog.Logger
}

// RestoreReport says what Restore made.
type RestoreReport struct {
	// Backup is the record of the backup restored (when it was taken,
	// from where, which versions).
	Backup *BackupRecord `json:"backup"`
	// Copy is what was linked or copied into the new store.
	Copy *BackupReport `json:"copy"`
	// Verify is `spur verify`'s report of each app of the new store.
	Verify []*VerifyReport `json:"verify"`
}

// Findings returns the number of verify findings over every app.
func (r *RestoreReport) Findings() int {
	n := 0
	for _, v := range r.Verify {
		n += len(v.Findings)
	}
	return n
}

// Restore makes a new store in directory to from the complete backup in
// directory from (docs/storage.md §8): it refuses an incomplete backup
// (ErrIncompleteBackup), a directory that is not a backup (fs.ErrNotExist)
// and a non-empty to; hard-links (or with opt.Copy copies) each app's
// segment files and writes its catalog, settings, id graph and documents,
// and the store's documents, as Store.Backup does (a crash leaves to
// marked incomplete); replays the backup's write-ahead-log records
// (live events the backed-up version held) and flushes them, as spur
// serve would at start, and completes the pending erasures (Store.Erase);
// then runs Store.Verify on every app of the new
// store. The versions restored must be the record's. A restore whose
// copy succeeded returns the report also when verify has findings
// (RestoreReport.Findings), with an error saying how many.
func Restore(ctx context.Context, from, to string, opt RestoreOptions) (*RestoreReport, error) {
	fsys := opt.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	rec, err := ReadBackup(fsys, from)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	src, err := Open(Config{Dir: from, FS: fsys, ReadOnly: true, Logger: opt.Logger, Holder: "spur restore"})
	if err != nil {
		return nil, fmt.Errorf("restore: open the backup: %w", err)
	}
	rep := &RestoreReport{Backup: rec}
	rep.Copy, err = src.Backup(ctx, to, BackupOptions{Copy: opt.Copy, Holder: "spur restore", restore: true})
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, fmt.Errorf("restore %s into %s: %w", from, to, err)
	}
	got := map[string]BackupApp{}
	for _, a := range rep.Copy.Apps {
		got[a.App] = a
	}
	for _, a := range rec.Apps {
		if g, ok := got[a.App]; !ok || g.Generation != a.Generation || g.LogRecords != a.LogRecords || g.LogSeq != a.LogSeq {
			return rep, fmt.Errorf("restore: the backup record names app %q at catalog generation %d with %d log records, the backup holds %d with %d (0: none): the backup directory was changed or damaged: %w",
				a.App, a.Generation, a.LogRecords, g.Generation, g.LogRecords, ErrCorruption)
		}
	}
	if len(got) != len(rec.Apps) {
		return rep, fmt.Errorf("restore: the backup holds %d apps, its record %d: the backup directory was changed: %w", len(got), len(rec.Apps), ErrCorruption)
	}
	// Apply the backed-up log records as spur serve would at start, and
	// flush them: the new store holds them in segments. Then complete
	// the pending erasures (docs/storage.md §8).
	w, err := Open(Config{Dir: to, FS: fsys, Writer: true, Live: &LiveOptions{}, Logger: opt.Logger, Holder: "spur restore"})
	if err != nil {
		return rep, fmt.Errorf("restore: replay the backup's write-ahead logs: %w", err)
	}
	for _, a := range rec.Apps {
		if err := eraseIfPending(ctx, w, a.App); err != nil {
			w.Close()
			return rep, fmt.Errorf("restore: complete the erasures: %w", err)
		}
	}
	if err := w.CloseContext(ctx); err != nil {
		return rep, fmt.Errorf("restore: flush the backup's write-ahead logs: %w", err)
	}
	dst, err := Open(Config{Dir: to, FS: fsys, ReadOnly: true, Logger: opt.Logger})
	if err != nil {
		return rep, fmt.Errorf("restore: open the new store: %w", err)
	}
	defer dst.Close()
	apps, err := dst.AppDirs()
	if err != nil {
		return rep, fmt.Errorf("restore: %w", err)
	}
	for _, app := range apps {
		if a, err := dst.App(app); err == nil && a.Current().LogSeq < got[app].LogSeq {
			return rep, fmt.Errorf("restore: app %q holds the write-ahead-log records up to %d, the backup up to %d: its log was not applied (see the log above): %w",
				app, a.Current().LogSeq, got[app].LogSeq, ErrCorruption)
		}
		v, err := dst.Verify(ctx, app)
		if err != nil {
			return rep, fmt.Errorf("restore: verify app %q: %w", app, err)
		}
		rep.Verify = append(rep.Verify, v)
	}
	if n := rep.Findings(); n > 0 {
		return rep, fmt.Errorf("restore: verify of the new store %s found %d problems", to, n)
	}
	return rep, nil
}
