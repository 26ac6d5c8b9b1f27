package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spurdb/spur/storage/vfs"
)

// Metadata documents (docs/storage.md §2): an app's saved cohorts, insights and
// dashboards are small JSON documents in named collections, one file per
// document:
//
//	DIR/apps/APP/meta/COLLECTION/ID.doc
//
// and documents of no app (the server's access keys) in store-level
// collections (Store.Collection):
//
//	DIR/meta/COLLECTION/ID.doc
//
// A document file is one header line and the document's JSON:
//
//	spur-doc 1 LEN CRC\n
//	{"id":ID,"version":N,"created":T,"updated":T,"body":BODY}
//
// where 1 is the format version, LEN the decimal byte length of the JSON
// and CRC the CRC-32C of those bytes as 8 lower-case hex digits. Reading
// is strict: a header that does not match, a length or checksum that
// disagrees, an unknown or missing field, an id that is not the file's
// name or a version below 1 is corruption (errors.Is(err, ErrCorruption),
// a *CorruptionError naming the file and the offset). Every write
// replaces the file atomically (temporary file, fsync, rename, directory
// fsync) under an exclusive lock of the collection (META.LOCK, flock:
// other goroutines and processes wait), so after a crash a document is
// its old or its new version, never a mix.

// Document format constants.
const (
	docMagic       = "spur-doc"
	docVersion     = 1
	docExt         = ".doc"
	metaDir        = "meta"
	metaLock       = "META.LOCK"
	maxDocFileSize = 16 << 20 // a larger file is corruption, not read
	// MaxDocBodyBytes bounds a document's body (its JSON), bytes.
	MaxDocBodyBytes = 4 << 20
)

// ErrConflict is matched (errors.Is) by the error of an update or delete
// whose expected version is not the document's current one (it changed
// since the caller read it), of a create whose id is taken, and of a
// catalog publish whose expected generation is not the current one
// (Metastore.Publish).
var ErrConflict = errors.New("version conflict")

var collectionRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// ValidDocID reports whether id is a valid document id: the app name rule
// [a-z0-9][a-z0-9_-]{0,63}.
func ValidDocID(id string) bool { return appNameRE.MatchString(id) }

var docCRC = crc32.MakeTable(crc32.Castagnoli)

// Doc is one metadata document.
type Doc struct {
	// ID is the document's id within its collection (ValidDocID).
	ID string `json:"id"`
	// Version is 1 when created and grows by 1 with every update; an
	// update names the version it replaces (optimistic concurrency).
	Version int64 `json:"version"`
	// Created and Updated are the times of creation and of the last
	// write, RFC 3339 UTC with milliseconds.
	Created string `json:"created"`
	Updated string `json:"updated"`
	// Body is the document, compact JSON, key order as given.
	Body json.RawMessage `json:"body"`
}

// Collection is one named collection of documents of an app, or of the
// store (Store.Collection: documents of no app, such as access keys). It
// holds no open files and no cache: every call reads or writes the disk,
// so a change made by another process is seen at once. Safe for
// concurrent use.
type Collection struct {
	store *Store
	app   *App   // nil for a store-level collection
	owner string // who holds it, in messages: `app "shop"` or "the store"
	name  string
	dc    DocCollection
	mu    *sync.Mutex // the owner's per-collection write mutex (this process's writers)
}

// Collection returns the app's collection name ([a-z][a-z0-9_]{0,31}).
// The directory is created on the first write.
func (a *App) Collection(name string) (*Collection, error) {
	if !collectionRE.MatchString(name) {
		return nil, fmt.Errorf("invalid collection name %q: want [a-z][a-z0-9_]{0,31}", name)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return &Collection{store: a.store, app: a, owner: fmt.Sprintf("app %q", a.name), name: name,
		dc: DocCollection{App: a.name, Collection: name}, mu: collectionMutex(&a.collMu, name)}, nil
}

// Collection returns the store-level collection name
// ([a-z][a-z0-9_]{0,31}), for documents that belong to no app (the
// server's access keys): DIR/meta/NAME/ID.doc, in the format, with the
// checks and atomic writes of an app's collections. Writes are refused
// while another process holds the store's writer role (a *LockedError
// naming it is wrapped), as for every write (docs/storage.md §4). The
// directory is created on the first write.
func (s *Store) Collection(name string) (*Collection, error) {
	if !collectionRE.MatchString(name) {
		return nil, fmt.Errorf("invalid collection name %q: want [a-z][a-z0-9_]{0,31}", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Collection{store: s, owner: "the store", name: name, dc: DocCollection{Collection: name},
		mu: collectionMutex(&s.collMu, name)}, nil
}

// collectionMutex returns the write mutex of collection name in *m,
// creating the map and the mutex on first use. The caller holds the
// lock guarding *m.
func collectionMutex(m *map[string]*sync.Mutex, name string) *sync.Mutex {
	if *m == nil {
		*m = map[string]*sync.Mutex{}
	}
	mu := (*m)[name]
	if mu == nil {
		mu = &sync.Mutex{}
		(*m)[name] = mu
	}
	return mu
}

// Get returns document id. Errors: ErrNotFound (errors.Is) when there is
// none, corruption, I/O errors.
func (c *Collection) Get(id string) (Doc, error) {
	if !ValidDocID(id) {
		return Doc{}, fmt.Errorf("%s %q: %w", c.name, id, ErrNotFound)
	}
	d, err := c.read(id)
	if errors.Is(err, fs.ErrNotExist) {
		return Doc{}, fmt.Errorf("%s has no %s %q: %w", c.owner, c.name, id, ErrNotFound)
	}
	return d, err
}

// read reads and checks document id. A missing one matches
// fs.ErrNotExist.
func (c *Collection) read(id string) (Doc, error) {
	b, err := c.store.meta.ReadDoc(context.Background(), c.dc, id)
	if err != nil {
		return Doc{}, err
	}
	return decodeDoc(b, c.path(id), id)
}

// path says where document id is, for messages (Metastore.Describe).
func (c *Collection) path(id string) string { return c.store.meta.Describe(c.dc.App, &c.dc, id) }

// List returns every document of the collection sorted by id (newly
// allocated; empty when there is none). A corrupt document fails the
// whole list, naming the file.
func (c *Collection) List() ([]Doc, error) {
	ids, err := c.store.meta.ListDocs(context.Background(), c.dc)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.name, err)
	}
	docs := []Doc{}
	for _, id := range ids {
		d, err := c.read(id)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since listed
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	slices.SortFunc(docs, func(x, y Doc) int { return strings.Compare(x.ID, y.ID) })
	return docs, nil
}

// Create stores body as a new document at version 1. An empty id is
// replaced by a random one (16 hex digits). Errors: an invalid id or body
// (not JSON, larger than MaxDocBodyBytes), ErrConflict when the id is
// taken, an app that was never imported into (ErrNotFound), I/O errors.
func (c *Collection) Create(id string, body []byte) (Doc, error) {
	if id == "" {
		var b [8]byte
		rand.Read(b[:]) // never fails (crypto/rand)
		id = hex.EncodeToString(b[:])
	}
	return c.write(id, body, func(old *Doc) (int64, error) {
		if old != nil {
			return 0, fmt.Errorf("%s %q already exists: %w", c.name, id, ErrConflict)
		}
		return 1, nil
	})
}

// Update replaces document id's body when its current version is version,
// and returns the new document (version+1). Errors: ErrNotFound,
// ErrConflict (the document is at another version: someone else changed
// it), those of Create.
func (c *Collection) Update(id string, version int64, body []byte) (Doc, error) {
	return c.write(id, body, func(old *Doc) (int64, error) {
		if old == nil {
			return 0, fmt.Errorf("%s has no %s %q: %w", c.owner, c.name, id, ErrNotFound)
		}
		if old.Version != version {
			return 0, fmt.Errorf("%s %q is at version %d, not %d: %w", c.name, id, old.Version, version, ErrConflict)
		}
		return version + 1, nil
	})
}

// Put creates document id or replaces its body whatever its version (a
// save by name). Errors are those of Create, without ErrConflict.
func (c *Collection) Put(id string, body []byte) (Doc, error) {
	return c.write(id, body, func(old *Doc) (int64, error) {
		if old == nil {
			return 1, nil
		}
		return old.Version + 1, nil
	})
}

// Delete removes document id. With version > 0 it removes it only at that
// version (else ErrConflict). Errors: ErrNotFound, ErrConflict, I/O.
func (c *Collection) Delete(id string, version int64) error {
	if !ValidDocID(id) {
		return fmt.Errorf("%s %q: %w", c.name, id, ErrNotFound)
	}
	return c.locked(func() error {
		old, err := c.read(id)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s has no %s %q: %w", c.owner, c.name, id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if version > 0 && old.Version != version {
			return fmt.Errorf("%s %q is at version %d, not %d: %w", c.name, id, old.Version, version, ErrConflict)
		}
		if err := c.store.meta.RemoveDoc(context.Background(), c.dc, id); err != nil {
			return fmt.Errorf("delete %s %q: %w", c.name, id, err)
		}
		return nil
	})
}

// write stores body as document id at the version next returns, given
// the current document (nil when there is none), under the lock.
func (c *Collection) write(id string, body []byte, next func(old *Doc) (int64, error)) (Doc, error) {
	if !ValidDocID(id) {
		return Doc{}, fmt.Errorf("invalid %s id %q: want [a-z0-9][a-z0-9_-]{0,63}", c.name, id)
	}
	if len(body) > MaxDocBodyBytes {
		return Doc{}, fmt.Errorf("%s %q: body of %d bytes is larger than the limit of %d", c.name, id, len(body), MaxDocBodyBytes)
	}
	var cb bytes.Buffer
	if err := json.Compact(&cb, body); err != nil {
		return Doc{}, fmt.Errorf("%s %q: body is not JSON: %w", c.name, id, err)
	}
	var d Doc
	err := c.locked(func() error {
		var old *Doc
		o, err := c.read(id)
		switch {
		case err == nil:
			old = &o
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		v, err := next(old)
		if err != nil {
			return err
		}
		now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
		d = Doc{ID: id, Version: v, Created: now, Updated: now, Body: cb.Bytes()}
		if old != nil {
			d.Created = old.Created
		}
		return c.store.meta.WriteDoc(context.Background(), c.dc, id, encodeDoc(&d))
	})
	return d, err
}

// locked runs f under the collection's exclusive lock, creating the
// collection's directory (and syncing its parents) first. The app must
// exist. Like every write (docs/storage.md §4), it is refused while another
// process holds the store's writer role (spur serve: its API writes
// documents); in that server, or between CLI writers, the collection's
// own lock orders the writes, so saving a document never waits for an
// import.
func (c *Collection) locked(f func() error) error {
	a, s := c.app, c.store
	if s.cfg.ReadOnly {
		return fmt.Errorf("%s: the store is open read-only", c.owner)
	}
	if a != nil && a.Current().Generation == 0 {
		return fmt.Errorf("app %q: %w", a.name, ErrNotFound)
	}
	ctx := context.Background()
	if s.role == nil {
		l, err := s.meta.Lease(ctx, LeaseName{}, true, "")
		if err != nil {
			if a == nil {
				return s.storeLocked(err)
			}
			return a.locked(err, true)
		}
		defer l.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Another CLI writer of this collection holds it for a few
	// milliseconds: wait for it a little.
	var l io.Closer
	var err error
	for wait := time.Millisecond; ; wait *= 2 {
		if l, err = s.meta.Lease(ctx, LeaseName(c.dc), false, s.holder); err == nil || !errors.Is(err, vfs.ErrLocked) || wait > time.Second {
			break
		}
		time.Sleep(wait)
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", c.name, err)
	}
	defer l.Close()
	return f()
}

// encodeDoc returns d's file bytes.
func encodeDoc(d *Doc) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the body's bytes as given
	enc.Encode(d)            // strings, an int and compact JSON: cannot fail
	js := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	hdr := fmt.Sprintf("%s %d %d %08x\n", docMagic, docVersion, len(js), crc32.Checksum(js, docCRC))
	return append([]byte(hdr), js...)
}

// decodeDoc checks and decodes a document file's bytes b (path names it
// in errors; the document's id must be id).
func decodeDoc(b []byte, path, id string) (Doc, error) {
	bad := func(off int, format string, args ...any) (Doc, error) {
		return Doc{}, &CorruptionError{Path: path, Offset: int64(off), Msg: fmt.Sprintf(format, args...)}
	}
	if len(b) > maxDocFileSize {
		return bad(maxDocFileSize, "file is larger than %d bytes", maxDocFileSize)
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || nl > 64 {
		return bad(0, "no header line")
	}
	f := strings.Split(string(b[:nl]), " ")
	if len(f) != 4 || f[0] != docMagic {
		return bad(0, "header %q: want %q, format version, length, CRC-32C", b[:nl], docMagic)
	}
	// Numbers are canonical (no sign, no leading zero, lower-case hex), so
	// one header has one spelling.
	if v, err := strconv.Atoi(f[1]); err != nil || v < 1 || strconv.Itoa(v) != f[1] {
		return bad(len(docMagic)+1, "format version %q", f[1])
	} else if v > docVersion {
		return Doc{}, fmt.Errorf("document %s: unsupported format version %d (this build reads up to %d)", path, v, docVersion)
	}
	js := b[nl+1:]
	if n, err := strconv.Atoi(f[2]); err != nil || n != len(js) || strconv.Itoa(n) != f[2] {
		return bad(nl+1, "length %q in the header, %d bytes follow", f[2], len(js))
	}
	if got := fmt.Sprintf("%08x", crc32.Checksum(js, docCRC)); got != f[3] {
		return bad(nl+1, "checksum mismatch (stored %q, computed %s)", f[3], got)
	}
	var raw struct {
		ID      *string         `json:"id"`
		Version *int64          `json:"version"`
		Created *string         `json:"created"`
		Updated *string         `json:"updated"`
		Body    json.RawMessage `json:"body"`
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return bad(nl+1, "%v", err)
	}
	if dec.More() {
		return bad(nl+1+int(dec.InputOffset()), "data after the document")
	}
	switch {
	case raw.ID == nil || raw.Version == nil || raw.Created == nil || raw.Updated == nil || len(raw.Body) == 0:
		return bad(nl+1, "missing field: want id, version, created, updated and body")
	case *raw.ID != id:
		return bad(nl+1, "id %q in file named for %q", *raw.ID, id)
	case *raw.Version < 1:
		return bad(nl+1, "version %d: want ≥ 1", *raw.Version)
	}
	for _, t := range []string{*raw.Created, *raw.Updated} {
		if _, err := time.Parse(time.RFC3339, t); err != nil {
			return bad(nl+1, "time %q: want RFC 3339", t)
		}
	}
	return Doc{ID: id, Version: *raw.Version, Created: *raw.Created, Updated: *raw.Updated, Body: raw.Body}, nil
}
