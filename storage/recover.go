package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
	"github.com/spurdb/spur/storage/wal"
)

// asideDir is where recovery moves what it does not keep: damaged or
// superseded segment files and a damaged catalog (never deleted).
const asideDir = "aside"

// RecoverReport says what App recovery kept and set aside.
type RecoverReport struct {
	App        string   `json:"app"`
	Generation uint64   `json:"generation"` // of the rebuilt catalog
	Kept       []string `json:"kept"`       // segment files in the rebuilt catalog
	Rows       int64    `json:"rows"`       // rows in them
	// SetAside lists the files moved to DIR/apps/APP/aside/, with why.
	SetAside []AsideFile `json:"set_aside"`
	// Warnings are other things the operator should know (settings taken
	// from the footers, properties whose types disagree).
	Warnings []string `json:"warnings,omitempty"`
	// Log is what recovery did with a damaged write-ahead log (nil when
	// the app has none, or it opened cleanly).
	Log *LogRecovery `json:"log,omitempty"`
}

// LogRecovery describes the salvage of a damaged write-ahead log
// (docs/ingest.md §2): the damaged log was set aside (SetAside), a new one
// holds every intact record after the catalog's log position (Kept,
// FirstSeq..LastSeq), and Lost lists every damaged byte range with the
// records it cost.
type LogRecovery struct {
	Damage   string          `json:"damage"` // why the log did not open
	Kept     int64           `json:"records_kept"`
	FirstSeq uint64          `json:"first_seq,omitempty"`
	LastSeq  uint64          `json:"last_seq,omitempty"`
	Lost     []wal.LostRange `json:"lost"` // every damaged range (String gives one line)
}

// AsideFile is a file recovery set aside: its original path, where it is
// now, and why.
type AsideFile struct {
	File   string `json:"file"`
	Moved  string `json:"moved_to"`
	Reason string `json:"reason"`
}

// segIdentity is what recovery knows of a segment file: from its name
// (kind, shard, arrival range, generation, part) and footer.
type segIdentity struct {
	ref  SegmentRef
	part int
}

// identityFromName parses a segment file name (segmentName's form, or the
// pre-catalog "e-SHARD-SEQ.seg").
func identityFromName(name string) (segIdentity, bool) {
	kind, shard, ok := nameKindShard(name)
	if !ok {
		return segIdentity{}, false
	}
	id := segIdentity{ref: SegmentRef{File: name, Kind: kind, Shard: shard}}
	var fields []int64
	for _, f := range splitName(name[7 : len(name)-4]) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return segIdentity{}, false
		}
		fields = append(fields, v)
	}
	switch len(fields) {
	case 1:
		id.ref.SeqMin, id.ref.SeqMax = fields[0], fields[0]
	case 4:
		id.ref.SeqMin, id.ref.SeqMax, id.ref.Generation, id.part = fields[0], fields[1], uint64(fields[2]), int(fields[3])
	default:
		return segIdentity{}, false
	}
	return id, id.ref.SeqMin >= 0 && id.ref.SeqMin <= id.ref.SeqMax
}

// splitName splits "5-9-g3-0" into ["5", "9", "3", "0"].
func splitName(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '-' {
			f := s[start:i]
			if len(f) > 0 && f[0] == 'g' {
				f = f[1:]
			}
			out = append(out, f)
			start = i + 1
		}
	}
	return out
}

// Recover rebuilds app appName's catalog from its segment files' footers
// (docs/storage.md §3; `spur recover`): it verifies every segment file
// completely, keeps the intact ones, and sets aside (moves to
// DIR/apps/APP/aside/, never deletes) the damaged ones, those superseded
// by a compaction output covering their arrival range, and the damaged
// catalog. The settings (shards, time zone, schema) come from the
// settings file, else from the footers and the store's defaults (with a
// warning). It takes the app's writer role like a write. The rebuilt
// catalog answers as the last published one did when every file that
// one referenced is intact. Then the app's write-ahead log, if any, is
// opened (a torn tail cut) and, when damaged elsewhere, salvaged
// (recoverLog; RecoverReport.Log). Errors: ctx.Err(), I/O failures, a
// *LockedError, or no segment file, no settings and no log (nothing to
// recover).
func (s *Store) Recover(ctx context.Context, appName string) (*RecoverReport, error) {
	if !ValidAppName(appName) {
		return nil, fmt.Errorf("invalid app name %q", appName)
	}
	if s.cfg.Metastore != nil || s.cfg.Buckets != nil || s.cfg.Logs != nil {
		return nil, fmt.Errorf("app %q: recovery moves damaged files aside: it works on the files, not on Config.Metastore, Buckets or Logs", appName)
	}
	a, err := s.appForRecovery(appName)
	if err != nil {
		return nil, err
	}
	t, err := a.takeRole()
	if err != nil {
		return nil, err
	}
	defer t.end()
	rep := &RecoverReport{App: appName}
	stamp := time.Now().UTC().Format("20060102T150405")
	aside := func(path, reason string) error {
		dst := filepath.Join(a.dir, asideDir, filepath.Base(path)+"."+stamp)
		if err := s.fs.MkdirAll(filepath.Join(a.dir, asideDir), 0o755); err != nil {
			return err
		}
		if err := s.fs.Rename(path, dst); err != nil {
			return fmt.Errorf("set aside %s: %w", path, err)
		}
		rep.SetAside = append(rep.SetAside, AsideFile{File: path, Moved: dst, Reason: reason})
		return nil
	}

	old, _, oerr := a.ms.load()
	var oldGen, logSeq uint64
	switch {
	case oerr == nil:
		oldGen, logSeq = old.Generation, old.LogSeq
	case errors.Is(oerr, ErrNoCatalog):
	case errors.Is(oerr, ErrUnsupportedVersion):
		return rep, fmt.Errorf("app %q: %w: recover it with the build that wrote it", appName, oerr)
	default:
		if err := aside(a.ms.path(), oerr.Error()); err != nil {
			return rep, err
		}
	}
	settings, serr := a.ms.loadSettings()
	if serr != nil {
		settings = nil
		if !errors.Is(serr, fs.ErrNotExist) {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("settings file unreadable (%v): settings taken from the footers", serr))
		}
	}

	names, err := a.bucket.List(ctx)
	if err != nil {
		return rep, fmt.Errorf("list segments: %w", err)
	}
	type cand struct {
		id   segIdentity
		meta *segment.Meta
	}
	var cands []cand
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		id, ok := identityFromName(name)
		if !ok {
			if filepath.Ext(name) == ".tmp" {
				if err := aside(a.bucket.Describe(name), "an unfinished temporary file"); err != nil {
					return rep, err
				}
			} else {
				rep.Warnings = append(rep.Warnings, "not a segment file name, left alone: "+a.bucket.Describe(name))
			}
			continue
		}
		meta, size, verr := verifiedMeta(ctx, a.bucket, name)
		if verr != nil {
			if !errors.Is(verr, ErrCorruption) && !errors.Is(verr, segment.ErrNewerVersion) {
				return rep, verr
			}
			if err := aside(a.bucket.Describe(name), verr.Error()); err != nil {
				return rep, err
			}
			continue
		}
		if fid := meta.Identity; fid.Kind != segment.KindNone &&
			(fid.Kind != id.ref.Kind.segmentKind() || fid.Shard != id.ref.Shard || fid.SeqMin != id.ref.SeqMin ||
				fid.SeqMax != id.ref.SeqMax || fid.Generation != id.ref.Generation) {
			// The footer (checksummed) and the name disagree: the name was
			// changed, or the file is not what it says.
			if err := aside(a.bucket.Describe(name), fmt.Sprintf("its footer says %v shard %d, arrival range %d..%d, generation %d; its name says otherwise",
				fid.Kind, fid.Shard, fid.SeqMin, fid.SeqMax, fid.Generation)); err != nil {
				return rep, err
			}
			continue
		}
		r := &id.ref
		r.Rows, r.Users, r.MinTime, r.MaxTime, r.Bytes = meta.Rows, meta.Users, meta.MinTime, meta.MaxTime, size
		if n := len(meta.Blocks); n > 0 {
			r.FirstHash, r.LastHash = meta.Blocks[0].FirstHash, meta.Blocks[n-1].LastHash
		}
		if r.Rows == 0 {
			if err := aside(a.bucket.Describe(name), "an empty segment"); err != nil {
				return rep, err
			}
			continue
		}
		cands = append(cands, cand{id, meta})
	}

	// Per shard and kind, keep the newest generation's segments and set
	// aside those whose arrival range they cover (the inputs of a
	// compaction that was published, or whose publication was lost with
	// the catalog). Segments of one generation and range are the parts of
	// one compaction output.
	slices.SortFunc(cands, func(x, y cand) int {
		return cmp.Or(cmp.Compare(y.id.ref.Generation, x.id.ref.Generation), cmp.Compare(x.id.ref.SeqMin, y.id.ref.SeqMin),
			cmp.Compare(x.id.part, y.id.part))
	})
	type kept struct {
		kind  SegmentKind
		shard int
		lo    int64
		hi    int64
		gen   uint64
	}
	var keptRanges []kept
	var segs []SegmentRef
	maxShard := -1
	for _, c := range cands {
		r := c.id.ref
		covered := false
		for _, k := range keptRanges {
			if k.kind == r.Kind && k.shard == r.Shard && r.SeqMin <= k.hi && k.lo <= r.SeqMax &&
				!(k.gen == r.Generation && k.lo == r.SeqMin && k.hi == r.SeqMax) {
				covered = true
				break
			}
		}
		if covered {
			if err := aside(a.bucket.Describe(r.File), "superseded: a newer segment covers its arrival range"); err != nil {
				return rep, err
			}
			continue
		}
		keptRanges = append(keptRanges, kept{r.Kind, r.Shard, r.SeqMin, r.SeqMax, r.Generation})
		segs = append(segs, r)
		maxShard = max(maxShard, r.Shard)
	}

	c := &Catalog{App: appName, LogSeq: logSeq}
	// Deletion requests: the old catalog's, else the settings file's. A
	// segment keeps its deletion number from the old catalog; without
	// it, 0 hides every pending request's ids in it (until Erase).
	delSeq := map[string]uint64{}
	switch {
	case oerr == nil:
		c.DelSalt, c.Deletions = old.DelSalt, old.Deletions
		for _, r := range old.Segments {
			delSeq[r.File] = r.DelSeq
		}
	case settings != nil:
		c.DelSalt, c.Deletions = settings.DelSalt, settings.Deletions
	}
	if settings != nil {
		c.Shards, c.TZ, c.EventProps, c.UserProps, c.Retention = settings.Shards, settings.TZ, settings.EventProps, settings.UserProps, settings.Retention
		if oerr != nil {
			c.LogSeq = settings.LogSeq
		}
	} else {
		if len(segs) == 0 {
			if ok, _ := s.logs.HasLog(ctx, appName); ok {
				// Live events never flushed: only the log to check.
				return rep, a.recoverLog(ctx, 0, rep, aside)
			}
			return rep, fmt.Errorf("app %q: nothing to recover: no intact segment file, no settings file and no write-ahead log", appName)
		}
		c.Shards = s.cfg.Shards
		for c.Shards <= maxShard {
			c.Shards *= 2
		}
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("no settings file: %d shards (the store's default, or the largest shard seen), time zone UTC", c.Shards))
	}
	// Every footer's properties must be in the schema, with its type.
	for _, cd := range cands {
		props := &c.EventProps
		if cd.id.ref.Kind == KindUsers {
			props = &c.UserProps
		}
		for k, p := range cd.meta.Props {
			if k == insertIDColumn(cd.meta) {
				continue
			}
			i := slices.IndexFunc(*props, func(q event.PropType) bool { return q.Name == p.Name })
			switch {
			case i < 0:
				*props = append(*props, event.PropType{Name: p.Name, Type: p.Type})
			case (*props)[i].Type != p.Type:
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("property %q is %v in %s but %v in the schema", p.Name, p.Type, cd.id.ref.File, (*props)[i].Type))
			}
		}
	}
	for _, r := range segs {
		if r.Shard >= c.Shards {
			if err := aside(a.bucket.Describe(r.File), fmt.Sprintf("shard %d is outside the app's %d shards", r.Shard, c.Shards)); err != nil {
				return rep, err
			}
			continue
		}
		r.DelSeq = delSeq[r.File]
		c.Segments = append(c.Segments, r)
		c.NextSeq = max(c.NextSeq, r.SeqMax+1)
		c.Generation = max(c.Generation, r.Generation)
		rep.Kept = append(rep.Kept, r.File)
		rep.Rows += r.Rows
	}
	sortSegments(c.Segments)
	var oldIdentity *IdentityPos
	if oerr == nil {
		oldIdentity = &old.Identity
	}
	if err := a.recoverIdentity(oldIdentity, rep); err != nil {
		return rep, err
	}
	c.Generation = max(c.Generation, oldGen) + 1
	// Publish over whatever is there: the base is the empty catalog.
	t.base, t.force = &Catalog{App: appName, Generation: c.Generation - 1}, true
	if err := t.publish(c); err != nil {
		return rep, err
	}
	rep.Generation = c.Generation
	s.log.Info("recovered app catalog", "app", appName, "generation", c.Generation, "kept", len(rep.Kept), "set_aside", len(rep.SetAside))
	if err := a.recoverLog(ctx, c.LogSeq, rep, aside); err != nil {
		return rep, err
	}
	return rep, nil
}

// removeFlatDir removes directory dir and the files in it (none is a
// directory), if it exists: an unfinished salvage, which only recovery
// writes.
func removeFlatDir(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return fsys.Remove(dir)
}

// recoverLog checks the app's write-ahead log (if it has one) by opening
// it, which cuts a torn tail of its last file (a write never
// acknowledged); a log damaged elsewhere is salvaged (wal.Salvage): every
// intact record after logSeq goes into a new log, the damaged one is set
// aside, and rep.Log says what was kept and lost (docs/ingest.md §2).
func (a *App) recoverLog(ctx context.Context, logSeq uint64, rep *RecoverReport, aside func(path, reason string) error) error {
	fsys := a.store.fs
	dir := filepath.Join(a.dir, logDir)
	if ok, _ := vfs.Exists(fsys, dir); !ok {
		return nil
	}
	size := int64(0)
	if lo := a.store.cfg.Live; lo != nil {
		size = lo.LogFileSize
	}
	l, err := wal.Open(fsys, dir, wal.Options{FirstSeq: logSeq + 1, SegmentSize: size})
	if err == nil {
		if r, ok := l.Repair(); ok {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("write-ahead log: cut a torn tail of %s at offset %d (%d records never acknowledged): %s", r.File, r.Offset, r.Dropped, r.Reason))
		}
		last := l.Stats().LastSeq
		if cerr := l.Close(); cerr != nil {
			return cerr
		}
		if last >= logSeq {
			return nil
		}
		err = fmt.Errorf("the log ends at record %d, before the catalog's position %d: %w", last, logSeq, ErrCorruption)
	}
	if !errors.Is(err, ErrCorruption) {
		return fmt.Errorf("app %q: open its write-ahead log: %w", a.name, err)
	}
	salvage := dir + ".salvage"
	if err := removeFlatDir(fsys, salvage); err != nil {
		return fmt.Errorf("app %q: remove an earlier salvage: %w", a.name, err)
	}
	sr, serr := wal.Salvage(ctx, fsys, dir, salvage, wal.SalvageOptions{After: logSeq, SegmentSize: size})
	if serr != nil {
		return fmt.Errorf("app %q: salvage its write-ahead log: %w", a.name, serr)
	}
	lr := &LogRecovery{Damage: err.Error(), Kept: int64(sr.Records), FirstSeq: sr.FirstSeq, LastSeq: sr.LastSeq, Lost: sr.Lost}
	if err := aside(dir, "a damaged write-ahead log: its intact records are in the new log"); err != nil {
		return err
	}
	if err := fsys.Rename(salvage, dir); err != nil {
		return fmt.Errorf("app %q: put the salvaged log in place: %w", a.name, err)
	}
	if err := vfs.SyncDir(fsys, a.dir); err != nil {
		return err
	}
	rep.Log = lr
	a.store.log.Warn("salvaged a damaged write-ahead log", "app", a.name, "kept", lr.Kept, "lost_ranges", len(lr.Lost))
	return nil
}

// verifiedMeta opens and completely verifies segment file name, returning
// its footer and size. Errors match ErrCorruption for damage.
func verifiedMeta(ctx context.Context, bucket Bucket, name string) (*segment.Meta, int64, error) {
	f, err := bucket.Open(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	r, err := openReader(f, bucket.Describe(name))
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	defer f.Close()
	if err := r.Verify(); err != nil {
		return nil, 0, err
	}
	return r.Meta(), r.Size(), nil
}

// appForRecovery returns the app, also when its catalog cannot be read
// (then with an empty current version).
func (s *Store) appForRecovery(name string) (*App, error) {
	a, err := s.app(name, true)
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrNoCatalog) {
		return nil, err // a newer format version among them: not ours to rewrite
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a = &App{store: s, name: name, dir: filepath.Join(s.cfg.Dir, "apps", name), files: map[string]*segFile{}}
	a.ms = appMeta{s.meta, name}
	a.bucket = &dirBucket{fs: s.fs, dir: filepath.Join(a.dir, segDir)}
	empty := &Catalog{App: name, Shards: s.cfg.Shards}
	a.cur = &Version{Catalog: empty, disk: empty, app: a, files: map[string]*segFile{}, refs: 1}
	s.apps[name] = a
	return a, nil
}
