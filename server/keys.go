package server

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage"
)

// API keys (docs/ingest.md §4). A key is "spur_" followed by 32 base32
// characters: 160 random bits from crypto/rand. It is shown once, when
// created; the store keeps only its SHA-256, in the store-level document
// collection "keys" (DIR/meta/keys/ID.doc: checksummed, written
// atomically, docs/storage.md §2), with its id, scope, app and a name.
//
// Why SHA-256 and not a password hash (argon2, bcrypt): those make each
// guess of a low-entropy password slow. A key is 160 random bits, so
// guessing it from its hash takes ~2^159 SHA-256 evaluations whatever the
// hash's speed, while a slow hash would cost every request tens of
// milliseconds of CPU (the events endpoint takes hundreds of requests a
// second) and would need a per-key salt, hence a lookup by id before the
// check. With a fast unsalted hash the lookup is a map access on the
// digest of the presented key, whose time does not depend on how much of
// a stored key it matches.

// KeyPrefix starts every key, so that secret scanners and people can tell
// a Spur key.
const KeyPrefix = "spur_"

// keyRandomBytes is the entropy of a key: 160 bits.
const keyRandomBytes = 20

// keysCollection is the store-level collection holding the keys.
const keysCollection = "keys"

// keyEncoding writes a key's random bytes: lower-case base32, no padding.
var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Key is a key's record, as listed: never the key itself.
type Key struct {
	// ID names the key in lists, revocations and messages (16 hex digits).
	ID string `json:"id"`
	// Scope is ingest, query or admin.
	Scope Scope `json:"scope"`
	// App is the one app of an ingest or query key; "" for admin.
	App string `json:"app,omitempty"`
	// Name says what the key is for ("web frontend"), as given.
	Name string `json:"name,omitempty"`
	// Created is the creation time, RFC 3339 UTC.
	Created string `json:"created"`
}

// keyBody is a key's stored document body.
type keyBody struct {
	Scope  Scope  `json:"scope"`
	App    string `json:"app,omitempty"`
	Name   string `json:"name,omitempty"`
	SHA256 string `json:"sha256"` // hex digest of the key
}

// MaxKeyNameBytes bounds a key's name.
const MaxKeyNameBytes = 200

// Keys is the key store of a storage.Store: the documents on disk and an
// in-memory index by digest, replaced whole after every change this
// process makes (readers take no lock). While `spur serve` runs it holds
// the store's writer role, so every change goes through its Keys (the
// admin API) and the index is never stale; a revocation takes effect for
// the next request. Safe for concurrent use.
type Keys struct {
	coll  *storage.Collection
	mu    sync.Mutex // orders writers
	index atomic.Pointer[keyIndex]
}

// keyIndex is an immutable snapshot of the keys.
type keyIndex struct {
	byDigest map[[sha256.Size]byte]*Key
	keys     []Key // sorted by id
	admins   int
}

// OpenKeys reads the key store of st. Errors: a corrupt key document
// (naming the file; matches storage.ErrCorruption), I/O errors.
func OpenKeys(st *storage.Store) (*Keys, error) {
	c, err := st.Collection(keysCollection)
	if err != nil {
		return nil, err
	}
	k := &Keys{coll: c}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// reload reads every key document and replaces the index.
func (k *Keys) reload() error {
	docs, err := k.coll.List()
	if err != nil {
		return fmt.Errorf("read keys: %w", err)
	}
	ix := &keyIndex{byDigest: make(map[[sha256.Size]byte]*Key, len(docs)), keys: make([]Key, len(docs))}
	for i, d := range docs {
		var b keyBody
		dec := json.NewDecoder(bytes.NewReader(d.Body))
		dec.DisallowUnknownFields()
		var digest []byte
		err := dec.Decode(&b)
		if err == nil {
			digest, err = hex.DecodeString(b.SHA256)
			if err == nil && len(digest) != sha256.Size {
				err = errors.New("digest length")
			}
		}
		if err != nil || checkKeyScope(b.Scope, b.App) != nil {
			return fmt.Errorf("key %s: unreadable key document: %w", d.ID, storage.ErrCorruption)
		}
		ix.keys[i] = Key{ID: d.ID, Scope: b.Scope, App: b.App, Name: b.Name, Created: d.Created}
		ix.byDigest[[sha256.Size]byte(digest)] = &ix.keys[i]
		if b.Scope == ScopeAdmin {
			ix.admins++
		}
	}
	k.index.Store(ix)
	return nil
}

// checkKeyScope checks a scope and app pair: ingest and query keys name
// one valid app, admin keys none.
func checkKeyScope(scope Scope, app string) error {
	switch scope {
	case ScopeIngest, ScopeQuery:
		if !storage.ValidAppName(app) {
			return fmt.Errorf("a %s key needs an app: want [a-z0-9][a-z0-9_-]{0,63}, found %s", scope, event.Quote(app))
		}
	case ScopeAdmin:
		if app != "" {
			return errors.New("an admin key is for every app: give no app")
		}
	default:
		return fmt.Errorf("unknown scope %s: want ingest, query or admin", event.Quote(string(scope)))
	}
	return nil
}

// ErrBadKeyRequest is matched (errors.Is) by Create's error for an
// invalid scope, app or name.
var ErrBadKeyRequest = errors.New("invalid key request")

// Create makes a key of scope for app (ingest, query; "" for admin) with
// a name, stores its digest and returns the key, which is never readable
// again, and its record. Errors: ErrBadKeyRequest (errors.Is) for an
// invalid scope, app or name; the store's (a *storage.LockedError while
// another process holds the writer role; I/O).
func (k *Keys) Create(scope Scope, app, name string) (string, Key, error) {
	if err := checkKeyScope(scope, app); err != nil {
		return "", Key{}, fmt.Errorf("%w: %w", ErrBadKeyRequest, err)
	}
	if len(name) > MaxKeyNameBytes || !printable(name) {
		return "", Key{}, fmt.Errorf("%w: a key's name is valid UTF-8 of at most %d bytes", ErrBadKeyRequest, MaxKeyNameBytes)
	}
	var raw [keyRandomBytes]byte
	rand.Read(raw[:]) // never fails (crypto/rand)
	secret := KeyPrefix + keyEncoding.EncodeToString(raw[:])
	digest := sha256.Sum256([]byte(secret))
	body, err := json.Marshal(keyBody{Scope: scope, App: app, Name: name, SHA256: hex.EncodeToString(digest[:])})
	if err != nil {
		return "", Key{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	d, err := k.coll.Create("", body)
	if err != nil {
		return "", Key{}, fmt.Errorf("store the key: %w", err)
	}
	if err := k.reload(); err != nil {
		return "", Key{}, err
	}
	return secret, Key{ID: d.ID, Scope: scope, App: app, Name: name, Created: d.Created}, nil
}

// Revoke deletes key id: from the next request on it is unknown (401).
// Errors: storage.ErrNotFound (errors.Is) for an unknown id, the store's.
func (k *Keys) Revoke(id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.coll.Delete(id, 0); err != nil {
		return fmt.Errorf("revoke key %s: %w", event.Quote(id), err)
	}
	return k.reload()
}

// List returns every key's record sorted by id (newly allocated).
func (k *Keys) List() []Key { return slices.Clone(k.index.Load().keys) }

// Admins returns the number of admin keys.
func (k *Keys) Admins() int { return k.index.Load().admins }

// Lookup returns the record of key, or nil when it is no current key. It
// takes no lock and does not allocate.
func (k *Keys) Lookup(key string) *Key {
	if !strings.HasPrefix(key, KeyPrefix) {
		return nil
	}
	return k.index.Load().byDigest[sha256.Sum256([]byte(key))]
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
