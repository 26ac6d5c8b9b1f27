package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/spurdb/spur/storage/segment"
)

// Finding is one problem `spur verify` found in an app (docs/storage.md §2).
type Finding struct {
	// Kind classifies it: "catalog" (the catalog file cannot be read),
	// "settings" (the settings file cannot be read, or disagrees with the
	// catalog), "missing" (a catalogued segment file is absent),
	// "corruption" (a segment file fails its checksums or decoding),
	// "mismatch" (a segment's footer or size disagrees with the catalog),
	// "orphan" (a segment file no catalog entry references).
	Kind string `json:"kind"`
	// File is the file's path.
	File string `json:"file"`
	// Offset is the byte offset of the damage, -1 when not applicable.
	Offset int64 `json:"offset"`
	// Message says what is wrong.
	Message string `json:"message"`
}

// String renders the finding on one line.
func (f Finding) String() string {
	if f.Offset >= 0 {
		return fmt.Sprintf("%s: %s (offset %d): %s", f.Kind, f.File, f.Offset, f.Message)
	}
	return fmt.Sprintf("%s: %s: %s", f.Kind, f.File, f.Message)
}

// VerifyReport is the outcome of Store.Verify: what was checked and every
// finding, in the order found (catalog, settings, then segments in catalog
// order, then orphans by name).
type VerifyReport struct {
	App        string    `json:"app"`
	Generation uint64    `json:"generation"` // of the catalog checked; 0 when unreadable
	Segments   int       `json:"segments"`   // segment files checked completely
	Rows       int64     `json:"rows"`       // rows in the catalogued segments
	Bytes      int64     `json:"bytes"`      // bytes of the files checked
	Findings   []Finding `json:"findings"`
}

// Verify checks every byte of every file of app appName (docs/storage.md §2;
// like ClickHouse's CHECK TABLE): the catalog and settings files (checksum
// and strict decoding), and every segment file completely
// (segment.Reader.Verify: header, trailer and footer checksums, every
// chunk's CRC-32C, every decoded value against the footer), cross-checking
// each catalog entry against its segment's footer and size, and listing
// files the catalog does not reference (checking their content only when
// the catalog is unreadable, for recovery). It does not stop at the first
// problem: every finding is in the report. With an unreadable catalog it
// still checks every segment file it finds. It reads the files directly
// (no version is pinned), so a write running meanwhile may show as
// orphans or missing files. The error is ctx.Err(), ErrNotFound for an
// app directory that does not exist, or an I/O failure that stops the
// check; problems in the data are findings, not errors.
func (s *Store) Verify(ctx context.Context, appName string) (*VerifyReport, error) {
	if !ValidAppName(appName) {
		return nil, fmt.Errorf("invalid app name %q", appName)
	}
	dir := filepath.Join(s.cfg.Dir, "apps", appName)
	if all, err := s.meta.Apps(ctx, true); err != nil {
		return nil, err
	} else if !slices.Contains(all, appName) {
		return nil, fmt.Errorf("app %q: %w", appName, ErrNotFound)
	}
	ms := appMeta{s.meta, appName}
	bucket, err := s.bucketOf(appName)
	if err != nil {
		return nil, err
	}
	rep := &VerifyReport{App: appName}
	add := func(kind, file string, off int64, format string, args ...any) {
		rep.Findings = append(rep.Findings, Finding{Kind: kind, File: file, Offset: off, Message: fmt.Sprintf(format, args...)})
	}
	addErr := func(kind, file string, err error) {
		var ce *CorruptionError
		var se *segment.CorruptionError
		switch {
		case errors.As(err, &ce):
			add(kind, ce.Path, ce.Offset, "%s", ce.Msg)
		case errors.As(err, &se):
			add(kind, se.Path, se.Offset, "%s", se.Msg)
		default:
			add(kind, file, -1, "%v", err)
		}
	}
	c, _, err := ms.load()
	switch {
	case errors.Is(err, ErrNoCatalog):
		add("catalog", ms.path(), -1, "missing: the app has no catalog (run `spur recover --app %s`)", appName)
	case err != nil:
		addErr("catalog", ms.path(), err)
	default:
		rep.Generation = c.Generation
	}
	st, serr := ms.loadSettings()
	switch {
	case errors.Is(serr, fs.ErrNotExist):
		if c != nil && c.Generation > 0 && !ms.isLegacy() { // a manifest.json store has none yet
			add("settings", filepath.Join(dir, settingsName), -1, "missing: the second copy of the settings is gone (rewritten by the next write)")
		}
	case serr != nil:
		addErr("settings", filepath.Join(dir, settingsName), serr)
	case c != nil:
		if want := c.settings(); !st.equal(&want) {
			add("settings", filepath.Join(dir, settingsName), -1, "disagrees with the catalog (shards %d/%d, tz %q/%q, %d/%d event and %d/%d user properties)",
				st.Shards, c.Shards, st.TZ, c.TZ, len(st.EventProps), len(c.EventProps), len(st.UserProps), len(c.UserProps))
		}
	}

	if c != nil && c.Identity != (IdentityPos{}) {
		p1, p2 := filepath.Join(dir, identityName), filepath.Join(dir, identityCopyName)
		for _, p := range []string{p1, p2} {
			if _, _, err := readIdentity(s.fs, p, c.Identity); err != nil {
				addErr("idgraph", p, err)
			}
		}
	}

	names, err := bucket.List(ctx)
	if err != nil {
		return rep, fmt.Errorf("app %q: list segments: %w", appName, err)
	}
	onDisk := make(map[string]bool, len(names))
	for _, n := range names {
		onDisk[n] = true
	}
	type job struct {
		name string
		ref  *SegmentRef // nil: not catalogued
	}
	var jobs []job
	catalogued := map[string]bool{}
	if c != nil {
		for i := range c.Segments {
			ref := &c.Segments[i]
			catalogued[ref.File] = true
			rep.Rows += ref.Rows
			if !onDisk[ref.File] {
				add("missing", bucket.Describe(ref.File), -1, "%s segment of shard %d (%d rows) is in the catalog but not on disk", ref.Kind, ref.Shard, ref.Rows)
				continue
			}
			jobs = append(jobs, job{ref.File, ref})
		}
	}
	for _, n := range names {
		if catalogued[n] {
			continue
		}
		if c != nil {
			// A leftover of an interrupted write (or a replaced file a
			// reader still pins): the next write removes it, so its
			// content does not matter.
			add("orphan", bucket.Describe(n), -1, "not referenced by the catalog (generation %d)", c.Generation)
		} else if validSegmentName(n) {
			jobs = append(jobs, job{n, nil}) // no catalog: every file may be needed by recovery
		}
	}

	// Check the files in parallel; findings keep the jobs' order.
	found := make([][]Finding, len(jobs))
	sizes := make([]int64, len(jobs))
	var (
		wg    sync.WaitGroup
		next  = make(chan int)
		mu    sync.Mutex
		fatal error
	)
	for range min(runtime.GOMAXPROCS(0), max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fs, size, err := verifySegment(ctx, bucket, jobs[i].name, jobs[i].ref)
				if err != nil {
					mu.Lock()
					fatal = errors.Join(fatal, err)
					mu.Unlock()
				}
				found[i], sizes[i] = fs, size
			}
		}()
	}
	var cerr error
	for i := range jobs {
		if cerr = ctx.Err(); cerr != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if cerr != nil {
		return rep, cerr
	}
	if fatal != nil {
		return rep, fatal
	}
	for i := range jobs {
		rep.Findings = append(rep.Findings, found[i]...)
		rep.Segments++
		rep.Bytes += sizes[i]
	}
	return rep, nil
}

// verifySegment checks one segment file completely and, when ref is not
// nil, against its catalog entry. Problems are findings; the error is an
// I/O failure other than a missing file.
func verifySegment(ctx context.Context, bucket Bucket, name string, ref *SegmentRef) ([]Finding, int64, error) {
	path := bucket.Describe(name)
	var out []Finding
	finding := func(kind string, err error) {
		var ce *CorruptionError
		var se *segment.CorruptionError
		switch {
		case errors.As(err, &ce):
			out = append(out, Finding{Kind: kind, File: path, Offset: ce.Offset, Message: ce.Msg})
		case errors.As(err, &se):
			out = append(out, Finding{Kind: kind, File: path, Offset: se.Offset, Message: se.Msg})
		default:
			out = append(out, Finding{Kind: kind, File: path, Offset: -1, Message: err.Error()})
		}
	}
	f, err := bucket.Open(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return []Finding{{Kind: "missing", File: path, Offset: -1, Message: "removed while verifying"}}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	r, err := openReader(f, path)
	if err != nil {
		f.Close()
		if errors.Is(err, ErrCorruption) || errors.Is(err, segment.ErrNewerVersion) {
			finding("corruption", err)
			return out, 0, nil
		}
		return nil, 0, err
	}
	defer f.Close()
	if err := r.Verify(); err != nil {
		if !errors.Is(err, ErrCorruption) {
			return nil, r.Size(), err
		}
		finding("corruption", err)
	}
	if ref != nil {
		if r.Size() != ref.Bytes {
			out = append(out, Finding{Kind: "mismatch", File: path, Offset: -1,
				Message: fmt.Sprintf("the catalog says %d bytes, the file has %d", ref.Bytes, r.Size())})
		}
		if err := checkFooter(*ref, r.Meta(), path); err != nil {
			finding("mismatch", err)
		}
	}
	return out, r.Size(), nil
}
