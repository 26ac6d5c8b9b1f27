package storage

// Deletions (docs/storage.md §7): a request to erase a person is a
// Deletion with a number (Seq) in the app's request order. Every segment
// records in SegmentRef.DelSeq the highest deletion number it is clean of:
// the segment was written after that request (a live seal, an import or a
// compaction published after it), or it was rewritten without the
// request's rows. A query hides, in each segment, the rows of the pending
// deletions numbered above its DelSeq (cursor.erase), so every query
// started after the request's answer ignores them; events that arrive
// later for an erased id land in segments written after the request and
// stay visible (a new person). Compaction applies the pending deletions to
// the inputs it merges, and Erase rewrites the segments still holding
// erased rows; once none is left, the write-ahead log past the request
// is released and the id graph rewritten, the request is done, and its
// record keeps only its id, times and a salted hash of the id it named.

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
)

// DeletionKind says what a Deletion removes.
type DeletionKind uint8

// Deletion kinds. The zero value is invalid.
const (
	// DeletePerson erases every event and property write of a person's
	// distinct ids (Deletion.IDs).
	DeletePerson DeletionKind = 1
	// DeleteEvents deletes the events that match Deletion.Match.
	DeleteEvents DeletionKind = 2
)

// String returns "person" or "events".
func (k DeletionKind) String() string {
	switch k {
	case DeletePerson:
		return "person"
	case DeleteEvents:
		return "events"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText renders the kind as String does (for JSON reports).
func (k DeletionKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Deletion is one deletion request of an app (docs/storage.md §7). A
// pending one holds the ids it erases; a done one only its request id,
// times and the salted hash of the id the request named.
type Deletion struct {
	// Seq numbers the app's deletion requests from 1 in request order
	// (SegmentRef.DelSeq).
	Seq uint64 `json:"-"`
	// ID is the request id, "del-" and 16 hex digits (random).
	ID   string       `json:"id"`
	Kind DeletionKind `json:"kind"`
	// RequestedAt and DoneAt are UTC µs; DoneAt is 0 while pending.
	RequestedAt int64 `json:"requested_at"`
	DoneAt      int64 `json:"done_at,omitempty"`
	// Suppress: later events of the ids are dropped at ingestion too.
	Suppress bool `json:"suppress,omitempty"`
	// Hash is the hex SHA-256 of the app's deletion salt and the id the
	// request named (Catalog.DelSalt): it lets an operator answer "was
	// this id erased" without the record keeping the id.
	Hash string `json:"hash"`
	// IDs are the distinct ids erased: the one the request named, then
	// the person's others sorted, without repeats; nil once done.
	IDs []string `json:"-"`
	// Suppressed are the salted hashes (hashID) of the ids of a Suppress
	// request, kept when done so that later events of the ids are still
	// dropped; sorted.
	Suppressed []string `json:"-"`
	// Match is what a DeleteEvents request deletes; kept when done.
	Match *EventMatch `json:"match,omitempty"`
}

// EventMatch is the predicate of a DeleteEvents request (docs/storage.md
// §7, "Events by predicate"): events named Event ("$any": every name)
// with From ≤ time < To (UTC µs) whose event properties pass Where (a
// JSON array of docs/analytics.md §2 filters, "" for none), compiled by
// the WhereCompiler package query registers.
type EventMatch struct {
	Event string `json:"event"`
	Where string `json:"where,omitempty"`
	From  int64  `json:"from"`
	To    int64  `json:"to"`
}

// Pending reports whether the request's bytes are not all gone yet.
func (d *Deletion) Pending() bool { return d.DoneAt == 0 }

// maxDeletionIDs bounds the ids one deletion request names.
const maxDeletionIDs = 1 << 20

// newDelSalt returns a fresh deletion salt: 16 random bytes, hex.
func newDelSalt() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// newDeletionID returns a fresh request id.
func newDeletionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "del-" + hex.EncodeToString(b[:])
}

// hashID is the salted hash of a distinct id a done deletion keeps:
// hex SHA-256 of the salt, a 0 byte and the id.
func hashID(salt, id string) string {
	h := sha256.New()
	h.Write([]byte(salt))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return hex.EncodeToString(h.Sum(nil))
}

// appendDeletions appends the deletions section of a catalog or settings
// file (format version ≥ 4): string salt, uvarint count, and per
// deletion: uvarint seq, string id, byte kind, varint requested at,
// varint done at, byte suppress (0/1), string hash, uvarint ids count and
// the ids as strings, uvarint suppressed count and the hashes as strings,
// and for kind 2 (events) string event, string where, varint from,
// varint to.
func appendDeletions(b []byte, salt string, dels []Deletion) []byte {
	b = appendString(b, salt)
	b = binary.AppendUvarint(b, uint64(len(dels)))
	for i := range dels {
		d := &dels[i]
		b = binary.AppendUvarint(b, d.Seq)
		b = appendString(b, d.ID)
		b = append(b, byte(d.Kind))
		b = binary.AppendVarint(b, d.RequestedAt)
		b = binary.AppendVarint(b, d.DoneAt)
		sup := byte(0)
		if d.Suppress {
			sup = 1
		}
		b = append(b, sup)
		b = appendString(b, d.Hash)
		b = binary.AppendUvarint(b, uint64(len(d.IDs)))
		for _, id := range d.IDs {
			b = appendString(b, id)
		}
		b = binary.AppendUvarint(b, uint64(len(d.Suppressed)))
		for _, h := range d.Suppressed {
			b = appendString(b, h)
		}
		if d.Kind == DeleteEvents {
			b = appendString(b, d.Match.Event)
			b = appendString(b, d.Match.Where)
			b = binary.AppendVarint(b, d.Match.From)
			b = binary.AppendVarint(b, d.Match.To)
		}
	}
	return b
}

// deletions reads the section appendDeletions writes, checking that the
// numbers ascend and each field is in range.
func (d *catalogDecoder) deletions() (string, []Deletion) {
	at := d.Pos()
	salt := d.str("deletion salt", 64)
	if d.Err() == nil && salt != "" && len(salt) != 32 {
		d.FailAt(at, "deletion salt of %d bytes, want 32", len(salt))
	}
	n := d.Count("deletion count", 8, math.MaxInt)
	var dels []Deletion
	for range n {
		if d.Err() != nil {
			return "", nil
		}
		var x Deletion
		at := d.Pos()
		x.Seq = d.Uvarint()
		if d.Err() == nil && (x.Seq == 0 || len(dels) > 0 && x.Seq <= dels[len(dels)-1].Seq) {
			d.FailAt(at, "deletion number %d out of order", x.Seq)
		}
		x.ID = d.str("deletion id", 64)
		at = d.Pos()
		x.Kind = DeletionKind(d.U8())
		if d.Err() == nil && x.Kind != DeletePerson && x.Kind != DeleteEvents {
			d.FailAt(at, "deletion %s: kind %d, want 1 (person) or 2 (events)", x.ID, x.Kind)
		}
		x.RequestedAt, x.DoneAt = d.Varint(), d.Varint()
		at = d.Pos()
		switch d.U8() {
		case 0:
		case 1:
			x.Suppress = true
		default:
			d.FailAt(at, "deletion %s: suppress flag not 0 or 1", x.ID)
		}
		x.Hash = d.str("deletion hash", 64)
		ids := d.Count("deletion id count", 1, maxDeletionIDs)
		for range ids {
			x.IDs = append(x.IDs, d.str("erased id", 1<<16))
		}
		at = d.Pos()
		if d.Err() == nil && len(x.IDs) > 1 && !slices.IsSortedFunc(x.IDs[1:], cmp.Compare[string]) {
			d.FailAt(at, "deletion %s: ids not sorted", x.ID)
		}
		sup := d.Count("deletion suppressed count", 1, maxDeletionIDs)
		for range sup {
			x.Suppressed = append(x.Suppressed, d.str("suppressed hash", 64))
		}
		if x.Kind == DeleteEvents {
			m := &EventMatch{}
			m.Event = d.str("deletion event", event.MaxEventNameBytes)
			m.Where = d.str("deletion where", 1<<20)
			at = d.Pos()
			m.From, m.To = d.Varint(), d.Varint()
			if d.Err() == nil && (m.Event == "" || m.From >= m.To) {
				d.FailAt(at, "deletion %s: event %q, range [%d, %d)", x.ID, m.Event, m.From, m.To)
			}
			x.Match = m
		}
		dels = append(dels, x)
	}
	return salt, dels
}

// appendDelSeqs appends the catalog's per-segment deletion numbers
// (SegmentRef.DelSeq, in catalog order): uvarint count (the segment
// count), then one uvarint each.
func appendDelSeqs(b []byte, segs []SegmentRef) []byte {
	b = binary.AppendUvarint(b, uint64(len(segs)))
	for i := range segs {
		b = binary.AppendUvarint(b, segs[i].DelSeq)
	}
	return b
}

// delSeqs reads appendDelSeqs' section into segs, failing on a count
// other than len(segs) or a number past the last deletion's.
func (d *catalogDecoder) delSeqs(segs []SegmentRef, last uint64) {
	at := d.Pos()
	n := d.Uvarint()
	if d.Err() == nil && n != uint64(len(segs)) {
		d.FailAt(at, "%d segment deletion numbers for %d segments", n, len(segs))
		return
	}
	for i := range segs {
		at := d.Pos()
		segs[i].DelSeq = d.Uvarint()
		if d.Err() == nil && segs[i].DelSeq > last {
			d.FailAt(at, "segment %s: deletion number %d after the last request's %d", segs[i].File, segs[i].DelSeq, last)
		}
	}
}

// lastDeletion returns the number of the newest deletion request, 0 when
// none.
func lastDeletion(dels []Deletion) uint64 {
	if len(dels) == 0 {
		return 0
	}
	return dels[len(dels)-1].Seq
}

// validDistinctID reports whether id can name a person to erase: 1 to
// 65,536 bytes of UTF-8.
func validDistinctID(id string) bool {
	return id != "" && len(id) <= 1<<16 && utf8.ValidString(id)
}

// erasedUser is one distinct id a pending deletion hides: its UserHash,
// the id, and the deletion's number.
type erasedUser struct {
	hash uint64
	id   string
	seq  uint64
}

// eraseIndex is the pending deletions of a version, flattened: every
// erased id by hash (then id, then number), so that a cursor collects
// those of its segment by one range of hashes.
type eraseIndex struct {
	users  []erasedUser
	events []eventDeletion // pending events deletions, in request order
	max    uint64          // the largest pending deletion number; 0: none pending
	// named maps each erased id to the newest pending deletion naming
	// it: the identity fields of other persons' events that name it are
	// scrubbed in the segments numbered below (scrubbed)
	named map[string]uint64
	salt  string // the app's Catalog.DelSalt (tombstone); "" until published
}

// newEraseIndex indexes the pending deletions of dels, compiling the
// filters of events deletions against the event properties props (a
// filter that does not compile fails the scans it concerns).
func newEraseIndex(dels []Deletion, props []event.PropType, salt string) *eraseIndex {
	x := &eraseIndex{salt: salt}
	for i := range dels {
		d := &dels[i]
		if !d.Pending() {
			continue
		}
		x.max = d.Seq
		if d.Kind == DeleteEvents {
			w, err := compileWhere(d.Match.Where, props)
			x.events = append(x.events, eventDeletion{seq: d.Seq, match: d.Match, where: w, err: err})
			continue
		}
		for _, id := range d.IDs {
			x.users = append(x.users, erasedUser{hash: UserHash(id), id: id, seq: d.Seq})
			if x.named == nil {
				x.named = map[string]uint64{}
			}
			x.named[id] = d.Seq
		}
	}
	if x.max == 0 {
		return nil
	}
	slices.SortFunc(x.users, func(a, b erasedUser) int {
		return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.id, b.id), cmp.Compare(a.seq, b.seq))
	})
	return x
}

// forSegment appends to dst the erased users segment ref must hide:
// those of deletions numbered above ref.DelSeq in ref's shard (of an app
// of shards shards) and hash range, in hash order; dst[:0] when none.
func (x *eraseIndex) forSegment(dst []erasedUser, ref *SegmentRef, shards int) []erasedUser {
	dst = dst[:0]
	x.each(ref, shards, func(u erasedUser) bool {
		if n := len(dst); n == 0 || dst[n-1].hash != u.hash || dst[n-1].id != u.id {
			dst = append(dst, u)
		}
		return true
	})
	return dst
}

// holds reports whether segment ref may hold rows x hides (by shard and
// hash range: Erase rewrites the segments it reports).
func (x *eraseIndex) holds(ref *SegmentRef, shards int) bool {
	found := false
	x.each(ref, shards, func(erasedUser) bool { found = true; return false })
	return found
}

// each calls fn with the erased users segment ref must hide, in hash
// order, until fn returns false.
func (x *eraseIndex) each(ref *SegmentRef, shards int, fn func(erasedUser) bool) {
	if x == nil || ref.DelSeq >= x.max {
		return
	}
	lo, hi := uint64(0), uint64(math.MaxUint64)
	if ref.FirstHash != 0 || ref.LastHash != 0 {
		lo, hi = ref.FirstHash, ref.LastHash
	}
	i, _ := slices.BinarySearchFunc(x.users, lo, func(u erasedUser, h uint64) int { return cmp.Compare(u.hash, h) })
	for ; i < len(x.users) && x.users[i].hash <= hi; i++ {
		if u := x.users[i]; u.seq > ref.DelSeq && ShardOfHash(u.hash, shards) == ref.Shard && !fn(u) {
			return
		}
	}
}

// erasedAt reports whether the user (hash h, id) is in erase, a list in
// hash order, moving *at past the entries of smaller hashes: the users
// of one cursor come in hash order, so each entry is passed once.
func erasedAt(erase []erasedUser, at *int, h uint64, id []byte) bool {
	i := *at
	for i < len(erase) && erase[i].hash < h {
		i++
	}
	*at = i
	for ; i < len(erase) && erase[i].hash == h; i++ {
		if erase[i].id == string(id) {
			return true
		}
	}
	return false
}

// Erased reports whether a pending deletion request of the version names
// distinct id (as one of its person's ids): the id's person, as the id
// graph still holds it until the request is done, is no longer one a
// query shows (its rows are hidden); events the id sent after the request
// are a new person of that id alone.
func (v *Version) Erased(id string) bool {
	return v.erasing().hides(math.MaxUint64, UserHash(id), id)
}

// hides reports whether a pending deletion numbered above delSeq names
// the distinct id (of UserHash h).
func (x *eraseIndex) hides(delSeq, h uint64, id string) bool {
	if x == nil {
		return false
	}
	i, _ := slices.BinarySearchFunc(x.users, h, func(u erasedUser, h uint64) int { return cmp.Compare(u.hash, h) })
	for ; i < len(x.users) && x.users[i].hash == h; i++ {
		if u := x.users[i]; u.id == id && (delSeq == math.MaxUint64 || u.seq > delSeq) {
			return true
		}
	}
	return false
}

// identityFields are the event properties that name a second distinct id
// (docs/identity.md §2): an erasure scrubs an erased id from them in
// other persons' events too (docs/storage.md §7).
var identityFields = [...]string{anonIDProp, aliasProp}

// tombstone is what replaces erased distinct id in the id graph and in
// other persons' identity fields once its erasure is done: "$erased:"
// and 32 hex digits of its salted hash (hashID), the same for the same
// id, so the persons the id joined stay as they were.
func tombstone(salt, id string) string { return "$erased:" + hashID(salt, id)[:32] }

// scrubbed returns meta with every identityFields dictionary entry that
// names an id of a pending person deletion numbered above delSeq
// replaced by its tombstone (a copy; meta itself when none does), and
// whether it replaced any. A compaction writes the rows of a segment
// through the scrubbed dictionaries, so no erased id leaves with them.
// Before the app's salt is published (a request still only in the live
// layer) nothing is scrubbed: the Erase after the flush that publishes
// it does.
func (x *eraseIndex) scrubbed(meta *segment.Meta, delSeq uint64) (*segment.Meta, bool) {
	if x == nil || len(x.named) == 0 || x.salt == "" {
		return meta, false
	}
	out := meta
	for j := range meta.Props {
		p := &meta.Props[j]
		if p.Type != event.TypeString || !slices.Contains(identityFields[:], p.Name) {
			continue
		}
		var dict []string
		for k, v := range p.Dict {
			if x.named[v] <= delSeq {
				continue
			}
			if dict == nil {
				dict = slices.Clone(p.Dict)
			}
			dict[k] = tombstone(x.salt, v)
		}
		if dict == nil {
			continue
		}
		if out == meta {
			m := *meta
			m.Props = slices.Clone(meta.Props)
			out = &m
		}
		out.Props[j].Dict = dict
	}
	return out, out != meta
}
