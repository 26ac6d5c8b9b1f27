package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/bin"
)

// CatalogFormatVersion is the newest catalog and settings file format this
// build writes and reads; it reads every older one. Version 2 added the
// log position to the settings file; version 3 the id graph's position
// (Catalog.Identity) to the catalog; version 4 the app's retention
// (Catalog.Retention) to both, the deletion requests (Catalog.Deletions,
// also in the settings file) and the segments' deletion numbers
// (SegmentRef.DelSeq).
const CatalogFormatVersion = 4

// catalogMagic starts every catalog and settings file.
const (
	catalogMagic  = "SPURCAT\n"
	settingsMagic = "SPURSET\n"
)

// ErrCorruption is matched (errors.Is) by every error that reports damaged
// data in the store: a segment, catalog, settings, document or log file
// (a *CorruptionError). It is the store's one sentinel, bin.ErrCorruption,
// also segment.ErrCorruption and wal.ErrCorruption.
var ErrCorruption = bin.ErrCorruption

// ErrUnsupportedVersion is matched (errors.Is) by the error for a file of
// the store (catalog, settings, segment, log) written by a newer format
// version than this build reads. It does not match ErrCorruption. It is
// the same sentinel as bin.ErrNewerVersion and segment.ErrNewerVersion.
var ErrUnsupportedVersion = bin.ErrNewerVersion

// CorruptionError reports where a file of the store (catalog, settings,
// segment, document, log) is damaged: Path names the file, Offset the
// byte where the damaged structure starts, Msg what is wrong there. It
// matches ErrCorruption. It is bin.CorruptionError, also
// segment.CorruptionError and wal.CorruptionError.
type CorruptionError = bin.CorruptionError

// SegmentKind says what a segment holds.
type SegmentKind uint8

// Segment kinds. The zero value is invalid.
const (
	KindEvents SegmentKind = 1 // events
	KindUsers  SegmentKind = 2 // user property writes ("$set" rows)
)

// String returns "events" or "users".
func (k SegmentKind) String() string {
	switch k {
	case KindEvents:
		return "events"
	case KindUsers:
		return "users"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText renders the kind as String does (for JSON reports).
func (k SegmentKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText parses "events" or "users".
func (k *SegmentKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "events":
		*k = KindEvents
	case "users":
		*k = KindUsers
	default:
		return fmt.Errorf("unknown segment kind %q: want events or users", b)
	}
	return nil
}

// SegmentRef is one published segment of a catalog. Every field is
// checked against the segment's footer when the file is opened: a
// disagreement is corruption.
type SegmentRef struct {
	File  string      `json:"file"`  // file name in the app's segment bucket
	Kind  SegmentKind `json:"kind"`  // events or users
	Shard int         `json:"shard"` // shard index, < Catalog.Shards
	// SeqMin and SeqMax are the arrival-order range of the segment's rows:
	// an import or flush run has one arrival rank (SeqMin = SeqMax), a
	// compaction output covers its inputs'. The segments of one shard and
	// kind have disjoint ranges, and a user's rows at equal timestamps in
	// two segments are in arrival order by them (the lower range first).
	SeqMin int64 `json:"seq_min"`
	SeqMax int64 `json:"seq_max"`
	// Generation is the catalog generation the segment was written for.
	Generation uint64 `json:"generation"`
	Rows       int64  `json:"rows"`     // rows (events or user property writes), ≥ 1
	Users      int64  `json:"users"`    // distinct users, 1..Rows
	MinTime    int64  `json:"min_time"` // UTC µs of the earliest row
	MaxTime    int64  `json:"max_time"` // UTC µs of the latest row
	Bytes      int64  `json:"bytes"`    // file size in bytes
	// FirstHash and LastHash are the user-key hashes (xxhash64 of the user
	// id) of the segment's first and last user; both 0 means unknown (a
	// segment migrated from a store that did not record them). Segments of
	// one shard and kind whose ranges are disjoint hold no common user,
	// which lets the scan read them one after the other with one cursor.
	FirstHash uint64 `json:"first_hash,omitempty"`
	LastHash  uint64 `json:"last_hash,omitempty"`
	// DelSeq is the number of the newest deletion request (Deletion.Seq)
	// the segment is clean of: written after it, or rewritten without
	// its rows. A query hides the rows of pending requests numbered
	// above it (deletion.go).
	DelSeq uint64 `json:"del_seq,omitempty"`
}

// Catalog is one published state of an app (docs/storage.md §1 "version"): its
// settings, schema, segments and the write-ahead-log position they cover.
// A Catalog is immutable once published; Version pins one for a reader.
type Catalog struct {
	App        string `json:"app"`
	Generation uint64 `json:"generation"` // +1 per publication; 0 for an app never published
	Shards     int    `json:"shards"`     // a power of two in [1, MaxShards]
	TZ         string `json:"tz"`         // the app's default time zone (IANA name); "" = UTC
	// NextSeq is the arrival rank the next written run takes: larger than
	// every segment's SeqMax.
	NextSeq int64 `json:"next_seq"`
	// LogSeq is the number of the last write-ahead-log record whose events
	// the segments hold (live ingestion); 0 when none.
	LogSeq     uint64           `json:"log_seq"`
	EventProps []event.PropType `json:"event_props"` // event property types, in order of first sighting
	UserProps  []event.PropType `json:"user_props"`  // user property types, in order of first sighting
	// Segments are the published segments, ordered by (SeqMax, FirstHash).
	Segments []SegmentRef `json:"segments"`
	// Identity is how much of the app's id graph file this catalog
	// publishes (docs/storage.md, "the id graph"); zero when the app never
	// applied an identity operation.
	Identity IdentityPos `json:"identity"`
	// DelSalt salts the hashes deletion records keep (hashID): 32 hex
	// digits, "" until the app's first deletion request.
	DelSalt string `json:"-"`
	// Deletions are the app's deletion requests in request order
	// (docs/storage.md §7): pending ones with the ids they erase, done
	// ones with their id, times and salted hash.
	Deletions []Deletion `json:"deletions,omitempty"`
	// Retention is the app's retention (docs/storage.md §7): events older
	// than the clock minus it are hidden from queries, refused by
	// ingestion and imports, and dropped by compaction. 0 means none (keep
	// everything); never negative.
	Retention time.Duration `json:"retention"`
}

// IdentityPos is the published prefix of an app's id graph file
// (IDGRAPH, and its copy IDGRAPH.COPY): the first Bytes bytes, holding
// the first Ops recorded identity operations (identity.Graph), which
// include every operation of the write-ahead-log records up to LogSeq.
type IdentityPos struct {
	Ops    uint64 `json:"ops"`
	Bytes  int64  `json:"bytes"`
	LogSeq uint64 `json:"log_seq"`
}

// DataVersion returns the data version of a catalog or a version's view
// (App.DataVersion): its generation plus its log position, which both
// only grow, and one of which grows with every change.
func (c *Catalog) DataVersion() int64 { return int64(c.Generation + c.LogSeq) }

// MaxShards is the largest shard count of an app.
const MaxShards = 1024

// Rows returns the number of rows in the segments of the given kind.
func (c *Catalog) Rows(kind SegmentKind) int64 {
	var n int64
	for _, s := range c.Segments {
		if s.Kind == kind {
			n += s.Rows
		}
	}
	return n
}

// TimeRange returns the earliest and latest row time (UTC µs) over the
// segments of the given kind; ok is false when there are none.
func (c *Catalog) TimeRange(kind SegmentKind) (lo, hi int64, ok bool) {
	for _, s := range c.Segments {
		if s.Kind != kind {
			continue
		}
		if !ok || s.MinTime < lo {
			lo = s.MinTime
		}
		if !ok || s.MaxTime > hi {
			hi = s.MaxTime
		}
		ok = true
	}
	return lo, hi, ok
}

// Bytes returns the total size of the segment files, bytes.
func (c *Catalog) Bytes() int64 {
	var n int64
	for _, s := range c.Segments {
		n += s.Bytes
	}
	return n
}

// clone returns a copy of c whose slices may be changed.
func (c *Catalog) clone() *Catalog {
	n := *c
	n.EventProps = append([]event.PropType(nil), c.EventProps...)
	n.UserProps = append([]event.PropType(nil), c.UserProps...)
	n.Segments = append([]SegmentRef(nil), c.Segments...)
	n.Deletions = slices.Clip(c.Deletions) // its records are immutable; an append copies
	return &n
}

// Settings are the parts of an app's catalog that cannot be recovered from
// its segments' footers alone: the shard count, the time zone and the
// schema (the footers hold each segment's properties, not the order of
// their first sighting or declared but unused ones). They are kept in a
// second, independently checksummed file (SETTINGS), so that a lost or
// damaged catalog can be rebuilt (App.Recover). LogSeq is the catalog's
// log position (written with every publication that moves it, a flush of
// live events): a rebuilt catalog does not replay the log records its
// segments hold.
type Settings struct {
	App        string           `json:"app"`
	Shards     int              `json:"shards"`
	TZ         string           `json:"tz"`
	EventProps []event.PropType `json:"event_props"`
	UserProps  []event.PropType `json:"user_props"`
	LogSeq     uint64           `json:"log_seq"`
	// DelSalt and Deletions are the catalog's (format version ≥ 4): a
	// rebuilt catalog keeps the deletion requests.
	DelSalt   string     `json:"-"`
	Deletions []Deletion `json:"-"`
	// Retention is Catalog.Retention (0: none).
	Retention time.Duration `json:"retention"`
}

func (c *Catalog) settings() Settings {
	return Settings{App: c.App, Shards: c.Shards, TZ: c.TZ, EventProps: c.EventProps, UserProps: c.UserProps, LogSeq: c.LogSeq,
		DelSalt: c.DelSalt, Deletions: c.Deletions, Retention: c.Retention}
}

func (s *Settings) equal(o *Settings) bool {
	return s.App == o.App && s.Shards == o.Shards && s.TZ == o.TZ && s.LogSeq == o.LogSeq && s.Retention == o.Retention &&
		equalProps(s.EventProps, o.EventProps) && equalProps(s.UserProps, o.UserProps) &&
		s.DelSalt == o.DelSalt && equalDeletions(s.Deletions, o.Deletions)
}

// equalDeletions compares deletion lists by their records' fields.
func equalDeletions(a, b []Deletion) bool {
	return slices.EqualFunc(a, b, func(x, y Deletion) bool {
		return x.Seq == y.Seq && x.ID == y.ID && x.Kind == y.Kind && x.RequestedAt == y.RequestedAt && x.DoneAt == y.DoneAt &&
			x.Suppress == y.Suppress && x.Hash == y.Hash && slices.Equal(x.IDs, y.IDs) && slices.Equal(x.Suppressed, y.Suppressed) &&
			(x.Match == nil) == (y.Match == nil) && (x.Match == nil || *x.Match == *y.Match)
	})
}

func equalProps(a, b []event.PropType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Byte layout of a catalog file (all integers little-endian or LEB128
// varints as encoding/binary writes them, in their shortest form: a longer
// one is corruption; a string is a uvarint length and its bytes):
//
//	magic "SPURCAT\n", u16 format version, u32 body length N
//	body (N bytes):
//	  string app, uvarint generation, uvarint shards, string tz,
//	  varint next seq, uvarint log seq,
//	  props: uvarint count, per property string name, byte type (1..5),
//	    once for event properties, once for user properties
//	  uvarint segment count, per segment:
//	    string file, byte kind (1 events, 2 users), uvarint shard,
//	    varint seq min, varint seq max, uvarint generation,
//	    uvarint rows, uvarint users, varint min time, varint max time,
//	    uvarint bytes, u64 first hash, u64 last hash
//	  (version ≥ 3) uvarint id graph ops, uvarint id graph bytes,
//	    uvarint id graph log seq (IdentityPos)
//	  (version ≥ 4) uvarint retention, nanoseconds (0: none), the
//	    deletions (appendDeletions), then uvarint segment count and per
//	    segment uvarint DelSeq (appendDelSeqs)
//	u32 CRC-32C (Castagnoli) of every byte before it
//
// A settings file has the same frame with magic "SPURSET\n" and a body of
// string app, uvarint shards, string tz, the two property lists,
// (version ≥ 2) uvarint log seq and (version ≥ 4) uvarint retention and
// the deletions.

// maxCatalogBytes bounds a catalog file: larger is corruption (or a store
// no build of Spur writes). 1 GiB holds millions of segments.
const maxCatalogBytes = 1 << 30

func frame(magic string, body []byte) []byte {
	out := make([]byte, 0, len(magic)+6+len(body)+4)
	out = append(out, magic...)
	out = binary.LittleEndian.AppendUint16(out, CatalogFormatVersion)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(body)))
	out = append(out, body...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendProps(b []byte, props []event.PropType) []byte {
	b = binary.AppendUvarint(b, uint64(len(props)))
	for _, p := range props {
		b = appendString(b, p.Name)
		b = append(b, byte(p.Type))
	}
	return b
}

// encodeCatalog returns the catalog file bytes of c.
func encodeCatalog(c *Catalog) []byte {
	var b []byte
	b = appendString(b, c.App)
	b = binary.AppendUvarint(b, c.Generation)
	b = binary.AppendUvarint(b, uint64(c.Shards))
	b = appendString(b, c.TZ)
	b = binary.AppendVarint(b, c.NextSeq)
	b = binary.AppendUvarint(b, c.LogSeq)
	b = appendProps(b, c.EventProps)
	b = appendProps(b, c.UserProps)
	b = binary.AppendUvarint(b, uint64(len(c.Segments)))
	for i := range c.Segments {
		s := &c.Segments[i]
		b = appendString(b, s.File)
		b = append(b, byte(s.Kind))
		b = binary.AppendUvarint(b, uint64(s.Shard))
		b = binary.AppendVarint(b, s.SeqMin)
		b = binary.AppendVarint(b, s.SeqMax)
		b = binary.AppendUvarint(b, s.Generation)
		b = binary.AppendUvarint(b, uint64(s.Rows))
		b = binary.AppendUvarint(b, uint64(s.Users))
		b = binary.AppendVarint(b, s.MinTime)
		b = binary.AppendVarint(b, s.MaxTime)
		b = binary.AppendUvarint(b, uint64(s.Bytes))
		b = binary.LittleEndian.AppendUint64(b, s.FirstHash)
		b = binary.LittleEndian.AppendUint64(b, s.LastHash)
	}
	b = binary.AppendUvarint(b, c.Identity.Ops)
	b = binary.AppendUvarint(b, uint64(c.Identity.Bytes))
	b = binary.AppendUvarint(b, c.Identity.LogSeq)
	b = binary.AppendUvarint(b, uint64(c.Retention))
	b = appendDeletions(b, c.DelSalt, c.Deletions)
	b = appendDelSeqs(b, c.Segments)
	return frame(catalogMagic, b)
}

// encodeSettings returns the settings file bytes of s.
func encodeSettings(s *Settings) []byte {
	var b []byte
	b = appendString(b, s.App)
	b = binary.AppendUvarint(b, uint64(s.Shards))
	b = appendString(b, s.TZ)
	b = appendProps(b, s.EventProps)
	b = appendProps(b, s.UserProps)
	b = binary.AppendUvarint(b, s.LogSeq)
	b = binary.AppendUvarint(b, uint64(s.Retention))
	b = appendDeletions(b, s.DelSalt, s.Deletions)
	return frame(settingsMagic, b)
}

// catalogDecoder reads a frame's body strictly (bin.Decoder: every read
// checks the bytes left, varints are in their shortest form, and the
// first failure sticks, a *CorruptionError at the file offset of the
// field being read).
type catalogDecoder struct {
	bin.Decoder
	version uint16 // the file's format version
}

// str reads a length-prefixed string of what, at most maxLen bytes of
// valid UTF-8 (a copy).
func (d *catalogDecoder) str(what string, maxLen int) string {
	at := d.Pos()
	b := d.Bytes(what)
	if d.Err() != nil {
		return ""
	}
	if len(b) > maxLen {
		d.FailAt(at, "%s length %d exceeds %d", what, len(b), maxLen)
		return ""
	}
	if !utf8.Valid(b) {
		d.FailAt(at, "%s is not valid UTF-8", what)
		return ""
	}
	return string(b)
}

// props reads a property list (its count, then per property a name and a
// type byte), failing on an empty or repeated name or a type outside
// 1..5.
func (d *catalogDecoder) props(what string) []event.PropType {
	n := d.Count(what+" count", 2, math.MaxInt)
	props := make([]event.PropType, 0, n)
	seen := make(map[string]bool, n)
	for range n {
		at := d.Pos()
		name := d.str(what+" name", event.MaxPropNameBytes)
		t := event.Type(d.U8())
		if d.Err() != nil {
			return nil
		}
		switch {
		case name == "":
			d.FailAt(at, "empty %s name", what)
		case seen[name]:
			d.FailAt(at, "%s %q listed twice", what, name)
		case t < event.TypeString || t > event.TypeTime:
			d.FailAt(d.Pos()-1, "%s %q has type %d, want 1..5", what, name, t)
		}
		seen[name] = true
		props = append(props, event.PropType{Name: name, Type: t})
	}
	return props
}

// openFrame checks a file's frame (magic, version, length, CRC) and
// returns a decoder over its body.
func openFrame(path, magic string, b []byte) (*catalogDecoder, error) {
	hdr := len(magic) + 6
	if len(b) < hdr+4 || string(b[:len(magic)]) != magic {
		return nil, &CorruptionError{Path: path, Offset: 0, Msg: fmt.Sprintf("not a %q file (%d bytes)", strings.TrimSpace(magic), len(b))}
	}
	v := binary.LittleEndian.Uint16(b[len(magic):])
	if v == 0 || v > CatalogFormatVersion {
		// A version byte flipped to a larger value also lands here; the
		// CRC decides which it is.
		if crc32.Checksum(b[:len(b)-4], castagnoli) == binary.LittleEndian.Uint32(b[len(b)-4:]) && v > CatalogFormatVersion {
			return nil, fmt.Errorf("%s: format version %d: %w (this build reads up to version %d)", path, v, ErrUnsupportedVersion, CatalogFormatVersion)
		}
		return nil, &CorruptionError{Path: path, Offset: int64(len(magic)), Msg: fmt.Sprintf("format version %d with a bad checksum", v)}
	}
	n := binary.LittleEndian.Uint32(b[len(magic)+2:])
	if uint64(n) != uint64(len(b)-hdr-4) {
		return nil, &CorruptionError{Path: path, Offset: int64(len(magic) + 2), Msg: fmt.Sprintf("body length %d, but the file holds %d", n, len(b)-hdr-4)}
	}
	if got, want := crc32.Checksum(b[:len(b)-4], castagnoli), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, &CorruptionError{Path: path, Offset: int64(len(b) - 4), Msg: fmt.Sprintf("checksum mismatch: stored %08x, computed %08x", want, got)}
	}
	d := &catalogDecoder{Decoder: bin.NewDecoder(b[hdr:len(b)-4], int64(hdr)), version: v}
	d.Path = path
	return d, nil
}

// done fails if bytes are left after the last field, and returns the
// first failure or nil.
func (d *catalogDecoder) done() error {
	if d.Err() == nil && d.Left() != 0 {
		d.Fail("%d unexpected bytes after the last field", d.Left())
	}
	if err := d.Err(); err != nil {
		return err
	}
	return nil
}

// retention reads the retention of a version 4 file (0 before: none),
// failing on one beyond time.Duration's range.
func (d *catalogDecoder) retention() time.Duration {
	if d.version < 4 {
		return 0
	}
	at := d.Pos()
	n := d.Uvarint()
	if d.Err() == nil && n > math.MaxInt64 {
		d.FailAt(at, "retention of %d ns is out of range", n)
	}
	return time.Duration(n)
}

// validShards reports whether n is a power of two in [1, MaxShards].
func validShards(n uint64) bool { return n >= 1 && n <= MaxShards && bits.OnesCount64(n) == 1 }

// checkTZ checks an app time zone name: "" (UTC) or a zone
// time.LoadLocation knows, not "Local".
func checkTZ(tz string) error {
	if tz == "" {
		return nil
	}
	if tz == "Local" {
		return fmt.Errorf("time zone %q is not an IANA name", tz)
	}
	_, err := time.LoadLocation(tz)
	return err
}

// decodeCatalog decodes and checks a catalog file (path names it in
// errors). Errors match ErrCorruption (with the offset of the damaged
// field) or ErrUnsupportedVersion.
func decodeCatalog(path string, b []byte) (*Catalog, error) {
	if len(b) > maxCatalogBytes {
		return nil, &CorruptionError{Path: path, Msg: fmt.Sprintf("%d bytes, more than a catalog holds", len(b))}
	}
	d, err := openFrame(path, catalogMagic, b)
	if err != nil {
		return nil, err
	}
	c := &Catalog{}
	at := d.Pos()
	c.App = d.str("app name", 64)
	if d.Err() == nil && !ValidAppName(c.App) {
		d.FailAt(at, "invalid app name %q", c.App)
	}
	c.Generation = d.Uvarint()
	at = d.Pos()
	shards := d.Uvarint()
	if d.Err() == nil && !validShards(shards) {
		d.FailAt(at, "shard count %d is not a power of two in [1, %d]", shards, MaxShards)
	}
	c.Shards = int(shards)
	at = d.Pos()
	c.TZ = d.str("time zone", 256)
	if d.Err() == nil {
		if err := checkTZ(c.TZ); err != nil {
			d.FailAt(at, "time zone: %v", err)
		}
	}
	at = d.Pos()
	c.NextSeq = d.Varint()
	if d.Err() == nil && c.NextSeq < 0 {
		d.FailAt(at, "negative next seq %d", c.NextSeq)
	}
	c.LogSeq = d.Uvarint()
	c.EventProps = d.props("event property")
	c.UserProps = d.props("user property")
	n := d.Count("segment count", 40, math.MaxInt)
	c.Segments = make([]SegmentRef, 0, n)
	files := make(map[string]bool, n)
	for range n {
		if d.Err() != nil {
			break
		}
		var s SegmentRef
		at := d.Pos()
		s.File = d.str("segment file name", 255)
		if d.Err() == nil && (!validSegmentName(s.File) || files[s.File]) {
			d.FailAt(at, "bad or repeated segment file name %q", s.File)
		}
		files[s.File] = true
		at = d.Pos()
		s.Kind = SegmentKind(d.U8())
		if d.Err() == nil && s.Kind != KindEvents && s.Kind != KindUsers {
			d.FailAt(at, "segment %s: kind %d, want 1 (events) or 2 (users)", s.File, s.Kind)
		}
		at = d.Pos()
		sh := d.Uvarint()
		if d.Err() == nil && sh >= uint64(c.Shards) {
			d.FailAt(at, "segment %s: shard %d out of range [0, %d)", s.File, sh, c.Shards)
		}
		s.Shard = int(sh)
		at = d.Pos()
		s.SeqMin, s.SeqMax = d.Varint(), d.Varint()
		if d.Err() == nil && (s.SeqMin < 0 || s.SeqMin > s.SeqMax || s.SeqMax >= c.NextSeq) {
			d.FailAt(at, "segment %s: arrival range [%d, %d] outside [0, next seq %d)", s.File, s.SeqMin, s.SeqMax, c.NextSeq)
		}
		at = d.Pos()
		s.Generation = d.Uvarint()
		if d.Err() == nil && s.Generation > c.Generation {
			d.FailAt(at, "segment %s: generation %d after the catalog's %d", s.File, s.Generation, c.Generation)
		}
		at = d.Pos()
		rows, users := d.Uvarint(), d.Uvarint()
		if d.Err() == nil && (rows == 0 || rows > math.MaxInt64 || users == 0 || users > rows) {
			d.FailAt(at, "segment %s: %d users in %d rows", s.File, users, rows)
		}
		s.Rows, s.Users = int64(rows), int64(users)
		at = d.Pos()
		s.MinTime, s.MaxTime = d.Varint(), d.Varint()
		if d.Err() == nil && s.MinTime > s.MaxTime {
			d.FailAt(at, "segment %s: time range [%d, %d] is reversed", s.File, s.MinTime, s.MaxTime)
		}
		at = d.Pos()
		size := d.Uvarint()
		if d.Err() == nil && (size == 0 || size > math.MaxInt64) {
			d.FailAt(at, "segment %s: size %d bytes", s.File, size)
		}
		s.Bytes = int64(size)
		s.FirstHash, s.LastHash = d.U64(), d.U64()
		if d.Err() == nil && s.FirstHash > s.LastHash {
			d.FailAt(d.Pos()-16, "segment %s: hash range [%x, %x] is reversed", s.File, s.FirstHash, s.LastHash)
		}
		c.Segments = append(c.Segments, s)
	}
	if d.version >= 3 {
		c.Identity.Ops = d.Uvarint()
		at = d.Pos()
		n := d.Uvarint()
		if d.Err() == nil && (n > math.MaxInt64 || n < c.Identity.Ops) {
			d.FailAt(at, "id graph of %d bytes holding %d operations", n, c.Identity.Ops)
		}
		c.Identity.Bytes = int64(n)
		c.Identity.LogSeq = d.Uvarint()
	}
	c.Retention = d.retention()
	if d.version >= 4 {
		c.DelSalt, c.Deletions = d.deletions()
		d.delSeqs(c.Segments, lastDeletion(c.Deletions))
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	if err := checkSeqRanges(c.Segments); err != nil {
		d.FailAt(0, "%v", err)
		return nil, d.done()
	}
	return c, nil
}

// checkSeqRanges checks that the segments of one shard and kind have
// disjoint arrival ranges, except segments written together by one
// compaction (equal ranges, disjoint user-hash ranges).
func checkSeqRanges(segs []SegmentRef) error {
	type key struct {
		kind  SegmentKind
		shard int
	}
	last := map[key]SegmentRef{}
	for _, s := range segs {
		k := key{s.Kind, s.Shard}
		p, ok := last[k]
		if ok && (s.SeqMin <= p.SeqMax) && !(s.SeqMin == p.SeqMin && s.SeqMax == p.SeqMax && s.FirstHash > p.LastHash) {
			return fmt.Errorf("segments %s and %s of %s shard %d overlap in arrival order ([%d, %d] and [%d, %d])",
				p.File, s.File, s.Kind, s.Shard, p.SeqMin, p.SeqMax, s.SeqMin, s.SeqMax)
		}
		last[k] = s
	}
	return nil
}

// decodeSettings decodes and checks a settings file, as decodeCatalog.
func decodeSettings(path string, b []byte) (*Settings, error) {
	if len(b) > maxCatalogBytes {
		return nil, &CorruptionError{Path: path, Msg: fmt.Sprintf("%d bytes, more than a settings file holds", len(b))}
	}
	d, err := openFrame(path, settingsMagic, b)
	if err != nil {
		return nil, err
	}
	s := &Settings{}
	at := d.Pos()
	s.App = d.str("app name", 64)
	if d.Err() == nil && !ValidAppName(s.App) {
		d.FailAt(at, "invalid app name %q", s.App)
	}
	at = d.Pos()
	shards := d.Uvarint()
	if d.Err() == nil && !validShards(shards) {
		d.FailAt(at, "shard count %d is not a power of two in [1, %d]", shards, MaxShards)
	}
	s.Shards = int(shards)
	at = d.Pos()
	s.TZ = d.str("time zone", 256)
	if d.Err() == nil {
		if err := checkTZ(s.TZ); err != nil {
			d.FailAt(at, "time zone: %v", err)
		}
	}
	s.EventProps = d.props("event property")
	s.UserProps = d.props("user property")
	if d.version >= 2 {
		s.LogSeq = d.Uvarint()
	}
	s.Retention = d.retention()
	if d.version >= 4 {
		s.DelSalt, s.Deletions = d.deletions()
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return s, nil
}

// SegmentsOf returns the segments of the given kind, in catalog order
// (newly allocated).
func (c *Catalog) SegmentsOf(kind SegmentKind) []SegmentRef {
	var out []SegmentRef
	for _, s := range c.Segments {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}
