package storage

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
)

// Files of an app directory (docs/storage.md):
//
//	CATALOG        the current catalog (replaced atomically)
//	SETTINGS       the second copy of the app's settings (shards, tz, schema)
//	LOCK           the app's writer lock (its holder's description inside)
//	seg/*.seg      segment files
//	manifest.json  the catalog of stores written before catalogs existed
//	               (read, then replaced by CATALOG at the first write)
const (
	catalogName        = "CATALOG"
	settingsName       = "SETTINGS"
	legacyManifestName = "manifest.json"
	segDir             = "seg"
)

// fileMetastore keeps an app's catalog in DIR/apps/APP/CATALOG: the
// catalog part of the file Metastore (fileMeta).
type fileMetastore struct {
	fs  vfs.FS
	dir string

	mu       sync.Mutex   // guards known and knownGen
	known    CatalogStamp // the stamp of the catalog this process last loaded or wrote
	knownGen uint64       // its generation
}

// remember records that the catalog with stamp st is at generation gen.
func (m *fileMetastore) remember(st CatalogStamp, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known, m.knownGen = st, gen
}

// generation returns the generation of the catalog on disk (0: none):
// the remembered one when the file's stamp is the remembered stamp,
// else read from the file.
func (m *fileMetastore) generation() (uint64, error) {
	st, err := m.stamp()
	if err != nil {
		return 0, fmt.Errorf("stat catalog: %w", err)
	}
	m.mu.Lock()
	known, gen := m.known, m.knownGen
	m.mu.Unlock()
	if st == known && st != (CatalogStamp{}) {
		return gen, nil
	}
	c, st, err := m.load()
	switch {
	case errors.Is(err, ErrNoCatalog):
		return 0, nil
	case err != nil:
		return 0, err
	}
	m.remember(st, c.Generation)
	return c.Generation, nil
}

func (m *fileMetastore) path() string { return filepath.Join(m.dir, catalogName) }

// stamp returns the catalog file's current stamp (zero when missing).
func (m *fileMetastore) stamp() (CatalogStamp, error) {
	fi, err := m.fs.Stat(m.path())
	if errors.Is(err, fs.ErrNotExist) {
		fi, err = m.fs.Stat(filepath.Join(m.dir, legacyManifestName))
		if errors.Is(err, fs.ErrNotExist) {
			return CatalogStamp{}, nil
		}
	}
	if err != nil {
		return CatalogStamp{}, err
	}
	return CatalogStamp{A: fi.Size(), B: fi.ModTime().UnixNano()}, nil
}

// load reads the app's current catalog and the stamp of its file. It
// returns an error matching ErrNoCatalog when there is none (no CATALOG
// and no manifest.json), ErrCorruption or ErrUnsupportedVersion when it
// cannot be read.
func (m *fileMetastore) load() (*Catalog, CatalogStamp, error) {
	st, err := m.stamp()
	if err != nil {
		return nil, st, fmt.Errorf("stat catalog: %w", err)
	}
	b, err := vfs.ReadFile(m.fs, m.path())
	if errors.Is(err, fs.ErrNotExist) {
		c, lerr := m.loadLegacy()
		return c, st, lerr
	}
	if err != nil {
		return nil, st, fmt.Errorf("read catalog: %w", err)
	}
	c, err := decodeCatalog(m.path(), b)
	if err == nil && c.App != filepath.Base(m.dir) {
		err = &CorruptionError{Path: m.path(), Msg: fmt.Sprintf("catalog of app %q in the directory of app %q", c.App, filepath.Base(m.dir))}
	}
	return c, st, err
}

// isLegacy reports whether the app's catalog is still a manifest.json
// (no CATALOG file yet: nor a SETTINGS file).
func (m *fileMetastore) isLegacy() bool {
	ok, err := vfs.Exists(m.fs, m.path())
	return err == nil && !ok
}

// publish makes next the app's catalog atomically (write CATALOG.tmp,
// fsync, rename, fsync the directory), after writing SETTINGS when the
// settings changed from prev's (nil: never written), the file holds
// others (a crash between a publication's two writes left the ones that
// were not published) or the app had only a manifest.json. An error from the
// final directory fsync leaves the new catalog in place but perhaps not
// durable: the error says so, and the caller adopts next. It removes a
// legacy manifest.json once the catalog replacing it is durable.
func (m *fileMetastore) publish(prev, next *Catalog) (inPlace bool, err error) {
	if s := next.settings(); prev == nil || prev.Generation == 0 || !s.equal(ptr(prev.settings())) || m.isLegacy() || !m.settingsAre(&s) {
		if err := vfs.WriteFileAtomic(m.fs, m.dir, settingsName, encodeSettings(&s)); err != nil {
			return false, fmt.Errorf("write settings: %w", err)
		}
	}
	err = vfs.WriteFileAtomic(m.fs, m.dir, catalogName, encodeCatalog(next))
	if err != nil {
		if ok, _ := vfs.Exists(m.fs, filepath.Join(m.dir, catalogName+".tmp")); !ok {
			if b, rerr := vfs.ReadFile(m.fs, m.path()); rerr == nil {
				if c, derr := decodeCatalog(m.path(), b); derr == nil && c.Generation == next.Generation {
					return true, fmt.Errorf("the new catalog is in place but may not be durable: %w", err)
				}
			}
		}
		return false, fmt.Errorf("publish catalog: %w", err)
	}
	if ok, _ := vfs.Exists(m.fs, filepath.Join(m.dir, legacyManifestName)); ok {
		if err := m.fs.Remove(filepath.Join(m.dir, legacyManifestName)); err == nil {
			vfs.SyncDir(m.fs, m.dir)
		}
	}
	return true, nil
}

func ptr[T any](v T) *T { return &v }

// settingsAre reports whether the app's SETTINGS file holds s (false
// when it cannot be read).
func (m *fileMetastore) settingsAre(s *Settings) bool {
	cur, err := m.loadSettings()
	return err == nil && cur.equal(s)
}

// loadSettings reads the app's SETTINGS file (for recovery).
func (m *fileMetastore) loadSettings() (*Settings, error) {
	p := filepath.Join(m.dir, settingsName)
	b, err := vfs.ReadFile(m.fs, p)
	if err != nil {
		return nil, err
	}
	return decodeSettings(p, b)
}

// dirBucket is the file Bucket: an app's segment files in
// DIR/apps/APP/seg, written through the store's vfs.FS.
type dirBucket struct {
	fs  vfs.FS
	dir string
}

var _ Bucket = (*dirBucket)(nil)

func (b *dirBucket) path(name string) string { return filepath.Join(b.dir, name) }

// Describe returns the file's path.
func (b *dirBucket) Describe(name string) string { return b.path(name) }

// Create creates segment file name for writing (the directory on first
// use).
func (b *dirBucket) Create(_ context.Context, name string) (segment.File, error) {
	f, err := b.fs.Create(b.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		if err = vfs.MkdirAllSync(b.fs, b.dir, 0o755); err == nil {
			f, err = b.fs.Create(b.path(name))
		}
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Open opens segment file name; its size is the file's (a stat at the
// first Size call).
func (b *dirBucket) Open(_ context.Context, name string) (Object, error) {
	f, err := b.fs.Open(b.path(name))
	if err != nil {
		return nil, err
	}
	return &fileObject{File: f, size: -1}, nil
}

// Remove removes segment file name.
func (b *dirBucket) Remove(_ context.Context, name string) error { return b.fs.Remove(b.path(name)) }

// List returns the names of the segment files (none when the directory
// does not exist).
func (b *dirBucket) List(context.Context) ([]string, error) {
	names, err := b.fs.List(b.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return names, err
}

// SyncNames makes the names of the files created so far durable (an
// fsync of the directory, created if missing).
func (b *dirBucket) SyncNames(context.Context) error {
	if err := vfs.MkdirAllSync(b.fs, b.dir, 0o755); err != nil {
		return err
	}
	return vfs.SyncDir(b.fs, b.dir)
}

// fileObject is an open segment file as an Object. Size stats the file
// once (not at open: a version opens every file it references, and most
// are read later or never). ReadAt and Close are the file's.
type fileObject struct {
	vfs.File
	once sync.Once
	size int64
	err  error
}

func (o *fileObject) Size() (int64, error) {
	o.once.Do(func() {
		fi, err := o.File.Stat()
		if err != nil {
			o.err = err
			return
		}
		o.size = fi.Size()
	})
	return o.size, o.err
}

// Segment file names are deterministic: a run of arrival rank seq of one
// shard and kind written for catalog generation gen is
// "e-SHARD-SEQMIN-SEQMAX-gGEN-PART.seg" ("u-" for users segments), PART
// numbering the outputs of one compaction. A write retried after a crash
// writes the same names; stores from before catalogs (manifest.json)
// used "e-SHARD-SEQ.seg" for imports and "e-SHARD-SEQ-cGEN-PART.seg" for
// compactions.
var segNameRE = regexp.MustCompile(`^([eu])-([0-9]{4})-[0-9]+(-[0-9]+-g[0-9]+-[0-9]+|-c[0-9]+-[0-9]+)?\.seg$`)

func segmentName(kind SegmentKind, shard int, seqMin, seqMax int64, gen uint64, part int) string {
	k := "e"
	if kind == KindUsers {
		k = "u"
	}
	return fmt.Sprintf("%s-%04d-%d-%d-g%d-%d.seg", k, shard, seqMin, seqMax, gen, part)
}

func validSegmentName(name string) bool { return segNameRE.MatchString(name) }

// nameKindShard returns the kind and shard a segment file name says.
func nameKindShard(name string) (SegmentKind, int, bool) {
	m := segNameRE.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, false
	}
	kind := KindEvents
	if m[1] == "u" {
		kind = KindUsers
	}
	sh, _ := strconv.Atoi(m[2])
	return kind, sh, true
}

// loadLegacy reads a manifest.json of a store written before catalogs
// (format version 1), strictly: unknown or missing fields and values out
// of range are corruption, never zero values. Its segments take arrival
// ranges [seq, seq]. ErrNoCatalog when there is none.
func (m *fileMetastore) loadLegacy() (*Catalog, error) {
	p := filepath.Join(m.dir, legacyManifestName)
	b, err := vfs.ReadFile(m.fs, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("app %q: %w", filepath.Base(m.dir), ErrNoCatalog)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	type legacySeg struct {
		File      *string `json:"file"`
		Kind      *string `json:"kind"`
		Shard     *int    `json:"shard"`
		Seq       *int64  `json:"seq"`
		Rows      *int64  `json:"rows"`
		Users     *int64  `json:"users"`
		MinTime   *int64  `json:"min_time"`
		MaxTime   *int64  `json:"max_time"`
		Bytes     *int64  `json:"bytes"`
		FirstHash uint64  `json:"first_hash"`
		LastHash  uint64  `json:"last_hash"`
	}
	var lm struct {
		FormatVersion *int             `json:"format_version"`
		App           *string          `json:"app"`
		Shards        *int             `json:"shards"`
		TZ            string           `json:"tz"`
		Generation    *int64           `json:"generation"`
		NextSeq       *int64           `json:"next_seq"`
		EventProps    []event.PropType `json:"event_props"`
		UserProps     []event.PropType `json:"user_props"`
		Segments      []legacySeg      `json:"segments"`
	}
	bad := func(format string, args ...any) error {
		return &CorruptionError{Path: p, Msg: fmt.Sprintf(format, args...)}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&lm); err != nil {
		return nil, bad("%v (at byte %d)", err, dec.InputOffset())
	}
	if dec.More() {
		return nil, bad("data after the manifest object")
	}
	switch {
	case lm.FormatVersion == nil || *lm.FormatVersion != 1:
		return nil, bad("missing or unknown format_version")
	case lm.App == nil || *lm.App != filepath.Base(m.dir):
		return nil, bad("missing or wrong app")
	case lm.Shards == nil || !validShards(uint64(max(*lm.Shards, 0))):
		return nil, bad("missing shards or not a power of two in [1, %d]", MaxShards)
	case lm.Generation == nil || *lm.Generation < 0 || lm.NextSeq == nil || *lm.NextSeq < 0:
		return nil, bad("missing generation or next_seq")
	}
	if err := checkTZ(lm.TZ); err != nil {
		return nil, bad("tz: %v", err)
	}
	c := &Catalog{App: *lm.App, Generation: uint64(*lm.Generation), Shards: *lm.Shards, TZ: lm.TZ,
		NextSeq: *lm.NextSeq, EventProps: lm.EventProps, UserProps: lm.UserProps}
	for i, s := range lm.Segments {
		if s.File == nil || s.Kind == nil || s.Shard == nil || s.Seq == nil || s.Rows == nil || s.Users == nil ||
			s.MinTime == nil || s.MaxTime == nil || s.Bytes == nil {
			return nil, bad("segment %d: a field is missing", i)
		}
		kind := KindEvents
		switch *s.Kind {
		case "events":
		case "users":
			kind = KindUsers
		default:
			return nil, bad("segment %d: kind %q", i, *s.Kind)
		}
		ref := SegmentRef{File: *s.File, Kind: kind, Shard: *s.Shard, SeqMin: *s.Seq, SeqMax: *s.Seq,
			Rows: *s.Rows, Users: *s.Users, MinTime: *s.MinTime, MaxTime: *s.MaxTime, Bytes: *s.Bytes,
			FirstHash: s.FirstHash, LastHash: s.LastHash}
		k, sh, ok := nameKindShard(ref.File)
		switch {
		case !ok || k != ref.Kind || sh != ref.Shard:
			return nil, bad("segment %d: file name %q disagrees with kind %s shard %d", i, ref.File, ref.Kind, ref.Shard)
		case ref.Shard < 0 || ref.Shard >= c.Shards:
			return nil, bad("segment %d: shard %d out of range", i, ref.Shard)
		case ref.SeqMin < 0 || ref.SeqMax >= c.NextSeq || ref.Rows < 1 || ref.Users < 1 || ref.Users > ref.Rows ||
			ref.MinTime > ref.MaxTime || ref.Bytes < 1 || ref.FirstHash > ref.LastHash:
			return nil, bad("segment %d (%s): a value is out of range", i, ref.File)
		}
		c.Segments = append(c.Segments, ref)
	}
	sortSegments(c.Segments)
	// Re-encode and decode strictly: the same checks as a catalog file.
	if _, err := decodeCatalog(p, encodeCatalog(c)); err != nil {
		return nil, err
	}
	return c, nil
}

// sortSegments orders segments as a catalog keeps them: by (SeqMax,
// FirstHash, File).
func sortSegments(segs []SegmentRef) {
	slices.SortStableFunc(segs, func(x, y SegmentRef) int {
		switch {
		case x.SeqMax != y.SeqMax:
			return cmp.Compare(x.SeqMax, y.SeqMax)
		case x.FirstHash != y.FirstHash:
			if x.FirstHash < y.FirstHash {
				return -1
			}
			return 1
		}
		return strings.Compare(x.File, y.File)
	})
}
